"""Replication faults on a three-broker cluster of real processes, each undone afterwards: a follower whose fetching
is paused, links cut between brokers and the controller (a network partition, both ways and one way), and a
leadership moved through the controller; and the same faults from the command line. The paused-fetching faults run
in ZooKeeper mode too; the others are about the controller process (links to it, moves through it).
"""
from __future__ import annotations

import subprocess
import sys
import time

import pytest
from confluent_kafka import Producer
from kafka.protocol.producer.produce import ProduceRequest

from minikafka.cluster_handle import cluster_test_defaults
from minikafka.control_client import ControlClient, ControlError
from minikafka.protocol.errors import ErrorCode
from tests.cluster.cluster_modes import CLUSTER_MODES
from tests.cluster.replication_checks import (
    Acknowledgements,
    assert_acknowledged_exactly_once,
    assert_replicas_identical,
)
from tests.helpers import wait_until
from tests.raw_client import RawConnection, record_batch

pytestmark = pytest.mark.minikafka(brokers=3)

DEFAULTS = cluster_test_defaults(3)
LAG_TIME_S = int(DEFAULTS["replica.lag.time.max.ms"]) / 1000
SESSION_TIMEOUT_S = int(DEFAULTS["broker.session.timeout.ms"]) / 1000
# What the old leader of a partition cut off from everyone may answer an acks=all write: it cannot advance its
# high watermark (no follower reaches it), or it learns it was deposed.
ISOLATED_LEADER_ERRORS = {ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.REQUEST_TIMED_OUT,
                          ErrorCode.NOT_LEADER_OR_FOLLOWER}
ISOLATED_PRODUCE_TIMEOUT_MS = 2000
FLUSH_TIMEOUT_S = 60.0
CLI_TIMEOUT_S = 60.0


class AckingProducer:
    """An idempotent confluent-kafka producer (acks=all) whose acknowledgements are counted per offset.

    A leader cut off from the cluster goes on answering as leader (REQUEST_TIMED_OUT: nothing commits), as a
    partitioned Kafka broker does, and the producer retries such a timeout on the same broker: one that learns of
    leaders only from that broker moves to the new leader once the partition heals and the old leader says it no
    longer leads. A producer on the majority's side of the partition moves at once.
    """

    def __init__(self, bootstrap_servers: str, acks: Acknowledgements) -> None:
        self.acks = acks
        self._producer = Producer({
            "bootstrap.servers": bootstrap_servers, "enable.idempotence": True, "acks": "all", "linger.ms": 0,
            "request.timeout.ms": 3000, "message.timeout.ms": 60000, "retry.backoff.ms": 20,
            "retry.backoff.max.ms": 200, "reconnect.backoff.ms": 20, "reconnect.backoff.max.ms": 200,
        })

    def _delivered(self, err, msg) -> None:
        if err is None:
            self.acks.acknowledged(msg.partition(), msg.offset(), msg.value())
        else:
            self.acks.failed(f"{msg.value()!r}: {err}")

    def send(self, topic: str, values: list[bytes]) -> None:
        """Hand `values` (for partition 0) to the producer."""
        for value in values:
            self._producer.produce(topic, value=value, partition=0, on_delivery=self._delivered)

    def flush(self) -> None:
        """Wait until every record handed over is reported (acknowledged or failed)."""
        assert self._producer.flush(FLUSH_TIMEOUT_S) == 0, "records still unreported after the flush timeout"

    def produce(self, topic: str, values: list[bytes]) -> None:
        self.send(topic, values)
        self.flush()

    def close(self) -> None:
        self._producer.flush(FLUSH_TIMEOUT_S)
        del self._producer  # librdkafka's threads and sockets go now


def values(prefix: str, count: int) -> list[bytes]:
    return [f"{prefix}-{i:04d}".encode() for i in range(count)]


def acks_all_produce(address: str, topic: str, value: bytes) -> ErrorCode:
    """One acks=all Produce to partition 0 straight to the broker at `address`, whatever the metadata says."""
    R = ProduceRequest[9]
    with RawConnection(address, timeout=ISOLATED_PRODUCE_TIMEOUT_MS / 1000 + 10) as conn:
        response = conn.request(R(transactional_id=None, acks=-1, timeout_ms=ISOLATED_PRODUCE_TIMEOUT_MS, topic_data=[
            R.TopicProduceData(name=topic, partition_data=[R.TopicProduceData.PartitionProduceData(
                index=0, records=record_batch([value]))])]))
    return ErrorCode(response.responses[0].partition_responses[0].error_code)


def fenced_brokers(cluster) -> set[int]:
    """The brokers the controller counts out: fenced, or in ZooKeeper mode without a registration."""
    if cluster.zookeeper_mode:
        return {b.node_id for b in cluster.brokers} - set(cluster.zookeeper_state.broker_ids())
    described = ControlClient(cluster.controller.address).call("describe")
    return {b["broker_id"] for b in described["brokers"] if b["fenced"]}


def other_brokers(cluster, *brokers) -> list:
    ids = {b.node_id for b in brokers}
    return [b for b in cluster.brokers if b.node_id not in ids]


# ---- a follower that stops fetching ----------------------------------------------------------------------------------

@pytest.mark.parametrize("zookeeper", CLUSTER_MODES)
def test_paused_follower_leaves_the_isr_and_rejoins_when_resumed(minikafka_cluster, zookeeper):
    cluster = minikafka_cluster
    assert cluster.zookeeper_mode is zookeeper
    cluster.state.create_topic("t", partitions=2, replication_factor=3)
    leaders = {cluster.wait_for_leader("t", p).node_id for p in (0, 1)}
    for p in (0, 1):
        cluster.wait_for_isr("t", p, 3)
    follower = next(b for b in cluster.brokers if b.node_id not in leaders)  # it follows both partitions
    acks = Acknowledgements()
    producer = AckingProducer(cluster.bootstrap_servers, acks)
    try:
        pause = follower.faults.pause_fetching("t", 0)
        paused_at = time.monotonic()
        assert follower.faults.list() == [pause.description]
        assert pause.description["partitions"] == [["t", 0]]
        producer.produce("t", values("while-paused", 5))  # the paused follower falls behind the leader of t-0
        shrunk = cluster.wait_for_isr("t", 0, 2, timeout=10)
        left_s = time.monotonic() - paused_at
        print(f"follower {follower.node_id} with paused fetching left the ISR after {left_s:.3f} s")
        assert follower.node_id not in shrunk.isr
        assert pause.wait(hits=1).hits >= 1  # fetch rounds that left t-0 out
        assert left_s < 1.5 * LAG_TIME_S + 0.5  # the ISR check runs every half lag time; polling and the controller
        assert len(cluster.state.partition("t", 1).isr) == 3  # only t-0 was paused
        assert follower.state.topics() == ["t"]  # the follower still answers requests
        assert fenced_brokers(cluster) == set()  # and keeps its session with the controller

        pause.clear()
        rejoined = cluster.wait_for_isr("t", 0, 3, timeout=10)
        assert follower.node_id in rejoined.isr
        assert follower.faults.list() == []
        producer.produce("t", values("resumed", 5))
    finally:
        producer.close()
    assert acks.errors == [] and acks.count() == 10
    cluster.wait_for_replicas_caught_up("t")
    assert_acknowledged_exactly_once(cluster.state.records("t", 0), acks.of(0), "t-0")
    assert_replicas_identical(cluster, "t", 0)


@pytest.mark.parametrize("zookeeper", CLUSTER_MODES)
def test_pausing_every_partition_and_refusals(minikafka_cluster, zookeeper):
    cluster = minikafka_cluster
    assert cluster.zookeeper_mode is zookeeper
    cluster.state.create_topic("t", partitions=1, replication_factor=2)
    state = cluster.wait_for_isr("t", 0, 2)
    outsider = next(b for b in cluster.brokers if b.node_id not in state.replicas)
    with pytest.raises(ControlError, match="has no replica of t-0"):
        outsider.faults.pause_fetching("t", 0)
    with pytest.raises(ControlError, match="unknown topic 'nope'"):
        outsider.faults.pause_fetching("nope")
    with pytest.raises(ControlError, match="has no partition 7"):
        outsider.faults.pause_fetching("t", 7)
    with pytest.raises(ControlError, match="a partition needs its topic"):
        outsider.faults.pause_fetching(partition=0)
    follower = cluster.broker(next(r for r in state.replicas if r != state.leader))
    with follower.faults.pause_fetching() as everything:
        assert everything.description["partitions"] is None
        acks = Acknowledgements()
        producer = AckingProducer(cluster.bootstrap_servers, acks)
        try:
            producer.produce("t", values("v", 3))
        finally:
            producer.close()
        assert cluster.wait_for_isr("t", 0, 1, timeout=10).isr == [state.leader]
    assert follower.faults.clear("fetch-pause") == 0  # the with block cleared it
    cluster.wait_for_isr("t", 0, 2, timeout=10)


# ---- network partitions --------------------------------------------------------------------------------------------

def test_leader_cut_off_from_everyone_is_replaced_and_rejoins_as_follower(minikafka_cluster):
    cluster = minikafka_cluster
    cluster.state.create_topic("t", partitions=1, replication_factor=3, config={"min.insync.replicas": 2})
    cluster.wait_for_isr("t", 0, 3)
    old = cluster.leader_of("t", 0)
    acks = Acknowledgements()
    producer = AckingProducer(cluster.bootstrap_servers, acks)
    majority: AckingProducer | None = None
    try:
        producer.produce("t", values("before", 20))
        assert acks.count() == 20

        cuts = [cluster.cut_link(old, node) for node in cluster.nodes if node.node_id != old.node_id]
        cut_at = time.monotonic()
        assert sorted(f["to"] for f in old.faults.list()) == sorted(
            n.node_id for n in cluster.nodes if n is not old)
        for broker in other_brokers(cluster, old):  # both ways: each other end has cut its link too
            assert [(f["kind"], f["to"]) for f in broker.faults.list()] == [("link", old.node_id)]

        # A producer that learns of leaders from the old leader waits (REQUEST_TIMED_OUT, retried) until the
        # partition heals.
        producer.send("t", values("during", 10))
        new = cluster.wait_for_leader("t", 0, not_on=old, timeout=10)
        elected_s = time.monotonic() - cut_at
        print(f"broker {new.node_id} leads after {elected_s:.3f} s of isolation of broker {old.node_id}")
        assert elected_s >= SESSION_TIMEOUT_S / 2  # fenced when its session ran out, not at once
        assert old.node_id in fenced_brokers(cluster)

        # The deposed leader still believes it leads, but reaches no follower: its acks=all writes never commit.
        assert acks_all_produce(old.bootstrap_servers, "t", b"isolated") in ISOLATED_LEADER_ERRORS
        # A client on the majority's side of the partition writes to the new leader.
        majority = AckingProducer(new.bootstrap_servers, acks)
        majority.produce("t", values("majority", 20))

        for cut in cuts:
            cut.clear()
        assert all(b.faults.list() == [] for b in cluster.brokers)
        producer.flush()  # the old leader learns it was deposed; the producer moves to the new leader
        rejoined = cluster.wait_for_isr("t", 0, 3, timeout=20)
        assert rejoined.leader == new.node_id and old.node_id in rejoined.isr
        assert fenced_brokers(cluster) == set()
        producer.produce("t", values("healed", 5))
    finally:
        producer.close()
        if majority is not None:
            majority.close()
    assert acks.errors == [] and acks.count() == 55
    cluster.wait_for_replicas_caught_up("t")
    stored = cluster.state.records("t", 0)
    assert_acknowledged_exactly_once(stored, acks.of(0), "t-0")
    assert b"isolated" not in {r.value for r in stored}  # truncated away by the old leader
    assert_replicas_identical(cluster, "t", 0)


def test_one_way_cuts(minikafka_cluster):
    cluster = minikafka_cluster
    cluster.state.create_topic("t", partitions=1, replication_factor=3)
    state = cluster.wait_for_isr("t", 0, 3)
    leader = cluster.broker(state.leader)
    follower = cluster.broker(state.replicas[1] if state.replicas[0] == leader.node_id else state.replicas[0])
    acks = Acknowledgements()
    producer = AckingProducer(cluster.bootstrap_servers, acks)
    try:
        # A follower that cannot reach its leader: it leaves the ISR but keeps its controller session.
        with cluster.cut_link(follower, leader, both_ways=False) as cut:
            assert cut.description["both_ways"] is False
            assert leader.faults.list() == []  # one way: only the follower's end is cut
            producer.produce("t", values("follower-cut", 5))
            assert follower.node_id not in cluster.wait_for_isr("t", 0, 2, timeout=10).isr
            assert cut.wait(hits=1).hits >= 1  # the follower's fetches to its leader that failed
            assert fenced_brokers(cluster) == set()
        cluster.wait_for_isr("t", 0, 3, timeout=10)

        # The controller refusing the leader's heartbeats: fenced once its session runs out, leadership moves.
        cut = cluster.cut_link(cluster.controller, leader, both_ways=False)
        cut_at = time.monotonic()
        assert leader.faults.list() == []
        new = cluster.wait_for_leader("t", 0, not_on=leader, timeout=10)
        assert time.monotonic() - cut_at >= SESSION_TIMEOUT_S / 2  # when its session ran out, not at once
        assert fenced_brokers(cluster) == {leader.node_id}
        majority = AckingProducer(new.bootstrap_servers, acks)  # the old leader still believes it leads
        try:
            majority.produce("t", values("controller-cut", 5))
        finally:
            majority.close()
        cut.clear()
        wait_until(lambda: fenced_brokers(cluster) == set(), 10, message="the cut-off broker to be unfenced")
        rejoined = cluster.wait_for_isr("t", 0, 3, timeout=20)
        assert rejoined.leader == new.node_id
        producer.produce("t", values("healed", 5))
    finally:
        producer.close()
    assert acks.errors == [] and acks.count() == 15
    cluster.wait_for_replicas_caught_up("t")
    assert_acknowledged_exactly_once(cluster.state.records("t", 0), acks.of(0), "t-0")
    assert_replicas_identical(cluster, "t", 0)


def test_cut_link_refusals(minikafka_cluster):
    cluster = minikafka_cluster
    broker = cluster.broker(1)
    with pytest.raises(ControlError, match="node 1 is this broker"):
        broker.faults.cut_link(1)
    with pytest.raises(ControlError, match="node 9 is neither a broker of this cluster nor its controller"):
        broker.faults.cut_link(9)
    with pytest.raises(ControlError, match="node 9 is not a registered broker"):
        cluster.cut_link(cluster.controller, 9)
    with cluster.cut_link(1, 2):
        with pytest.raises(ControlError, match="already cut"):
            cluster.cut_link(1, 2, both_ways=False)
        with pytest.raises(ControlError, match="already cut"):  # the other end has its half
            cluster.cut_link(2, 1)
    assert broker.faults.list() == [] and cluster.broker(2).faults.list() == []


# ---- moving a leader ------------------------------------------------------------------------------------------------

def test_move_leader_to_an_in_sync_replica_and_back_to_the_preferred_one(minikafka_cluster):
    cluster = minikafka_cluster
    cluster.state.create_topic("t", partitions=1, replication_factor=3)
    state = cluster.wait_for_isr("t", 0, 3)
    preferred, target, third = state.replicas
    assert state.leader == preferred
    acks = Acknowledgements()
    producer = AckingProducer(cluster.bootstrap_servers, acks)
    try:
        producer.produce("t", values("first", 5))
        moved = cluster.move_leader("t", 0, to=target)
        assert moved.node_id == target
        after = cluster.state.partition("t", 0)
        assert (after.leader, after.leader_epoch) == (target, state.leader_epoch + 1)
        assert cluster.move_leader("t", 0, to=target).node_id == target  # leading already: nothing changes
        assert cluster.state.partition("t", 0).leader_epoch == after.leader_epoch
        producer.produce("t", values("moved", 5))  # clients follow the move

        with pytest.raises(ControlError, match="not a replica of t-0"):
            cluster.move_leader("t", 0, to=9)
        with pytest.raises(ControlError, match="UNKNOWN_TOPIC_OR_PARTITION"):
            cluster.move_leader("nope", 0, to=target)
        with cluster.broker(third).faults.pause_fetching():
            producer.produce("t", values("third-paused", 5))
            cluster.wait_for_isr("t", 0, 2, timeout=10)
            with pytest.raises(ControlError, match=f"broker {third} is not in the ISR"):
                cluster.move_leader("t", 0, to=third)
        cluster.wait_for_isr("t", 0, 3, timeout=10)

        assert cluster.elect_preferred_leaders("t", 0) == [("t", 0)]
        back = cluster.state.partition("t", 0)
        assert (back.leader, back.leader_epoch) == (preferred, after.leader_epoch + 1)
        assert cluster.elect_preferred_leaders("t", 0) == []  # not needed any more
        producer.produce("t", values("preferred", 5))
    finally:
        producer.close()
    assert acks.errors == [] and acks.count() == 20
    cluster.wait_for_replicas_caught_up("t")
    assert_acknowledged_exactly_once(cluster.state.records("t", 0), acks.of(0), "t-0")
    assert_replicas_identical(cluster, "t", 0)


# ---- the command line ----------------------------------------------------------------------------------------------

def run_cli(*args: str) -> str:
    result = subprocess.run([sys.executable, "-m", "minikafka", "fault", *args], capture_output=True, text=True,
                            timeout=CLI_TIMEOUT_S, check=False)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_cli_cuts_links_and_pauses_fetching(minikafka_cluster):
    cluster = minikafka_cluster
    cluster.state.create_topic("t", partitions=1, replication_factor=3)
    cluster.wait_for_isr("t", 0, 3)
    one, two = cluster.broker(1).bootstrap_servers, cluster.broker(2).bootstrap_servers
    controller = str(cluster.controller.node_id)
    assert "link to node 2 cut, both ways" in run_cli("cut-link", "--to", "2", "--bootstrap-server", one)
    assert "link to node 1 cut, one way" in run_cli("list", "--bootstrap-server", two)
    assert f"link to node {controller} cut, one way" in run_cli("cut-link", "--to", controller, "--one-way",
                                                                "--bootstrap-server", two)
    assert "replica fetching paused for t-0" in run_cli("pause-fetching", "--topic", "t", "--partition", "0",
                                                         "--bootstrap-server", two)
    listed = run_cli("list", "--bootstrap-server", two).splitlines()
    assert len(listed) == 3 and "replica fetching paused for t-0" in listed[2]
    assert "Cleared 1 fault(s)." in run_cli("clear", "--kind", "link", "--id", listed[1].split("\t")[0],
                                            "--bootstrap-server", two)
    assert "Cleared 1 fault(s)." in run_cli("clear", "--bootstrap-server", one)  # heals node 2's end too
    assert "Cleared 1 fault(s)." in run_cli("clear", "--bootstrap-server", two)  # the pause
    assert run_cli("list", "--bootstrap-server", two) == ""
    cluster.wait_for_isr("t", 0, 3, timeout=10)

    refused = subprocess.run([sys.executable, "-m", "minikafka", "fault", "cut-link", "--to", "2",
                              "--bootstrap-server", two], capture_output=True, text=True, timeout=CLI_TIMEOUT_S,
                             check=False)
    assert refused.returncode == 1 and "node 2 is this broker" in refused.stderr
