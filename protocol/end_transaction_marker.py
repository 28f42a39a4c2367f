"""End-transaction markers: the control batches that commit or abort a producer's transaction in a partition.

A marker is a control batch (attributes transactional | control) of one record whose key is the control record
type (int16 version 0, int16 type: ABORT 0, COMMIT 1) and whose value is the marker (int16 version 0, int32
coordinator epoch), as Kafka's ControlRecordType and EndTransactionMarker write them. The transaction
coordinator's WriteTxnMarkers asks partition leaders to append them; consumers skip them (they take an offset).
"""
from __future__ import annotations

import enum
import struct
from typing import NamedTuple

from crc32c import crc32c
from kafka.record.util import decode_varint, encode_varint

from .record_batch import (
    ATTRIBUTES_OFFSET,
    CONTROL_MASK,
    CRC_OFFSET,
    HEADER_SIZE,
    LOG_OVERHEAD,
    NO_SEQUENCE,
    TRANSACTIONAL_MASK,
    BatchHeader,
    CorruptRecordError,
)

CONTROL_RECORD_KEY_VERSION = 0
END_TXN_MARKER_VALUE_VERSION = 0

_HEADER = struct.Struct(">qiibIhiqqqhii")
_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")
_CRC = struct.Struct(">I")


class ControlRecordType(enum.IntEnum):
    ABORT = 0
    COMMIT = 1


class EndTransactionMarker(NamedTuple):
    control_type: ControlRecordType
    coordinator_epoch: int

    @property
    def is_abort(self) -> bool:
        return self.control_type == ControlRecordType.ABORT


def _zigzag(value: int) -> bytes:
    """A signed varint, as a record's fields are written."""
    out = bytearray()
    encode_varint(value, out.append)
    return bytes(out)


def build_marker_batch(producer_id: int, producer_epoch: int, marker: EndTransactionMarker,
                       timestamp: int) -> bytearray:
    """The control batch for `marker`, base offset 0 and leader epoch -1 (the append stamps both)."""
    key = _KEY.pack(CONTROL_RECORD_KEY_VERSION, marker.control_type)
    value = _VALUE.pack(END_TXN_MARKER_VALUE_VERSION, marker.coordinator_epoch)
    body = b"".join((b"\x00", _zigzag(0), _zigzag(0), _zigzag(len(key)), key, _zigzag(len(value)), value,
                     _zigzag(0)))
    record = _zigzag(len(body)) + body
    size = HEADER_SIZE + len(record)
    batch = bytearray(size)
    _HEADER.pack_into(batch, 0, 0, size - LOG_OVERHEAD, -1, 2, 0, TRANSACTIONAL_MASK | CONTROL_MASK, 0,
                      timestamp, timestamp, producer_id, producer_epoch, NO_SEQUENCE, 1)
    batch[HEADER_SIZE:] = record
    _CRC.pack_into(batch, CRC_OFFSET, crc32c(memoryview(batch)[ATTRIBUTES_OFFSET:]))
    return batch


def parse_marker(batch: bytes | bytearray | memoryview, header: BatchHeader) -> EndTransactionMarker | None:
    """The marker in a control batch; None for an empty control batch (its transaction was cleaned away) or a
    control record of another type. Raises CorruptRecordError for a control record that cannot be read."""
    if header.records_count == 0:
        return None
    try:
        pos = HEADER_SIZE
        _length, pos = decode_varint(batch, pos)
        pos += 1  # record attributes
        _timestamp_delta, pos = decode_varint(batch, pos)
        _offset_delta, pos = decode_varint(batch, pos)
        key_length, pos = decode_varint(batch, pos)
        if key_length < _KEY.size:
            raise CorruptRecordError(f"Control record key of batch at offset {header.base_offset} is too short")
        _key_version, control_type = _KEY.unpack_from(batch, pos)
        pos += key_length
        if control_type not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
            return None
        value_length, pos = decode_varint(batch, pos)
        if value_length < _VALUE.size:
            raise CorruptRecordError(f"End transaction marker at offset {header.base_offset} is too short")
        _value_version, coordinator_epoch = _VALUE.unpack_from(batch, pos)
    except (IndexError, struct.error) as e:
        raise CorruptRecordError(f"Control record of batch at offset {header.base_offset} is unreadable: {e}") from e
    return EndTransactionMarker(ControlRecordType(control_type), coordinator_epoch)
