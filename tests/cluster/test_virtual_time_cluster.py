"""A cluster on one manual clock (`Cluster(clock="manual")`): `cluster.clock.advance` moves every node's clock.

Replica lag follows the clock, by Kafka's rule: a follower that holds everything its leader has is in sync however
long since it fetched, so an advance far past replica.lag.time.max.ms keeps caught-up followers in the ISR, while
a follower behind the leader falls out at the leader's first lag check (every half the lag time) after the clock
has passed the lag time. Broker sessions with the controller are
liveness between processes and stay on real time: an advance past broker.session.timeout.ms fences nobody, so no
leader moves, and requests between the nodes are not timed out by the jump.
"""
from __future__ import annotations

from kafka.protocol.producer.produce import ProduceRequest

import minikafka
from minikafka.protocol.errors import ErrorCode
from tests.raw_client import RawConnection, record_batch

TOPIC = "clocked"
LAG_MS = 60_000  # replica.lag.time.max.ms: far longer than the test runs, so only an advance passes it
WAIT_S = 30.0


def produce(bootstrap: str, value: bytes, acks: int) -> tuple[ErrorCode, int]:
    R = ProduceRequest[9]
    with RawConnection(bootstrap) as conn:
        response = conn.request(R(transactional_id=None, acks=acks, timeout_ms=10_000, topic_data=[
            R.TopicProduceData(name=TOPIC, partition_data=[R.TopicProduceData.PartitionProduceData(
                index=0, records=record_batch([value]))])]))
    partition = response.responses[0].partition_responses[0]
    return ErrorCode(partition.error_code), partition.base_offset


def test_advancing_a_cluster_keeps_caught_up_followers_in_sync_and_drops_a_lagging_one(tmp_path):
    advance_past_the_lag_time(tmp_path)


def advance_past_the_lag_time(tmp_path, **cluster_args: object) -> None:
    """The scenario, in either controller mode (`cluster_args`)."""
    with minikafka.Cluster(brokers=3, data_dir=tmp_path / "cluster", clock="manual",
                           config={"replica.lag.time.max.ms": LAG_MS}, **cluster_args) as cluster:
        cluster.state.create_topic(TOPIC, 1, 3, {"min.insync.replicas": 2})
        cluster.wait_for_isr(TOPIC, 0, 3, timeout=WAIT_S)
        leader = cluster.leader_of(TOPIC, 0)
        before = cluster.state.partition(TOPIC, 0)
        assert produce(leader.bootstrap_servers, b"first", acks=-1) == (ErrorCode.NONE, 0)

        # Twice the lag time, and far past broker.session.timeout.ms (1 s): every follower holds what the leader
        # has, so none leaves the ISR, and no broker is fenced, so the leadership stays where it was.
        cluster.clock.advance(2 * LAG_MS)
        after = cluster.state.partition(TOPIC, 0)
        assert (after.leader, after.leader_epoch, sorted(after.isr)) == (before.leader, before.leader_epoch,
                                                                        [1, 2, 3])
        assert produce(leader.bootstrap_servers, b"second", acks=-1) == (ErrorCode.NONE, 1)
        assert [b.clock.advanced_ms for b in cluster.brokers] == [2 * LAG_MS] * 3

        # One follower stops fetching and misses a record: short of the lag time it stays in sync ...
        lagging = next(b for b in cluster.brokers if b.node_id != leader.node_id)
        lagging.faults.pause_fetching(TOPIC, 0)
        assert produce(leader.bootstrap_servers, b"missed", acks=1) == (ErrorCode.NONE, 2)
        cluster.clock.advance(LAG_MS - 10_000)
        assert sorted(cluster.state.partition(TOPIC, 0).isr) == [1, 2, 3]

        # ... and once the clock has passed the lag time and the leader's next lag check (every half of it), the
        # leader takes it out of the ISR (through the controller), the others staying.
        cluster.clock.advance(LAG_MS // 2 + 1_000)
        shrunk = cluster.wait_for_isr(TOPIC, 0, 2, timeout=WAIT_S)
        assert sorted(shrunk.isr) == sorted(b.node_id for b in cluster.brokers if b is not lagging)
        assert (shrunk.leader, shrunk.leader_epoch) == (before.leader, before.leader_epoch)

