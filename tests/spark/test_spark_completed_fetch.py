"""A Fetch response's batches decoded as Kafka's consumer reads them (spark_connector/completed_fetch.py), on
batches written byte by byte: aborted transactions under read_committed, markers, compacted gaps, a range end
inside a batch, a batch cut short by the fetch size, a bad CRC."""

from __future__ import annotations

import struct

import pytest

pytest.importorskip("pyspark")

from minikafka.protocol.end_transaction_marker import ControlRecordType, EndTransactionMarker, build_marker_batch
from minikafka.protocol.record_batch import CorruptRecordError
from minikafka.spark_connector.completed_fetch import FetchedColumns
from tests.record_bytes import batch, record

pytestmark = pytest.mark.spark
PID = 7


def _txn(base: int, values: list[bytes], pid: int = PID) -> bytes:
    return batch([record(i, v) for i, v in enumerate(values)], producer_id=pid, producer_epoch=0, base_sequence=0,
                 transactional=True, base_offset=base)


def _marker(base: int, kind: ControlRecordType, pid: int = PID) -> bytes:
    out = build_marker_batch(pid, 0, EndTransactionMarker(kind, 0), 0)
    struct.pack_into(">q", out, 0, base)
    return bytes(out)


def _decode(records: bytes, aborted: list[tuple[int, int]], read_committed: bool, position: int, end: int):
    fetched = FetchedColumns(include_headers=False)
    after = fetched.append_fetched(memoryview(records), aborted, read_committed, position, end)
    taken = fetched.columns.take()
    offsets = list(struct.unpack(f"<{taken.rows}q", taken.offsets))
    return offsets, after


# offsets: 0-1 aborted (pid 7), 2 abort marker, 3-4 committed (pid 7), 5 commit marker, 6-7 plain, 8-9 pid 9 open
TOPIC = (_txn(0, [b"a0", b"a1"]) + _marker(2, ControlRecordType.ABORT) + _txn(3, [b"c3", b"c4"])
         + _marker(5, ControlRecordType.COMMIT) + batch([record(0, b"p6"), record(1, b"p7")], base_offset=6)
         + _txn(8, [b"o8", b"o9"], pid=9))


def test_read_committed_skips_aborted_batches_and_markers():
    assert _decode(TOPIC, [(PID, 0)], True, 0, 100) == ([3, 4, 6, 7, 8, 9], 10)
    assert _decode(TOPIC, [], False, 0, 100) == ([0, 1, 3, 4, 6, 7, 8, 9], 10)


def test_an_abort_marker_before_the_position_still_ends_its_transaction():
    """The first batch may start before the fetch offset: its bookkeeping counts, its rows do not."""
    assert _decode(TOPIC, [(PID, 0)], True, 1, 100) == ([3, 4, 6, 7, 8, 9], 10)
    assert _decode(TOPIC, [(PID, 0)], True, 3, 7) == ([3, 4, 6], 8)


def test_compacted_gaps_keep_their_offsets_and_a_cut_batch_waits():
    compacted = batch([record(0, b"x"), record(3, b"y"), record(9, b"z")], last_offset_delta=9, base_offset=20)
    following = batch([record(0, b"w")], base_offset=30)
    assert _decode(compacted + following[:-5], [], False, 20, 100) == ([20, 23, 29], 30)
    assert _decode(compacted + following, [], False, 21, 100) == ([23, 29, 30], 31)


def test_a_bad_crc_is_corrupt():
    bad = bytearray(TOPIC)
    bad[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC"):
        _decode(bytes(bad), [], False, 0, 100)
