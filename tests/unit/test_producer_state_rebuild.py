"""Rebuilding producer state when a log is opened (Kafka's rebuildProducerState): every segment after the snapshot is
replayed whatever its records' timestamps, so a transaction stays open however old its CreateTime, and the
broker's producer.id.expiration.ms decides which idle producers are left out."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from kafka.record.memory_records import MemoryRecordsBuilder

from minikafka.broker.faults.disk_quota import DiskQuota
from minikafka.broker.log.log_manager import LogManager
from minikafka.protocol.end_transaction_marker import ControlRecordType, EndTransactionMarker, build_marker_batch
from minikafka.storage.log import AppendOrigin, Log
from minikafka.storage.log_config import LogConfig
from minikafka.storage.transaction_index import AbortedTxn

NOW = 1_700_000_000_000
HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS
SMALL_SEGMENTS = LogConfig.from_props({"internal.segment.bytes": "400"})


def batch(pid: int, seq: int, *, timestamp: int, transactional: bool = False) -> bytearray:
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20, transactional=transactional,
                                   producer_id=pid, producer_epoch=0, base_sequence=seq)
    for i in range(2):
        builder.append(timestamp=timestamp + i, key=b"k", value=b"v%d" % i, headers=[])
    builder.close()
    return bytearray(builder.buffer())


def open_log(path: Path, *, recovery_point: int = 0, now_ms: int = NOW, **kwargs: int) -> Log:
    return Log.open(path / "t-0", "t", 0, SMALL_SEGMENTS, recovery_point=recovery_point, now_ms=now_ms, **kwargs)


def backfill(path: Path) -> Log:
    """A transaction opened at offset 0 by a producer backfilling records three days old (CreateTime), then more of
    its old records over several segments."""
    log = open_log(path)
    old = NOW - 3 * DAY_MS
    log.append_as_leader(batch(5, 0, timestamp=old, transactional=True), 0, NOW)
    for i in range(8):
        log.append_as_leader(batch(6, 2 * i, timestamp=old), 0, NOW)
    assert len(log.segments) >= 3
    return log


def remove_snapshots(path: Path) -> None:
    for snapshot in (path / "t-0").glob("*.snapshot"):
        snapshot.unlink()


def assert_open_at_zero_then_aborted(log: Log) -> None:
    """The transaction of producer 5 holds the last stable offset at 0, and its abort marker closes it."""
    state = log.producer_state
    assert [(t.producer_id, t.first_offset) for t in state.ongoing_transactions()] == [(5, 0)]
    state.on_high_watermark_updated(log.log_end_offset)
    assert log.first_unstable_offset == 0  # read_committed readers see nothing past offset 0
    marker = build_marker_batch(5, 0, EndTransactionMarker(ControlRecordType.ABORT, 1), NOW)
    end = log.append_as_leader(marker, 0, NOW, origin=AppendOrigin.COORDINATOR).last_offset
    state.on_high_watermark_updated(log.log_end_offset)
    assert log.first_unstable_offset is None
    assert log.collect_aborted_transactions(0, log.log_end_offset) == [AbortedTxn(5, 0, end, end + 1)]


def test_an_old_open_transaction_survives_a_reload_with_no_snapshot(tmp_path: Path) -> None:
    log = backfill(tmp_path)
    log.close()
    remove_snapshots(tmp_path)
    reopened = open_log(tmp_path, recovery_point=log.log_end_offset)
    assert_open_at_zero_then_aborted(reopened)
    reopened.close()


def test_an_old_open_transaction_survives_a_crash_with_unreadable_snapshots(tmp_path: Path) -> None:
    log = backfill(tmp_path)
    log.flush(log.segments[1].base_offset)
    recovery_point = log.recovery_point
    log.abandon()
    for snapshot in (tmp_path / "t-0").glob("*.snapshot"):
        snapshot.write_bytes(b"\x00\x01")
    reopened = open_log(tmp_path, recovery_point=recovery_point)
    assert_open_at_zero_then_aborted(reopened)
    reopened.close()


@pytest.mark.parametrize("expiration_ms, kept", [(DAY_MS, [1, 3]), (HOUR_MS, [3])])
def test_truncation_reloads_with_the_logs_expiration(tmp_path: Path, expiration_ms: int, kept: list[int]) -> None:
    log = open_log(tmp_path, producer_id_expiration_ms=expiration_ms)
    log.append_as_leader(batch(1, 0, timestamp=NOW - 2 * HOUR_MS), 0, NOW)  # idle for two hours
    log.append_as_leader(batch(3, 0, timestamp=NOW), 0, NOW)
    log.append_as_leader(batch(3, 2, timestamp=NOW), 0, NOW)
    log.truncate_to(4, now_ms=NOW)  # a follower drops the last batch
    assert sorted(log.producer_state.last_entries()) == kept
    log.close()


def test_the_configured_expiration_decides_which_idle_producers_a_reload_keeps(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(batch(1, 0, timestamp=NOW - 2 * HOUR_MS), 0, NOW)  # idempotent, idle for two hours
    log.append_as_leader(batch(2, 0, timestamp=NOW - 2 * HOUR_MS, transactional=True), 0, NOW)  # open, as old
    log.append_as_leader(batch(3, 0, timestamp=NOW), 0, NOW)
    log.close()
    end = log.log_end_offset
    for remove in (False, True):  # from the snapshot, and from a replay of the log
        if remove:
            remove_snapshots(tmp_path)
        default = open_log(tmp_path, recovery_point=end)
        assert sorted(default.producer_state.last_entries()) == [1, 2, 3]
        default.close()
        if remove:
            remove_snapshots(tmp_path)
        hour = open_log(tmp_path, recovery_point=end, producer_id_expiration_ms=HOUR_MS)
        assert sorted(hour.producer_state.last_entries()) == [2, 3]  # an open transaction keeps its producer
        assert [t.producer_id for t in hour.producer_state.ongoing_transactions()] == [2]
        hour.close()


@pytest.mark.parametrize("expiration_ms, kept", [(None, [1]), (HOUR_MS, [])])
def test_the_log_manager_opens_logs_with_the_brokers_expiration(tmp_path: Path, expiration_ms: int | None,
                                                                 kept: list[int]) -> None:
    def manager() -> LogManager:
        if expiration_ms is None:
            return LogManager([tmp_path], 1, "rebuild-tests", LogConfig(), DiskQuota([tmp_path]))
        return LogManager([tmp_path], 1, "rebuild-tests", LogConfig(), DiskQuota([tmp_path]), expiration_ms)

    first = manager()
    first.load_logs({})
    the_log = first.get_or_create_log("t", 0, uuid.uuid4(), {})
    now = int(time.time() * 1000)
    the_log.append_as_leader(batch(1, 0, timestamp=now - 2 * HOUR_MS), 0, now)
    first.shutdown({("t", 0): the_log.log_end_offset})
    second = manager()
    second.load_logs({})
    assert sorted(second.logs[("t", 0)].producer_state.last_entries()) == kept
    second.shutdown({("t", 0): 2})
