"""partition.metadata (the topic id a partition directory belongs to) and Kafka's Uuid text form."""

from __future__ import annotations

import base64
import binascii
import uuid
from pathlib import Path

from .checkpoint import atomic_write, parse_java_int, split_fields, text_lines
from .errors import KafkaStorageError

PARTITION_METADATA = "partition.metadata"
PARTITION_METADATA_VERSION = 0
_RESERVED = (bytes(16), bytes(15) + b"\x01")  # Kafka's Uuid.ZERO_UUID and Uuid.ONE_UUID


def uuid_to_str(value: bytes) -> str:
    """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, without padding (22 chars)."""
    return base64.urlsafe_b64encode(value).rstrip(b"=").decode("ascii")


def uuid_from_str(text: str) -> bytes:
    """Inverse of uuid_to_str; ValueError if `text` is not a 16-byte id."""
    try:
        value = base64.urlsafe_b64decode(text + "==")
    except (binascii.Error, ValueError) as e:
        raise ValueError(f"Invalid uuid {text!r}: {e}") from None
    if len(value) != 16 or len(text) != 22:
        raise ValueError(f"Invalid uuid {text!r}: not 16 bytes")
    return value


def random_uuid() -> bytes:
    """A random id as Kafka makes them: never reserved, never printed with a leading '-'."""
    while True:
        value = uuid.uuid4().bytes
        if value not in _RESERVED and not uuid_to_str(value).startswith("-"):
            return value


def read_partition_metadata(directory: Path) -> bytes | None:
    """The topic id recorded in `directory`, or None when there is no partition.metadata. KafkaStorageError, naming
    the file and what is wrong with it, when it cannot be read or Kafka's PartitionMetadataReadBuffer would refuse
    it (a later version is accepted, as Kafka accepts it for downgrades)."""
    path = directory / PARTITION_METADATA
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise KafkaStorageError(f"Error while reading partition metadata file {path}: {e}") from e
    try:
        return _parse(data)
    except ValueError as e:
        raise KafkaStorageError(f"Error while reading partition metadata file {path}: {e}") from None


def _parse(data: bytes) -> bytes:
    lines = text_lines(data)
    version = _field(lines, 0, "version")
    if parse_java_int(version, 32) < PARTITION_METADATA_VERSION:
        raise ValueError(f"unrecognized version {version}")
    topic_id = uuid_from_str(_field(lines, 1, "topic_id"))
    if topic_id == _RESERVED[0]:
        raise ValueError("invalid topic id (the zero uuid)")
    return topic_id


def _field(lines: list[str], index: int, name: str) -> str:
    """The value of line `index`, written `<name>: <value>`: Kafka takes the second of exactly two fields."""
    line = lines[index] if index < len(lines) else ""
    fields = split_fields(line)
    if len(fields) != 2:
        raise ValueError(f"malformed line {index + 1} {line[:80]!r}, expected '{name}: <value>'")
    return fields[1]


def write_partition_metadata(directory: Path, topic_id: bytes) -> None:
    text = f"version: {PARTITION_METADATA_VERSION}\ntopic_id: {uuid_to_str(topic_id)}"
    atomic_write(directory / PARTITION_METADATA, text.encode("utf-8"))
