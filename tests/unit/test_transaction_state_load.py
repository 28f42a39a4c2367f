"""Loading a `__transaction_state` partition when this broker becomes its leader, as Kafka's TransactionStateManager
does: the partition is loading from the election on (its ids answer COORDINATOR_LOAD_IN_PROGRESS, which clients
retry), a task of the coordinator reads it in reads of at most transaction.state.log.load.buffer.size bytes and
yields to the event loop after each, and what it read is installed only if the partition is still loading at the
same coordinator epoch. Real partition logs on disk; no network."""
from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
import trio.testing

from minikafka.broker.coordinator.coordinator_log import CoordinatorLog, build_batch, partition_for
from minikafka.broker.coordinator.transaction.transaction_config import TransactionConfig
from minikafka.broker.coordinator.transaction.transaction_coordinator import TransactionCoordinator
from minikafka.broker.coordinator.transaction.transaction_metadata import (
    TransactionMetadata,
    TransactionVersion,
    TxnTransitMetadata,
)
from minikafka.broker.coordinator.transaction.transaction_state import TransactionState
from minikafka.broker.coordinator.transaction.transaction_state_manager import (
    LOAD_RECORDS_PER_YIELD,
    TransactionStateManager,
)
from minikafka.broker.replication.delayed_produce import AppendResult
from minikafka.broker.replication.purgatory import Purgatory
from minikafka.protocol.coordinator_records import (
    PartitionsSchema,
    TransactionLogValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.protocol.internal_topics import TRANSACTION_STATE_TOPIC
from minikafka.storage.log import AppendOrigin, Log
from minikafka.storage.log_config import LogConfig

E = ErrorCode
NOW = 1_700_000_000_000
PARTITIONS = 2
EPOCH = 5
TV0 = TransactionVersion.TV_0


class Replica:
    """A partition of `__transaction_state` on a real log, with this broker its only replica: what is appended is
    replicated at once, unless the test makes the ISR lag."""

    def __init__(self, log: Log) -> None:
        self.log = log
        self.lagging = False

    def check_enough_replicas_reach_offset(self, required_offset: int) -> tuple[bool, ErrorCode]:
        return not self.lagging and self.log.log_end_offset >= required_offset, E.NONE


class Replicas:
    """The replica manager as a coordinator's log sees it: this broker hosts and leads every partition of
    `__transaction_state`, each on a real log."""

    def __init__(self, tmp_path: Path) -> None:
        self.partitions = {i: Replica(Log.open(tmp_path / f"{TRANSACTION_STATE_TOPIC}-{i}", TRANSACTION_STATE_TOPIC,
                                               i, LogConfig(), now_ms=NOW))
                           for i in range(PARTITIONS)}
        self.refusal: ErrorCode | None = None  # what appends are refused with, if they are
        self.purgatory = Purgatory()

    def get_partition(self, topic: str, index: int) -> Replica | None:
        return self.partitions.get(index) if topic == TRANSACTION_STATE_TOPIC else None

    def unhosted_error(self, tp: tuple[str, int]) -> ErrorCode:
        return E.NOT_LEADER_OR_FOLLOWER

    def append_to_local_log(self, required_acks: int, entries: dict[tuple[str, int], bytearray],
                            origin: AppendOrigin) -> dict[tuple[str, int], AppendResult]:
        if self.refusal is not None:
            return dict.fromkeys(entries, AppendResult(KafkaError(self.refusal, "refused"), None))
        return {tp: AppendResult(None, self.partitions[tp[1]].log.append_as_leader(records, EPOCH, NOW,
                                                                                     origin=origin))
                for tp, records in entries.items()}


class Markers:
    """The marker sender as the coordinator uses it: what it was handed, and which partitions it was told to
    forget."""

    def __init__(self) -> None:
        self.sent: list[tuple[int, bool, str]] = []
        self.removed: list[int] = []
        self.completions: dict[str, TxnTransitMetadata] = {}

    async def run(self, *, task_status: trio.TaskStatus = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        await trio.sleep_forever()

    def add_txn_markers_to_send(self, coordinator_epoch: int, commit: bool, metadata: TransactionMetadata,
                                complete: TxnTransitMetadata) -> None:
        self.sent.append((coordinator_epoch, commit, metadata.transactional_id))
        self.completions[metadata.transactional_id] = complete

    async def written(self, manager: TransactionStateManager, transactional_id: str) -> None:
        """The markers of the id's transaction are written: its completion is, as the marker sender writes it."""
        assert await manager.append_transaction_to_log(transactional_id, EPOCH,
                                                       self.completions.pop(transactional_id),
                                                       retry_on_error=True) == E.NONE

    def remove_markers_for_txn_topic_partition(self, partition: int) -> None:
        self.removed.append(partition)


def ids_on(partition: int, count: int, prefix: str = "txn") -> list[str]:
    """`count` transactional ids that live on `partition`."""
    candidates = (f"{prefix}-{i}" for i in itertools.count())
    return list(itertools.islice((t for t in candidates if partition_for(t, PARTITIONS) == partition), count))


def record(transactional_id: str, producer_id: int, state: TransactionState = TransactionState.EMPTY, *,
           epoch: int = 0, tv: TransactionVersion = TV0, started_ms: int = NOW) -> tuple[bytes, bytes]:
    partitions = None if state is TransactionState.EMPTY else (PartitionsSchema("orders", (0, 1)),)
    value = TransactionLogValue(producer_id=producer_id, producer_epoch=epoch, transaction_timeout_ms=60_000,
                                transaction_status=state.id, transaction_partitions=partitions,
                                transaction_last_update_timestamp_ms=NOW, transaction_start_timestamp_ms=started_ms,
                                client_transaction_version=int(tv))
    return encode_key(transactional_id), encode_value(value, tv.transaction_log_value_version)


def write(log: Log, records: list[tuple[bytes, bytes | None]], per_batch: int = 50) -> None:
    for i in range(0, len(records), per_batch):
        log.append_as_leader(bytearray(build_batch(records[i:i + per_batch], NOW)), EPOCH, NOW,
                             origin=AppendOrigin.COORDINATOR)


@pytest.fixture
def replicas(tmp_path: Path) -> Iterator[Replicas]:
    replicas = Replicas(tmp_path)
    yield replicas
    for partition in replicas.partitions.values():
        partition.log.close()


def state_manager(replicas: Replicas, load_buffer_size: int = 5242880,
                  tv: TransactionVersion = TV0) -> TransactionStateManager:
    config = TransactionConfig(num_partitions=PARTITIONS, load_buffer_size=load_buffer_size)
    manager = TransactionStateManager(config, CoordinatorLog(replicas, TRANSACTION_STATE_TOPIC, 1000),  # type: ignore[arg-type]
                                      lambda: NOW, lambda: tv)
    manager.active = True
    return manager


def error_of(manager: TransactionStateManager, transactional_id: str) -> ErrorCode | None:
    try:
        manager.get_transaction_state(transactional_id)
    except KafkaError as exc:
        return exc.code
    return None


# ---- the state manager ---------------------------------------------------------------------------------------


async def test_a_loading_partitions_ids_answer_coordinator_load_in_progress_until_it_is_loaded(replicas: Replicas):
    loaded_ids = ids_on(0, 3)
    write(replicas.partitions[0].log, [record(t, 100 + i) for i, t in enumerate(loaded_ids)]
          + [record(loaded_ids[2], 0, TransactionState.PREPARE_COMMIT), (encode_key(loaded_ids[1]), None)])
    manager = state_manager(replicas)
    assert manager.add_loading_partition(0, EPOCH) is True
    assert manager.loading_partitions == {0: EPOCH}
    assert error_of(manager, loaded_ids[0]) == E.COORDINATOR_LOAD_IN_PROGRESS
    assert error_of(manager, ids_on(1, 1)[0]) == E.NOT_COORDINATOR  # the other partition: not led here
    new = TransactionMetadata(transactional_id=ids_on(0, 1, "new")[0], producer_id=7, prev_producer_id=-1,
                              next_producer_id=-1, producer_epoch=-1, last_producer_epoch=-1, txn_timeout_ms=1000,
                              state=TransactionState.EMPTY, topic_partitions=set(), txn_last_update_timestamp=NOW,
                              client_transaction_version=TV0)
    with pytest.raises(KafkaError) as raised:
        manager.put_transaction_state_if_not_exists(new)
    assert raised.value.code == E.COORDINATOR_LOAD_IN_PROGRESS
    assert await manager.append_transaction_to_log(
        new.transactional_id, EPOCH, new.prepare_increment_producer_epoch(1000, None, NOW)) \
        == E.COORDINATOR_LOAD_IN_PROGRESS
    assert manager.all_transactions() == [] and manager.owned_partitions == set()

    prepared = await manager.load_transactions_for_partition(0, EPOCH)

    assert [m.transactional_id for m in prepared or []] == [loaded_ids[2]]
    assert manager.loading_partitions == {} and manager.owned_partitions == {0}
    first = manager.get_transaction_state(loaded_ids[0])
    assert first is not None and first.coordinator_epoch == EPOCH and first.metadata.producer_id == 100
    assert manager.get_transaction_state(loaded_ids[1]) is None  # its tombstone removed it
    third = manager.get_transaction_state(loaded_ids[2])
    assert third is not None and third.metadata.state is TransactionState.PREPARE_COMMIT
    assert error_of(manager, ids_on(1, 1)[0]) == E.NOT_COORDINATOR


async def test_a_load_reads_at_most_the_load_buffer_size_at_a_time_and_lets_other_tasks_run(replicas: Replicas):
    """Decoding a read of load.buffer.size bytes takes seconds in Python: the load yields within reads too."""
    loaded_ids = ids_on(0, 2000)
    write(replicas.partitions[0].log, [record(t, i) for i, t in enumerate(loaded_ids)], per_batch=20)
    the_log = replicas.partitions[0].log
    reads: list[tuple[int, int]] = []
    read = the_log.read

    def counted_read(offset: int, max_bytes: int, **kwargs: object) -> bytes:
        data = read(offset, max_bytes, **kwargs)  # type: ignore[arg-type]
        reads.append((max_bytes, len(data)))
        return data

    manager = state_manager(replicas, load_buffer_size=8192)
    manager.add_loading_partition(0, EPOCH)
    the_log.read = counted_read  # type: ignore[method-assign]
    ticks = 0
    answers: list[ErrorCode | None] = []

    async def other_work() -> None:
        # Stands for the broker's other tasks: requests on other connections, replication, timers.
        nonlocal ticks
        while True:
            ticks += 1
            answers.append(error_of(manager, loaded_ids[-1]))
            await trio.lowlevel.checkpoint()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(other_work)
        await manager.load_transactions_for_partition(0, EPOCH)
        nursery.cancel_scope.cancel()

    assert len(reads) > 10 and all(max_bytes == 8192 and 0 < size <= 8192 for max_bytes, size in reads)
    assert ticks > len(loaded_ids) // (2 * LOAD_RECORDS_PER_YIELD)  # the other task ran every few hundred records
    assert set(answers[:-1]) == {E.COORDINATOR_LOAD_IN_PROGRESS}  # and never saw the partition half loaded
    assert len(manager.all_transactions()) == len(loaded_ids)


async def test_a_resignation_during_the_load_leaves_nothing_installed(replicas: Replicas):
    write(replicas.partitions[0].log, [record(t, i) for i, t in enumerate(ids_on(0, 3000))], per_batch=10)
    manager = state_manager(replicas, load_buffer_size=2048)
    manager.add_loading_partition(0, EPOCH)
    resigned = False

    async def resign_soon() -> None:
        nonlocal resigned
        for _ in range(3):
            await trio.lowlevel.checkpoint()
        manager.remove_transactions_for_partition(0)
        resigned = True

    async with trio.open_nursery() as nursery:
        nursery.start_soon(resign_soon)
        assert await manager.load_transactions_for_partition(0, EPOCH) is None
    assert resigned
    assert manager.loading_partitions == {} and manager.owned_partitions == set() and manager.all_transactions() == []
    assert error_of(manager, ids_on(0, 1)[0]) == E.NOT_COORDINATOR


async def test_a_newer_election_during_the_load_supersedes_it(replicas: Replicas):
    loaded_ids = ids_on(0, 3000)
    write(replicas.partitions[0].log, [record(t, i) for i, t in enumerate(loaded_ids)], per_batch=10)
    manager = state_manager(replicas, load_buffer_size=2048)
    manager.add_loading_partition(0, EPOCH)
    results: dict[int, list[TransactionMetadata] | None] = {}

    async def load(epoch: int) -> None:
        results[epoch] = await manager.load_transactions_for_partition(0, epoch)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(load, EPOCH)
        for _ in range(3):
            await trio.lowlevel.checkpoint()
        manager.add_loading_partition(0, EPOCH + 1)  # leader again, at a newer leader epoch
        nursery.start_soon(load, EPOCH + 1)
    assert results == {EPOCH: None, EPOCH + 1: []}
    current = manager.get_transaction_state(loaded_ids[0])
    assert current is not None and current.coordinator_epoch == EPOCH + 1
    assert len(manager.all_transactions()) == len(loaded_ids)


async def test_an_empty_partition_is_served_at_once(replicas: Replicas):
    """`__transaction_state` just created: the request that created it goes on without a retry."""
    manager = state_manager(replicas)
    assert manager.add_loading_partition(1, EPOCH) is False
    assert manager.loading_partitions == {} and manager.owned_partitions == {1}
    assert manager.get_transaction_state(ids_on(1, 1)[0]) is None


# ---- the coordinator -----------------------------------------------------------------------------------------


async def producer_ids() -> int:
    return 9000


def coordinator_on(replicas: Replicas, load_buffer_size: int = 5242880,
                   tv: TransactionVersion = TV0) -> tuple[TransactionCoordinator, Markers]:
    manager = state_manager(replicas, load_buffer_size, tv)
    manager.active = False  # until the coordinator runs
    markers = Markers()
    return TransactionCoordinator(manager.config, manager, markers, producer_ids, lambda: NOW), markers  # type: ignore[arg-type]


async def test_every_transaction_api_answers_coordinator_load_in_progress_during_the_load(replicas: Replicas):
    ongoing = ids_on(0, 1)[0]
    write(replicas.partitions[0].log, [record(ongoing, 42, TransactionState.ONGOING)])
    coordinator, _markers = coordinator_on(replicas)
    coordinator.state_manager.active = True
    coordinator.on_elected(0, EPOCH)  # no nursery: the load waits for `run`
    tps = {("orders", 0)}
    assert (await coordinator.handle_init_producer_id(ongoing, 1000, None)).error == E.COORDINATOR_LOAD_IN_PROGRESS
    assert (await coordinator.handle_init_producer_id(ids_on(0, 1, "new")[0], 1000, None)).error \
        == E.COORDINATOR_LOAD_IN_PROGRESS
    assert await coordinator.handle_add_partitions_to_transaction(ongoing, 42, 0, tps, TV0) \
        == E.COORDINATOR_LOAD_IN_PROGRESS
    assert (await coordinator.handle_end_transaction(ongoing, 42, 0, True, TV0)).error \
        == E.COORDINATOR_LOAD_IN_PROGRESS
    assert coordinator.handle_verify_partitions_in_transaction(ongoing, 42, 0, tps) \
        == {("orders", 0): E.COORDINATOR_LOAD_IN_PROGRESS}
    assert error_of(coordinator.state_manager, ongoing) == E.COORDINATOR_LOAD_IN_PROGRESS  # DescribeTransactions
    assert coordinator.state_manager.loading_partitions == {0: EPOCH}  # ListTransactions


async def test_the_coordinator_loads_in_its_nursery_and_then_sends_the_prepared_transactions_markers(
        replicas: Replicas):
    committing, aborting, ongoing = ids_on(0, 3)
    write(replicas.partitions[0].log, [record(committing, 1, TransactionState.PREPARE_COMMIT),
                                       record(aborting, 2, TransactionState.PREPARE_ABORT),
                                       record(ongoing, 3, TransactionState.ONGOING)])
    coordinator, markers = coordinator_on(replicas)
    coordinator.on_elected(0, EPOCH)  # as at a broker's start: elected before the coordinator runs
    assert markers.removed == [0] and markers.sent == []
    assert coordinator.state_manager.loading_partitions == {0: EPOCH}
    async with trio.open_nursery() as nursery:
        await nursery.start(coordinator.run)
        await trio.testing.wait_all_tasks_blocked()
        assert sorted(markers.sent) == [(EPOCH, False, aborting), (EPOCH, True, committing)]
        current = coordinator.state_manager.get_transaction_state(committing)
        assert current is not None and current.metadata.pending_state is TransactionState.COMPLETE_COMMIT
        assert error_of(coordinator.state_manager, ongoing) is None

        coordinator.on_elected(1, EPOCH)  # elected while running: loaded at once in the nursery
        await trio.testing.wait_all_tasks_blocked()
        assert coordinator.state_manager.owned_partitions == {0, 1} and coordinator._loads == {}
        nursery.cancel_scope.cancel()


async def test_a_resignation_cancels_the_coordinators_load(replicas: Replicas):
    write(replicas.partitions[0].log, [record(t, i, TransactionState.PREPARE_COMMIT)
                                       for i, t in enumerate(ids_on(0, 3000))], per_batch=10)
    coordinator, markers = coordinator_on(replicas, load_buffer_size=1024)
    async with trio.open_nursery() as nursery:
        await nursery.start(coordinator.run)
        coordinator.on_elected(0, EPOCH)
        load = coordinator._loads[0]
        for _ in range(3):
            await trio.lowlevel.checkpoint()
        coordinator.on_resigned(0)
        assert load.cancel_called and coordinator._loads == {}
        await trio.testing.wait_all_tasks_blocked()
        assert coordinator.state_manager.owned_partitions == set() and markers.sent == []
        assert error_of(coordinator.state_manager, ids_on(0, 1)[0]) == E.NOT_COORDINATOR

        coordinator.on_elected(0, EPOCH + 1)  # back again: loaded at the newer epoch, markers sent once
        coordinator.on_elected(0, EPOCH + 2)  # and a newer election before that load ran
        await trio.testing.wait_all_tasks_blocked()
        assert {epoch for epoch, _, _ in markers.sent} == {EPOCH + 2} and len(markers.sent) == 3000
        nursery.cancel_scope.cancel()


# ---- the coordinator's fences and ends, written to a real log ------------------------------------------------

MAX_EPOCH = 32767  # Short.MaxValue
TV1, TV2 = TransactionVersion.TV_1, TransactionVersion.TV_2
TIMED_OUT = NOW - 120_000  # the transactions below started long before their 60 s timeout


async def loaded(replicas: Replicas, transactional_id: str, state: TransactionState, epoch: int,
                 tv: TransactionVersion) -> tuple[TransactionCoordinator, Markers]:
    """A coordinator at transaction version `tv` serving the id, loaded from its record in the log."""
    write(replicas.partitions[0].log, [record(transactional_id, 42, state, epoch=epoch, tv=tv, started_ms=TIMED_OUT)])
    coordinator, markers = coordinator_on(replicas, tv=tv)
    coordinator.state_manager.active = True
    coordinator.on_elected(0, EPOCH)
    assert await coordinator.state_manager.load_transactions_for_partition(0, EPOCH) == []
    return coordinator, markers


def logged(replicas: Replicas, transactional_id: str) -> list[tuple[str, int, int]]:
    """(state, producer id, epoch) of each value of the id in the log, in order."""
    values = [decode_value(value) for batch in CoordinatorLog(replicas, TRANSACTION_STATE_TOPIC, 1000).replay_batches(0)  # type: ignore[arg-type]
              for _, key, value in batch.records if decode_key(key) == transactional_id]
    return [(TransactionState.from_id(v.transaction_status).state_name, v.producer_id, v.producer_epoch)
            for v in values if v is not None]


def metadata_of(coordinator: TransactionCoordinator, transactional_id: str) -> TransactionMetadata:
    current = coordinator.state_manager.get_transaction_state(transactional_id)
    assert current is not None
    return current.metadata


async def test_a_version_2_transaction_timing_out_at_the_last_epoch_is_aborted_and_its_id_gets_a_new_producer_id(
        replicas: Replicas):
    """KAFKA-19367: at transaction version 2 the abort's own bump is the fence, so a transaction at epoch 32766
    aborts at 32767 (two bumps would overflow, leaving it Ongoing for good and its partitions' last stable offset
    stuck); the markers go out, and the next producer gets a new producer id."""
    txn = ids_on(0, 1)[0]
    coordinator, markers = await loaded(replicas, txn, TransactionState.ONGOING, MAX_EPOCH - 1, TV2)
    await coordinator.abort_timed_out_transactions()
    assert markers.sent == [(EPOCH, False, txn)]  # the abort markers, which release the last stable offset
    metadata = metadata_of(coordinator, txn)
    assert (metadata.state, metadata.producer_epoch, metadata.last_producer_epoch) == (
        TransactionState.PREPARE_ABORT, MAX_EPOCH, MAX_EPOCH - 1)
    await markers.written(coordinator.state_manager, txn)
    assert (await coordinator.handle_init_producer_id(txn, 60_000, None)) == (E.NONE, 9000, 0)
    assert logged(replicas, txn) == [("Ongoing", 42, MAX_EPOCH - 1), ("PrepareAbort", 42, MAX_EPOCH),
                                     ("CompleteAbort", 42, MAX_EPOCH), ("Empty", 9000, 0)]


@pytest.mark.parametrize("tv", [TV1, TV2], ids=["tv1", "tv2"])
async def test_a_producer_recovering_after_its_transaction_timed_out(replicas: Replicas, tv: TransactionVersion):
    """KIP-360: the timed-out producer's InitProducerId with the id and epoch it had. At version 2 the abort bumped
    once and kept the producer's epoch as the last one, so it is recognised (NONE, the abort's epoch); before, the
    fence forgot the last epoch, and the producer is fenced."""
    txn = ids_on(0, 1)[0]
    coordinator, markers = await loaded(replicas, txn, TransactionState.ONGOING, 5, tv)
    await coordinator.abort_timed_out_transactions()
    await markers.written(coordinator.state_manager, txn)
    metadata = metadata_of(coordinator, txn)
    assert (metadata.state, metadata.producer_epoch) == (TransactionState.COMPLETE_ABORT, 6)
    recovered = await coordinator.handle_init_producer_id(txn, 60_000, (42, 5))
    if tv is TV2:
        assert recovered == (E.NONE, 42, 6)
        assert (await coordinator.handle_init_producer_id(txn, 60_000, (42, 4))).error == E.PRODUCER_FENCED
    else:
        assert recovered.error == E.PRODUCER_FENCED
    assert logged(replicas, txn)[:3] == [("Ongoing", 42, 5), ("PrepareAbort", 42, 6), ("CompleteAbort", 42, 6)]


@pytest.mark.parametrize("tv", [TV1, TV2], ids=["tv1", "tv2"])
async def test_a_fence_whose_write_failed_is_bumped_once_by_the_next(replicas: Replicas, tv: TransactionVersion):
    """Before version 2 the fence's epoch is in place in memory when its write fails, and the next fence reuses it
    (has_failed_epoch_fence); version 2 left the epoch alone, and the next fence bumps it once, as Kafka's does."""
    txn = ids_on(0, 1)[0]
    coordinator, markers = await loaded(replicas, txn, TransactionState.ONGOING, 5, tv)
    replicas.refusal = E.NOT_ENOUGH_REPLICAS
    await coordinator.abort_timed_out_transactions()
    metadata = metadata_of(coordinator, txn)
    assert (metadata.state, metadata.pending_state, metadata.has_failed_epoch_fence) == (
        TransactionState.ONGOING, None, tv is TV1)
    assert metadata.producer_epoch == (6 if tv is TV1 else 5)
    replicas.refusal = None
    await coordinator.abort_timed_out_transactions()
    assert markers.sent == [(EPOCH, False, txn)]
    assert logged(replicas, txn) == [("Ongoing", 42, 5), ("PrepareAbort", 42, 6)]


async def test_requests_with_the_next_producer_id_wait_for_the_rotation_to_complete(replicas: Replicas):
    """KAFKA-18660: a version 2 commit that exhausts the epochs hands the client the next producer id at once; until
    the markers are written and CompleteCommit installs it, the client's requests with it are answered the
    retriable CONCURRENT_TRANSACTIONS, not INVALID_PRODUCER_ID_MAPPING."""
    txn = ids_on(0, 1)[0]
    coordinator, markers = await loaded(replicas, txn, TransactionState.ONGOING, MAX_EPOCH - 1, TV2)
    orders = {("orders", 2)}
    assert await coordinator.handle_end_transaction(txn, 42, MAX_EPOCH - 1, True, TV2) == (E.NONE, 9000, 0)
    assert await coordinator.handle_add_partitions_to_transaction(txn, 9000, 0, orders, TV2) \
        == E.CONCURRENT_TRANSACTIONS
    assert (await coordinator.handle_end_transaction(txn, 9000, 0, False, TV2)).error == E.CONCURRENT_TRANSACTIONS
    # Before version 2 the producer id and epoch are checked first, as Kafka's EndTxn does.
    assert (await coordinator.handle_end_transaction(txn, 9000, 0, False, TV0)).error \
        == E.INVALID_PRODUCER_ID_MAPPING
    await markers.written(coordinator.state_manager, txn)
    assert await coordinator.handle_add_partitions_to_transaction(txn, 9000, 0, orders, TV2) == E.NONE
    assert logged(replicas, txn) == [("Ongoing", 42, MAX_EPOCH - 1), ("PrepareCommit", 42, MAX_EPOCH),
                                     ("CompleteCommit", 9000, 0), ("Ongoing", 9000, 0)]


async def test_a_transition_waits_for_the_isr_as_long_as_the_transactions_timeout(
        replicas: Replicas, autojump_clock: trio.testing.MockClock):
    """As Kafka's appendTransactionToLog: the acks=all wait of a transition lasts the transaction's timeout (here
    longer than the log's commit timeout of 1 s), then the client is told COORDINATOR_NOT_AVAILABLE and retries."""
    txn = ids_on(0, 1)[0]
    coordinator, _markers = coordinator_on(replicas)
    coordinator.state_manager.active = True
    coordinator.on_elected(0, EPOCH)  # an empty partition: served at once
    replicas.partitions[0].lagging = True
    started = trio.current_time()
    assert (await coordinator.handle_init_producer_id(txn, 5000, None)).error == E.COORDINATOR_NOT_AVAILABLE
    assert trio.current_time() - started == pytest.approx(5.0)
    replicas.partitions[0].lagging = False
    assert (await coordinator.handle_init_producer_id(txn, 5000, None)) == (E.NONE, 9000, 0)
