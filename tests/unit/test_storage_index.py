"""Offset and time indexes (Kafka's file formats) and the LogSegment built on them."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from kafka.record.memory_records import MemoryRecordsBuilder

from minikafka.protocol.record_batch import assign_offsets, iter_batches, validate_batches
from minikafka.storage.index_file import CorruptIndexError
from minikafka.storage.log_config import LogConfig
from minikafka.storage.offset_index import OffsetIndex, OffsetPosition
from minikafka.storage.segment import LogSegment
from minikafka.storage.time_index import TimeIndex, TimestampOffset

T0 = 1_700_000_000_000


def batches_at(base_offset: int, sizes: list[int], *, timestamps: list[int] | None = None) -> tuple[bytearray, list]:
    """Contiguous batches with offsets assigned from `base_offset`; sizes are record counts."""
    buf = bytearray()
    for i, count in enumerate(sizes):
        builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 30)
        ts = timestamps[i] if timestamps else T0 + i
        for _ in range(count):
            builder.append(timestamp=ts, key=None, value=b"x" * 100)
        builder.close()
        buf += builder.buffer()
    headers = assign_offsets(buf, validate_batches(buf), base_offset, 0, None)
    return buf, headers


# ----------------------------------------------------------------- offset index


def test_offset_index_file_format_and_lookup(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "00000000000000000100.index", 100, 1 << 20)
    index.load(10_000)
    assert index.lookup(150) == OffsetPosition(100, 0)
    index.append(110, 500)
    index.append(130, 1500)
    index.append(131, 2500)
    assert (tmp_path / "00000000000000000100.index").read_bytes() == struct.pack(">iiiiii", 10, 500, 30, 1500, 31, 2500)
    assert index.lookup(99) == OffsetPosition(100, 0)
    assert index.lookup(109) == OffsetPosition(100, 0)
    assert index.lookup(110) == OffsetPosition(110, 500)
    assert index.lookup(129) == OffsetPosition(110, 500)
    assert index.lookup(10**9) == OffsetPosition(131, 2500)
    assert index.last_entry == OffsetPosition(131, 2500)
    with pytest.raises(ValueError):
        index.append(131, 3000)
    index.truncate_to(130)
    assert index.entries == 1 and index.last_entry == OffsetPosition(110, 500)
    assert (tmp_path / "00000000000000000100.index").stat().st_size == 8
    reloaded = OffsetIndex(tmp_path / "00000000000000000100.index", 100, 1 << 20)
    reloaded.load(10_000)
    assert reloaded.lookup(200) == OffsetPosition(110, 500)
    index.release()
    reloaded.release()


@pytest.mark.parametrize(
    "content",
    [
        struct.pack(">ii", 10, 500) + b"\x00\x00\x00",  # not a multiple of 8
        struct.pack(">iiii", 10, 500, 5, 900),  # offsets going back
        struct.pack(">iiii", 10, 500, 20, 400),  # positions going back
        struct.pack(">iiii", 10, 500, 0, 0),  # zero-filled tail after a crash
        struct.pack(">ii", 10, 20_000),  # beyond the log
    ],
)
def test_offset_index_load_rejects_garbage(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "00000000000000000000.index"
    path.write_bytes(content)
    index = OffsetIndex(path, 0, 1 << 20)
    with pytest.raises(CorruptIndexError):
        index.load(10_000)
    index.release()


def test_offset_index_full(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "0.index", 0, 17)
    assert index.max_entries == 2
    index.append(1, 10)
    index.append(2, 20)
    assert index.is_full
    index.release()


# ----------------------------------------------------------------- time index


def test_time_index_file_format_lookup_and_truncation(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000050.timeindex"
    index = TimeIndex(path, 50, 1 << 20)
    index.load(1000)
    assert index.last_entry == TimestampOffset(-1, 50)
    index.maybe_append(-1, 50)  # no timestamp: never indexed
    index.maybe_append(T0, 60)
    index.maybe_append(T0, 61)  # not newer: ignored
    index.maybe_append(T0 + 10, 70)
    assert path.read_bytes() == struct.pack(">qiqi", T0, 10, T0 + 10, 20)
    assert index.lookup(T0 - 1) == TimestampOffset(-1, 50)
    assert index.lookup(T0 + 5) == TimestampOffset(T0, 60)
    assert index.lookup(T0 + 99) == TimestampOffset(T0 + 10, 70)
    index.truncate_to(70)
    assert index.last_entry == TimestampOffset(T0, 60) and path.stat().st_size == 12
    reloaded = TimeIndex(path, 50, 1 << 20)
    reloaded.load(100)
    assert reloaded.last_entry == TimestampOffset(T0, 60)
    bad = TimeIndex(path, 50, 1 << 20)
    with pytest.raises(CorruptIndexError):
        bad.load(60)  # entry points at offset 60, but the log ends before it
    for i in (index, reloaded, bad):
        i.release()


def test_time_index_reserves_last_slot(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "0.timeindex", 0, 36)
    index.maybe_append(T0, 1)
    index.maybe_append(T0 + 1, 2)
    assert index.is_full  # the log rolls; the entry written at the roll still fits
    index.maybe_append(T0 + 2, 3)
    assert index.entries == 3
    index.release()


# ----------------------------------------------------------------- segment


def config(**props: str) -> LogConfig:
    return LogConfig.from_props({"index.interval.bytes": "300", **props})


def test_segment_append_read_and_index_entries(tmp_path: Path) -> None:
    segment = LogSegment.create(tmp_path, 1000, config(), T0)
    buf, headers = batches_at(1000, [2, 1, 3, 2, 1, 4])
    segment.append(buf, headers)
    assert segment.size == len(buf)
    assert segment.next_offset == 1013
    positions = [pos for pos, _ in iter_batches(buf)]
    # An entry every index.interval.bytes: never for the first batch, then each time > 300 bytes passed.
    assert segment.offset_index.entries >= 2
    for offset in range(1000, 1013):
        found = segment.translate_offset(offset)
        assert found is not None and found.header.base_offset <= offset <= found.header.last_offset
        assert found.position in positions
    assert segment.translate_offset(1013) is None
    data = segment.read(1003, 10_000, None, True)
    assert data == bytes(buf[positions[2] :])
    one = segment.read(1003, 1, None, True)
    assert one == bytes(buf[positions[2] : positions[3]])
    assert segment.read(1003, 1, None, False) == b""
    assert segment.read(1003, 10_000, 1008, True) == bytes(buf[positions[2] : positions[4]])
    assert segment.read(1013, 100, None, True) is None
    assert segment.max_timestamp_so_far == TimestampOffset(T0 + 5, 1012)
    segment.close()


def test_segment_reopen_is_lazy_and_consistent(tmp_path: Path) -> None:
    segment = LogSegment.create(tmp_path, 0, config(), T0)
    buf, headers = batches_at(0, [3] * 10)
    segment.append(buf, headers)
    entries = segment.offset_index.entries
    segment.close()
    reopened = LogSegment.open(tmp_path, 0, config(), T0)
    assert reopened._offset_index is None  # nothing loaded yet
    assert reopened.next_offset == 30
    assert reopened.offset_index.entries == entries
    assert reopened.max_timestamp_so_far == TimestampOffset(T0 + 9, 29)
    assert reopened.rolling_timestamp == T0
    reopened.close()


def test_segment_rebuilds_garbage_or_missing_index(tmp_path: Path) -> None:
    segment = LogSegment.create(tmp_path, 0, config(), T0)
    buf, headers = batches_at(0, [3] * 10)
    segment.append(buf, headers)
    good = segment.index_path.read_bytes()
    segment.close()
    segment.index_path.write_bytes(good + b"\x00" * 8)
    reopened = LogSegment.open(tmp_path, 0, config(), T0)
    assert reopened.translate_offset(17).header.base_offset == 15  # type: ignore[union-attr]
    assert segment.index_path.read_bytes() == good
    reopened.close()
    segment.index_path.unlink()
    again = LogSegment.open(tmp_path, 0, config(), T0)
    assert again.translate_offset(29).header.base_offset == 27  # type: ignore[union-attr]
    assert segment.index_path.read_bytes() == good
    again.close()


def test_segment_truncate_to(tmp_path: Path) -> None:
    segment = LogSegment.create(tmp_path, 0, config(), T0)
    buf, headers = batches_at(0, [3] * 10)
    segment.append(buf, headers)
    removed = segment.truncate_to(16, T0 + 1)  # offset 16 is inside batch 15..17: the batch goes
    assert removed == len(buf) - sum(h.size for h in headers[:5])
    assert segment.next_offset == 15
    assert segment.max_timestamp_so_far == TimestampOffset(T0 + 4, 14)
    assert all(e < 15 for e in (segment.offset_index.last_entry.offset, segment.time_index.last_entry.offset))
    assert segment.truncate_to(100, T0) == 0
    segment.truncate_to(0, T0 + 7)
    assert segment.size == 0 and segment.next_offset == 0 and segment.created_ms == T0 + 7
    segment.close()


def test_segment_should_roll(tmp_path: Path) -> None:
    segment = LogSegment.create(tmp_path, 0, config(**{"internal.segment.bytes": "2000", "segment.ms": "1000"}), T0)
    assert not segment.should_roll(500, T0, 0, T0 + 5000)  # empty: age does not matter
    buf, headers = batches_at(0, [3], timestamps=[T0])
    segment.append(buf, headers)
    assert not segment.should_roll(100, T0 + 1000, 10, T0)
    assert segment.should_roll(100, T0 + 1001, 10, T0)  # message time 1001 ms after the first batch
    assert segment.should_roll(2000 - segment.size + 1, T0, 10, T0)
    assert segment.should_roll(10, T0, 2**31 + 5, T0)
    segment.close()
