"""Record batches written byte by byte, so a test can make the ones no producer library makes: a wrong count,
offset delta or length, an unknown codec, bytes that do not decompress, all under a correct CRC."""
from __future__ import annotations

import gzip
import struct
import time

import lz4.frame
import zstandard
from crc32c import crc32c
from kafka.codec import snappy_encode

_HEADER = struct.Struct(">qiibIhiqqqhii")
COMPRESSORS = {1: gzip.compress, 2: snappy_encode, 3: lz4.frame.compress, 4: zstandard.ZstdCompressor().compress}


def varint(value: int) -> bytes:
    """Kafka's zigzag varint (also its varlong: Python ints do not overflow)."""
    raw = (value << 1) ^ (value >> 63)
    out = bytearray()
    while raw > 0x7F:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)


def record_body(offset_delta: int, value: bytes | None, *, key: bytes | None = None,
                headers: tuple[tuple[bytes, bytes | None], ...] = (), timestamp_delta: int = 0) -> bytes:
    """A record without its length prefix: attributes, timestamp and offset deltas, key, value, headers."""
    out = bytearray(b"\x00")
    out += varint(timestamp_delta) + varint(offset_delta)
    for field in (key, value):
        out += varint(-1) if field is None else varint(len(field)) + field
    out += varint(len(headers))
    for header_key, header_value in headers:
        out += varint(len(header_key)) + header_key
        out += varint(-1) if header_value is None else varint(len(header_value)) + header_value
    return bytes(out)


def record(offset_delta: int, value: bytes | None, **fields) -> bytes:
    """A record as it sits in a batch: its length, then its body."""
    body = record_body(offset_delta, value, **fields)
    return varint(len(body)) + body


def batch(records: list[bytes], *, count: int | None = None, last_offset_delta: int | None = None, codec: int = 0,
          payload: bytes | None = None, base_timestamp: int | None = None, max_timestamp: int | None = None,
          log_append_time: bool = False, producer_id: int = -1, producer_epoch: int = -1,
          base_sequence: int = -1, transactional: bool = False, base_offset: int = 0) -> bytes:
    """A v2 batch of `records` (encoded by `record`) with a correct CRC.

    Header fields follow the records unless given: count, lastOffsetDelta = count - 1, both timestamps now.
    The records are compressed with `codec` (1-4); `payload` replaces the record bytes outright (for codec ids
    Kafka does not know, or data that does not decompress)."""
    count = len(records) if count is None else count
    last_offset_delta = count - 1 if last_offset_delta is None else last_offset_delta
    now = int(time.time() * 1000)
    base_timestamp = now if base_timestamp is None else base_timestamp
    max_timestamp = base_timestamp if max_timestamp is None else max_timestamp
    data = b"".join(records)
    if payload is not None:
        data = payload
    elif codec:
        data = COMPRESSORS[codec](data)
    attributes = codec | (0x08 if log_append_time else 0) | (0x10 if transactional else 0)
    header = bytearray(_HEADER.pack(base_offset, 49 + len(data), -1, 2, 0, attributes, last_offset_delta,
                                    base_timestamp, max_timestamp, producer_id, producer_epoch, base_sequence, count))
    out = header + data
    struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])))
    return bytes(out)


def values_batch(values: list[bytes], **header) -> bytes:
    """A well-formed batch of null-key records holding `values`."""
    return batch([record(i, v) for i, v in enumerate(values)], **header)
