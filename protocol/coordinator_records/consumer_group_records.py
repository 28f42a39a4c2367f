"""Records of consumer groups of the KIP-848 protocol in `__consumer_offsets` (Kafka's GroupCoordinatorRecordSerde).

A record's key is a big-endian int16, the coordinator record type, then that type's key message at version 0 (not
flexible). Its value is a big-endian int16 version, then the type's value message at that version (flexible); a
null value is a tombstone that deletes what the key names. Every consumer group record type has value version 0
only. The specs are the JSON files beside this module, loaded by kafka-python's `ApiData`, so the bytes are Kafka's
both ways.

Share groups' records (KIP-932, types 10-15, value version 0 only too) read through `decode_share_record`, so that
`decode_key` and `decode_value` keep to consumer groups'. The same topic holds the classic groups' offset commits
and group metadata (types 0-2, read elsewhere) and, in a Kafka 4.1 cluster, streams group records, which this broker
does not serve: its loader skips them (and share records until it replays them), as Kafka's skips record types it
does not know (9, 18, 24 and up in 4.1; left over from an aborted upgrade). Anything else that does not read (a
known type's key or value cut short, or a value version past the spec's) fails a load.
"""
from __future__ import annotations

import dataclasses
import struct
import types
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, NamedTuple

from kafka.protocol.api_data import ApiData

from minikafka.protocol.schema_checks import Checker, build_checker

KEY_VERSION = 0
VALUE_VERSION = 0

_I16 = struct.Struct(">h")
_ZERO_UUID = uuid.UUID(int=0)


class CoordinatorRecordType(IntEnum):
    """The group coordinator's record types in Kafka 4.1 (CoordinatorRecordType): the int16 that starts a key."""

    LEGACY_OFFSET_COMMIT = 0
    OFFSET_COMMIT = 1
    GROUP_METADATA = 2
    CONSUMER_GROUP_METADATA = 3
    CONSUMER_GROUP_PARTITION_METADATA = 4
    CONSUMER_GROUP_MEMBER_METADATA = 5
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA = 6
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER = 7
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT = 8
    SHARE_GROUP_MEMBER_METADATA = 10
    SHARE_GROUP_METADATA = 11
    SHARE_GROUP_TARGET_ASSIGNMENT_METADATA = 12
    SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER = 13
    SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT = 14
    SHARE_GROUP_STATE_PARTITION_METADATA = 15
    CONSUMER_GROUP_REGULAR_EXPRESSION = 16
    STREAMS_GROUP_METADATA = 17
    STREAMS_GROUP_MEMBER_METADATA = 19
    STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA = 20
    STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER = 21
    STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT = 22
    STREAMS_GROUP_TOPOLOGY = 23


CLASSIC_GROUP_RECORD_TYPES = frozenset({
    CoordinatorRecordType.LEGACY_OFFSET_COMMIT, CoordinatorRecordType.OFFSET_COMMIT,
    CoordinatorRecordType.GROUP_METADATA,
})
CONSUMER_GROUP_RECORD_TYPES = frozenset({
    CoordinatorRecordType.CONSUMER_GROUP_METADATA, CoordinatorRecordType.CONSUMER_GROUP_PARTITION_METADATA,
    CoordinatorRecordType.CONSUMER_GROUP_MEMBER_METADATA,
    CoordinatorRecordType.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA,
    CoordinatorRecordType.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
    CoordinatorRecordType.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
    CoordinatorRecordType.CONSUMER_GROUP_REGULAR_EXPRESSION,
})
SHARE_GROUP_RECORD_TYPES = frozenset(t for t in CoordinatorRecordType if t.name.startswith("SHARE_GROUP_"))
STREAMS_GROUP_RECORD_TYPES = frozenset(t for t in CoordinatorRecordType if t.name.startswith("STREAMS_GROUP_"))


class ConsumerGroupRecordError(ValueError):
    """Bytes that are not a consumer group record this broker reads: a key or value cut short, malformed or followed
    by extra bytes, or a value version past the spec's."""


class UnknownRecordTypeError(ConsumerGroupRecordError):
    """A key whose record type is not a consumer group's (Kafka's UnknownRecordTypeException, when Kafka does not
    know it either): the loader decides whether to skip it."""

    def __init__(self, record_type: int) -> None:
        super().__init__(f"coordinator record type {record_type} is not a consumer group record")
        self.record_type = record_type


# ---- the records' parts ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class TopicPartitions:
    """Partitions of one topic, by topic id (the specs' TopicPartition and TopicPartitions)."""

    topic_id: uuid.UUID
    partitions: tuple[int, ...]


@dataclass(frozen=True)
class PartitionMetadata:
    """The racks of one partition's replicas (unused since Kafka 4.0)."""

    partition: int
    racks: tuple[str, ...]


@dataclass(frozen=True)
class TopicMetadata:
    """A subscribed topic as the coordinator last saw it."""

    topic_id: uuid.UUID
    topic_name: str
    num_partitions: int
    partition_metadata: tuple[PartitionMetadata, ...] = ()


@dataclass(frozen=True)
class ClassicProtocol:
    """A protocol a classic member supports: its name and metadata (a ConsumerProtocolSubscription)."""

    name: str
    metadata: bytes


@dataclass(frozen=True)
class ClassicMemberMetadata:
    """What a member that joined with the classic protocol brought: its session timeout and protocols."""

    session_timeout_ms: int
    supported_protocols: tuple[ClassicProtocol, ...]


# ---- keys --------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ConsumerGroupMetadataKey:
    group_id: str


@dataclass(frozen=True)
class ConsumerGroupPartitionMetadataKey:
    group_id: str


@dataclass(frozen=True)
class ConsumerGroupMemberMetadataKey:
    group_id: str
    member_id: str


@dataclass(frozen=True)
class ConsumerGroupTargetAssignmentMetadataKey:
    group_id: str


@dataclass(frozen=True)
class ConsumerGroupTargetAssignmentMemberKey:
    group_id: str
    member_id: str


@dataclass(frozen=True)
class ConsumerGroupCurrentMemberAssignmentKey:
    group_id: str
    member_id: str


@dataclass(frozen=True)
class ConsumerGroupRegularExpressionKey:
    group_id: str
    regular_expression: str


# ---- values ------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ConsumerGroupMetadataValue:
    """The group epoch, and the hash of the subscribed topics' metadata (KIP-1101; 0 when not written)."""

    epoch: int
    metadata_hash: int = 0


@dataclass(frozen=True)
class ConsumerGroupPartitionMetadataValue:
    """The subscribed topics' metadata, as Kafka before 4.1 kept it; read so an older log still loads."""

    topics: tuple[TopicMetadata, ...]


@dataclass(frozen=True, kw_only=True)
class ConsumerGroupMemberMetadataValue:
    """A member's subscription and client details."""

    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    classic_member_metadata: ClassicMemberMetadata | None = None


@dataclass(frozen=True)
class ConsumerGroupTargetAssignmentMetadataValue:
    """The epoch of the group's target assignment."""

    assignment_epoch: int


@dataclass(frozen=True)
class ConsumerGroupTargetAssignmentMemberValue:
    """A member's partitions in the group's target assignment."""

    topic_partitions: tuple[TopicPartitions, ...]


@dataclass(frozen=True, kw_only=True)
class ConsumerGroupCurrentMemberAssignmentValue:
    """A member's epochs, state (MemberState's id) and partitions on its way to its target assignment."""

    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned_partitions: tuple[TopicPartitions, ...]
    partitions_pending_revocation: tuple[TopicPartitions, ...]


@dataclass(frozen=True)
class ConsumerGroupRegularExpressionValue:
    """The topics a subscription regular expression matched, the metadata version and when it was resolved."""

    topics: tuple[str, ...]
    version: int
    timestamp: int


ConsumerGroupRecordKey = (
    ConsumerGroupMetadataKey | ConsumerGroupPartitionMetadataKey | ConsumerGroupMemberMetadataKey
    | ConsumerGroupTargetAssignmentMetadataKey | ConsumerGroupTargetAssignmentMemberKey
    | ConsumerGroupCurrentMemberAssignmentKey | ConsumerGroupRegularExpressionKey
)
ConsumerGroupRecordValue = (
    ConsumerGroupMetadataValue | ConsumerGroupPartitionMetadataValue | ConsumerGroupMemberMetadataValue
    | ConsumerGroupTargetAssignmentMetadataValue | ConsumerGroupTargetAssignmentMemberValue
    | ConsumerGroupCurrentMemberAssignmentValue | ConsumerGroupRegularExpressionValue
)


class ConsumerGroupRecord(NamedTuple):
    """A decoded record: its key, and its value or None for a tombstone."""

    key: ConsumerGroupRecordKey
    value: ConsumerGroupRecordValue | None


# ---- share groups (KIP-932) ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ShareGroupMetadataKey:
    group_id: str


@dataclass(frozen=True)
class ShareGroupMemberMetadataKey:
    group_id: str
    member_id: str


@dataclass(frozen=True)
class ShareGroupTargetAssignmentMetadataKey:
    group_id: str


@dataclass(frozen=True)
class ShareGroupTargetAssignmentMemberKey:
    group_id: str
    member_id: str


@dataclass(frozen=True)
class ShareGroupCurrentMemberAssignmentKey:
    group_id: str
    member_id: str


@dataclass(frozen=True)
class ShareGroupStatePartitionMetadataKey:
    group_id: str


@dataclass(frozen=True)
class ShareGroupMetadataValue:
    """The share group's epoch, and the hash of its subscribed topics' metadata."""

    epoch: int
    metadata_hash: int = 0


@dataclass(frozen=True, kw_only=True)
class ShareGroupMemberMetadataValue:
    """A share-group member's subscription and client details."""

    rack_id: str | None = None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]


@dataclass(frozen=True)
class ShareGroupTargetAssignmentMetadataValue:
    """The epoch of the share group's target assignment."""

    assignment_epoch: int


@dataclass(frozen=True)
class ShareGroupTargetAssignmentMemberValue:
    """A member's partitions in the share group's target assignment."""

    topic_partitions: tuple[TopicPartitions, ...]


@dataclass(frozen=True, kw_only=True)
class ShareGroupCurrentMemberAssignmentValue:
    """A share-group member's epochs, state and partitions (nothing to revoke: share partitions are not exclusive)."""

    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned_partitions: tuple[TopicPartitions, ...]


@dataclass(frozen=True)
class TopicPartitionsInfo:
    """A topic's partitions, by id and name, in the share-partition state metadata."""

    topic_id: uuid.UUID
    topic_name: str
    partitions: tuple[int, ...]


@dataclass(frozen=True)
class TopicInfo:
    """A topic by id and name, in the share-partition state metadata."""

    topic_id: uuid.UUID
    topic_name: str


@dataclass(frozen=True)
class ShareGroupStatePartitionMetadataValue:
    """Which topics' share-partition state the group coordinator is initializing, has initialized (through the
    share coordinator) or is deleting."""

    initializing_topics: tuple[TopicPartitionsInfo, ...]
    initialized_topics: tuple[TopicPartitionsInfo, ...]
    deleting_topics: tuple[TopicInfo, ...]


ShareGroupRecordKey = (
    ShareGroupMetadataKey | ShareGroupMemberMetadataKey | ShareGroupTargetAssignmentMetadataKey
    | ShareGroupTargetAssignmentMemberKey | ShareGroupCurrentMemberAssignmentKey | ShareGroupStatePartitionMetadataKey
)
ShareGroupRecordValue = (
    ShareGroupMetadataValue | ShareGroupMemberMetadataValue | ShareGroupTargetAssignmentMetadataValue
    | ShareGroupTargetAssignmentMemberValue | ShareGroupCurrentMemberAssignmentValue
    | ShareGroupStatePartitionMetadataValue
)


class ShareGroupRecord(NamedTuple):
    """A decoded share-group record: its key, and its value or None for a tombstone."""

    key: ShareGroupRecordKey
    value: ShareGroupRecordValue | None


# ---- the specs ---------------------------------------------------------------------------------------------------

def _message_class(name: str) -> Any:
    """kafka-python's message class for the spec `<name>.json` beside this module; its metaclass finds the spec by
    the class's name, so the class carries Kafka's name, private to this module."""
    return types.new_class(name, (ApiData,), {"load_json": __package__})


class _Part(NamedTuple):
    """One side (key or value) of a record type: its dataclass, message class, decoder and null checker."""

    dataclass: type
    message: Any
    read: Callable[[memoryview, int], tuple[Any, int]]
    check: Checker | None
    name: str


def _part(cls: type, flexible: bool) -> _Part:
    # kafka-python's generated decoder fills the message's slots directly; its plain decode passes the fields to
    # the constructor, which takes `version` as the message's own version and so cannot read a field of that name.
    message = _message_class(cls.__name__)
    spec = message._struct
    read = spec.compiled_decode_from(0, compact=flexible, tagged=flexible, data_class=message)
    return _Part(cls, message, read, build_checker(spec, 0, flexible, cls.__name__), cls.__name__)


_KEYS: dict[int, _Part] = {}
_VALUES: dict[int, _Part] = {}
for _type, _key, _value in (
    (CoordinatorRecordType.CONSUMER_GROUP_METADATA, ConsumerGroupMetadataKey, ConsumerGroupMetadataValue),
    (CoordinatorRecordType.CONSUMER_GROUP_PARTITION_METADATA, ConsumerGroupPartitionMetadataKey,
     ConsumerGroupPartitionMetadataValue),
    (CoordinatorRecordType.CONSUMER_GROUP_MEMBER_METADATA, ConsumerGroupMemberMetadataKey,
     ConsumerGroupMemberMetadataValue),
    (CoordinatorRecordType.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, ConsumerGroupTargetAssignmentMetadataKey,
     ConsumerGroupTargetAssignmentMetadataValue),
    (CoordinatorRecordType.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, ConsumerGroupTargetAssignmentMemberKey,
     ConsumerGroupTargetAssignmentMemberValue),
    (CoordinatorRecordType.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, ConsumerGroupCurrentMemberAssignmentKey,
     ConsumerGroupCurrentMemberAssignmentValue),
    (CoordinatorRecordType.CONSUMER_GROUP_REGULAR_EXPRESSION, ConsumerGroupRegularExpressionKey,
     ConsumerGroupRegularExpressionValue),
):
    _KEYS[_type] = _part(_key, flexible=False)
    _VALUES[_type] = _part(_value, flexible=True)
# Share groups' records apart, so that decode_key and decode_value keep to consumer groups' and a loader asks for
# share records by name (decode_share_record).
_SHARE_KEYS: dict[int, _Part] = {}
_SHARE_VALUES: dict[int, _Part] = {}
for _share_type, _share_key, _share_value in (
    (CoordinatorRecordType.SHARE_GROUP_METADATA, ShareGroupMetadataKey, ShareGroupMetadataValue),
    (CoordinatorRecordType.SHARE_GROUP_MEMBER_METADATA, ShareGroupMemberMetadataKey, ShareGroupMemberMetadataValue),
    (CoordinatorRecordType.SHARE_GROUP_TARGET_ASSIGNMENT_METADATA, ShareGroupTargetAssignmentMetadataKey,
     ShareGroupTargetAssignmentMetadataValue),
    (CoordinatorRecordType.SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER, ShareGroupTargetAssignmentMemberKey,
     ShareGroupTargetAssignmentMemberValue),
    (CoordinatorRecordType.SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT, ShareGroupCurrentMemberAssignmentKey,
     ShareGroupCurrentMemberAssignmentValue),
    (CoordinatorRecordType.SHARE_GROUP_STATE_PARTITION_METADATA, ShareGroupStatePartitionMetadataKey,
     ShareGroupStatePartitionMetadataValue),
):
    _SHARE_KEYS[_share_type] = _part(_share_key, flexible=False)
    _SHARE_VALUES[_share_type] = _part(_share_value, flexible=True)
_TYPE_OF: dict[type, int] = {part.dataclass: t for table in (_KEYS, _VALUES, _SHARE_KEYS, _SHARE_VALUES)
                             for t, part in table.items()}

# The dataclass of each nested struct, by the struct's type name in the specs.
_NESTED: dict[str, type] = {
    "TopicPartition": TopicPartitions,
    "TopicPartitions": TopicPartitions,
    "TopicMetadata": TopicMetadata,
    "PartitionMetadata": PartitionMetadata,
    "ClassicMemberMetadata": ClassicMemberMetadata,
    "ClassicProtocol": ClassicProtocol,
    "TopicPartitionsInfo": TopicPartitionsInfo,
    "TopicInfo": TopicInfo,
}


def _to_message(obj: Any, spec: Any, data_class: Any) -> Any:
    """The kafka-python message holding the dataclass `obj`, whose fields carry the spec's field names."""
    values = {}
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        field = spec.fields[f.name]
        if value is None:
            pass
        elif field.is_struct_array():
            value = [_to_message(item, field.array_of, field.array_of.data_class) for item in value]
        elif field.is_struct():
            value = _to_message(value, field, field.data_class)
        elif field.is_array():
            value = list(value)
        values[f.name] = value
    # kafka-python's constructor takes `version` as the message's own version, so a field of that name (the
    # regular expression value's) is set after.
    field_named_version = values.pop("version", None)
    message = data_class(**values)
    if field_named_version is not None:
        message.version = field_named_version
    return message


def _from_message(message: Any, spec: Any, cls: type) -> Any:
    """The dataclass `cls` holding a decoded kafka-python message: arrays as tuples, the zero uuid (which
    kafka-python reads as None) as a uuid."""
    values = {}
    for f in dataclasses.fields(cls):
        value = getattr(message, f.name)
        field = spec.fields[f.name]
        if field.type_str == "uuid":
            value = _ZERO_UUID if value is None else value
        elif value is None:
            pass
        elif field.is_struct_array():
            value = tuple(_from_message(item, field.array_of, _NESTED[field.array_of.type_str]) for item in value)
        elif field.is_struct():
            value = _from_message(value, field, _NESTED[field.type_str])
        elif field.is_array():
            value = tuple(value)
        values[f.name] = value
    return cls(**values)


# ---- encoding and decoding ---------------------------------------------------------------------------------------

def record_type_of(key: bytes | bytearray | memoryview) -> int:
    """The coordinator record type a key's bytes start with, to tell classic, consumer, share and streams group
    records apart before decoding one."""
    if len(key) < _I16.size:
        raise ConsumerGroupRecordError(f"coordinator record key of {len(key)} bytes has no record type")
    record_type: int = _I16.unpack_from(key)[0]
    return record_type


def encode_key(key: ConsumerGroupRecordKey | ShareGroupRecordKey) -> bytes:
    """The key bytes: the record type, then the key message."""
    record_type = _TYPE_OF[type(key)]
    part = _KEYS.get(record_type) or _SHARE_KEYS[record_type]
    message = _to_message(key, part.message._struct, part.message)
    return _I16.pack(record_type) + bytes(message.encode(version=KEY_VERSION, header=False))


def encode_value(value: ConsumerGroupRecordValue | ShareGroupRecordValue) -> bytes:
    """The value bytes: the version, then the value message (tagged fields at their defaults are left out)."""
    record_type = _TYPE_OF[type(value)]
    part = _VALUES.get(record_type) or _SHARE_VALUES[record_type]
    message = _to_message(value, part.message._struct, part.message)
    return _I16.pack(VALUE_VERSION) + bytes(message.encode(version=VALUE_VERSION, header=False))


def decode_key(data: bytes | bytearray | memoryview) -> ConsumerGroupRecordKey:
    """The key in a record's key bytes; UnknownRecordTypeError when it is not a consumer group record's."""
    record_type = record_type_of(data)
    part = _KEYS.get(record_type)
    if part is None:
        raise UnknownRecordTypeError(record_type)
    key: ConsumerGroupRecordKey = _decode(part, bytes(data[_I16.size:]), KEY_VERSION)
    return key


def decode_value(record_type: int, data: bytes | bytearray | memoryview | None) -> ConsumerGroupRecordValue | None:
    """The value of a record of `record_type` in its value bytes; None for a tombstone."""
    part = _VALUES.get(record_type)
    if part is None:
        raise UnknownRecordTypeError(record_type)
    value: ConsumerGroupRecordValue | None = _decode_value(part, data)
    return value


def _decode_value(part: _Part, data: bytes | bytearray | memoryview | None) -> Any:
    if data is None:
        return None
    if len(data) < _I16.size:
        raise ConsumerGroupRecordError(f"{part.name} of {len(data)} bytes has no version")
    (version,) = _I16.unpack_from(data)
    if version != VALUE_VERSION:
        raise ConsumerGroupRecordError(f"unknown {part.name} version {version}")
    return _decode(part, bytes(data[_I16.size:]), version)


def decode_record(key: bytes | bytearray | memoryview,
                  value: bytes | bytearray | memoryview | None) -> ConsumerGroupRecord:
    """A consumer group record from its key and value bytes (a None value is a tombstone), for a loader that has
    seen its record type is one of CONSUMER_GROUP_RECORD_TYPES."""
    decoded_key = decode_key(key)
    return ConsumerGroupRecord(decoded_key, decode_value(_TYPE_OF[type(decoded_key)], value))


def decode_share_record(key: bytes | bytearray | memoryview,
                        value: bytes | bytearray | memoryview | None) -> ShareGroupRecord:
    """A share-group record from its key and value bytes (a None value is a tombstone), for a loader that has seen
    its record type is one of SHARE_GROUP_RECORD_TYPES; UnknownRecordTypeError for any other type."""
    record_type = record_type_of(key)
    key_part, value_part = _SHARE_KEYS.get(record_type), _SHARE_VALUES.get(record_type)
    if key_part is None or value_part is None:
        raise UnknownRecordTypeError(record_type)
    return ShareGroupRecord(_decode(key_part, bytes(key[_I16.size:]), KEY_VERSION), _decode_value(value_part, value))


def _decode(part: _Part, body: bytes, version: int) -> Any:
    try:
        message, end = part.read(memoryview(body), 0)
        if part.check is not None:
            part.check(message)
    except Exception as exc:  # the generated decoders raise assorted errors on garbage
        raise ConsumerGroupRecordError(f"{part.name} v{version} is malformed: {exc!r}") from exc
    if end != len(body):
        raise ConsumerGroupRecordError(f"{part.name} v{version} is {end} bytes, not the {len(body)} given")
    return _from_message(message, part.message._struct, part.dataclass)
