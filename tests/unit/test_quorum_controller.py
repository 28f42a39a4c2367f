"""The quorum controller: broker registration, sessions and fencing, Kafka's election rules, AlterPartition,
controlled shutdown, ElectLeaders and the leader rebalance, topic administration with today's errors, producer-id
blocks, and a metadata log that replays to the same image after a clean close or a kill -9.

Each test runs a controller in its own trio loop on a metadata log in the test's tmp dir; where sessions or
intervals matter, trio's MockClock drives them.
"""
from __future__ import annotations

import logging
import os
import select
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from minikafka.broker.controller.cluster_control import BrokerRegistration
from minikafka.broker.controller.configuration_control import APPEND, DELETE, SET, SUBTRACT, ConfigAlteration
from minikafka.broker.controller.controller_config import QuorumControllerConfig
from minikafka.broker.controller.quorum_controller import (
    ConfigResourceAlteration,
    CreatedTopic,
    NewPartitions,
    QuorumController,
    TopicIsrChanges,
)
from minikafka.broker.controller.replica_placer import StripedReplicaPlacer
from minikafka.broker.controller.replication_control import (
    PREFERRED_ELECTION,
    UNCLEAN_ELECTION,
    IsrChange,
    NewTopic,
    ReplicationControl,
)
from minikafka.broker.metadata.metadata_image import BrokerEndpointInfo, MetadataImage, PartitionInfo
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.protocol.metadata_records import (
    BrokerRegistrationChangeRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
)
from minikafka.storage.log_config import LogConfig

CLUSTER = "q1Sh-9_ISia_zwGINzRvyQ"
CONTROLLER_ID = 3000
TOPIC = 2
BROKER = 4
TEST_TIMEOUT_S = 60


def controller_config(**overrides: Any) -> QuorumControllerConfig:
    base = QuorumControllerConfig(node_id=CONTROLLER_ID, cluster_id=CLUSTER, auto_leader_rebalance_enable=False)
    return replace(base, **overrides)


class Controllers:
    """Controllers a test opens on one metadata dir; whichever is still open at the end is closed."""

    def __init__(self, metadata_dir: Path) -> None:
        self.metadata_dir = metadata_dir
        self.open: list[QuorumController] = []

    def start(self, **overrides: Any) -> QuorumController:
        controller = QuorumController.open(controller_config(**overrides), self.metadata_dir)
        self.open.append(controller)
        return controller

    def restart(self, controller: QuorumController, **overrides: Any) -> QuorumController:
        self.open.remove(controller)
        controller.close()
        return self.start(**overrides)


@pytest.fixture
def controllers(tmp_path: Path) -> Iterator[Controllers]:
    opened = Controllers(tmp_path / "metadata")
    yield opened
    for controller in opened.open:
        controller.close()


def registration(broker_id: int, incarnation: int = 1, cluster_id: str = CLUSTER) -> BrokerRegistration:
    return BrokerRegistration(broker_id=broker_id, cluster_id=cluster_id,
                              incarnation_id=uuid.UUID(int=broker_id * 1000 + incarnation),
                              endpoints=[BrokerEndpointInfo("PLAINTEXT", "127.0.0.1", 9090 + broker_id, 0)],
                              rack=None)


async def join(controller: QuorumController, broker_id: int, incarnation: int = 1,
               connection_id: int | None = None) -> int:
    """Register a broker and heartbeat it caught up, so it is unfenced; returns its broker epoch."""
    epoch = await controller.register_broker(registration(broker_id, incarnation), connection_id)
    reply = await controller.heartbeat(broker_id, epoch, controller.log_end_offset - 1, connection_id=connection_id)
    assert not reply.is_fenced and reply.is_caught_up
    return epoch


async def heartbeat(controller: QuorumController, broker_id: int, **wishes: bool):
    broker = controller.image.brokers[broker_id]
    return await controller.heartbeat(broker_id, broker.broker_epoch, controller.log_end_offset - 1, **wishes)


async def fence(controller: QuorumController, broker_id: int) -> None:
    reply = await heartbeat(controller, broker_id, want_fence=True)
    assert reply.is_fenced


async def create(controller: QuorumController, name: str, assignments: dict[int, list[int]] | None = None,
                 partitions: int = -1, replication_factor: int = -1,
                 configs: dict[str, str | None] | None = None, validate_only: bool = False) -> CreatedTopic:
    (result,) = await controller.create_topics(
        [NewTopic(name, partitions, replication_factor, assignments or {}, configs or {})], validate_only)
    if isinstance(result, KafkaError):
        raise result
    return result


async def create_error(controller: QuorumController, name: str, **kwargs: Any) -> ErrorCode:
    with pytest.raises(KafkaError) as caught:
        await create(controller, name, **kwargs)
    return caught.value.code


def state(controller: QuorumController, topic: str, index: int = 0) -> PartitionInfo:
    return controller.image.topics[topic].partitions[index]


async def shrink_isr(controller: QuorumController, topic: str, isr: list[int], index: int = 0) -> PartitionInfo:
    """The partition's leader reports the ISR `isr` through AlterPartition."""
    current = state(controller, topic, index)
    leader_epoch = controller.image.brokers[current.leader].broker_epoch
    ((result,),) = await controller.alter_partition(current.leader, leader_epoch, [TopicIsrChanges(
        topic, None, [IsrChange(index, current.leader_epoch, current.partition_epoch, [(b, -1) for b in isr])])])
    assert result.error is ErrorCode.NONE and result.state is not None
    return result.state


async def three_brokers(controllers: Controllers, **overrides: Any) -> QuorumController:
    controller = controllers.start(**overrides)
    for broker_id in (1, 2, 3):
        await join(controller, broker_id)
    return controller


# ---- registration and heartbeats ---------------------------------------------------------------------------------


async def test_the_broker_epoch_is_the_offset_of_the_registration_and_the_broker_starts_fenced(
        controllers: Controllers) -> None:
    controller = controllers.start()
    first = await controller.register_broker(registration(1))
    second = await controller.register_broker(registration(2))
    assert (first, second) == (0, 1) and controller.log_end_offset == 2
    broker = controller.image.brokers[2]
    assert broker.fenced and broker.broker_epoch == 1 and controller.image.live_brokers() == []
    assert broker.endpoints == [BrokerEndpointInfo("PLAINTEXT", "127.0.0.1", 9092, 0)]


async def test_a_heartbeat_unfences_a_broker_once_it_has_replayed_its_registration(
        controllers: Controllers) -> None:
    controller = controllers.start()
    await controller.register_broker(registration(1))
    epoch = await controller.register_broker(registration(2))
    behind = await controller.heartbeat(2, epoch, epoch - 1)
    assert behind.is_fenced and not behind.is_caught_up and not behind.should_shut_down
    assert controller.image.brokers[2].fenced
    caught_up = await controller.heartbeat(2, epoch, epoch)
    assert not caught_up.is_fenced and caught_up.is_caught_up
    assert [b.broker_id for b in controller.image.live_brokers()] == [2]
    wants_fence = await controller.heartbeat(2, epoch, epoch + 1, want_fence=True)
    assert wants_fence.is_fenced and controller.image.brokers[2].fenced


async def test_registration_errors(controllers: Controllers) -> None:
    controller = controllers.start()
    with pytest.raises(KafkaError) as wrong_cluster:
        await controller.register_broker(registration(1, cluster_id="another-cluster"))
    assert wrong_cluster.value.code is ErrorCode.INCONSISTENT_CLUSTER_ID
    epoch = await join(controller, 1)
    with pytest.raises(KafkaError) as duplicate:  # a second process claiming a live broker's id
        await controller.register_broker(registration(1, incarnation=2))
    assert duplicate.value.code is ErrorCode.DUPLICATE_BROKER_REGISTRATION
    for broker_id, broker_epoch in ((1, epoch + 5), (9, 0)):
        with pytest.raises(KafkaError) as stale:
            await controller.heartbeat(broker_id, broker_epoch, 0)
        assert stale.value.code is ErrorCode.STALE_BROKER_EPOCH


async def test_the_same_incarnation_registering_again_keeps_its_epoch_and_state(controllers: Controllers) -> None:
    controller = controllers.start()
    epoch = await join(controller, 1)
    again = await controller.register_broker(registration(1))
    assert again == epoch and not controller.image.brokers[1].fenced


async def test_a_restarted_broker_reregisters_with_a_new_epoch_and_leaves_the_isrs(controllers: Controllers) -> None:
    controller = await three_brokers(controllers)
    await create(controller, "orders", {0: [1, 2, 3]})
    old_epoch = controller.image.brokers[1].broker_epoch
    controller.heartbeats.connection_closed(42)  # not broker 1's connection: nothing happens
    assert controller.heartbeats.has_valid_session(1)
    controller.heartbeats.sessions[1].last_contact = float("-inf")  # its process died without a word
    new_epoch = await controller.register_broker(registration(1, incarnation=2))
    assert new_epoch > old_epoch and new_epoch == controller.log_end_offset - 1
    assert controller.image.brokers[1].fenced
    assert state(controller, "orders") == PartitionInfo([1, 2, 3], [2, 3], 2, 1, 1)


# ---- fencing -------------------------------------------------------------------------------------------------------


async def test_a_silent_broker_is_fenced_when_its_session_times_out(controllers: Controllers,
                                                                     mock_clock: trio.testing.MockClock) -> None:
    mock_clock.rate = 1  # real time passes too, so the test's own deadline holds
    controller = await three_brokers(controllers, broker_session_timeout_ms=9000)
    await create(controller, "orders", {0: [1, 2, 3]})
    with trio.fail_after(TEST_TIMEOUT_S):
        async with trio.open_nursery() as nursery:
            await nursery.start(controller.run)
            await trio.testing.wait_all_tasks_blocked()  # the session task is waiting for the first expiry
            mock_clock.jump(5)
            await heartbeat(controller, 2)
            await heartbeat(controller, 3)
            assert not controller.image.brokers[1].fenced
            before = controller.log_end_offset
            mock_clock.jump(5)  # 10 s since broker 1's last heartbeat, 5 s since the others'
            assert await controller.wait_for_records(before, trio.current_time() + 10)
            nursery.cancel_scope.cancel()
    assert controller.image.brokers[1].fenced
    assert not controller.image.brokers[2].fenced and not controller.image.brokers[3].fenced
    assert state(controller, "orders") == PartitionInfo([1, 2, 3], [2, 3], 2, 1, 1)


async def test_a_broker_whose_connection_closes_is_fenced_at_once(controllers: Controllers,
                                                                   mock_clock: trio.testing.MockClock) -> None:
    mock_clock.rate = 1
    controller = controllers.start()
    for broker_id in (1, 2):
        await join(controller, broker_id, connection_id=10 + broker_id)
    await create(controller, "orders", {0: [1, 2]})
    with trio.fail_after(TEST_TIMEOUT_S):
        async with trio.open_nursery() as nursery:
            await nursery.start(controller.run)
            before = controller.log_end_offset
            controller.heartbeats.connection_closed(11)
            assert await controller.wait_for_records(before, trio.current_time() + 10)
            nursery.cancel_scope.cancel()
    assert trio.current_time() < 9  # well within the session timeout
    assert controller.image.brokers[1].fenced and not controller.image.brokers[2].fenced
    assert state(controller, "orders") == PartitionInfo([1, 2], [2], 2, 1, 1)


# ---- elections ------------------------------------------------------------------------------------------------------


async def test_fencing_the_leader_elects_the_first_live_isr_replica(controllers: Controllers) -> None:
    controller = await three_brokers(controllers)
    await create(controller, "orders", {0: [1, 3, 2]})
    await fence(controller, 1)
    assert state(controller, "orders") == PartitionInfo([1, 3, 2], [3, 2], 3, 1, 1)


async def test_fencing_a_follower_shrinks_the_isr_and_keeps_the_leader_epoch(controllers: Controllers) -> None:
    controller = await three_brokers(controllers)
    await create(controller, "orders", {0: [1, 2, 3]})
    await fence(controller, 3)
    assert state(controller, "orders") == PartitionInfo([1, 2, 3], [1, 2], 1, 0, 1)


async def test_fencing_the_last_isr_member_takes_the_partition_offline_keeping_its_isr(
        controllers: Controllers) -> None:
    controller = await three_brokers(controllers)
    await create(controller, "orders", {0: [1, 2, 3]})
    await shrink_isr(controller, "orders", [1])
    await fence(controller, 1)
    assert state(controller, "orders") == PartitionInfo([1, 2, 3], [1], -1, 1, 2)


async def test_unclean_election_on_the_topic_elects_the_first_live_replica_with_a_warning(
        controllers: Controllers, caplog: pytest.LogCaptureFixture) -> None:
    controller = await three_brokers(controllers)
    await create(controller, "orders", {0: [1, 2, 3]}, configs={"unclean.leader.election.enable": "true"})
    await shrink_isr(controller, "orders", [1])
    with caplog.at_level(logging.WARNING, logger="minikafka.controller"):
        await fence(controller, 1)
    assert state(controller, "orders") == PartitionInfo([1, 2, 3], [2], 2, 1, 2)
    assert any("Unclean leader election for orders-0" in r.getMessage() and r.levelno == logging.WARNING
               for r in caplog.records)


async def test_unclean_election_follows_the_controllers_default(controllers: Controllers) -> None:
    controller = await three_brokers(controllers, log_defaults=LogConfig(unclean_leader_election_enable=True))
    await create(controller, "orders", {0: [1, 2, 3]})
    await create(controller, "careful", {0: [1, 2, 3]}, configs={"unclean.leader.election.enable": "false"})
    for topic in ("orders", "careful"):
        await shrink_isr(controller, topic, [1])
    await fence(controller, 1)
    assert state(controller, "orders").leader == 2
    assert state(controller, "careful") == PartitionInfo([1, 2, 3], [1], -1, 1, 2)


async def test_enabling_unclean_election_elects_leaders_for_offline_partitions(controllers: Controllers) -> None:
    controller = await three_brokers(controllers)
    await create(controller, "orders", {0: [1, 2, 3]})
    await shrink_isr(controller, "orders", [1])
    await fence(controller, 1)
    assert state(controller, "orders").leader == -1
    (error,) = await controller.alter_configs([ConfigResourceAlteration(
        TOPIC, "orders", [ConfigAlteration("unclean.leader.election.enable", SET, "true")])], incremental=True)
    assert error is None
    assert state(controller, "orders") == PartitionInfo([1, 2, 3], [2], 2, 2, 3)


async def test_an_offline_partition_elects_its_last_isr_member_when_it_returns(controllers: Controllers) -> None:
    controller = await three_brokers(controllers)
    await create(controller, "orders", {0: [1, 2, 3]})
    await shrink_isr(controller, "orders", [1])
    await fence(controller, 1)
    await join(controller, 1, incarnation=2)  # restarted: registers anew, catches up, is unfenced
    assert state(controller, "orders") == PartitionInfo([1, 2, 3], [1], 1, 2, 3)


async def test_an_unfenced_broker_rejoins_isrs_only_through_the_leader(controllers: Controllers) -> None:
    controller = await three_brokers(controllers)
    await create(controller, "orders", {0: [1, 2, 3]})
    await fence(controller, 3)
    await heartbeat(controller, 3)  # caught up: unfenced again
    assert not controller.image.brokers[3].fenced
    assert state(controller, "orders") == PartitionInfo([1, 2, 3], [1, 2], 1, 0, 1)
    assert await shrink_isr(controller, "orders", [1, 2, 3]) == PartitionInfo([1, 2, 3], [1, 2, 3], 1, 0, 2)
    assert state(controller, "orders").isr == [1, 2, 3]


# ---- AlterPartition -------------------------------------------------------------------------------------------------


async def alter(controller: QuorumController, sender: int, change: IsrChange, topic: str = "orders",
                topic_id: uuid.UUID | None = None) -> ErrorCode:
    epoch = controller.image.brokers[sender].broker_epoch
    ((result,),) = await controller.alter_partition(sender, epoch, [TopicIsrChanges(
        None if topic_id else topic, topic_id, [change])])
    return result.error


async def test_alter_partition_refusals(controllers: Controllers) -> None:
    controller = await three_brokers(controllers)
    created = await create(controller, "orders", {0: [1, 2, 3]})
    await shrink_isr(controller, "orders", [1, 2])  # partition epoch 1
    assert await alter(controller, 1, IsrChange(0, 0, 0, [(1, -1)])) is ErrorCode.INVALID_UPDATE_VERSION
    await fence(controller, 2)  # broker 2 leaves the ISR; leader unchanged, partition epoch 2
    assert await alter(controller, 1, IsrChange(0, 0, 2, [(1, -1), (2, -1)])) is ErrorCode.INELIGIBLE_REPLICA
    three = controller.image.brokers[3].broker_epoch
    assert await alter(controller, 1, IsrChange(0, 0, 2, [(1, -1), (3, three + 1)])) is ErrorCode.INELIGIBLE_REPLICA
    assert await alter(controller, 3, IsrChange(0, 0, 2, [(1, -1), (3, -1)])) is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert await alter(controller, 1, IsrChange(0, 0, 2, [(3, -1)])) is ErrorCode.INVALID_REQUEST  # leader left out
    assert await alter(controller, 1, IsrChange(0, 0, 2, [(1, -1), (9, -1)])) is ErrorCode.INVALID_REQUEST
    assert await alter(controller, 1, IsrChange(0, 1, 2, [(1, -1)])) is ErrorCode.NOT_CONTROLLER
    assert await alter(controller, 1, IsrChange(5, 0, 0, [(1, -1)])) is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert await alter(controller, 1, IsrChange(0, 0, 2, [(1, -1)]), topic_id=uuid.UUID(int=7)) is \
        ErrorCode.UNKNOWN_TOPIC_ID
    assert await alter(controller, 1, IsrChange(0, 0, 2, [(1, -1), (3, three)])) is ErrorCode.NONE  # epoch 3
    await fence(controller, 1)  # leadership moves to 3: leader epoch 1, partition epoch 4
    assert await alter(controller, 3, IsrChange(0, 0, 4, [(3, -1)])) is ErrorCode.FENCED_LEADER_EPOCH
    assert await alter(controller, 3, IsrChange(0, 1, 4, [(3, three)]), topic_id=created.topic_id) is ErrorCode.NONE
    with pytest.raises(KafkaError) as stale:
        await controller.alter_partition(3, three + 1, [])
    assert stale.value.code is ErrorCode.STALE_BROKER_EPOCH


async def test_an_accepted_isr_change_bumps_only_the_partition_epoch(controllers: Controllers) -> None:
    controller = await three_brokers(controllers)
    await create(controller, "orders", {0: [1, 2, 3]})
    epochs = [(b, controller.image.brokers[b].broker_epoch) for b in (1, 3)]
    ((result,),) = await controller.alter_partition(1, epochs[0][1], [TopicIsrChanges(
        "orders", None, [IsrChange(0, 0, 0, epochs)])])
    assert result.error is ErrorCode.NONE
    assert result.state == state(controller, "orders") == PartitionInfo([1, 2, 3], [1, 3], 1, 0, 1)
    unchanged = await shrink_isr(controller, "orders", [1, 3])  # the same ISR again: nothing to write
    assert unchanged == PartitionInfo([1, 2, 3], [1, 3], 1, 0, 1)


# ---- controlled shutdown --------------------------------------------------------------------------------------------


async def test_controlled_shutdown_moves_leaderships_first(controllers: Controllers) -> None:
    controller = await three_brokers(controllers)
    await create(controller, "orders", {0: [1, 2, 3], 1: [2, 1, 3]})
    first = await heartbeat(controller, 1, want_shut_down=True)
    assert not first.should_shut_down and not first.is_fenced
    assert controller.image.brokers[1].in_controlled_shutdown
    assert state(controller, "orders", 0) == PartitionInfo([1, 2, 3], [2, 3], 2, 1, 1)
    assert state(controller, "orders", 1) == PartitionInfo([2, 1, 3], [2, 3], 2, 0, 1)
    waiting = await controller.heartbeat(1, controller.image.brokers[1].broker_epoch, 0, want_shut_down=True)
    assert not waiting.should_shut_down  # brokers 2 and 3 have not yet replayed the moves
    for broker_id in (2, 3):
        await heartbeat(controller, broker_id)
    done = await heartbeat(controller, 1, want_shut_down=True)
    assert done.should_shut_down and done.is_fenced and controller.image.brokers[1].fenced
    assert (await heartbeat(controller, 1, want_shut_down=True)).should_shut_down


async def test_a_broker_leading_nothing_shuts_down_at_once(controllers: Controllers) -> None:
    controller = await three_brokers(controllers)
    await create(controller, "orders", {0: [2, 3, 1]})
    reply = await heartbeat(controller, 1, want_shut_down=True)
    assert reply.should_shut_down and reply.is_fenced
    assert state(controller, "orders") == PartitionInfo([2, 3, 1], [2, 3], 2, 0, 1)


async def test_a_broker_in_controlled_shutdown_cannot_rejoin_an_isr(controllers: Controllers) -> None:
    controller = await three_brokers(controllers)
    await create(controller, "orders", {0: [1, 2, 3], 1: [3, 1, 2]})
    await heartbeat(controller, 1, want_shut_down=True)
    assert controller.image.brokers[1].in_controlled_shutdown
    current = state(controller, "orders", 1)
    assert await alter(controller, 3, IsrChange(1, current.leader_epoch, current.partition_epoch,
                                                [(3, -1), (1, -1)])) is ErrorCode.INELIGIBLE_REPLICA


# ---- ElectLeaders and the leader rebalance ---------------------------------------------------------------------------


async def leader_moved_off_preferred(controllers: Controllers, **overrides: Any) -> QuorumController:
    """orders-0 on [1, 2, 3] led by 2 with every replica in sync: broker 1 restarted while 2 took over."""
    controller = await three_brokers(controllers, **overrides)
    await create(controller, "orders", {0: [1, 2, 3]})
    await fence(controller, 1)
    await heartbeat(controller, 1)  # back and unfenced
    await shrink_isr(controller, "orders", [2, 3, 1])
    assert state(controller, "orders") == PartitionInfo([1, 2, 3], [2, 3, 1], 2, 1, 2)
    return controller


async def test_preferred_election_moves_leadership_back(controllers: Controllers) -> None:
    controller = await leader_moved_off_preferred(controllers)
    (result,) = await controller.elect_leaders(PREFERRED_ELECTION, [("orders", 0)])
    assert (result.error, result.message) == (ErrorCode.NONE, None)
    assert state(controller, "orders") == PartitionInfo([1, 2, 3], [2, 3, 1], 1, 2, 3)
    (again,) = await controller.elect_leaders(PREFERRED_ELECTION, [("orders", 0)])
    assert again.error is ErrorCode.ELECTION_NOT_NEEDED
    assert await controller.elect_leaders(PREFERRED_ELECTION, None) == []  # all partitions: not-needed left out


async def test_election_errors(controllers: Controllers) -> None:
    controller = await three_brokers(controllers)
    await create(controller, "orders", {0: [1, 2, 3]})
    await fence(controller, 1)
    (unavailable,) = await controller.elect_leaders(PREFERRED_ELECTION, [("orders", 0)])
    assert unavailable.error is ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    (not_needed,) = await controller.elect_leaders(UNCLEAN_ELECTION, [("orders", 0)])
    assert not_needed.error is ErrorCode.ELECTION_NOT_NEEDED
    unknown = await controller.elect_leaders(PREFERRED_ELECTION, [("nope", 0), ("orders", 4)])
    assert [r.error for r in unknown] == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION] * 2
    with pytest.raises(KafkaError) as bad_type:
        await controller.elect_leaders(7, None)
    assert bad_type.value.code is ErrorCode.INVALID_REQUEST


async def test_unclean_election_on_request(controllers: Controllers) -> None:
    controller = await three_brokers(controllers)
    await create(controller, "orders", {0: [1, 2, 3]})
    await create(controller, "lost", {0: [1, 3]})
    for topic in ("orders", "lost"):
        await shrink_isr(controller, topic, [1])
    await fence(controller, 3)
    await fence(controller, 1)
    results = await controller.elect_leaders(UNCLEAN_ELECTION, [("orders", 0), ("lost", 0)])
    assert [r.error for r in results] == [ErrorCode.NONE, ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE]
    assert state(controller, "orders") == PartitionInfo([1, 2, 3], [2], 2, 2, 3)
    assert state(controller, "lost").leader == -1


async def test_the_leader_rebalance_runs_on_its_interval(controllers: Controllers,
                                                         mock_clock: trio.testing.MockClock) -> None:
    mock_clock.rate = 1
    controller = await leader_moved_off_preferred(controllers, auto_leader_rebalance_enable=True,
                                                  leader_imbalance_check_interval_seconds=300,
                                                  broker_session_timeout_ms=3_600_000)
    with trio.fail_after(TEST_TIMEOUT_S + 300):
        async with trio.open_nursery() as nursery:
            await nursery.start(controller.run)
            await trio.testing.wait_all_tasks_blocked()  # the rebalance task is counting its interval
            before = controller.log_end_offset
            mock_clock.jump(299)
            assert not await controller.wait_for_records(before, trio.current_time())
            mock_clock.jump(1)
            assert await controller.wait_for_records(before, trio.current_time() + 10)
            nursery.cancel_scope.cancel()
    assert state(controller, "orders").leader == 1


def image_with_leaders(leaders: list[int]) -> MetadataImage:
    """Brokers 1 and 2, active; one topic whose partitions all prefer broker 1, led as given."""
    image = MetadataImage()
    topic_id = uuid.UUID(int=5)
    records: list = [TopicRecord(name="t", topic_id=topic_id)]
    for broker_id in (1, 2):
        records += [RegisterBrokerRecord(broker_id=broker_id, incarnation_id=uuid.UUID(int=broker_id),
                                         broker_epoch=broker_id, end_points=[], features=[], rack=None),
                    BrokerRegistrationChangeRecord(broker_id=broker_id, broker_epoch=broker_id, fenced=-1)]
    records += [PartitionRecord(partition_id=i, topic_id=topic_id, replicas=[1, 2], isr=[1, 2], removing_replicas=[],
                                adding_replicas=[], leader=leader, leader_epoch=0, partition_epoch=0)
                for i, leader in enumerate(leaders)]
    for offset, record in enumerate(records):
        image.replay(record, offset)
    return image


def test_the_rebalance_leaves_imbalance_within_the_allowed_percentage() -> None:
    config = controller_config()
    within = ReplicationControl(image_with_leaders([2] + [1] * 9), config, StripedReplicaPlacer())
    assert within.preferred_leader_rebalance(10) == []
    beyond = ReplicationControl(image_with_leaders([2, 2] + [1] * 8), config, StripedReplicaPlacer())
    changes = beyond.preferred_leader_rebalance(10)
    assert [(c.partition_id, c.leader) for c in changes if isinstance(c, PartitionChangeRecord)] == [(0, 1), (1, 1)]


# ---- topics, partitions and configs -------------------------------------------------------------------------------


async def test_created_topics_spread_over_the_live_brokers(controllers: Controllers) -> None:
    controller = await three_brokers(controllers, num_partitions=6, default_replication_factor=2)
    created = await create(controller, "orders")
    assert (created.num_partitions, created.replication_factor, created.configs) == (6, 2, {})
    partitions = controller.image.topics["orders"].partitions
    assert sorted(partitions) == list(range(6))
    leaders = [p.leader for p in partitions.values()]
    assert sorted(leaders) == [1, 1, 2, 2, 3, 3]
    for p in partitions.values():
        assert len(set(p.replicas)) == 2 and p.isr == p.replicas and p.leader == p.replicas[0]
        assert (p.leader_epoch, p.partition_epoch) == (0, 0)
    assert controller.image.topics_by_id[created.topic_id].name == "orders"


async def test_replication_factor_beyond_the_live_unfenced_brokers_is_refused(controllers: Controllers) -> None:
    controller = await three_brokers(controllers)
    assert (await create(controller, "three", replication_factor=3)).replication_factor == 3
    await fence(controller, 3)
    assert await create_error(controller, "four", replication_factor=3) is ErrorCode.INVALID_REPLICATION_FACTOR
    assert await create_error(controller, "zero", replication_factor=0) is ErrorCode.INVALID_REPLICATION_FACTOR


async def test_explicit_assignments(controllers: Controllers) -> None:
    controller = await three_brokers(controllers)
    await fence(controller, 1)
    created = await create(controller, "manual", {0: [1, 2], 1: [3, 1]})
    assert (created.num_partitions, created.replication_factor) == (2, 2)
    assert state(controller, "manual", 0) == PartitionInfo([1, 2], [2], 2, 0, 0)  # the fenced replica is not in sync
    assert state(controller, "manual", 1) == PartitionInfo([3, 1], [3], 3, 0, 0)
    for assignments, code in (({0: [1, 9]}, ErrorCode.INVALID_REPLICA_ASSIGNMENT),
                              ({0: [2, 2]}, ErrorCode.INVALID_REPLICA_ASSIGNMENT),
                              ({0: []}, ErrorCode.INVALID_REPLICA_ASSIGNMENT),
                              ({0: [2], 2: [3]}, ErrorCode.INVALID_REPLICA_ASSIGNMENT),
                              ({0: [2], 1: [2, 3]}, ErrorCode.INVALID_REPLICA_ASSIGNMENT),
                              ({0: [1]}, ErrorCode.INVALID_REPLICA_ASSIGNMENT)):
        assert await create_error(controller, "bad", assignments=assignments) is code
    assert await create_error(controller, "bad", assignments={0: [2]}, partitions=1) is ErrorCode.INVALID_REQUEST


async def test_topic_creation_errors_are_todays(controllers: Controllers) -> None:
    controller = await three_brokers(controllers)
    await create(controller, "orders")
    assert await create_error(controller, "orders") is ErrorCode.TOPIC_ALREADY_EXISTS
    assert await create_error(controller, "bad name!") is ErrorCode.INVALID_TOPIC_EXCEPTION
    assert await create_error(controller, "none", partitions=0) is ErrorCode.INVALID_PARTITIONS
    assert await create_error(controller, "neg", partitions=-3) is ErrorCode.INVALID_PARTITIONS
    assert await create_error(controller, "cfg", configs={"retention.ms": "soon"}) is ErrorCode.INVALID_CONFIG
    assert await create_error(controller, "cfg", configs={"no.such.config": "1"}) is ErrorCode.INVALID_CONFIG
    assert await create_error(controller, "cfg", configs={"retention.ms": None}) is ErrorCode.INVALID_CONFIG
    end = controller.log_end_offset
    checked = await create(controller, "later", partitions=3, configs={"min.insync.replicas": "2"},
                           validate_only=True)
    assert checked.num_partitions == 3 and "later" not in controller.image.topics and controller.log_end_offset == end


async def test_topic_configs_are_kept_and_altered(controllers: Controllers) -> None:
    controller = await three_brokers(controllers)
    await create(controller, "orders", configs={"min.insync.replicas": "2", "cleanup.policy": "delete"})
    assert controller.image.topic_configs["orders"] == {"min.insync.replicas": "2", "cleanup.policy": "delete"}

    async def incremental(*alterations: ConfigAlteration, topic: str = "orders", resource_type: int = TOPIC,
                          validate_only: bool = False) -> ErrorCode:
        (error,) = await controller.alter_configs([ConfigResourceAlteration(resource_type, topic, list(alterations))],
                                                  incremental=True, validate_only=validate_only)
        return ErrorCode.NONE if error is None else error.code

    assert await incremental(ConfigAlteration("retention.ms", SET, "1000"),
                             ConfigAlteration("min.insync.replicas", DELETE, None),
                             ConfigAlteration("cleanup.policy", APPEND, "compact")) is ErrorCode.NONE
    assert controller.image.topic_configs["orders"] == {"retention.ms": "1000", "cleanup.policy": "delete,compact"}
    assert await incremental(ConfigAlteration("cleanup.policy", SUBTRACT, "delete")) is ErrorCode.NONE
    assert controller.image.topic_configs["orders"]["cleanup.policy"] == "compact"
    assert await incremental(ConfigAlteration("retention.ms", APPEND, "5")) is ErrorCode.INVALID_CONFIG
    assert await incremental(ConfigAlteration("retention.ms", SET, "x")) is ErrorCode.INVALID_CONFIG
    assert await incremental(ConfigAlteration("retention.ms", SET, "1"),
                             ConfigAlteration("retention.ms", DELETE, None)) is ErrorCode.INVALID_REQUEST
    assert await incremental(ConfigAlteration("retention.ms", SET, "1"), topic="nope") is \
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert await incremental(ConfigAlteration("log.dirs", SET, "/x"), topic="1",  # static: read-only
                             resource_type=BROKER) is ErrorCode.INVALID_REQUEST
    assert await incremental(ConfigAlteration("retention.ms", SET, "7"), validate_only=True) is ErrorCode.NONE
    assert controller.image.topic_configs["orders"]["retention.ms"] == "1000"
    (legacy,) = await controller.alter_configs([ConfigResourceAlteration(
        TOPIC, "orders", [ConfigAlteration("segment.bytes", SET, "1048576")])], incremental=False)
    assert legacy is None and controller.image.topic_configs["orders"] == {"segment.bytes": "1048576"}


async def test_deleting_topics(controllers: Controllers) -> None:
    controller = await three_brokers(controllers)
    created = await create(controller, "orders", configs={"retention.ms": "5"})
    await create(controller, "payments")
    results = await controller.delete_topics([("orders", None), ("nope", None), (None, uuid.UUID(int=3))])
    assert [(r.name, r.error.code if r.error else None) for r in results] == [
        ("orders", None), ("nope", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), (None, ErrorCode.UNKNOWN_TOPIC_ID)]
    assert results[0].topic_id == created.topic_id
    assert "orders" not in controller.image.topics and "orders" not in controller.image.topic_configs
    controller = controllers.restart(controller, delete_topic_enable=False)
    (refused,) = await controller.delete_topics([("payments", None)])
    assert refused.error is not None and refused.error.code is ErrorCode.TOPIC_DELETION_DISABLED
    assert "payments" in controller.image.topics


async def test_adding_partitions(controllers: Controllers) -> None:
    controller = await three_brokers(controllers)
    await create(controller, "orders", {0: [1, 2]})

    async def add(count: int, assignments: list[list[int]] | None = None, validate_only: bool = False) -> ErrorCode:
        (error,) = await controller.create_partitions([NewPartitions("orders", count, assignments)], validate_only)
        return ErrorCode.NONE if error is None else error.code

    assert await add(3, validate_only=True) is ErrorCode.NONE and len(controller.image.topics["orders"].partitions) == 1
    assert await add(3) is ErrorCode.NONE
    added = controller.image.topics["orders"].partitions
    assert sorted(added) == [0, 1, 2] and all(len(p.replicas) == 2 for p in added.values())
    assert await add(4, [[3, 1]]) is ErrorCode.NONE and state(controller, "orders", 3).replicas == [3, 1]
    assert await add(4) is ErrorCode.INVALID_PARTITIONS
    assert await add(2) is ErrorCode.INVALID_PARTITIONS
    assert await add(6, [[1, 2]]) is ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert await add(5, [[1, 2, 3]]) is ErrorCode.INVALID_REPLICA_ASSIGNMENT  # another replication factor
    assert await add(5, [[1, 7]]) is ErrorCode.INVALID_REPLICA_ASSIGNMENT
    (unknown,) = await controller.create_partitions([NewPartitions("nope", 2, None)])
    assert unknown is not None and unknown.code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


# ---- producer ids -------------------------------------------------------------------------------------------------


async def test_producer_id_blocks_survive_a_restart_without_reuse(controllers: Controllers) -> None:
    controller = controllers.start()
    epoch = await join(controller, 1)
    blocks = [await controller.allocate_producer_ids(1, epoch) for _ in range(3)]
    assert blocks == [(0, 1000), (1000, 1000), (2000, 1000)]
    controller = controllers.restart(controller)
    assert await controller.allocate_producer_ids(1, epoch) == (3000, 1000)
    with pytest.raises(KafkaError) as stale:
        await controller.allocate_producer_ids(1, epoch + 1)
    assert stale.value.code is ErrorCode.STALE_BROKER_EPOCH


# ---- the metadata log -------------------------------------------------------------------------------------------


def comparable(image: MetadataImage) -> MetadataImage:
    """The image without its controller epoch, which each start of the controller advances."""
    return replace(image, controller_epoch=-1)


async def test_a_reopened_controller_replays_to_an_identical_image(controllers: Controllers) -> None:
    controller = await three_brokers(controllers)
    await create(controller, "orders", {0: [1, 2, 3], 1: [2, 3, 1]}, configs={"retention.ms": "100"})
    await create(controller, "gone")
    await controller.delete_topics([("gone", None)])
    await fence(controller, 2)
    await shrink_isr(controller, "orders", [1], index=0)
    await controller.allocate_producer_ids(1, controller.image.brokers[1].broker_epoch)
    await heartbeat(controller, 3, want_shut_down=True)
    before, epoch, end = comparable(controller.image), controller.image.controller_epoch, controller.log_end_offset
    controller = controllers.restart(controller)
    assert comparable(controller.image) == before
    assert controller.image.controller_epoch == epoch + 1 and controller.log_end_offset == end
    assert controller.image.offset == end - 1


_WRITER = textwrap.dedent(
    """
    import sys
    import uuid
    from pathlib import Path

    import trio

    from minikafka.broker.controller.controller_config import QuorumControllerConfig
    from minikafka.broker.controller.cluster_control import BrokerRegistration
    from minikafka.broker.controller.quorum_controller import QuorumController
    from minikafka.broker.controller.replication_control import NewTopic

    async def main():
        config = QuorumControllerConfig(node_id=3000, cluster_id="c", auto_leader_rebalance_enable=False)
        controller = QuorumController.open(config, Path(sys.argv[1]))
        epoch = await controller.register_broker(BrokerRegistration(1, "c", uuid.uuid4(), [], None))
        await controller.heartbeat(1, epoch, controller.log_end_offset - 1)
        for i in range(100_000):
            (created,) = await controller.create_topics([NewTopic(f"t{i}", 1, 1, {}, {})])
            start, _ = await controller.allocate_producer_ids(1, epoch)
            print(i, start, controller.log_end_offset - 1, flush=True)

    trio.run(main)
    """
)


def test_replay_after_kill_9_while_appending(tmp_path: Path) -> None:
    """Everything acknowledged before a kill -9 is in the reopened image; the batch being written then is whole or
    gone; and replaying the log again builds the identical image."""
    metadata_dir = tmp_path / "metadata"
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(metadata_dir)], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    acknowledged: tuple[int, int, int] | None = None
    try:
        fd = proc.stdout.fileno()
        pending = b""
        deadline = time.monotonic() + 60
        for _ in range(100_000):
            remaining = deadline - time.monotonic()
            if (acknowledged and acknowledged[0] >= 30) or remaining <= 0 or not select.select([fd], [], [],
                                                                                               remaining)[0]:
                break
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            *lines, pending = (pending + chunk).split(b"\n")
            if lines:
                i, start, offset = (int(x) for x in lines[-1].split())
                acknowledged = (i, start, offset)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        proc.stdout.close()
    assert acknowledged is not None and acknowledged[0] >= 30, "the writer did not get going"
    count, last_block, last_offset = acknowledged

    async def reopen() -> MetadataImage:
        controller = QuorumController.open(QuorumControllerConfig(node_id=3000, cluster_id="c"), metadata_dir)
        try:
            return comparable(controller.image)
        finally:
            controller.close()

    image = trio.run(reopen)
    assert image.offset >= last_offset
    assert {f"t{i}" for i in range(count + 1)} <= set(image.topics)
    assert image.next_producer_id >= last_block + 1000
    # each round creates a topic, then takes a block: a kill between the two leaves one topic without its block
    assert image.next_producer_id in (1000 * len(image.topics), 1000 * (len(image.topics) - 1))
    assert trio.run(reopen) == image


# ---- replicas lost with a failed log dir ---------------------------------------------------------------------------


async def test_replicas_lost_with_a_log_dir_leave_only_their_isrs_and_leaderships(controllers: Controllers) -> None:
    controller = await three_brokers(controllers)
    created = await create(controller, "orders", {0: [1, 2, 3], 1: [1, 2, 3], 2: [2, 1, 3]})
    await controller.replicas_offline(1, controller.image.brokers[1].broker_epoch,
                                      [(created.topic_id, 0), (created.topic_id, 2)])
    assert state(controller, "orders", 0) == PartitionInfo([1, 2, 3], [2, 3], 2, 1, 1)  # led elsewhere
    assert state(controller, "orders", 1) == PartitionInfo([1, 2, 3], [1, 2, 3], 1, 0, 0)  # its other dir
    assert state(controller, "orders", 2) == PartitionInfo([2, 1, 3], [2, 3], 2, 0, 1)  # a follower leaves the ISR
    with pytest.raises(KafkaError) as stale:
        await controller.replicas_offline(1, 12345, [(created.topic_id, 1)])
    assert stale.value.code == ErrorCode.STALE_BROKER_EPOCH
