"""The znode formats of `minikafka.broker.zk.zk_data`: round trips, the JSON Kafka itself writes, and errors that
name the znode."""
from __future__ import annotations

import json
import uuid

import pytest

from minikafka.broker.zk import zk_data
from minikafka.broker.zk.zk_data import (
    BrokerRegistration,
    ControllerRegistration,
    EndPoint,
    LeaderIsrAndControllerEpoch,
    ProducerIdsBlock,
    ReplicaAssignment,
    SupportedVersionRange,
    ZNodeDecodeError,
)
from minikafka.storage.partition_metadata import uuid_to_str


def test_paths_are_kafkas():
    assert zk_data.broker_id_path(3) == "/brokers/ids/3"
    assert zk_data.topic_path("orders") == "/brokers/topics/orders"
    assert zk_data.topic_partition_state_path("orders", 7) == "/brokers/topics/orders/partitions/7/state"
    assert zk_data.config_entity_path(zk_data.TOPIC_CONFIG, "orders") == "/config/topics/orders"
    assert zk_data.delete_topic_path("orders") == "/admin/delete_topics/orders"
    assert zk_data.CONTROLLER_PATH == "/controller" and zk_data.CONTROLLER_EPOCH_PATH == "/controller_epoch"
    assert zk_data.CLUSTER_ID_PATH == "/cluster/id"
    assert zk_data.PRODUCER_ID_BLOCK_PATH == "/latest_producer_id_block"
    assert zk_data.BROKER_SEQUENCE_ID_PATH == "/brokers/seqid"
    assert zk_data.REASSIGN_PARTITIONS_PATH == "/admin/reassign_partitions"
    assert zk_data.PREFERRED_REPLICA_ELECTION_PATH == "/admin/preferred_replica_election"
    assert zk_data.ISR_CHANGE_NOTIFICATION_PATH == "/isr_change_notification"
    assert {"/brokers/ids", "/brokers/topics", "/admin/delete_topics", "/config/topics",
            "/latest_producer_id_block"} <= set(zk_data.PERSISTENT_PATHS)


def test_controller_round_trip_and_kafka_json():
    registration = ControllerRegistration(broker_id=2, timestamp_ms=1700000000123)
    data = zk_data.encode_controller(registration)
    assert json.loads(data) == {"version": 2, "brokerid": 2, "timestamp": "1700000000123",
                                "kraftControllerEpoch": -1}
    assert zk_data.decode_controller(data) == registration
    # written by Kafka 2.x (version 1, no KRaft epoch)
    assert zk_data.decode_controller(b'{"version":1,"brokerid":5,"timestamp":"1612345678901"}').broker_id == 5


def test_controller_epoch_is_a_bare_integer():
    assert zk_data.encode_controller_epoch(17) == b"17"
    assert zk_data.decode_controller_epoch(b"17") == 17
    with pytest.raises(ZNodeDecodeError, match="/controller_epoch"):
        zk_data.decode_controller_epoch(b"seventeen")


def test_cluster_id_round_trip():
    data = zk_data.encode_cluster_id("MkU3OEVBNTcwNTJENDM2Qk")
    assert json.loads(data) == {"version": "1", "id": "MkU3OEVBNTcwNTJENDM2Qk"}
    assert zk_data.decode_cluster_id(data) == "MkU3OEVBNTcwNTJENDM2Qk"


def test_broker_registration_round_trip():
    registration = BrokerRegistration(
        broker_id=1,
        endpoints=(EndPoint("INTERNAL", "10.0.0.1", 9093, "PLAINTEXT"),
                   EndPoint("EXTERNAL", "::1", 9094, "SSL"),
                   EndPoint("PLAINTEXT", "", 9092, "PLAINTEXT")),
        rack="rack-a",
        features={"metadata.version": SupportedVersionRange(1, 14)})
    data = zk_data.encode_broker_registration(registration, timestamp_ms=1700000000000)
    fields = json.loads(data)
    assert fields["version"] == 5
    assert fields["endpoints"] == ["INTERNAL://10.0.0.1:9093", "EXTERNAL://[::1]:9094", "PLAINTEXT://:9092"]
    assert fields["host"] == "10.0.0.1" and fields["port"] == 9093  # the first PLAINTEXT listener
    assert fields["listener_security_protocol_map"] == {"INTERNAL": "PLAINTEXT", "EXTERNAL": "SSL",
                                                        "PLAINTEXT": "PLAINTEXT"}
    assert fields["features"] == {"metadata.version": {"min_version": 1, "max_version": 14}}
    assert fields["rack"] == "rack-a" and fields["timestamp"] == "1700000000000" and fields["jmx_port"] == -1
    assert zk_data.decode_broker_registration(1, data) == registration


def test_broker_registration_without_plaintext_listener():
    registration = BrokerRegistration(broker_id=4, endpoints=(EndPoint("SECURE", "h", 9095, "SSL"),))
    fields = json.loads(zk_data.encode_broker_registration(registration, 0))
    assert fields["host"] is None and fields["port"] == -1
    assert "rack" not in fields


def test_broker_registration_as_kafka_documents_it():
    v5 = (b'{"version":5,"host":"localhost","port":9092,"jmx_port":9999,"timestamp":"2233345666",'
          b'"endpoints":["CLIENT://host1:9092","REPLICATION://host1:9093"],"rack":"dc1",'
          b'"listener_security_protocol_map":{"CLIENT":"SASL_SSL","REPLICATION":"PLAINTEXT"},'
          b'"features":{"feature":{"min_version":1,"max_version":3}}}')
    broker = zk_data.decode_broker_registration(0, v5)
    assert broker.endpoints == (EndPoint("CLIENT", "host1", 9092, "SASL_SSL"),
                                EndPoint("REPLICATION", "host1", 9093, "PLAINTEXT"))
    assert broker.rack == "dc1" and broker.jmx_port == 9999
    assert broker.features == {"feature": SupportedVersionRange(1, 3)}
    assert broker.endpoint("REPLICATION") == EndPoint("REPLICATION", "host1", 9093, "PLAINTEXT")
    v2 = (b'{"version":2,"host":"localhost","port":9092,"jmx_port":9999,"timestamp":"2233345666",'
          b'"endpoints":["PLAINTEXT://host1:9092","SSL://host1:9093"]}')
    assert zk_data.decode_broker_registration(0, v2).endpoints == (
        EndPoint("PLAINTEXT", "host1", 9092, "PLAINTEXT"), EndPoint("SSL", "host1", 9093, "SSL"))
    v1 = b'{"version":1,"host":"localhost","port":9092,"jmx_port":9999,"timestamp":"2233345666"}'
    assert zk_data.decode_broker_registration(0, v1).endpoints == (
        EndPoint("PLAINTEXT", "localhost", 9092, "PLAINTEXT"),)


@pytest.mark.parametrize("data, reason", [
    (b"not json", "not JSON"),
    (b"[1, 2]", "not a JSON object"),
    (b'{"version":5,"endpoints":"PLAINTEXT://h:1"}', "endpoints"),
    (b'{"version":5,"endpoints":["PLAINTEXT:/h:1"]}', "LISTENER://HOST:PORT"),
    (b'{"version":5,"endpoints":["UNKNOWN://h:1"]}', "no security protocol"),
    (b'{"version":0}', "unsupported version"),
])
def test_broker_registration_errors_name_the_znode(data, reason):
    with pytest.raises(ZNodeDecodeError, match=f"/brokers/ids/7: .*{reason}"):
        zk_data.decode_broker_registration(7, data)


def test_topic_round_trip():
    topic_id = uuid.uuid4()
    partitions = {0: ReplicaAssignment((1, 2, 3)), 1: ReplicaAssignment((2, 3, 4), adding_replicas=(4,),
                                                                        removing_replicas=(1,))}
    data = zk_data.encode_topic(topic_id, partitions)
    fields = json.loads(data)
    assert fields["version"] == 3
    assert fields["partitions"] == {"0": [1, 2, 3], "1": [2, 3, 4]}
    assert fields["adding_replicas"] == {"1": [4]} and fields["removing_replicas"] == {"1": [1]}
    assert len(fields["topic_id"]) == 22 and "=" not in fields["topic_id"]  # Kafka's Uuid text form
    decoded = zk_data.decode_topic("orders", data)
    assert decoded.topic == "orders" and decoded.topic_id == topic_id and decoded.partitions == partitions


def test_topic_as_kafka_writes_it():
    data = (b'{"version":3,"topic_id":"x6nSVyMBQ6yWsLtMOsvSSw","partitions":{"1":[2,0],"0":[1,2]},'
            b'"adding_replicas":{},"removing_replicas":{}}')
    topic = zk_data.decode_topic("t", data)
    assert topic.topic_id is not None and uuid_to_str(topic.topic_id.bytes) == "x6nSVyMBQ6yWsLtMOsvSSw"
    assert topic.partitions == {0: ReplicaAssignment((1, 2)), 1: ReplicaAssignment((2, 0))}
    assert zk_data.decode_topic("t", b'{"version":1,"partitions":{"0":[1]}}').topic_id is None
    with pytest.raises(ZNodeDecodeError, match="/brokers/topics/t: .*topic_id"):
        zk_data.decode_topic("t", b'{"version":3,"topic_id":"short","partitions":{}}')
    with pytest.raises(ZNodeDecodeError, match="/brokers/topics/t: .*partitions.0"):
        zk_data.decode_topic("t", b'{"version":3,"partitions":{"0":["a"]}}')


def test_partition_state_round_trip():
    state = LeaderIsrAndControllerEpoch(leader=2, leader_epoch=5, isr=(2, 3), controller_epoch=4,
                                        partition_epoch=9)
    data = zk_data.encode_topic_partition_state(state)
    assert json.loads(data) == {"version": 1, "leader": 2, "leader_epoch": 5, "controller_epoch": 4,
                                "isr": [2, 3]}  # recovered: no leader_recovery_state, as Kafka writes it
    assert zk_data.decode_topic_partition_state("t", 0, data, zk_version=9) == state
    recovering = LeaderIsrAndControllerEpoch(2, 6, (2,), 4, zk_data.RECOVERING, 10)
    data = zk_data.encode_topic_partition_state(recovering)
    assert json.loads(data)["leader_recovery_state"] == zk_data.RECOVERING
    assert zk_data.decode_topic_partition_state("t", 0, data, zk_version=10) == recovering
    with pytest.raises(ZNodeDecodeError, match="/brokers/topics/t/partitions/3/state: .*'isr'"):
        zk_data.decode_topic_partition_state("t", 3, b'{"leader":1,"leader_epoch":0,"controller_epoch":1}', 0)


def test_config_round_trip():
    data = zk_data.encode_config({"retention.ms": "1000", "cleanup.policy": "compact"})
    assert json.loads(data) == {"version": 1, "config": {"retention.ms": "1000", "cleanup.policy": "compact"}}
    assert zk_data.decode_config("topics", "t", data) == {"retention.ms": "1000", "cleanup.policy": "compact"}
    assert zk_data.decode_config("topics", "t", None) == {}
    with pytest.raises(ZNodeDecodeError, match="/config/topics/t"):
        zk_data.decode_config("topics", "t", b'{"version":1,"config":{"retention.ms":1000}}')


def test_producer_id_block_round_trip():
    block = ProducerIdsBlock(assigned_broker_id=3, first_producer_id=2000, size=1000)
    data = zk_data.encode_producer_id_block(block)
    assert json.loads(data) == {"version": 1, "broker": 3, "block_start": "2000", "block_end": "2999"}
    assert zk_data.decode_producer_id_block(data) == block
    assert block.last_producer_id == 2999 and block.next_block_first_id == 3000
    with pytest.raises(ZNodeDecodeError, match="/latest_producer_id_block"):
        zk_data.decode_producer_id_block(b'{"version":1,"broker":3,"block_start":"x","block_end":"2999"}')
