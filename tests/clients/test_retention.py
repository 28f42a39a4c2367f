"""Retention by time and by size deletes whole old segments and moves the log start offset; consumers
from the beginning then start there."""
from __future__ import annotations

import time
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

from tests.clients.test_durability import SMALL_BATCHES, create, produce_acked


def watermarks(bootstrap: str, topic: str, partition: int) -> tuple[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "retention"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
    finally:
        consumer.close()


def wait_for_log_start(bootstrap: str, topic: str, partition: int, timeout_s: float = 20) -> int:
    deadline = time.monotonic() + timeout_s
    low = 0
    while time.monotonic() < deadline:
        low, _high = watermarks(bootstrap, topic, partition)
        if low > 0:
            break
        time.sleep(0.2)
    return low


def test_retention_ms_deletes_old_segments(broker_factory):
    broker = broker_factory(log_retention_check_interval_ms=200)
    create(broker.bootstrap_servers, "timed", **{"segment.bytes": "32768", "retention.ms": "1500"})
    assert len(produce_acked(broker.bootstrap_servers, "timed", 9000, **SMALL_BATCHES)) == 9000
    low = wait_for_log_start(broker.bootstrap_servers, "timed", 0)
    segments = sorted(Path(broker.data_dir, "timed-0").glob("*.log"))
    assert low > 0 and int(segments[0].name.split(".")[0]) == low
    _low, high = watermarks(broker.bootstrap_servers, "timed", 0)
    assert high == 3000, "retention never deletes what is past the high watermark nor renumbers offsets"


def test_retention_bytes_keeps_the_newest_segments(broker_factory):
    broker = broker_factory(log_retention_check_interval_ms=200)
    create(broker.bootstrap_servers, "sized", **{"segment.bytes": "32768", "retention.bytes": "65536"})
    assert len(produce_acked(broker.bootstrap_servers, "sized", 15000, **SMALL_BATCHES)) == 15000
    low = wait_for_log_start(broker.bootstrap_servers, "sized", 1)
    size = sum(p.stat().st_size for p in Path(broker.data_dir, "sized-1").glob("*.log"))
    assert low > 0 and size <= 65536 + 32768
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "from-start",
                         "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition("sized", 1, -2)])  # OFFSET_BEGINNING
    first = None
    for _ in range(50):
        msgs = [m for m in consumer.consume(10, 0.2) if m.error() is None]
        if msgs:
            first = msgs[0].offset()
            break
    consumer.close()
    assert first == low
