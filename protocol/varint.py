"""Kafka's unsigned varint (ByteUtils' unsigned varint), sans-IO.

Flexible message versions (KIP-482) size their strings, bytes, arrays and tagged fields with it, in requests, in
responses and in the coordinator records of `__consumer_offsets`. As in Kafka it carries an unsigned 32-bit value,
so a varint longer than five bytes is malformed.
"""

MAX_UVARINT_BYTES = 5
MAX_UVARINT = 0xFFFFFFFF


class VarintError(ValueError):
    """Bytes that are not an unsigned varint: cut short, or longer than five bytes."""


def read_uvarint(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int]:
    """The varint at `pos`, and the position after it."""
    value = 0
    for i in range(MAX_UVARINT_BYTES):
        if pos + i >= len(buf):
            raise VarintError(f"varint at byte {pos} runs past the end of {len(buf)} bytes")
        byte = buf[pos + i]
        value |= (byte & 0x7F) << (7 * i)
        if not byte & 0x80:
            return value, pos + i + 1
    raise VarintError(f"varint at byte {pos} is longer than {MAX_UVARINT_BYTES} bytes")


def encode_uvarint(value: int) -> bytes:
    if not 0 <= value <= MAX_UVARINT:
        raise ValueError(f"{value} is outside the unsigned 32-bit range of a varint")
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
