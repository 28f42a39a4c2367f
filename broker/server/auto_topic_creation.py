"""Topics created because a client asked for them (Kafka's AutoTopicCreationManager): a Metadata request naming
an unknown topic when auto.create.topics.enable allows it, and the coordinator's internal `__consumer_offsets`
the first time a group looks up its coordinator.

Creation goes to the controller as a CreateTopics request with this broker's settings (num.partitions and
default.replication.factor; offsets.topic.num.partitions, offsets.topic.replication.factor and compaction for
`__consumer_offsets`), and the broker waits until it has replayed the result, so the request that caused it is
answered with the new topic. The controller refuses a replication factor above the brokers it has, as Kafka does.
"""
from __future__ import annotations

import logging

from kafka.protocol.admin.topics import CreateTopicsRequest

from minikafka.broker.server.forwarding import ForwardingError, ForwardingManager
from minikafka.config import BrokerConfig
from minikafka.protocol.errors import ErrorCode
from minikafka.protocol.internal_topics import GROUP_METADATA_TOPIC

log = logging.getLogger("minikafka.auto_topic_creation")

CREATE_TOPICS_VERSION = 7
OFFSETS_TOPIC_CONFIGS = {"cleanup.policy": "compact"}


class AutoTopicCreationManager:
    def __init__(self, config: BrokerConfig, forwarding: ForwardingManager) -> None:
        self._config = config
        self._forwarding = forwarding

    async def create_topics(self, names: list[str], internal: bool = False) -> dict[str, ErrorCode]:
        """Create `names`; the error of each that could not be created (a topic that now exists, made by this
        call or another, is no error). `internal` creations happen whatever auto.create.topics.enable says."""
        if not names:
            return {}
        if not internal and not self._config.get("auto.create.topics.enable"):
            return dict.fromkeys(names, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        R = CreateTopicsRequest[CREATE_TOPICS_VERSION]
        topics = []
        for name in names:
            num_partitions, replication_factor, configs = self._settings(name)
            topics.append(R.CreatableTopic(name=name, num_partitions=num_partitions,
                                           replication_factor=replication_factor, assignments=[],
                                           configs=[R.CreatableTopic.CreatableTopicConfig(name=k, value=v)
                                                    for k, v in configs.items()]))
        request = R(topics=topics, timeout_ms=self._config.get("request.timeout.ms"), validate_only=False)
        try:
            response = await self._forwarding.forward(request, CREATE_TOPICS_VERSION)
        except ForwardingError as exc:
            log.warning("auto-creation of %s failed: %s", ", ".join(names), exc)
            return dict.fromkeys(names, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        errors: dict[str, ErrorCode] = {}
        for result in response.topics:
            code = ErrorCode(result.error_code)
            if code == ErrorCode.NONE:
                log.info("auto-created topic %s", result.name)
            elif code != ErrorCode.TOPIC_ALREADY_EXISTS:
                log.warning("auto-creation of topic %s refused: %s %s", result.name, code.name,
                            result.error_message or "")
                errors[result.name] = code
        return errors

    def _settings(self, name: str) -> tuple[int, int, dict[str, str]]:
        if name == GROUP_METADATA_TOPIC:
            return (self._config.get("offsets.topic.num.partitions"),
                    self._config.get("offsets.topic.replication.factor"), dict(OFFSETS_TOPIC_CONFIGS))
        return self._config.get("num.partitions"), self._config.get("default.replication.factor"), {}
