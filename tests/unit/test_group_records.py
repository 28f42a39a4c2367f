"""The __consumer_offsets record formats: byte layouts Kafka's tools read, and encode/decode round trips."""
from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.memory_records import MemoryRecords

from minikafka.broker.coordinator.coordinator_log import build_batch
from minikafka.broker.coordinator.group.group import OffsetAndMetadata
from minikafka.broker.coordinator.group.group_metadata_log import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    RecordFormatError,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    encode_group_metadata_value,
    encode_key,
    encode_offset_commit_value,
    group_metadata_record,
    offset_commit_record,
)

names = st.text(max_size=40)
int32 = st.integers(-2**31, 2**31 - 1)
int64 = st.integers(-2**63, 2**63 - 1)


def test_offset_commit_key_is_kafkas_version_1_layout():
    assert encode_key(OffsetCommitKey("g", "topic", 7)) == (
        struct.pack(">h", 1) + struct.pack(">h", 1) + b"g" + struct.pack(">h", 5) + b"topic" + struct.pack(">i", 7))


def test_group_metadata_key_is_version_2():
    assert encode_key(GroupMetadataKey("grp")) == struct.pack(">hh", 2, 3) + b"grp"


def test_offset_commit_value_is_version_3_without_expiry():
    value = OffsetAndMetadata(offset=42, leader_epoch=5, metadata="m", commit_timestamp=1000)
    assert encode_offset_commit_value(value) == (
        struct.pack(">hqi", 3, 42, 5) + struct.pack(">h", 1) + b"m" + struct.pack(">q", 1000))


def test_offset_commit_value_with_expiry_is_version_1():
    value = OffsetAndMetadata(offset=42, leader_epoch=5, metadata="", commit_timestamp=1000, expire_timestamp=2000)
    data = encode_offset_commit_value(value)
    assert data == struct.pack(">hqhqq", 1, 42, 0, 1000, 2000)
    decoded = decode_offset_commit_value(data)
    assert decoded.expire_timestamp == 2000
    assert decoded.leader_epoch == -1  # version 1 has no leader epoch


def test_reads_older_offset_commit_value_versions():
    v0 = struct.pack(">hq", 0, 9) + struct.pack(">h", 2) + b"md" + struct.pack(">q", 77)
    assert decode_offset_commit_value(v0) == OffsetAndMetadata(9, -1, "md", 77, None)
    v2 = struct.pack(">hq", 2, 9) + struct.pack(">h", 0) + struct.pack(">q", 77)
    assert decode_offset_commit_value(v2) == OffsetAndMetadata(9, -1, "", 77, None)


def test_reads_flexible_offset_commit_value_version_4():
    # offset, leaderEpoch, compact string "ab" (length+1 = 3), commitTimestamp, no tagged fields
    v4 = struct.pack(">hqi", 4, 11, 2) + bytes([3]) + b"ab" + struct.pack(">q", 5) + bytes([0])
    assert decode_offset_commit_value(v4) == OffsetAndMetadata(11, 2, "ab", 5, None)


def _group_value(members: int = 2) -> GroupMetadataValue:
    return GroupMetadataValue(
        protocol_type="consumer", generation=3, protocol="range", leader="m-0", current_state_timestamp=123456,
        members=[MemberMetadata(f"m-{i}", "inst" if i == 0 else None, "client", "/127.0.0.1", 30000, 10000,
                                b"\x00\x01sub", b"\x00\x01asg") for i in range(members)])


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_group_metadata_value_round_trips_in_every_version(version):
    value = _group_value()
    decoded = decode_group_metadata_value(encode_group_metadata_value(value, version))
    assert decoded.protocol_type == "consumer" and decoded.generation == 3
    assert decoded.protocol == "range" and decoded.leader == "m-0"
    assert decoded.current_state_timestamp == (123456 if version >= 2 else -1)
    assert [m.member_id for m in decoded.members] == ["m-0", "m-1"]
    assert decoded.members[0].group_instance_id == ("inst" if version >= 3 else None)
    assert decoded.members[0].rebalance_timeout == (30000 if version >= 1 else -1)
    assert decoded.members[1].subscription == b"\x00\x01sub" and decoded.members[1].assignment == b"\x00\x01asg"


def test_empty_group_metadata_value_has_null_protocol_and_leader():
    value = GroupMetadataValue(protocol_type="consumer", generation=4, protocol=None, leader=None,
                               current_state_timestamp=5, members=[])
    data = encode_group_metadata_value(value)
    assert data == struct.pack(">hh", 3, 8) + b"consumer" + struct.pack(">ihhqi", 4, -1, -1, 5, 0)
    assert decode_group_metadata_value(data) == value


def test_unknown_and_share_group_key_versions():
    assert decode_key(struct.pack(">hh", 3, 1) + b"g") is None  # KIP-848 record: not served, skipped
    with pytest.raises(RecordFormatError):
        decode_key(struct.pack(">h", -1))


@pytest.mark.parametrize("data", [b"", b"\x00", struct.pack(">h", 3) + b"\x00" * 5,
                                  struct.pack(">h", 9) + b"\x00" * 30,
                                  struct.pack(">hq", 3, 1) + b"\x00\x00\x00\x00" + struct.pack(">h", 50)])
def test_truncated_or_unknown_offset_values_raise_format_error(data):
    with pytest.raises(RecordFormatError):
        decode_offset_commit_value(data)


def test_trailing_bytes_are_refused():
    data = encode_offset_commit_value(OffsetAndMetadata(1, -1, "", 2)) + b"x"
    with pytest.raises(RecordFormatError):
        decode_offset_commit_value(data)


def test_batch_holds_records_and_tombstones_in_order():
    records = [offset_commit_record("g", "t", 0, OffsetAndMetadata(5, -1, "", 1)),
               offset_commit_record("g", "t", 0, None),
               group_metadata_record("g", None)]
    batch = build_batch(records, timestamp_ms=99)
    parsed = MemoryRecords(batch).next_batch()
    got = [(r.key, r.value, r.timestamp) for r in parsed]
    assert got == [(k, v, 99) for k, v in records]
    assert decode_key(got[0][0]) == OffsetCommitKey("g", "t", 0)
    assert decode_key(got[2][0]) == GroupMetadataKey("g")


@settings(max_examples=150, deadline=None)
@given(group=names, topic=names, partition=int32, offset=int64, epoch=int32, metadata=names, ts=int64,
       expire=st.none() | int64)
def test_offset_commit_round_trip(group, topic, partition, offset, epoch, metadata, ts, expire):
    key = OffsetCommitKey(group, topic, partition)
    assert decode_key(encode_key(key)) == key
    value = OffsetAndMetadata(offset, epoch if expire is None else -1, metadata, ts,
                              None if expire == -1 else expire)
    assert decode_offset_commit_value(encode_offset_commit_value(value)) == value


member_strategy = st.builds(MemberMetadata, names, st.none() | names, names, names, int32, int32,
                            st.binary(max_size=64), st.binary(max_size=64))


@settings(max_examples=150, deadline=None)
@given(value=st.builds(GroupMetadataValue, names, int32, st.none() | names, st.none() | names, int64,
                       st.lists(member_strategy, max_size=4)),
       version=st.sampled_from([3, 4]))
def test_group_metadata_round_trip(value, version):
    assert decode_group_metadata_value(encode_group_metadata_value(value, version)) == value


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=80))
def test_garbage_never_raises_anything_but_format_error(data):
    for decode in (decode_key, decode_offset_commit_value, decode_group_metadata_value):
        try:
            decode(data)
        except RecordFormatError:
            pass
