"""kafka-python (3.x) against a real minikafka process: data path, idempotence, offsets by time, metadata."""
from __future__ import annotations

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import OffsetSpec
from kafka.errors import KafkaTimeoutError, UnknownTopicOrPartitionError
from kafka.protocol.metadata.metadata import MetadataRequest
from kafka.protocol.producer.produce import ProduceRequest
from kafka.protocol.producer.transaction import InitProducerIdRequest
from kafka.record.memory_records import MemoryRecordsBuilder

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

NONE = 0
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
UNKNOWN_TOPIC_OR_PARTITION = 3


def admin_client(bootstrap: str) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)


def create_topic(bootstrap: str, topic: str, partitions: int, configs: dict[str, str] | None = None) -> None:
    admin = admin_client(bootstrap)
    try:
        admin.create_topics({topic: {"num_partitions": partitions, "replication_factor": 1,
                                     "configs": configs or {}}})
    finally:
        admin.close()


def produce(bootstrap: str, topic: str, records: list[Record], **config) -> list[tuple[int, int]]:
    """Send every record with its explicit partition and timestamp; returns the acknowledged (partition, offset)."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, **config)
    try:
        futures = [producer.send(topic, key=r.key, value=r.value, headers=list(r.headers), partition=r.partition,
                                 timestamp_ms=r.timestamp) for r in records]
        producer.flush(timeout=PRODUCE_TIMEOUT_S)
        metadata = [f.get(timeout=PRODUCE_TIMEOUT_S) for f in futures]
    finally:
        producer.close(timeout=10)
    return [(m.partition, m.offset) for m in metadata]


def consume_all(bootstrap: str, topic: str, partitions: int, count: int) -> list[Consumed]:
    """Read partitions from their beginning with manual assignment (no group) until `count` records arrived."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="earliest", fetch_max_wait_ms=100)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)

        def poll() -> list[Consumed]:
            out = []
            for messages in consumer.poll(timeout_ms=200).values():
                out.extend(Consumed(m.offset, Record(m.partition, m.key, m.value, normalize_headers(m.headers),
                                                     m.timestamp)) for m in messages)
            return out

        return collect(poll, count)
    finally:
        consumer.close(autocommit=False)


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    try:
        return {tp.partition: o for tp, o in
                consumer.end_offsets([TopicPartition(topic, p) for p in range(partitions)]).items()}
    finally:
        consumer.close(autocommit=False)


@pytest.mark.parametrize("codec", CODECS)
def test_produce_consume_every_codec(broker, unique_topic, codec):
    records = make_records()
    create_topic(broker.bootstrap_servers, unique_topic, PARTITIONS)
    acked = produce(broker.bootstrap_servers, unique_topic, records,
                    compression_type=None if codec == "none" else codec, linger_ms=5, batch_size=128 * 1024)
    assert_produce_offsets(records, acked)
    consumed = consume_all(broker.bootstrap_servers, unique_topic, PARTITIONS, len(records))
    assert_consumed_equal(records, consumed)
    assert end_offsets(broker.bootstrap_servers, unique_topic, PARTITIONS) == {
        p: len(rs) for p, rs in by_partition(records).items()}
    assert_stored_codec(broker.bootstrap_servers, unique_topic, records, codec)


def test_idempotent_producer_lands_exactly_once_in_order(broker, unique_topic):
    records = make_records(count=3000, partitions=2)
    create_topic(broker.bootstrap_servers, unique_topic, 2)
    acked = produce(broker.bootstrap_servers, unique_topic, records, enable_idempotence=True, acks="all",
                    linger_ms=2, batch_size=16 * 1024, max_in_flight_requests_per_connection=5)
    assert_produce_offsets(records, acked)
    assert_consumed_equal(records, consume_all(broker.bootstrap_servers, unique_topic, 2, len(records)))
    # InitProducerId gave the producer an id, and every batch carries it with sequence numbers dense from 0.
    with RawConnection(broker.bootstrap_servers) as raw:
        producer_ids = set()
        for partition, expected in by_partition(records).items():
            batches = fetch_batches(raw, unique_topic, partition, len(expected))
            sequence = 0
            for batch in batches:
                producer_ids.add((batch.producer_id, batch.producer_epoch))
                assert batch.base_sequence == sequence
                sequence += batch.records_count
            assert sequence == len(expected)
    assert len(producer_ids) == 1
    (producer_id, epoch), = producer_ids
    assert producer_id >= 0 and epoch >= 0


def _idempotent_batch(producer_id: int, epoch: int, base_sequence: int, values: list[bytes]) -> bytes:
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20, producer_id=producer_id,
                                   producer_epoch=epoch, base_sequence=base_sequence)
    for i, value in enumerate(values):
        builder.append(timestamp=1_000 + i, key=None, value=value, headers=[])
    builder.close()
    return builder.buffer()


def _produce_raw(raw: RawConnection, topic: str, batch: bytes) -> tuple[int, int]:
    P = ProduceRequest[9]
    TD = P.TopicProduceData
    request = P(transactional_id=None, acks=-1, timeout_ms=10_000, topic_data=[
        TD(name=topic, partition_data=[TD.PartitionProduceData(index=0, records=batch)])])
    part = raw.request(request).responses[0].partition_responses[0]
    return part.error_code, part.base_offset


def test_idempotent_sequence_checks_on_the_wire(broker, unique_topic):
    """What an idempotent producer relies on when it retries: duplicates are not appended, gaps are refused."""
    create_topic(broker.bootstrap_servers, unique_topic, 1)
    with RawConnection(broker.bootstrap_servers) as raw:
        init = [raw.request(InitProducerIdRequest[4](transactional_id=None, transaction_timeout_ms=60_000))
                for _ in range(2)]
        assert [r.error_code for r in init] == [NONE, NONE]
        assert init[0].producer_id >= 0 and init[0].producer_id != init[1].producer_id
        pid, epoch = init[0].producer_id, init[0].producer_epoch

        first = _idempotent_batch(pid, epoch, 0, [b"a", b"b", b"c"])
        assert _produce_raw(raw, unique_topic, first) == (NONE, 0)
        # A retry of the same batch is acknowledged with its original offset and not written again.
        assert _produce_raw(raw, unique_topic, first) == (NONE, 0)
        # A gap in the sequence is refused.
        code, _ = _produce_raw(raw, unique_topic, _idempotent_batch(pid, epoch, 5, [b"x"]))
        assert code == OUT_OF_ORDER_SEQUENCE_NUMBER
        assert _produce_raw(raw, unique_topic, _idempotent_batch(pid, epoch, 3, [b"d", b"e"])) == (NONE, 3)
        # Another producer id has its own sequence space.
        other = init[1]
        assert _produce_raw(raw, unique_topic,
                            _idempotent_batch(other.producer_id, other.producer_epoch, 0, [b"f"])) == (NONE, 5)
        batches = fetch_batches(raw, unique_topic, 0, 6)
    values = [r.value for b in batches for r in b]
    assert values == [b"a", b"b", b"c", b"d", b"e", b"f"]


def test_offsets_for_times_and_watermarks(broker, unique_topic):
    """p0: timestamps 1000..10000 ascending; p1: 5000, 9000, 7000 (max not last); p2: empty."""
    create_topic(broker.bootstrap_servers, unique_topic, 3, {"retention.ms": "-1"})
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, linger_ms=0)
    try:
        for i in range(10):
            producer.send(unique_topic, value=b"p0-%d" % i, partition=0, timestamp_ms=1000 * (i + 1))
            if i % 4 == 3:
                producer.flush(timeout=10)  # several batches, so lookups cross batch boundaries
        for ts in (5000, 9000, 7000):
            producer.send(unique_topic, value=b"p1-%d" % ts, partition=1, timestamp_ms=ts)
            producer.flush(timeout=10)
    finally:
        producer.close(timeout=10)
    p0, p1, p2 = (TopicPartition(unique_topic, p) for p in range(3))
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=None, enable_auto_commit=False)
    try:
        found = consumer.offsets_for_times({p0: 2500, p1: 8000, p2: 0})
        assert (found[p0].offset, found[p0].timestamp) == (2, 3000)
        assert (found[p1].offset, found[p1].timestamp) == (1, 9000)  # earliest offset with timestamp >= 8000
        assert found[p2] is None
        found = consumer.offsets_for_times({p0: 1000, p1: 0})
        assert (found[p0].offset, found[p0].timestamp) == (0, 1000)
        assert (found[p1].offset, found[p1].timestamp) == (0, 5000)
        beyond = consumer.offsets_for_times({p0: 10_001, p1: 9001})
        assert beyond == {p0: None, p1: None}
        assert consumer.beginning_offsets([p0, p1, p2]) == {p0: 0, p1: 0, p2: 0}
        assert consumer.end_offsets([p0, p1, p2]) == {p0: 10, p1: 3, p2: 0}
    finally:
        consumer.close(autocommit=False)
    admin = admin_client(broker.bootstrap_servers)
    try:
        latest = admin.list_partition_offsets({p0: OffsetSpec.LATEST, p1: OffsetSpec.LATEST})
        earliest = admin.list_partition_offsets({p0: OffsetSpec.EARLIEST, p1: OffsetSpec.EARLIEST})
        assert (latest[p0].offset, latest[p1].offset) == (10, 3)
        assert (earliest[p0].offset, earliest[p1].offset) == (0, 0)
        # ListOffsets with timestamp -3 (MAX_TIMESTAMP): the record with the largest timestamp, not the last one.
        largest = admin.list_partition_offsets({p0: OffsetSpec.MAX_TIMESTAMP, p1: OffsetSpec.MAX_TIMESTAMP})
        assert (largest[p0].offset, largest[p0].timestamp) == (9, 10_000)
        assert (largest[p1].offset, largest[p1].timestamp) == (1, 9000)
        empty = admin.list_partition_offsets({p2: OffsetSpec.MAX_TIMESTAMP})
        assert (empty[p2].offset, empty[p2].timestamp) == (-1, -1)
    finally:
        admin.close()


def test_auto_create_topic_on_first_produce(broker_factory, unique_topic):
    broker = broker_factory(num_partitions=3)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, max_block_ms=10_000)
    try:
        metadata = producer.send(unique_topic, key=b"k", value=b"v").get(timeout=10)
        assert producer.partitions_for(unique_topic) == {0, 1, 2}
    finally:
        producer.close(timeout=10)
    assert metadata.offset == 0
    admin = admin_client(broker.bootstrap_servers)
    try:
        (described,) = admin.describe_topics([unique_topic])
    finally:
        admin.close()
    assert described["error_code"] == NONE
    assert sorted(p["partition_index"] for p in described["partitions"]) == [0, 1, 2]
    consumed = consume_all(broker.bootstrap_servers, unique_topic, 3, 1)
    assert [(c.offset, c.record.key, c.record.value) for c in consumed] == [(0, b"k", b"v")]


def test_unknown_topic_without_auto_create(broker_factory, unique_topic):
    broker = broker_factory(auto_create_topics_enable="false")
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, max_block_ms=3000)
    try:
        with pytest.raises((KafkaTimeoutError, UnknownTopicOrPartitionError)):
            producer.send(unique_topic, value=b"v").get(timeout=10)
    finally:
        producer.close(timeout=10)
    with RawConnection(broker.bootstrap_servers) as raw:
        M = MetadataRequest[12]
        response = raw.request(M(topics=[M.MetadataRequestTopic(name=unique_topic)], allow_auto_topic_creation=True))
    (topic,) = response.topics
    assert (topic.name, topic.error_code, topic.partitions) == (unique_topic, UNKNOWN_TOPIC_OR_PARTITION, [])
    admin = admin_client(broker.bootstrap_servers)
    try:
        assert unique_topic not in admin.list_topics()
    finally:
        admin.close()
