"""Records of Kafka record batches decoded into columns: Arrow-layout buffers, without a Python object per record.

A reader that hands records on in columns (the Spark connector builds Arrow arrays over these buffers without a
copy) gets key, value, offset, timestamp and headers of every record of a batch in one call. The layout is Arrow's:
a validity bitmap (least significant bit first, 1 = not null), int32 offsets (rows + 1 of them, the first 0) and
the data bytes for each binary column; int64 little-endian values for offsets and timestamps (milliseconds);
headers as Arrow's list<struct<key: string, value: binary>>, a row without headers being null (as Spark's Kafka
source shows it). This module knows nothing of Arrow itself.

`RecordColumns` is the compiled decoder of protocol/_record_codec.c where it is built, the Python one here
(`PythonRecordColumns`, its reference: both give the same buffers and raise the same errors) where it is not or
MINIKAFKA_PURE_PYTHON=1 says so (the switch storage/log_validator.py follows for its record walk).

Arrow's binary columns index their data with int32 offsets: an append that would take the key, value and header
data since the last take past `max_data_bytes` (at most 2**31 - 1, the default) raises OverflowError and keeps
nothing of its batch. Callers take() well before that (data_bytes says how far they are). Numbers passed to append
are Java longs (int64); offsets and timestamps wrap around as Java's long arithmetic does.
"""

from __future__ import annotations

import os
import struct
from typing import NamedTuple, Protocol

from .record_batch import CorruptRecordError

# Set to 1, the compiled record walk and decoder are left aside (the broker, the connector and their tests).
PURE_PYTHON_ENV = "MINIKAFKA_PURE_PYTHON"
# Arrow's binary and string columns index their data with int32 offsets.
MAX_DATA_BYTES = (1 << 31) - 1
_INT32 = struct.Struct("<i")
_INT64 = struct.Struct("<q")
_INT_MASK = 0xFFFFFFFF
_LONG_MASK = 0xFFFFFFFFFFFFFFFF


class ColumnBuffers(NamedTuple):
    """The rows decoded since the last take, as Arrow buffers."""

    rows: int
    offsets: bytearray
    timestamps: bytearray
    key_validity: bytearray
    key_offsets: bytearray
    key_data: bytearray
    value_validity: bytearray
    value_offsets: bytearray
    value_data: bytearray
    header_validity: bytearray
    header_offsets: bytearray
    header_key_offsets: bytearray
    header_key_data: bytearray
    header_value_validity: bytearray
    header_value_offsets: bytearray
    header_value_data: bytearray


class RecordColumnsType(Protocol):
    @property
    def rows(self) -> int: ...

    @property
    def data_bytes(self) -> int: ...

    def append(self, buf: bytes | bytearray | memoryview, pos: int, end: int, count: int, base_offset: int,
               base_timestamp: int, log_append_time: int | None, min_offset: int, max_offset: int) -> int: ...

    def take(self) -> ColumnBuffers: ...


def _signed64(value: int) -> int:
    value &= _LONG_MASK
    return value - (1 << 64) if value >> 63 else value


def _bitmap(bits: list[bool]) -> bytearray:
    out = bytearray((len(bits) + 7) // 8)
    for i, bit in enumerate(bits):
        if bit:
            out[i >> 3] |= 1 << (i & 7)
    return out


class _Binary:
    """One Arrow binary column being built: validity, offsets, data."""

    def __init__(self) -> None:
        self.valid: list[bool] = []
        self.offsets = bytearray(_INT32.pack(0))
        self.data = bytearray()

    def add(self, value: bytes | None) -> None:
        self.valid.append(value is not None)
        if value:
            self.data += value
        self.offsets += _INT32.pack(len(self.data))


class PythonRecordColumns:
    """The decoder in Python: the reference for the compiled one, and the decoder where that is not built."""

    def __init__(self, include_headers: bool, max_data_bytes: int = MAX_DATA_BYTES) -> None:
        if not 0 <= max_data_bytes <= MAX_DATA_BYTES:
            raise ValueError("max_data_bytes must be within [0, 2**31 - 1]: Arrow's offsets are int32")
        self._include_headers = include_headers
        self._max_data_bytes = max_data_bytes
        self._reset()

    def _reset(self) -> None:
        self._rows = 0
        self._offsets = bytearray()
        self._timestamps = bytearray()
        self._keys = _Binary()
        self._values = _Binary()
        self._header_valid: list[bool] = []
        self._header_offsets = bytearray(_INT32.pack(0)) if self._include_headers else bytearray()
        self._header_entries = 0
        self._header_keys = _Binary()
        self._header_values = _Binary()

    @property
    def rows(self) -> int:
        return self._rows

    @property
    def data_bytes(self) -> int:
        return (len(self._keys.data) + len(self._values.data) + len(self._header_keys.data)
                + len(self._header_values.data))

    def append(self, buf: bytes | bytearray | memoryview, pos: int, end: int, count: int, base_offset: int,
               base_timestamp: int, log_append_time: int | None, min_offset: int, max_offset: int) -> int:
        """Decode the `count` records of buf[pos:end] (one batch's records, uncompressed); keep those with offsets
        in [min_offset, max_offset), each with timestamp log_append_time when it is given (a LogAppendTime batch's
        max timestamp), base_timestamp + its delta otherwise. Returns how many were kept.

        CorruptRecordError for records Kafka's DefaultRecord would not read, OverflowError for data past
        max_data_bytes: either way nothing of the batch is kept."""
        if not 0 <= pos <= end <= len(buf):
            raise ValueError(f"records [{pos}, {end}) are not within the buffer's {len(buf)} bytes")
        rows = _decode(buf, pos, end, count)
        kept = []
        for offset_delta, timestamp_delta, key, value, headers in rows:
            offset = _signed64(base_offset + offset_delta)
            if min_offset <= offset < max_offset:
                timestamp = log_append_time if log_append_time is not None else _signed64(
                    base_timestamp + timestamp_delta)
                kept.append((offset, timestamp, key, value, headers))
        grow = sum(len(k or b"") + len(v or b"") + sum(len(hk) + len(hv or b"") for hk, hv in h)
                   for _, _, k, v, h in kept) if self._include_headers else sum(
                       len(k or b"") + len(v or b"") for _, _, k, v, _ in kept)
        if self.data_bytes + grow > self._max_data_bytes:
            raise OverflowError(f"decoded records would pass {self._max_data_bytes} bytes of column data: take() "
                                f"them first")
        for offset, timestamp, key, value, headers in kept:
            self._offsets += _INT64.pack(offset)
            self._timestamps += _INT64.pack(timestamp)
            self._keys.add(key)
            self._values.add(value)
            if self._include_headers:
                self._header_valid.append(bool(headers))
                for header_key, header_value in headers:
                    self._header_keys.add(header_key)
                    self._header_values.add(header_value)
                self._header_entries += len(headers)
                self._header_offsets += _INT32.pack(self._header_entries)
        self._rows += len(kept)
        return len(kept)

    def take(self) -> ColumnBuffers:
        """Everything decoded since the last take; the columns are empty again afterwards."""
        headers = self._include_headers
        taken = ColumnBuffers(
            rows=self._rows,
            offsets=self._offsets,
            timestamps=self._timestamps,
            key_validity=_bitmap(self._keys.valid),
            key_offsets=self._keys.offsets,
            key_data=self._keys.data,
            value_validity=_bitmap(self._values.valid),
            value_offsets=self._values.offsets,
            value_data=self._values.data,
            header_validity=_bitmap(self._header_valid) if headers else bytearray(),
            header_offsets=self._header_offsets,
            header_key_offsets=self._header_keys.offsets if headers else bytearray(),
            header_key_data=self._header_keys.data,
            header_value_validity=_bitmap(self._header_values.valid) if headers else bytearray(),
            header_value_offsets=self._header_values.offsets if headers else bytearray(),
            header_value_data=self._header_values.data,
        )
        self._reset()
        return taken


Record = tuple[int, int, "bytes | None", "bytes | None", list[tuple[bytes, "bytes | None"]]]


def _decode(buf: bytes | bytearray | memoryview, pos: int, end: int, count: int) -> list[Record]:
    """The records of buf[pos:end] as (offset delta, timestamp delta, key, value, headers), as Kafka's
    DefaultRecord reads them; CorruptRecordError for anything else."""
    if count < 0:
        raise CorruptRecordError(f"Record batch has an invalid record count of {count}")
    records: list[Record] = []
    for index in range(count):
        if pos >= end:
            raise CorruptRecordError(f"Record batch ends after {index} of its {count} records")
        size, pos = _varint(buf, pos, end, 5, _INT_MASK)
        if size <= 0 or size > end - pos:
            raise CorruptRecordError(
                f"Record {index} of the batch has a size of {size} bytes, but {end - pos} bytes are left")
        record_end = pos + size
        pos += 1  # attributes: unused in record format v2
        timestamp_delta, pos = _varint(buf, pos, record_end, 10, _LONG_MASK)
        offset_delta, pos = _varint(buf, pos, record_end, 5, _INT_MASK)
        key, pos = _bytes(buf, pos, record_end, "key")
        value, pos = _bytes(buf, pos, record_end, "value")
        header_count, pos = _varint(buf, pos, record_end, 5, _INT_MASK)
        if header_count < 0 or header_count > record_end - pos:
            raise CorruptRecordError(f"Record has an invalid number of headers: {header_count}")
        headers = []
        for _ in range(header_count):
            header_key, pos = _bytes(buf, pos, record_end, "header key")
            if header_key is None:
                raise CorruptRecordError("Record has a header with a null key")
            header_value, pos = _bytes(buf, pos, record_end, "header value")
            headers.append((header_key.decode("utf-8", "replace").encode("utf-8"), header_value))
        if pos != record_end:
            raise CorruptRecordError(
                f"Record {index} of the batch has {record_end - pos} bytes left after its last header")
        records.append((offset_delta, timestamp_delta, key, value, headers))
    if pos != end:
        raise CorruptRecordError(f"Record batch has {end - pos} bytes after its {count} records")
    return records


def _varint(buf: bytes | bytearray | memoryview, pos: int, end: int, max_bytes: int, mask: int) -> tuple[int, int]:
    """The zigzag varint at `pos`, which must end before `end`, cut to Java's int or long as `mask` says."""
    raw = 0
    for i in range(max_bytes):
        if pos + i >= end:
            raise CorruptRecordError(f"Record field at byte {pos} runs past the end of its record")
        b = buf[pos + i]
        raw |= (b & 0x7F) << (7 * i)
        if b < 0x80:
            raw &= mask
            value = (raw >> 1) ^ -(raw & 1)
            return value, pos + i + 1
    raise CorruptRecordError(f"Found invalid record structure: a varint longer than {max_bytes} bytes")


def _bytes(buf: bytes | bytearray | memoryview, pos: int, end: int, what: str) -> tuple[bytes | None, int]:
    """A length-prefixed field; a length of -1 is null."""
    length, pos = _varint(buf, pos, end, 5, _INT_MASK)
    if length == -1:
        return None, pos
    if length < 0 or length > end - pos:
        raise CorruptRecordError(f"Record has a {what} of {length} bytes, but {end - pos} bytes are left")
    return bytes(buf[pos:pos + length]), pos + length


def _compiled() -> type | None:
    """protocol/_record_codec.c's decoder; None where it is not built (an install without a compiler) or not
    wanted."""
    if os.environ.get(PURE_PYTHON_ENV) == "1":
        return None
    try:
        from minikafka.protocol import _record_codec
    except ImportError:
        return None

    class CompiledRecordColumns(_record_codec.RecordColumns):
        __slots__ = ()

        def take(self) -> ColumnBuffers:
            return ColumnBuffers._make(super().take())

    return CompiledRecordColumns


CompiledRecordColumns = _compiled()
RecordColumns: type = CompiledRecordColumns or PythonRecordColumns
