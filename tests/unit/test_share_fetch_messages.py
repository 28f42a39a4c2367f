"""ShareFetch and ShareAcknowledge v1 encode to Kafka's bytes, field by field (KIP-932's wire format, flexible), and
decode back; v1 is the one version served, without v0's PartitionMaxBytes."""
from __future__ import annotations

import struct
import uuid

from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.client_apis.share_fetch import (
    ShareAcknowledgeRequest,
    ShareAcknowledgeResponse,
    ShareFetchRequest,
    ShareFetchResponse,
)
from minikafka.protocol.codec import SCHEMAS

TOPIC_ID = uuid.UUID("6f1c3a52-0d5e-4a8e-9b1f-2c7d4e5f6a7b")


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def text(s: str | None) -> bytes:  # compact nullable string
    return b"\x00" if s is None else bytes([len(s) + 1]) + s.encode()


def count(n: int) -> bytes:  # compact array length (small)
    return bytes([n + 1])


NO_TAGS = b"\x00"
ACK = count(1) + i64(3) + i64(5) + count(3) + bytes([1, 2, 3]) + NO_TAGS


def test_served_versions() -> None:
    assert (SCHEMAS[ApiKey.SHARE_FETCH].min_version, SCHEMAS[ApiKey.SHARE_FETCH].max_version) == (1, 1)
    assert (SCHEMAS[ApiKey.SHARE_ACKNOWLEDGE].min_version, SCHEMAS[ApiKey.SHARE_ACKNOWLEDGE].max_version) == (1, 1)


def test_share_fetch_request_bytes() -> None:
    R = ShareFetchRequest
    P = R.FetchTopic.FetchPartition
    request = R(version=1, group_id="g", member_id="m1", share_session_epoch=2, max_wait_ms=500, min_bytes=1,
                max_bytes=1024, max_records=500, batch_size=100, topics=[R.FetchTopic(topic_id=TOPIC_ID, partitions=[
                    P(partition_index=4, acknowledgement_batches=[P.AcknowledgementBatch(
                        first_offset=3, last_offset=5, acknowledge_types=[1, 2, 3])])])],
                forgotten_topics_data=[R.ForgottenTopic(topic_id=TOPIC_ID, partitions=[7])])
    expected = (text("g") + text("m1") + i32(2) + i32(500) + i32(1) + i32(1024) + i32(500) + i32(100)
                + count(1) + TOPIC_ID.bytes + count(1) + i32(4) + ACK + NO_TAGS + NO_TAGS
                + count(1) + TOPIC_ID.bytes + count(1) + i32(7) + NO_TAGS + NO_TAGS)
    assert bytes(request.encode(version=1)) == expected
    decoded = R.decode(expected, version=1)
    assert decoded.topics[0].partitions[0].acknowledgement_batches[0].acknowledge_types == [1, 2, 3]
    assert (decoded.max_records, decoded.batch_size) == (500, 100)


def test_share_fetch_response_bytes() -> None:
    R = ShareFetchResponse
    P = R.ShareFetchableTopicResponse.PartitionData
    response = R(version=1, throttle_time_ms=0, error_code=0, error_message=None, acquisition_lock_timeout_ms=30000,
                 responses=[R.ShareFetchableTopicResponse(topic_id=TOPIC_ID, partitions=[P(
                     partition_index=0, error_code=0, error_message=None, acknowledge_error_code=121,
                     acknowledge_error_message="bad", current_leader=P.LeaderIdAndEpoch(leader_id=1, leader_epoch=3),
                     records=b"",
                     acquired_records=[P.AcquiredRecords(first_offset=0, last_offset=9, delivery_count=2)])])],
                 node_endpoints=[R.NodeEndpoint(node_id=1, host="h", port=9092, rack=None)])
    expected = (i32(0) + i16(0) + text(None) + i32(30000) + count(1) + TOPIC_ID.bytes + count(1) + i32(0) + i16(0)
                + text(None) + i16(121) + text("bad") + i32(1) + i32(3) + NO_TAGS + b"\x01"
                + count(1) + i64(0) + i64(9) + i16(2) + NO_TAGS + NO_TAGS + NO_TAGS
                + count(1) + i32(1) + text("h") + i32(9092) + text(None) + NO_TAGS + NO_TAGS)
    assert bytes(response.encode(version=1)) == expected
    assert R.decode(expected, version=1).responses[0].partitions[0].acquired_records[0].delivery_count == 2


def test_share_acknowledge_bytes() -> None:
    R = ShareAcknowledgeRequest
    P = R.AcknowledgeTopic.AcknowledgePartition
    request = R(version=1, group_id="g", member_id="m1", share_session_epoch=3, topics=[R.AcknowledgeTopic(
        topic_id=TOPIC_ID, partitions=[P(partition_index=4, acknowledgement_batches=[P.AcknowledgementBatch(
            first_offset=3, last_offset=5, acknowledge_types=[1, 2, 3])])])])
    expected = (text("g") + text("m1") + i32(3) + count(1) + TOPIC_ID.bytes + count(1) + i32(4) + ACK + NO_TAGS
                + NO_TAGS + NO_TAGS)
    assert bytes(request.encode(version=1)) == expected
    A = ShareAcknowledgeResponse
    Q = A.ShareAcknowledgeTopicResponse.PartitionData
    response = A(version=1, throttle_time_ms=0, error_code=0, error_message=None, responses=[
        A.ShareAcknowledgeTopicResponse(topic_id=TOPIC_ID, partitions=[Q(
            partition_index=4, error_code=6, error_message=None,
            current_leader=Q.LeaderIdAndEpoch(leader_id=2, leader_epoch=5))])], node_endpoints=[])
    expected = (i32(0) + i16(0) + text(None) + count(1) + TOPIC_ID.bytes + count(1) + i32(4) + i16(6) + text(None)
                + i32(2) + i32(5) + NO_TAGS + NO_TAGS + NO_TAGS + count(0) + NO_TAGS)
    assert bytes(response.encode(version=1)) == expected
