"""A broker process restarted cleanly or after kill -9 keeps every acknowledged record and its offsets."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

PARTITIONS = 3
SMALL_BATCHES = {"batch.size": 16384}  # so no batch outgrows a test's small segment.bytes


def create(bootstrap: str, topic: str, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1, config=configs)])[topic].result(20)


def produce_acked(bootstrap: str, topic: str, count: int, start: int = 0, **conf) -> dict[tuple[int, int], bytes]:
    """Produce with acks=1; returns {(partition, offset): value} of every acknowledged record."""
    acked: dict[tuple[int, int], bytes] = {}

    def on_delivery(err, msg):
        if err is None:
            acked[(msg.partition(), msg.offset())] = msg.value()

    producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5, **conf})
    for i in range(start, start + count):
        producer.produce(topic, value=b"value-%06d" % i, key=b"k%d" % i, partition=i % PARTITIONS,
                         on_delivery=on_delivery)
        if i % 500 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0
    return acked


def consume_all(bootstrap: str, topic: str, expected: int) -> dict[tuple[int, int], bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "durability", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got: dict[tuple[int, int], bytes] = {}
    for _ in range(200):
        for msg in consumer.consume(1000, 0.2):
            assert msg.error() is None, msg.error()
            got[(msg.partition(), msg.offset())] = msg.value()
        if len(got) >= expected:
            break
    consumer.close()
    return got


@pytest.mark.parametrize("stop", ["clean", "kill -9"])
def test_restart_keeps_acknowledged_records_and_offsets(broker_factory, stop):
    broker = broker_factory()
    create(broker.bootstrap_servers, "durable")
    acked = produce_acked(broker.bootstrap_servers, "durable", 3000)
    assert len(acked) == 3000
    if stop == "clean":
        assert broker.stop() == 0
    else:
        broker.kill()
    broker.start()
    assert consume_all(broker.bootstrap_servers, "durable", len(acked)) == acked
    more = produce_acked(broker.bootstrap_servers, "durable", 300, start=3000)
    for (partition, offset) in more:
        assert offset >= 1000, "offsets continue after the restart"
    assert consume_all(broker.bootstrap_servers, "durable", 3300) == {**acked, **more}


def test_torn_tail_after_kill_is_truncated_and_the_rest_kept(broker_factory):
    broker = broker_factory()
    create(broker.bootstrap_servers, "torn")
    acked = produce_acked(broker.bootstrap_servers, "torn", 900)
    broker.kill()
    segment = sorted(Path(broker.data_dir, "torn-0").glob("*.log"))[-1]
    with open(segment, "ab") as f:
        f.write(os.urandom(37))  # a write torn mid-batch by the crash
    broker.start()
    assert consume_all(broker.bootstrap_servers, "torn", len(acked)) == acked
    assert "torn-0" in broker.log_text()  # recovery says what it truncated
    more = produce_acked(broker.bootstrap_servers, "torn", 30, start=900)
    assert sorted(o for (p, o) in more if p == 0) == list(range(300, 310))


def test_clean_shutdown_writes_kafka_checkpoints(broker_factory):
    broker = broker_factory()
    create(broker.bootstrap_servers, "ckpt")
    produce_acked(broker.bootstrap_servers, "ckpt", 30)
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
    import time

    broker = broker_factory(log_flush_offset_checkpoint_interval_ms=200)
    create(broker.bootstrap_servers, "rolled", **{"segment.bytes": "32768"})
    assert len(produce_acked(broker.bootstrap_servers, "rolled", 12000, **SMALL_BATCHES)) == 12000
    checkpoint = Path(broker.data_dir, "recovery-point-offset-checkpoint")
    points: dict[str, int] = {}
    for _ in range(100):
        if checkpoint.exists():
            rows = [line.split() for line in checkpoint.read_text().splitlines()[2:]]
            points = {f"{t}-{p}": int(o) for t, p, o in rows if t == "rolled"}
            if len(points) == PARTITIONS and all(v > 0 for v in points.values()):
                break
        time.sleep(0.1)
    for partition in range(PARTITIONS):
        segments = sorted(Path(broker.data_dir, f"rolled-{partition}").glob("*.log"))
        assert len(segments) > 1
        active_base = int(segments[-1].name.split(".")[0])
        assert points[f"rolled-{partition}"] == active_base
    broker.kill()


def test_a_failing_checkpoint_write_is_logged_and_the_broker_keeps_serving(broker_factory):
    import time

    broker = broker_factory(log_flush_offset_checkpoint_interval_ms=100)
    create(broker.bootstrap_servers, "steady")
    blocker = Path(broker.data_dir, "recovery-point-offset-checkpoint.tmp")
    blocker.mkdir()  # the atomic write's temp file cannot be created: every checkpoint fails with an OSError
    for _ in range(100):
        if "checkpoint failed" in broker.log_text():
            break
        time.sleep(0.05)
    assert "checkpoint failed" in broker.log_text()
    assert len(produce_acked(broker.bootstrap_servers, "steady", 30)) == 30
    blocker.rmdir()
    assert broker.stop() == 0
    assert "steady 0 10" in Path(broker.data_dir, "recovery-point-offset-checkpoint").read_text()
