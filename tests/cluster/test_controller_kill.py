"""kill -9 of the controller: the brokers keep serving what they lead, elections wait for its return, and nothing
acknowledged is lost.

With the controller gone, producers keep writing with acks=all to the existing partitions (followers keep
fetching, so the high watermark moves) and consumers keep reading. A leader killed meanwhile stays the leader on
record: nobody can elect another. Once the controller is back (its metadata log replayed), it fences the broker that
never came back to heartbeat and elects a new leader, and a leader killed after that is replaced as fast as ever.
"""
from __future__ import annotations

import time

from confluent_kafka import Producer

import minikafka
from tests.cluster.replication_checks import (
    Acknowledgements,
    assert_acknowledged_exactly_once,
    assert_replicas_identical,
)

TOPIC = "steady"
PARTITIONS = 3
PER_PHASE = 300
WAIT_S = 20.0


def produce(producer: Producer, acks: Acknowledgements, phase: str) -> None:
    """PER_PHASE unique records over every partition, each acknowledged (acks=all) before this returns."""
    before = acks.count()

    def delivered(err, msg) -> None:
        if err is None:
            acks.acknowledged(msg.partition(), msg.offset(), msg.value())
        else:
            acks.failed(f"{msg.value()!r}: {err}")

    for i in range(PER_PHASE):
        producer.produce(TOPIC, value=b"%s-%04d" % (phase.encode(), i), partition=i % PARTITIONS,
                         on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(WAIT_S) == 0, f"{phase}: records still unacknowledged after {WAIT_S} s"
    assert not acks.errors, f"{phase}: delivery errors {acks.errors[:5]}"
    assert acks.count() == before + PER_PHASE


def test_controller_killed_brokers_serve_and_elections_resume_after_its_restart(tmp_path):
    with minikafka.Cluster(brokers=3, data_dir=tmp_path / "cluster") as cluster:
        cluster.state.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3,
                                   config={"min.insync.replicas": 2})
        for partition in range(PARTITIONS):
            cluster.wait_for_isr(TOPIC, partition, 3, timeout=WAIT_S)
        acks = Acknowledgements()
        # Idempotent: its producer id comes from the controller's blocks, so it is taken while the controller runs.
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "enable.idempotence": True,
                             "acks": "all", "linger.ms": 5, "message.timeout.ms": 30000, "retry.backoff.ms": 20,
                             "retry.backoff.max.ms": 200, "reconnect.backoff.ms": 20,
                             "reconnect.backoff.max.ms": 200})
        try:
            produce(producer, acks, "with-controller")

            cluster.controller.kill()
            produce(producer, acks, "without-controller")
            for partition in range(PARTITIONS):  # fetch serves everything acknowledged
                assert_acknowledged_exactly_once(cluster.state.records(TOPIC, partition), acks.of(partition),
                                                 f"{TOPIC}-{partition} without a controller")

            orphaned = cluster.leader_of(TOPIC, 0)
            orphaned.kill()  # no controller to elect another: partition 0 waits
            assert cluster.state.partition(TOPIC, 0).leader == orphaned.node_id

            restarted_at = time.monotonic()
            cluster.controller.start()
            elected = cluster.wait_for_leader(TOPIC, 0, not_on=orphaned, timeout=WAIT_S)
            late_election_s = time.monotonic() - restarted_at
            produce(producer, acks, "controller-back")
            orphaned.start()
            for partition in range(PARTITIONS):
                cluster.wait_for_isr(TOPIC, partition, 3, timeout=WAIT_S)

            victim = cluster.leader_of(TOPIC, 1)
            killed_at = time.monotonic()
            victim.kill()
            cluster.wait_for_leader(TOPIC, 1, not_on=victim, timeout=WAIT_S)
            election_s = time.monotonic() - killed_at
            produce(producer, acks, "after-election")

            victim.start()
            for partition in range(PARTITIONS):
                cluster.wait_for_isr(TOPIC, partition, 3, timeout=WAIT_S)
        finally:
            producer.flush(WAIT_S)
            del producer  # librdkafka's threads and sockets go now

        print(f"controller restarted: partition 0 (leader {orphaned.node_id} killed while it was down) led by "
              f"{elected.node_id} {late_election_s:.3f} s after the restart; leader {victim.node_id} killed "
              f"afterwards replaced in {election_s:.3f} s")
        cluster.wait_for_replicas_caught_up(TOPIC, timeout=WAIT_S)
        for partition in range(PARTITIONS):
            assert_acknowledged_exactly_once(cluster.state.records(TOPIC, partition), acks.of(partition),
                                             f"{TOPIC}-{partition}")
            assert_replicas_identical(cluster, TOPIC, partition)
        assert acks.count() == 4 * PER_PHASE
