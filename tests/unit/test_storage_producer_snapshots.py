"""Producer-state snapshots (`<offset>.snapshot`): Kafka's bytes, where the log takes and deletes them, and the state
a log reopened from them has, after a clean close or a crash."""

from __future__ import annotations

import logging
import struct
from pathlib import Path

import pytest
from crc32c import crc32c
from kafka.record.memory_records import MemoryRecordsBuilder

from minikafka.protocol.end_transaction_marker import ControlRecordType, EndTransactionMarker, build_marker_batch
from minikafka.protocol.record_batch import INT32_MAX
from minikafka.storage import log as log_module
from minikafka.storage.errors import OutOfOrderSequenceError
from minikafka.storage.log import AppendInfo, AppendOrigin, Log
from minikafka.storage.log_config import LogConfig
from minikafka.storage.producer_state import BatchMetadata, ProducerStateManager
from minikafka.storage.producer_state_snapshot import (
    CorruptSnapshotError,
    ProducerEntry,
    decode_snapshot,
    encode_snapshot,
)
from minikafka.storage.transaction_index import AbortedTxn

NOW = 1_700_000_000_000
DAY_MS = 86_400_000
SMALL_SEGMENTS = {"internal.segment.bytes": "400"}


def batch(pid: int, seq: int, count: int = 2, *, epoch: int = 0, transactional: bool = False,
          timestamp: int = NOW) -> bytearray:
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20, transactional=transactional,
                                   producer_id=pid, producer_epoch=epoch, base_sequence=seq)
    for i in range(count):
        builder.append(timestamp=timestamp + i, key=b"k", value=b"v%d" % i, headers=[])
    builder.close()
    return bytearray(builder.buffer())


def end_txn(log: Log, pid: int, epoch: int, kind: ControlRecordType, coordinator_epoch: int = 5,
            timestamp: int = NOW) -> AppendInfo:
    marker = build_marker_batch(pid, epoch, EndTransactionMarker(kind, coordinator_epoch), timestamp)
    return log.append_as_leader(marker, 0, timestamp, origin=AppendOrigin.COORDINATOR)


def open_log(path: Path, *, recovery_point: int = 0, now_ms: int = NOW, **props: str) -> Log:
    return Log.open(path / "t-0", "t", 0, LogConfig.from_props(props), recovery_point=recovery_point,
                    now_ms=now_ms)


def snapshots(path: Path) -> list[int]:
    return sorted(int(p.stem) for p in (path / "t-0").glob("*.snapshot"))


def fill(log: Log, rounds: int = 6, *, flush_after: int | None = None) -> None:
    """Several segments of idempotent (pids 1, 4) and transactional (pids 2, 3) producers: pid 2 commits and
    aborts in turn, pid 3 keeps one transaction open across segments until it aborts, and both leave one open.
    `flush_after` flushes up to the active segment after that round, as the broker does after a roll."""
    log.append_as_leader(batch(4, 0), 0, NOW)
    for r in range(rounds):
        log.append_as_leader(batch(1, 3 * r, 3), 0, NOW)
        log.append_as_leader(batch(2, 2 * r, transactional=True), 0, NOW)
        if r == 1:
            log.append_as_leader(batch(3, 0, transactional=True), 0, NOW)
        if r == rounds - 2:
            end_txn(log, 3, 0, ControlRecordType.ABORT)
        if r == rounds - 1:
            log.append_as_leader(batch(3, 2, transactional=True), 0, NOW)
        else:
            end_txn(log, 2, 0, ControlRecordType.ABORT if r % 2 else ControlRecordType.COMMIT)
        if r == flush_after:
            log.flush(log.active_segment.base_offset)


def state_of(log: Log) -> tuple[object, ...]:
    """Producer state as a snapshot keeps it (the last batch of each producer, without its timestamp, which Kafka
    reloads as the producer's last timestamp), the open transactions, the first unstable offset once every
    marker is below the high watermark, and the aborted transactions a read_committed fetch sees."""
    state = log.producer_state
    state.on_high_watermark_updated(log.log_end_offset)
    producers = {pid: (e.producer_epoch, e.last_seq, e.batches[-1][:4] if e.batches else None, e.last_timestamp,
                       e.coordinator_epoch, e.current_txn_first_offset)
                 for pid, e in state.last_entries().items()}
    return (producers, [(t.producer_id, t.first_offset) for t in state.ongoing_transactions()],
            log.first_unstable_offset, log.collect_aborted_transactions(0, log.log_end_offset))


# ----------------------------------------------------------------- the file format


def test_snapshot_bytes_are_kafkas(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(batch(9, 0, transactional=True, epoch=2), 0, NOW)  # offsets 0-1
    end_txn(log, 9, 2, ControlRecordType.COMMIT, coordinator_epoch=5)  # 2
    log.append_as_leader(batch(9, 2, transactional=True, epoch=2), 0, NOW)  # 3-4, left open
    log.append_as_leader(batch(7, 0, 3), 0, NOW)  # 5-7
    log.close()
    assert snapshots(tmp_path) == [8]
    body = bytes.fromhex(
        "00000002"  # two entries, by producer id
        # ProducerId 7, Epoch 0, LastSequence 2, LastOffset 7, OffsetDelta 2, Timestamp NOW + 2,
        # CoordinatorEpoch -1, CurrentTxnFirstOffset -1
        "0000000000000007" "0000" "00000002" "0000000000000007" "00000002" "0000018bcfe56802"
        "ffffffff" "ffffffffffffffff"
        # ProducerId 9, Epoch 2, LastSequence 3, LastOffset 4, OffsetDelta 1, Timestamp NOW + 1,
        # CoordinatorEpoch 5, CurrentTxnFirstOffset 3
        "0000000000000009" "0002" "00000003" "0000000000000004" "00000001" "0000018bcfe56801"
        "00000005" "0000000000000003"
    )
    assert NOW + 2 == 0x18BCFE56802
    crc = 0x277B2190  # worked out bit by bit with the Castagnoli polynomial, not by the code under test
    assert crc32c(body) == crc
    expected = bytes.fromhex("0001") + struct.pack(">I", crc) + body  # version 1, then the CRC32C of the rest
    assert (tmp_path / "t-0" / "00000000000000000008.snapshot").read_bytes() == expected


def test_an_entry_without_batches_and_a_wrapped_sequence_round_trip(tmp_path: Path) -> None:
    no_batch = ProducerEntry(5, 3, -1, -1, 0, NOW, 7, -1)  # Kafka's entry after only a marker with a new epoch
    wrapped = ProducerEntry(6, 0, 1, 100, 4, NOW, -1, -1)  # sequences INT32_MAX - 2 .. 1
    data = encode_snapshot([no_batch, wrapped])
    assert decode_snapshot(data) == [no_batch, wrapped]
    (tmp_path / "00000000000000000101.snapshot").write_bytes(data)
    state = ProducerStateManager(tmp_path)
    assert state.truncate_and_reload(0, 101, NOW) == 101
    assert not state.last_entries()[5].batches and state.last_entries()[5].coordinator_epoch == 7
    assert list(state.last_entries()[6].batches) == [BatchMetadata(INT32_MAX - 2, 1, 96, 100, NOW)]


@pytest.mark.parametrize(("damage", "reason"), [
    (lambda data: data[:-1], "schema"),  # torn
    (lambda data: data + b"\x00", "CRC"),  # the CRC covers every byte after it
    (lambda data: data[:9], "schema"),
    (lambda data: b"", "schema"),
    (lambda data: b"\x00\x02" + data[2:], "version"),
    (lambda data: data[:20] + bytes([data[20] ^ 1]) + data[21:], "CRC"),
])
def test_damaged_snapshots_are_corrupt(damage: object, reason: str) -> None:
    data = encode_snapshot([ProducerEntry(5, 3, 9, 20, 2, NOW, 7, 15)])
    with pytest.raises(CorruptSnapshotError, match=reason):
        decode_snapshot(damage(data))  # type: ignore[operator]


# ----------------------------------------------------------------- where snapshots are taken and deleted


def test_rolls_snapshot_each_new_segment_and_flush_makes_them_durable(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    flushed: list[str] = []
    monkeypatch.setattr(log_module, "flush_snapshot", lambda path: flushed.append(path.name))
    log = open_log(tmp_path, **SMALL_SEGMENTS)
    fill(log)
    bases = [s.base_offset for s in log.segments]
    assert len(bases) >= 5
    assert snapshots(tmp_path) == bases[1:]  # none at 0: nothing came before it
    assert flushed == []  # a roll does not fsync its snapshot
    log.flush(bases[2])
    assert flushed == [f"{bases[1]:020d}.snapshot", f"{bases[2]:020d}.snapshot"]
    log.close()
    assert snapshots(tmp_path) == [*bases[1:], log.log_end_offset]
    assert flushed[2:] == [f"{b:020d}.snapshot" for b in bases[3:]]  # the rest by close's flush


def test_truncation_deletes_the_snapshots_past_the_new_end(tmp_path: Path) -> None:
    log = open_log(tmp_path, **SMALL_SEGMENTS)
    fill(log)
    bases = [s.base_offset for s in log.segments]
    log.truncate_to(bases[3], now_ms=NOW)  # at a segment's base: its snapshot is the state there
    assert log.log_end_offset == bases[3]
    assert snapshots(tmp_path) == bases[1:4]
    second = [header.base_offset for _, header in log.segments[2].batches()][1]
    log.truncate_to(second + 1, now_ms=NOW)  # inside a segment: the batch holding the offset goes too
    end = log.log_end_offset
    assert end == second
    assert snapshots(tmp_path) == [*bases[1:3], end]  # a new one at the end
    log.truncate_fully_and_start_at(1000, now_ms=NOW)
    assert snapshots(tmp_path) == []
    log.close()
    assert snapshots(tmp_path) == []  # nothing appended since: no state to keep


def test_segment_deletion_deletes_the_snapshots_below_the_first_segment_left(tmp_path: Path) -> None:
    log = open_log(tmp_path, **SMALL_SEGMENTS)
    fill(log)
    log.close()
    log = open_log(tmp_path, recovery_point=log.recovery_point, **SMALL_SEGMENTS)
    bases = [s.base_offset for s in log.segments]
    end = log.log_end_offset
    assert snapshots(tmp_path) == [*bases[1:], end]
    log.maybe_increment_log_start_offset(bases[3] + 1)  # DeleteRecords
    assert snapshots(tmp_path) == [*bases[3:], end]
    assert log.delete_old_segments(NOW + 10 * DAY_MS, end) == len(bases) - 3  # retention.ms: everything goes
    assert [s.base_offset for s in log.segments] == [end]
    assert snapshots(tmp_path) == [end]
    log.close()


def test_stray_snapshots_are_removed_on_load(tmp_path: Path) -> None:
    log = open_log(tmp_path, **SMALL_SEGMENTS)
    fill(log)
    log.close()
    bases = [s.base_offset for s in log.segments]
    end = log.log_end_offset
    directory = tmp_path / "t-0"
    (directory / f"{bases[1] + 1:020d}.snapshot").write_bytes((directory / f"{bases[1]:020d}.snapshot").read_bytes())
    log = open_log(tmp_path, recovery_point=end, **SMALL_SEGMENTS)
    assert snapshots(tmp_path) == [*bases[1:], end]  # the latest stray is kept: the one close wrote
    log.close()


# ----------------------------------------------------------------- loading


def test_reopening_after_a_clean_close_loads_the_snapshot_and_replays_nothing(tmp_path: Path) -> None:
    log = open_log(tmp_path, **SMALL_SEGMENTS)
    fill(log)
    before = state_of(log)
    assert before[1] and before[3]  # open and aborted transactions to restore
    assert len(log.producer_state.last_entry(1).batches) == 5  # type: ignore[union-attr]
    log.close()
    files = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "t-0").glob("*.snapshot")}
    reopened = open_log(tmp_path, recovery_point=log.recovery_point, **SMALL_SEGMENTS)
    assert state_of(reopened) == before
    # From the snapshot alone: a replay would remember the producer's last five batches.
    assert len(reopened.producer_state.last_entry(1).batches) == 1  # type: ignore[union-attr]
    assert {p.name: p.stat().st_mtime_ns for p in (tmp_path / "t-0").glob("*.snapshot")} == files
    reopened.close()


def test_reopening_after_a_crash_replays_from_a_snapshot_and_rebuilds_the_transaction_indexes(
        tmp_path: Path) -> None:
    log = open_log(tmp_path, **SMALL_SEGMENTS)
    fill(log, rounds=10, flush_after=3)
    recovery_point = log.recovery_point
    before = state_of(log)
    bases = [s.base_offset for s in log.segments]
    first_recovered = max(b for b in bases if b <= recovery_point)
    assert bases.index(first_recovered) < len(bases) - 2
    aborted = log.collect_aborted_transactions(0, log.log_end_offset)
    assert any(t.first_offset < first_recovered <= t.last_offset for t in aborted)  # open at the snapshot
    assert any(t.first_offset >= first_recovered for t in aborted)
    log.abandon()
    directory = tmp_path / "t-0"
    for base in bases:
        if base >= first_recovered:  # unflushed: their aborted transactions may be lost
            (directory / f"{base:020d}.txnindex").unlink(missing_ok=True)
    reopened = open_log(tmp_path, recovery_point=recovery_point, **SMALL_SEGMENTS)
    assert state_of(reopened) == before
    end = reopened.log_end_offset
    # The snapshots written since the last flush went; the replay took new ones at the last two bases and the end.
    assert snapshots(tmp_path) == [*(b for b in bases[1:] if b <= first_recovered), *bases[-2:], end]
    reopened.close()


def test_a_crash_with_no_flush_at_all_replays_everything(tmp_path: Path) -> None:
    log = open_log(tmp_path, **SMALL_SEGMENTS)
    fill(log)
    before = state_of(log)
    log.abandon()
    for path in (tmp_path / "t-0").glob("*.txnindex"):
        path.unlink()
    reopened = open_log(tmp_path, recovery_point=0, **SMALL_SEGMENTS)
    assert state_of(reopened) == before
    reopened.close()


def test_a_corrupt_snapshot_falls_back_to_an_older_one(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    log = open_log(tmp_path, **SMALL_SEGMENTS)
    fill(log)
    before = state_of(log)
    log.close()
    end = log.log_end_offset
    latest = tmp_path / "t-0" / f"{end:020d}.snapshot"
    data = bytearray(latest.read_bytes())
    data[-1] ^= 0xFF
    latest.write_bytes(data)
    with caplog.at_level(logging.WARNING):
        reopened = open_log(tmp_path, recovery_point=end, **SMALL_SEGMENTS)
    assert "CRC is no longer valid" in caplog.text
    assert state_of(reopened) == before
    assert latest.read_bytes() != data  # deleted, and written again after the replay
    reopened.close()


def test_no_readable_snapshot_means_a_full_replay(tmp_path: Path) -> None:
    log = open_log(tmp_path, **SMALL_SEGMENTS)
    fill(log)
    before = state_of(log)
    log.close()
    for i, path in enumerate((tmp_path / "t-0").glob("*.snapshot")):
        path.write_bytes(b"" if i % 2 else b"\x00\x07" + path.read_bytes()[2:])
    reopened = open_log(tmp_path, recovery_point=log.recovery_point, **SMALL_SEGMENTS)
    assert state_of(reopened) == before
    assert len(reopened.producer_state.last_entry(1).batches) == 5  # type: ignore[union-attr]
    assert snapshots(tmp_path) == [s.base_offset for s in reopened.segments[-2:]] + [reopened.log_end_offset]
    reopened.close()


def test_expired_producers_are_dropped_on_load_unless_their_transaction_is_open(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(batch(1, 0), 0, NOW)
    log.append_as_leader(batch(2, 0, transactional=True), 0, NOW)
    log.append_as_leader(batch(3, 0, timestamp=NOW + DAY_MS), 0, NOW + DAY_MS)
    log.close()
    reopened = open_log(tmp_path, recovery_point=log.recovery_point, now_ms=NOW + DAY_MS + 10)
    assert sorted(reopened.producer_state.last_entries()) == [2, 3]
    assert [(t.producer_id, t.first_offset) for t in reopened.producer_state.ongoing_transactions()] == [(2, 2)]
    reopened.close()


def test_a_retry_of_the_last_batch_is_a_duplicate_after_reopening_from_a_snapshot(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(batch(1, 0, 3), 0, NOW)
    last = log.append_as_leader(batch(1, 3, 3), 0, NOW)
    log.close()
    reopened = open_log(tmp_path, recovery_point=log.recovery_point)
    retry = reopened.append_as_leader(batch(1, 3, 3), 0, NOW)
    assert retry.duplicate and (retry.first_offset, retry.last_offset) == (last.first_offset, last.last_offset)
    assert reopened.log_end_offset == 6
    with pytest.raises(OutOfOrderSequenceError):  # only the last batch is kept, as in Kafka
        reopened.append_as_leader(batch(1, 0, 3), 0, NOW)
    assert reopened.append_as_leader(batch(1, 6, 3), 0, NOW).first_offset == 6
    reopened.close()


def test_transactions_open_at_the_snapshot_are_closed_by_their_markers(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(batch(2, 0, transactional=True), 0, NOW)
    log.append_as_leader(batch(1, 0, transactional=True), 0, NOW)
    log.close()
    reopened = open_log(tmp_path, recovery_point=log.recovery_point)
    assert [t.first_offset for t in reopened.producer_state.ongoing_transactions()] == [0, 2]
    end_txn(reopened, 2, 0, ControlRecordType.ABORT)
    assert reopened.collect_aborted_transactions(0, 10) == [AbortedTxn(2, 0, 4, 2)]
    end_txn(reopened, 1, 0, ControlRecordType.COMMIT)
    reopened.producer_state.on_high_watermark_updated(reopened.log_end_offset)
    assert reopened.first_unstable_offset is None
    reopened.close()
