"""Requests are refused at decoding where Kafka's message readers refuse them: a null in a field (or array element)
that the schema's nullableVersions do not allow, a flexible string of more than 0x7fff bytes, a body that runs past
its frame. The broker closes such a connection instead of handing a handler a None it never expects."""
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from kafka.protocol.admin.groups import DescribeGroupsRequest
from kafka.protocol.consumer.group import OffsetCommitRequest
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest
from kafka.protocol.metadata.metadata import MetadataRequest
from kafka.protocol.producer.produce import ProduceRequest

from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.codec import SCHEMAS, InvalidRequestError, RequestHeader, decode_request
from tests.unit.request_strategies import SERVED_VERSIONS, RequestValues, refusals, request_frame

EXAMPLES_PER_VERSION = 8


def _decode(frame: bytes):
    header, pos = RequestHeader.parse(frame)
    return decode_request(SCHEMAS[header.api_key], header, frame, pos)


def _produce(version: int, topic_data, transactional_id=None):
    return ProduceRequest[version](transactional_id=transactional_id, acks=1, timeout_ms=1000, topic_data=topic_data)


def _topic(version: int, name="t", partition_data=()):
    T = ProduceRequest[version].TopicProduceData
    return T(name=name, partition_data=[T.PartitionProduceData(index=0, records=data) for data in partition_data])


@pytest.mark.parametrize("version", [3, 8, 9])
def test_produce_with_a_null_topic_data_array_is_refused(version):
    with pytest.raises(InvalidRequestError, match=f"ProduceRequest v{version}: non-nullable field TopicData was"):
        _decode(request_frame(_produce(version, None)))


@pytest.mark.parametrize("version", [3, 9])
def test_nulls_where_produce_allows_them_decode(version):
    decoded = _decode(request_frame(_produce(version, [_topic(version, partition_data=[None, b"x"])])))
    assert decoded.transactional_id is None and decoded.topic_data[0].partition_data[0].records is None


@pytest.mark.parametrize("version", [3, 9])
def test_a_null_topic_name_in_produce_is_refused(version):
    with pytest.raises(InvalidRequestError, match=r"TopicData\[\]\.Name"):
        _decode(request_frame(_produce(version, [_topic(version), _topic(version, name=None)])))


@pytest.mark.parametrize("version", [0, 1, 3])
def test_find_coordinator_with_a_null_key_is_refused(version):
    request = FindCoordinatorRequest[version](key=None, key_type=0)
    with pytest.raises(InvalidRequestError, match="non-nullable field Key was serialized as null"):
        _decode(request_frame(request))


def test_a_null_element_of_a_string_array_is_refused():
    """Kafka never allows a null element in an array of strings, whatever the array's own nullability."""
    with pytest.raises(InvalidRequestError, match=r"CoordinatorKeys\[\]"):
        _decode(request_frame(FindCoordinatorRequest[4](key_type=0, coordinator_keys=["g", None])))
    with pytest.raises(InvalidRequestError, match=r"Groups\[\]"):
        _decode(request_frame(DescribeGroupsRequest[5](groups=[None], include_authorized_operations=False)))


def test_a_null_where_metadata_allows_one_decodes():
    assert _decode(request_frame(MetadataRequest[12](topics=None))).topics is None
    # v0 has no null topics (all topics is an empty list); kafka-python's encoder turns a null into one.
    v0_null = RequestHeader(ApiKey.METADATA, 0, 7, "tester").encode() + struct.pack(">i", -1)
    with pytest.raises(InvalidRequestError, match="non-nullable field Topics"):
        _decode(v0_null)


def test_a_flexible_string_longer_than_kafka_reads_is_refused():
    """0x7fff bytes is the longest string Kafka reads; a compact length can say more, and Kafka refuses it."""
    longest = "é" * (0x7FFF // 2) + "a"  # 0x7fff bytes in UTF-8
    T = MetadataRequest[12].MetadataRequestTopic
    assert _decode(request_frame(MetadataRequest[12](topics=[T(name=longest)]))).topics[0].name == longest
    with pytest.raises(InvalidRequestError, match=r"string field Topics\[\]\.Name had invalid length 32769"):
        _decode(request_frame(MetadataRequest[12](topics=[T(name="é" * 0x4000 + "a")])))


def test_a_body_that_runs_past_its_frame_is_refused():
    """kafka-python's decoders take what is there of a string or bytes cut short; Kafka refuses the request."""
    frame = request_frame(_produce(3, [_topic(3, partition_data=[b"r" * 100])]))
    assert _decode(frame).topic_data[0].partition_data[0].records == b"r" * 100
    with pytest.raises(InvalidRequestError, match="runs 10 bytes past the frame"):
        _decode(frame[:-10])


def test_retention_of_any_value_decodes():
    """The retention of OffsetCommit v2-4 is checked by its handler, not the decoder."""
    T = OffsetCommitRequest[2].OffsetCommitRequestTopic
    request = OffsetCommitRequest[2](group_id="g", generation_id_or_member_epoch=-1, member_id="",
                                     retention_time_ms=(1 << 63) - 1,
                                     topics=[T(name="t", partitions=[T.OffsetCommitRequestPartition(
                                         partition_index=0, committed_offset=1, committed_metadata=None)])])
    assert _decode(request_frame(request)).retention_time_ms == (1 << 63) - 1


_PROPERTY = settings(max_examples=EXAMPLES_PER_VERSION, deadline=None, database=None,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
_VALUES = RequestValues()


@pytest.mark.parametrize(("api_key", "version"), SERVED_VERSIONS, ids=lambda v: getattr(v, "api_name", f"v{v}"))
def test_a_request_decodes_exactly_when_kafka_would_read_it(api_key, version):
    """Nulls anywhere the wire can carry one: refused exactly when some field or element may not be null, and
    otherwise decoded to what was sent."""
    schema = SCHEMAS[api_key]

    @_PROPERTY
    @given(_VALUES.request(api_key, version))
    def check(request):
        frame = request_frame(request)  # first: kafka-python's encoders fix up a few fields as they encode
        expected = refusals(schema.request._struct, request, version, schema.flexible(version))
        if expected:
            with pytest.raises(InvalidRequestError, match="non-nullable field|invalid length"):
                _decode(frame)
        else:
            assert _decode(frame) == request

    check()


@pytest.mark.parametrize(("api_key", "version"), SERVED_VERSIONS, ids=lambda v: getattr(v, "api_name", f"v{v}"))
def test_a_request_cut_short_anywhere_is_refused(api_key, version):
    @settings(_PROPERTY, max_examples=3)
    @given(_VALUES.request(api_key, version))
    def check(request):
        frame = request_frame(request)
        header, body = RequestHeader.parse(frame)
        if not refusals(SCHEMAS[api_key].request._struct, request, version, SCHEMAS[api_key].flexible(version)):
            for end in range(body, len(frame)):
                with pytest.raises(InvalidRequestError):
                    _decode(frame[:end])

    check()
