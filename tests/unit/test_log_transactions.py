"""The partition Log with transactions: markers, the first unstable offset, the aborted-transaction index (Kafka's
`.txnindex` bytes), and the same state after reopening, truncation and on a follower."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatch
from kafka.record.memory_records import MemoryRecordsBuilder

from minikafka.protocol.end_transaction_marker import ControlRecordType, EndTransactionMarker, build_marker_batch
from minikafka.protocol.record_batch import iter_batches
from minikafka.storage.errors import (
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTxnStateError,
    TransactionCoordinatorFencedError,
)
from minikafka.storage.log import AppendInfo, AppendOrigin, Log
from minikafka.storage.log_config import LogConfig
from minikafka.storage.transaction_index import AbortedTxn

NOW = 1_700_000_000_000
COMMIT = EndTransactionMarker(ControlRecordType.COMMIT, 3)
ABORT = EndTransactionMarker(ControlRecordType.ABORT, 3)


def txn_batch(pid: int, seq: int, count: int = 2, *, epoch: int = 0, transactional: bool = True) -> bytearray:
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20, transactional=transactional,
                                   producer_id=pid, producer_epoch=epoch, base_sequence=seq)
    for i in range(count):
        builder.append(timestamp=NOW + i, key=b"k%d" % i, value=b"v%d" % i, headers=[])
    builder.close()
    return bytearray(builder.buffer())


def end_txn(log: Log, pid: int, epoch: int, marker: EndTransactionMarker) -> AppendInfo:
    return log.append_as_leader(build_marker_batch(pid, epoch, marker, NOW), 0, NOW, origin=AppendOrigin.COORDINATOR)


def open_log(path: Path) -> Log:
    return Log.open(path / "t-0", "t", 0, LogConfig(), now_ms=NOW)


def fill(log: Log) -> None:
    """pid 1 aborts [0, 1] at 4; pid 2's [2, 3] committed at 5; pid 1 opens again at 6."""
    log.append_as_leader(txn_batch(1, 0), 0, NOW)
    log.append_as_leader(txn_batch(2, 0), 0, NOW)
    end_txn(log, 1, 0, ABORT)
    end_txn(log, 2, 0, COMMIT)
    log.append_as_leader(txn_batch(1, 2), 0, NOW)


def test_markers_are_control_batches_and_aborts_are_indexed(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log)
    data = log.read(0, 1 << 20)
    batches = [DefaultRecordBatch(data[pos:pos + h.size]) for pos, h in iter_batches(data)]
    assert [(b.base_offset, b.is_control_batch, b.is_transactional) for b in batches] == [
        (0, False, True), (2, False, True), (4, True, True), (5, True, True), (6, False, True)]
    marker = next(iter(batches[2]))
    assert (marker.key, marker.value) == (struct.pack(">hh", 0, 0), struct.pack(">hi", 0, 3))
    # pid 2's transaction was still open when pid 1 aborted: the last stable offset recorded is its start, 2.
    txnindex = (tmp_path / "t-0" / ("0" * 20 + ".txnindex")).read_bytes()
    assert txnindex == struct.pack(">hqqqq", 0, 1, 0, 4, 2)
    assert log.collect_aborted_transactions(0, 7) == [AbortedTxn(1, 0, 4, 2)]
    assert log.collect_aborted_transactions(5, 7) == []
    assert log.first_unstable_offset == 0  # the markers are not below the high watermark yet
    log.producer_state.on_high_watermark_updated(6)
    assert log.first_unstable_offset == 6


def test_state_and_index_survive_reopening(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log)
    log.close()
    (tmp_path / "t-0" / ("0" * 20 + ".txnindex")).unlink()  # recovery from offset 0 rebuilds it
    reopened = open_log(tmp_path)
    reopened.producer_state.on_high_watermark_updated(reopened.log_end_offset)
    assert reopened.first_unstable_offset == 6
    assert reopened.collect_aborted_transactions(0, 7) == [AbortedTxn(1, 0, 4, 2)]
    with pytest.raises(InvalidTxnStateError):
        reopened.append_as_leader(txn_batch(1, 4, transactional=False), 0, NOW)


def test_truncation_drops_index_entries_and_reopens_transactions(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log)
    log.truncate_to(4, now_ms=NOW)
    assert log.collect_aborted_transactions(0, 10) == []
    assert not (tmp_path / "t-0" / ("0" * 20 + ".txnindex")).read_bytes()
    assert [t.first_offset for t in log.producer_state.ongoing_transactions()] == [0, 2]


def test_follower_builds_the_same_index(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "leader")
    fill(leader)
    follower = open_log(tmp_path / "follower")
    follower.append_as_follower(leader.read(0, 1 << 20))
    name = "t-0/" + "0" * 20 + ".txnindex"
    assert (tmp_path / "follower" / name).read_bytes() == (tmp_path / "leader" / name).read_bytes()
    assert follower.first_unstable_offset == leader.first_unstable_offset == 0


def test_stale_markers_are_refused_and_change_nothing(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(txn_batch(1, 0, epoch=2), 0, NOW)
    end_txn(log, 1, 2, COMMIT)
    end = log.log_end_offset
    with pytest.raises(InvalidProducerEpochError):
        end_txn(log, 1, 1, ABORT)
    with pytest.raises(TransactionCoordinatorFencedError):
        end_txn(log, 1, 2, EndTransactionMarker(ControlRecordType.ABORT, 2))
    assert log.log_end_offset == end


def test_log_start_offset_past_a_closed_transaction_makes_it_stable(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(txn_batch(1, 0), 0, NOW)
    end_txn(log, 1, 0, COMMIT)
    assert log.first_unstable_offset == 0
    log.maybe_increment_log_start_offset(3)
    assert log.first_unstable_offset is None


def test_only_a_coordinator_writes_control_batches(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(build_marker_batch(1, 0, COMMIT, NOW), 0, NOW)
    assert log.log_end_offset == 0


def test_a_coordinators_transactional_batches_are_not_taken_for_retries(tmp_path: Path) -> None:
    """Kafka writes every transactional offset commit at sequence 0: only the epoch is checked for them."""
    log = open_log(tmp_path)
    first = log.append_as_leader(txn_batch(7, 0, 1, epoch=1), 0, NOW, origin=AppendOrigin.COORDINATOR)
    second = log.append_as_leader(txn_batch(7, 0, 1, epoch=1), 0, NOW, origin=AppendOrigin.COORDINATOR)
    assert (first.first_offset, second.first_offset, second.duplicate) == (0, 1, False)
    with pytest.raises(InvalidProducerEpochError):
        log.append_as_leader(txn_batch(7, 0, 1, epoch=0), 0, NOW, origin=AppendOrigin.COORDINATOR)
