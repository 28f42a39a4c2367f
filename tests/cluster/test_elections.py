"""Elections a user asks for or relies on, on three real broker processes: ElectLeaders through confluent-kafka's
admin client (preferred and unclean, what kafka-leader-election.sh sends), the controller's automatic move back to
preferred leaders (auto.leader.rebalance.enable), and a clean stop (SIGTERM) that moves a broker's leaderships away
first, so a producer writing through it sees only retriable errors and loses nothing."""
from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import ElectionType, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import minikafka
from minikafka.protocol.errors import ErrorCode
from tests.cluster.replication_checks import (
    Acknowledgements,
    assert_acknowledged_exactly_once,
    assert_replicas_identical,
)
from tests.helpers import wait_until

ADMIN_TIMEOUT_S = 30.0
WAIT_S = 20.0


def admin_of(cluster: minikafka.Cluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.bootstrap_servers})


def create_topic(admin: AdminClient, name: str, assignment: list[list[int]], **config: str) -> None:
    futures = admin.create_topics([NewTopic(name, len(assignment), replica_assignment=assignment, config=config)])
    futures[name].result(ADMIN_TIMEOUT_S)


def elect(admin: AdminClient, election: ElectionType,
          partitions: list[tuple[str, int]] | None) -> dict[tuple[str, int], ErrorCode]:
    """ElectLeaders as confluent-kafka sends it: each partition's outcome as the broker's error code."""
    wanted = None if partitions is None else [TopicPartition(t, p) for t, p in partitions]
    outcome = admin.elect_leaders(election, wanted).result(ADMIN_TIMEOUT_S)
    codes = {}
    for tp, error in outcome.items():
        codes[(tp.topic, tp.partition)] = ErrorCode.NONE if error is None else ErrorCode(error.code())
    return codes


def test_preferred_and_unclean_elections_through_the_admin_client(tmp_path):
    with minikafka.Cluster(brokers=3, data_dir=tmp_path / "cluster") as cluster:
        admin = admin_of(cluster)
        create_topic(admin, "preferred", [[1, 2, 3], [2, 3, 1]])
        for partition in (0, 1):
            cluster.wait_for_isr("preferred", partition, 3, timeout=WAIT_S)
        cluster.move_leader("preferred", 0, to=2)

        assert elect(admin, ElectionType.PREFERRED, [("preferred", 0), ("preferred", 1)]) == {
            ("preferred", 0): ErrorCode.NONE, ("preferred", 1): ErrorCode.ELECTION_NOT_NEEDED}
        wait_until(lambda: cluster.state.partition("preferred", 0).leader == 1, timeout=WAIT_S,
                   message="broker 1 to lead preferred-0 again")
        assert elect(admin, ElectionType.PREFERRED, None) == {}  # all partitions: those needing none are left out
        assert elect(admin, ElectionType.PREFERRED, [("missing", 0)]) == {
            ("missing", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}

        # Replica 2 stops fetching and leaves the ISR; then the leader, 1, dies: no clean leader is left.
        create_topic(admin, "unclean", [[1, 2]])
        cluster.wait_for_isr("unclean", 0, 2, timeout=WAIT_S)
        with cluster.broker(2).faults.pause_fetching():
            producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "1"})
            producer.produce("unclean", b"only on broker 1", partition=0)
            assert producer.flush(WAIT_S) == 0
            del producer
            cluster.wait_for_isr("unclean", 0, 1, timeout=WAIT_S)
            cluster.broker(1).kill()
            wait_until(lambda: cluster.state.partition("unclean", 0).leader == -1, timeout=WAIT_S,
                       message="unclean-0 to have no leader")
            # As kafka-leader-election.sh would, a fresh client: the old one may still take the dead broker for
            # the one to send ElectLeaders to (any live broker is named controller, as in Kafka).
            admin = admin_of(cluster)

            assert elect(admin, ElectionType.PREFERRED, [("unclean", 0)]) == {
                ("unclean", 0): ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE}
            assert elect(admin, ElectionType.UNCLEAN, [("unclean", 0)]) == {("unclean", 0): ErrorCode.NONE}
        state = cluster.wait_for_isr("unclean", 0, 1, timeout=WAIT_S)
        assert (state.leader, state.isr) == (2, [2])
        assert cluster.state.records("unclean", 0) == []  # the unclean leader never had the record: it is lost
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
        producer.produce("unclean", b"after the unclean election", partition=0)
        assert producer.flush(WAIT_S) == 0
        del producer

        assert elect(admin, ElectionType.UNCLEAN, [("unclean", 0)]) == {
            ("unclean", 0): ErrorCode.ELECTION_NOT_NEEDED}  # its leader is live now
        cluster.broker(1).start()
        cluster.wait_for_isr("unclean", 0, 2, timeout=WAIT_S)  # the old leader truncates and follows
        cluster.wait_for_replicas_caught_up("unclean", timeout=WAIT_S)
        assert [(r.offset, r.value) for r in cluster.state.records("unclean", 0)] == [
            (0, b"after the unclean election")]
        assert_replicas_identical(cluster, "unclean", 0)


def leaders(cluster: minikafka.Cluster, topic: str, partitions: int) -> list[int]:
    return [cluster.state.partition(topic, p).leader for p in range(partitions)]


@pytest.mark.parametrize("rebalance", [True, False], ids=["auto-rebalance", "no-rebalance"])
def test_leadership_returns_to_the_preferred_replica_when_auto_rebalance_is_enabled(tmp_path, rebalance):
    config = {"auto.leader.rebalance.enable": str(rebalance).lower(), "leader.imbalance.check.interval.seconds": 1}
    with minikafka.Cluster(brokers=3, data_dir=tmp_path / "cluster", config=config) as cluster:
        admin = admin_of(cluster)
        create_topic(admin, "r", [[1, 2, 3], [2, 3, 1], [3, 1, 2]])
        for partition in range(3):
            cluster.wait_for_isr("r", partition, 3, timeout=WAIT_S)
        assert leaders(cluster, "r", 3) == [1, 2, 3]

        cluster.broker(1).restart(kill=True)
        cluster.wait_for_isr("r", 0, 3, timeout=WAIT_S)
        moved = cluster.state.partition("r", 0).leader
        if rebalance:
            wait_until(lambda: leaders(cluster, "r", 3) == [1, 2, 3], timeout=WAIT_S,
                       message="every partition to be led by its preferred replica again")
        else:
            assert moved != 1
            time.sleep(3)  # three imbalance check intervals, were the check on
            assert leaders(cluster, "r", 3) == [moved, 2, 3]


def test_sigterm_moves_leadership_away_first_so_producers_see_only_retriable_errors(tmp_path):
    with minikafka.Cluster(brokers=3, data_dir=tmp_path / "cluster") as cluster:
        admin = admin_of(cluster)
        create_topic(admin, "cs", [[1, 2, 3], [2, 3, 1], [3, 1, 2]], **{"min.insync.replicas": "2"})
        for partition in range(3):
            cluster.wait_for_isr("cs", partition, 3, timeout=WAIT_S)

        acks = Acknowledgements()
        client_errors: list[str] = []
        producer = Producer({
            "bootstrap.servers": cluster.bootstrap_servers, "enable.idempotence": True, "acks": "all",
            "linger.ms": 2, "message.timeout.ms": 30000, "retry.backoff.ms": 20, "retry.backoff.max.ms": 200,
            "error_cb": lambda error: client_errors.append(str(error)) if error.fatal() else None})

        def delivered(err, msg) -> None:
            if err is None:
                acks.acknowledged(msg.partition(), msg.offset(), msg.value())
            else:
                acks.failed(f"{msg.value()!r}: {err}")

        stop_writing = threading.Event()
        sent = 0

        def write() -> None:
            nonlocal sent
            while not stop_writing.is_set() and sent < 200_000:
                producer.produce("cs", f"v-{sent:06d}".encode(), partition=sent % 3, on_delivery=delivered)
                sent += 1
                producer.poll(0.001)

        writer = threading.Thread(target=write)
        writer.start()
        try:
            wait_until(lambda: acks.count() >= 300, timeout=WAIT_S, message="the producer to be acknowledged")
            began = time.monotonic()
            assert cluster.broker(1).stop() == 0
            stopped_s = time.monotonic() - began
            state = cluster.state.partition("cs", 0)
            assert state.leader in (2, 3) and 1 not in state.isr, state
            settled = acks.count()
            wait_until(lambda: acks.count() >= settled + 300, timeout=WAIT_S,
                       message="acknowledgements after the stop")
        finally:
            stop_writing.set()
            writer.join(WAIT_S)
            assert producer.flush(60) == 0
        assert stopped_s < 10, f"the clean stop took {stopped_s:.1f} s"
        assert acks.errors == [] and client_errors == []
        assert acks.count() == sent

        cluster.broker(1).start()
        for partition in range(3):
            cluster.wait_for_isr("cs", partition, 3, timeout=WAIT_S)
        cluster.wait_for_replicas_caught_up("cs", timeout=WAIT_S)
        for partition in range(3):
            assert_acknowledged_exactly_once(cluster.state.records("cs", partition), acks.of(partition),
                                             f"cs-{partition}")
            assert_replicas_identical(cluster, "cs", partition)
