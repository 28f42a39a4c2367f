"""Partition reassignments on the quorum controller (KIP-455): starting one writes the target plus the replicas
it removes with adding and removing set; the ISR change that brings the last target replica in completes it
(electing a new leader when the old one is removed); a cancel goes back; Kafka's per-partition errors; and an
ongoing reassignment survives a controller restart, as the metadata log replays it. Then the two APIs as the
controller serves them, through the wire encoding, v0 and v1; and in ZooKeeper mode the LeaderAndIsr and
StopReplica requests the move makes the controller send.
"""
from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.admin.topics import AlterPartitionReassignmentsRequest, ListPartitionReassignmentsRequest

from minikafka.broker.controller.controller_apis import ControllerApis
from minikafka.broker.controller.partition_reassignment import ReassignablePartition
from minikafka.broker.controller.quorum_controller import QuorumController, TopicIsrChanges
from minikafka.broker.controller.replication_control import IsrChange
from minikafka.broker.metadata.metadata_image import MetadataChange, MetadataImage
from minikafka.broker.zk.controller.controller_channel_manager import ControllerBrokerRequestBatch
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.protocol.metadata_records import (
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
)

from .test_quorum_controller import Controllers, create, fence, join, state


@pytest.fixture
def controllers(tmp_path: Path) -> Iterator[Controllers]:
    opened = Controllers(tmp_path / "metadata")
    yield opened
    for controller in opened.open:
        controller.close()


async def four_brokers_and_a_topic(controllers: Controllers, **overrides: Any) -> QuorumController:
    """Brokers 1-4 and topic "orders" with one partition on [1, 2, 3], led by 1."""
    controller = controllers.start(**overrides)
    for broker_id in (1, 2, 3, 4):
        await join(controller, broker_id)
    await create(controller, "orders", {0: [1, 2, 3]})
    return controller


async def reassign(controller: QuorumController, replicas: list[int] | None, topic: str = "orders",
                   index: int = 0, allow_replication_factor_change: bool = True) -> KafkaError | None:
    (result,) = await controller.alter_partition_reassignments([ReassignablePartition(topic, index, replicas)],
                                                               allow_replication_factor_change)
    return result


async def alter_isr(controller: QuorumController, isr: list[int]) -> tuple[ErrorCode, Any]:
    current = state(controller, "orders")
    broker_epoch = controller.image.brokers[current.leader].broker_epoch
    ((result,),) = await controller.alter_partition(current.leader, broker_epoch, [TopicIsrChanges(
        "orders", None, [IsrChange(0, current.leader_epoch, current.partition_epoch, [(b, -1) for b in isr])])])
    return result.error, result.state


def ongoing(controller: QuorumController) -> list[tuple[str, int, list[int], list[int], list[int]]]:
    return [(o.topic, o.index, o.replicas, o.adding_replicas, o.removing_replicas)
            for o in controller.list_partition_reassignments(None)]


async def test_a_reassignment_adds_the_new_replicas_then_completes_when_they_are_in_sync(
        controllers: Controllers) -> None:
    controller = await four_brokers_and_a_topic(controllers)
    before = state(controller, "orders")
    assert await reassign(controller, [2, 3, 4]) is None
    moving = state(controller, "orders")
    assert (moving.replicas, moving.adding_replicas, moving.removing_replicas) == ([2, 3, 4, 1], [4], [1])
    assert (moving.leader, moving.leader_epoch, moving.isr) == (1, before.leader_epoch, [1, 2, 3])
    assert ongoing(controller) == [("orders", 0, [2, 3, 4, 1], [4], [1])]
    assert controller.list_partition_reassignments([("orders", [0, 7]), ("nope", [0])])[0].index == 0
    error, answer = await alter_isr(controller, [1, 2, 3, 4])  # broker 4 caught up: the leader adds it
    assert error is ErrorCode.NEW_LEADER_ELECTED and answer is None  # the leader was removed
    done = state(controller, "orders")
    assert (done.replicas, done.isr, done.adding_replicas, done.removing_replicas) == ([2, 3, 4], [2, 3, 4], [], [])
    assert (done.leader, done.leader_epoch) == (2, before.leader_epoch + 1)
    assert ongoing(controller) == []


async def test_a_reassignment_waits_for_every_new_replica(controllers: Controllers) -> None:
    controller = await four_brokers_and_a_topic(controllers)
    await join(controller, 5)
    assert await reassign(controller, [3, 4, 5]) is None
    assert state(controller, "orders").replicas == [3, 4, 5, 1, 2]
    error, answer = await alter_isr(controller, [1, 2, 3, 4])
    assert error is ErrorCode.NONE and answer.isr == [1, 2, 3, 4] and answer.adding_replicas == [4, 5]
    error, _ = await alter_isr(controller, [1, 2, 3, 4, 5])
    assert error is ErrorCode.NEW_LEADER_ELECTED
    assert (state(controller, "orders").replicas, state(controller, "orders").leader) == ([3, 4, 5], 3)


async def test_dropping_a_follower_keeps_the_leader_with_a_new_epoch(controllers: Controllers) -> None:
    controller = await four_brokers_and_a_topic(controllers)
    before = state(controller, "orders")
    assert await reassign(controller, [1, 2]) is None  # nothing to add: complete at once
    after = state(controller, "orders")
    assert (after.replicas, after.isr, after.leader, after.adding_replicas, after.removing_replicas) == \
        ([1, 2], [1, 2], 1, [], [])
    assert after.leader_epoch == before.leader_epoch + 1  # broker 3's fetches are fenced


async def test_reordering_replicas_completes_at_once_keeping_the_leader(controllers: Controllers) -> None:
    controller = await four_brokers_and_a_topic(controllers)
    before = state(controller, "orders")
    assert await reassign(controller, [3, 2, 1]) is None
    after = state(controller, "orders")
    assert (after.replicas, after.leader, after.leader_epoch) == ([3, 2, 1], 1, before.leader_epoch)
    assert await reassign(controller, [3, 2, 1]) is None and state(controller, "orders") == after  # no change


async def test_a_cancel_goes_back_to_the_original_replicas(controllers: Controllers) -> None:
    controller = await four_brokers_and_a_topic(controllers)
    await reassign(controller, [2, 3, 4])
    await alter_isr(controller, [1, 2, 3])  # no change: still waiting for 4
    assert await reassign(controller, None) is None
    back = state(controller, "orders")
    # The original replicas, in the order the reassignment listed them (as Kafka: the target order is kept).
    assert (back.replicas, back.isr, back.leader, back.adding_replicas, back.removing_replicas) == \
        ([2, 3, 1], [1, 2, 3], 1, [], [])
    assert ongoing(controller) == []
    error = await reassign(controller, None)
    assert error is not None and error.code is ErrorCode.NO_REASSIGNMENT_IN_PROGRESS


async def test_a_new_target_replaces_an_ongoing_reassignment(controllers: Controllers) -> None:
    controller = await four_brokers_and_a_topic(controllers)
    await join(controller, 5)
    await reassign(controller, [2, 3, 4])
    assert await reassign(controller, [2, 3, 5]) is None
    moving = state(controller, "orders")
    assert (moving.replicas, moving.adding_replicas, moving.removing_replicas) == ([2, 3, 5, 1, 4], [5], [1, 4])


async def test_a_fenced_target_broker_keeps_the_reassignment_going(controllers: Controllers) -> None:
    controller = await four_brokers_and_a_topic(controllers)
    await fence(controller, 4)
    assert await reassign(controller, [2, 3, 4]) is None  # registered is enough, as in Kafka
    error, _ = await alter_isr(controller, [1, 2, 3, 4])
    assert error is ErrorCode.INELIGIBLE_REPLICA
    assert state(controller, "orders").adding_replicas == [4]


@pytest.mark.parametrize(("topic", "index", "replicas", "code"), [
    ("nope", 0, [1, 2, 3], ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ("orders", 5, [1, 2, 3], ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ("orders", 0, [], ErrorCode.INVALID_REPLICA_ASSIGNMENT),
    ("orders", 0, [2, 2, 3], ErrorCode.INVALID_REPLICA_ASSIGNMENT),
    ("orders", 0, [2, 3, 9], ErrorCode.INVALID_REPLICA_ASSIGNMENT),
])
async def test_errors_are_per_partition(controllers: Controllers, topic: str, index: int, replicas: list[int],
                                        code: ErrorCode) -> None:
    controller = await four_brokers_and_a_topic(controllers)
    errors = await controller.alter_partition_reassignments([ReassignablePartition(topic, index, replicas),
                                                             ReassignablePartition("orders", 0, [2, 3, 4])])
    assert errors[0] is not None and errors[0].code is code and errors[1] is None
    assert state(controller, "orders").adding_replicas == [4]


async def test_a_replication_factor_change_may_be_refused(controllers: Controllers) -> None:
    controller = await four_brokers_and_a_topic(controllers)
    error = await reassign(controller, [1, 2, 3, 4], allow_replication_factor_change=False)
    assert error is not None and error.code is ErrorCode.INVALID_REPLICATION_FACTOR
    assert await reassign(controller, [2, 3, 4], allow_replication_factor_change=False) is None


async def test_a_cancel_keeps_the_original_replicas_still_in_sync(controllers: Controllers) -> None:
    controller = await four_brokers_and_a_topic(controllers)
    await reassign(controller, [2, 3, 4])
    await alter_isr(controller, [1, 2, 3, 4])  # completes: the ISR is [2, 3, 4]
    await reassign(controller, [1, 2])  # adds 1 back; ISR [2] once 3 and 4 are fenced
    await fence(controller, 3)
    await fence(controller, 4)
    assert state(controller, "orders").isr == [2]
    error = await reassign(controller, None)  # going back to [2, 3, 4] keeps 2: clean
    assert error is None and state(controller, "orders").replicas == [2, 3, 4]


async def test_an_ongoing_reassignment_survives_a_controller_restart(controllers: Controllers) -> None:
    controller = await four_brokers_and_a_topic(controllers)
    await reassign(controller, [2, 3, 4])
    restarted = controllers.restart(controller)
    moving = state(restarted, "orders")
    assert (moving.replicas, moving.adding_replicas, moving.removing_replicas) == ([2, 3, 4, 1], [4], [1])


# ---- AlterPartitionReassignments and ListPartitionReassignments as the controller serves them ----------------------


def alter_request(version: int, *partitions: tuple[str, int, list[int] | None], allow: bool = True) -> Any:
    R = AlterPartitionReassignmentsRequest[version]
    by_topic: dict[str, list[Any]] = {}
    for topic, index, replicas in partitions:
        by_topic.setdefault(topic, []).append(
            R.ReassignableTopic.ReassignablePartition(partition_index=index, replicas=replicas))
    fields = {"allow_replication_factor_change": allow} if version >= 1 else {}
    return R(timeout_ms=1000, topics=[R.ReassignableTopic(name=name, partitions=parts)
                                      for name, parts in by_topic.items()], **fields)


def encoded_round_trip(response: Any, version: int) -> Any:
    """The response as a client decodes it: what the wire carries."""
    return type(response).decode(response.encode(version=version), version=version)


@pytest.mark.parametrize("version", [0, 1])
async def test_the_controller_answers_alter_partition_reassignments_per_partition(
        controllers: Controllers, version: int) -> None:
    apis = ControllerApis(await four_brokers_and_a_topic(controllers))
    request = alter_request(version, ("orders", 0, [2, 3, 4]), ("orders", 1, [1]), ("nope", 0, None))
    response = encoded_round_trip(await apis.handle(request, version, None), version)
    assert response.error_code == ErrorCode.NONE
    assert [(t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in response.responses] == [
        ("orders", [(0, ErrorCode.NONE), (1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]),
        ("nope", [(0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)])]
    listed = await apis.handle(ListPartitionReassignmentsRequest[0](timeout_ms=1000, topics=None), 0, None)
    listed = encoded_round_trip(listed, 0)
    assert [(t.name, [(p.partition_index, p.replicas, p.adding_replicas, p.removing_replicas)
                      for p in t.partitions]) for t in listed.topics] == [("orders", [(0, [2, 3, 4, 1], [4], [1])])]
    R = ListPartitionReassignmentsRequest[0]
    named = await apis.handle(R(timeout_ms=1000, topics=[R.ListPartitionReassignmentsTopics(
        name="orders", partition_indexes=[1])]), 0, None)
    assert named.topics == []


async def test_v1_may_refuse_a_replication_factor_change(controllers: Controllers) -> None:
    apis = ControllerApis(await four_brokers_and_a_topic(controllers))
    response = await apis.handle(alter_request(1, ("orders", 0, [1, 2, 3, 4]), allow=False), 1, None)
    response = encoded_round_trip(response, 1)
    assert response.allow_replication_factor_change is False
    assert response.responses[0].partitions[0].error_code == ErrorCode.INVALID_REPLICATION_FACTOR


# ---- ZooKeeper mode: what the controller tells the brokers ---------------------------------------------------------


def replay(image: MetadataImage, record: Any) -> MetadataChange:
    change = image.replay(record, image.offset + 1)
    assert change is not None
    return change


def test_zookeeper_mode_brokers_learn_the_move_and_removed_replicas_are_stopped_and_deleted() -> None:
    image = MetadataImage()
    for broker_id in (1, 2, 3, 4):
        replay(image, RegisterBrokerRecord(
            broker_id=broker_id, is_migrating_zk_broker=False, incarnation_id=uuid.UUID(int=0),
            broker_epoch=broker_id, end_points=[RegisterBrokerRecord.BrokerEndpoint(
                name="PLAINTEXT", host="127.0.0.1", port=9090 + broker_id, security_protocol=0)],
            features=[], rack=None, fenced=False, in_controlled_shutdown=False))
    topic_id = uuid.uuid4()
    replay(image, TopicRecord(name="orders", topic_id=topic_id))
    replay(image, PartitionRecord(version=0, partition_id=0, topic_id=topic_id, replicas=[1, 2, 3], isr=[1, 2, 3],
                                  removing_replicas=[], adding_replicas=[], leader=1, leader_recovery_state=0,
                                  leader_epoch=0, partition_epoch=0))
    batch = ControllerBrokerRequestBatch(controller_id=2, controller_epoch=1, inter_broker_listener="PLAINTEXT")
    batch.for_failover(image)

    def sent(record: PartitionChangeRecord) -> dict[int, list[tuple[int, Any]]]:
        change = replay(image, record)
        return {b.broker_id: [(r.API_KEY, r) for r, _ in b.requests]
                for b in batch.for_change(image, [record], change, {})}

    started = sent(PartitionChangeRecord(version=0, partition_id=0, topic_id=topic_id, replicas=[2, 3, 4, 1],
                                         adding_replicas=[4], removing_replicas=[1]))
    (state,) = [r for key, r in started[4] if key == ApiKey.LEADER_AND_ISR][0].topic_states[0].partition_states
    assert (state.replicas, state.adding_replicas, state.removing_replicas) == ([2, 3, 4, 1], [4], [1])
    assert all(key != ApiKey.STOP_REPLICA for requests in started.values() for key, _ in requests)
    done = sent(PartitionChangeRecord(version=0, partition_id=0, topic_id=topic_id, replicas=[2, 3, 4], isr=[2, 3, 4],
                                      leader=2, adding_replicas=[], removing_replicas=[]))
    stops = {broker: r for broker, requests in done.items() for key, r in requests if key == ApiKey.STOP_REPLICA}
    assert list(stops) == [1]
    (stopped,) = stops[1].topic_states[0].partition_states
    assert (stops[1].topic_states[0].topic_name, stopped.partition_index, stopped.delete_partition) == \
        ("orders", 0, True)
    assert all(key != ApiKey.LEADER_AND_ISR for key, _ in done[1])  # broker 1 holds no replica any more
