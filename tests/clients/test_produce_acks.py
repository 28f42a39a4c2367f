"""acks=0, 1 and all as Kafka answers them: no response for acks=0 (a closed connection on error), and
min.insync.replicas enforced for acks=all."""
from __future__ import annotations

from confluent_kafka import Producer
from kafka.protocol.producer.produce import ProduceRequest

from tests.helpers import create_topic, fetch
from tests.raw_client import RawConnection, record_batch

NOT_ENOUGH_REPLICAS = 19


def produce_request(topic: str, partition: int, records: bytes, acks: int):
    R = ProduceRequest[9]
    return R(transactional_id=None, acks=acks, timeout_ms=10000, topic_data=[R.TopicProduceData(
        name=topic, partition_data=[R.TopicProduceData.PartitionProduceData(index=partition, records=records)])])


def test_acks_zero_gets_no_response_and_the_records_are_stored(broker):
    with RawConnection(broker.bootstrap_servers) as conn:
        create_topic(conn, "fire-and-forget")
        conn.send(produce_request("fire-and-forget", 0, record_batch([b"one"]), acks=0))
        conn.send(produce_request("fire-and-forget", 0, record_batch([b"two"]), acks=0))
        # The next response on this connection answers the fetch: the acks=0 requests had none.
        part = fetch(conn, "fire-and-forget", 0, 0)
        assert part.high_watermark == 2 and b"one" in part.records and b"two" in part.records


def test_acks_zero_error_closes_the_connection(broker):
    with RawConnection(broker.bootstrap_servers) as conn:
        conn.send(produce_request("no-such-topic", 0, record_batch([b"lost"]), acks=0))
        assert conn.is_closed_by_broker()


def test_acks_all_needs_min_insync_replicas(broker):
    with RawConnection(broker.bootstrap_servers) as conn:
        create_topic(conn, "strict", **{"min.insync.replicas": "2"})
        refused = conn.request(produce_request("strict", 0, record_batch([b"x"]), acks=-1))
        assert refused.responses[0].partition_responses[0].error_code == NOT_ENOUGH_REPLICAS
        accepted = conn.request(produce_request("strict", 0, record_batch([b"y"]), acks=1))
        assert accepted.responses[0].partition_responses[0].error_code == 0
        assert fetch(conn, "strict", 0, 0).high_watermark == 1
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "acks": "all", "retries": 0,
                         "message.timeout.ms": 3000})
    errors = []
    try:
        producer.produce("strict", b"z", on_delivery=lambda err, msg: errors.append(err))
        assert producer.flush(10) == 0
    finally:
        del producer
    assert errors and errors[0] is not None and errors[0].name() == "NOT_ENOUGH_REPLICAS"
