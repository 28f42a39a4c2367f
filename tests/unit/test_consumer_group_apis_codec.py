"""ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69), KIP-848's client APIs, which kafka-python lacks: the
codec's table has them in the versions Kafka 4.1 serves, their bytes are Kafka's, and every version decodes the way
the broker decodes any request (nulls only where the spec allows them, nothing cut short, tagged fields skipped) and
encodes its responses so that a client reads them back."""
import struct
import uuid

import pytest
from hypothesis import HealthCheck, given, settings

from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.client_apis import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
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

ORDERS_ID = uuid.UUID("6b1d3a4e-2f0c-4c59-9a57-0e3c1f2d8a10")
KEYS = (ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.CONSUMER_GROUP_DESCRIBE)
# Kafka 4.1's specs: versions 0-1 of both, both stable, every version flexible.
VERSIONS = [pytest.param(key, version, id=f"{key.api_name}-v{version}") for key in KEYS for version in (0, 1)]

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


def _i8(v: int) -> bytes:
    return struct.pack(">b", v)


def _i16(v: int) -> bytes:
    return struct.pack(">h", v)


def _i32(v: int) -> bytes:
    return struct.pack(">i", v)


def _compact_int32s(values: list[int]) -> bytes:
    return encode_uvarint(len(values) + 1) + b"".join(_i32(v) for v in values)


def _decode(frame: bytes):
    header, pos = RequestHeader.parse(frame)
    return decode_request(SCHEMAS[header.api_key], header, frame, pos)


def _heartbeat(version: int = 1, **overrides) -> ConsumerGroupHeartbeatRequest:
    fields = dict(group_id="g", member_id="m", member_epoch=0, instance_id=None, rack_id="r1",
                  rebalance_timeout_ms=300000, subscribed_topic_names=["t"], subscribed_topic_regex=None,
                  server_assignor="uniform", topic_partitions=[])
    return ConsumerGroupHeartbeatRequest[version](**{**fields, **overrides})


def test_the_codec_table_has_both_apis_in_kafkas_versions():
    for key, request, response in ((ApiKey.CONSUMER_GROUP_HEARTBEAT, ConsumerGroupHeartbeatRequest,
                                    ConsumerGroupHeartbeatResponse),
                                   (ApiKey.CONSUMER_GROUP_DESCRIBE, ConsumerGroupDescribeRequest,
                                    ConsumerGroupDescribeResponse)):
        schema = SCHEMAS[key]
        assert (schema.request, schema.response) == (request, response)
        assert request.API_KEY == response.API_KEY == key
        assert request.is_request() and not response.is_request()
        assert (schema.min_version, schema.max_version) == (0, 1)
        assert request.valid_versions == response.valid_versions == (0, 1)
        assert all(schema.flexible(v) and schema.response_header_version(v) == 1 for v in (0, 1))


@pytest.mark.parametrize("version", [0, 1])
def test_heartbeat_request_bytes_are_kafkas(version):
    """Field by field from the spec: compact strings and arrays, a nullable string as 0, empty tagged fields; the
    regular expression is in version 1 only."""
    request = _heartbeat(version, subscribed_topic_regex="orders-.*")
    expected = (_cs("g") + _cs("m") + _i32(0) + _cs(None) + _cs("r1") + _i32(300000)
                + b"\x02" + _cs("t") + (_cs("orders-.*") if version >= 1 else b"")
                + _cs("uniform") + b"\x01" + b"\x00")
    assert bytes(request.encode(version=version)) == expected
    decoded = _decode(request_frame(request))
    assert decoded.subscribed_topic_regex == ("orders-.*" if version >= 1 else None)


def test_heartbeat_request_defaults_are_the_specs():
    """What a leaving or unchanged member leaves out reads as the spec's defaults: nulls, and -1 for the timeout."""
    request = ConsumerGroupHeartbeatRequest[1](group_id="g", member_id="m", member_epoch=-1)
    decoded = _decode(request_frame(request))
    assert (decoded.instance_id, decoded.rack_id, decoded.subscribed_topic_names, decoded.subscribed_topic_regex,
            decoded.server_assignor, decoded.topic_partitions) == (None,) * 6
    assert decoded.rebalance_timeout_ms == -1 and decoded.member_epoch == -1


def test_heartbeat_request_owned_partitions_bytes():
    request = _heartbeat(topic_partitions=[ConsumerGroupHeartbeatRequest.TopicPartitions(
        topic_id=ORDERS_ID, partitions=[0, 2])])
    body = bytes(request.encode(version=1))
    owned = b"\x02" + ORDERS_ID.bytes + _compact_int32s([0, 2]) + b"\x00"
    assert body.endswith(_cs("uniform") + owned + b"\x00")
    assert _decode(request_frame(request)).topic_partitions[0].partitions == [0, 2]


@pytest.mark.parametrize("version", [0, 1])
def test_heartbeat_response_bytes_with_and_without_an_assignment(version):
    R = ConsumerGroupHeartbeatResponse
    assigned = R(throttle_time_ms=0, error_code=0, error_message=None, member_id="m", member_epoch=5,
                 heartbeat_interval_ms=5000, assignment=R.Assignment(topic_partitions=[
                     R.Assignment.TopicPartitions(topic_id=ORDERS_ID, partitions=[0, 1])]))
    head = _i32(0) + _i16(0) + _cs(None) + _cs("m") + _i32(5) + _i32(5000)
    # A nullable struct: -1 for null, 1 then its fields otherwise.
    assert bytes(assigned.encode(version=version)) == (
        head + b"\x01" + b"\x02" + ORDERS_ID.bytes + _compact_int32s([0, 1]) + b"\x00" + b"\x00" + b"\x00")
    unchanged = R(throttle_time_ms=0, error_code=0, error_message=None, member_id="m", member_epoch=5,
                  heartbeat_interval_ms=5000, assignment=None)
    assert bytes(unchanged.encode(version=version)) == head + b"\xff" + b"\x00"
    framed = encode_response(SCHEMAS[ApiKey.CONSUMER_GROUP_HEARTBEAT], version, 11, unchanged)
    assert framed[8:] == b"\x00" + head + b"\xff" + b"\x00"  # response header v1: empty tagged fields
    assert decode_response(SCHEMAS[ApiKey.CONSUMER_GROUP_HEARTBEAT], version, framed[4:]).assignment is None


def test_describe_request_bytes_are_kafkas():
    request = ConsumerGroupDescribeRequest(group_ids=["g1", "g2"], include_authorized_operations=True)
    expected = b"\x03" + _cs("g1") + _cs("g2") + b"\x01" + b"\x00"
    assert bytes(request.encode(version=0)) == bytes(request.encode(version=1)) == expected


def _described(version: int):
    R = ConsumerGroupDescribeResponse[version]
    G = R.DescribedGroup
    assignment = G.Member.Assignment(topic_partitions=[
        G.Member.Assignment.TopicPartitions(topic_id=ORDERS_ID, topic_name="orders", partitions=[3])])
    member = G.Member(member_id="m", instance_id=None, rack_id=None, member_epoch=7, client_id="c",
                      client_host="/h", subscribed_topic_names=["orders"], subscribed_topic_regex=None,
                      assignment=assignment, target_assignment=G.Member.Assignment(topic_partitions=[]),
                      member_type=1)
    return R(throttle_time_ms=0, groups=[G(error_code=0, error_message=None, group_id="g", group_state="Stable",
                                           group_epoch=7, assignment_epoch=7, assignor_name="uniform",
                                           members=[member], authorized_operations=-2147483648)])


@pytest.mark.parametrize("version", [0, 1])
def test_describe_response_bytes_and_member_type_from_version_1(version):
    assignment = b"\x02" + ORDERS_ID.bytes + _cs("orders") + _compact_int32s([3]) + b"\x00" + b"\x00"
    member = (_cs("m") + _cs(None) + _cs(None) + _i32(7) + _cs("c") + _cs("/h") + b"\x02" + _cs("orders")
              + _cs(None) + assignment + b"\x01" + b"\x00" + (_i8(1) if version >= 1 else b"") + b"\x00")
    group = (_i16(0) + _cs(None) + _cs("g") + _cs("Stable") + _i32(7) + _i32(7) + _cs("uniform")
             + b"\x02" + member + _i32(-2147483648) + b"\x00")
    assert bytes(_described(version).encode(version=version)) == _i32(0) + b"\x02" + group + b"\x00"
    schema = SCHEMAS[ApiKey.CONSUMER_GROUP_DESCRIBE]
    decoded = decode_response(schema, version, encode_response(schema, version, 3, _described(version))[4:])
    assert decoded.groups[0].members[0].member_type == (1 if version >= 1 else -1)  # the spec's default


def test_unknown_tagged_fields_in_header_and_body_are_skipped():
    """A newer client may send tags this version does not know; Kafka keeps them aside and reads on."""
    body = bytes(_heartbeat().encode(version=1))
    unknown = encode_uvarint(1) + encode_uvarint(9) + encode_uvarint(3) + b"abc"
    header = _i16(ApiKey.CONSUMER_GROUP_HEARTBEAT) + _i16(1) + _i32(5) + _i16(6) + b"client"
    frame = header + unknown + body[:-1] + unknown
    decoded = _decode(frame)
    assert (decoded.group_id, decoded.member_id, decoded.server_assignor) == ("g", "m", "uniform")


def test_nulls_where_the_spec_allows_none_are_refused():
    with pytest.raises(InvalidRequestError, match="non-nullable field GroupId"):
        _decode(request_frame(_heartbeat(group_id=None)))
    with pytest.raises(InvalidRequestError, match=r"SubscribedTopicNames\[\]"):
        _decode(request_frame(_heartbeat(0, subscribed_topic_names=["t", None])))
    with pytest.raises(InvalidRequestError, match="non-nullable field GroupIds"):
        _decode(request_frame(ConsumerGroupDescribeRequest[0](group_ids=None, include_authorized_operations=False)))


@pytest.mark.parametrize(("key", "version"), VERSIONS)
def test_requests_decode_to_what_was_sent(key, version):
    @_PROPERTY
    @given(_WELL_FORMED.request(key, version))
    def check(request):
        frame = request_frame(request)
        header, _ = RequestHeader.parse(frame)
        assert (header.api_key, header.api_version) == (key, version)
        assert _decode(frame) == request

    check()


@pytest.mark.parametrize(("key", "version"), VERSIONS)
def test_a_request_decodes_exactly_when_kafka_would_read_it(key, version):
    schema = SCHEMAS[key]

    @_PROPERTY
    @given(_HOSTILE.request(key, version))
    def check(request):
        frame = request_frame(request)
        if refusals(schema.request._struct, request, version, schema.flexible(version)):
            with pytest.raises(InvalidRequestError, match="non-nullable field|invalid length"):
                _decode(frame)
        else:
            assert _decode(frame) == request

    check()


@pytest.mark.parametrize(("key", "version"), VERSIONS)
def test_a_request_cut_short_anywhere_is_refused(key, version):
    @settings(_PROPERTY, max_examples=5)
    @given(_WELL_FORMED.request(key, version))
    def check(request):
        frame = request_frame(request)
        _, body = RequestHeader.parse(frame)
        for end in range(body, len(frame)):
            with pytest.raises(InvalidRequestError):
                _decode(frame[:end])

    check()


@pytest.mark.parametrize(("key", "version"), VERSIONS)
def test_responses_encode_and_decode_back(key, version):
    schema = SCHEMAS[key]
    response_class = schema.response
    responses = _HOSTILE.fields(response_class._struct, version).map(lambda v: response_class[version](**v))

    @_PROPERTY
    @given(responses)
    def check(response):
        if refusals(response_class._struct, response, version, True):
            return  # a null where the spec allows none: no handler builds one
        framed = encode_response(schema, version, 42, response)
        (size, correlation_id) = struct.unpack_from(">ii", framed)
        assert size == len(framed) - 4 and correlation_id == 42
        assert decode_response(schema, version, framed[4:]) == response

    check()
