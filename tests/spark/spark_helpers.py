"""Kafka helpers for the Spark tests, on kafka-python: topics, producing, reading back."""

from __future__ import annotations

import socket
from collections.abc import Iterable
from contextlib import suppress

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

from tests.helpers import wait_until


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def create_topic(bootstrap: str, topic: str, partitions: int = 1) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])
    finally:
        admin.close()


def produce(
    bootstrap: str, topic: str, records: Iterable[dict], **producer_config
) -> list:
    """Send records (dicts of send() arguments) and return their RecordMetadata, in order."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, **producer_config)
    try:
        futures = [producer.send(topic, **record) for record in records]
        producer.flush()
        return [f.get(timeout=30) for f in futures]
    finally:
        producer.close()


def consume_all(bootstrap: str, topic: str, expected: int | None = None, timeout: float = 30) -> list:
    """Every record of `topic` (all partitions, from the beginning), sorted by partition and offset."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    try:
        tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        ends = consumer.end_offsets(tps)
        records: list = []

        def read_to_the_end() -> bool:
            if all(consumer.position(tp) >= ends[tp] for tp in tps):
                return True
            for batch in consumer.poll(timeout_ms=500).values():
                records.extend(batch)
            return False

        with suppress(TimeoutError):  # the count check below, or the caller's, says what is missing
            wait_until(read_to_the_end, timeout, interval=0, message=f"the end of {topic}")
        if expected is not None:
            assert len(records) == expected, f"{topic}: {len(records)} records, expected {expected}"
        return sorted(records, key=lambda r: (r.partition, r.offset))
    finally:
        consumer.close()


def delete_records(bootstrap: str, topic: str, partition: int, before: int) -> None:
    """DeleteRecords: make `before` the log start offset of the partition."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.delete_records({TopicPartition(topic, partition): before})
    finally:
        admin.close()
