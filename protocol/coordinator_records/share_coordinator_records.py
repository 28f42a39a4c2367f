"""Records of `__share_group_state`, the share coordinator's log (Kafka's ShareCoordinatorRecordSerde).

A record's key is a big-endian int16, the record type (0 ShareSnapshot, 1 ShareUpdate), then that type's key at
version 0: the share-partition (group, topic id, partition). Its value is a big-endian int16 version, 0, then the
type's value (flexible). A snapshot holds a share-partition's whole state; an update holds the batches that
changed since, to be merged onto the snapshot; a null value is a tombstone that deletes the share-partition's
state. The specs are the JSON files beside this module, loaded by kafka-python's `ApiData`, so the bytes are
Kafka's both ways.
"""
from __future__ import annotations

import struct
import types
import uuid
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from kafka.protocol.api_data import ApiData

from minikafka.protocol.coordinator_records.record_decoding import decode_message, split_version
from minikafka.protocol.schema_checks import Checker, build_checker

KEY_VERSION = 0
VALUE_VERSION = 0

_I16 = struct.Struct(">h")


class ShareRecordType(IntEnum):
    """The share coordinator's record types (its CoordinatorRecordType): the int16 that starts a key."""

    SHARE_SNAPSHOT = 0
    SHARE_UPDATE = 1


class ShareCoordinatorRecordError(ValueError):
    """Bytes that are not a `__share_group_state` record this broker reads: an unknown record type or value
    version, or a body cut short, malformed, or followed by extra bytes."""


@dataclass(frozen=True)
class ShareRecordKey:
    """The share-partition a record is about, and whether the record is a snapshot or an update."""

    record_type: ShareRecordType
    group_id: str
    topic_id: uuid.UUID
    partition: int


@dataclass(frozen=True)
class StateBatch:
    """A range of in-flight offsets with one delivery state (0 available, 2 acknowledged, 4 archived) and count."""

    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


@dataclass(frozen=True, kw_only=True)
class ShareSnapshotValue:
    """A share-partition's whole persisted state."""

    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    create_timestamp: int
    write_timestamp: int
    state_batches: tuple[StateBatch, ...]


@dataclass(frozen=True, kw_only=True)
class ShareUpdateValue:
    """Batches (and maybe a new start offset, -1 if unchanged) written on top of snapshot `snapshot_epoch`."""

    snapshot_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: tuple[StateBatch, ...]


def _message_class(name: str) -> Any:
    """kafka-python's message class for the spec `<name>.json` beside this module (found by the class's name)."""
    return types.new_class(name, (ApiData,), {"load_json": __package__})


_KEY_MESSAGES = {
    ShareRecordType.SHARE_SNAPSHOT: _message_class("ShareSnapshotKey"),
    ShareRecordType.SHARE_UPDATE: _message_class("ShareUpdateKey"),
}
_SNAPSHOT_VALUE = _message_class("ShareSnapshotValue")
_UPDATE_VALUE = _message_class("ShareUpdateValue")


def _checker(message_class: Any, version: int, name: str) -> Checker | None:
    return build_checker(message_class._struct, version, message_class.flexible_version_q(version), name)


# kafka-python decodes a null where the spec allows none (a null group id); Kafka's readers refuse it.
_KEY_CHECKS = {t: _checker(m, KEY_VERSION, m.__name__) for t, m in _KEY_MESSAGES.items()}
_SNAPSHOT_CHECK = _checker(_SNAPSHOT_VALUE, VALUE_VERSION, "ShareSnapshotValue")
_UPDATE_CHECK = _checker(_UPDATE_VALUE, VALUE_VERSION, "ShareUpdateValue")


def encode_key(key: ShareRecordKey) -> bytes:
    """The key bytes: the record type, then the share-partition."""
    message = _KEY_MESSAGES[key.record_type](group_id=key.group_id, topic_id=key.topic_id, partition=key.partition)
    body: bytes = message.encode(version=KEY_VERSION, header=False)
    return _I16.pack(key.record_type) + body


def decode_key(data: bytes | bytearray | memoryview) -> ShareRecordKey:
    """The record type and share-partition in a record's key bytes."""
    record_type, body = split_version(bytes(data), "share coordinator record key", ShareCoordinatorRecordError)
    try:
        kind = ShareRecordType(record_type)
    except ValueError:
        raise ShareCoordinatorRecordError(f"unknown share coordinator record type {record_type}") from None
    message_class = _KEY_MESSAGES[kind]
    message = decode_message(message_class, body, KEY_VERSION, _KEY_CHECKS[kind], message_class.__name__,
                             ShareCoordinatorRecordError)
    return ShareRecordKey(kind, message.group_id, message.topic_id, message.partition)


def _batches(batches: tuple[StateBatch, ...], message_class: Any) -> list[Any]:
    return [message_class.StateBatch(first_offset=b.first_offset, last_offset=b.last_offset,
                                     delivery_state=b.delivery_state, delivery_count=b.delivery_count)
            for b in batches]


def _read_batches(message: Any) -> tuple[StateBatch, ...]:
    return tuple(StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                 for b in message.state_batches)


def encode_value(value: ShareSnapshotValue | ShareUpdateValue) -> bytes:
    """The value bytes of a snapshot or an update, at version 0."""
    if isinstance(value, ShareSnapshotValue):
        message = _SNAPSHOT_VALUE(
            snapshot_epoch=value.snapshot_epoch, state_epoch=value.state_epoch, leader_epoch=value.leader_epoch,
            start_offset=value.start_offset, create_timestamp=value.create_timestamp,
            write_timestamp=value.write_timestamp, state_batches=_batches(value.state_batches, _SNAPSHOT_VALUE))
    else:
        message = _UPDATE_VALUE(
            snapshot_epoch=value.snapshot_epoch, leader_epoch=value.leader_epoch, start_offset=value.start_offset,
            state_batches=_batches(value.state_batches, _UPDATE_VALUE))
    body: bytes = message.encode(version=VALUE_VERSION, header=False)
    return _I16.pack(VALUE_VERSION) + body


def decode_value(record_type: ShareRecordType, data: bytes | bytearray | memoryview | None
                 ) -> ShareSnapshotValue | ShareUpdateValue | None:
    """The snapshot or update in a record's value bytes (per the key's type); None for a tombstone."""
    if data is None:
        return None
    version, body = split_version(bytes(data), "share coordinator record value", ShareCoordinatorRecordError)
    if version != VALUE_VERSION:
        raise ShareCoordinatorRecordError(f"unknown share coordinator value version {version}")
    if record_type is ShareRecordType.SHARE_SNAPSHOT:
        m = decode_message(_SNAPSHOT_VALUE, body, version, _SNAPSHOT_CHECK, "ShareSnapshotValue",
                           ShareCoordinatorRecordError)
        return ShareSnapshotValue(
            snapshot_epoch=m.snapshot_epoch, state_epoch=m.state_epoch, leader_epoch=m.leader_epoch,
            start_offset=m.start_offset, create_timestamp=m.create_timestamp, write_timestamp=m.write_timestamp,
            state_batches=_read_batches(m))
    u = decode_message(_UPDATE_VALUE, body, version, _UPDATE_CHECK, "ShareUpdateValue", ShareCoordinatorRecordError)
    return ShareUpdateValue(snapshot_epoch=u.snapshot_epoch, leader_epoch=u.leader_epoch,
                            start_offset=u.start_offset, state_batches=_read_batches(u))
