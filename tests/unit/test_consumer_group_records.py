"""KIP-848 consumer group records of `__consumer_offsets`, in Kafka's bytes: keys (record type, then a non-flexible
key message) and values (version 0, then a flexible value message), built here by hand from the specs' field layout;
tombstones; the record types Kafka 4.1 knows and those a loader skips; and a round trip of every record type."""
import struct
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minikafka.protocol.coordinator_records.consumer_group_records import (
    CLASSIC_GROUP_RECORD_TYPES,
    CONSUMER_GROUP_RECORD_TYPES,
    SHARE_GROUP_RECORD_TYPES,
    STREAMS_GROUP_RECORD_TYPES,
    ClassicMemberMetadata,
    ClassicProtocol,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupRecord,
    ConsumerGroupRecordError,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    CoordinatorRecordType,
    PartitionMetadata,
    TopicMetadata,
    TopicPartitions,
    UnknownRecordTypeError,
    decode_key,
    decode_record,
    decode_value,
    encode_key,
    encode_value,
    record_type_of,
)
from minikafka.protocol.varint import encode_uvarint

ORDERS_ID = uuid.UUID("6b1d3a4e-2f0c-4c59-9a57-0e3c1f2d8a10")
PAYMENTS_ID = uuid.UUID("0f9e8d7c-6b5a-4938-8271-605f4e3d2c1b")
EMPTY_TAGS = b"\x00"
VERSION_0 = b"\x00\x00"


def _s(text: str) -> bytes:
    """A classic string (keys are not flexible): int16 length, then UTF-8."""
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def _cs(text: str | None) -> bytes:
    """A compact string (values are flexible): length + 1 as a uvarint, 0 for null."""
    if text is None:
        return b"\x00"
    data = text.encode()
    return encode_uvarint(len(data) + 1) + data


def _compact_array(items: list[bytes]) -> bytes:
    return encode_uvarint(len(items) + 1) + b"".join(items)


def _i8(v: int) -> bytes:
    return struct.pack(">b", v)


def _i16(v: int) -> bytes:
    return struct.pack(">h", v)


def _i32(v: int) -> bytes:
    return struct.pack(">i", v)


def _i64(v: int) -> bytes:
    return struct.pack(">q", v)


def _topic_partitions(topic_id: uuid.UUID, partitions: list[int]) -> bytes:
    return topic_id.bytes + _compact_array([_i32(p) for p in partitions]) + EMPTY_TAGS


# ---- keys ----------------------------------------------------------------------------------------------------------

KEYS = [
    (ConsumerGroupMetadataKey("g"), _i16(3) + _s("g")),
    (ConsumerGroupPartitionMetadataKey("g"), _i16(4) + _s("g")),
    (ConsumerGroupMemberMetadataKey("g", "m-1"), _i16(5) + _s("g") + _s("m-1")),
    (ConsumerGroupTargetAssignmentMetadataKey("g"), _i16(6) + _s("g")),
    (ConsumerGroupTargetAssignmentMemberKey("g", "m-1"), _i16(7) + _s("g") + _s("m-1")),
    (ConsumerGroupCurrentMemberAssignmentKey("g", "m-1"), _i16(8) + _s("g") + _s("m-1")),
    (ConsumerGroupRegularExpressionKey("g", "orders-.*"), _i16(16) + _s("g") + _s("orders-.*")),
]


@pytest.mark.parametrize(("key", "data"), KEYS, ids=lambda v: type(v).__name__ if not isinstance(v, bytes) else "")
def test_key_bytes_are_the_record_type_then_the_key_fields(key, data):
    assert encode_key(key) == data
    assert decode_key(data) == key
    assert record_type_of(data) == struct.unpack_from(">h", data)[0]


# ---- values --------------------------------------------------------------------------------------------------------

def test_group_metadata_value_leaves_a_zero_metadata_hash_out():
    """MetadataHash is tagged field 0 (Kafka 4.1), written only when not its default, 0."""
    assert encode_value(ConsumerGroupMetadataValue(epoch=7)) == VERSION_0 + _i32(7) + EMPTY_TAGS
    hashed = VERSION_0 + _i32(7) + b"\x01" + b"\x00" + b"\x08" + _i64(-0x123456789)
    assert encode_value(ConsumerGroupMetadataValue(epoch=7, metadata_hash=-0x123456789)) == hashed
    assert decode_value(CoordinatorRecordType.CONSUMER_GROUP_METADATA, hashed) == ConsumerGroupMetadataValue(
        7, -0x123456789)


def test_partition_metadata_value_bytes():
    value = ConsumerGroupPartitionMetadataValue(topics=(
        TopicMetadata(ORDERS_ID, "orders", 2, (PartitionMetadata(0, ("r1", "r2")), PartitionMetadata(1, ()))),
        TopicMetadata(PAYMENTS_ID, "payments", 1),
    ))
    data = VERSION_0 + _compact_array([
        ORDERS_ID.bytes + _cs("orders") + _i32(2) + _compact_array([
            _i32(0) + _compact_array([_cs("r1"), _cs("r2")]) + EMPTY_TAGS,
            _i32(1) + _compact_array([]) + EMPTY_TAGS,
        ]) + EMPTY_TAGS,
        PAYMENTS_ID.bytes + _cs("payments") + _i32(1) + _compact_array([]) + EMPTY_TAGS,
    ]) + EMPTY_TAGS
    assert encode_value(value) == data
    assert decode_value(CoordinatorRecordType.CONSUMER_GROUP_PARTITION_METADATA, data) == value


def _member(**overrides) -> ConsumerGroupMemberMetadataValue:
    fields = dict(instance_id=None, rack_id="r1", client_id="consumer-1", client_host="/10.0.0.1",
                  subscribed_topic_names=("orders", "payments"), subscribed_topic_regex=None,
                  rebalance_timeout_ms=300000, server_assignor="uniform")
    return ConsumerGroupMemberMetadataValue(**{**fields, **overrides})


_MEMBER_FIELDS = (_cs(None) + _cs("r1") + _cs("consumer-1") + _cs("/10.0.0.1")
                  + _compact_array([_cs("orders"), _cs("payments")]) + _cs(None) + _i32(300000) + _cs("uniform"))


def test_member_metadata_value_bytes_of_a_consumer_protocol_member():
    data = VERSION_0 + _MEMBER_FIELDS + EMPTY_TAGS
    assert encode_value(_member()) == data
    assert decode_value(CoordinatorRecordType.CONSUMER_GROUP_MEMBER_METADATA, data) == _member()


def test_member_metadata_value_bytes_of_a_classic_member():
    """ClassicMemberMetadata is a nullable struct in tagged field 0: tag, size (the struct's + 1), then 1 (not
    null) and the struct, as Kafka's generated writer puts a tagged nullable struct."""
    classic = ClassicMemberMetadata(45000, (ClassicProtocol("range", b"\x00\x03"), ClassicProtocol("sticky", b"")))
    struct_bytes = _i32(45000) + _compact_array([
        _cs("range") + encode_uvarint(3) + b"\x00\x03" + EMPTY_TAGS,
        _cs("sticky") + encode_uvarint(1) + EMPTY_TAGS,
    ]) + EMPTY_TAGS
    tagged = b"\x01" + b"\x00" + encode_uvarint(len(struct_bytes) + 1) + b"\x01" + struct_bytes
    data = VERSION_0 + _MEMBER_FIELDS + tagged
    value = _member(classic_member_metadata=classic)
    assert encode_value(value) == data
    assert decode_value(CoordinatorRecordType.CONSUMER_GROUP_MEMBER_METADATA, data) == value


def test_target_assignment_values_bytes():
    metadata = ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=12)
    assert encode_value(metadata) == VERSION_0 + _i32(12) + EMPTY_TAGS
    member = ConsumerGroupTargetAssignmentMemberValue(topic_partitions=(
        TopicPartitions(ORDERS_ID, (0, 2)), TopicPartitions(PAYMENTS_ID, ())))
    data = VERSION_0 + _compact_array([_topic_partitions(ORDERS_ID, [0, 2]),
                                       _topic_partitions(PAYMENTS_ID, [])]) + EMPTY_TAGS
    assert encode_value(member) == data
    assert decode_value(CoordinatorRecordType.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, data) == member


def test_current_member_assignment_value_bytes():
    value = ConsumerGroupCurrentMemberAssignmentValue(
        member_epoch=12, previous_member_epoch=11, state=2,
        assigned_partitions=(TopicPartitions(ORDERS_ID, (0,)),),
        partitions_pending_revocation=(TopicPartitions(ORDERS_ID, (1, 2)),))
    data = (VERSION_0 + _i32(12) + _i32(11) + _i8(2) + _compact_array([_topic_partitions(ORDERS_ID, [0])])
            + _compact_array([_topic_partitions(ORDERS_ID, [1, 2])]) + EMPTY_TAGS)
    assert encode_value(value) == data
    assert decode_value(CoordinatorRecordType.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, data) == value


def test_regular_expression_value_bytes():
    value = ConsumerGroupRegularExpressionValue(topics=("orders-eu", "orders-us"), version=42,
                                                timestamp=1_700_000_000_000)
    data = (VERSION_0 + _compact_array([_cs("orders-eu"), _cs("orders-us")]) + _i64(42) + _i64(1_700_000_000_000)
            + EMPTY_TAGS)
    assert encode_value(value) == data
    assert decode_value(CoordinatorRecordType.CONSUMER_GROUP_REGULAR_EXPRESSION, data) == value


def test_the_zero_topic_id_reads_back_as_a_uuid():
    value = ConsumerGroupTargetAssignmentMemberValue((TopicPartitions(uuid.UUID(int=0), (0,)),))
    data = encode_value(value)
    assert data == VERSION_0 + _compact_array([_topic_partitions(uuid.UUID(int=0), [0])]) + EMPTY_TAGS
    assert decode_value(CoordinatorRecordType.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, data) == value


def test_unknown_tagged_fields_in_a_value_are_skipped():
    """A newer writer's tags this version does not know: Kafka's reader keeps them aside and reads on."""
    data = VERSION_0 + _i32(12) + b"\x01" + encode_uvarint(5) + encode_uvarint(2) + b"\xab\xcd"
    assert decode_value(CoordinatorRecordType.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, data) == \
        ConsumerGroupTargetAssignmentMetadataValue(12)


# ---- records, tombstones, types --------------------------------------------------------------------------------

def test_decode_record_pairs_key_and_value_and_reads_tombstones():
    key, value = ConsumerGroupMemberMetadataKey("g", "m-1"), _member()
    assert decode_record(encode_key(key), encode_value(value)) == ConsumerGroupRecord(key, value)
    assert decode_record(encode_key(key), None) == ConsumerGroupRecord(key, None)
    assert decode_value(CoordinatorRecordType.CONSUMER_GROUP_METADATA, None) is None


def test_the_record_types_are_kafka_4_1s():
    assert {t.value for t in CoordinatorRecordType} == set(range(24)) - {9, 18}
    assert CLASSIC_GROUP_RECORD_TYPES == {0, 1, 2}
    assert CONSUMER_GROUP_RECORD_TYPES == {3, 4, 5, 6, 7, 8, 16}
    assert SHARE_GROUP_RECORD_TYPES == {10, 11, 12, 13, 14, 15}
    assert STREAMS_GROUP_RECORD_TYPES == {17, 19, 20, 21, 22, 23}
    groups = [CLASSIC_GROUP_RECORD_TYPES, CONSUMER_GROUP_RECORD_TYPES, SHARE_GROUP_RECORD_TYPES,
              STREAMS_GROUP_RECORD_TYPES]
    assert sum(len(g) for g in groups) == len(CoordinatorRecordType) == len(frozenset().union(*groups))


@pytest.mark.parametrize("record_type", [0, 1, 2, 9, 10, 15, 17, 18, 23, 24, 0x7FFF, -1])
def test_other_record_types_are_unknown_here(record_type):
    data = _i16(record_type) + _s("g")
    with pytest.raises(UnknownRecordTypeError) as raised:
        decode_key(data)
    assert raised.value.record_type == record_type == record_type_of(data)
    with pytest.raises(UnknownRecordTypeError):
        decode_value(record_type, VERSION_0 + EMPTY_TAGS)


@pytest.mark.parametrize("data", [b"", b"\x00"])
def test_a_key_without_a_record_type_is_refused(data):
    with pytest.raises(ConsumerGroupRecordError, match="no record type"):
        record_type_of(data)
    with pytest.raises(ConsumerGroupRecordError):
        decode_key(data)


@pytest.mark.parametrize("version", [1, -1, 0x7FFF])
def test_a_value_version_past_the_specs_is_refused(version):
    with pytest.raises(ConsumerGroupRecordError, match=f"unknown ConsumerGroupMetadataValue version {version}"):
        decode_value(CoordinatorRecordType.CONSUMER_GROUP_METADATA, _i16(version) + _i32(7) + EMPTY_TAGS)


def test_malformed_keys_and_values_are_refused():
    member = encode_value(_member())
    with pytest.raises(ConsumerGroupRecordError, match="no version"):
        decode_value(CoordinatorRecordType.CONSUMER_GROUP_MEMBER_METADATA, b"\x00")
    for end in range(2, len(member)):
        with pytest.raises(ConsumerGroupRecordError):
            decode_value(CoordinatorRecordType.CONSUMER_GROUP_MEMBER_METADATA, member[:end])
    with pytest.raises(ConsumerGroupRecordError, match="not the"):
        decode_value(CoordinatorRecordType.CONSUMER_GROUP_MEMBER_METADATA, member + b"\x00")
    key = encode_key(ConsumerGroupMemberMetadataKey("g", "m-1"))
    for end in range(2, len(key)):
        with pytest.raises(ConsumerGroupRecordError):
            decode_key(key[:end])
    with pytest.raises(ConsumerGroupRecordError, match="not the"):
        decode_key(key + b"x")


def test_a_null_where_the_spec_allows_none_is_refused():
    null_client_id = VERSION_0 + _cs(None) + _cs(None) + _cs(None)  # InstanceId, RackId, then ClientId null
    with pytest.raises(ConsumerGroupRecordError, match="ClientId"):
        decode_value(CoordinatorRecordType.CONSUMER_GROUP_MEMBER_METADATA,
                     null_client_id + _cs("/h") + _compact_array([]) + _cs(None) + _i32(-1) + _cs(None) + EMPTY_TAGS)
    with pytest.raises(ConsumerGroupRecordError, match="GroupId"):
        decode_key(_i16(3) + _i16(-1))


# ---- round trip ----------------------------------------------------------------------------------------------------

_INT8, _INT32, _INT64 = (st.integers(-(1 << (b - 1)), (1 << (b - 1)) - 1) for b in (8, 32, 64))
_TEXT = st.text(max_size=10)
_IDS = st.uuids() | st.just(uuid.UUID(int=0))
_PARTITIONS = st.lists(_INT32, max_size=4).map(tuple)
_TOPIC_PARTITIONS = st.lists(st.builds(TopicPartitions, _IDS, _PARTITIONS), max_size=3).map(tuple)
_NAMES = st.lists(_TEXT, max_size=3).map(tuple)
_OPTIONAL = st.none() | _TEXT

KEY_STRATEGIES = st.one_of(
    st.builds(ConsumerGroupMetadataKey, _TEXT),
    st.builds(ConsumerGroupPartitionMetadataKey, _TEXT),
    st.builds(ConsumerGroupMemberMetadataKey, _TEXT, _TEXT),
    st.builds(ConsumerGroupTargetAssignmentMetadataKey, _TEXT),
    st.builds(ConsumerGroupTargetAssignmentMemberKey, _TEXT, _TEXT),
    st.builds(ConsumerGroupCurrentMemberAssignmentKey, _TEXT, _TEXT),
    st.builds(ConsumerGroupRegularExpressionKey, _TEXT, _TEXT),
)
VALUE_STRATEGIES = st.one_of(
    st.builds(ConsumerGroupMetadataValue, _INT32, _INT64),
    st.builds(ConsumerGroupPartitionMetadataValue, st.lists(st.builds(
        TopicMetadata, _IDS, _TEXT, _INT32,
        st.lists(st.builds(PartitionMetadata, _INT32, _NAMES), max_size=2).map(tuple)), max_size=2).map(tuple)),
    st.builds(ConsumerGroupMemberMetadataValue, instance_id=_OPTIONAL, rack_id=_OPTIONAL, client_id=_TEXT,
              client_host=_TEXT, subscribed_topic_names=_NAMES, subscribed_topic_regex=_OPTIONAL,
              rebalance_timeout_ms=_INT32, server_assignor=_OPTIONAL,
              classic_member_metadata=st.none() | st.builds(
                  ClassicMemberMetadata, _INT32,
                  st.lists(st.builds(ClassicProtocol, _TEXT, st.binary(max_size=8)), max_size=2).map(tuple))),
    st.builds(ConsumerGroupTargetAssignmentMetadataValue, _INT32),
    st.builds(ConsumerGroupTargetAssignmentMemberValue, _TOPIC_PARTITIONS),
    st.builds(ConsumerGroupCurrentMemberAssignmentValue, member_epoch=_INT32, previous_member_epoch=_INT32,
              state=_INT8, assigned_partitions=_TOPIC_PARTITIONS, partitions_pending_revocation=_TOPIC_PARTITIONS),
    st.builds(ConsumerGroupRegularExpressionValue, _NAMES, _INT64, _INT64),
)


@settings(max_examples=200, deadline=None, database=None, derandomize=True)
@given(KEY_STRATEGIES)
def test_keys_round_trip(key):
    data = encode_key(key)
    assert decode_key(data) == key
    assert encode_key(decode_key(data)) == data


@settings(max_examples=300, deadline=None, database=None, derandomize=True)
@given(VALUE_STRATEGIES)
def test_values_round_trip(value):
    data = encode_value(value)
    record_type = next(t for t in CONSUMER_GROUP_RECORD_TYPES
                       if type(value).__name__ == "".join(p.capitalize() for p in t.name.split("_")) + "Value")
    decoded = decode_value(record_type, data)
    assert decoded == value
    assert encode_value(decoded) == data
