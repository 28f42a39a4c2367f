"""A ZooKeeper-mode broker's handling of its controller's requests, without ZooKeeper: the epoch checks in Kafka's
order, UpdateMetadata into the metadata image and the controller id, LeaderAndIsr leader-epoch fencing."""
from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any

import pytest

from minikafka.broker.metadata.metadata_image import MetadataChange, MetadataImage
from minikafka.broker.zk.zk_broker_metadata import ZkMetadataSource
from minikafka.config import BrokerConfig, ConfigError
from minikafka.protocol.control_plane import LeaderAndIsrRequest, UpdateMetadataRequest
from minikafka.protocol.errors import ErrorCode

TOPIC_ID = uuid.uuid4()


class FakeReplicaManager:
    def __init__(self) -> None:
        self.partitions: dict[tuple[str, int], Any] = {}

    def get_partition(self, topic: str, index: int) -> Any:
        return self.partitions.get((topic, index))


def _source() -> tuple[ZkMetadataSource, FakeReplicaManager, list[MetadataChange]]:
    config = BrokerConfig({"node.id": "1", "zookeeper.connect": "127.0.0.1:1/kafka",
                           "listeners": "PLAINTEXT://127.0.0.1:0"})
    replica_manager = FakeReplicaManager()
    source = ZkMetadataSource(config, lambda _node: False, lambda: replica_manager)  # type: ignore[arg-type,return-value]
    source.zk.broker_epoch = 100
    published: list[MetadataChange] = []

    def publish(_image: MetadataImage, change: MetadataChange) -> None:
        published.append(change)
        for tp, state in change.partitions.items():
            if state is not None:
                replica_manager.partitions[tp] = SimpleNamespace(topic_id=TOPIC_ID, leader_epoch=state.leader_epoch,
                                                                 partition_epoch=state.partition_epoch)

    async def prepare(_image: MetadataImage, _change: MetadataChange) -> None:
        return None

    source.install_publisher(publish, prepare)
    return source, replica_manager, published


def _update_metadata(controller_epoch: int, broker_epoch: int = 100, leader: int = 2) -> Any:
    R: Any = UpdateMetadataRequest[7]
    partition = R.UpdateMetadataPartitionState(partition_index=0, controller_epoch=controller_epoch, leader=leader,
                                               leader_epoch=3, isr=[1, 2], zk_version=4, replicas=[1, 2],
                                               offline_replicas=[])
    brokers = [R.UpdateMetadataBroker(id=i, endpoints=[R.UpdateMetadataBroker.UpdateMetadataEndpoint(
        port=9000 + i, host="127.0.0.1", listener="PLAINTEXT", security_protocol=0)], rack=None) for i in (1, 2)]
    return R(controller_id=2, controller_epoch=controller_epoch, broker_epoch=broker_epoch,
             topic_states=[R.UpdateMetadataTopicState(topic_name="t", topic_id=TOPIC_ID,
                                                      partition_states=[partition])],
             live_brokers=brokers)


def _leader_and_isr(controller_epoch: int, leader_epoch: int, partition_epoch: int) -> Any:
    R: Any = LeaderAndIsrRequest[6]
    state = R.LeaderAndIsrPartitionState(partition_index=0, controller_epoch=controller_epoch, leader=1,
                                         leader_epoch=leader_epoch, isr=[1, 2], partition_epoch=partition_epoch,
                                         replicas=[1, 2], adding_replicas=[], removing_replicas=[], is_new=True,
                                         leader_recovery_state=0)
    return R(controller_id=2, controller_epoch=controller_epoch, broker_epoch=100, request_type=1,
             topic_states=[R.LeaderAndIsrTopicState(topic_name="t", topic_id=TOPIC_ID, partition_states=[state])],
             live_leaders=[])


async def test_update_metadata_fills_the_image_and_names_the_controller() -> None:
    source, _rm, published = _source()
    response = await source.handle_from_controller(_update_metadata(5), 7)
    assert response.error_code == ErrorCode.NONE
    assert source.controller_id() == 2 and source.controller_epoch == 5
    assert sorted(source.image.brokers) == [1, 2]
    partition = source.image.topics["t"].partitions[0]
    assert (partition.leader, partition.leader_epoch, partition.partition_epoch) == (2, 3, 4)
    assert published[-1].brokers == {1, 2}


async def test_epochs_are_checked_in_kafkas_order() -> None:
    source, _rm, _published = _source()
    await source.handle_from_controller(_update_metadata(5), 7)
    stale = await source.handle_from_controller(_update_metadata(4, broker_epoch=1), 7)
    assert stale.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
    old_registration = await source.handle_from_controller(_update_metadata(5, broker_epoch=99), 7)
    assert old_registration.error_code == ErrorCode.STALE_BROKER_EPOCH
    unknown_epoch = await source.handle_from_controller(_update_metadata(6, broker_epoch=-1), 7)
    assert unknown_epoch.error_code == ErrorCode.NONE and source.controller_epoch == 6


async def test_leader_and_isr_fences_older_leader_epochs() -> None:
    source, rm, _published = _source()
    source.image.topic_configs["t"] = {}  # read from ZooKeeper at start
    first = await source.handle_from_controller(_leader_and_isr(5, leader_epoch=3, partition_epoch=4), 6)
    assert [p.error_code for t in first.topics for p in t.partition_errors] == [ErrorCode.NONE]
    assert rm.partitions[("t", 0)].leader_epoch == 3
    older = await source.handle_from_controller(_leader_and_isr(5, leader_epoch=2, partition_epoch=9), 6)
    assert [p.error_code for t in older.topics for p in t.partition_errors] == [ErrorCode.STALE_CONTROLLER_EPOCH]
    isr_change = await source.handle_from_controller(_leader_and_isr(5, leader_epoch=3, partition_epoch=5), 6)
    assert [p.error_code for t in isr_change.topics for p in t.partition_errors] == [ErrorCode.NONE]
    assert rm.partitions[("t", 0)].partition_epoch == 5


def test_zookeeper_mode_config() -> None:
    config = BrokerConfig({"zookeeper.connect": "127.0.0.1:2181/kafka"})
    assert config.zookeeper_mode and config.get("zookeeper.session.timeout.ms") == 18000
    with pytest.raises(ConfigError, match="process.roles"):
        BrokerConfig({"zookeeper.connect": "127.0.0.1:2181", "process.roles": "broker", "node.id": "1",
                      "controller.quorum.voters": "3@127.0.0.1:9093"})
    with pytest.raises(ConfigError, match="controller listener"):
        BrokerConfig({"zookeeper.connect": "127.0.0.1:2181",
                      "listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0"})


