"""The group coordinator's side of transactions: offsets a TxnOffsetCommit wrote stay pending in their group until
the transaction's marker commits or aborts them, the same whether the marker comes live or in a replay, and nothing
that expires offsets loses or commits them early. Records are kept in memory with their transactions,
and once in a real partition log."""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from minikafka.broker.coordinator.group.group import GroupState
from minikafka.broker.coordinator.group.group_coordinator import GroupCoordinator, JoinRequest
from minikafka.broker.coordinator.group.group_coordinator_config import GroupCoordinatorConfig
from minikafka.broker.coordinator.group.group_metadata_log import (
    GroupMetadataLog,
    OffsetCommitKey,
    TransactionalRecord,
    TransactionMarker,
    decode_key,
    decode_value,
)
from minikafka.broker.coordinator.group.offset_manager import OffsetCommitEntry
from minikafka.broker.replication.delayed_produce import AppendResult
from minikafka.protocol.end_transaction_marker import ControlRecordType, EndTransactionMarker, build_marker_batch
from minikafka.protocol.errors import ErrorCode, KafkaError, error_of
from minikafka.protocol.internal_topics import GROUP_METADATA_TOPIC
from minikafka.protocol.record_batch import iter_batches
from minikafka.storage.log import AppendOrigin, Log
from minikafka.storage.log_config import LogConfig

E = ErrorCode
NO_PRODUCER = -1
PID, OTHER_PID = 4000, 4001
PROTOCOLS = [("range", b"meta-range")]


class TxnMemoryLog:
    """The coordinator's log in memory, transactions included: each append keeps its producer (NO_PRODUCER
    outside a transaction), and markers are written where a test says."""

    def __init__(self) -> None:
        self.entries: dict[int, list[tuple[int, list[tuple[bytes, bytes | None]]] | TransactionMarker]] = \
            defaultdict(list)
        self.replication_fails_with: ErrorCode | None = None

    def append(self, partition, records, now_ms, *, producer_id=NO_PRODUCER, producer_epoch=-1):
        self.entries[partition].append((producer_id, list(records)))
        return E.NONE

    def write_marker(self, partition: int, producer_id: int, commit: bool) -> None:
        self.entries[partition].append(TransactionMarker(producer_id, commit))

    def replay(self, partition):
        for entry in self.entries.get(partition, []):
            if isinstance(entry, TransactionMarker):
                yield entry
                continue
            producer_id, records = entry
            for key_bytes, value_bytes in records:
                key = decode_key(key_bytes)
                value = decode_value(key, value_bytes)
                yield (key, value) if producer_id == NO_PRODUCER else TransactionalRecord(producer_id, key, value)

    async def wait_replicated(self, partition):
        return self.replication_fails_with or E.NONE


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000_000

    def __call__(self) -> int:
        return self.now


def make(log: TxnMemoryLog, clock: Clock | None = None, **overrides) -> GroupCoordinator:
    config = GroupCoordinatorConfig(num_partitions=5, initial_rebalance_delay_ms=0, min_session_timeout_ms=1000,
                                    **overrides)
    coordinator = GroupCoordinator(config, log, clock or Clock())
    coordinator.load()
    return coordinator


async def txn_commit(coordinator: GroupCoordinator, group: str, offsets: dict[tuple[str, int], int], *,
                     pid: int = PID, epoch: int = 0, member: str = "", instance: str | None = None,
                     generation: int = -1, version: int = 5) -> list[ErrorCode]:
    entries = [OffsetCommitEntry(t, p, offset, -1, "") for (t, p), offset in offsets.items()]
    return await coordinator.offset_manager.commit_transactional_offsets(group, pid, epoch, member, instance,
                                                                        generation, entries, version)


async def plain_commit(coordinator: GroupCoordinator, group: str, offsets: dict[tuple[str, int], int]) -> None:
    entries = [OffsetCommitEntry(t, p, offset, -1, "") for (t, p), offset in offsets.items()]
    assert await coordinator.offset_manager.commit_offsets(group, "", None, -1, -1, entries, 8) == \
        [E.NONE] * len(entries)


def end_txn(coordinator: GroupCoordinator, log: TxnMemoryLog, commit: bool, *groups: str, pid: int = PID) -> None:
    """What WriteTxnMarkers does for the transaction: a marker in each group's partition, then the coordinator."""
    partitions = {coordinator.group_manager.partition_for(group) for group in groups}
    for partition in partitions:
        log.write_marker(partition, pid, commit)
    coordinator.on_transaction_completed(pid, partitions, commit)


def committed(coordinator: GroupCoordinator, group: str, *tps: tuple[str, int], require_stable: bool = False):
    """Per partition: the committed offset, None, or the error (UNSTABLE_OFFSET_COMMIT)."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in tps:
        by_topic.setdefault(topic, []).append(partition)
    found = coordinator.offset_manager.fetch_offsets(group, list(by_topic.items()), require_stable)
    return [v if v is None or isinstance(v, ErrorCode) else v.offset for _topic, parts in found for _p, v in parts]


T0, T1 = ("t", 0), ("t", 1)


async def test_pending_offsets_are_invisible_until_the_commit_marker():
    log = TxnMemoryLog()
    coordinator = make(log)
    assert await txn_commit(coordinator, "g", {T0: 5, T1: 6}) == [E.NONE, E.NONE]
    assert committed(coordinator, "g", T0, T1) == [None, None]
    assert committed(coordinator, "g", T0, T1, require_stable=True) == [E.UNSTABLE_OFFSET_COMMIT] * 2
    assert coordinator.offset_manager.fetch_offsets("g", None, require_stable=True) == []
    assert coordinator.groups["g"].state is GroupState.EMPTY  # a simple group, created by the commit

    end_txn(coordinator, log, True, "g")
    assert committed(coordinator, "g", T0, T1, require_stable=True) == [5, 6]
    assert committed(make(log), "g", T0, T1, require_stable=True) == [5, 6]


async def test_abort_drops_pending_offsets_and_keeps_the_committed_ones():
    log = TxnMemoryLog()
    coordinator = make(log)
    await plain_commit(coordinator, "g", {T0: 5})
    await txn_commit(coordinator, "g", {T0: 9, T1: 10})
    assert committed(coordinator, "g", T0, T1) == [5, None]
    assert committed(coordinator, "g", T0, T1, require_stable=True) == [E.UNSTABLE_OFFSET_COMMIT] * 2
    # Among all offsets only committed ones are listed; a pending one makes its partition unstable.
    assert [(t, [(p, v) for p, v in parts]) for t, parts in
            coordinator.offset_manager.fetch_offsets("g", None, require_stable=True)] == [
        ("t", [(0, E.UNSTABLE_OFFSET_COMMIT)])]

    end_txn(coordinator, log, False, "g")
    for c in (coordinator, make(log)):
        assert committed(c, "g", T0, T1, require_stable=True) == [5, None]
        assert not c.groups["g"].has_open_transactions


async def test_a_loaded_partition_keeps_open_transactions_pending_until_their_marker():
    log = TxnMemoryLog()
    first = make(log)
    await txn_commit(first, "g", {T0: 5})
    await txn_commit(first, "g", {T1: 6}, pid=OTHER_PID)
    end_txn(first, log, False, "g", pid=OTHER_PID)

    restarted = make(log)
    assert committed(restarted, "g", T0, T1) == [None, None]
    assert committed(restarted, "g", T0, T1, require_stable=True) == [E.UNSTABLE_OFFSET_COMMIT, None]
    end_txn(restarted, log, True, "g")
    assert committed(restarted, "g", T0, T1, require_stable=True) == [5, None]
    assert committed(make(log), "g", T0, T1) == [5, None]


async def test_the_offset_written_last_wins_between_plain_and_transactional_commits():
    log = TxnMemoryLog()
    coordinator = make(log)
    await txn_commit(coordinator, "g", {T0: 9})  # written before the plain commit below: it loses
    await plain_commit(coordinator, "g", {T0: 12, T1: 3})
    await txn_commit(coordinator, "g", {T1: 4}, pid=OTHER_PID)  # written after: it wins
    end_txn(coordinator, log, True, "g")
    end_txn(coordinator, log, True, "g", pid=OTHER_PID)
    assert committed(coordinator, "g", T0, T1) == [12, 4]
    assert committed(make(log), "g", T0, T1) == [12, 4]


async def test_a_marker_ends_only_its_producer_in_the_partitions_it_was_written_to():
    log = TxnMemoryLog()
    coordinator = make(log)
    manager = coordinator.group_manager
    partition_g, partition_h = manager.partition_for("g"), manager.partition_for("h")
    assert partition_g != partition_h == manager.partition_for("open")  # what the test needs of the group ids
    for group in ("g", "h", "open"):
        await txn_commit(coordinator, group, {T0: 1})
    await txn_commit(coordinator, "g", {T1: 2}, pid=OTHER_PID)

    log.write_marker(partition_g, PID, True)
    coordinator.on_transaction_completed(PID, [partition_g], True)
    assert committed(coordinator, "g", T0, T1, require_stable=True) == [1, E.UNSTABLE_OFFSET_COMMIT]
    assert committed(coordinator, "h", T0, require_stable=True) == [E.UNSTABLE_OFFSET_COMMIT]
    log.write_marker(partition_h, PID, False)
    coordinator.on_transaction_completed(PID, [partition_h], False)
    for group in ("h", "open"):
        assert committed(coordinator, group, T0, require_stable=True) == [None]
    assert committed(make(log), "g", T0, T1, require_stable=True) == [1, E.UNSTABLE_OFFSET_COMMIT]


@pytest.fixture
async def running(nursery):
    async def start(coordinator: GroupCoordinator) -> GroupCoordinator:
        await nursery.start(coordinator.run)
        return coordinator
    return start


@pytest.mark.parametrize("version", [0, 3, 5])
async def test_transactional_commits_need_no_membership_and_no_finished_rebalance(running, version):
    log = TxnMemoryLog()
    coordinator = await running(make(log))
    join = coordinator.join_group(JoinRequest("g", "", None, "c", "/h", 10000, 20000, "consumer", PROTOCOLS, 3))
    member = (await join.wait()).member_id
    group = coordinator.groups["g"]
    assert group.is_in(GroupState.COMPLETING_REBALANCE) and group.generation_id == 1
    # Without generation (older producers know none) a group with members takes it, unlike OffsetCommit.
    assert await txn_commit(coordinator, "g", {T0: 1}, version=version) == [E.NONE]
    # With one, it must be the member's, but a rebalance in progress does not refuse it.
    assert await txn_commit(coordinator, "g", {T0: 2}, member=member, generation=1, version=version) == [E.NONE]
    assert group.pending_txn_offsets[PID][T0].offset == 2


async def test_transactional_commits_are_validated_as_kafka_does(running):
    log = TxnMemoryLog()
    coordinator = await running(make(log))
    join = coordinator.join_group(JoinRequest("g", "", "static-1", "c", "/h", 10000, 20000, "consumer", PROTOCOLS,
                                              5))
    member = (await join.wait()).member_id
    coordinator.sync_group("g", 1, member, "static-1", None, None, [(member, b"")])

    async def error_of_commit(group="g", **kw):
        try:
            await txn_commit(coordinator, group, {T0: 1}, **kw)
        except KafkaError as exc:
            return exc.code
        return E.NONE

    assert await error_of_commit(member=member, instance="static-1", generation=1) == E.NONE
    assert await error_of_commit(member=member, instance="static-1", generation=2) == E.ILLEGAL_GENERATION
    assert await error_of_commit(member="ghost", generation=1) == E.UNKNOWN_MEMBER_ID
    assert await error_of_commit(member="ghost", instance="static-1", generation=1) == E.FENCED_INSTANCE_ID
    assert await error_of_commit(member=member, instance="static-2", generation=1) == E.UNKNOWN_MEMBER_ID
    # An unknown group with a generation is ILLEGAL_GENERATION in every version (no GROUP_ID_NOT_FOUND).
    assert await error_of_commit("unknown", member="m", generation=3, version=5) == E.ILLEGAL_GENERATION
    assert "unknown" not in coordinator.groups
    assert await error_of_commit("") == E.INVALID_GROUP_ID
    # What transaction verification refuses is never written (a producer id -1 would make a plain commit).
    assert await error_of_commit(pid=-1) == E.INVALID_PRODUCER_ID_MAPPING
    assert await error_of_commit(epoch=-1) == E.PRODUCER_FENCED
    assert await error_of_commit("fresh", pid=-1) == E.INVALID_PRODUCER_ID_MAPPING and "fresh" not in coordinator.groups
    coordinator.group_manager.unload_partition(coordinator.group_manager.partition_for("g"))
    assert await error_of_commit() == E.NOT_COORDINATOR
    coordinator.shutdown()
    assert await error_of_commit() == E.COORDINATOR_NOT_AVAILABLE


async def test_too_large_metadata_is_refused_per_partition_and_a_failed_write_changes_nothing():
    log = TxnMemoryLog()
    coordinator = make(log, offset_metadata_max_bytes=4)
    entries = [OffsetCommitEntry("t", 0, 1, -1, "fits"), OffsetCommitEntry("t", 1, 2, -1, "too long")]
    assert await coordinator.offset_manager.commit_transactional_offsets("g", PID, 0, "", None, -1, entries, 5) == [
        E.NONE, E.OFFSET_METADATA_TOO_LARGE]
    assert committed(coordinator, "g", T0, T1, require_stable=True) == [E.UNSTABLE_OFFSET_COMMIT, None]

    log.replication_fails_with = E.REQUEST_TIMED_OUT
    assert await txn_commit(coordinator, "g", {T0: 7, T1: 8}) == [E.REQUEST_TIMED_OUT] * 2
    assert coordinator.groups["g"].pending_txn_offsets[PID][T0].offset == 1  # taken back
    assert T1 not in coordinator.groups["g"].pending_txn_offsets[PID]


async def test_expiration_spares_offsets_and_groups_an_open_transaction_holds():
    log, clock = TxnMemoryLog(), Clock()
    coordinator = make(log, clock, offsets_retention_ms=60_000)
    offsets = coordinator.offset_manager
    await plain_commit(coordinator, "g", {T0: 5, T1: 6})
    await txn_commit(coordinator, "g", {T0: 7})
    await txn_commit(coordinator, "pending-only", {T0: 1})
    clock.now += 60_000
    assert offsets.cleanup_group_metadata() == 1  # T1 only: T0 has an offset pending
    assert committed(coordinator, "g", T0, T1) == [5, None]
    assert "pending-only" in coordinator.groups

    end_txn(coordinator, log, True, "g", "pending-only")
    assert committed(coordinator, "g", T0) == [7]
    clock.now += 60_000
    assert offsets.cleanup_group_metadata() == 2
    assert "g" not in coordinator.groups and "pending-only" not in coordinator.groups
    assert "g" not in make(log).groups


async def test_deleting_offsets_groups_or_topics_takes_their_pending_offsets_too():
    log = TxnMemoryLog()
    coordinator = make(log)
    offsets = coordinator.offset_manager
    await txn_commit(coordinator, "g", {T0: 5, T1: 6, ("other", 0): 7})
    assert offsets.delete_offsets("g", [("t", [0])]) == [("t", [(0, E.NONE)])]
    assert offsets.on_topic_deleted("other") == 1
    await txn_commit(coordinator, "doomed", {T0: 1})
    assert coordinator.delete_groups(["doomed"]) == [("doomed", E.NONE)]

    end_txn(coordinator, log, True, "g", "doomed")
    for c in (coordinator, make(log)):
        assert committed(c, "g", T0, T1, ("other", 0)) == [None, 6, None]
        assert "doomed" not in c.groups
    tombstones = [decode_key(k) for entry in log.entries.values() for e in entry
                  if not isinstance(e, TransactionMarker) for k, v in e[1] if v is None]
    assert OffsetCommitKey("doomed", "t", 0) in tombstones


class OneLogPartition:
    """The leader of partition 0 of __consumer_offsets, alone in its ISR, on a real log."""

    def __init__(self, log: Log) -> None:
        self.log = log

    def check_enough_replicas_reach_offset(self, required_offset):
        return True, E.NONE


class OneLogReplicaManager:
    """A replica manager leading one partition of __consumer_offsets on a real log."""

    def __init__(self, log: Log) -> None:
        self.partition = OneLogPartition(log)

    def get_partition(self, topic, index):
        return self.partition if (topic, index) == (GROUP_METADATA_TOPIC, 0) else None

    def append_to_local_log(self, required_acks, entries, origin=AppendOrigin.CLIENT):
        results = {}
        for tp, records in entries.items():
            try:
                results[tp] = AppendResult(None, self.partition.log.append_as_leader(records, 0, Clock()(),
                                                                                     origin=origin))
            except Exception as exc:  # noqa: BLE001 - the append's error is the answer, as in the replica manager
                results[tp] = AppendResult(error_of(exc), None)
        return results


def coordinator_on(metadata_log: GroupMetadataLog) -> GroupCoordinator:
    """A coordinator of one partition of __consumer_offsets, loaded from `metadata_log`."""
    coordinator = GroupCoordinator(GroupCoordinatorConfig(num_partitions=1), metadata_log, Clock())
    coordinator.group_manager.active = True
    coordinator.on_elected(0)
    return coordinator


def real_log(tmp_path: Path) -> tuple[Log, GroupMetadataLog]:
    log = Log.open(tmp_path / f"{GROUP_METADATA_TOPIC}-0", GROUP_METADATA_TOPIC, 0, LogConfig(), now_ms=Clock()())
    return log, GroupMetadataLog(OneLogReplicaManager(log))


async def test_a_real_log_replays_transactional_batches_and_their_markers(tmp_path: Path):
    log, metadata_log = real_log(tmp_path)
    coordinator = coordinator_on(metadata_log)
    now = Clock()()

    def marker(pid: int, commit: bool) -> None:
        control = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
        log.append_as_leader(build_marker_batch(pid, 0, EndTransactionMarker(control, 1), now), 0, now,
                             origin=AppendOrigin.COORDINATOR)
        coordinator.on_transaction_completed(pid, [0], commit)

    await plain_commit(coordinator, "g", {T0: 1})
    assert await txn_commit(coordinator, "g", {T0: 2, T1: 3}) == [E.NONE, E.NONE]
    assert await txn_commit(coordinator, "g", {T0: 4}, pid=OTHER_PID) == [E.NONE]
    marker(OTHER_PID, False)
    assert await txn_commit(coordinator, "open", {T0: 9}, pid=OTHER_PID + 1) == [E.NONE]
    marker(PID, True)
    assert committed(coordinator, "g", T0, T1) == [2, 3]
    # Batches of the producer's transaction, base sequence 0 as Kafka's coordinators write them; then markers.
    data = log.read(0, 1 << 20)
    assert [(h.producer_id, h.is_transactional, h.is_control, h.base_sequence) for _, h in iter_batches(data)] == [
        (NO_PRODUCER, False, False, -1), (PID, True, False, 0), (OTHER_PID, True, False, 0),
        (OTHER_PID, True, True, -1), (OTHER_PID + 1, True, False, 0), (PID, True, True, -1)]

    reloaded = coordinator_on(metadata_log)
    assert committed(reloaded, "g", T0, T1, require_stable=True) == [2, 3]
    assert committed(reloaded, "open", T0) == [None]
    assert committed(reloaded, "open", T0, require_stable=True) == [E.UNSTABLE_OFFSET_COMMIT]


async def test_a_producer_commits_offsets_twice_in_one_transaction_to_a_real_log(tmp_path: Path):
    """Every TxnOffsetCommit batch is at sequence 0, as Kafka writes them: the log takes the second for no retry."""
    log, metadata_log = real_log(tmp_path)
    coordinator = coordinator_on(metadata_log)
    assert await txn_commit(coordinator, "g", {T0: 1}) == [E.NONE]
    assert await txn_commit(coordinator, "g", {T0: 2}) == [E.NONE]
    assert log.log_end_offset == 2
    assert coordinator_on(metadata_log).groups["g"].pending_txn_offsets[PID][T0].offset == 2
