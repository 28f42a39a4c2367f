"""A metadata record as the value of a record in `__cluster_metadata` (Kafka's MetadataRecordSerde).

The value is a frame header of three unsigned varints, then the message body: the frame version (1), the record
type, the record version, then the record in the flexible encoding of that version (compact strings and arrays,
tagged fields at the end of every structure). Kafka's tools read values written here, and this controller reads
Kafka's.
"""
import io
import struct

from minikafka.protocol.varint import VarintError, encode_uvarint, read_uvarint

from .records import RECORD_CLASSES, MetadataRecord, record_type

FRAME_VERSION = 1


class MetadataRecordError(ValueError):
    """Bytes that are not a metadata record this controller reads: another frame version, an unknown record type
    or version, or a body that is cut short, malformed, or followed by extra bytes."""


def encode_record(record: MetadataRecord) -> bytes:
    """The record's value bytes, at the record's version (its class's highest when it has none)."""
    cls = type(record)
    version = cls.max_version if record.version is None else record.version
    body: bytes = record.encode(version=version, header=False)
    return b"".join((encode_uvarint(FRAME_VERSION), encode_uvarint(record_type(cls)), encode_uvarint(version), body))


def decode_record(value: bytes | bytearray | memoryview) -> MetadataRecord:
    """The typed record in a record's value bytes."""
    data = bytes(value)
    try:
        frame_version, pos = read_uvarint(data)
        if frame_version != FRAME_VERSION:
            raise MetadataRecordError(f"unknown metadata record frame version {frame_version}")
        type_id, pos = read_uvarint(data, pos)
        version, pos = read_uvarint(data, pos)
    except VarintError as exc:
        raise MetadataRecordError(f"metadata record frame is malformed: {exc}") from None
    cls = RECORD_CLASSES.get(type_id)
    if cls is None:
        raise MetadataRecordError(f"unknown metadata record type {type_id}")
    low, high = cls.valid_versions
    if not low <= version <= high:
        raise MetadataRecordError(f"{cls.__name__} version {version} is outside the known versions {low}-{high}")
    body = io.BytesIO(data)
    body.seek(pos)
    try:
        record: MetadataRecord = cls.decode(body, version=version, header=False)
    except (struct.error, ValueError, TypeError, IndexError) as exc:
        raise MetadataRecordError(f"{cls.__name__} v{version} is malformed: {exc}") from None
    extra = len(data) - body.tell()
    if extra:
        raise MetadataRecordError(f"{extra} unexpected bytes after {cls.__name__} v{version}")
    return record
