"""KRaft metadata records: every type at every version round trips, and the bytes are Kafka's (frame header,
flexible encoding, tagged fields in tag order, left out at their defaults)."""

from __future__ import annotations

import struct
import uuid
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from minikafka.protocol.metadata_records import (
    FRAME_VERSION,
    RECORD_CLASSES,
    AccessControlEntryRecord,
    BrokerRegistrationChangeRecord,
    ClientQuotaRecord,
    ConfigRecord,
    FeatureLevelRecord,
    FenceBrokerRecord,
    MetadataRecordError,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    UserScramCredentialRecord,
    decode_record,
    encode_record,
    record_type,
)
from minikafka.protocol.varint import encode_uvarint

TOPIC_ID = uuid.UUID("6b1d3a4e-2f0c-4c59-9a57-0e3c1f2d8a10")
INCARNATION_ID = uuid.UUID("c3a1e2f4-5b6d-4e7f-8091-a2b3c4d5e6f7")
DIR_A = uuid.UUID("11111111-2222-4333-8444-555555555555")
DIR_B = uuid.UUID("99999999-8888-4777-8666-555555555555")

_EP = RegisterBrokerRecord.BrokerEndpoint
_FEATURE = RegisterBrokerRecord.BrokerFeature

# Every field of every record type with a value other than its default, so each one shows up on the wire.
SAMPLES: dict[type, dict[str, Any]] = {
    RegisterBrokerRecord: dict(
        broker_id=2, is_migrating_zk_broker=True, incarnation_id=INCARNATION_ID, broker_epoch=41,
        end_points=[_EP(name="PLAINTEXT", host="127.0.0.1", port=9092, security_protocol=0),
                    _EP(name="REPLICATION", host="broker-2.example", port=65001, security_protocol=1)],
        features=[_FEATURE(name="metadata.version", min_supported_version=7, max_supported_version=26)],
        rack="rack-a", fenced=False, in_controlled_shutdown=True, log_dirs=[DIR_A, DIR_B]),
    UnregisterBrokerRecord: dict(broker_id=3, broker_epoch=1 << 40),
    TopicRecord: dict(name="orders", topic_id=TOPIC_ID),
    PartitionRecord: dict(
        partition_id=7, topic_id=TOPIC_ID, replicas=[1, 2, 3], isr=[1, 2], removing_replicas=[3],
        adding_replicas=[4], leader=1, leader_recovery_state=1, leader_epoch=5, partition_epoch=9,
        directories=[DIR_A, DIR_B, DIR_A], eligible_leader_replicas=[3], last_known_elr=[2]),
    ConfigRecord: dict(resource_type=2, resource_name="orders", name="retention.ms", value="1000"),
    PartitionChangeRecord: dict(
        partition_id=7, topic_id=TOPIC_ID, isr=[1], leader=-1, replicas=[1, 2], removing_replicas=[],
        adding_replicas=[2], leader_recovery_state=0, eligible_leader_replicas=[2], last_known_elr=[],
        directories=[DIR_A, DIR_B]),
    FenceBrokerRecord: dict(id=2, epoch=41),
    UnfenceBrokerRecord: dict(id=2, epoch=42),
    RemoveTopicRecord: dict(topic_id=TOPIC_ID),
    ProducerIdsRecord: dict(broker_id=1, broker_epoch=41, next_producer_id=2000),
    FeatureLevelRecord: dict(name="share.version", feature_level=1),
    BrokerRegistrationChangeRecord: dict(broker_id=2, broker_epoch=41, fenced=-1, in_controlled_shutdown=1,
                                         log_dirs=[DIR_B]),
    ClientQuotaRecord: dict(entity=[ClientQuotaRecord.EntityData(entity_type="user", entity_name=None),
                                    ClientQuotaRecord.EntityData(entity_type="client-id", entity_name="app")],
                            key="producer_byte_rate", value=1048576.0, remove=False),
    UserScramCredentialRecord: dict(name="alice", mechanism=2, salt=b"\x00salt\xff", stored_key=bytes(range(64)),
                                    server_key=bytes(range(64, 128)), iterations=8192),
    RemoveUserScramCredentialRecord: dict(name="alice", mechanism=1),
    AccessControlEntryRecord: dict(id=TOPIC_ID, resource_type=2, resource_name="orders", pattern_type=4,
                                   principal="User:alice", host="*", operation=3, permission_type=3),
    RemoveAccessControlEntryRecord: dict(id=TOPIC_ID),
}


def sample(cls: type, version: int) -> Any:
    fields = cls.fields
    return cls(version=version, **{k: v for k, v in SAMPLES[cls].items() if fields[k].for_version_q(version)})


VERSIONED = [(cls, v) for cls in SAMPLES for v in range(cls.valid_versions[0], cls.valid_versions[1] + 1)]


def test_record_types_are_kafkas() -> None:
    assert {t: cls.__name__ for t, cls in RECORD_CLASSES.items()} == {
        0: "RegisterBrokerRecord", 1: "UnregisterBrokerRecord", 2: "TopicRecord", 3: "PartitionRecord",
        4: "ConfigRecord", 5: "PartitionChangeRecord", 7: "FenceBrokerRecord", 8: "UnfenceBrokerRecord",
        9: "RemoveTopicRecord", 11: "UserScramCredentialRecord", 12: "FeatureLevelRecord", 14: "ClientQuotaRecord",
        15: "ProducerIdsRecord",
        17: "BrokerRegistrationChangeRecord", 18: "AccessControlEntryRecord", 19: "RemoveAccessControlEntryRecord",
        22: "RemoveUserScramCredentialRecord",
    }
    assert set(SAMPLES) == set(RECORD_CLASSES.values())
    assert {cls.__name__: cls.valid_versions for cls in SAMPLES} == {
        "RegisterBrokerRecord": (0, 3), "UnregisterBrokerRecord": (0, 0), "TopicRecord": (0, 0),
        "PartitionRecord": (0, 2), "ConfigRecord": (0, 0), "PartitionChangeRecord": (0, 2),
        "FenceBrokerRecord": (0, 0), "UnfenceBrokerRecord": (0, 0), "RemoveTopicRecord": (0, 0),
        "ProducerIdsRecord": (0, 0), "BrokerRegistrationChangeRecord": (0, 2), "ClientQuotaRecord": (0, 0),
        "UserScramCredentialRecord": (0, 0), "RemoveUserScramCredentialRecord": (0, 0),
        "AccessControlEntryRecord": (0, 0), "RemoveAccessControlEntryRecord": (0, 0), "FeatureLevelRecord": (0, 0),
    }


@pytest.mark.parametrize(("cls", "version"), VERSIONED, ids=[f"{c.__name__}-v{v}" for c, v in VERSIONED])
def test_round_trip(cls: type, version: int) -> None:
    record = sample(cls, version)
    value = encode_record(record)
    assert value[:3] == bytes([FRAME_VERSION, record_type(cls), version])
    decoded = decode_record(value)
    assert type(decoded) is cls
    assert decoded.version == version
    assert decoded == record
    assert encode_record(decoded) == value


def test_scram_credential_record_bytes() -> None:
    """Kafka's layout: the name (compact string), the mechanism (int8), salt, stored and server keys (compact bytes),
    iterations (int32), no tagged fields."""
    value = encode_record(UserScramCredentialRecord(name="bob", mechanism=1, salt=b"s", stored_key=b"kk",
                                                    server_key=b"vvv", iterations=4096))
    assert value == (bytes([1, 11, 0]) + b"\x04bob" + b"\x01" + b"\x02s" + b"\x03kk" + b"\x04vvv"
                     + struct.pack(">i", 4096) + b"\x00")
    assert encode_record(RemoveUserScramCredentialRecord(name="bob", mechanism=2)) == (
        bytes([1, 22, 0]) + b"\x04bob" + b"\x02" + b"\x00")


def test_a_record_without_a_version_is_written_at_the_newest() -> None:
    value = encode_record(PartitionRecord(partition_id=0, topic_id=TOPIC_ID, replicas=[1], isr=[1], leader=1))
    assert value[:3] == bytes([1, 3, 2])
    assert decode_record(value).version == 2


def _i32s(*values: int) -> bytes:
    """A compact array of int32 (length + 1, then the elements)."""
    return encode_uvarint(len(values) + 1) + b"".join(struct.pack(">i", v) for v in values)


def _tag(tag: int, body: bytes) -> bytes:
    return encode_uvarint(tag) + encode_uvarint(len(body)) + body


def test_partition_record_bytes() -> None:
    record = PartitionRecord(version=0, partition_id=7, topic_id=TOPIC_ID, replicas=[1, 2, 3], isr=[1, 2],
                             removing_replicas=[], adding_replicas=[], leader=1, leader_epoch=5, partition_epoch=9)
    expected = (
        b"\x01\x03\x00"  # frame version 1, PartitionRecord, version 0
        + struct.pack(">i", 7) + TOPIC_ID.bytes
        + _i32s(1, 2, 3) + _i32s(1, 2) + _i32s() + _i32s()
        + struct.pack(">iii", 1, 5, 9)
        + b"\x00"  # no tagged fields: LeaderRecoveryState is at its default
    )
    assert encode_record(record) == expected
    assert decode_record(expected) == record


def test_partition_record_v2_bytes_with_tagged_fields() -> None:
    record = PartitionRecord(version=2, partition_id=0, topic_id=TOPIC_ID, replicas=[1, 2], isr=[1],
                             removing_replicas=[], adding_replicas=[], leader=1, leader_recovery_state=1,
                             leader_epoch=3, partition_epoch=4, directories=[DIR_A, DIR_B],
                             eligible_leader_replicas=[2], last_known_elr=None)
    expected = (
        b"\x01\x03\x02"
        + struct.pack(">i", 0) + TOPIC_ID.bytes
        + _i32s(1, 2) + _i32s(1) + _i32s() + _i32s()
        + struct.pack(">iii", 1, 3, 4)
        + b"\x03" + DIR_A.bytes + DIR_B.bytes  # Directories: compact array of two uuids
        + b"\x02"  # two tagged fields, in tag order; LastKnownElr is null, its default, so absent
        + _tag(0, b"\x01")  # LeaderRecoveryState
        + _tag(1, _i32s(2))  # EligibleLeaderReplicas
    )
    assert encode_record(record) == expected
    assert decode_record(expected) == record


def test_partition_change_record_bytes() -> None:
    record = PartitionChangeRecord(version=0, partition_id=2, topic_id=TOPIC_ID, isr=[1, 3], leader=3)
    expected = (
        b"\x01\x05\x00"  # frame version 1, PartitionChangeRecord, version 0
        + struct.pack(">i", 2) + TOPIC_ID.bytes
        + b"\x02"  # only the changed fields are written
        + _tag(0, _i32s(1, 3))  # Isr
        + _tag(1, struct.pack(">i", 3))  # Leader
    )
    assert encode_record(record) == expected
    assert decode_record(expected) == record


def test_partition_change_record_v2_tags_in_tag_order() -> None:
    record = PartitionChangeRecord(version=2, partition_id=0, topic_id=TOPIC_ID, leader=-1,
                                   leader_recovery_state=1, eligible_leader_replicas=[2], last_known_elr=[],
                                   directories=[DIR_B])
    expected = (
        b"\x01\x05\x02"
        + struct.pack(">i", 0) + TOPIC_ID.bytes
        + b"\x05"
        + _tag(1, struct.pack(">i", -1))
        + _tag(5, b"\x01")
        + _tag(6, _i32s(2))
        + _tag(7, _i32s())  # an empty list is a change (to no replicas), unlike null
        + _tag(8, b"\x02" + DIR_B.bytes)  # Directories has tag 8, so it comes last
    )
    assert encode_record(record) == expected
    assert decode_record(expected) == record


def test_unchanged_fields_of_a_partition_change_are_left_out() -> None:
    record = PartitionChangeRecord(version=0, partition_id=1, topic_id=TOPIC_ID)
    assert encode_record(record) == b"\x01\x05\x00" + struct.pack(">i", 1) + TOPIC_ID.bytes + b"\x00"
    decoded = decode_record(encode_record(record))
    assert (decoded.isr, decoded.leader, decoded.replicas, decoded.leader_recovery_state) == (None, -2, None, -1)


def test_broker_registration_change_bytes() -> None:
    record = BrokerRegistrationChangeRecord(version=1, broker_id=2, broker_epoch=41, fenced=-1)
    expected = b"\x01\x11\x01" + struct.pack(">iq", 2, 41) + b"\x01" + _tag(0, b"\xff")
    assert encode_record(record) == expected


def test_unknown_tags_are_skipped() -> None:
    value = b"\x01\x02\x00" + b"\x07orders" + TOPIC_ID.bytes + b"\x01" + _tag(9, b"abc")
    decoded = decode_record(value)
    assert (decoded.name, decoded.topic_id) == ("orders", TOPIC_ID)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (b"\x00\x02\x00", "frame version 0"),
        (b"\x02\x02\x00", "frame version 2"),
        (b"\x01\x06\x00", "record type 6"),
        (b"\x01\x63\x00", "record type 99"),
        (b"\x01\x02\x01" + b"\x07orders" + TOPIC_ID.bytes + b"\x00", "version 1"),
        (b"\x01\x03\x03", "version 3"),
        (b"\x01\x02", "frame"),
        (b"\x01\x02\x00\x07ord", "malformed"),
        (b"\x01\x02\x00" + b"\x07orders" + TOPIC_ID.bytes + b"\x00\x00", "1 unexpected bytes"),
        (b"\x01\xff\xff\xff\xff\xff\x00", "frame"),
    ],
)
def test_bad_values_raise(value: bytes, message: str) -> None:
    with pytest.raises(MetadataRecordError, match=message):
        decode_record(value)


def test_every_cut_of_a_record_raises() -> None:
    value = encode_record(sample(RegisterBrokerRecord, 3))
    for cut in range(len(value)):
        with pytest.raises(MetadataRecordError):
            decode_record(value[:cut])


_broker_ids = st.lists(st.integers(0, 2**31 - 1), max_size=5)


@given(
    isr=st.none() | _broker_ids,
    leader=st.integers(-2, 2**31 - 1),
    replicas=st.none() | _broker_ids,
    recovery=st.sampled_from([-1, 0, 1]),
    elr=st.none() | _broker_ids,
    directories=st.none() | st.lists(st.uuids(), max_size=3),
)
def test_partition_change_round_trips(
    isr: list[int] | None, leader: int, replicas: list[int] | None, recovery: int, elr: list[int] | None,
    directories: list[uuid.UUID] | None,
) -> None:
    record = PartitionChangeRecord(version=2, partition_id=0, topic_id=TOPIC_ID, isr=isr, leader=leader,
                                   replicas=replicas, leader_recovery_state=recovery, eligible_leader_replicas=elr,
                                   directories=directories)
    assert decode_record(encode_record(record)) == record
