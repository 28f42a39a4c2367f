"""kill -9 of the controller: the brokers keep serving what they lead, elections wait for its return, and nothing
acknowledged is lost.

With the controller gone, producers keep writing with acks=all to the existing partitions (followers keep
fetching, so the high watermark moves) and consumers keep reading. A leader killed meanwhile stays the leader on
record: nobody can elect another. Once the controller is back (its metadata log replayed), it fences the broker that
never came back to heartbeat and elects a new leader, and a leader killed after that is replaced as fast as ever.

In ZooKeeper mode the controller is a broker, and one killed and restarted at once registers again before the
broker elected in its place reads /brokers/ids: nobody sees it go, it keeps its places in ISRs, and the broker epoch
its leaders last saw is its previous process's until it fetches again. ISR changes of its partitions go through
all the same, as in Kafka, where the ZooKeeper controller holds ISR members to liveness only.
"""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from confluent_kafka import Producer
from kafka.admin import KafkaAdminClient, NewTopic

import minikafka
from tests.cluster.cluster_modes import REQUIRES_ZOOKEEPER, session_settings
from tests.cluster.replication_checks import (
    Acknowledgements,
    assert_acknowledged_exactly_once,
    assert_replicas_identical,
)
from tests.helpers import wait_until

TOPIC = "steady"
PARTITIONS = 3
PER_PHASE = 300
WAIT_S = 20.0
# Long enough for a restarted broker's process to be up, waiting for its previous registration to go, well before
# that session expires: it registers again at once then, before the broker elected in its place reads /brokers/ids.
RESTART_SESSION_TIMEOUT_MS = 6000


def produce(producer: Producer, acks: Acknowledgements, phase: str, partitions: int = PARTITIONS) -> None:
    """PER_PHASE unique records over the first `partitions` partitions, each acknowledged (acks=all) before this
    returns."""
    before = acks.count()

    def delivered(err, msg) -> None:
        if err is None:
            acks.acknowledged(msg.partition(), msg.offset(), msg.value())
        else:
            acks.failed(f"{msg.value()!r}: {err}")

    for i in range(PER_PHASE):
        producer.produce(TOPIC, value=b"%s-%04d" % (phase.encode(), i), partition=i % partitions,
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


@REQUIRES_ZOOKEEPER
def test_zookeeper_controller_restarted_at_once_keeps_no_follower_out_of_the_isr(tmp_path):
    config = session_settings(True, RESTART_SESSION_TIMEOUT_MS)
    with minikafka.Cluster(brokers=3, data_dir=tmp_path / "cluster", config=config, zookeeper=True) as cluster:
        controller = cluster.wait_for_controller(timeout=WAIT_S)
        leader, follower = (b for b in cluster.brokers if b is not controller)
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers, request_timeout_ms=10000)
        try:
            admin.create_topics([NewTopic(TOPIC, -1, topic_configs={"min.insync.replicas": "2"}, replica_assignments={
                0: [leader.node_id, follower.node_id, controller.node_id]})])
        finally:
            admin.close()
        cluster.wait_for_isr(TOPIC, 0, 3, timeout=WAIT_S)

        def isr() -> list[int]:
            """As the controller committed it (read from ZooKeeper: a broker still starting answers nobody)."""
            state = cluster.zookeeper_state.partition_state(TOPIC, 0)
            return state.isr if state is not None else []

        acks = Acknowledgements()
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "linger.ms": 5,
                             "message.timeout.ms": 30000})
        try:
            produce(producer, acks, "before", partitions=1)
            cluster.wait_for_replicas_caught_up(TOPIC, timeout=WAIT_S)

            follower.kill()
            wait_until(lambda: follower.node_id not in isr(), timeout=WAIT_S,
                       message=f"broker {follower.node_id} to leave the ISR (its ZooKeeper session expires)")
            controller.kill()
            # The leader refuses the restarted broker's fetches (and sends it nothing), so the broker epoch it last
            # saw it fetch with stays the killed process's; with nothing written meanwhile it stays in the ISR.
            cut = cluster.cut_link(leader, controller, both_ways=False)
            with ThreadPoolExecutor(1) as pool:
                restarted = pool.submit(controller.start)  # ready once the leader reaches it again
                try:
                    wait_until(lambda: cluster.zookeeper_state.controller_id() not in (None, controller.node_id),
                               timeout=WAIT_S, message="a broker other than the killed one to be controller")
                    follower.start()
                    wait_until(lambda: follower.node_id in isr(), timeout=WAIT_S,
                               message=f"broker {follower.node_id} to rejoin the ISR of {TOPIC}-0 while broker "
                                       f"{controller.node_id} is back but not fetching from the leader yet")
                finally:
                    cut.clear()
                    restarted.result(timeout=WAIT_S)
            cluster.wait_for_isr(TOPIC, 0, 3, timeout=WAIT_S)
            produce(producer, acks, "after", partitions=1)
        finally:
            producer.flush(WAIT_S)
            del producer
        cluster.wait_for_replicas_caught_up(TOPIC, timeout=WAIT_S)
        assert_acknowledged_exactly_once(cluster.state.records(TOPIC, 0), acks.of(0), f"{TOPIC}-0")
        assert_replicas_identical(cluster, TOPIC, 0)
