"""KIP-932's share-group records in `__consumer_offsets` (types 10-15): their bytes are Kafka's (record type, key at
version 0, value version 0 then the flexible value), they decode back to what was written, tombstones read as None,
and the consumer-group decoder still refuses them while bad bytes fail as any coordinator record's do."""
import struct
import uuid

import pytest

from minikafka.protocol.coordinator_records.consumer_group_records import (
    SHARE_GROUP_RECORD_TYPES,
    ConsumerGroupRecordError,
    ShareGroupCurrentMemberAssignmentKey,
    ShareGroupCurrentMemberAssignmentValue,
    ShareGroupMemberMetadataKey,
    ShareGroupMemberMetadataValue,
    ShareGroupMetadataKey,
    ShareGroupMetadataValue,
    ShareGroupRecord,
    ShareGroupStatePartitionMetadataKey,
    ShareGroupStatePartitionMetadataValue,
    ShareGroupTargetAssignmentMemberKey,
    ShareGroupTargetAssignmentMemberValue,
    ShareGroupTargetAssignmentMetadataKey,
    ShareGroupTargetAssignmentMetadataValue,
    TopicInfo,
    TopicPartitions,
    TopicPartitionsInfo,
    UnknownRecordTypeError,
    decode_key,
    decode_share_record,
    encode_key,
    encode_value,
    record_type_of,
)
from minikafka.protocol.varint import encode_uvarint

ORDERS = uuid.UUID("3e0a7c51-9d24-4b8f-a6e3-1f5b2c7d9e80")


def _s(text: str) -> bytes:
    """A non-flexible string: int16 length, then UTF-8."""
    return struct.pack(">h", len(text)) + text.encode()


def _cs(text: str | None) -> bytes:
    if text is None:
        return b"\x00"
    return encode_uvarint(len(text.encode()) + 1) + text.encode()


def _i32s(values: list[int]) -> bytes:
    return encode_uvarint(len(values) + 1) + b"".join(struct.pack(">i", v) for v in values)


RECORDS = [
    (11, ShareGroupMetadataKey("g"), ShareGroupMetadataValue(epoch=4, metadata_hash=-7)),
    (10, ShareGroupMemberMetadataKey("g", "m1"),
     ShareGroupMemberMetadataValue(rack_id=None, client_id="c", client_host="/127.0.0.1",
                                   subscribed_topic_names=("orders", "payments"))),
    (12, ShareGroupTargetAssignmentMetadataKey("g"), ShareGroupTargetAssignmentMetadataValue(4)),
    (13, ShareGroupTargetAssignmentMemberKey("g", "m1"),
     ShareGroupTargetAssignmentMemberValue((TopicPartitions(ORDERS, (0, 1, 2)),))),
    (14, ShareGroupCurrentMemberAssignmentKey("g", "m1"),
     ShareGroupCurrentMemberAssignmentValue(member_epoch=4, previous_member_epoch=3, state=0,
                                            assigned_partitions=(TopicPartitions(ORDERS, (0, 1, 2)),))),
    (15, ShareGroupStatePartitionMetadataKey("g"),
     ShareGroupStatePartitionMetadataValue(
         initializing_topics=(TopicPartitionsInfo(ORDERS, "orders", (2,)),),
         initialized_topics=(TopicPartitionsInfo(ORDERS, "orders", (0, 1)),),
         deleting_topics=(TopicInfo(uuid.UUID(int=5), "gone"),))),
]


@pytest.mark.parametrize(("record_type", "key", "value"), RECORDS, ids=[type(r[1]).__name__ for r in RECORDS])
def test_records_round_trip_and_tombstones(record_type, key, value):
    key_bytes, value_bytes = encode_key(key), encode_value(value)
    assert record_type_of(key_bytes) == record_type and record_type in SHARE_GROUP_RECORD_TYPES
    assert decode_share_record(key_bytes, value_bytes) == ShareGroupRecord(key, value)
    assert decode_share_record(key_bytes, None) == ShareGroupRecord(key, None)
    with pytest.raises(UnknownRecordTypeError):
        decode_key(key_bytes)  # the consumer-group decoder keeps to its own types


def test_key_and_value_bytes_are_kafkas():
    assert encode_key(ShareGroupMemberMetadataKey("g", "m1")) == struct.pack(">h", 10) + _s("g") + _s("m1")
    assert encode_value(ShareGroupMetadataValue(epoch=4, metadata_hash=9)) == (
        struct.pack(">hiq", 0, 4, 9) + b"\x00")
    assert encode_value(ShareGroupMemberMetadataValue(rack_id="r", client_id="c", client_host="h",
                                                      subscribed_topic_names=("orders",))) == (
        struct.pack(">h", 0) + _cs("r") + _cs("c") + _cs("h") + b"\x02" + _cs("orders") + b"\x00")
    assert encode_value(ShareGroupCurrentMemberAssignmentValue(
        member_epoch=4, previous_member_epoch=3, state=0,
        assigned_partitions=(TopicPartitions(ORDERS, (1,)),))) == (
        struct.pack(">hiib", 0, 4, 3, 0) + b"\x02" + ORDERS.bytes + _i32s([1]) + b"\x00" + b"\x00")
    assert encode_value(ShareGroupStatePartitionMetadataValue((), (TopicPartitionsInfo(ORDERS, "orders", (0,)),),
                                                              (TopicInfo(ORDERS, "orders"),))) == (
        struct.pack(">h", 0) + b"\x01" + b"\x02" + ORDERS.bytes + _cs("orders") + _i32s([0]) + b"\x00"
        + b"\x02" + ORDERS.bytes + _cs("orders") + b"\x00" + b"\x00")


def test_bad_bytes_fail_as_coordinator_records_do():
    key = encode_key(ShareGroupMetadataKey("g"))
    with pytest.raises(ConsumerGroupRecordError, match="unknown ShareGroupMetadataValue version 1"):
        decode_share_record(key, struct.pack(">hiq", 1, 4, 9) + b"\x00")
    with pytest.raises(ConsumerGroupRecordError, match="malformed"):
        decode_share_record(key, struct.pack(">hi", 0, 4))
    with pytest.raises(ConsumerGroupRecordError, match="malformed|bytes"):
        decode_share_record(key[:-1], None)
    with pytest.raises(UnknownRecordTypeError):
        decode_share_record(struct.pack(">h", 3) + _s("g"), None)
