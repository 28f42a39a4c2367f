import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.metadata.api_versions import ApiVersionsRequest
from kafka.protocol.metadata.metadata import MetadataRequest

from minikafka.protocol.codec import SCHEMAS, InvalidRequestError, decode_request, encode_response, parse_header


def _request_frame(request, correlation_id=7, client_id="tester"):
    request.with_header(correlation_id=correlation_id, client_id=client_id)
    return request.encode(header=True)


@pytest.mark.parametrize("version", [0, 4, 9, 12, 13])
def test_metadata_request_round_trips_through_header_parsing(version):
    req = MetadataRequest[version](topics=[MetadataRequest.MetadataRequestTopic(name="orders")]
                                   if version >= 1 else [MetadataRequest.MetadataRequestTopic(name="orders")])
    frame = _request_frame(req)
    header, pos = parse_header(frame)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (3, version, 7, "tester")
    decoded = decode_request(SCHEMAS[3], header, frame, pos)
    assert [t.name for t in decoded.topics] == ["orders"]


def test_api_versions_response_header_is_never_flexible():
    schema = SCHEMAS[18]
    response = schema.response[3](error_code=0, api_keys=[], throttle_time_ms=0)
    framed = encode_response(schema, 3, 42, response)
    size, correlation_id = struct.unpack_from(">ii", framed)
    assert size == len(framed) - 4 and correlation_id == 42
    # body starts right after the correlation id: error_code int16 == 0
    assert framed[8:10] == b"\x00\x00"


def test_flexible_response_header_carries_empty_tagged_fields():
    schema = SCHEMAS[3]
    framed = encode_response(schema, 12, 5, schema.response[12](brokers=[], topics=[]))
    assert framed[8] == 0


def test_truncated_header_is_invalid():
    with pytest.raises(InvalidRequestError):
        parse_header(b"\x00\x03\x00")


def test_client_id_past_end_is_invalid():
    with pytest.raises(InvalidRequestError):
        parse_header(struct.pack(">hhih", 3, 1, 1, 50) + b"abc")


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_random_request_bytes_decode_or_raise_invalid_request(data):
    frame = _request_frame(ApiVersionsRequest[3](client_software_name="x", client_software_version="1"))[4:]
    mutated = frame[:8] + data
    try:
        header, pos = parse_header(mutated)
        schema = SCHEMAS.get(header.api_key)
        if schema is not None and schema.min_version <= header.api_version <= schema.max_version:
            decode_request(schema, header, mutated, pos)
    except InvalidRequestError:
        pass


@pytest.mark.parametrize("version", [4, 11, 12, 16, 18])
def test_spliced_fetch_response_is_byte_identical_to_plain_encoding(version):
    import uuid

    from minikafka.protocol.codec import RecordsSplicer

    schema = SCHEMAS[1]
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
