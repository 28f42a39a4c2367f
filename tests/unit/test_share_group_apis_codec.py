"""ShareGroupHeartbeat (76) and ShareGroupDescribe (77), KIP-932's membership APIs, which kafka-python lacks: the
codec's table has them at the one version Kafka 4.1 serves (1; 4.0's early-access 0 is gone), their bytes are
Kafka's, and every request decodes the way the broker decodes any request (nulls only where the spec allows them,
nothing cut short) while every response a client reads back is the one encoded."""
import struct
import uuid

import pytest
from hypothesis import HealthCheck, given, settings

from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.client_apis import (
    ShareGroupDescribeRequest,
    ShareGroupDescribeResponse,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
)
from minikafka.protocol.codec import (
    SCHEMAS,
    InvalidRequestError,
    RequestHeader,
    decode_request,
    decode_response,
    encode_response,
)
from minikafka.protocol.varint import encode_uvarint
from tests.unit.request_strategies import RequestValues, refusals, request_frame

ORDERS_ID = uuid.UUID("0d6f3c9a-1b2e-4f70-8a41-5c7e9b2d3f60")
KEYS = (ApiKey.SHARE_GROUP_HEARTBEAT, ApiKey.SHARE_GROUP_DESCRIBE)
PARAMS = [pytest.param(key, id=key.api_name) for key in KEYS]

_PROPERTY = settings(max_examples=25, deadline=None, database=None, derandomize=True,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
_WELL_FORMED = RequestValues(names=["orders", "payments"], topic_ids=[ORDERS_ID], nulls_anywhere=False)
_HOSTILE = RequestValues(names=["orders"], topic_ids=[ORDERS_ID])


def _cs(text: str | None) -> bytes:
    """A compact string: its length + 1 as a uvarint (0 for null), then its UTF-8 bytes."""
    if text is None:
        return b"\x00"
    data = text.encode()
    return encode_uvarint(len(data) + 1) + data


def _i16(v: int) -> bytes:
    return struct.pack(">h", v)


def _i32(v: int) -> bytes:
    return struct.pack(">i", v)


def _compact_int32s(values: list[int]) -> bytes:
    return encode_uvarint(len(values) + 1) + b"".join(_i32(v) for v in values)


def _decode(frame: bytes):
    header, pos = RequestHeader.parse(frame)
    return decode_request(SCHEMAS[header.api_key], header, frame, pos)


def test_the_codec_table_has_both_apis_at_version_1_only():
    for key, request, response in ((ApiKey.SHARE_GROUP_HEARTBEAT, ShareGroupHeartbeatRequest,
                                    ShareGroupHeartbeatResponse),
                                   (ApiKey.SHARE_GROUP_DESCRIBE, ShareGroupDescribeRequest,
                                    ShareGroupDescribeResponse)):
        schema = SCHEMAS[key]
        assert (schema.request, schema.response) == (request, response)
        assert request.API_KEY == response.API_KEY == key
        assert (schema.min_version, schema.max_version) == (1, 1)
        assert schema.flexible(1) and schema.response_header_version(1) == 1


def test_heartbeat_request_bytes_are_kafkas():
    request = ShareGroupHeartbeatRequest[1](group_id="g", member_id="m", member_epoch=0, rack_id="r1",
                                            subscribed_topic_names=["orders"])
    expected = _cs("g") + _cs("m") + _i32(0) + _cs("r1") + b"\x02" + _cs("orders") + b"\x00"
    assert bytes(request.encode(version=1)) == expected
    assert _decode(request_frame(request)) == request


def test_heartbeat_request_defaults_are_nulls():
    """A member whose rack and subscription are unchanged sends nulls: the spec's defaults."""
    decoded = _decode(request_frame(ShareGroupHeartbeatRequest[1](group_id="g", member_id="m", member_epoch=-1)))
    assert (decoded.rack_id, decoded.subscribed_topic_names, decoded.member_epoch) == (None, None, -1)
    assert bytes(ShareGroupHeartbeatRequest[1](group_id="g", member_id="m", member_epoch=3).encode(version=1)) == (
        _cs("g") + _cs("m") + _i32(3) + b"\x00" + b"\x00" + b"\x00")


def test_heartbeat_response_bytes_with_and_without_an_assignment():
    R = ShareGroupHeartbeatResponse
    head = _i32(0) + _i16(0) + _cs(None) + _cs("m") + _i32(2) + _i32(5000)
    assigned = R(throttle_time_ms=0, error_code=0, error_message=None, member_id="m", member_epoch=2,
                 heartbeat_interval_ms=5000, assignment=R.Assignment(topic_partitions=[
                     R.Assignment.TopicPartitions(topic_id=ORDERS_ID, partitions=[0, 1, 2])]))
    assert bytes(assigned.encode(version=1)) == (
        head + b"\x01" + b"\x02" + ORDERS_ID.bytes + _compact_int32s([0, 1, 2]) + b"\x00" + b"\x00" + b"\x00")
    unchanged = R(throttle_time_ms=0, error_code=0, error_message=None, member_id="m", member_epoch=2,
                  heartbeat_interval_ms=5000, assignment=None)
    schema = SCHEMAS[ApiKey.SHARE_GROUP_HEARTBEAT]
    framed = encode_response(schema, 1, 11, unchanged)
    assert framed[8:] == b"\x00" + head + b"\xff" + b"\x00"  # response header v1: empty tagged fields
    assert decode_response(schema, 1, framed[4:]).assignment is None


def test_describe_bytes_are_kafkas():
    request = ShareGroupDescribeRequest[1](group_ids=["g1"], include_authorized_operations=True)
    assert bytes(request.encode(version=1)) == b"\x02" + _cs("g1") + b"\x01" + b"\x00"
    R = ShareGroupDescribeResponse[1]
    G = R.DescribedGroup
    assignment = G.Member.Assignment(topic_partitions=[
        G.Member.Assignment.TopicPartitions(topic_id=ORDERS_ID, topic_name="orders", partitions=[3])])
    member = G.Member(member_id="m", rack_id=None, member_epoch=4, client_id="c", client_host="/h",
                      subscribed_topic_names=["orders"], assignment=assignment)
    response = R(throttle_time_ms=0, groups=[G(error_code=0, error_message=None, group_id="g", group_state="Stable",
                                               group_epoch=4, assignment_epoch=4, assignor_name="simple",
                                               members=[member], authorized_operations=-2147483648)])
    member_bytes = (_cs("m") + _cs(None) + _i32(4) + _cs("c") + _cs("/h") + b"\x02" + _cs("orders")
                    + b"\x02" + ORDERS_ID.bytes + _cs("orders") + _compact_int32s([3]) + b"\x00" + b"\x00"
                    + b"\x00")
    group = (_i16(0) + _cs(None) + _cs("g") + _cs("Stable") + _i32(4) + _i32(4) + _cs("simple")
             + b"\x02" + member_bytes + _i32(-2147483648) + b"\x00")
    assert bytes(response.encode(version=1)) == _i32(0) + b"\x02" + group + b"\x00"


def test_nulls_where_the_spec_allows_none_are_refused():
    with pytest.raises(InvalidRequestError, match="non-nullable field GroupId"):
        _decode(request_frame(ShareGroupHeartbeatRequest[1](group_id=None, member_id="m", member_epoch=0)))
    with pytest.raises(InvalidRequestError, match="non-nullable field GroupIds"):
        _decode(request_frame(ShareGroupDescribeRequest[1](group_ids=None, include_authorized_operations=False)))


@pytest.mark.parametrize("key", PARAMS)
def test_requests_decode_to_what_was_sent(key):
    @_PROPERTY
    @given(_WELL_FORMED.request(key, 1))
    def check(request):
        frame = request_frame(request)
        header, _ = RequestHeader.parse(frame)
        assert (header.api_key, header.api_version) == (key, 1)
        assert _decode(frame) == request

    check()


@pytest.mark.parametrize("key", PARAMS)
def test_a_request_decodes_exactly_when_kafka_would_read_it(key):
    schema = SCHEMAS[key]

    @_PROPERTY
    @given(_HOSTILE.request(key, 1))
    def check(request):
        frame = request_frame(request)
        if refusals(schema.request._struct, request, 1, schema.flexible(1)):
            with pytest.raises(InvalidRequestError, match="non-nullable field|invalid length"):
                _decode(frame)
        else:
            assert _decode(frame) == request

    check()


@pytest.mark.parametrize("key", PARAMS)
def test_a_request_cut_short_anywhere_is_refused(key):
    @settings(_PROPERTY, max_examples=5)
    @given(_WELL_FORMED.request(key, 1))
    def check(request):
        frame = request_frame(request)
        _, body = RequestHeader.parse(frame)
        for end in range(body, len(frame)):
            with pytest.raises(InvalidRequestError):
                _decode(frame[:end])

    check()


@pytest.mark.parametrize("key", PARAMS)
def test_responses_encode_and_decode_back(key):
    schema = SCHEMAS[key]
    response_class = schema.response
    responses = _HOSTILE.fields(response_class._struct, 1).map(lambda v: response_class[1](**v))

    @_PROPERTY
    @given(responses)
    def check(response):
        if refusals(response_class._struct, response, 1, True):
            return  # a null where the spec allows none: no handler builds one
        framed = encode_response(schema, 1, 42, response)
        (size, correlation_id) = struct.unpack_from(">ii", framed)
        assert size == len(framed) - 4 and correlation_id == 42
        assert decode_response(schema, 1, framed[4:]) == response

    check()
