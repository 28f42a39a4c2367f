"""The log validator: every record of a producer's batch is parsed before the batch is appended, as Kafka's
LogValidator parses it, and each kind of bad batch gets the answer Kafka gives."""
from __future__ import annotations

import gzip
import logging
import struct
import zlib
from pathlib import Path

import pytest
import snappy
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

from minikafka.protocol.compression import DecompressedSizeError, decompress, gzip_compress
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.protocol.record_batch import batch_crc_ok, parse_header, validate_batches
from minikafka.storage import log_validator
from minikafka.storage.log import Log
from minikafka.storage.log_config import LogConfig
from minikafka.storage.log_validator import RecordValidationError, validate_records
from tests import record_bytes
from tests.record_bytes import COMPRESSORS, record, varint

# Each test with the compiled record walk and with the Python one.
pytestmark = pytest.mark.usefixtures("record_walk")

NOW = 1_700_000_000_000
CODECS = (0, 1, 2, 3, 4)


def batch(records: list[bytes], **header) -> bytes:
    """A hand-made batch stamped at NOW unless told otherwise."""
    return record_bytes.batch(records, **{"base_timestamp": NOW, **header})


def check(data: bytes, now_ms: int = NOW, **props: str) -> bytearray:
    """Validate `data` as a leader does before appending; returns the (possibly restamped) bytes."""
    buf = bytearray(data)
    headers = validate_batches(buf)
    validate_records(buf, headers, LogConfig.from_props(props), now_ms, "t-0")
    return buf


def refusal(data: bytes, now_ms: int = NOW, **props: str) -> KafkaError:
    with pytest.raises(KafkaError) as refused:
        check(data, now_ms, **props)
    return refused.value


def library_batch(count: int, codec: int, *, value_size: int = 50, headers: bool = True) -> bytes:
    """A batch as kafka-python's producer writes it."""
    builder = MemoryRecordsBuilder(magic=2, compression_type=codec, batch_size=1 << 30)
    for i in range(count):
        builder.append(timestamp=NOW + i % 7 - 3, key=b"k%d" % i if i % 4 else None, value=b"v" * value_size,
                       headers=[("h", b"x")] if headers and i % 3 == 0 else [])
    builder.close()
    return bytes(builder.buffer())


# ---- what producers write passes, untouched ------------------------------------------------------------------------

@pytest.mark.parametrize("codec", CODECS)
def test_library_batches_of_every_codec_pass_unchanged(codec):
    data = library_batch(300, codec)
    assert check(data) == data


def test_every_varint_width_and_record_shape_passes():
    """One-, two- and three-byte varints in every field, null and empty keys and values, headers."""
    deltas = [(-1) ** i * i * 100_003 for i in range(9000)]
    records = [record(i, None if i % 5 == 0 else b"x" * (20_000 if i % 1000 == 7 else i % 90),
                      key=None if i % 2 else b"k" * (i % 200),
                      headers=tuple((b"h%d" % j, None if j % 2 else b"v" * j) for j in range(i % 4)),
                      timestamp_delta=deltas[i]) for i in range(9000)]
    data = batch(records, base_timestamp=NOW, max_timestamp=NOW + max(deltas))
    assert check(data, **{"message.timestamp.after.max.ms": str(2**62)}) == data


# ---- compression ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("codec", [5, 6, 7])
def test_unknown_compression_id_is_refused_as_kafka_does(codec):
    error = refusal(batch([record(0, b"v")], payload=record(0, b"v"), codec=codec))
    assert error.code == ErrorCode.UNKNOWN_SERVER_ERROR and f"compression type id: {codec}" in str(error)


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_compressed_data_that_does_not_decompress_is_refused(codec):
    good = batch([record(0, b"v" * 100)], codec=codec)
    payload = good[61:]
    for bad in (payload[: len(payload) // 2], payload + b"trailing", b"\x00" * 40, b""):
        error = refusal(batch([record(0, b"v" * 100)], codec=codec, payload=bad))
        assert error.code == ErrorCode.UNKNOWN_SERVER_ERROR, bad


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_compressed_records_are_parsed_like_uncompressed_ones(codec):
    assert refusal(batch([record(0, b"a"), record(2, b"b")], codec=codec)).code == ErrorCode.INVALID_RECORD
    assert refusal(batch([record(0, b"a")], count=2, codec=codec)).code == ErrorCode.INVALID_RECORD


@pytest.mark.parametrize("codec", [1, 3, 4])
def test_concatenated_gzip_members_and_lz4_or_zstd_frames_are_read_as_one_stream(codec):
    first, second = record(0, b"a" * 300), record(1, b"b" * 300)
    payload = COMPRESSORS[codec](first) + COMPRESSORS[codec](second)
    data = batch([first, second], codec=codec, payload=payload)
    assert check(data) == data


def test_snappy_in_xerial_blocks_and_as_one_raw_block_both_pass():
    records = [record(i, b"s" * 5000) for i in range(20)]  # xerial splits past 32 KiB
    raw = snappy.compress(b"".join(records))
    for data in (batch(records, codec=2), batch(records, codec=2, payload=raw)):
        assert check(data) == data


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_decompression_stops_at_the_bound_whatever_the_ratio(codec):
    zeros = b"\x00" * 50_000_000
    payload = COMPRESSORS[codec](zeros)
    with pytest.raises(DecompressedSizeError):
        decompress(codec, payload, 1_000_000)
    assert len(decompress(codec, COMPRESSORS[codec](zeros[:1_000_000]), 1_000_000)) == 1_000_000


def test_a_batch_that_decompresses_past_the_bound_is_message_too_large(monkeypatch):
    monkeypatch.setattr(log_validator, "MAX_DECOMPRESSED_BATCH_BYTES", 10_000)
    assert check(batch([record(0, b"\x00" * 9_000)], codec=4))
    assert refusal(batch([record(0, b"\x00" * 11_000)], codec=4)).code == ErrorCode.MESSAGE_TOO_LARGE


def test_a_codec_without_its_library_is_checked_by_header_only(monkeypatch, caplog):
    monkeypatch.setattr(log_validator, "codec_available", lambda codec: False)
    monkeypatch.setattr(log_validator, "_warned_codecs", set())
    data = batch([record(0, b"v")], codec=4, payload=b"not zstd at all")
    with caplog.at_level(logging.WARNING, logger=log_validator.__name__):
        assert check(data) == data
        check(data)
    assert len([r for r in caplog.records if "zstd" in r.getMessage()]) == 1
    late = batch([record(0, b"v")], codec=4, payload=b"x", base_timestamp=NOW + 3_600_001)
    assert refusal(late).code == ErrorCode.INVALID_TIMESTAMP


# ---- counts, lengths, structure ------------------------------------------------------------------------------------

def test_a_count_past_the_records_is_invalid_record():
    three = [record(i, b"r%d" % i) for i in range(3)]
    error = refusal(batch(three, count=2**31 - 1))
    assert error.code == ErrorCode.INVALID_RECORD and "premature EOF" in str(error)


def test_records_past_the_count_are_invalid_record():
    three = [record(i, b"r%d" % i) for i in range(3)]
    error = refusal(batch(three, count=2))
    assert error.code == ErrorCode.INVALID_RECORD and "remaining" in str(error)


def test_count_and_last_offset_delta_must_agree():
    assert refusal(batch([record(0, b"a")], last_offset_delta=5)).code == ErrorCode.INVALID_RECORD


@pytest.mark.parametrize("deltas", [(0, 2, 3), (1, 2, 3), (0, 0, 1), (0, 1, -1)])
def test_offset_deltas_must_run_from_zero_without_gaps(deltas):
    error = refusal(batch([record(d, b"x") for d in deltas]))
    assert error.code == ErrorCode.INVALID_RECORD and "offset delta" in str(error)


def _with_body(body: bytes, length: int | None = None) -> bytes:
    return varint(len(body) if length is None else length) + body


@pytest.mark.parametrize("name, records", [
    ("garbage", [b"\xff" * 40]),
    ("length past the batch", [_with_body(b"\x00\x00\x00\x01\x02a\x00", length=200)]),
    ("zero length", [_with_body(b"", length=0), record(0, b"a")]),
    ("negative length", [_with_body(b"\x00\x00\x00\x01\x02a\x00", length=-7)]),
    ("key longer than the record", [_with_body(b"\x00\x00\x00" + varint(50) + b"k" + varint(1) + b"a\x00")]),
    ("value shorter than stated", [_with_body(b"\x00\x00\x00\x01" + varint(3) + b"a\x00")]),
    ("bytes after the headers", [_with_body(b"\x00\x00\x00\x01\x02a\x00junk")]),
    ("negative header count", [_with_body(b"\x00\x00\x00\x01\x02a" + varint(-2))]),
    ("header count past the record", [_with_body(b"\x00\x00\x00\x01\x02a" + varint(40))]),
    ("negative header key size", [_with_body(b"\x00\x00\x00\x01\x02a" + varint(1) + varint(-3) + varint(-1))]),
    ("header value past the record", [_with_body(b"\x00\x00\x00\x01\x02a" + varint(1) + varint(1) + b"h"
                                                 + varint(90))]),
    ("varint longer than five bytes", [_with_body(b"\x00\x00" + b"\x80" * 5 + b"\x00\x01\x02a\x00")]),
    ("varlong longer than ten bytes", [_with_body(b"\x00" + b"\x80" * 10 + b"\x00\x00\x01\x02a\x00")]),
    ("record cut by the batch end", [record(0, b"a") + b"\x10\x00"]),
    ("no header count", [_with_body(b"\x00\x00\x00\x01\x02a")]),
])
def test_records_that_do_not_parse_are_invalid_record(name, records):
    error = refusal(batch(records, count=1))
    assert error.code == ErrorCode.INVALID_RECORD, name


def test_no_records_at_all_with_a_count_is_invalid_record():
    assert refusal(batch([], count=1, last_offset_delta=0)).code == ErrorCode.INVALID_RECORD


# ---- record-level checks with record errors -------------------------------------------------------------------------

def test_timestamps_are_checked_per_record_not_by_the_header():
    records = [record(0, b"a"), record(1, b"b", timestamp_delta=-5000), record(2, b"c", timestamp_delta=7000)]
    data = batch(records, base_timestamp=NOW, max_timestamp=NOW)  # the header claims both in range
    error = refusal(data, **{"message.timestamp.before.max.ms": "1000", "message.timestamp.after.max.ms": "1000"})
    assert isinstance(error, RecordValidationError) and error.code == ErrorCode.INVALID_TIMESTAMP
    assert [e.batch_index for e in error.record_errors] == [1, 2]
    assert f"Timestamp {NOW - 5000} of message with offset 1 is out of range" in error.record_errors[0].message


def test_records_without_a_timestamp_are_not_range_checked():
    data = batch([record(0, b"a"), record(1, b"b")], base_timestamp=-1, max_timestamp=-1)
    assert check(data, **{"message.timestamp.before.max.ms": "1000"}) == data


def test_log_append_time_set_by_the_producer_is_refused_per_record():
    data = batch([record(0, b"a"), record(1, b"b")], log_append_time=True)
    error = refusal(data, **{"message.timestamp.type": "LogAppendTime"})
    assert isinstance(error, RecordValidationError) and error.code == ErrorCode.INVALID_TIMESTAMP
    assert [e.batch_index for e in error.record_errors] == [0, 1]
    assert "should not set timestamp type to LogAppendTime" in error.record_errors[0].message


def test_compacted_topics_refuse_records_without_a_key():
    data = batch([record(0, b"a", key=b"k"), record(1, b"b"), record(2, b"c", key=b""), record(3, b"d")])
    error = refusal(data, **{"cleanup.policy": "compact"})
    assert isinstance(error, RecordValidationError) and error.code == ErrorCode.INVALID_RECORD
    assert [e.batch_index for e in error.record_errors] == [1, 3]
    assert str(error).startswith("One or more records have been rejected due to 2 record errors in total")
    assert "RecordError(batchIndex=1, message='Compacted topic cannot accept message without key" in str(error)
    assert check(data, **{"cleanup.policy": "delete"}) == data


def test_a_key_error_and_a_timestamp_error_answer_invalid_timestamp_with_both():
    data = batch([record(0, b"a"), record(1, b"b", key=b"k", timestamp_delta=-10_000)])
    error = refusal(data, **{"cleanup.policy": "compact", "message.timestamp.before.max.ms": "1000"})
    assert error.code == ErrorCode.INVALID_TIMESTAMP
    assert [e.batch_index for e in error.record_errors] == [0, 1]  # type: ignore[attr-defined]


# ---- the max timestamp follows the records -------------------------------------------------------------------------

@pytest.mark.parametrize("codec", [0, 3])
def test_max_timestamp_is_set_from_the_records(codec):
    records = [record(0, b"a"), record(1, b"b", timestamp_delta=900), record(2, b"c", timestamp_delta=-50)]
    stated = batch(records, codec=codec, base_timestamp=NOW, max_timestamp=NOW + 5)
    restamped = check(stated)
    header = parse_header(restamped)
    assert header.max_timestamp == NOW + 900 and header.timestamp_type == 0
    assert batch_crc_ok(restamped, 0, header)
    assert restamped[61:] == stated[61:]
    assert [r.timestamp for r in MemoryRecords(bytes(restamped)).next_batch()] == [NOW, NOW + 900, NOW - 50]


def test_log_append_time_batch_on_a_create_time_topic_becomes_create_time_as_in_kafka():
    data = batch([record(0, b"a", timestamp_delta=3)], log_append_time=True, base_timestamp=NOW, max_timestamp=NOW)
    header = parse_header(check(data))
    assert header.timestamp_type == 0 and header.max_timestamp == NOW


# ---- through the log -----------------------------------------------------------------------------------------------

def test_a_refused_batch_leaves_the_log_as_it_was(tmp_path: Path):
    log = Log.open(tmp_path / "t-0", "t", 0, LogConfig(), topic_id=bytes(16), now_ms=NOW)
    try:
        log.append_as_leader(batch([record(0, b"one"), record(1, b"two")]), 0, NOW)
        size = log.size_in_bytes
        for poisoned in (batch([record(i, b"r") for i in range(3)], count=2**31 - 1),
                         batch([record(0, b"v")], codec=6, payload=record(0, b"v")),
                         batch([record(0, b"x"), record(5, b"y")])):
            with pytest.raises(KafkaError):
                log.append_as_leader(poisoned, 0, NOW)
            assert log.log_end_offset == 2 and log.size_in_bytes == size
        assert log.append_as_leader(batch([record(0, b"three")]), 0, NOW).first_offset == 2
    finally:
        log.close()


# ---- nothing but Kafka errors, and what passes is readable ---------------------------------------------------------

def _unvarint(data: bytes, pos: int) -> tuple[int, int]:
    raw, shift = 0, 0
    while True:
        raw |= (data[pos] & 0x7F) << shift
        pos += 1
        if data[pos - 1] < 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7


def _attributes_zeroed(records: bytes) -> bytes:
    """kafka-python reads a record's attributes byte as a varint (Kafka reads one byte, and ignores it in format
    v2): zeroing them lets kafka-python read records Kafka reads."""
    out = bytearray(records)
    pos = 0
    while pos < len(out):
        size, pos = _unvarint(out, pos)
        out[pos] = 0
        pos += size
    return bytes(out)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(codec=st.sampled_from([0, 0, 0, 1, 4]), where=st.integers(0, 10_000), noise=st.binary(min_size=1, max_size=4),
       cut=st.integers(0, 5))
def test_mutated_batches_raise_only_kafka_errors_and_what_passes_reads_back(codec, where, noise, cut):
    data = bytearray(library_batch(4, codec, value_size=20, headers=False))
    body = bytearray(log_validator.decompress(codec, bytes(data[61:]), 1 << 20) if codec else data[61:])
    pos = where % len(body)
    body[pos : pos + len(noise)] = noise
    if cut % 2:
        del body[len(body) - cut // 2 :]

    def framed(records: bytes) -> bytes:
        out = bytearray(data[:61]) + (COMPRESSORS[codec](records) if codec else records)
        struct.pack_into(">i", out, 8, len(out) - 12)
        struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])))
        return bytes(out)

    try:
        check(framed(bytes(body)))
    except KafkaError:
        return
    accepted = MemoryRecords(framed(_attributes_zeroed(bytes(body)))).next_batch()
    assert [r.offset for r in accepted] == [0, 1, 2, 3]


def test_gzip_is_written_as_kafka_writes_it():
    """Java's GZIPOutputStream header (MTIME 0, OS unknown) and the default level: the same records give the same
    bytes on every replica and in every cleaning, and every gzip reader reads them."""
    data = b"".join(b"record-%06d" % i for i in range(5000))
    compressed = gzip_compress(data)
    assert compressed[:10] == bytes.fromhex("1f8b08000000000000ff")
    assert compressed == gzip_compress(data)
    assert gzip.decompress(compressed) == data == decompress(1, compressed, len(data))
    assert compressed[10:-8] == zlib.compress(data, 6)[2:-4]  # raw deflate at zlib's default level
    assert struct.unpack("<II", compressed[-8:]) == (zlib.crc32(data), len(data))
