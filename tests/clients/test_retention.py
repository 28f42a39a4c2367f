"""Retention by time and by size deletes whole old segments and moves the log start offset; consumers
from the beginning then start there."""
from __future__ import annotations

from contextlib import suppress
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

from tests.helpers import SMALL_BATCHES, admin_create_topic, produce_acked, wait_until

PARTITIONS = 3


def watermarks(bootstrap: str, topic: str, partition: int) -> tuple[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "retention"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
    finally:
        consumer.close()


def segments(broker, topic: str, partition: int) -> list[tuple[int, int]]:
    """(base offset, bytes) of each segment file, oldest first; a file deleted while this looks is left out."""
    found = []
    for path in Path(broker.data_dir, f"{topic}-{partition}").glob("*.log"):
        with suppress(FileNotFoundError):
            found.append((int(path.name.split(".")[0]), path.stat().st_size))
    return sorted(found)


def test_retention_ms_deletes_old_segments(broker_factory):
    broker = broker_factory(log_retention_check_interval_ms=200)
    admin_create_topic(broker.bootstrap_servers, "timed", PARTITIONS,
                       **{"internal.segment.bytes": "32768", "retention.ms": "1500"})
    acked = produce_acked(broker.bootstrap_servers, "timed", 9000, partitions=PARTITIONS, **SMALL_BATCHES)
    assert len(acked) == 9000

    def log_starts_at_first_segment() -> bool:
        low, _high = watermarks(broker.bootstrap_servers, "timed", 0)
        return low > 0 and segments(broker, "timed", 0)[0][0] == low

    # Segments pass retention.ms one check after another: wait for a moment the log start and files agree.
    wait_until(log_starts_at_first_segment, interval=0.2, message="retention to delete old segments of timed-0")
    _low, high = watermarks(broker.bootstrap_servers, "timed", 0)
    assert high == 3000, "retention never deletes what is past the high watermark nor renumbers offsets"


def test_retention_bytes_keeps_the_newest_segments(broker_factory):
    broker = broker_factory(log_retention_check_interval_ms=200)
    admin_create_topic(broker.bootstrap_servers, "sized", PARTITIONS,
                       **{"internal.segment.bytes": "32768", "retention.bytes": "65536"})
    acked = produce_acked(broker.bootstrap_servers, "sized", 15000, partitions=PARTITIONS, **SMALL_BATCHES)
    assert len(acked) == 15000
    low = 0

    def trimmed_to_size() -> bool:
        nonlocal low
        low, _high = watermarks(broker.bootstrap_servers, "sized", 1)
        kept = segments(broker, "sized", 1)
        size = sum(size for _base, size in kept)
        # Done when the log start and files agree and deleting the oldest segment would go below retention.bytes.
        return low > 0 and kept[0][0] == low and size - kept[0][1] < 65536

    wait_until(trimmed_to_size, interval=0.2, message="retention.bytes to trim sized-1")
    assert sum(size for _base, size in segments(broker, "sized", 1)) <= 65536 + 32768
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "from-start",
                         "auto.offset.reset": "earliest"})
    first: list[int] = []

    def consumed_one() -> bool:
        first.extend(m.offset() for m in consumer.consume(10, 0.2) if m.error() is None)
        return bool(first)

    try:
        consumer.assign([TopicPartition("sized", 1, -2)])  # OFFSET_BEGINNING
        wait_until(consumed_one, interval=0, message="a record of sized-1 from the beginning")
    finally:
        consumer.close()
    assert first[0] == low
