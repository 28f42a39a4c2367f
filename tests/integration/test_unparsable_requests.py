"""A request Kafka's parser refuses (a null where the schema allows none) closes its own connection, with one log
line saying what was wrong and no traceback, as Kafka closes a connection whose request it cannot parse; other
connections go on being served."""
import pytest
from kafka.protocol.admin.topics import CreateTopicsRequest
from kafka.protocol.consumer.group import OffsetCommitRequest
from kafka.protocol.metadata.api_versions import ApiVersionsRequest
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest
from kafka.protocol.metadata.metadata import MetadataRequest
from kafka.protocol.producer.produce import ProduceRequest

from minikafka.protocol.errors import ErrorCode
from tests.raw_client import RawConnection, record_batch

UNPARSABLE = {
    "produce-null-topic-data": (ProduceRequest[9](transactional_id=None, acks=1, timeout_ms=1000, topic_data=None),
                                "ProduceRequest v9: non-nullable field TopicData was serialized as null"),
    "find-coordinator-null-key": (FindCoordinatorRequest[3](key=None, key_type=0),
                                  "FindCoordinatorRequest v3: non-nullable field Key was serialized as null"),
    "offset-commit-null-topics": (
        OffsetCommitRequest[8](group_id="g", generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                               topics=None),
        "OffsetCommitRequest v8: non-nullable field Topics was serialized as null"),
}


@pytest.mark.parametrize("case", list(UNPARSABLE))
def test_an_unparsable_request_closes_only_its_connection(broker, unique_topic, case):
    request, message = UNPARSABLE[case]
    with RawConnection(broker.bootstrap_servers) as other, RawConnection(broker.bootstrap_servers) as hostile:
        assert other.request(ApiVersionsRequest[3](client_software_name="other", client_software_version="1"))\
            .error_code == ErrorCode.NONE
        hostile.send(request)
        assert hostile.read_frame() is None, "the broker answered a request Kafka cannot parse"

        # The broker wrote its line before closing the connection.
        log = broker.log_path.read_text()
        said = [line for line in log.splitlines() if message in line]
        assert len(said) == 1 and "WARNING" in said[0] and "closing connection" in said[0], said
        assert "Traceback" not in log

        T = CreateTopicsRequest[5].CreatableTopic
        created = other.request(CreateTopicsRequest[5](
            topics=[T(name=unique_topic, num_partitions=1, replication_factor=1, assignments=[], configs=[])],
            timeout_ms=30000, validate_only=False))
        assert created.topics[0].error_code == ErrorCode.NONE
        PT = ProduceRequest[9].TopicProduceData
        produced = other.request(ProduceRequest[9](
            transactional_id=None, acks=-1, timeout_ms=30000, topic_data=[PT(name=unique_topic, partition_data=[
                PT.PartitionProduceData(index=0, records=record_batch([b"after"]))])]))
        assert produced.responses[0].partition_responses[0].error_code == ErrorCode.NONE
        MT = MetadataRequest[12].MetadataRequestTopic
        metadata = other.request(MetadataRequest[12](topics=[MT(topic_id=None, name=unique_topic)],
                                                     allow_auto_topic_creation=False,
                                                     include_topic_authorized_operations=False))
        assert metadata.topics[0].error_code == ErrorCode.NONE
