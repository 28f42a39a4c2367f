"""Record batch v2 header codec: parse, validate, and rewrite batches without touching records.

Everything the broker needs to place a batch (offsets, counts, timestamps, producer
id/epoch/sequence, CRC) lives in the fixed 61-byte batch header, so framing checks and offset
assignment are work per batch. The records themselves are checked, never rewritten, by
storage/log_validator.py.

Layout (big-endian), byte offsets in brackets:
baseOffset int64 [0], batchLength int32 [8], partitionLeaderEpoch int32 [12], magic int8 [16],
crc uint32 [17], attributes int16 [21], lastOffsetDelta int32 [23], baseTimestamp int64 [27],
maxTimestamp int64 [35], producerId int64 [43], producerEpoch int16 [51], baseSequence int32 [53],
recordsCount int32 [57]. The CRC32C covers bytes [21, end of batch); baseOffset and
partitionLeaderEpoch are outside it so the broker can assign them without recomputing it.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import NamedTuple

from crc32c import crc32c

from .errors import ErrorCode, FixedCodeError

HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: bytes not counted by batchLength
LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
MAX_TIMESTAMP_OFFSET = 35
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD  # 49: a batch with no records
CURRENT_MAGIC = 2

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20

NO_TIMESTAMP = -1
CREATE_TIME = 0
LOG_APPEND_TIME = 1
NO_PRODUCER_ID = -1
NO_SEQUENCE = -1
INT32_MAX = 2**31 - 1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_LENGTH_AND_MAGIC = struct.Struct(">qiib")  # baseOffset, batchLength, epoch, magic
_BASE_OFFSET = struct.Struct(">q")
_LEADER_EPOCH = struct.Struct(">i")
_ATTRIBUTES = struct.Struct(">h")
_MAX_TIMESTAMP = struct.Struct(">q")
_CRC = struct.Struct(">I")


class InvalidRecordError(FixedCodeError):
    """A batch that is well-formed bytes but not acceptable."""

    CODE = ErrorCode.INVALID_RECORD


class CorruptRecordError(FixedCodeError):
    """Bytes that are not a sound batch: truncated, bad length, CRC mismatch."""

    CODE = ErrorCode.CORRUPT_MESSAGE


class BatchHeader(NamedTuple):
    """The decoded 61-byte header of one record batch."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies, header included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        """CREATE_TIME or LOG_APPEND_TIME."""
        return (self.attributes & TIMESTAMP_TYPE_MASK) >> 3

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def last_sequence(self) -> int:
        """Sequence of the batch's last record, wrapping past int32 max like Kafka."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return increment_sequence(self.base_sequence, self.last_offset_delta)


def increment_sequence(sequence: int, increment: int) -> int:
    """Add to a producer sequence number, wrapping from int32 max to 0."""
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


def parse_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Decode the v2 header at `pos`; raises CorruptRecordError if fewer than 61 bytes remain."""
    if pos < 0 or len(buf) - pos < HEADER_SIZE:
        raise CorruptRecordError(
            f"Record batch header at position {pos} is truncated: "
            f"{max(0, len(buf) - pos)} of {HEADER_SIZE} bytes available"
        )
    return BatchHeader._make(_HEADER.unpack_from(buf, pos))


def batch_crc_ok(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader) -> bool:
    """True when the stored CRC32C matches the batch bytes (attributes to end of batch)."""
    end = pos + header.size
    if end > len(buf):
        return False
    with memoryview(buf) as view:
        return crc32c(view[pos + ATTRIBUTES_OFFSET : end]) == header.crc


def validate_batches(
    buf: bytes | bytearray | memoryview, *, request_version: int | None = None
) -> list[BatchHeader]:
    """Check a produce request's records the way a Kafka leader does before appending.

    Returns the header of every batch in order (batches are contiguous from position 0).
    Raises CorruptRecordError for bytes that are not sound batches (truncated, bad length, bad
    CRC) and InvalidRecordError for sound batches Kafka refuses from clients (wrong magic,
    inconsistent counts, control batches, non-zero base offset, negative sequence).
    `request_version` only makes the magic error message name the produce version, as Kafka's does.
    """
    with memoryview(buf) as view:
        total = len(view)
        if total == 0:
            raise InvalidRecordError("Produce request has no record batch for the partition")
        headers: list[BatchHeader] = []
        pos = 0
        while pos < total:
            remaining = total - pos
            if remaining <= MAGIC_OFFSET:
                raise CorruptRecordError(f"Record batch at position {pos} is truncated ({remaining} bytes)")
            _, batch_length, _, magic = _LENGTH_AND_MAGIC.unpack_from(view, pos)
            if magic != CURRENT_MAGIC:
                version = "" if request_version is None else f"with version {request_version} "
                raise InvalidRecordError(
                    f"Produce requests {version}are only allowed to contain record batches "
                    f"with magic version 2 (found magic {magic})"
                )
            if batch_length < MIN_BATCH_LENGTH:
                raise CorruptRecordError(
                    f"Record batch is corrupt (the size {batch_length + LOG_OVERHEAD} is smaller than "
                    f"the minimum allowed overhead {HEADER_SIZE})"
                )
            size = batch_length + LOG_OVERHEAD
            if size > remaining:
                raise CorruptRecordError(
                    f"Record batch at position {pos} is truncated: size {size}, {remaining} bytes available"
                )
            header = BatchHeader._make(_HEADER.unpack_from(view, pos))
            if crc32c(view[pos + ATTRIBUTES_OFFSET : pos + size]) != header.crc:
                raise CorruptRecordError(f"Record is corrupt (stored crc = {header.crc})")
            _check_client_batch(header)
            headers.append(header)
            pos += size
        return headers


def _check_client_batch(header: BatchHeader) -> None:
    if header.base_offset != 0:
        raise InvalidRecordError(
            f"The baseOffset of the record batch in the append should be 0, but it is {header.base_offset}"
        )
    count_from_offsets = header.last_offset_delta + 1
    if count_from_offsets <= 0:
        raise InvalidRecordError(
            f"Batch has an invalid offset range: [{header.base_offset}, {header.last_offset}]"
        )
    if header.records_count <= 0:
        raise InvalidRecordError(f"Invalid reported count for record batch: {header.records_count}")
    if count_from_offsets != header.records_count:
        raise InvalidRecordError(
            f"Inconsistent batch offset range [{header.base_offset}, {header.last_offset}] "
            f"and count of records {header.records_count}"
        )
    if header.is_control:
        raise InvalidRecordError("Clients are not allowed to write control records")
    if header.has_producer_id and header.base_sequence < 0:
        raise InvalidRecordError(
            f"Invalid sequence number {header.base_sequence} in record batch "
            f"with producerId {header.producer_id}"
        )


def assign_offsets(
    buf: bytearray,
    headers: list[BatchHeader],
    base_offset: int,
    leader_epoch: int,
    log_append_time_ms: int | None,
) -> list[BatchHeader]:
    """Stamp offsets and the leader epoch onto validated batches, in place.

    `headers` are the batches of `buf` in order, as returned by validate_batches. Batch i gets
    baseOffset = base_offset + (records before it). With `log_append_time_ms` (topics with
    message.timestamp.type=LogAppendTime) the timestamp-type bit and maxTimestamp are set too and
    the CRC is recomputed. Returns the rewritten headers; the next free offset is
    `result[-1].last_offset + 1`.
    """
    with memoryview(buf) as view:
        result: list[BatchHeader] = []
        pos = 0
        next_offset = base_offset
        for header in headers:
            _BASE_OFFSET.pack_into(buf, pos, next_offset)
            _LEADER_EPOCH.pack_into(buf, pos + LEADER_EPOCH_OFFSET, leader_epoch)
            header = header._replace(base_offset=next_offset, partition_leader_epoch=leader_epoch)
            if log_append_time_ms is not None:
                header = _stamp(buf, view, pos, header, LOG_APPEND_TIME, log_append_time_ms)
            result.append(header)
            next_offset = header.last_offset + 1
            pos += header.size
        return result


def stamp_timestamp_type_and_max(
    buf: bytes | bytearray, pos: int, header: BatchHeader, timestamp_type: int, max_timestamp: int
) -> BatchHeader:
    """Set the timestamp type and max timestamp of the batch at `pos` (Kafka's setMaxTimestamp), recomputing
    the CRC they are under. A batch that has them already is left alone (and `buf` may then be read-only)."""
    if header.timestamp_type == timestamp_type and header.max_timestamp == max_timestamp:
        return header
    if not isinstance(buf, bytearray):
        raise TypeError("restamping a record batch needs a bytearray")
    with memoryview(buf) as view:
        return _stamp(buf, view, pos, header, timestamp_type, max_timestamp)


def _stamp(
    buf: bytearray, view: memoryview, pos: int, header: BatchHeader, timestamp_type: int, max_timestamp: int
) -> BatchHeader:
    attributes = header.attributes & ~TIMESTAMP_TYPE_MASK | (TIMESTAMP_TYPE_MASK if timestamp_type else 0)
    _ATTRIBUTES.pack_into(buf, pos + ATTRIBUTES_OFFSET, attributes)
    _MAX_TIMESTAMP.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, max_timestamp)
    crc = crc32c(view[pos + ATTRIBUTES_OFFSET : pos + header.size])
    _CRC.pack_into(buf, pos + CRC_OFFSET, crc)
    return header._replace(attributes=attributes, max_timestamp=max_timestamp, crc=crc)


def iter_batches(buf: bytes | bytearray | memoryview, pos: int = 0) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) of each complete v2 batch from `pos` on.

    Stops silently at a partial tail or at bytes that cannot start a v2 batch (magic other than 2,
    length below the 61-byte minimum). CRCs are not checked here; see batch_crc_ok.
    """
    total = len(buf)
    unpack = _HEADER.unpack_from
    make = BatchHeader._make
    while pos >= 0 and total - pos >= HEADER_SIZE:
        header = make(unpack(buf, pos))
        if header.magic != CURRENT_MAGIC or header.batch_length < MIN_BATCH_LENGTH:
            return
        if pos + header.batch_length + LOG_OVERHEAD > total:
            return
        yield pos, header
        pos += header.batch_length + LOG_OVERHEAD
