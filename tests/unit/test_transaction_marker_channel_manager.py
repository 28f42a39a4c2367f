"""The transaction marker channel manager's queues, as Kafka's TransactionMarkerChannelManager keeps them: markers
queued per destination broker, one sender per broker draining everything queued into one WriteTxnMarkers request
with one request in flight, and each answer handled per marker and partition (done, retried at the then current
leader after the backoff, fenced). Fake brokers, metadata and transaction log; trio's clock jumps over backoffs
(each test asks for `autojump_clock`: pytest-trio takes the clock from the test's own arguments)."""
from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest
import trio
import trio.testing

from minikafka.broker.coordinator.transaction.transaction_marker_channel_manager import (
    RETRY_BACKOFF_S,
    TransactionMarkerChannelManager,
)
from minikafka.broker.coordinator.transaction.transaction_metadata import (
    TransactionMetadata,
    TransactionVersion,
    TxnTransitMetadata,
)
from minikafka.broker.coordinator.transaction.transaction_state import TransactionState
from minikafka.broker.coordinator.transaction.transaction_state_manager import CoordinatorEpochAndTxnMetadata
from minikafka.broker.network.network_client import DisconnectedError
from minikafka.protocol.errors import ErrorCode, KafkaError

TOPIC = "t"
COORDINATOR_EPOCH = 3
TopicPartition = tuple[str, int]
# broker id, producer id, partition -> the error the broker answers
Answer = Callable[[int, int, TopicPartition], ErrorCode]


@dataclass
class SentRequest:
    broker_id: int
    sent_at: float
    markers: dict[int, set[TopicPartition]]  # producer id -> partitions


@dataclass
class FakeBrokers:
    """BrokerClients whose brokers answer WriteTxnMarkers as `answer` says; `gates` hold a broker's answers."""

    answer: Answer = lambda broker_id, producer_id, tp: ErrorCode.NONE
    requests: list[SentRequest] = field(default_factory=list)
    gates: dict[int, trio.Event] = field(default_factory=dict)
    disconnect_once: set[int] = field(default_factory=set)

    async def run(self, *, task_status: trio.TaskStatus = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        await trio.sleep_forever()

    async def get(self, broker_id: int) -> SimpleNamespace:
        async def send(request: object) -> SimpleNamespace:
            return await self._send(broker_id, request)
        return SimpleNamespace(send=send)

    async def _send(self, broker_id: int, request) -> SimpleNamespace:
        self.requests.append(SentRequest(broker_id, trio.current_time(), {
            m.producer_id: {(t.name, i) for t in m.topics for i in t.partition_indexes} for m in request.markers}))
        if broker_id in self.gates:
            await self.gates[broker_id].wait()
        if broker_id in self.disconnect_once:
            self.disconnect_once.discard(broker_id)
            raise DisconnectedError(f"node {broker_id} went away")
        return SimpleNamespace(markers=[SimpleNamespace(producer_id=m.producer_id, topics=[
            SimpleNamespace(name=t.name, partitions=[
                SimpleNamespace(partition_index=i, error_code=self.answer(broker_id, m.producer_id, (t.name, i)))
                for i in t.partition_indexes]) for t in m.topics]) for m in request.markers])

    def to(self, broker_id: int) -> list[SentRequest]:
        return [r for r in self.requests if r.broker_id == broker_id]


class FakeStateManager:
    """The transactional ids this coordinator has (by `__transaction_state` partition) and the completions written."""

    def __init__(self) -> None:
        self.transactions: dict[str, CoordinatorEpochAndTxnMetadata] = {}
        self.partitions: dict[str, int] = {}
        self.completed: list[tuple[str, TransactionState]] = []

    def partition_for(self, transactional_id: str) -> int:
        return self.partitions[transactional_id]

    def get_transaction_state(self, transactional_id: str) -> CoordinatorEpochAndTxnMetadata | None:
        if transactional_id not in self.transactions:
            raise KafkaError(ErrorCode.NOT_COORDINATOR, "not here")
        return self.transactions[transactional_id]

    async def append_transaction_to_log(self, transactional_id: str, coordinator_epoch: int,
                                        transit: TxnTransitMetadata, *, retry_on_error: bool = False) -> ErrorCode:
        await trio.lowlevel.checkpoint()
        self.completed.append((transactional_id, transit.txn_state))
        return ErrorCode.NONE

    def unload(self, partition: int) -> None:
        for transactional_id in [t for t, p in self.partitions.items() if p == partition]:
            self.transactions.pop(transactional_id, None)


class Cluster:
    def __init__(self, leaders: dict[int, int]) -> None:
        self.leaders = leaders  # partition of TOPIC -> leader
        self.held: set[int] = set()

    @property
    def topics(self) -> dict[str, SimpleNamespace]:
        if not self.leaders:
            return {}
        return {TOPIC: SimpleNamespace(partitions={p: SimpleNamespace(leader=leader)
                                                   for p, leader in self.leaders.items()})}


@dataclass
class Harness:
    manager: TransactionMarkerChannelManager
    brokers: FakeBrokers
    state: FakeStateManager
    cluster: Cluster
    next_producer_id: int = 1000

    def commit(self, transactional_id: str, partitions: set[int], txn_topic_partition: int = 0) -> int:
        """Hand a prepared commit of `partitions` to the manager; its producer id."""
        self.next_producer_id += 1
        metadata = TransactionMetadata(
            transactional_id=transactional_id, producer_id=self.next_producer_id, prev_producer_id=-1,
            next_producer_id=-1, producer_epoch=0, last_producer_epoch=-1, txn_timeout_ms=60_000,
            state=TransactionState.PREPARE_COMMIT, topic_partitions={(TOPIC, p) for p in partitions},
            txn_last_update_timestamp=0, client_transaction_version=TransactionVersion.TV_0)
        self.state.transactions[transactional_id] = CoordinatorEpochAndTxnMetadata(COORDINATOR_EPOCH, metadata)
        self.state.partitions[transactional_id] = txn_topic_partition
        self.manager.add_txn_markers_to_send(COORDINATOR_EPOCH, True, metadata, metadata.prepare_complete(0))
        return self.next_producer_id

    def completed(self) -> set[str]:
        return {t for t, state in self.state.completed if state is TransactionState.COMPLETE_COMMIT}

    async def until(self, condition: Callable[[], bool], timeout_s: float = 5) -> None:
        with trio.fail_after(timeout_s):
            while not condition():  # noqa: ASYNC110 - a bounded poll of an observable state
                await trio.sleep(0.001)


@pytest.fixture
async def harness(nursery: trio.Nursery) -> AsyncIterator[Harness]:
    cluster = Cluster({0: 1, 1: 2, 2: 1, 3: 2})
    brokers = FakeBrokers()
    state = FakeStateManager()
    manager = TransactionMarkerChannelManager(cluster, state, brokers,  # type: ignore[arg-type]
                                              is_held=lambda broker_id: broker_id in cluster.held)
    await nursery.start(manager.run)
    yield Harness(manager, brokers, state, cluster)


async def test_markers_of_transactions_sharing_leaders_go_in_one_request_per_broker(
        harness: Harness, autojump_clock: trio.testing.MockClock) -> None:
    a = harness.commit("a", {0, 1})
    b = harness.commit("b", {2, 3})
    await harness.until(lambda: harness.completed() == {"a", "b"})
    assert [r.markers for r in harness.brokers.to(1)] == [{a: {(TOPIC, 0)}, b: {(TOPIC, 2)}}]
    assert [r.markers for r in harness.brokers.to(2)] == [{a: {(TOPIC, 1)}, b: {(TOPIC, 3)}}]


async def test_one_request_in_flight_per_broker_and_the_next_takes_all_queued_meanwhile(
        harness: Harness, autojump_clock: trio.testing.MockClock) -> None:
    gate = harness.brokers.gates[1] = trio.Event()
    a = harness.commit("a", {0})
    await harness.until(lambda: len(harness.brokers.to(1)) == 1)
    b = harness.commit("b", {0})
    c = harness.commit("c", {2})
    await trio.sleep(1)
    assert len(harness.brokers.to(1)) == 1 and harness.completed() == set()
    gate.set()
    await harness.until(lambda: harness.completed() == {"a", "b", "c"})
    assert [r.markers for r in harness.brokers.to(1)] == [{a: {(TOPIC, 0)}}, {b: {(TOPIC, 0)}, c: {(TOPIC, 2)}}]


async def test_a_retriable_error_is_retried_at_the_current_leader_after_the_backoff(
        harness: Harness, autojump_clock: trio.testing.MockClock) -> None:
    cluster = harness.cluster

    def answer(broker_id: int, producer_id: int, tp: TopicPartition) -> ErrorCode:
        if cluster.leaders[tp[1]] != broker_id:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return ErrorCode.NONE

    harness.brokers.answer = answer
    gate = harness.brokers.gates[1] = trio.Event()
    a = harness.commit("a", {0, 2})
    await harness.until(lambda: len(harness.brokers.to(1)) == 1)
    cluster.leaders[0] = 2  # partition 0 moves while the request is out; partition 2 stays
    gate.set()
    await harness.until(lambda: harness.completed() == {"a"})
    [first] = harness.brokers.to(1)
    [retry] = harness.brokers.to(2)
    assert first.markers == {a: {(TOPIC, 0), (TOPIC, 2)}} and retry.markers == {a: {(TOPIC, 0)}}
    assert retry.sent_at - first.sent_at >= RETRY_BACKOFF_S


async def test_a_disconnect_is_retried(
        harness: Harness, autojump_clock: trio.testing.MockClock) -> None:
    harness.brokers.disconnect_once.add(1)
    a = harness.commit("a", {0})
    await harness.until(lambda: harness.completed() == {"a"})
    assert [r.markers for r in harness.brokers.to(1)] == [{a: {(TOPIC, 0)}}] * 2


async def test_a_fenced_marker_stops_the_transaction(
        harness: Harness, autojump_clock: trio.testing.MockClock) -> None:
    harness.brokers.answer = lambda broker_id, producer_id, tp: (
        ErrorCode.TRANSACTION_COORDINATOR_FENCED if tp == (TOPIC, 1) else ErrorCode.NONE)
    harness.commit("a", {0, 1})
    harness.commit("b", {2})
    await harness.until(lambda: harness.completed() == {"b"})
    await trio.sleep(1)
    assert harness.completed() == {"b"} and len(harness.brokers.requests) == 2


async def test_markers_for_a_held_broker_wait_until_the_hold_ends(
        harness: Harness, autojump_clock: trio.testing.MockClock) -> None:
    harness.cluster.held.add(2)
    a = harness.commit("a", {0, 1})
    await trio.sleep(2)
    assert [r.broker_id for r in harness.brokers.requests] == [1] and harness.completed() == set()
    harness.cluster.held.clear()
    await harness.until(lambda: harness.completed() == {"a"})
    assert [r.markers for r in harness.brokers.to(2)] == [{a: {(TOPIC, 1)}}]


async def test_a_partition_without_a_leader_waits_and_one_whose_topic_is_gone_is_dropped(
        harness: Harness, autojump_clock: trio.testing.MockClock) -> None:
    harness.cluster.leaders[1] = -1
    harness.commit("a", {0, 1})
    await trio.sleep(1)
    assert harness.completed() == set()
    harness.cluster.leaders.clear()  # the topic is deleted
    await harness.until(lambda: harness.completed() == {"a"})
    assert [r.broker_id for r in harness.brokers.requests] == [1]


async def test_unloading_a_transaction_state_partition_drops_its_markers(
        harness: Harness, autojump_clock: trio.testing.MockClock) -> None:
    gate = harness.brokers.gates[1] = trio.Event()
    harness.commit("in-flight", {0}, txn_topic_partition=7)
    await harness.until(lambda: len(harness.brokers.to(1)) == 1)
    harness.commit("queued", {2}, txn_topic_partition=7)
    harness.commit("elsewhere", {0}, txn_topic_partition=8)
    harness.state.unload(7)
    harness.manager.remove_markers_for_txn_topic_partition(7)
    gate.set()
    await harness.until(lambda: harness.completed() == {"elsewhere"})
    await trio.sleep(1)
    assert harness.completed() == {"elsewhere"}
    assert [set(r.markers) for r in harness.brokers.to(1)] == [{1001}, {1003}]
