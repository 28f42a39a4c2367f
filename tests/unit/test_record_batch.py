"""Record batch v2 header codec: parsing, produce validation, offset assignment, iteration."""

from __future__ import annotations

import struct

import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch
from kafka.record.memory_records import MemoryRecordsBuilder

from minikafka.protocol.record_batch import (
    HEADER_SIZE,
    BatchHeader,
    CorruptRecordError,
    InvalidRecordError,
    assign_offsets,
    batch_crc_ok,
    iter_batches,
    parse_header,
    validate_batches,
)


def make_batch(
    count: int = 3,
    *,
    timestamp: int = 1_700_000_000_000,
    compression: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    value_size: int = 10,
) -> bytearray:
    builder = MemoryRecordsBuilder(
        magic=2,
        compression_type=compression,
        batch_size=1 << 30,
        transactional=transactional,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
    )
    for i in range(count):
        builder.append(timestamp=timestamp + i, key=b"key-%d" % i, value=bytes([i % 256]) * value_size, headers=[])
    builder.close()
    return bytearray(builder.buffer())


def legacy_message_set(magic: int) -> bytes:
    builder = MemoryRecordsBuilder(magic=magic, compression_type=0, batch_size=1 << 20)
    builder.append(timestamp=1_700_000_000_000 if magic else None, key=b"k", value=b"v")
    builder.close()
    return bytes(builder.buffer())


def fix_crc(buf: bytearray, pos: int = 0) -> None:
    size = struct.unpack_from(">i", buf, pos + 8)[0] + 12
    struct.pack_into(">I", buf, pos + 17, crc32c(bytes(buf[pos + 21 : pos + size])))


def test_parse_header_fields_and_properties() -> None:
    buf = make_batch(4, producer_id=77, producer_epoch=3, base_sequence=10, transactional=True)
    header = parse_header(buf)
    assert isinstance(header, BatchHeader)
    assert header.magic == 2
    assert header.base_offset == 0
    assert header.records_count == 4
    assert header.last_offset_delta == 3
    assert header.last_offset == 3
    assert header.size == len(buf)
    assert header.base_timestamp == 1_700_000_000_000
    assert header.max_timestamp == 1_700_000_000_003
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (77, 3, 10)
    assert header.has_producer_id and header.is_transactional and not header.is_control
    assert header.compression == 0 and header.timestamp_type == 0
    assert header.last_sequence == 13


def test_parse_header_compression_and_truncation() -> None:
    header = parse_header(make_batch(50, compression=1, value_size=100))
    assert header.compression == 1
    with pytest.raises(CorruptRecordError):
        parse_header(make_batch()[:HEADER_SIZE - 1])
    buf = make_batch()
    with pytest.raises(CorruptRecordError):
        parse_header(buf, pos=len(buf) - HEADER_SIZE + 1)
    with pytest.raises(CorruptRecordError):
        parse_header(buf, pos=-1)


def test_last_sequence_wraps_past_int32_max() -> None:
    header = parse_header(make_batch(5, producer_id=1, producer_epoch=0, base_sequence=2**31 - 2))
    assert header.last_sequence == 2


def test_validate_accepts_client_batches() -> None:
    one = make_batch(3)
    two = make_batch(2, compression=2, value_size=200)
    headers = validate_batches(one + two)
    assert [h.records_count for h in headers] == [3, 2]
    assert headers[1].compression == 2


@pytest.mark.parametrize("magic", [0, 1])
def test_validate_rejects_old_magic_as_invalid_record(magic: int) -> None:
    with pytest.raises(InvalidRecordError, match="only allowed to contain record batches with magic version 2"):
        validate_batches(legacy_message_set(magic))
    with pytest.raises(InvalidRecordError, match="with version 9 are only allowed"):
        validate_batches(legacy_message_set(magic), request_version=9)


def test_validate_rejects_empty_and_truncated() -> None:
    with pytest.raises(InvalidRecordError):
        validate_batches(b"")
    buf = make_batch(3)
    for cut in (1, 16, HEADER_SIZE, len(buf) - 1):
        with pytest.raises(CorruptRecordError):
            validate_batches(buf[:cut])
    with pytest.raises(CorruptRecordError):
        validate_batches(buf + buf[:30])


def test_validate_rejects_bad_crc_and_short_length() -> None:
    buf = make_batch(3)
    buf[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="crc"):
        validate_batches(buf)
    short = make_batch(3)
    struct.pack_into(">i", short, 8, 48)
    with pytest.raises(CorruptRecordError, match="smaller than the minimum"):
        validate_batches(short)


@pytest.mark.parametrize(
    ("field_offset", "fmt", "value", "message"),
    [
        (23, ">i", 5, "Inconsistent batch offset range"),  # lastOffsetDelta vs count 3
        (57, ">i", 0, "Invalid reported count"),
        (23, ">i", -1, "invalid offset range"),
        (0, ">q", 100, "baseOffset of the record batch"),
    ],
)
def test_validate_rejects_inconsistent_offsets(field_offset: int, fmt: str, value: int, message: str) -> None:
    buf = make_batch(3)
    struct.pack_into(fmt, buf, field_offset, value)
    fix_crc(buf)
    with pytest.raises(InvalidRecordError, match=message):
        validate_batches(buf)


def test_validate_rejects_control_batch_and_negative_sequence() -> None:
    control = make_batch(1)
    struct.pack_into(">h", control, 21, 0x20)
    fix_crc(control)
    with pytest.raises(InvalidRecordError, match="control"):
        validate_batches(control)
    no_seq = make_batch(2, producer_id=5, producer_epoch=0, base_sequence=0)
    struct.pack_into(">i", no_seq, 53, -1)
    fix_crc(no_seq)
    with pytest.raises(InvalidRecordError, match="sequence"):
        validate_batches(no_seq)


def test_assign_offsets_keeps_crc_valid_and_records_readable() -> None:
    buf = make_batch(3) + make_batch(2, compression=3, value_size=300)
    headers = validate_batches(buf)
    crcs = [h.crc for h in headers]
    new = assign_offsets(buf, headers, 1000, 7, None)
    assert [(h.base_offset, h.last_offset) for h in new] == [(1000, 1002), (1003, 1004)]
    assert [h.crc for h in new] == crcs
    for pos, header in iter_batches(buf):
        assert header.partition_leader_epoch == 7
        assert batch_crc_ok(buf, pos, header)
    offsets = [r.offset for _, h in iter_batches(buf) for r in DefaultRecordBatch(bytes(buf[: h.size]))][:3]
    assert offsets == [1000, 1001, 1002]


def test_assign_offsets_log_append_time_rewrites_timestamp_and_crc() -> None:
    buf = make_batch(3)
    headers = validate_batches(buf)
    [header] = assign_offsets(buf, headers, 5, 1, 1_800_000_000_000)
    assert header.timestamp_type == 1 and header.max_timestamp == 1_800_000_000_000
    assert parse_header(buf) == header
    assert batch_crc_ok(buf, 0, header)
    records = list(DefaultRecordBatch(bytes(buf)))
    assert {r.timestamp for r in records} == {1_800_000_000_000}
    assert [r.offset for r in records] == [5, 6, 7]


def test_iter_batches_stops_at_partial_tail() -> None:
    one, two = make_batch(2), make_batch(4)
    buf = one + two
    assert [pos for pos, _ in iter_batches(buf)] == [0, len(one)]
    assert [pos for pos, _ in iter_batches(buf[:-1])] == [0]
    assert list(iter_batches(buf, len(one))) == [(len(one), parse_header(buf, len(one)))]
    assert list(iter_batches(buf[:40])) == []
    assert list(iter_batches(one + bytes(100))) == [(0, parse_header(one))]


def test_batch_crc_ok_detects_flips_anywhere_covered() -> None:
    buf = make_batch(3)
    header = parse_header(buf)
    assert batch_crc_ok(buf, 0, header)
    for pos in (21, 40, len(buf) - 1):
        flipped = bytearray(buf)
        flipped[pos] ^= 1
        assert not batch_crc_ok(flipped, 0, header)
    assert not batch_crc_ok(buf[:-1], 0, header)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes_only_raise_record_errors(data: bytes) -> None:
    try:
        validate_batches(data)
    except (CorruptRecordError, InvalidRecordError):
        pass
    try:
        parse_header(data)
    except CorruptRecordError:
        pass
    for pos, header in iter_batches(data):
        assert pos + header.size <= len(data)


@settings(max_examples=150, deadline=None)
@given(st.integers(min_value=0, max_value=10_000), st.binary(min_size=1, max_size=8))
def test_mutated_valid_batches_only_raise_record_errors(where: int, noise: bytes) -> None:
    buf = make_batch(3) + make_batch(2)
    pos = where % len(buf)
    buf[pos : pos + len(noise)] = noise
    try:
        headers = validate_batches(buf)
    except (CorruptRecordError, InvalidRecordError):
        return
    assert sum(h.size for h in headers) == len(buf)
