import struct
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.metadata.metadata import MetadataRequest

from minikafka.broker.server import handlers
from minikafka.broker.server.api_version_manager import ApiVersionManager
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.codec import (
    SCHEMAS,
    InvalidRequestError,
    RecordsSplicer,
    RequestHeader,
    decode_request,
    encode_response,
)


def _request_frame(request, correlation_id=7, client_id="tester"):
    request.with_header(correlation_id=correlation_id, client_id=client_id)
    return request.encode(header=True)


@pytest.mark.parametrize("version", [0, 4, 9, 12, 13])
def test_metadata_request_round_trips_through_header_parsing(version):
    req = MetadataRequest[version](topics=[MetadataRequest.MetadataRequestTopic(name="orders")])
    frame = _request_frame(req)
    header, pos = RequestHeader.parse(frame)
    assert header == RequestHeader(ApiKey.METADATA, version, 7, "tester")
    decoded = decode_request(SCHEMAS[ApiKey.METADATA], header, frame, pos)
    assert [t.name for t in decoded.topics] == ["orders"]


@pytest.mark.parametrize("client_id", ["tool", "", "ünïcode", None])
def test_request_header_encodes_as_kafka_python_does_and_parses_back(client_id):
    header = RequestHeader(ApiKey.METADATA, 4, 99, client_id)
    frame = _request_frame(MetadataRequest[4](topics=None), correlation_id=99, client_id=client_id)
    assert frame.startswith(header.encode())
    assert RequestHeader.parse(frame) == (header, len(header.encode()))


def test_api_versions_response_header_is_never_flexible():
    schema = SCHEMAS[ApiKey.API_VERSIONS]
    response = schema.response[3](error_code=0, api_keys=[], throttle_time_ms=0)
    framed = encode_response(schema, 3, 42, response)
    size, correlation_id = struct.unpack_from(">ii", framed)
    assert size == len(framed) - 4 and correlation_id == 42
    # body starts right after the correlation id: error_code int16 == 0
    assert framed[8:10] == b"\x00\x00"


def test_flexible_response_header_carries_empty_tagged_fields():
    schema = SCHEMAS[ApiKey.METADATA]
    framed = encode_response(schema, 12, 5, schema.response[12](brokers=[], topics=[]))
    assert framed[8] == 0


def test_truncated_header_is_invalid():
    with pytest.raises(InvalidRequestError):
        RequestHeader.parse(b"\x00\x03\x00")


def test_client_id_past_end_is_invalid():
    with pytest.raises(InvalidRequestError):
        RequestHeader.parse(struct.pack(">hhih", ApiKey.METADATA, 1, 1, 50) + b"abc")


@pytest.mark.parametrize("version", [4, 11, 12, 16, 18])
def test_spliced_fetch_response_is_byte_identical_to_plain_encoding(version):
    schema = SCHEMAS[ApiKey.FETCH]
    R = schema.response[version]
    PD = R.FetchableTopicResponse.PartitionData
    records = [b"x" * 300, b"", b"short", bytes(range(256)) * 700]
    topic_id = uuid.uuid4()

    def response(stand_in):
        parts = [PD(partition_index=i, error_code=0, high_watermark=10, last_stable_offset=10, log_start_offset=0,
                    aborted_transactions=None, preferred_read_replica=-1, records=stand_in(data))
                 for i, data in enumerate(records)]
        topic = R.FetchableTopicResponse(topic="t" if version < 13 else None,
                                         topic_id=topic_id if version >= 13 else None, partitions=parts)
        return R(throttle_time_ms=0, error_code=0, session_id=0, responses=[topic])

    splicer = RecordsSplicer()
    spliced = encode_response(schema, version, 9, response(splicer.stand_in), splicer)
    assert spliced == encode_response(schema, version, 9, response(lambda data: data))


# ---- every request schema and version the broker serves, with values drawn from the schema -----------------------

# What the broker decodes requests in, per API key: the schema versions of every key a handler serves.
SERVED = ApiVersionManager(handlers.MODULES).accepted_versions
SERVED_VERSIONS = [(ApiKey(key), version) for key, (lo, hi) in sorted(SERVED.items()) for version in range(lo, hi + 1)]
EXAMPLES_PER_VERSION = 6

_INT_BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}


def _simple_values(type_str: str) -> st.SearchStrategy:
    if type_str in _INT_BITS:
        bits = _INT_BITS[type_str]
        return st.integers(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    return {
        "uint16": st.integers(0, 0xFFFF),
        "float64": st.floats(allow_nan=False),
        "bool": st.booleans(),
        "uuid": st.uuids(),
        "string": st.text(max_size=12),
        "bytes": st.binary(max_size=24),
        "records": st.binary(max_size=24),
    }[type_str]


def _field_values(field, version: int) -> st.SearchStrategy:
    if field.is_struct_array():
        values = st.lists(_struct_values(field.array_of, version), max_size=2)
    elif field.is_struct():
        values = _struct_values(field, version)
    elif field.is_array():
        values = st.lists(_simple_values(field.array_of.type_str), max_size=3)
    else:
        values = _simple_values(field.type_str)
    return st.none() | values if field.nullable_for_version_q(version) else values


def _fields(struct, version: int) -> st.SearchStrategy:
    """Values of the struct's fields in `version` (tagged ones included), by field name."""
    return st.fixed_dictionaries({field.name: _field_values(field, version)
                                  for field in struct.fields.values() if field.for_version_q(version)})


def _struct_values(struct, version: int) -> st.SearchStrategy:
    return _fields(struct, version).map(lambda values: struct.data_class(**values))


def _requests(api_key: int, version: int) -> st.SearchStrategy:
    request_class = SCHEMAS[api_key].request
    return _fields(request_class._struct, version).map(lambda values: request_class[version](**values))


def _served_decode(frame: bytes):
    """What the broker does with a request frame before a handler sees it."""
    header, pos = RequestHeader.parse(frame)
    lo, hi = SERVED.get(header.api_key, (0, -1))
    if lo <= header.api_version <= hi:
        return header, decode_request(SCHEMAS[header.api_key], header, frame, pos)
    return header, None


_PROPERTY = settings(max_examples=EXAMPLES_PER_VERSION, deadline=None, database=None,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def test_every_served_api_is_covered():
    assert {key for key, _ in SERVED_VERSIONS} == set(SERVED) and len(SERVED) > 20
    assert ApiKey.PRODUCE in SERVED and ApiKey.FETCH in SERVED and ApiKey.API_VERSIONS in SERVED


@pytest.mark.parametrize(("api_key", "version"), SERVED_VERSIONS, ids=lambda v: getattr(v, "api_name", f"v{v}"))
def test_requests_encoded_by_kafka_python_decode_to_equal_fields(api_key, version):
    @_PROPERTY
    @given(_requests(api_key, version), st.integers(-(1 << 31), (1 << 31) - 1), st.none() | st.text(max_size=8))
    def check(request, correlation_id, client_id):
        header, decoded = _served_decode(_request_frame(request, correlation_id, client_id))
        assert header == RequestHeader(api_key, version, correlation_id, client_id)
        assert decoded == request

    check()


def _mutations(frame: bytes) -> st.SearchStrategy:
    """Frames a broken or hostile client could send instead of `frame`: cut short, a byte changed, bytes put in,
    the rest replaced (by anything, or by lengths and varints at their limits)."""
    at = st.integers(0, len(frame) - 1)
    limits = st.sampled_from([b"\xff\xff\xff\xff", b"\x7f\xff\xff\xff", b"\xff\xff\xff\xff\x0f", b"\x80" * 6])
    return st.one_of(
        at.map(lambda i: frame[:i]),
        st.tuples(at, st.integers(1, 255)).map(lambda m: frame[:m[0]] + bytes([frame[m[0]] ^ m[1]]) + frame[m[0] + 1:]),
        st.tuples(at, st.binary(min_size=1, max_size=8)).map(lambda m: frame[:m[0]] + m[1] + frame[m[0]:]),
        st.tuples(at, st.binary(max_size=64) | limits).map(lambda m: frame[:m[0]] + m[1]),
        st.tuples(at, limits).map(lambda m: frame[:m[0]] + m[1] + frame[m[0] + len(m[1]):]),
    )


@pytest.mark.parametrize(("api_key", "version"), SERVED_VERSIONS, ids=lambda v: getattr(v, "api_name", f"v{v}"))
def test_mutated_request_bytes_decode_or_raise_invalid_request(api_key, version):
    @_PROPERTY
    @given(_requests(api_key, version).map(_request_frame).flatmap(_mutations))
    def check(frame):
        try:
            _served_decode(frame)
        except InvalidRequestError:
            pass

    check()


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(SERVED)), st.integers(0, 20), st.binary(max_size=200))
def test_random_bytes_after_a_request_header_decode_or_raise_invalid_request(api_key, version, body):
    try:
        _served_decode(struct.pack(">hhi", api_key, version, 1) + body)
    except InvalidRequestError:
        pass
