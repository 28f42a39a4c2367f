"""confluent-kafka (librdkafka) against a real minikafka process: data path, idempotence, offsets by time, metadata.

Consumers use manual assignment from explicit logical offsets, so no consumer-group coordinator is involved
(librdkafka insists on a group.id even then; with an explicit start offset it never asks for committed ones).
"""
from __future__ import annotations

import uuid

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from tests.helpers import (
    CODECS,
    PARTITIONS,
    PRODUCE_TIMEOUT_S,
    Consumed,
    Record,
    assert_consumed_equal,
    assert_produce_offsets,
    assert_stored_codec,
    by_partition,
    collect,
    fetch_batches,
    make_records,
    normalize_headers,
)
from tests.raw_client import RawConnection


def create_topic(bootstrap: str, topic: str, partitions: int, configs: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1,
                                            config=configs or {})], request_timeout=10)
    futures[topic].result(timeout=15)


def produce(bootstrap: str, topic: str, records: list[Record], **config) -> list[tuple[int, int]]:
    """Send every record with its explicit partition and timestamp; returns the acknowledged (partition, offset)."""
    producer = Producer({"bootstrap.servers": bootstrap, **config})
    acked: list[tuple[int, int] | None] = [None] * len(records)
    errors: list[KafkaError] = []

    def on_delivery(index: int):
        def report(err, msg) -> None:
            if err is not None:
                errors.append(err)
            else:
                acked[index] = (msg.partition(), msg.offset())
        return report

    try:
        for i, r in enumerate(records):
            producer.produce(topic, value=r.value, key=r.key, partition=r.partition, timestamp=r.timestamp,
                             headers=list(r.headers), on_delivery=on_delivery(i))
            producer.poll(0)
        remaining = producer.flush(PRODUCE_TIMEOUT_S)
    finally:
        del producer  # librdkafka's threads and connections go now, also when a failure keeps this frame
    assert remaining == 0, f"{remaining} records still undelivered after {PRODUCE_TIMEOUT_S}s"
    assert not errors, f"delivery failed: {errors[:3]}"
    return acked


def consumer_for(bootstrap: str, **config) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": f"compat-{uuid.uuid4()}",
                     "enable.auto.commit": False, "enable.auto.offset.store": False, "fetch.wait.max.ms": 100,
                     **config})


def consume_all(bootstrap: str, topic: str, partitions: int, count: int) -> list[Consumed]:
    consumer = consumer_for(bootstrap)
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])

        def poll() -> list[Consumed]:
            out = []
            for m in consumer.consume(num_messages=2000, timeout=0.2):
                if m.error() is not None:
                    raise KafkaException(m.error())
                out.append(Consumed(m.offset(), Record(m.partition(), m.key(), m.value(),
                                                       normalize_headers(m.headers()), m.timestamp()[1])))
            return out

        return collect(poll, count)
    finally:
        consumer.close()


@pytest.mark.parametrize("codec", CODECS)
def test_produce_consume_every_codec(broker, unique_topic, codec):
    records = make_records()
    create_topic(broker.bootstrap_servers, unique_topic, PARTITIONS)
    acked = produce(broker.bootstrap_servers, unique_topic, records, **{
        "compression.type": codec, "linger.ms": 5, "batch.size": 256 * 1024})
    assert_produce_offsets(records, acked)
    assert_consumed_equal(records, consume_all(broker.bootstrap_servers, unique_topic, PARTITIONS, len(records)))
    consumer = consumer_for(broker.bootstrap_servers)
    try:
        for p, expected in by_partition(records).items():
            assert consumer.get_watermark_offsets(TopicPartition(unique_topic, p), timeout=10) == (0, len(expected))
    finally:
        consumer.close()
    assert_stored_codec(broker.bootstrap_servers, unique_topic, records, codec)


def test_idempotent_producer_exactly_once_and_recreated(broker, unique_topic):
    """Two idempotent producers one after the other: each gets its own producer id, sequences restart at 0."""
    create_topic(broker.bootstrap_servers, unique_topic, 2)
    first = make_records(count=2000, partitions=2, seed=1)
    second = make_records(count=1000, partitions=2, seed=3)
    config = {"enable.idempotence": True, "linger.ms": 2, "batch.size": 16 * 1024}
    acked_first = produce(broker.bootstrap_servers, unique_topic, first, **config)
    acked_second = produce(broker.bootstrap_servers, unique_topic, second, **config)
    assert_produce_offsets(first + second, acked_first + acked_second)
    records = first + second
    assert_consumed_equal(records, consume_all(broker.bootstrap_servers, unique_topic, 2, len(records)))
    with RawConnection(broker.bootstrap_servers) as raw:
        for partition, expected in by_partition(records).items():
            n_first = len(by_partition(first)[partition])
            producers: dict[int, int] = {}  # producer id -> next expected sequence
            order = []
            for batch in fetch_batches(raw, unique_topic, partition, len(expected)):
                assert batch.producer_id >= 0
                if batch.producer_id not in producers:
                    order.append((batch.producer_id, batch.base_offset))
                    producers[batch.producer_id] = 0
                assert batch.base_sequence == producers[batch.producer_id]
                producers[batch.producer_id] += batch.records_count
            assert len(order) == 2 and order[0][0] != order[1][0]
            assert order[1][1] == n_first
            assert list(producers.values()) == [n_first, len(expected) - n_first]


def test_offsets_for_times_and_watermarks(broker, unique_topic):
    """p0: timestamps 1000..10000 ascending; p1: 5000, 9000, 7000 (max not last); p2: empty."""
    create_topic(broker.bootstrap_servers, unique_topic, 3, {"retention.ms": "-1"})
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    try:
        for i in range(10):
            producer.produce(unique_topic, value=b"p0-%d" % i, partition=0, timestamp=1000 * (i + 1))
            if i % 4 == 3:
                assert producer.flush(10) == 0
        for ts in (5000, 9000, 7000):
            producer.produce(unique_topic, value=b"p1-%d" % ts, partition=1, timestamp=ts)
            assert producer.flush(10) == 0
    finally:
        del producer
    p0, p1, p2 = (TopicPartition(unique_topic, p) for p in range(3))
    consumer = consumer_for(broker.bootstrap_servers)
    try:
        def lookup(partition: int, ts: int) -> int:
            (tp,) = consumer.offsets_for_times([TopicPartition(unique_topic, partition, ts)], timeout=10)
            assert tp.error is None
            return tp.offset

        assert lookup(0, 2500) == 2
        assert lookup(0, 1000) == 0
        assert lookup(1, 8000) == 1  # earliest offset with timestamp >= 8000
        assert lookup(0, 10_001) == -1
        assert lookup(1, 9001) == -1
        assert lookup(2, 0) == -1
        assert [consumer.get_watermark_offsets(tp, timeout=10) for tp in (p0, p1, p2)] == [(0, 10), (0, 3), (0, 0)]
    finally:
        consumer.close()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})

    def list_offsets(spec) -> list[tuple[int, int]]:
        futures = admin.list_offsets({tp: spec for tp in (p0, p1, p2)}, request_timeout=10)
        return [(r.offset, r.timestamp) for r in
                (futures[tp].result(timeout=15) for tp in sorted(futures, key=lambda t: t.partition))]

    assert [o for o, _ in list_offsets(OffsetSpec.earliest())] == [0, 0, 0]
    assert [o for o, _ in list_offsets(OffsetSpec.latest())] == [10, 3, 0]
    assert list_offsets(OffsetSpec.for_timestamp(2500)) == [(2, 3000), (0, 5000), (-1, -1)]
    assert list_offsets(OffsetSpec.for_timestamp(8000)) == [(7, 8000), (1, 9000), (-1, -1)]
    # ListOffsets with timestamp -3 (MAX_TIMESTAMP): the record with the largest timestamp, not the last one.
    assert list_offsets(OffsetSpec.max_timestamp()) == [(9, 10_000), (1, 9000), (-1, -1)]


def test_auto_create_topic_on_producer_metadata(broker_factory, unique_topic):
    """A producer's metadata request may create a topic (allow.auto.create.topics defaults to true for producers)."""
    broker = broker_factory(num_partitions=3)
    metadata = Producer({"bootstrap.servers": broker.bootstrap_servers}).list_topics(unique_topic, timeout=10)
    topic = metadata.topics[unique_topic]
    assert topic.error is None
    assert sorted(topic.partitions) == [0, 1, 2]
    acked = produce(broker.bootstrap_servers, unique_topic, [Record(2, b"k", b"v", (), 1_700_000_000_000)])
    assert acked == [(2, 0)]


def test_unknown_topic_without_auto_create(broker_factory, unique_topic):
    broker = broker_factory(auto_create_topics_enable="false")
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "topic.metadata.propagation.max.ms": 1000,
                         "message.timeout.ms": 5000})
    errors = []
    try:
        topic = producer.list_topics(unique_topic, timeout=10).topics[unique_topic]
        assert topic.error is not None and topic.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
        producer.produce(unique_topic, value=b"v", on_delivery=lambda err, msg: errors.append(err))
        assert producer.flush(15) == 0
    finally:
        del producer
    assert len(errors) == 1 and errors[0] is not None
    assert errors[0].code() in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    assert unique_topic not in admin.list_topics(timeout=10).topics
