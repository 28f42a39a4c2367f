"""Log compaction's core: offset map, batch filtering with Kafka's retention rules, transaction markers."""
from __future__ import annotations

import struct

import pytest
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

from minikafka.protocol.end_transaction_marker import ControlRecordType, EndTransactionMarker, build_marker_batch
from minikafka.protocol.record_batch import batch_crc_ok, iter_batches
from minikafka.storage.log_cleaner import (
    DELETE_HORIZON_MASK,
    CleanedTransactionMetadata,
    OffsetMap,
    SegmentSizes,
    build_offset_map,
    filter_batches,
    group_segments_by_size,
)
from minikafka.storage.log_config import LogConfig
from minikafka.storage.transaction_index import AbortedTxn

# Each test with the compiled record walks and with the Python ones.
pytestmark = pytest.mark.usefixtures("record_walk")

NOW = 1_700_000_000_000
RETENTION = 86_400_000


def batch(base_offset: int, records: list[tuple[bytes | None, bytes | None]], *, producer_id: int = -1,
          base_sequence: int = -1, transactional: bool = False, compression: int = 0) -> bytes:
    builder = MemoryRecordsBuilder(magic=2, compression_type=compression, batch_size=1 << 20, producer_id=producer_id,
                                   producer_epoch=0 if producer_id >= 0 else -1, base_sequence=base_sequence,
                                   transactional=transactional)
    for i, (key, value) in enumerate(records):
        builder.append(timestamp=NOW + base_offset + i, key=key, value=value, headers=[])
    builder.close()
    data = bytearray(builder.buffer())
    struct.pack_into(">q", data, 0, base_offset)  # the base offset is outside the CRC
    return bytes(data)


def abort_marker(base_offset: int, producer_id: int) -> bytes:
    data = build_marker_batch(producer_id, 0, EndTransactionMarker(ControlRecordType.ABORT, 0), NOW)
    struct.pack_into(">q", data, 0, base_offset)
    return bytes(data)


def contents(data: bytes) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record, as kafka-python reads them, after checking each batch's CRC."""
    out = []
    for pos, header in iter_batches(data):
        assert batch_crc_ok(data, pos, header)
    records = MemoryRecords(data)
    while records.has_next():
        for record in records.next_batch():
            out.append((record.offset, record.key, record.value))
    return out


def clean(data: bytes, now: int, aborted: list[AbortedTxn] | None = None,
          last_of_producer: dict[int, int] | None = None) -> bytes:
    offset_map = OffsetMap(1 << 20)
    build_offset_map(data, offset_map, 0, aborted or [])
    return filter_batches(data, offset_map, CleanedTransactionMetadata(aborted or []), last_of_producer or {},
                          now, RETENTION).output


def test_last_value_of_each_key_stays_at_its_original_offset() -> None:
    log = (batch(0, [(b"a", b"1"), (b"b", b"1")]) + batch(2, [(b"a", b"2")])
           + batch(3, [(b"c", b"1"), (b"a", b"3")]))
    cleaned = clean(log, NOW)
    assert contents(cleaned) == [(1, b"b", b"1"), (3, b"c", b"1"), (4, b"a", b"3")]
    assert [h.base_offset for _, h in iter_batches(cleaned)] == [0, 3]
    # Nothing left to remove: a second pass keeps the bytes as they are.
    assert clean(cleaned, NOW) == cleaned


def test_tombstone_lives_until_the_delete_horizon_set_by_the_first_cleaning() -> None:
    log = batch(0, [(b"a", b"1")]) + batch(1, [(b"a", None)])
    first = clean(log, NOW)
    assert contents(first) == [(1, b"a", None)]
    [(_, header)] = list(iter_batches(first))
    assert header.attributes & DELETE_HORIZON_MASK
    assert header.base_timestamp == NOW + RETENTION
    assert clean(first, NOW + RETENTION - 1) == first
    assert contents(clean(first, NOW + RETENTION)) == []


def test_aborted_records_go_in_the_first_pass_and_the_marker_after_its_horizon() -> None:
    log = batch(0, [(b"x", b"aborted")], producer_id=7, base_sequence=0, transactional=True) + abort_marker(1, 7) \
        + batch(2, [(b"y", b"1")])
    aborted = [AbortedTxn(producer_id=7, first_offset=0, last_offset=1, last_stable_offset=2)]
    first = clean(log, NOW, aborted)
    # The marker stays while this pass still saw a batch of its transaction.
    assert [(h.base_offset, h.is_control) for _, h in iter_batches(first)] == [(1, True), (2, False)]
    assert contents(first)[1:] == [(2, b"y", b"1")]
    second = clean(first, NOW, aborted)
    [(_, marker), _] = list(iter_batches(second))
    assert marker.is_control and marker.attributes & DELETE_HORIZON_MASK
    assert marker.base_timestamp == NOW + RETENTION
    assert clean(second, NOW + RETENTION - 1, aborted) == second
    third = clean(second, NOW + RETENTION, aborted)
    assert contents(third) == [(2, b"y", b"1")]


def test_a_producers_last_batch_is_kept_empty_with_its_sequence() -> None:
    log = batch(0, [(b"a", b"1"), (b"b", b"1")], producer_id=5, base_sequence=10) + batch(2, [(b"a", b"2"),
                                                                                              (b"b", b"2")])
    cleaned = clean(log, NOW, last_of_producer={5: 1})
    [(_, empty), (_, kept)] = list(iter_batches(cleaned))
    assert (empty.base_offset, empty.last_offset, empty.records_count) == (0, 1, 0)
    assert (empty.producer_id, empty.base_sequence, empty.last_sequence) == (5, 10, 11)
    assert contents(cleaned) == [(2, b"a", b"2"), (3, b"b", b"2")]
    # Not the producer's last batch any more: it goes.
    assert contents(clean(log, NOW)) == [(2, b"a", b"2"), (3, b"b", b"2")]
    assert [h.base_offset for _, h in iter_batches(clean(log, NOW))] == [2]


def test_partly_retained_batch_keeps_its_last_offset() -> None:
    log = batch(0, [(b"a", b"1"), (b"b", b"1")], producer_id=5, base_sequence=0) + batch(2, [(b"b", b"2")])
    cleaned = clean(log, NOW)
    [(_, first), _] = list(iter_batches(cleaned))
    assert (first.base_offset, first.last_offset, first.records_count, first.base_sequence) == (0, 1, 1, 0)
    assert contents(cleaned) == [(0, b"a", b"1"), (2, b"b", b"2")]


def test_keyless_records_are_removed_and_records_past_the_map_kept() -> None:
    log = batch(0, [(None, b"x"), (b"a", b"1")]) + batch(2, [(b"a", b"2")])
    offset_map = OffsetMap(1 << 20)
    build_offset_map(log[: len(batch(0, [(None, b"x"), (b"a", b"1")]))], offset_map, 0, [])
    cleaned = filter_batches(log, offset_map, CleanedTransactionMetadata([]), {}, NOW, RETENTION).output
    assert contents(cleaned) == [(1, b"a", b"1"), (2, b"a", b"2")]


def test_offset_map_fills_at_the_load_factor_of_its_slots() -> None:
    offset_map = OffsetMap(24 * 10)
    assert (offset_map.slots, offset_map.max_desired_size) == (10, 9)
    log = b"".join(batch(i, [(b"k%d" % i, b"v")]) for i in range(20))
    assert build_offset_map(log, offset_map, 0, []) is True
    assert len(offset_map) == 9 and offset_map.latest_offset == 8
    assert offset_map.get(b"k3") == 3 and offset_map.get(b"k9") == -1


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_compressed_batch_is_rewritten_with_its_codec(codec: int) -> None:
    value = b"1" * 500
    log = batch(0, [(b"a", value), (b"b", value)], compression=codec) + batch(2, [(b"a", b"2")])
    assert [h.compression for _, h in iter_batches(log)] == [codec, 0]
    cleaned = clean(log, NOW)
    assert [h.compression for _, h in iter_batches(cleaned)] == [codec, 0]
    assert contents(cleaned) == [(1, b"b", value), (2, b"a", b"2")]


def test_segments_are_grouped_within_segment_and_index_bytes_and_an_int_of_offsets() -> None:
    segs = [SegmentSizes(0, 400, 8, 12), SegmentSizes(10, 400, 8, 12), SegmentSizes(20, 300, 8, 12),
            SegmentSizes(30, 500, 8, 12)]
    bases = [[s.base_offset for s in g] for g in group_segments_by_size(segs, 1000, 1024, 40)]
    assert bases == [[0, 10], [20, 30]]
    # The time index limit (three 12-byte indexes pass 24 bytes) splits too.
    bases = [[s.base_offset for s in g] for g in group_segments_by_size(segs, 10_000, 24, 40)]
    assert bases == [[0, 10], [20, 30]]
    # A group never spans more than an int of offsets past its base.
    far = [SegmentSizes(0, 10, 8, 12), SegmentSizes(1 << 31, 10, 8, 12), SegmentSizes((1 << 31) + 5, 10, 8, 12)]
    assert [[s.base_offset for s in g] for g in group_segments_by_size(far, 1000, 1024, (1 << 31) + 10)] == \
        [[0], [1 << 31, (1 << 31) + 5]]


def test_min_compaction_lag_above_max_is_refused() -> None:
    with pytest.raises(ValueError, match=r"conflict topic config setting min.compaction.lag.ms \(5\) > "
                                         r"max.compaction.lag.ms \(4\)"):
        LogConfig.from_props({"min.compaction.lag.ms": "5", "max.compaction.lag.ms": "4"})
    assert LogConfig.from_props({"min.compaction.lag.ms": "4", "max.compaction.lag.ms": "4"}).max_compaction_lag_ms == 4
