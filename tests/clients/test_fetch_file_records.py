"""Fetch responses whose records are sent from segment files (sendfile): consumers get exactly the bytes that were
produced, across partitions, segments and request versions, and pipelined fetches keep their framing."""
from __future__ import annotations

import os

from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition
from kafka.protocol.consumer.fetch import FetchRequest
from kafka.record.memory_records import MemoryRecords

from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.codec import SCHEMAS
from tests.helpers import collect, create_topic, produce
from tests.raw_client import RawConnection, record_batch

PARTITIONS = 3
PER_PARTITION = 300
VALUE_BYTES = 4000  # 1.2 MB per partition: slices far larger than a socket buffer
TIMEOUT_S = 60
FETCH = SCHEMAS[ApiKey.FETCH]


def _produce_distinct(bootstrap: str, topic: str) -> dict[int, list[bytes]]:
    """Distinct random values per partition, in batches of about 64 KB, two segments per partition."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 65536})
    values = {p: [os.urandom(VALUE_BYTES) for _ in range(PER_PARTITION)] for p in range(PARTITIONS)}
    for p, produced in values.items():
        for value in produced:
            producer.produce(topic, value, partition=p)
        producer.poll(0)
    assert producer.flush(TIMEOUT_S) == 0
    return values


def test_confluent_and_kafka_python_consumers_get_the_produced_bytes(broker_factory) -> None:
    broker = broker_factory()
    bootstrap = broker.bootstrap_servers
    with RawConnection(bootstrap) as conn:
        create_topic(conn, "files", partitions=PARTITIONS, **{"internal.segment.bytes": str(700_000)})
    produced = _produce_distinct(bootstrap, "files")
    total = PARTITIONS * PER_PARTITION

    confluent = Consumer({"bootstrap.servers": bootstrap, "group.id": "files-confluent", "enable.auto.commit": False,
                          "fetch.max.bytes": 8 << 20, "max.partition.fetch.bytes": 4 << 20})
    try:
        confluent.assign([TopicPartition("files", p, 0) for p in range(PARTITIONS)])
        got = collect(lambda: [(m.partition(), m.value()) for m in confluent.consume(1000, 0.5)
                               if m.error() is None], total)
    finally:
        confluent.close()
    assert {p: [v for q, v in got if q == p] for p in range(PARTITIONS)} == produced

    kafka_python = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_bytes=8 << 20,
                                 max_partition_fetch_bytes=4 << 20)
    try:
        kafka_python.assign([KafkaTopicPartition("files", p) for p in range(PARTITIONS)])
        kafka_python.seek_to_beginning()
        got = collect(lambda: [(r.partition, r.value) for rs in kafka_python.poll(500).values() for r in rs], total)
    finally:
        kafka_python.close()
    assert {p: [v for q, v in got if q == p] for p in range(PARTITIONS)} == produced


def _fetch_request(version: int, offset: int):
    R = FetchRequest[version]
    partitions = [R.FetchTopic.FetchPartition(partition=p, current_leader_epoch=-1, fetch_offset=offset,
                                              last_fetched_epoch=-1, log_start_offset=-1,
                                              partition_max_bytes=1 << 20) for p in range(PARTITIONS)]
    return R(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=8 << 20, isolation_level=0, session_id=0,
             session_epoch=-1, topics=[R.FetchTopic(topic="pipelined", partitions=partitions)],
             forgotten_topics_data=[], rack_id="")


def test_pipelined_fetches_of_classic_and_flexible_versions_keep_their_framing(broker) -> None:
    values = {p: [os.urandom(200_000) for _ in range(3)] for p in range(PARTITIONS)}
    with RawConnection(broker.bootstrap_servers, timeout=TIMEOUT_S) as conn:
        create_topic(conn, "pipelined", partitions=PARTITIONS)
        for p, batch_values in values.items():
            for value in batch_values:
                assert produce(conn, "pipelined", p, record_batch([value])).error_code == 0
        requests = [_fetch_request(version, offset) for version in (4, 12) for offset in (0, 1)]
        correlations = [conn.send(request) for request in requests]
        for request, correlation in zip(requests, correlations, strict=True):
            frame = conn.read_frame()
            assert frame is not None and int.from_bytes(frame[:4], "big") == correlation
            version = request.API_VERSION
            response = FETCH.response.decode(frame[4 + FETCH.response_header_version(version):], version=version)
            offset = request.topics[0].partitions[0].fetch_offset
            for partition in response.responses[0].partitions:
                fetched = [r.value for r in _records(partition.records)]
                assert fetched == values[partition.partition_index][offset:]


def _records(data: bytes | None) -> list:
    records = MemoryRecords(bytes(data or b""))
    out = []
    while (batch := records.next_batch()) is not None:
        out.extend(batch)
    return out
