"""A broker process restarted cleanly or after kill -9 keeps every acknowledged record and its offsets."""
from __future__ import annotations

import os
from contextlib import suppress
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.helpers import SMALL_BATCHES, admin_create_topic, produce_acked, wait_until

PARTITIONS = 3


def consume_all(bootstrap: str, topic: str, expected: int) -> dict[tuple[int, int], bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "durability", "enable.auto.commit": False})
    got: dict[tuple[int, int], bytes] = {}

    def enough() -> bool:
        for msg in consumer.consume(1000, 0.2):
            assert msg.error() is None, msg.error()
            got[(msg.partition(), msg.offset())] = msg.value()
        return len(got) >= expected

    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        with suppress(TimeoutError):  # the caller's comparison says what is missing
            wait_until(enough, interval=0, message=f"{expected} records of {topic}")
    finally:
        consumer.close()
    return got


@pytest.mark.parametrize("stop", ["clean", "kill -9"])
def test_restart_keeps_acknowledged_records_and_offsets(broker_factory, stop):
    broker = broker_factory()
    admin_create_topic(broker.bootstrap_servers, "durable", PARTITIONS)
    acked = produce_acked(broker.bootstrap_servers, "durable", 3000, partitions=PARTITIONS)
    assert len(acked) == 3000
    if stop == "clean":
        assert broker.stop() == 0
    else:
        broker.kill()
    broker.start()
    assert consume_all(broker.bootstrap_servers, "durable", len(acked)) == acked
    more = produce_acked(broker.bootstrap_servers, "durable", 300, partitions=PARTITIONS, start=3000)
    assert all(offset >= 1000 for (_partition, offset) in more), "offsets continue after the restart"
    assert consume_all(broker.bootstrap_servers, "durable", 3300) == {**acked, **more}


def test_torn_tail_after_kill_is_truncated_and_the_rest_kept(broker_factory):
    broker = broker_factory()
    admin_create_topic(broker.bootstrap_servers, "torn", PARTITIONS)
    acked = produce_acked(broker.bootstrap_servers, "torn", 900, partitions=PARTITIONS)
    broker.kill()
    segment = sorted(Path(broker.data_dir, "torn-0").glob("*.log"))[-1]
    with open(segment, "ab") as f:
        f.write(os.urandom(37))  # a write torn mid-batch by the crash
    broker.start()
    assert consume_all(broker.bootstrap_servers, "torn", len(acked)) == acked
    assert "torn-0" in broker.log_path.read_text()  # recovery says what it truncated
    more = produce_acked(broker.bootstrap_servers, "torn", 30, partitions=PARTITIONS, start=900)
    assert sorted(o for (p, o) in more if p == 0) == list(range(300, 310))


def test_clean_shutdown_writes_kafka_checkpoints(broker_factory):
    broker = broker_factory()
    admin_create_topic(broker.bootstrap_servers, "ckpt", PARTITIONS)
    produce_acked(broker.bootstrap_servers, "ckpt", 30, partitions=PARTITIONS)
    assert broker.stop() == 0
    data = Path(broker.data_dir)
    lines = (data / "recovery-point-offset-checkpoint").read_text().splitlines()
    assert lines[0] == "0" and int(lines[1]) == len(lines) - 2
    assert {"ckpt 0 10", "ckpt 1 10", "ckpt 2 10"} <= set(lines[2:])
    hw = (data / "replication-offset-checkpoint").read_text().splitlines()
    assert {"ckpt 0 10", "ckpt 1 10", "ckpt 2 10"} <= set(hw[2:])
    assert (data / "ckpt-0" / "00000000000000000000.log").exists()
    assert (data / "ckpt-0" / "00000000000000000000.index").exists()
    assert (data / "ckpt-0" / "00000000000000000000.timeindex").exists()
    assert (data / "ckpt-0" / "leader-epoch-checkpoint").read_text().splitlines()[:3] == ["0", "1", "0 0"]
    assert (data / "ckpt-0" / "partition.metadata").read_text().startswith("version: 0\ntopic_id: ")
    props = (data / "meta.properties").read_text()
    assert "node.id=1" in props and "cluster.id=" in props


def test_recovery_point_follows_rolled_segments_without_a_clean_stop(broker_factory):
    broker = broker_factory(log_flush_offset_checkpoint_interval_ms=200)
    admin_create_topic(broker.bootstrap_servers, "rolled", PARTITIONS, **{"internal.segment.bytes": "32768"})
    acked = produce_acked(broker.bootstrap_servers, "rolled", 12000, partitions=PARTITIONS, **SMALL_BATCHES)
    assert len(acked) == 12000
    checkpoint = Path(broker.data_dir, "recovery-point-offset-checkpoint")

    def recovery_points() -> dict[str, int]:
        rows = [line.split() for line in checkpoint.read_text().splitlines()[2:]] if checkpoint.exists() else []
        return {f"{t}-{p}": int(o) for t, p, o in rows if t == "rolled"}

    def active_segment_bases() -> dict[str, int]:
        segments = {p: sorted(Path(broker.data_dir, f"rolled-{p}").glob("*.log")) for p in range(PARTITIONS)}
        assert all(len(s) > 1 for s in segments.values()), f"every partition should have rolled: {segments}"
        return {f"rolled-{p}": int(s[-1].name.split(".")[0]) for p, s in segments.items()}

    # A checkpoint written while the producer ran (or before the last rolled segment was flushed) holds an earlier
    # segment's base; the one written after the last roll holds the active segment's.
    wait_until(lambda: recovery_points() == active_segment_bases(),
               message="the recovery point of every partition to be its active segment's base offset")
    assert all(point > 0 for point in recovery_points().values())
    broker.kill()


def test_a_failing_checkpoint_write_is_logged_and_the_broker_keeps_serving(broker_factory):
    broker = broker_factory(log_flush_offset_checkpoint_interval_ms=100)
    admin_create_topic(broker.bootstrap_servers, "steady", PARTITIONS)
    blocker = Path(broker.data_dir, "recovery-point-offset-checkpoint.tmp")
    blocker.mkdir()  # the atomic write's temp file cannot be created: every checkpoint fails with an OSError
    wait_until(lambda: "checkpoint failed" in broker.log_path.read_text(), message="a logged checkpoint failure")
    assert len(produce_acked(broker.bootstrap_servers, "steady", 30, partitions=PARTITIONS)) == 30
    blocker.rmdir()
    assert broker.stop() == 0
    assert "steady 0 10" in Path(broker.data_dir, "recovery-point-offset-checkpoint").read_text()
