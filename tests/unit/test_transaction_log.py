"""`__transaction_state` records in Kafka's bytes: the hand-built byte strings below are laid out field by field from
Kafka's TransactionLogKey and TransactionLogValue specs (big-endian integers; version 0 with int16-length strings
and int32-length arrays, -1 for null; version 1 with compact strings and arrays, whose lengths are unsigned varints
of length + 1, 0 for null, and tagged fields in tag order after every structure)."""
import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from minikafka.protocol.coordinator_records import (
    HIGHEST_VALUE_VERSION,
    LOWEST_VALUE_VERSION,
    PartitionsSchema,
    TransactionLogRecordError,
    TransactionLogValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)

ONGOING_VALUE = TransactionLogValue(
    producer_id=4000,
    previous_producer_id=3999,
    next_producer_id=4001,
    producer_epoch=7,
    transaction_timeout_ms=60_000,
    transaction_status=1,
    transaction_partitions=(PartitionsSchema("orders", (0, 3)),),
    transaction_last_update_timestamp_ms=1_700_000_000_500,
    transaction_start_timestamp_ms=1_700_000_000_000,
    client_transaction_version=2,
)

ONGOING_V0 = bytes.fromhex(
    "0000"                  # value version 0
    "0000000000000fa0"      # ProducerId 4000
    "0007"                  # ProducerEpoch 7
    "0000ea60"              # TransactionTimeoutMs 60000
    "01"                    # TransactionStatus 1 (Ongoing)
    "00000001"              # TransactionPartitions: 1 element
    "0006" "6f7264657273"   # Topic "orders"
    "00000002" "00000000" "00000003"  # PartitionIds [0, 3]
    "0000018bcfe569f4"      # TransactionLastUpdateTimestampMs 1700000000500
    "0000018bcfe56800"      # TransactionStartTimestampMs 1700000000000
)

ONGOING_V1 = bytes.fromhex(
    "0001"                  # value version 1
    "0000000000000fa0"      # ProducerId 4000
    "0007"                  # ProducerEpoch 7
    "0000ea60"              # TransactionTimeoutMs 60000
    "01"                    # TransactionStatus 1 (Ongoing)
    "02"                    # TransactionPartitions: compact, 1 element
    "07" "6f7264657273"     # Topic "orders", compact
    "03" "00000000" "00000003"  # PartitionIds [0, 3], compact
    "00"                    # the PartitionsSchema's tagged fields: none
    "0000018bcfe569f4"      # TransactionLastUpdateTimestampMs 1700000000500
    "0000018bcfe56800"      # TransactionStartTimestampMs 1700000000000
    "03"                    # three tagged fields
    "00" "08" "0000000000000f9f"  # tag 0 PreviousProducerId 3999, 8 bytes
    "01" "08" "0000000000000fa1"  # tag 1 NextProducerId 4001, 8 bytes
    "02" "02" "0002"        # tag 2 ClientTransactionVersion 2, 2 bytes
)

EMPTY_VALUE = TransactionLogValue(
    producer_id=4000,
    producer_epoch=0,
    transaction_timeout_ms=60_000,
    transaction_status=0,
    transaction_partitions=None,
    transaction_last_update_timestamp_ms=1_700_000_000_000,
    transaction_start_timestamp_ms=-1,
)

EMPTY_V1 = bytes.fromhex(
    "0001" "0000000000000fa0" "0000" "0000ea60"
    "00"                    # TransactionStatus 0 (Empty)
    "00"                    # TransactionPartitions: null
    "0000018bcfe56800" "ffffffffffffffff"
    "00"                    # no tagged fields: all at their defaults
)

EMPTY_V0 = bytes.fromhex(
    "0000" "0000000000000fa0" "0000" "0000ea60" "00"
    "ffffffff"              # TransactionPartitions: null
    "0000018bcfe56800" "ffffffffffffffff"
)


def test_key_is_version_0_then_the_transactional_id() -> None:
    assert encode_key("txn-1") == bytes.fromhex("0000" "0005" "74786e2d31")
    assert decode_key(bytes.fromhex("0000" "0005" "74786e2d31")) == "txn-1"


@given(st.text(max_size=100))
def test_key_round_trip(transactional_id: str) -> None:
    assert decode_key(memoryview(encode_key(transactional_id))) == transactional_id


def test_ongoing_value_version_0_bytes() -> None:
    without_tags = dataclasses.replace(ONGOING_VALUE, previous_producer_id=-1, next_producer_id=-1,
                                       client_transaction_version=0)
    assert encode_value(ONGOING_VALUE, 0) == ONGOING_V0  # version 0 has no room for the tagged fields
    assert decode_value(ONGOING_V0) == without_tags


def test_ongoing_value_version_1_bytes() -> None:
    assert encode_value(ONGOING_VALUE, 1) == ONGOING_V1
    assert decode_value(ONGOING_V1) == ONGOING_VALUE


def test_empty_value_has_null_partitions_and_no_tags_at_defaults() -> None:
    assert encode_value(EMPTY_VALUE, 1) == EMPTY_V1
    assert encode_value(EMPTY_VALUE, 0) == EMPTY_V0
    assert decode_value(EMPTY_V1) == EMPTY_VALUE
    assert decode_value(EMPTY_V0) == EMPTY_VALUE


def test_a_null_value_is_a_tombstone() -> None:
    assert decode_value(None) is None


def test_unknown_tagged_fields_are_skipped() -> None:
    # A later Kafka may add tags; a reader that does not know one passes over it, as Kafka's does.
    with_tag = EMPTY_V1[:-1] + bytes.fromhex("01" "05" "02" "abcd")
    assert decode_value(with_tag) == EMPTY_VALUE


_INT16 = st.integers(-(2**15), 2**15 - 1)
_INT32 = st.integers(-(2**31), 2**31 - 1)
_INT64 = st.integers(-(2**63), 2**63 - 1)
_VALUES = st.builds(
    TransactionLogValue,
    producer_id=_INT64,
    previous_producer_id=_INT64,
    next_producer_id=_INT64,
    producer_epoch=_INT16,
    transaction_timeout_ms=_INT32,
    transaction_status=st.integers(-128, 127),
    transaction_partitions=st.none() | st.lists(
        st.builds(PartitionsSchema, st.text(max_size=30), st.lists(_INT32, max_size=5).map(tuple)),
        max_size=4).map(tuple),
    transaction_last_update_timestamp_ms=_INT64,
    transaction_start_timestamp_ms=_INT64,
    client_transaction_version=_INT16,
)


@given(_VALUES)
def test_version_1_round_trip(value: TransactionLogValue) -> None:
    assert decode_value(encode_value(value, 1)) == value


@given(_VALUES)
def test_version_0_round_trip_drops_the_tagged_fields(value: TransactionLogValue) -> None:
    expected = dataclasses.replace(value, previous_producer_id=-1, next_producer_id=-1, client_transaction_version=0)
    assert decode_value(bytearray(encode_value(value, 0))) == expected


def test_only_known_value_versions_are_written() -> None:
    assert (LOWEST_VALUE_VERSION, HIGHEST_VALUE_VERSION) == (0, 1)
    with pytest.raises(ValueError, match="version 2"):
        encode_value(EMPTY_VALUE, 2)


@pytest.mark.parametrize("data, message", [
    pytest.param(b"", "no version", id="nothing"),
    pytest.param(b"\x00", "no version", id="half a version"),
    pytest.param(bytes.fromhex("0001" "0002" "7478"), "unknown transaction log key version 1", id="version 1"),
    pytest.param(bytes.fromhex("ffff" "0002" "7478"), "unknown transaction log key version -1", id="version -1"),
    pytest.param(bytes.fromhex("0000" "0005" "7478"), "malformed", id="id cut short"),
    pytest.param(bytes.fromhex("0000" "0002" "747878"), "1 unexpected bytes", id="trailing byte"),
    pytest.param(bytes.fromhex("0000" "ffff"), "non-nullable field TransactionalId", id="null id"),
    pytest.param(bytes.fromhex("0000" "0002" "fffe"), "malformed", id="not UTF-8"),
])
def test_bad_key_bytes(data: bytes, message: str) -> None:
    with pytest.raises(TransactionLogRecordError, match=message):
        decode_key(data)


def test_the_error_is_a_value_error() -> None:
    assert issubclass(TransactionLogRecordError, ValueError)


@pytest.mark.parametrize("data, message", [
    pytest.param(b"\x00", "no version", id="no version"),
    pytest.param(bytes.fromhex("0002") + ONGOING_V1[2:], "unknown transaction log value version 2", id="version 2"),
    pytest.param(bytes.fromhex("ffff") + ONGOING_V0[2:], "unknown transaction log value version -1", id="version -1"),
    pytest.param(ONGOING_V0 + b"\x00", "1 unexpected bytes", id="v0 trailing byte"),
    pytest.param(ONGOING_V1 + b"\x00\x00", "2 unexpected bytes", id="v1 trailing bytes"),
    pytest.param(ONGOING_V0.replace(bytes.fromhex("0006") + b"orders", bytes.fromhex("ffff")),
                 r"non-nullable field TransactionPartitions\[\]\.Topic", id="v0 null topic"),
    pytest.param(ONGOING_V1.replace(bytes.fromhex("07") + b"orders", bytes.fromhex("00")),
                 r"non-nullable field TransactionPartitions\[\]\.Topic", id="v1 null topic"),
    pytest.param(ONGOING_V1.replace(bytes.fromhex("03" "00000000" "00000003"), bytes.fromhex("00")),
                 r"non-nullable field TransactionPartitions\[\]\.PartitionIds", id="v1 null partition ids"),
])
def test_bad_value_bytes(data: bytes, message: str) -> None:
    with pytest.raises(TransactionLogRecordError, match=message):
        decode_value(data)


@pytest.mark.parametrize("data", [ONGOING_V0, ONGOING_V1, EMPTY_V0, EMPTY_V1])
def test_every_truncation_of_a_value_is_refused(data: bytes) -> None:
    for end in range(len(data)):
        with pytest.raises(TransactionLogRecordError):
            decode_value(data[:end])


@given(st.binary(max_size=80))
def test_any_bytes_decode_or_raise_the_record_error(data: bytes) -> None:
    for decode in (decode_key, decode_value):
        try:
            decode(data)
        except TransactionLogRecordError:
            pass
