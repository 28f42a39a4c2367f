"""Kafka helpers for the Spark tests, on kafka-python: topics, producing, reading back."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterable

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(condition: Callable[[], bool], timeout: float, what: str, interval: float = 0.5) -> None:
    """Poll `condition` until true; a bounded loop that fails with `what` on timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


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
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and any(consumer.position(tp) < ends[tp] for tp in tps):
            for batch in consumer.poll(timeout_ms=500).values():
                records.extend(batch)
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
