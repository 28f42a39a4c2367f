"""Decompression of record batch payloads with Kafka's codecs (attribute ids 1-4), bounded in output; and gzip
compression as Kafka writes it, for the batches the log cleaner rewrites.

The broker decompresses only to check what a producer sent; the stored batch stays compressed. A few bytes of
gzip, lz4 or zstd can expand to gigabytes, so every codec stops once the output passes `limit`.

Formats, as Kafka's own streams read them: gzip members (RFC 1952, one after another), snappy in the xerial block
framing Kafka's Java producer writes or as one raw snappy block (librdkafka's choice), one or more LZ4 frames,
one or more zstd frames. Each must be complete and nothing may follow it. gzip is in the standard library; the
others need `python-snappy`, `lz4` and `zstandard`, which a broker may run without (see `codec_available`).
"""

from __future__ import annotations

import importlib
import struct
import zlib
from types import ModuleType

from .varint import VarintError, read_uvarint

NONE = 0
GZIP = 1
SNAPPY = 2
LZ4 = 3
ZSTD = 4
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
CODEC_PACKAGES = {SNAPPY: "python-snappy", LZ4: "lz4", ZSTD: "zstandard"}  # what pip installs for each

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER_SIZE = 16  # magic, then int32 version and int32 minimum compatible version
_XERIAL_BLOCK_LENGTH = struct.Struct(">i")
# A zstd block of 4 bytes (3 of header, 1 of RLE data) can stand for 128 KiB, the largest block: feeding zstd this
# many input bytes at a time keeps one step's output near the limit, never orders of magnitude past it.
_ZSTD_MAX_RATIO = 32768
_ZSTD_MIN_STEP = 1024


# Java's GZIPOutputStream header, which Kafka's gzip batches carry: deflate, no flags, MTIME 0, no extra flags, OS
# unknown (255).
_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
# Kafka's compression.gzip.level default (-1): zlib's default level.
GZIP_DEFAULT_LEVEL = 6


def gzip_compress(data: bytes, level: int = GZIP_DEFAULT_LEVEL) -> bytes:
    """gzip as Kafka writes a batch (GzipCompression over Java's GZIPOutputStream): no time in the header, so the
    same records compress to the same bytes on every replica and in every cleaning."""
    compressor = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS)
    body = compressor.compress(data) + compressor.flush()
    return _GZIP_HEADER + body + struct.pack("<II", zlib.crc32(data), len(data) & 0xFFFFFFFF)


class DecompressionError(ValueError):
    """Bytes the codec cannot decompress: corrupt, truncated, or followed by bytes that are not compressed data."""


class DecompressedSizeError(DecompressionError):
    """Data that decompresses to more than the caller allows."""


def _optional(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


_snappy = _optional("snappy")
_lz4_frame = _optional("lz4.frame")
_zstandard = _optional("zstandard")


def codec_available(codec: int) -> bool:
    """Whether this process can decompress `codec` (gzip always; the others with their library installed)."""
    if codec == GZIP:
        return True
    module = {SNAPPY: _snappy, LZ4: _lz4_frame, ZSTD: _zstandard}.get(codec)
    return module is not None


def decompress(codec: int, payload: bytes | bytearray | memoryview, limit: int) -> bytes:
    """The bytes `payload` stands for; raises DecompressionError, or DecompressedSizeError past `limit` bytes."""
    try:
        if codec == GZIP:
            return _gunzip(payload, limit)
        if codec == SNAPPY and _snappy is not None:
            return _unsnappy(_snappy, bytes(payload), limit)
        if codec == LZ4 and _lz4_frame is not None:
            return _unlz4(_lz4_frame, payload, limit)
        if codec == ZSTD and _zstandard is not None:
            return _unzstd(_zstandard, payload, limit)
    except DecompressionError:
        raise
    except Exception as e:  # re-raised: each codec library has its own error types, and all mean bad input
        raise DecompressionError(f"{CODEC_NAMES[codec]} data is corrupt: {e}") from e
    raise ValueError(f"cannot decompress codec {codec}: {CODEC_NAMES.get(codec, 'unknown')} is not available")


def _too_large(codec: int, limit: int) -> DecompressedSizeError:
    return DecompressedSizeError(f"{CODEC_NAMES[codec]} data decompresses to more than {limit} bytes")


def _gunzip(payload: bytes | bytearray | memoryview, limit: int) -> bytes:
    out: list[bytes] = []
    total = 0
    data: bytes | bytearray | memoryview = payload
    while True:
        member = zlib.decompressobj(16 + zlib.MAX_WBITS)
        chunk = member.decompress(data, limit - total + 1)
        total += len(chunk)
        if total > limit:
            raise _too_large(GZIP, limit)
        if not member.eof:
            raise DecompressionError("gzip data is truncated")
        out.append(chunk)
        data = member.unused_data
        if not data:
            return b"".join(out)


def _unsnappy(snappy: ModuleType, payload: bytes, limit: int) -> bytes:
    if not payload.startswith(_XERIAL_MAGIC):
        return _snappy_block(snappy, payload, limit)
    if len(payload) < _XERIAL_HEADER_SIZE:
        raise DecompressionError("snappy data is truncated in its header")
    out: list[bytes] = []
    total = 0
    pos = _XERIAL_HEADER_SIZE
    while pos < len(payload):
        if len(payload) - pos < _XERIAL_BLOCK_LENGTH.size:
            raise DecompressionError("snappy data is truncated in a block length")
        (length,) = _XERIAL_BLOCK_LENGTH.unpack_from(payload, pos)
        pos += _XERIAL_BLOCK_LENGTH.size
        if length < 0 or length > len(payload) - pos:
            raise DecompressionError(f"snappy block of {length} bytes at byte {pos} runs past the data")
        block = _snappy_block(snappy, payload[pos : pos + length], limit - total)
        total += len(block)
        out.append(block)
        pos += length
    return b"".join(out)


def _snappy_block(snappy: ModuleType, block: bytes, limit: int) -> bytes:
    """One raw snappy block; its preamble states its uncompressed length, so the limit is checked first."""
    try:
        length, _ = read_uvarint(block)
    except VarintError as e:
        raise DecompressionError(f"snappy block has no valid length: {e}") from e
    if length > limit:
        raise _too_large(SNAPPY, limit)
    data = snappy.decompress(block)
    if len(data) != length:
        raise DecompressionError(f"snappy block states {length} bytes but holds {len(data)}")
    return bytes(data)


def _unlz4(lz4_frame: ModuleType, payload: bytes | bytearray | memoryview, limit: int) -> bytes:
    out: list[bytes] = []
    total = 0
    data: bytes | bytearray | memoryview = payload
    while True:
        frame = lz4_frame.LZ4FrameDecompressor()
        chunk = frame.decompress(data, max_length=limit - total + 1)
        total += len(chunk)
        if total > limit:
            raise _too_large(LZ4, limit)
        if not frame.eof:
            raise DecompressionError("lz4 data is truncated")
        out.append(chunk)
        data = frame.unused_data
        if not data:
            return b"".join(out)


def _unzstd(zstandard: ModuleType, payload: bytes | bytearray | memoryview, limit: int) -> bytes:
    out: list[bytes] = []
    total = 0
    view = memoryview(payload)
    pos = 0
    frame = zstandard.ZstdDecompressor().decompressobj()
    while pos < len(view):
        end = min(len(view), pos + max(_ZSTD_MIN_STEP, (limit - total) // _ZSTD_MAX_RATIO))
        chunk = frame.decompress(view[pos:end])
        total += len(chunk)
        if total > limit:
            raise _too_large(ZSTD, limit)
        out.append(chunk)
        # A frame that ended inside this step leaves the rest unread: what follows must be another frame.
        pos = end - len(frame.unused_data) if frame.eof else end
        if frame.eof and pos < len(view):
            frame = zstandard.ZstdDecompressor().decompressobj()
    if not frame.eof:
        raise DecompressionError("zstd data is truncated")
    return b"".join(out)
