"""Topics created because a client asked for them (Kafka's AutoTopicCreationManager): a Metadata request naming
an unknown topic when auto.create.topics.enable allows it, and the coordinators' internal `__consumer_offsets`
and `__transaction_state` the first time a group or a transactional id looks up its coordinator, and
`__share_group_state` (share.coordinator.state.topic.* settings, delete policy) when share state first needs it.

Creation goes to the controller as a CreateTopics request with this broker's settings (num.partitions and
default.replication.factor; the offsets.topic.* settings, compaction and the producer's compression for
`__consumer_offsets`, as Kafka's groupMetadataTopicConfigs; the transaction.state.log.* settings, compaction and no
compression for `__transaction_state`, as Kafka's transactionTopicConfigs), and the broker waits until it has
replayed the result, so the request that caused it is answered with the new topic. The controller refuses a
replication factor above the brokers it has, as Kafka does; `__transaction_state` asks for no more replicas than
there are live brokers (and a min.insync.replicas no larger than that), so one broker serves transactions with
Kafka's defaults.
"""
from __future__ import annotations

import logging
from collections.abc import Callable

from kafka.protocol.admin.topics import CreateTopicsRequest

from minikafka.broker.server.forwarding import ForwardingError, ForwardingManager
from minikafka.config import BrokerConfig
from minikafka.protocol.errors import ErrorCode
from minikafka.protocol.internal_topics import (
    GROUP_METADATA_TOPIC,
    SHARE_GROUP_STATE_TOPIC,
    TRANSACTION_STATE_TOPIC,
)

log = logging.getLogger("minikafka.auto_topic_creation")

CREATE_TOPICS_VERSION = 7


class AutoTopicCreationManager:
    def __init__(self, config: BrokerConfig, forwarding: ForwardingManager, alive_brokers: Callable[[], int]) -> None:
        self._config = config
        self._forwarding = forwarding
        self._alive_brokers = alive_brokers

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
                    self._config.get("offsets.topic.replication.factor"), {
                        "cleanup.policy": "compact", "compression.type": "producer",
                        "segment.bytes": str(self._config.get("offsets.topic.segment.bytes"))})
        if name == TRANSACTION_STATE_TOPIC:
            replication_factor = max(1, min(self._config.get("transaction.state.log.replication.factor"),
                                            self._alive_brokers()))
            return (self._config.get("transaction.state.log.num.partitions"), replication_factor, {
                "cleanup.policy": "compact", "compression.type": "uncompressed",
                "min.insync.replicas": str(min(self._config.get("transaction.state.log.min.isr"), replication_factor)),
                "segment.bytes": str(self._config.get("transaction.state.log.segment.bytes")),
                "unclean.leader.election.enable": "false"})
        if name == SHARE_GROUP_STATE_TOPIC:
            # Kafka's shareGroupStateTopicConfigs: the share coordinator prunes the log itself (delete, kept
            # forever otherwise), clamped like `__transaction_state`.
            replication_factor = max(1, min(self._config.get("share.coordinator.state.topic.replication.factor"),
                                            self._alive_brokers()))
            min_isr = min(self._config.get("share.coordinator.state.topic.min.isr"), replication_factor)
            return (self._config.get("share.coordinator.state.topic.num.partitions"), replication_factor, {
                "cleanup.policy": "delete", "compression.type": "producer", "retention.ms": "-1",
                "min.insync.replicas": str(min_isr),
                "segment.bytes": str(self._config.get("share.coordinator.state.topic.segment.bytes"))})
        return self._config.get("num.partitions"), self._config.get("default.replication.factor"), {}
