"""The consumer embedded protocol (Kafka's ConsumerProtocol): the Subscription a classic consumer puts in its
JoinGroup metadata and the Assignment its leader (or, for a classic member of a consumer group, the coordinator)
hands out in SyncGroup.

The coordinator reads them when a classic group becomes a consumer group and when classic members join one, and
writes assignments in the version of the member's subscription, so a client reads exactly what a Kafka broker
would send. Every version shares its first fields (version int16, then topics or partitions); a later version adds
fields at the end: Subscription v1 owned partitions, v2 the generation, v3 the rack.
"""
from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

# The latest version this broker writes; a newer one is answered in it, as Kafka's serializer caps it.
CONSUMER_PROTOCOL_LATEST_VERSION = 3


class ConsumerProtocolError(ValueError):
    """Bytes that are not a consumer protocol message (Kafka's SchemaException)."""


@dataclass(frozen=True)
class Subscription:
    """A classic consumer's subscription: its topics, user data, and (v1+) the partitions it owns."""

    version: int
    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: dict[str, tuple[int, ...]] = field(default_factory=dict)
    generation_id: int = -1
    rack_id: str | None = None


@dataclass(frozen=True)
class ConsumerAssignment:
    """The partitions a consumer is assigned, by topic name, and the assignor's user data."""

    version: int
    partitions: dict[str, tuple[int, ...]]
    user_data: bytes | None = None


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = bytes(data)
        self.pos = 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ConsumerProtocolError("consumer protocol message truncated")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def int16(self) -> int:
        return int(struct.unpack(">h", self.take(2))[0])

    def int32(self) -> int:
        return int(struct.unpack(">i", self.take(4))[0])

    def string(self) -> str:
        value = self.nullable_string()
        if value is None:
            raise ConsumerProtocolError("null string in consumer protocol message")
        return value

    def nullable_string(self) -> str | None:
        length = self.int16()
        if length == -1:
            return None
        try:
            return self.take(length).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ConsumerProtocolError(f"string is not UTF-8: {exc}") from None

    def nullable_bytes(self) -> bytes | None:
        length = self.int32()
        return None if length == -1 else self.take(length)

    def count(self) -> int:
        n = self.int32()
        if n < -1 or n > len(self.data):
            raise ConsumerProtocolError(f"bad array length {n}")
        return max(n, 0)

    def topic_partitions(self) -> dict[str, tuple[int, ...]]:
        result: dict[str, tuple[int, ...]] = {}
        for _ in range(self.count()):
            topic = self.string()
            result[topic] = result.get(topic, ()) + tuple(self.int32() for _ in range(self.count()))
        return result

    @property
    def at_end(self) -> bool:
        return self.pos >= len(self.data)


def deserialize_version(data: bytes) -> int:
    """The version a consumer protocol message starts with."""
    version = _Reader(data).int16()
    if version < 0:
        raise ConsumerProtocolError(f"invalid consumer protocol version {version}")
    return version


def parse_subscription(data: bytes) -> Subscription:
    """A Subscription from JoinGroup metadata; fields past the message's version keep their defaults (a newer
    version's extra fields are skipped, as Kafka reads a message as the latest version it knows)."""
    reader = _Reader(data)
    version = reader.int16()
    if version < 0:
        raise ConsumerProtocolError(f"invalid consumer protocol version {version}")
    topics = tuple(reader.string() for _ in range(reader.count()))
    user_data = reader.nullable_bytes()
    owned: dict[str, tuple[int, ...]] = {}
    generation_id, rack_id = -1, None
    if version >= 1 and not reader.at_end:
        owned = reader.topic_partitions()
    if version >= 2 and not reader.at_end:
        generation_id = reader.int32()
    if version >= 3 and not reader.at_end:
        rack_id = reader.nullable_string()
    return Subscription(version, topics, user_data, owned, generation_id, rack_id)


def parse_assignment(data: bytes) -> ConsumerAssignment:
    """An Assignment from SyncGroup bytes (the same fields in every version)."""
    reader = _Reader(data)
    version = reader.int16()
    if version < 0:
        raise ConsumerProtocolError(f"invalid consumer protocol version {version}")
    partitions = reader.topic_partitions()
    user_data = reader.nullable_bytes() if not reader.at_end else None
    return ConsumerAssignment(version, partitions, user_data)


def serialize_assignment(partitions: Mapping[str, Iterable[int]], version: int) -> bytes:
    """An Assignment of these partitions without user data, in `version` (capped at the latest)."""
    version = min(version, CONSUMER_PROTOCOL_LATEST_VERSION)
    if version < 0:
        raise ConsumerProtocolError(f"invalid consumer protocol version {version}")
    out = [struct.pack(">hi", version, len(partitions))]
    for topic, ps in sorted(partitions.items()):
        name = topic.encode("utf-8")
        ordered = sorted(ps)
        out.append(struct.pack(">h", len(name)) + name + struct.pack(">i", len(ordered)))
        out.append(b"".join(struct.pack(">i", p) for p in ordered))
    out.append(struct.pack(">i", -1))
    return b"".join(out)
