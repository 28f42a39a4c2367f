"""DescribeShareGroupOffsets (90), AlterShareGroupOffsets (91) and DeleteShareGroupOffsets (92), KIP-932's share
group offsets APIs, which kafka-python lacks: the codec's table has them at the one version Kafka 4.1 serves (0,
flexible), and their bytes are Kafka's."""
import struct
import uuid

import pytest

from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.client_apis.messages import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsResponse,
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse,
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsResponse,
)
from minikafka.protocol.codec import SCHEMAS, RequestHeader, decode_request
from minikafka.protocol.varint import encode_uvarint
from tests.unit.request_strategies import request_frame

ORDERS_ID = uuid.UUID("0d6f3c9a-1b2e-4f70-8a41-5c7e9b2d3f60")
APIS = ((ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, DescribeShareGroupOffsetsRequest, DescribeShareGroupOffsetsResponse),
        (ApiKey.ALTER_SHARE_GROUP_OFFSETS, AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse),
        (ApiKey.DELETE_SHARE_GROUP_OFFSETS, DeleteShareGroupOffsetsRequest, DeleteShareGroupOffsetsResponse))
NO_TAGS = b"\x00"


def _cs(text: str | None) -> bytes:
    if text is None:
        return b"\x00"
    data = text.encode()
    return encode_uvarint(len(data) + 1) + data


def _n(count: int) -> bytes:
    """A compact array's length."""
    return encode_uvarint(count + 1)


def _decode(frame: bytes):
    header, pos = RequestHeader.parse(frame)
    return decode_request(SCHEMAS[header.api_key], header, frame, pos)


@pytest.mark.parametrize(("key", "request_class", "response_class"), APIS, ids=[a[0].api_name for a in APIS])
def test_the_codec_table_has_them_at_version_0_only(key, request_class, response_class):
    schema = SCHEMAS[key]
    assert (schema.request, schema.response) == (request_class, response_class)
    assert (schema.min_version, schema.max_version) == (0, 0)
    assert schema.flexible(0) and schema.response_header_version(0) == 1


def test_describe_request_bytes_with_topics_and_with_null_for_all():
    R = DescribeShareGroupOffsetsRequest
    G = R.DescribeShareGroupOffsetsRequestGroup
    request = R[0](groups=[G(group_id="g", topics=[G.DescribeShareGroupOffsetsRequestTopic(
        topic_name="orders", partitions=[0, 2])]), G(group_id="h", topics=None)])
    expected = (_n(2) + _cs("g") + _n(1) + _cs("orders") + _n(2) + struct.pack(">ii", 0, 2) + NO_TAGS + NO_TAGS
                + _cs("h") + b"\x00" + NO_TAGS + NO_TAGS)
    assert bytes(request.encode(version=0)) == expected
    decoded = _decode(request_frame(request))
    assert [(g.group_id, g.topics is None) for g in decoded.groups] == [("g", False), ("h", True)]


def test_describe_response_bytes():
    R = DescribeShareGroupOffsetsResponse
    G = R.DescribeShareGroupOffsetsResponseGroup
    T = G.DescribeShareGroupOffsetsResponseTopic
    response = R(throttle_time_ms=0, groups=[G(group_id="g", error_code=0, error_message=None, topics=[T(
        topic_name="orders", topic_id=ORDERS_ID, partitions=[T.DescribeShareGroupOffsetsResponsePartition(
            partition_index=1, start_offset=42, leader_epoch=3, error_code=0, error_message=None)])])])
    partition = struct.pack(">iqih", 1, 42, 3, 0) + _cs(None) + NO_TAGS
    topic = _cs("orders") + ORDERS_ID.bytes + _n(1) + partition + NO_TAGS
    group = _cs("g") + _n(1) + topic + struct.pack(">h", 0) + _cs(None) + NO_TAGS
    assert bytes(response.encode(version=0)) == struct.pack(">i", 0) + _n(1) + group + NO_TAGS


def test_alter_request_and_response_bytes():
    R = AlterShareGroupOffsetsRequest
    T = R.AlterShareGroupOffsetsRequestTopic
    request = R[0](group_id="g", topics=[T(topic_name="orders", partitions=[
        T.AlterShareGroupOffsetsRequestPartition(partition_index=0, start_offset=7)])])
    assert bytes(request.encode(version=0)) == (
        _cs("g") + _n(1) + _cs("orders") + _n(1) + struct.pack(">iq", 0, 7) + NO_TAGS + NO_TAGS + NO_TAGS)
    S = AlterShareGroupOffsetsResponse
    U = S.AlterShareGroupOffsetsResponseTopic
    response = S(throttle_time_ms=0, error_code=0, error_message=None, responses=[U(
        topic_name="orders", topic_id=ORDERS_ID, partitions=[U.AlterShareGroupOffsetsResponsePartition(
            partition_index=0, error_code=3, error_message="unknown")])])
    assert bytes(response.encode(version=0)) == (
        struct.pack(">ih", 0, 0) + _cs(None) + _n(1) + _cs("orders") + ORDERS_ID.bytes + _n(1)
        + struct.pack(">ih", 0, 3) + _cs("unknown") + NO_TAGS + NO_TAGS + NO_TAGS)


def test_delete_request_and_response_bytes():
    R = DeleteShareGroupOffsetsRequest
    request = R[0](group_id="g", topics=[R.DeleteShareGroupOffsetsRequestTopic(topic_name="orders")])
    assert bytes(request.encode(version=0)) == _cs("g") + _n(1) + _cs("orders") + NO_TAGS + NO_TAGS
    S = DeleteShareGroupOffsetsResponse
    response = S(throttle_time_ms=0, error_code=68, error_message="The group is not empty.", responses=[
        S.DeleteShareGroupOffsetsResponseTopic(topic_name="orders", topic_id=ORDERS_ID, error_code=0,
                                               error_message=None)])
    assert bytes(response.encode(version=0)) == (
        struct.pack(">ih", 0, 68) + _cs("The group is not empty.") + _n(1) + _cs("orders") + ORDERS_ID.bytes
        + struct.pack(">h", 0) + _cs(None) + NO_TAGS + NO_TAGS)
