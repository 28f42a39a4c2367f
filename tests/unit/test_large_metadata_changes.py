"""Requests for thousands of partitions. The controller counts a request's records against Kafka's
MAX_RECORDS_PER_USER_OP before it places anything, and refuses what is over it with Kafka's POLICY_VIOLATION; a
broker applies a big change without holding its event loop: new logs are made on worker threads (a leader's with
its first leader epoch), and the change is published in parts before the loader moves on."""
from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from minikafka.broker.controller.cluster_control import BrokerRegistration
from minikafka.broker.controller.controller_config import QuorumControllerConfig
from minikafka.broker.controller.quorum_controller import NewPartitions, QuorumController
from minikafka.broker.controller.replica_placer import StripedReplicaPlacer
from minikafka.broker.controller.replication_control import MAX_RECORDS_PER_USER_OP, NewTopic
from minikafka.broker.faults.disk_quota import DiskQuota
from minikafka.broker.log.log_manager import LOG_CREATION_BATCH, LogManager, NewLog
from minikafka.broker.metadata.metadata_image import BrokerEndpointInfo, MetadataChange, MetadataImage, PartitionInfo
from minikafka.broker.metadata.metadata_loader import MetadataLoader
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.protocol.metadata_records import PartitionRecord, RegisterBrokerRecord, TopicRecord
from minikafka.storage.log_config import LogConfig
from minikafka.storage.metadata_log import MetadataLog
from minikafka.storage.partition_metadata import read_partition_metadata
from tests.unit.test_broker_metadata import NOW, FakeController

CLUSTER = "q1Sh-9_ISia_zwGINzRvyQ"
ABSURD = 16_777_216
EXCESSIVE = "Unable to perform excessively large batch operation."
TOPIC_ID = uuid.UUID("5e1d3c4b-2a19-4f08-8e7d-6c5b4a392817")


class CountingPlacer(StripedReplicaPlacer):
    """The striped placer, remembering the most partitions it was asked to place at once."""

    def __init__(self) -> None:
        super().__init__()
        self.most = 0

    def place(self, brokers: list[int], partitions: int, replication_factor: int) -> list[list[int]]:
        self.most = max(self.most, partitions)
        return super().place(brokers, partitions, replication_factor)


def open_controller(metadata_dir: Path) -> QuorumController:
    opened = QuorumController.open(QuorumControllerConfig(node_id=3000, cluster_id=CLUSTER,
                                                          auto_leader_rebalance_enable=False), metadata_dir)
    opened.replication._placer = CountingPlacer()
    return opened


@pytest.fixture
def controller(tmp_path: Path) -> Iterator[QuorumController]:
    opened = open_controller(tmp_path / "metadata")
    yield opened
    opened.close()


async def three_brokers(controller: QuorumController) -> QuorumController:
    for broker_id in (1, 2, 3):
        epoch = await controller.register_broker(BrokerRegistration(
            broker_id, CLUSTER, uuid.UUID(int=broker_id), [BrokerEndpointInfo("PLAINTEXT", "127.0.0.1", 9090, 0)],
            None))
        reply = await controller.heartbeat(broker_id, epoch, controller.log_end_offset - 1)
        assert not reply.is_fenced
    return controller


def topic(name: str, partitions: int, factor: int = 1, configs: dict[str, str | None] | None = None) -> NewTopic:
    return NewTopic(name, partitions, factor, {}, configs or {})


def outcome(result: object) -> tuple[ErrorCode, str | None]:
    if isinstance(result, KafkaError):
        return result.code, result.message
    return ErrorCode.NONE, None


def most_placed(controller: QuorumController) -> int:
    placer = controller.replication._placer
    assert isinstance(placer, CountingPlacer)
    return placer.most


# ---- the controller's limit ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("validate_only", [True, False])
async def test_an_absurd_partition_count_is_refused_before_anything_is_placed(controller: QuorumController,
                                                                             validate_only: bool) -> None:
    await three_brokers(controller)
    end = controller.log_end_offset
    (result,) = await controller.create_topics([topic("huge", ABSURD)], validate_only=validate_only)
    assert outcome(result) == (ErrorCode.POLICY_VIOLATION, EXCESSIVE)
    assert most_placed(controller) == 0 and "huge" not in controller.image.topics
    assert controller.log_end_offset == end


async def test_the_limit_counts_every_record_a_request_writes(controller: QuorumController) -> None:
    await three_brokers(controller)
    assert MAX_RECORDS_PER_USER_OP == 10_000

    async def checked(*topics: NewTopic) -> list[ErrorCode]:
        return [outcome(r)[0] for r in await controller.create_topics(list(topics), validate_only=True)]

    # One TopicRecord, a ConfigRecord per config and a PartitionRecord per partition.
    assert await checked(topic("at", 9_999)) == [ErrorCode.NONE]
    assert await checked(topic("over", 10_000)) == [ErrorCode.POLICY_VIOLATION]
    assert await checked(topic("at", 9_998, configs={"retention.ms": "1"})) == [ErrorCode.NONE]
    assert await checked(topic("over", 9_998, configs={"retention.ms": "1", "segment.ms": "1000"})) == \
        [ErrorCode.POLICY_VIOLATION]
    assert await checked(topic("a", 4_999), topic("b", 4_999)) == [ErrorCode.NONE, ErrorCode.NONE]


async def test_a_request_over_the_limit_fails_as_a_whole(controller: QuorumController) -> None:
    await three_brokers(controller)
    results = await controller.create_topics([topic("a", 6_000), topic("bad name!", 1), topic("b", 6_000)])
    assert [outcome(r) for r in results] == [(ErrorCode.POLICY_VIOLATION, EXCESSIVE)] * 3
    assert not controller.image.topics


async def test_a_topic_refused_for_its_own_reasons_writes_nothing_to_count(controller: QuorumController) -> None:
    await three_brokers(controller)
    results = await controller.create_topics([topic("four", ABSURD, factor=4), topic("none", 0),
                                              topic("cfg", ABSURD, configs={"retention.ms": "soon"}),
                                              topic("fits", 3)])
    assert [outcome(r)[0] for r in results] == [ErrorCode.INVALID_REPLICATION_FACTOR, ErrorCode.INVALID_PARTITIONS,
                                                ErrorCode.INVALID_CONFIG, ErrorCode.NONE]
    assert len(controller.image.topics["fits"].partitions) == 3 and most_placed(controller) == 3


async def test_adding_too_many_partitions_refuses_that_topic_only(controller: QuorumController) -> None:
    await three_brokers(controller)
    await controller.create_topics([topic("small", 1), topic("other", 1)])
    errors = await controller.create_partitions([NewPartitions("small", ABSURD, None),
                                                 NewPartitions("other", 3, None)])
    assert [outcome(e) for e in errors] == [(ErrorCode.POLICY_VIOLATION, EXCESSIVE), (ErrorCode.NONE, None)]
    assert len(controller.image.topics["small"].partitions) == 1
    assert len(controller.image.topics["other"].partitions) == 3
    assert most_placed(controller) == 2
    (at_limit,) = await controller.create_partitions([NewPartitions("small", 1 + MAX_RECORDS_PER_USER_OP, None)],
                                                     validate_only=True)
    assert at_limit is None


async def test_a_topic_at_the_limit_is_committed_and_replayed_whole(tmp_path: Path) -> None:
    controller = await three_brokers(open_controller(tmp_path / "metadata"))
    try:
        (created,) = await controller.create_topics([topic("wide", MAX_RECORDS_PER_USER_OP - 1, factor=2)])
        assert outcome(created) == (ErrorCode.NONE, None)
        partitions = controller.image.topics["wide"].partitions
        assert sorted(partitions) == list(range(MAX_RECORDS_PER_USER_OP - 1))
        assert all(len(set(p.replicas)) == 2 and p.leader == p.replicas[0] for p in partitions.values())
        end = controller.log_end_offset
    finally:
        controller.close()
    reopened = open_controller(tmp_path / "metadata")
    try:
        assert reopened.log_end_offset == end
        assert reopened.image.topics["wide"].partitions == partitions
    finally:
        reopened.close()


# ---- the broker ----------------------------------------------------------------------------------------------------

async def test_new_logs_are_made_in_batches_across_the_log_dirs(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = LogManager(dirs, 1, CLUSTER, LogConfig(), DiskQuota(dirs))
    count = 2 * LOG_CREATION_BATCH + 7
    new = [NewLog("t", i, TOPIC_ID, {"segment.bytes": "1048576"}, 3 if i % 2 == 0 else None) for i in range(count)]
    try:
        await manager.create_logs(new)
        assert sorted(manager.logs) == [("t", i) for i in range(count)]
        held = [sum(1 for p in d.iterdir() if p.name.startswith("t-")) for d in dirs]
        assert sorted(held) == [count // 2, count - count // 2]
        for i in (0, 1, count - 1):
            the_log = manager.logs[("t", i)]
            assert read_partition_metadata(the_log.dir) == TOPIC_ID.bytes
            assert the_log.config.segment_bytes == 1048576
            assert the_log.leader_epoch_cache.latest_epoch == (3 if i % 2 == 0 else None)
        first = manager.logs[("t", 0)]
        await manager.create_logs([NewLog("t", 0, TOPIC_ID, {}, 4)])  # here already: untouched
        assert manager.logs[("t", 0)] is first and first.leader_epoch_cache.latest_epoch == 3
    finally:
        manager.shutdown({})


def test_a_change_splits_into_parts_that_together_are_the_change() -> None:
    states = {("t", i): PartitionInfo([1], [1], 1, 0, 0) for i in range(45)}
    change = MetadataChange(partitions=dict(states), topic_ids={"t": TOPIC_ID}, topic_configs={"t"},
                            broker_configs={""}, brokers={1})
    parts = list(change.parts(20))
    assert [len(p.partitions) for p in parts] == [20, 20, 5]
    assert {tp: s for p in parts for tp, s in p.partitions.items()} == states
    assert all(p.topic_ids == {"t": TOPIC_ID} for p in parts)
    assert (parts[0].topic_configs, parts[0].broker_configs, parts[0].brokers) == ({"t"}, {""}, {1})
    assert all(not (p.topic_configs or p.broker_configs or p.brokers) for p in parts[1:])
    assert list(change.parts(45)) == [change]


async def test_the_loader_prepares_then_publishes_a_big_change_in_parts_before_moving_on(tmp_path: Path) -> None:
    controller = FakeController(MetadataLog.open(tmp_path, now_ms=NOW))
    controller.append([RegisterBrokerRecord(
        broker_id=1, incarnation_id=uuid.UUID(int=1), broker_epoch=0, features=[], rack=None, fenced=False,
        end_points=[RegisterBrokerRecord.BrokerEndpoint(name="PLAINTEXT", host="127.0.0.1", port=9093,
                                                        security_protocol=0)])])
    loader = MetadataLoader(1, controller, MetadataImage(), max_wait_ms=60_000)
    seen: list[tuple[str, int, int]] = []  # (what, partitions, the loader's next offset then)

    async def prepare(image: MetadataImage, change: MetadataChange) -> None:
        assert len(image.topics["wide"].partitions) == 3000  # the image has the whole batch first
        seen.append(("prepare", len(change.partitions), loader.next_offset))
        await trio.lowlevel.checkpoint()

    def publish(image: MetadataImage, change: MetadataChange) -> None:
        seen.append(("publish", len(change.partitions), loader.next_offset))

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            await nursery.start(loader.run)
            await loader.wait_caught_up()
            loader.install_publisher(publish, prepare)
            controller.append([TopicRecord(name="wide", topic_id=TOPIC_ID)] + [
                PartitionRecord(partition_id=i, topic_id=TOPIC_ID, replicas=[1], isr=[1], leader=1, leader_epoch=0,
                                partition_epoch=0) for i in range(3000)])
            await loader.wait_for(3002)
            nursery.cancel_scope.cancel()
    assert seen[0] == ("prepare", 3000, 1)
    assert seen[1][0] == "publish" and len(seen) > 2
    assert sum(n for what, n, _ in seen if what == "publish") == 3000
    assert {offset for _, _, offset in seen} == {1}  # nothing waiting for offset 3002 woke before the end
    assert loader.next_offset == 3002
    controller.log.close()
