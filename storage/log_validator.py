"""Kafka's LogValidator: the records inside each batch a producer (or a coordinator) appends, checked before
offsets are assigned, so that no consumer ever meets a batch it cannot read.

record_batch.validate_batches has already checked each batch's header and CRC; here every record is parsed, as
Kafka parses it on the leader, without building record objects and without changing a byte of it:
- the compression id is one Kafka knows (0-4); a compressed batch is decompressed once, bounded in size;
- the records parse exactly to the end of the batch (or of its decompressed data): each record's length, its
  timestamp delta, offset delta, key, value and headers, with the record's length matching what its fields use;
- the number of records parsed is the count the header declares (and so lastOffsetDelta + 1);
- offset deltas run 0, 1, 2, ... Kafka rebuilds a compressed batch whose inner offsets are off and does not look
  at those of an uncompressed one; batches stay bytes here, so such a batch is refused;
- per record, as Kafka's validateRecord: a key on compacted topics, a CreateTime timestamp within
  message.timestamp.before/after.max.ms of now, no LogAppendTime set by the producer. These answer with every
  offending record's index (Produce v8+ `record_errors`);
- on CreateTime topics the header's max timestamp is set to the largest record timestamp, as Kafka does, so the
  time index follows the records rather than the producer's word (the CRC is recomputed only if it changes).

Answers, as Kafka gives them: a record that does not parse, a wrong count or offset delta INVALID_RECORD; an
unknown compression id or data its codec cannot decompress UNKNOWN_SERVER_ERROR (in Kafka both are unchecked
exceptions of its codec layer, which the produce path answers with that code); record errors INVALID_RECORD, or
INVALID_TIMESTAMP when any of them is about a timestamp. A batch that decompresses to more than
MAX_DECOMPRESSED_BATCH_BYTES is refused with MESSAGE_TOO_LARGE: Kafka streams such a batch, this broker would
have to hold it. A batch compressed with a codec whose Python library is not installed is checked by its header
only (its timestamps by the first and max ones), with a warning: refusing it would refuse every producer using
that codec.

Cost: the walk is compiled (protocol/_record_codec.c, built at install): about 15 ns per record whatever its size
(0.15 ms per MB of 100-byte records) and 0.2 us per call. `_python_walk` here is its reference, and the walk where
it is not built or MINIKAFKA_PURE_PYTHON=1 asks for it: a loop over records with inline paths for the one- and
two-byte varints records are made of, about 1 us per record (10 ms per MB of 100-byte records, most of a broker's
CPU under a load of them). A compressed batch costs its decompression on top, once, as in Kafka: about 0.4 ms per
MiB of records for lz4, snappy and zstd, 2.3 ms for gzip.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from typing import NamedTuple

from minikafka.protocol.compression import (
    CODEC_NAMES,
    CODEC_PACKAGES,
    NONE,
    ZSTD,
    DecompressedSizeError,
    DecompressionError,
    codec_available,
    decompress,
)
from minikafka.protocol.errors import ErrorCode, FixedCodeError
from minikafka.protocol.record_batch import (
    CREATE_TIME,
    HEADER_SIZE,
    NO_TIMESTAMP,
    BatchHeader,
    InvalidRecordError,
    stamp_timestamp_type_and_max,
)
from minikafka.protocol.record_columns import PURE_PYTHON_ENV

from .errors import InvalidTimestampError, RecordTooLargeError
from .log_config import LogConfig

logger = logging.getLogger(__name__)

MAX_DECOMPRESSED_BATCH_BYTES = 64 * 1024 * 1024
_LONG_MIN = -(2**63)
_LONG_MAX = 2**63 - 1
_INT_MASK = 0xFFFFFFFF
_LONG_MASK = 0xFFFFFFFFFFFFFFFF
_warned_codecs: set[int] = set()


class RecordError(NamedTuple):
    """One refused record: its index in the batch and why (Produce's BatchIndexAndErrorMessage)."""

    batch_index: int
    message: str

    def __str__(self) -> str:
        return f"RecordError(batchIndex={self.batch_index}, message='{self.message}')"


class RecordValidationError(FixedCodeError):
    """Records refused one by one (Kafka's RecordValidationException); Produce v8+ answers with each of them."""

    def __init__(self, message: str, record_errors: list[RecordError]) -> None:
        super().__init__(message)
        self.record_errors = record_errors


class InvalidRecordsError(RecordValidationError, InvalidRecordError):
    """Records refused for what they hold (no key on a compacted topic)."""

    CODE = ErrorCode.INVALID_RECORD


class InvalidTimestampsError(RecordValidationError, InvalidTimestampError):
    """Records refused with at least one of them for its timestamp."""

    CODE = ErrorCode.INVALID_TIMESTAMP


class CompressionError(FixedCodeError):
    """An unknown compression id, or data its codec cannot decompress (Kafka answers both this way)."""

    CODE = ErrorCode.UNKNOWN_SERVER_ERROR


def validate_records(
    buf: bytes | bytearray, headers: list[BatchHeader], config: LogConfig, now_ms: int, partition: str
) -> list[BatchHeader]:
    """Check the records of the batches of `buf` (their `headers` from validate_batches) for an append to
    `partition`. Returns the headers, restamped where the max timestamp was set from the records: `buf` is
    changed in place only then, and must be a bytearray for that."""
    result = []
    pos = 0
    for header in headers:
        result.append(_validate_batch(buf, pos, header, config, now_ms, partition))
        pos += header.size
    return result


def _validate_batch(
    buf: bytes | bytearray, pos: int, header: BatchHeader, config: LogConfig, now_ms: int, partition: str
) -> BatchHeader:
    codec = header.compression
    if codec > ZSTD:
        raise CompressionError(f"Unknown compression type id: {codec} in a record batch for {partition}")
    log_append_time_batch = header.timestamp_type != CREATE_TIME
    records = _records_of(buf, pos, header, partition)
    keyless = 0
    if records is None:
        low, high = header.base_timestamp, header.max_timestamp
    else:
        data, start, end = records
        try:
            count, low_delta, high_delta, keyless = _walk(data, start, end, 0)
        except IndexError:
            raise InvalidRecordError(f"Found invalid record structure in a record batch for {partition}") from None
        if count < header.records_count:
            raise InvalidRecordError(
                f"Incorrect declared batch size, premature EOF reached: {count} of {header.records_count} "
                f"records in a record batch for {partition}"
            )
        if count > header.records_count:
            raise InvalidRecordError(
                f"Incorrect declared batch size, records still remaining in a record batch for {partition}"
            )
        low, high = header.base_timestamp + low_delta, header.base_timestamp + high_delta
    if log_append_time_batch:  # the records' timestamps are the batch's max timestamp
        low = high = header.max_timestamp

    compacted = "compact" in config.cleanup_policy.split(",")
    create_time = not config.log_append_time
    before, after = config.message_timestamp_before_max_ms, config.message_timestamp_after_max_ms
    if (
        (compacted and keyless)
        or log_append_time_batch
        or (create_time and (now_ms - low > before or high - now_ms > after))
    ):
        if records is None:
            _check_header_timestamps(header, low, high, create_time, now_ms, before, after)
        else:
            _check_each_record(records, header, compacted, create_time, now_ms, before, after, partition)
    if not create_time:
        return header  # offset assignment stamps LogAppendTime
    return stamp_timestamp_type_and_max(buf, pos, header, CREATE_TIME, max(NO_TIMESTAMP, high))


def _records_of(
    buf: bytes | bytearray, pos: int, header: BatchHeader, partition: str
) -> tuple[bytes | bytearray, int, int] | None:
    """Where the batch's records are: (bytes, start, end); None when its codec cannot be decompressed here."""
    codec = header.compression
    if codec == NONE:
        return buf, pos + HEADER_SIZE, pos + header.size
    if not codec_available(codec):
        if codec not in _warned_codecs:
            _warned_codecs.add(codec)
            logger.warning(
                "%s batches are appended with their headers checked only: install %s to check their records",
                CODEC_NAMES[codec], CODEC_PACKAGES[codec],
            )
        return None
    with memoryview(buf) as view:
        try:
            data = decompress(codec, view[pos + HEADER_SIZE : pos + header.size], MAX_DECOMPRESSED_BATCH_BYTES)
        except DecompressedSizeError as e:
            raise RecordTooLargeError(f"{e} in a record batch for {partition}") from e
        except DecompressionError as e:
            raise CompressionError(f"Failed to decompress a record batch for {partition}: {e}") from e
    return data, 0, len(data)


def _check_each_record(
    records: tuple[bytes | bytearray, int, int],
    header: BatchHeader,
    compacted: bool,
    create_time: bool,
    now_ms: int,
    before: int,
    after: int,
    partition: str,
) -> None:
    """Kafka's validateRecord over every record (key, then timestamp), and its processRecordErrors."""
    errors: list[RecordError] = []
    timestamp_errors = False
    log_append_time_batch = header.timestamp_type != CREATE_TIME
    for index, timestamp_delta, keyless in _each_record(*records):
        timestamp = header.max_timestamp if log_append_time_batch else header.base_timestamp + timestamp_delta
        if compacted and keyless:
            errors.append(RecordError(index, f"Compacted topic cannot accept message without key in topic "
                                             f"partition {partition}."))
        elif create_time and timestamp != NO_TIMESTAMP:
            if now_ms - timestamp > before or timestamp - now_ms > after:
                timestamp_errors = True
                errors.append(RecordError(index, f"Timestamp {timestamp} of message with offset {index} is out of "
                                                 f"range. The timestamp should be within [{now_ms - before}, "
                                                 f"{now_ms + after}]"))
        elif log_append_time_batch:
            timestamp_errors = True
            errors.append(RecordError(index, f"Invalid timestamp type in message with offset {index}. Producer "
                                             "should not set timestamp type to LogAppendTime."))
    if not errors:
        return
    if timestamp_errors:
        raise InvalidTimestampsError("One or more records have been rejected due to invalid timestamp", errors)
    shown = ", ".join(str(e) for e in errors[:3])
    raise InvalidRecordsError(
        f"One or more records have been rejected due to {len(errors)} record errors in total, and only showing "
        f"the first three errors at most: [{shown}]",
        errors,
    )


def _check_header_timestamps(
    header: BatchHeader, low: int, high: int, create_time: bool, now_ms: int, before: int, after: int
) -> None:
    """The timestamp rules on a batch whose records cannot be read here: its first and max timestamps."""
    if create_time and header.max_timestamp != NO_TIMESTAMP:
        if now_ms - low > before or high - now_ms > after:
            raise InvalidTimestampError(
                f"One or more records have been rejected due to invalid timestamp: timestamps [{low}, {high}] "
                f"are out of range [{now_ms - before}, {now_ms + after}]"
            )
    elif header.timestamp_type != CREATE_TIME:
        raise InvalidTimestampError(
            "One or more records have been rejected due to invalid timestamp: "
            "producer should not set timestamp type to LogAppendTime"
        )


def _each_record(data: bytes | bytearray, start: int, end: int) -> Iterator[tuple[int, int, int]]:
    """(index, timestamp delta, 1 if the key is null) of each record of records that _walk accepted."""
    pos = start
    index = 0
    while pos < end:
        size, body = _varint(data, pos, 5, _INT_MASK)
        record_end = body + ((size >> 1) ^ -(size & 1))
        _, timestamp_delta, _, keyless = _walk(data, pos, record_end, index)
        yield index, timestamp_delta, keyless
        pos = record_end
        index += 1


def _python_walk(buf: bytes | bytearray, pos: int, end: int, delta: int) -> tuple[int, int, int, int]:
    """Parse the records in buf[pos:end], the first with offset delta `delta`, as Kafka's DefaultRecord reads
    them. Returns (records, lowest and highest timestamp delta, records with a null key).

    Raises InvalidRecordError, or IndexError for a field cut off by the end of `buf`. Each varint has an inline
    path for its usual length (one byte; two for the record length, offset delta and value length).

    The reference for protocol/_record_codec.c, which does the same in C, and the walk where that is not built."""
    first = delta
    expected = delta << 1  # the next offset delta, zigzag-encoded as on the wire
    low, high = _LONG_MAX, _LONG_MIN
    keyless = 0
    while pos < end:
        b = buf[pos]
        if b < 0x80:
            pos += 1
        else:
            c = buf[pos + 1]
            if c < 0x80:
                b = (b & 0x7F) | (c << 7)
                pos += 2
            else:
                b, pos = _varint(buf, pos, 5, _INT_MASK)
        size = b >> 1
        record_end = pos + size
        if b & 1 or not size or record_end > end:  # an odd raw value is a negative size
            raise InvalidRecordError(
                f"Invalid record size: expected {(b >> 1) ^ -(b & 1)} bytes in record payload, but the batch "
                f"has {end - pos} bytes left"
            )
        b = buf[pos + 1]  # after the attributes byte, which record format v2 leaves unused
        if b < 0x80:
            p = pos + 2
        else:
            b, p = _varint(buf, pos + 1, 10, _LONG_MASK)
        t = (b >> 1) ^ -(b & 1)
        if t < low:
            low = t
        if t > high:
            high = t
        b = buf[p]
        if b < 0x80:
            p += 1
        else:
            c = buf[p + 1]
            if c < 0x80:
                b = (b & 0x7F) | (c << 7)
                p += 2
            else:
                b, p = _varint(buf, p, 5, _INT_MASK)
        if b != expected:
            index = (expected >> 1) - first
            raise InvalidRecordError(
                f"Record {index} of the batch has offset delta {(b >> 1) ^ -(b & 1)}, expected {(expected >> 1)}: "
                "offset deltas must run 0, 1, 2, ..."
            )
        expected += 2
        b = buf[p]  # key length; a negative one (1 is -1, the usual) is a null key
        if b == 1:
            keyless += 1
            p += 1
        else:
            if b < 0x80:
                p += 1
            else:
                b, p = _varint(buf, p, 5, _INT_MASK)
            if b & 1:
                keyless += 1
            else:
                p += b >> 1
        b = buf[p]  # value length
        if b < 0x80:
            p += 1
        else:
            c = buf[p + 1]
            if c < 0x80:
                b = (b & 0x7F) | (c << 7)
                p += 2
            else:
                b, p = _varint(buf, p, 5, _INT_MASK)
        if not b & 1:
            p += b >> 1
        if p + 1 != record_end or buf[p]:  # anything but "no headers, and that was the last byte"
            _check_headers(buf, p, record_end, size, end)
        pos = record_end
    return (expected >> 1) - first, low, high, keyless


def _check_headers(buf: bytes | bytearray, p: int, record_end: int, size: int, end: int) -> None:
    """The headers at `p` must end exactly at `record_end`. Their count is read even where the record has no byte
    left for it (it is read from what follows, as Kafka's DefaultRecord reads it, and the size check then fails), and
    bounded by what is left of the batch (`end`), as Kafka bounds it by its buffer."""
    raw, p = _varint(buf, p, 5, _INT_MASK)
    count = (raw >> 1) ^ -(raw & 1)
    if count < 0:
        raise InvalidRecordError(f"Found invalid number of record headers {count}")
    if count > end - p:
        raise InvalidRecordError(
            f"Found invalid number of record headers. {count} is larger than the remaining size of the buffer"
        )
    for _ in range(count):
        raw, p = _varint(buf, p, 5, _INT_MASK)
        key_size = (raw >> 1) ^ -(raw & 1)
        if key_size < 0:
            raise InvalidRecordError(f"Invalid negative header key size {key_size}")
        raw, p = _varint(buf, p + key_size, 5, _INT_MASK)
        if not raw & 1:
            p += raw >> 1
        if p > record_end:
            break
    if p != record_end:
        read = p - (record_end - size)
        raise InvalidRecordError(
            f"Invalid record size: expected to read {size} bytes in record payload, but instead read {read}"
        )


def _varint(buf: bytes | bytearray, pos: int, max_bytes: int, mask: int) -> tuple[int, int]:
    """The raw (still zigzag-encoded) varint at `pos`, cut to `mask` as Java's int or long keeps it."""
    value = 0
    for i in range(max_bytes):
        b = buf[pos + i]
        value |= (b & 0x7F) << (7 * i)
        if b < 0x80:
            return value & mask, pos + i + 1
    raise InvalidRecordError(f"Found invalid record structure: a varint longer than {max_bytes} bytes")


def _load_compiled_walk() -> Callable[[bytes | bytearray, int, int, int], tuple[int, int, int, int]] | None:
    """protocol/_record_codec.c's walk; None where it is not built (an install without a compiler) or not wanted."""
    if os.environ.get(PURE_PYTHON_ENV) == "1":
        return None
    try:
        from minikafka.protocol import _record_codec
    except ImportError:
        return None
    return _record_codec.walk


compiled_walk = _load_compiled_walk()
_walk = compiled_walk or _python_walk
