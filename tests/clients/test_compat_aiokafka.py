"""aiokafka against a real minikafka process: data path, idempotence, offsets by time, metadata.

The suite runs in pytest-trio's trio mode, so these are plain functions that run their asyncio code with
`asyncio.run` (trio mode only takes over `async def` tests).
"""
from __future__ import annotations

import asyncio
from contextlib import suppress

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaTimeoutError, UnknownTopicOrPartitionError

from tests.helpers import (
    CODECS,
    CONSUME_TIMEOUT_S,
    PARTITIONS,
    PRODUCE_TIMEOUT_S,
    Consumed,
    Record,
    assert_consumed_equal,
    assert_produce_offsets,
    assert_stored_codec,
    by_partition,
    fetch_batches,
    make_records,
    normalize_headers,
)
from tests.raw_client import RawConnection


async def create_topic(bootstrap: str, topic: str, partitions: int, configs: dict[str, str] | None = None) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    await admin.start()
    try:
        response = await admin.create_topics([NewTopic(topic, partitions, 1, topic_configs=configs or {})])
    finally:
        await admin.close()
    (result,) = response.topic_errors
    assert result[0] == topic and result[1] == 0, f"create {topic}: {result}"


async def produce(bootstrap: str, topic: str, records: list[Record], **config) -> list[tuple[int, int]]:
    """Send every record with its explicit partition and timestamp; returns the acknowledged (partition, offset)."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **config)
    await producer.start()
    try:
        futures = [await producer.send(topic, value=r.value, key=r.key, partition=r.partition,
                                       timestamp_ms=r.timestamp, headers=list(r.headers)) for r in records]
        metadata = await asyncio.wait_for(asyncio.gather(*futures), PRODUCE_TIMEOUT_S)
    finally:
        await producer.stop()
    return [(m.partition, m.offset) for m in metadata]


async def consume_all(bootstrap: str, topic: str, partitions: int, count: int) -> list[Consumed]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                auto_offset_reset="earliest", fetch_max_wait_ms=100)
    await consumer.start()
    out: list[Consumed] = []
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        with suppress(TimeoutError):  # the caller's assertion says what is missing
            async with asyncio.timeout(CONSUME_TIMEOUT_S):
                while len(out) < count:
                    for messages in (await consumer.getmany(timeout_ms=200)).values():
                        out.extend(Consumed(m.offset, Record(m.partition, m.key, m.value,
                                                             normalize_headers(m.headers), m.timestamp))
                                   for m in messages)
    finally:
        await consumer.stop()
    return out


async def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    await consumer.start()
    try:
        found = await consumer.end_offsets([TopicPartition(topic, p) for p in range(partitions)])
    finally:
        await consumer.stop()
    return {tp.partition: offset for tp, offset in found.items()}


@pytest.mark.parametrize("codec", CODECS)
def test_produce_consume_every_codec(broker, unique_topic, codec):
    records = make_records()

    async def scenario() -> None:
        bootstrap = broker.bootstrap_servers
        await create_topic(bootstrap, unique_topic, PARTITIONS)
        acked = await produce(bootstrap, unique_topic, records, compression_type=None if codec == "none" else codec,
                              linger_ms=5, max_batch_size=128 * 1024)
        assert_produce_offsets(records, acked)
        assert_consumed_equal(records, await consume_all(bootstrap, unique_topic, PARTITIONS, len(records)))
        assert await end_offsets(bootstrap, unique_topic, PARTITIONS) == {
            p: len(rs) for p, rs in by_partition(records).items()}

    asyncio.run(scenario())
    assert_stored_codec(broker.bootstrap_servers, unique_topic, records, codec)


def test_idempotent_producer_lands_exactly_once_in_order(broker, unique_topic):
    records = make_records(count=3000, partitions=2)

    async def scenario() -> None:
        bootstrap = broker.bootstrap_servers
        await create_topic(bootstrap, unique_topic, 2)
        acked = await produce(bootstrap, unique_topic, records, enable_idempotence=True, linger_ms=2,
                              max_batch_size=16 * 1024)
        assert_produce_offsets(records, acked)
        assert_consumed_equal(records, await consume_all(bootstrap, unique_topic, 2, len(records)))

    asyncio.run(scenario())
    with RawConnection(broker.bootstrap_servers) as raw:
        producer_ids = set()
        for partition, expected in by_partition(records).items():
            sequence = 0
            for batch in fetch_batches(raw, unique_topic, partition, len(expected)):
                producer_ids.add(batch.producer_id)
                assert batch.base_sequence == sequence
                sequence += batch.records_count
            assert sequence == len(expected)
    assert len(producer_ids) == 1 and min(producer_ids) >= 0


def test_offsets_for_times_and_watermarks(broker, unique_topic):
    """p0: timestamps 1000..10000 ascending; p1: 5000, 9000, 7000; p2: empty."""

    async def scenario() -> None:
        bootstrap = broker.bootstrap_servers
        await create_topic(bootstrap, unique_topic, 3, {"retention.ms": "-1"})
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
        await producer.start()
        try:
            for i in range(10):
                await producer.send_and_wait(unique_topic, value=b"p0-%d" % i, partition=0, timestamp_ms=1000 * (i + 1))
            for ts in (5000, 9000, 7000):
                await producer.send_and_wait(unique_topic, value=b"p1-%d" % ts, partition=1, timestamp_ms=ts)
        finally:
            await producer.stop()
        p0, p1, p2 = (TopicPartition(unique_topic, p) for p in range(3))
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
        await consumer.start()
        try:
            found = await consumer.offsets_for_times({p0: 2500, p1: 8000, p2: 0})
            assert (found[p0].offset, found[p0].timestamp) == (2, 3000)
            assert (found[p1].offset, found[p1].timestamp) == (1, 9000)  # earliest offset with timestamp >= 8000
            assert found[p2] is None
            assert await consumer.offsets_for_times({p0: 10_001, p1: 9001}) == {p0: None, p1: None}
            assert await consumer.beginning_offsets([p0, p1, p2]) == {p0: 0, p1: 0, p2: 0}
            assert await consumer.end_offsets([p0, p1, p2]) == {p0: 10, p1: 3, p2: 0}
        finally:
            await consumer.stop()

    asyncio.run(scenario())


def test_auto_create_topic_on_first_produce(broker_factory, unique_topic):
    broker = broker_factory(num_partitions=3)

    async def scenario() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=10_000)
        await producer.start()
        try:
            metadata = await producer.send_and_wait(unique_topic, key=b"k", value=b"v")
            assert await producer.partitions_for(unique_topic) == {0, 1, 2}
        finally:
            await producer.stop()
        assert metadata.offset == 0
        consumed = await consume_all(broker.bootstrap_servers, unique_topic, 3, 1)
        assert [(c.offset, c.record.key, c.record.value) for c in consumed] == [(0, b"k", b"v")]

    asyncio.run(scenario())


def test_unknown_topic_without_auto_create(broker_factory, unique_topic):
    broker = broker_factory(auto_create_topics_enable="false")

    async def scenario() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=3000)
        await producer.start()
        try:
            with pytest.raises((KafkaTimeoutError, UnknownTopicOrPartitionError)):
                await producer.send_and_wait(unique_topic, value=b"v")
        finally:
            await producer.stop()
        admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
        await admin.start()
        try:
            (described,) = await admin.describe_topics([unique_topic])
            assert unique_topic not in await admin.list_topics()
        finally:
            await admin.close()
        assert described["error_code"] == 3  # UNKNOWN_TOPIC_OR_PARTITION
        assert described["topic"] == unique_topic

    asyncio.run(scenario())
