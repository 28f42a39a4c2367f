"""`__share_group_state` records and the share-state APIs' messages in Kafka's bytes, built here by hand."""
import io
import struct
import uuid

import pytest

from minikafka.protocol.client_apis.share_state import ReadShareGroupStateResponse, WriteShareGroupStateRequest
from minikafka.protocol.codec import SCHEMAS
from minikafka.protocol.coordinator_records import share_coordinator_records as records
from minikafka.protocol.coordinator_records.share_coordinator_records import (
    ShareCoordinatorRecordError,
    ShareRecordKey,
    ShareRecordType,
    ShareSnapshotValue,
    ShareUpdateValue,
    StateBatch,
)

TOPIC_ID = uuid.UUID("0123456789abcdef0123456789abcdef")


def _key_bytes(record_type: int, group: str, partition: int) -> bytes:
    raw = group.encode()
    return struct.pack(">hh", record_type, len(raw)) + raw + TOPIC_ID.bytes + struct.pack(">i", partition)


@pytest.mark.parametrize("record_type", list(ShareRecordType))
def test_key_bytes_are_type_then_non_flexible_share_partition(record_type: ShareRecordType) -> None:
    key = ShareRecordKey(record_type, "grp", TOPIC_ID, 7)
    assert records.encode_key(key) == _key_bytes(record_type, "grp", 7)
    assert records.decode_key(_key_bytes(record_type, "grp", 7)) == key


def test_snapshot_value_bytes_are_flexible_version_zero() -> None:
    value = ShareSnapshotValue(snapshot_epoch=2, state_epoch=3, leader_epoch=4, start_offset=100,
                               create_timestamp=5, write_timestamp=6,
                               state_batches=(StateBatch(100, 109, 2, 1), StateBatch(110, 110, 0, 3)))
    expected = (struct.pack(">hiiiqqq", 0, 2, 3, 4, 100, 5, 6) + bytes([3])
                + struct.pack(">qqbh", 100, 109, 2, 1) + b"\x00"
                + struct.pack(">qqbh", 110, 110, 0, 3) + b"\x00" + b"\x00")
    assert records.encode_value(value) == expected
    assert records.decode_value(ShareRecordType.SHARE_SNAPSHOT, expected) == value


def test_update_value_round_trips_and_tombstone_is_none() -> None:
    value = ShareUpdateValue(snapshot_epoch=1, leader_epoch=9, start_offset=-1, state_batches=(StateBatch(5, 6, 4, 2),))
    data = records.encode_value(value)
    assert data == struct.pack(">hiiq", 0, 1, 9, -1) + bytes([2]) + struct.pack(">qqbh", 5, 6, 4, 2) + b"\x00\x00"
    assert records.decode_value(ShareRecordType.SHARE_UPDATE, data) == value
    assert records.decode_value(ShareRecordType.SHARE_UPDATE, None) is None


def test_unknown_type_version_and_trailing_bytes_are_refused() -> None:
    with pytest.raises(ShareCoordinatorRecordError, match="record type 2"):
        records.decode_key(_key_bytes(2, "g", 0))
    with pytest.raises(ShareCoordinatorRecordError, match="value version 1"):
        records.decode_value(ShareRecordType.SHARE_UPDATE, struct.pack(">hiiq", 1, 1, 9, -1) + b"\x01\x00")
    with pytest.raises(ShareCoordinatorRecordError, match="unexpected bytes"):
        records.decode_key(_key_bytes(0, "g", 0) + b"\x00")
    with pytest.raises(ShareCoordinatorRecordError, match="malformed"):
        records.decode_key(_key_bytes(0, "g", 0)[:-2])


def test_share_state_apis_are_in_the_codec_at_version_zero() -> None:
    assert {key: (SCHEMAS[key].min_version, SCHEMAS[key].max_version) for key in range(83, 88)} == {
        key: (0, 0) for key in range(83, 88)}


def test_write_request_and_read_response_wire_format() -> None:
    request = WriteShareGroupStateRequest(group_id="g", topics=[WriteShareGroupStateRequest.WriteStateData(
        topic_id=TOPIC_ID, partitions=[WriteShareGroupStateRequest.WriteStateData.PartitionData(
            partition=1, state_epoch=2, leader_epoch=3, start_offset=4,
            state_batches=[WriteShareGroupStateRequest.WriteStateData.PartitionData.StateBatch(
                first_offset=4, last_offset=5, delivery_state=2, delivery_count=1)])])])
    body = request.encode(version=0, header=False)
    assert body == (b"\x02g" + b"\x02" + TOPIC_ID.bytes + b"\x02" + struct.pack(">iiiq", 1, 2, 3, 4) + b"\x02"
                    + struct.pack(">qqbh", 4, 5, 2, 1) + b"\x00" + b"\x00" + b"\x00" + b"\x00")
    response_body = (b"\x02" + TOPIC_ID.bytes + b"\x02" + struct.pack(">ih", 1, 0) + b"\x00"
                     + struct.pack(">iq", 2, 4) + b"\x01" + b"\x00" + b"\x00" + b"\x00")
    response = ReadShareGroupStateResponse.decode(io.BytesIO(response_body), version=0, header=False)
    partition = response.results[0].partitions[0]
    assert (response.results[0].topic_id, partition.partition, partition.error_code, partition.error_message,
            partition.state_epoch, partition.start_offset, list(partition.state_batches)) == (
        TOPIC_ID, 1, 0, None, 2, 4, [])
