"""A damaged `.txnindex` is rebuilt when the log is opened, as Kafka's LogLoader recovers a segment whose transaction
index fails its sanity check: read_committed readers get exactly the aborted transactions again, and new markers
are indexed and move the last stable offset, whether the damage is in an old segment or in the active one."""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable
from pathlib import Path

import pytest
from kafka.record.memory_records import MemoryRecordsBuilder

from minikafka.protocol.end_transaction_marker import ControlRecordType, EndTransactionMarker, build_marker_batch
from minikafka.storage.index_file import CorruptIndexError
from minikafka.storage.log import AppendOrigin, Log
from minikafka.storage.log_config import LogConfig
from minikafka.storage.transaction_index import ENTRY_SIZE, AbortedTxn, TransactionIndex

NOW = 1_700_000_000_000
CONFIG = LogConfig.from_props({"internal.segment.bytes": "1200"})


def txn_batch(pid: int, seq: int, count: int = 2) -> bytearray:
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20, transactional=True,
                                   producer_id=pid, producer_epoch=0, base_sequence=seq)
    for i in range(count):
        builder.append(timestamp=NOW + i, key=b"k", value=b"v%d" % i, headers=[])
    builder.close()
    return bytearray(builder.buffer())


def end_txn(log: Log, pid: int, kind: ControlRecordType) -> None:
    marker = build_marker_batch(pid, 0, EndTransactionMarker(kind, 3), NOW)
    log.append_as_leader(marker, 0, NOW, origin=AppendOrigin.COORDINATOR)


def open_log(path: Path, recovery_point: int = 0) -> Log:
    return Log.open(path / "t-0", "t", 0, CONFIG, recovery_point=recovery_point, now_ms=NOW)


def txn_index_path(path: Path, base: int) -> Path:
    return path / "t-0" / f"{base:020d}.txnindex"


class Producers:
    """Transactions of two producers interleaved: pid 1 aborts every other one, pid 2 commits, so most aborts are
    indexed with the other producer's open transaction as their last stable offset."""

    def __init__(self) -> None:
        self.sequences = {1: 0, 2: 0}

    def send(self, log: Log, pid: int) -> None:
        log.append_as_leader(txn_batch(pid, self.sequences[pid]), 0, NOW)
        self.sequences[pid] += 2

    def round(self, log: Log, abort: bool) -> None:
        self.send(log, 1)
        self.send(log, 2)
        end_txn(log, 1, ControlRecordType.ABORT if abort else ControlRecordType.COMMIT)
        end_txn(log, 2, ControlRecordType.COMMIT)


def build(path: Path) -> tuple[Log, Producers]:
    """At least three segments, aborted transactions indexed in an inactive one and in the active one."""
    log = open_log(path)
    producers = Producers()
    for r in range(40):
        producers.round(log, abort=r % 2 == 0)
        if len(log.segments) >= 3 and txn_index_path(path, log.active_segment.base_offset).exists():
            break
    assert len(log.segments) >= 3
    assert txn_index_path(path, log.segments[0].base_offset).stat().st_size >= 2 * ENTRY_SIZE
    return log, producers


def extra_bytes(data: bytes) -> bytes:
    return data + b"\x00\x00\x01"


def cut_short(data: bytes) -> bytes:
    return data[:-10]  # the last entry loses its end


def garbage(data: bytes) -> bytes:
    return b"\xff" * len(data)  # whole entries, of version -1 and offsets -1


def unknown_version(data: bytes) -> bytes:
    return struct.pack(">h", 7) + data[2:]


DAMAGES = [extra_bytes, cut_short, garbage, unknown_version]


@pytest.mark.parametrize("damage", DAMAGES, ids=lambda d: d.__name__)
@pytest.mark.parametrize("where", ["inactive", "active"])
def test_a_damaged_transaction_index_is_rebuilt_on_load(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                        where: str, damage: Callable[[bytes], bytes]) -> None:
    log, producers = build(tmp_path)
    end = log.log_end_offset
    aborted = log.collect_aborted_transactions(0, end)
    segment = log.segments[0] if where == "inactive" else log.active_segment
    in_segment = segment.txn_index.entries
    assert in_segment and set(in_segment) <= set(aborted)
    log.close()
    path = txn_index_path(tmp_path, segment.base_offset)
    good = path.read_bytes()
    path.write_bytes(damage(good))

    with caplog.at_level(logging.WARNING):
        reopened = open_log(tmp_path, recovery_point=end)  # a clean shutdown: nothing else is recovered
    assert f"found a corrupted index file corresponding to log file {segment.base_offset:020d}.log" in caplog.text
    assert path.read_bytes() == good
    assert reopened.collect_aborted_transactions(0, end) == aborted
    # A read_committed fetch of that segment gets its aborted transactions.
    first = in_segment[0].first_offset
    records, fetched_aborted = reopened.read_committed_records(first, 1 << 20, max_offset=end)
    assert records and in_segment[0] in fetched_aborted

    # The partition takes new transactions: an abort is indexed and the last stable offset moves past it.
    start = reopened.log_end_offset
    producers.send(reopened, 1)
    reopened.producer_state.on_high_watermark_updated(reopened.log_end_offset)
    assert reopened.first_unstable_offset == start
    end_txn(reopened, 1, ControlRecordType.ABORT)
    reopened.producer_state.on_high_watermark_updated(reopened.log_end_offset)
    assert reopened.first_unstable_offset is None
    new_abort = AbortedTxn(1, start, reopened.log_end_offset - 1, reopened.log_end_offset)
    assert reopened.collect_aborted_transactions(start, reopened.log_end_offset) == [new_abort]
    reopened.close()
    again = open_log(tmp_path, recovery_point=reopened.log_end_offset)
    assert again.collect_aborted_transactions(0, again.log_end_offset) == [*aborted, new_abort]
    again.close()


def test_a_sound_index_is_trusted_and_left_alone(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    log, _ = build(tmp_path)
    end = log.log_end_offset
    log.close()
    files = {p: p.stat().st_mtime_ns for p in (tmp_path / "t-0").glob("*.txnindex")}
    with caplog.at_level(logging.INFO):
        reopened = open_log(tmp_path, recovery_point=end)
    assert "recovering segment" not in caplog.text
    assert {p: p.stat().st_mtime_ns for p in files} == files
    reopened.close()


def test_the_sanity_check_is_kafkas_and_reads_skip_a_partial_last_entry(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000100.txnindex"
    index = TransactionIndex(path)
    index.append(AbortedTxn(1, 90, 120, 121))
    index.append(AbortedTxn(2, 125, 130, 131))
    index.sanity_check(100)
    with pytest.raises(CorruptIndexError, match="is less than start offset 121"):
        index.sanity_check(121)
    # A partial entry at the end, as a reader sees an append under way: not an entry yet.
    path.write_bytes(path.read_bytes() + b"\x00" * (ENTRY_SIZE - 1))
    assert TransactionIndex(path).collect_aborted_txns(0, 200).aborted == [AbortedTxn(1, 90, 120, 121),
                                                                         AbortedTxn(2, 125, 130, 131)]
    with pytest.raises(CorruptIndexError, match="not a multiple of 34"):
        TransactionIndex(path).sanity_check(100)
