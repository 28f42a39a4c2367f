"""`__share_group_state` as auto topic creation asks the controller for it (Kafka's shareGroupStateTopicConfigs)."""
from typing import Any

import pytest
import trio
from kafka.protocol.admin.topics import CreateTopicsResponse

from minikafka.broker.metadata.metadata_cache import is_internal
from minikafka.broker.server.auto_topic_creation import AutoTopicCreationManager
from minikafka.config import BrokerConfig
from minikafka.protocol.internal_topics import SHARE_GROUP_STATE_TOPIC


class _Forwarding:
    """Records the CreateTopics request the manager forwards and answers it created."""

    def __init__(self) -> None:
        self.requests: list[Any] = []

    async def forward(self, request: Any, version: int) -> Any:
        self.requests.append(request)
        R = CreateTopicsResponse[version]
        return R(throttle_time_ms=0, topics=[R.CreatableTopicResult(
            name=t.name, topic_id=None, error_code=0, error_message=None, num_partitions=t.num_partitions,
            replication_factor=t.replication_factor, configs=[]) for t in request.topics])


def _create(overrides: dict[str, object], alive: int) -> Any:
    forwarding = _Forwarding()
    manager = AutoTopicCreationManager(BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:0", **overrides}),
                                       forwarding, lambda: alive)  # type: ignore[arg-type]
    assert trio.run(manager.create_topics, [SHARE_GROUP_STATE_TOPIC], True) == {}
    (topic,) = forwarding.requests[0].topics
    return topic.num_partitions, topic.replication_factor, {c.name: c.value for c in topic.configs}


def test_defaults_on_three_brokers() -> None:
    assert _create({}, alive=3) == (50, 3, {
        "cleanup.policy": "delete", "compression.type": "producer", "retention.ms": "-1",
        "min.insync.replicas": "2", "segment.bytes": "104857600"})


@pytest.mark.parametrize("alive", [1, 2])
def test_replication_and_min_isr_clamped_to_live_brokers(alive: int) -> None:
    partitions, replication_factor, configs = _create({"share.coordinator.state.topic.num.partitions": 7}, alive)
    assert (partitions, replication_factor, configs["min.insync.replicas"]) == (7, alive, str(min(2, alive)))


def test_share_group_state_is_internal() -> None:
    assert is_internal(SHARE_GROUP_STATE_TOPIC)
