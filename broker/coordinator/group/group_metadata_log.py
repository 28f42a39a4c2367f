"""Durable group state: committed offsets and group metadata as records in the internal `__consumer_offsets` topic.

The records are Kafka's own (GroupCoordinatorRecordSerde): a key and a value, each a big-endian int16 version
followed by the message of that version, so Kafka's tools can read this topic and this broker can read Kafka's.
Key version 0/1 is an OffsetCommitKey, 2 a GroupMetadataKey; a null value is a tombstone. Values are written in
the versions a current Kafka broker writes (OffsetCommitValue 3, or 1 when the commit carries an expire timestamp;
GroupMetadataValue 3) and read in every version 0-4 (4 is the first flexible one).

Offsets committed in a producer's transaction (TxnOffsetCommit) are written as a transactional batch of that
producer, and the transaction coordinator's COMMIT or ABORT marker in the same partition ends them; replay hands
both on, so loading a partition rebuilds what is still pending as well as what is committed.

KIP-848 consumer group records (types 3-8 and 16, protocol/coordinator_records) are read back as ConsumerGroupRecords
beside them, and KIP-932 share group records (types 10-15) as ShareGroupRecords; streams group records are skipped.

The topic itself (appends, waits, replays) is coordinator_log's, shared with the transaction
coordinator.
"""
from __future__ import annotations

import logging
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

from minikafka.broker.coordinator.coordinator_log import CoordinatorLog, Record, RecordFormatError
from minikafka.broker.coordinator.group.group import OffsetAndMetadata
from minikafka.broker.replication.replica_manager import ReplicaManager
from minikafka.protocol.coordinator_records import consumer_group_records
from minikafka.protocol.coordinator_records.consumer_group_records import (
    CONSUMER_GROUP_RECORD_TYPES,
    SHARE_GROUP_RECORD_TYPES,
    ConsumerGroupRecord,
    ConsumerGroupRecordError,
    ShareGroupRecord,
)
from minikafka.protocol.internal_topics import GROUP_METADATA_TOPIC
from minikafka.protocol.record_batch import NO_PRODUCER_ID
from minikafka.protocol.varint import VarintError, encode_uvarint, read_uvarint

log = logging.getLogger("minikafka.group_metadata_log")

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_METADATA_VALUE_VERSION = 3
FIRST_FLEXIBLE_VALUE_VERSION = 4
MAX_VALUE_VERSION = 4


_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


@dataclass(frozen=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class GroupMetadataKey:
    group: str


@dataclass
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: list[MemberMetadata] = field(default_factory=list)


RecordKey = OffsetCommitKey | GroupMetadataKey
RecordValue = OffsetAndMetadata | GroupMetadataValue | None


class TransactionalRecord(NamedTuple):
    """A record written in `producer_id`'s transaction: pending until the transaction's marker."""

    producer_id: int
    key: RecordKey
    value: RecordValue


class TransactionMarker(NamedTuple):
    """The COMMIT (or ABORT) marker that ends `producer_id`'s transaction in a partition."""

    producer_id: int
    commit: bool


# What replaying a partition yields, in log order: (key, value) of a record outside any transaction, a record of a
# transaction, the marker ending one, or a record of a KIP-848 consumer group.
Replayed = (tuple[RecordKey, RecordValue] | TransactionalRecord | TransactionMarker | ConsumerGroupRecord
            | ShareGroupRecord)


DEFAULT_COMMIT_TIMEOUT_MS = 5000

# ---- primitive encoding (Kafka's generated-message wire types) --------------------------------------------------

class _Writer:
    def __init__(self, flexible: bool) -> None:
        self.flexible = flexible
        self.parts: list[bytes] = []

    def int16(self, v: int) -> None:
        self.parts.append(_I16.pack(v))

    def int32(self, v: int) -> None:
        self.parts.append(_I32.pack(v))

    def int64(self, v: int) -> None:
        self.parts.append(_I64.pack(v))

    def uvarint(self, v: int) -> None:
        self.parts.append(encode_uvarint(v))

    def string(self, v: str | None) -> None:
        if v is None:
            self.uvarint(0) if self.flexible else self.int16(-1)
            return
        data = v.encode("utf-8")
        self.uvarint(len(data) + 1) if self.flexible else self.int16(len(data))
        self.parts.append(data)

    def bytes_(self, v: bytes) -> None:
        self.uvarint(len(v) + 1) if self.flexible else self.int32(len(v))
        self.parts.append(bytes(v))

    def array_length(self, n: int) -> None:
        self.uvarint(n + 1) if self.flexible else self.int32(n)

    def tagged_fields(self) -> None:
        if self.flexible:
            self.uvarint(0)

    def getvalue(self) -> bytes:
        return b"".join(self.parts)


class _Reader:
    def __init__(self, data: bytes, flexible: bool = False) -> None:
        self.data = bytes(data)
        self.pos = 0
        self.flexible = flexible

    def _unpack(self, fmt: struct.Struct) -> int:
        try:
            (value,) = fmt.unpack_from(self.data, self.pos)
        except struct.error:
            raise RecordFormatError(f"record ends after {len(self.data)} bytes") from None
        self.pos += fmt.size
        return value

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise RecordFormatError(f"record ends after {len(self.data)} bytes, needed {self.pos + n}")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def int16(self) -> int:
        return self._unpack(_I16)

    def int32(self) -> int:
        return self._unpack(_I32)

    def int64(self) -> int:
        return self._unpack(_I64)

    def uvarint(self) -> int:
        try:
            value, self.pos = read_uvarint(self.data, self.pos)
        except VarintError as exc:
            raise RecordFormatError(str(exc)) from None
        return value

    def nullable_string(self) -> str | None:
        length = self.uvarint() - 1 if self.flexible else self._unpack(_I16)
        if length < 0:
            return None
        try:
            return self._take(length).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RecordFormatError(f"string is not UTF-8: {exc}") from None

    def string(self) -> str:
        value = self.nullable_string()
        if value is None:
            raise RecordFormatError("null in a non-nullable string field")
        return value

    def bytes_(self) -> bytes:
        length = self.uvarint() - 1 if self.flexible else self._unpack(_I32)
        if length < 0:
            raise RecordFormatError("null in a non-nullable bytes field")
        return self._take(length)

    def array_length(self) -> int:
        n = self.uvarint() - 1 if self.flexible else self._unpack(_I32)
        if n < 0:
            raise RecordFormatError("null in a non-nullable array field")
        if n > len(self.data) - self.pos:
            raise RecordFormatError(f"array of {n} elements cannot fit in the record")
        return n

    def tagged_fields(self) -> None:
        if not self.flexible:
            return
        for _ in range(self.uvarint()):
            self.uvarint()
            self._take(self.uvarint())

    def expect_end(self) -> None:
        if self.pos != len(self.data):
            raise RecordFormatError(f"{len(self.data) - self.pos} unexpected bytes after the record")


# ---- keys -------------------------------------------------------------------------------------------------------

def encode_key(key: RecordKey) -> bytes:
    w = _Writer(flexible=False)
    if isinstance(key, OffsetCommitKey):
        w.int16(OFFSET_COMMIT_KEY_VERSION)
        w.string(key.group)
        w.string(key.topic)
        w.int32(key.partition)
    else:
        w.int16(GROUP_METADATA_KEY_VERSION)
        w.string(key.group)
    return w.getvalue()


def decode_key(data: bytes) -> RecordKey | None:
    """The key, or None for record types this coordinator does not serve (KIP-848 and share groups)."""
    r = _Reader(data)
    version = r.int16()
    if version in (0, 1):
        key: RecordKey = OffsetCommitKey(r.string(), r.string(), r.int32())
    elif version == GROUP_METADATA_KEY_VERSION:
        key = GroupMetadataKey(r.string())
    elif version > GROUP_METADATA_KEY_VERSION:
        return None
    else:
        raise RecordFormatError(f"unknown coordinator record key version {version}")
    r.expect_end()
    return key


# ---- values -----------------------------------------------------------------------------------------------------

def _check_value_version(version: int) -> None:
    if not 0 <= version <= MAX_VALUE_VERSION:
        raise RecordFormatError(f"unknown value version {version}")


def encode_offset_commit_value(value: OffsetAndMetadata) -> bytes:
    version = OFFSET_COMMIT_VALUE_VERSION if value.expire_timestamp is None else OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY
    w = _Writer(flexible=False)
    w.int16(version)
    w.int64(value.offset)
    if version >= 3:
        w.int32(value.leader_epoch)
    w.string(value.metadata)
    w.int64(value.commit_timestamp)
    if value.expire_timestamp is not None:  # only version 1 carries it
        w.int64(value.expire_timestamp)
    return w.getvalue()


def decode_offset_commit_value(data: bytes) -> OffsetAndMetadata:
    r = _Reader(data)
    version = r.int16()
    _check_value_version(version)
    r.flexible = version >= FIRST_FLEXIBLE_VALUE_VERSION
    offset = r.int64()
    leader_epoch = r.int32() if version >= 3 else -1
    metadata = r.string()
    commit_timestamp = r.int64()
    expire = r.int64() if version == 1 else -1
    r.tagged_fields()
    r.expect_end()
    return OffsetAndMetadata(offset, leader_epoch, metadata, commit_timestamp, None if expire == -1 else expire)


def encode_group_metadata_value(value: GroupMetadataValue, version: int = GROUP_METADATA_VALUE_VERSION) -> bytes:
    _check_value_version(version)
    w = _Writer(flexible=version >= FIRST_FLEXIBLE_VALUE_VERSION)
    w.int16(version)
    w.string(value.protocol_type)
    w.int32(value.generation)
    w.string(value.protocol)
    w.string(value.leader)
    if version >= 2:
        w.int64(value.current_state_timestamp)
    w.array_length(len(value.members))
    for m in value.members:
        w.string(m.member_id)
        if version >= 3:
            w.string(m.group_instance_id)
        w.string(m.client_id)
        w.string(m.client_host)
        if version >= 1:
            w.int32(m.rebalance_timeout)
        w.int32(m.session_timeout)
        w.bytes_(m.subscription)
        w.bytes_(m.assignment)
        w.tagged_fields()
    w.tagged_fields()
    return w.getvalue()


def decode_group_metadata_value(data: bytes) -> GroupMetadataValue:
    r = _Reader(data)
    version = r.int16()
    _check_value_version(version)
    r.flexible = version >= FIRST_FLEXIBLE_VALUE_VERSION
    value = GroupMetadataValue(protocol_type=r.string(), generation=r.int32(), protocol=r.nullable_string(),
                               leader=r.nullable_string())
    if version >= 2:
        value.current_state_timestamp = r.int64()
    for _ in range(r.array_length()):
        member_id = r.string()
        instance_id = r.nullable_string() if version >= 3 else None
        client_id = r.string()
        client_host = r.string()
        rebalance_timeout = r.int32() if version >= 1 else -1
        session_timeout = r.int32()
        value.members.append(MemberMetadata(member_id, instance_id, client_id, client_host, rebalance_timeout,
                                            session_timeout, r.bytes_(), r.bytes_()))
        r.tagged_fields()
    r.tagged_fields()
    r.expect_end()
    return value


def decode_value(key: RecordKey, data: bytes | None) -> RecordValue:
    if data is None:
        return None
    if isinstance(key, OffsetCommitKey):
        return decode_offset_commit_value(data)
    return decode_group_metadata_value(data)


def offset_commit_record(group: str, topic: str, partition: int,
                         value: OffsetAndMetadata | None) -> Record:
    """Key and value bytes of an offset commit (value None: a tombstone deleting the offset)."""
    return (encode_key(OffsetCommitKey(group, topic, partition)),
            None if value is None else encode_offset_commit_value(value))


def group_metadata_record(group: str, value: GroupMetadataValue | None) -> Record:
    """Key and value bytes of a group's metadata (value None: a tombstone deleting the group)."""
    return encode_key(GroupMetadataKey(group)), None if value is None else encode_group_metadata_value(value)


def consumer_group_record(record: ConsumerGroupRecord | ShareGroupRecord) -> Record:
    """Key and value bytes of a consumer or share group record (value None: a tombstone)."""
    key, value = record
    return (consumer_group_records.encode_key(key),
            None if value is None else consumer_group_records.encode_value(value))


class GroupMetadataLog(CoordinatorLog):
    """`__consumer_offsets` as the group coordinator reads it: records decoded into offset commits and groups."""

    def __init__(self, replica_manager: ReplicaManager, commit_timeout_ms: int = DEFAULT_COMMIT_TIMEOUT_MS) -> None:
        super().__init__(replica_manager, GROUP_METADATA_TOPIC, commit_timeout_ms)

    def replay(self, partition: int) -> Iterator[Replayed]:
        """Every coordinator record of one partition in log order, and the markers ending transactions among them;
        unreadable records are logged and skipped."""
        for batch in self.replay_batches(partition):
            if batch.marker is not None:
                yield TransactionMarker(batch.producer_id, not batch.marker.is_abort)
            for offset, key_bytes, value in batch.records:
                try:
                    key = decode_key(key_bytes)
                    if key is None:
                        # KIP-848 consumer and KIP-932 share group records are served; streams group records,
                        # and types this broker does not know, are skipped as Kafka skips unknown types.
                        record_type = consumer_group_records.record_type_of(key_bytes)
                        if record_type in CONSUMER_GROUP_RECORD_TYPES:
                            yield consumer_group_records.decode_record(key_bytes, value)
                        elif record_type in SHARE_GROUP_RECORD_TYPES:
                            yield consumer_group_records.decode_share_record(key_bytes, value)
                        continue
                    decoded = decode_value(key, value)
                except (RecordFormatError, ConsumerGroupRecordError) as exc:
                    log.error("skipping unreadable record at %s-%d offset %d: %s", GROUP_METADATA_TOPIC, partition,
                              offset, exc)
                    continue
                if batch.producer_id == NO_PRODUCER_ID:
                    yield key, decoded
                else:
                    yield TransactionalRecord(batch.producer_id, key, decoded)
