"""Kafka helpers for the Spark tests: topics, producing, reading back (kafka-python), transactions (confluent-kafka)."""

from __future__ import annotations

import socket
from collections.abc import Iterable, Sequence
from contextlib import suppress
from typing import NamedTuple

from confluent_kafka import KafkaError, Message, Producer
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


Row = tuple[int, int, str]  # partition, offset, value


class TransactionalTopic(NamedTuple):
    """What `produce_transactions` wrote, as (partition, offset, value) rows sorted by partition and offset."""

    committed: list[Row]  # what read_committed reads: committed records before the last stable offset
    aborted: list[Row]
    uncommitted: list[Row]  # what read_uncommitted reads: every record, the open transaction's too
    ends: dict[int, tuple[int, int]]  # partition: (last stable offset, high watermark)
    open_producer: Producer  # its transaction is still open


TXN_PARTITIONS = 3


def _transactional_producer(bootstrap: str, transactional_id: str) -> Producer:
    # The open transaction must outlive a test's reads: the coordinator aborts it only after this timeout.
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                         "transaction.timeout.ms": 600_000})
    producer.init_transactions(30)
    return producer


def produce_transactions(bootstrap: str, topic: str) -> TransactionalTopic:
    """Committed and aborted transactions over TXN_PARTITIONS partitions, then one left open.

    Every transaction ends in a marker that takes an offset in each partition it wrote. Aborted
    records are flushed before the abort, so they are in the log. Partition 1's last transaction
    before the open one is aborted, so its last stable offset comes right after an abort marker.
    Committed records written after the open transaction began on partitions 0 and 1 lie past
    their last stable offset; partition 2 has no open transaction and ends with a commit marker.
    """
    create_topic(bootstrap, topic, partitions=TXN_PARTITIONS)
    written: dict[str, list[Row]] = {"committed": [], "aborted": [], "open": []}

    def send(producer: Producer, prefix: str, count: int, partitions: Sequence[int], fate: str) -> None:
        def delivered(error: KafkaError | None, message: Message) -> None:
            assert error is None, error
            written[fate].append((message.partition(), message.offset(), message.value().decode()))

        producer.begin_transaction()
        for i in range(count):
            value = f"{prefix}-{i}".encode()
            producer.produce(topic, value=value, partition=partitions[i % len(partitions)], on_delivery=delivered)
        producer.flush(30)
        if fate == "aborted":
            producer.abort_transaction(30)
        elif fate == "committed":
            producer.commit_transaction(30)

    everywhere = range(TXN_PARTITIONS)
    producer = _transactional_producer(bootstrap, f"{topic}-tx")
    send(producer, "committed", 12, everywhere, "committed")
    send(producer, "aborted", 6, everywhere, "aborted")
    send(producer, "committed-again", 6, everywhere, "committed")
    send(producer, "aborted-in-1", 4, [1], "aborted")
    open_producer = _transactional_producer(bootstrap, f"{topic}-open-tx")
    send(open_producer, "open", 4, [0, 1], "open")
    send(producer, "late", 6, everywhere, "committed")

    every = sorted(row for rows in written.values() for row in rows)
    high = {p: max(o for p_, o, _ in every if p_ == p) + 2 for p in everywhere}  # the last commit marker's + 1
    stable = {p: min((o for p_, o, _ in written["open"] if p_ == p), default=high[p]) for p in everywhere}
    committed = sorted(row for row in written["committed"] if row[1] < stable[row[0]])
    return TransactionalTopic(committed, sorted(written["aborted"]), every,
                              {p: (stable[p], high[p]) for p in everywhere}, open_producer)
