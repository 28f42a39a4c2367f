"""Several log dirs per broker (JBOD): AlterReplicaLogDirs moves replicas between a broker's dirs while the partition
keeps serving, and DescribeLogDirs shows the dirs, the logs in them and a future log's lag while it moves.

The move test runs a producer (idempotent, acks=all) and a consumer through the moves of every replica of the
partition, the leader's included: no client may see an error, every acknowledged record must be in the log exactly
once at its acknowledged offset, the consumer must read exactly the log, and the moved replicas must hold the same
batches as one another, with nothing left in the dirs they left.
"""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from kafka.admin import KafkaAdminClient
from kafka.errors import NoError

import minikafka
from minikafka.protocol.errors import ErrorCode
from tests.cluster.cluster_modes import CLUSTER_MODES
from tests.cluster.replication_checks import (
    Acknowledgements,
    SteadyProducer,
    assert_acknowledged_exactly_once,
    assert_replicas_identical,
)
from tests.helpers import fetch, produce, produce_acked, wait_until
from tests.raw_client import RawConnection
from tests.record_bytes import values_batch

TOPIC = "moves"
WAIT_S = 60.0
BEFORE_MOVE = 3000  # acknowledged records before the moves start: several segments to copy
AFTER_MOVE = 1000  # acknowledged records after every move finished: the moved logs take appends


class TailingConsumer(threading.Thread):
    """confluent-kafka reading partition 0 from the beginning, as a consumer of the moving replica's leader."""

    def __init__(self, bootstrap_servers: str) -> None:
        super().__init__(name="tailing-consumer", daemon=True)
        self.values: list[tuple[int, bytes]] = []
        self.client_errors: list[Any] = []
        self.failure: BaseException | None = None
        self.target = -1  # read until past this offset once stop() is called
        self._stop_requested = threading.Event()
        self._consumer = Consumer({
            "bootstrap.servers": bootstrap_servers, "group.id": "log-dirs-verifier", "enable.auto.commit": False,
            "error_cb": self.client_errors.append,
        })

    def run(self) -> None:
        try:
            self._consumer.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
            while not (self._stop_requested.is_set() and self._reached_target()):
                msg = self._consumer.poll(0.2)
                if msg is None:
                    continue
                if msg.error() is not None:
                    if msg.error().code() != KafkaError._PARTITION_EOF:
                        self.client_errors.append(msg.error())
                    continue
                self.values.append((msg.offset(), msg.value()))
        except BaseException as exc:  # noqa: BLE001 - reported by finish()
            self.failure = exc
        finally:
            self._consumer.close()

    def _reached_target(self) -> bool:
        return self.target < 0 or bool(self.values) and self.values[-1][0] >= self.target

    def finish(self, last_offset: int) -> None:
        """Read up to `last_offset`, then stop."""
        self.target = last_offset
        self._stop_requested.set()
        self.join(WAIT_S)
        assert not self.is_alive(), f"the consumer did not reach offset {last_offset}"
        if self.failure is not None:
            raise self.failure

    def stop(self) -> None:
        """Stop now, whatever was read (after a failure elsewhere)."""
        self.target = -1
        self._stop_requested.set()
        self.join(WAIT_S)


def placement(admin: KafkaAdminClient, broker_id: int, topic: str,
              partitions: tuple[int, ...] = (0,)) -> dict[str, list[dict[str, Any]]]:
    """DescribeLogDirs of one broker: for each dir, the `partitions` of `topic` in it."""
    (answer,) = admin.describe_log_dirs(topic_partitions={topic: list(partitions)}, brokers=[broker_id])
    found: dict[str, list[dict[str, Any]]] = {}
    for result in answer["log_dirs"]:
        assert result["error_code"] == 0, result
        found[result["log_dir"]] = [p for t in result["topics"] if t["name"] == topic for p in t["partitions"]]
    return found


def moved_to(admin: KafkaAdminClient, broker_id: int, topic: str, target: str) -> bool:
    """The replica is in `target` only, with no future log left anywhere."""
    where = placement(admin, broker_id, topic)
    return all(bool(partitions) == (log_dir == target) and not any(p["is_future_key"] for p in partitions)
               for log_dir, partitions in where.items())


def move_every_replica(cluster: minikafka.Cluster, admin: KafkaAdminClient, acks: Acknowledgements,
                       sources: dict[int, str], targets: dict[int, str]) -> None:
    """Move each replica of the partition to its broker's other log dir while the clients run (noting where from
    and to), then let the moved logs take more appends."""
    wait_until(lambda: acks.count() >= BEFORE_MOVE, WAIT_S, message=f"{BEFORE_MOVE} acknowledged records")
    for broker in cluster.brokers:
        where = placement(admin, broker.node_id, TOPIC)
        (source,) = [d for d, partitions in where.items() if partitions]
        (target,) = [d for d in where if d != source]
        assert set(where) == {str(d) for d in broker.log_dirs}
        sources[broker.node_id], targets[broker.node_id] = source, target
    answers = admin.alter_replica_log_dirs({(TOPIC, 0, b): targets[b] for b in targets})
    assert all(error is NoError for error in answers.values()), answers
    for broker_id, target in targets.items():
        wait_until(lambda b=broker_id, t=target: moved_to(admin, b, TOPIC, t), WAIT_S,
                   message=f"the replica on broker {broker_id} moved to {target}")
    moved_at = acks.count()
    wait_until(lambda: acks.count() >= moved_at + AFTER_MOVE, WAIT_S, message="records acknowledged after the moves")


@pytest.mark.parametrize("zookeeper", CLUSTER_MODES)
def test_alter_replica_log_dirs_while_producing_and_consuming(tmp_path, zookeeper):
    with minikafka.Cluster(brokers=3, data_dir=tmp_path / "cluster", zookeeper=zookeeper, log_dirs=2) as cluster:
        cluster.state.create_topic(TOPIC, partitions=1, replication_factor=3,
                                   config={"min.insync.replicas": 2, "internal.segment.bytes": 65536})
        cluster.wait_for_isr(TOPIC, 0, 3, timeout=WAIT_S)
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
        acks = Acknowledgements()
        sources: dict[int, str] = {}
        targets: dict[int, str] = {}
        producer = SteadyProducer(cluster.bootstrap_servers, TOPIC, 1, acks, padding=40)
        consumer = TailingConsumer(cluster.bootstrap_servers)
        producer.start()
        consumer.start()
        try:
            try:
                move_every_replica(cluster, admin, acks, sources, targets)
            finally:
                producer.finish()
            consumer.finish(max(acks.of(0)))
        finally:
            consumer.stop()  # a no-op once it has finished; after a failure above, it stops the consumer
            admin.close()

        assert not producer.client_errors, producer.client_errors[:5]
        assert not consumer.client_errors, consumer.client_errors[:5]
        cluster.wait_for_replicas_caught_up(TOPIC, timeout=WAIT_S)
        records = cluster.state.records(TOPIC, 0, timeout_s=WAIT_S)
        assert_acknowledged_exactly_once(records, acks.of(0), f"{TOPIC}-0")
        assert consumer.values == [(r.offset, r.value) for r in records], "the consumer read other than the log"
        assert_replicas_identical(cluster, TOPIC, 0)
        for broker in cluster.brokers:
            target = targets[broker.node_id]
            assert (Path(target) / f"{TOPIC}-0").is_dir()
            left = [p.name for p in Path(sources[broker.node_id]).iterdir() if p.name.startswith(TOPIC)]
            assert left == [], f"broker {broker.node_id} left {left} in {sources[broker.node_id]}"


IO_MAX_BYTES_PER_SECOND = 200_000
COPY_CHUNK_BYTES = 16_384  # replica.fetch.max.bytes: the move copies this much between its throttle's pauses
LOG_RECORDS = 3000
RECORD_BYTES = 200


def produce_values(bootstrap_servers: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap_servers, "acks": 1, "linger.ms": 5, "batch.size": 8192})
    try:
        for i in range(count):
            producer.produce(TOPIC, value=b"%08d" % i + b"v" * (RECORD_BYTES - 8), partition=0)
            producer.poll(0)
        assert producer.flush(WAIT_S) == 0
    finally:
        del producer


def stored_size(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.glob("*.log"))


def test_describe_log_dirs_sizes_and_the_lag_of_a_future_log(tmp_path):
    config = {"replica.alter.log.dirs.io.max.bytes.per.second": IO_MAX_BYTES_PER_SECOND,
              "replica.fetch.max.bytes": COPY_CHUNK_BYTES}
    with minikafka.Cluster(brokers=1, data_dir=tmp_path / "cluster", log_dirs=2, config=config) as cluster:
        cluster.state.create_topic(TOPIC, partitions=1, replication_factor=1)
        produce_values(cluster.bootstrap_servers, LOG_RECORDS)
        broker = cluster.brokers[0]
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
        try:
            (answer,) = admin.describe_log_dirs(brokers=[broker.node_id])
            results = {r["log_dir"]: r for r in answer["log_dirs"]}
            assert set(results) == {str(d) for d in broker.log_dirs}
            for result in results.values():
                assert result["error_code"] == 0
                assert result["total_bytes"] >= result["usable_bytes"] > 0
            where = placement(admin, broker.node_id, TOPIC)
            (source,) = [d for d, partitions in where.items() if partitions]
            (target,) = [d for d in where if d != source]
            (current,) = where[source]
            size = stored_size(Path(source) / f"{TOPIC}-0")
            assert size > LOG_RECORDS * RECORD_BYTES
            assert current == {"partition_index": 0, "partition_size": size, "offset_lag": 0,
                               "is_future_key": False}

            assert admin.alter_replica_log_dirs({(TOPIC, 0, broker.node_id): target}) == {
                (TOPIC, 0, broker.node_id): NoError}
            # At IO_MAX_BYTES_PER_SECOND the copy takes seconds: the future log is seen behind the current one.
            seen: list[dict[str, Any]] = []

            def future_seen() -> bool:
                moving = placement(admin, broker.node_id, TOPIC)
                seen[:] = [p for p in moving[target] if p["is_future_key"]]
                return bool(seen) and seen[0]["offset_lag"] > 0
            wait_until(future_seen, WAIT_S, message="the future log in the target dir")
            assert 0 < seen[0]["offset_lag"] <= LOG_RECORDS and seen[0]["partition_size"] < size
            assert placement(admin, broker.node_id, TOPIC)[source][0]["is_future_key"] is False
            wait_until(lambda: moved_to(admin, broker.node_id, TOPIC, target), WAIT_S,
                       message=f"the replica moved to {target}")
            (moved,) = placement(admin, broker.node_id, TOPIC)[target]
            assert moved == {"partition_index": 0, "partition_size": size, "offset_lag": 0, "is_future_key": False}

            outcome = admin.alter_replica_log_dirs({(TOPIC, 0, broker.node_id): str(tmp_path / "nowhere"),
                                                    ("absent", 0, broker.node_id): source})
            assert {tpr.topic: error.__name__ for tpr, error in outcome.items()} == {
                TOPIC: "LogDirNotFoundError", "absent": "ReplicaNotAvailableError"}
        finally:
            admin.close()
        assert [r.value[:8] for r in cluster.state.records(TOPIC, 0, timeout_s=WAIT_S)] == [
            b"%08d" % i for i in range(LOG_RECORDS)]


@pytest.mark.parametrize("zookeeper", CLUSTER_MODES)
def test_a_failed_log_dir_moves_only_its_leaderships(tmp_path, zookeeper):
    with minikafka.Cluster(brokers=3, data_dir=tmp_path / "cluster", log_dirs=2, zookeeper=zookeeper) as cluster:
        cluster.state.create_topic(TOPIC, partitions=2, replication_factor=3)
        for index in (0, 1):
            cluster.wait_for_isr(TOPIC, index, 3, timeout=WAIT_S)
        leader = cluster.broker(cluster.state.partition(TOPIC, 0).leader)
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
        try:
            where = placement(admin, leader.node_id, TOPIC, (0, 1))
            dir_of = {p["partition_index"]: d for d, partitions in where.items() for p in partitions}
            assert dir_of[0] != dir_of[1], "new logs go to the dir with the fewest logs"
            before = cluster.state.partition(TOPIC, 1)
            leader.faults.fail_log_dir(dir_of[0])

            def described() -> dict[str, int]:
                (answer,) = admin.describe_log_dirs(brokers=[leader.node_id])
                return {r["log_dir"]: r["error_code"] for r in answer["log_dirs"]}
            wait_until(lambda: described()[dir_of[0]] == ErrorCode.KAFKA_STORAGE_ERROR, WAIT_S,
                       message=f"{dir_of[0]} offline")
            assert described()[dir_of[1]] == 0
            answers = admin.alter_replica_log_dirs({(TOPIC, 1, leader.node_id): dir_of[0]})
            assert [error.__name__ for error in answers.values()] == ["KafkaStorageError"]
        finally:
            admin.close()

        def moved() -> bool:
            state = cluster.state.partition(TOPIC, 0)
            return state.leader not in (-1, leader.node_id) and leader.node_id not in state.isr
        wait_until(moved, WAIT_S, message=f"{TOPIC}-0 led elsewhere, broker {leader.node_id} out of its ISR")
        after = cluster.state.partition(TOPIC, 1)
        assert (after.leader, after.leader_epoch, sorted(after.isr)) == (
            before.leader, before.leader_epoch, sorted(before.isr)), "the other dir's partition was left alone"
        with RawConnection(leader.bootstrap_servers) as conn:
            assert produce(conn, TOPIC, 0, values_batch([b"lost"])).error_code in (
                ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.NOT_LEADER_OR_FOLLOWER)
            assert fetch(conn, TOPIC, 0, 0).error_code in (ErrorCode.KAFKA_STORAGE_ERROR,
                                                          ErrorCode.NOT_LEADER_OR_FOLLOWER)
        acked = produce_acked(cluster.bootstrap_servers, TOPIC, 20, partitions=2, acks="all")
        assert len(acked) == 20
        for index in (0, 1):
            assert [r.value for r in cluster.state.records(TOPIC, index, timeout_s=WAIT_S)] == [
                v for (p, _), v in sorted(acked.items()) if p == index]
        # Only a restart brings the dir back; the replica there then catches up and rejoins the ISR.
        leader.restart()
        cluster.wait_for_isr(TOPIC, 0, 3, timeout=WAIT_S)
