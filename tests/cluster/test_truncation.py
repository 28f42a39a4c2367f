"""Follower truncation by leader epoch, in the histories Kafka's KIP-101 and KIP-279 describe, built with real
broker processes: kill -9, restarts, SIGSTOP, and a segment file cut short where a broker is to have lost writes
that never reached the disk.

Each topic has two replicas, brokers 1 (A, the first leader) and 2 (B); broker 3 hosts nothing of it and keeps the
cluster reachable while both replicas are down. In KRaft a killed broker is fenced at once and leaves the ISR, so a
broker that restarts is never in the ISR until it has caught up: the histories below get a lagging replica elected
the ways KRaft allows, as the last ISR member or by an unclean election (`unclean.leader.election.enable` on the
topic). Each ends with both replicas holding the same batches and leader-epoch checkpoints. A design that truncated
to the high watermark instead of asking the leader for its epoch's end offset fails each of them: it loses
acknowledged records (scenario 1) or keeps a tail that differs from the leader's (scenario 2, KIP-279); one that
truncated by epoch in a single round fails KIP-279. Each runs in ZooKeeper mode too, where a killed broker leaves the
ISR once its ZooKeeper session expires, which the histories' waits allow for.
"""
from __future__ import annotations

import os

import pytest
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic

import minikafka
from minikafka.protocol.record_batch import iter_batches
from minikafka.storage.segment import LOG_SUFFIX
from tests.cluster.cluster_modes import CLUSTER_MODES
from tests.cluster.replication_checks import (
    StoredBatch,
    assert_acknowledged_exactly_once,
    assert_replicas_identical,
    high_watermark_checkpoint,
    partition_dir,
)
from tests.helpers import wait_until

A, B = 1, 2  # the replicas, in assignment order: A is the preferred (first) leader
WAIT_S = 20.0
def create_topic(cluster: minikafka.Cluster, name: str, **configs: str) -> None:
    """A one-partition topic on brokers A and B only."""
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers, request_timeout_ms=10000)
    try:
        admin.create_topics([NewTopic(name, -1, replica_assignments={0: [A, B]},
                                      topic_configs={"min.insync.replicas": "1", **configs})])
    finally:
        admin.close()
    cluster.wait_for_isr(name, 0, 2, timeout=WAIT_S)


def produce(cluster: minikafka.Cluster, topic: str, values: list[bytes]) -> dict[int, bytes]:
    """Write each value as its own batch with acks=all to whichever replica leads now; {offset: value}."""
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all", linger_ms=0,
                             enable_idempotence=False, retries=5, retry_backoff_ms=50, request_timeout_ms=10000)
    try:
        return {producer.send(topic, value, partition=0).get(timeout=WAIT_S).offset: value for value in values}
    finally:
        producer.close()


def drop_log_tail(broker: minikafka.Broker, topic: str, partition: int, count: int) -> list[StoredBatch]:
    """Cut the last `count` batches off the partition's newest segment file of a broker that is down: what a
    power failure leaves of writes that were in the page cache only. Returns the batches cut off."""
    assert not broker.running, f"broker {broker.node_id} must be down to lose its unflushed writes"
    path = max(partition_dir(broker, topic, partition).glob(f"*{LOG_SUFFIX}"), key=lambda p: int(p.stem))
    batches = list(iter_batches(path.read_bytes()))
    assert len(batches) > count, f"{path} holds {len(batches)} batches, not more than {count}"
    os.truncate(path, batches[-count][0])
    return [StoredBatch.of(header) for _, header in batches[-count:]]


@pytest.mark.parametrize("zookeeper", CLUSTER_MODES)
def test_kip101_scenario_1_follower_restarts_with_a_stale_high_watermark_then_the_leader_dies(tmp_path, zookeeper):
    """B has every acknowledged record, but its replication-offset-checkpoint lags (it was killed before the next
    checkpoint). B restarts while leader A hangs, so B cannot fetch anything from A; A dies and B is elected. B
    must keep its whole log: truncating to its stale high watermark on restart would lose acknowledged records.
    A returns as follower and truncates by epoch (nothing to cut here), and the replicas match."""
    topic = "kip101-stale-hw"
    # High watermarks are checkpointed at clean shutdown only, so a killed broker's checkpoint lags its log.
    config = {"log.flush.offset.checkpoint.interval.ms": 3_600_000}
    with minikafka.Cluster(brokers=3, data_dir=tmp_path / "cluster", config=config, zookeeper=zookeeper) as cluster:
        a, b = cluster.broker(A), cluster.broker(B)
        create_topic(cluster, topic, **{"unclean.leader.election.enable": "true"})
        acknowledged = produce(cluster, topic, [b"before-%02d" % i for i in range(20)])
        (caught_up,) = cluster.wait_for_replicas_caught_up(topic, timeout=WAIT_S)
        assert caught_up.leader == A and caught_up.log_end_offsets == {A: 20, B: 20}

        b.kill()
        stale = high_watermark_checkpoint(b, topic, 0)
        assert stale is None or stale < 20, f"B's high watermark checkpoint {stale} does not lag its log"
        a.pause()
        b.start()
        # A stops heartbeating and is fenced; B, out of the ISR since its kill, is elected uncleanly.
        elected = cluster.wait_for_leader(topic, 0, timeout=WAIT_S)
        assert elected is b
        state = cluster.state.partition(topic, 0)
        assert state.isr == [B] and state.leader_epoch > caught_up.leader_epoch
        assert state.log_end_offsets[B] == 20, f"B truncated its log on restart: {state}"
        acknowledged |= produce(cluster, topic, [b"after-%02d" % i for i in range(5)])

        a.kill()
        a.start()
        cluster.wait_for_isr(topic, 0, 2, timeout=WAIT_S)
        (final,) = cluster.wait_for_replicas_caught_up(topic, timeout=WAIT_S)
        assert final.log_end_offsets == {A: 25, B: 25}
        assert_acknowledged_exactly_once(cluster.state.records(topic, 0), acknowledged, topic)
        assert_replicas_identical(cluster, topic)


@pytest.mark.parametrize("zookeeper", CLUSTER_MODES)
def test_kip101_scenario_2_both_replicas_crash_and_the_new_leader_lost_its_unflushed_tail(tmp_path, zookeeper):
    """A leads and B follows; A crashes and B is elected; B crashes too, and comes back having lost its last
    batches (never fsynced) — as the last ISR member it leads again, and takes new records at the offsets it lost.
    A returns with its old tail, whose offsets are below its (checkpointed, current) high watermark: it must ask B
    where its epoch ends and truncate there, not to its high watermark."""
    topic = "kip101-lost-tail"
    config = {"log.flush.offset.checkpoint.interval.ms": 100}  # A's checkpointed high watermark is current
    lost_count, written, rewritten = 5, 20, 8
    with minikafka.Cluster(brokers=3, data_dir=tmp_path / "cluster", config=config, zookeeper=zookeeper) as cluster:
        a, b = cluster.broker(A), cluster.broker(B)
        create_topic(cluster, topic)
        acknowledged = produce(cluster, topic, [b"first-%02d" % i for i in range(written)])
        (caught_up,) = cluster.wait_for_replicas_caught_up(topic, timeout=WAIT_S)
        assert caught_up.leader == A
        wait_until(lambda: high_watermark_checkpoint(a, topic, 0) == written, WAIT_S,
                   message="A's replication-offset-checkpoint to reach the high watermark")

        a.kill()
        assert cluster.wait_for_leader(topic, 0, not_on=a, timeout=WAIT_S) is b
        b.kill()
        lost = drop_log_tail(b, topic, 0, lost_count)
        kept = written - lost_count
        assert [batch.base_offset for batch in lost] == list(range(kept, written))
        b.start()
        assert cluster.wait_for_leader(topic, 0, timeout=WAIT_S) is b
        state = cluster.state.partition(topic, 0)
        assert state.log_end_offsets[B] == kept
        new = produce(cluster, topic, [b"second-%02d" % i for i in range(rewritten)])
        assert sorted(new) == list(range(kept, kept + rewritten))

        a.start()
        cluster.wait_for_isr(topic, 0, 2, timeout=WAIT_S)
        (final,) = cluster.wait_for_replicas_caught_up(topic, timeout=WAIT_S)
        assert final.log_end_offsets == {A: kept + rewritten, B: kept + rewritten}
        # The lost records were acknowledged, but no replica kept them: a power failure of every replica loses
        # what was not fsynced, as in Kafka. Everything else is where it was acknowledged.
        survivors = {offset: value for offset, value in acknowledged.items() if offset < kept}
        records = cluster.state.records(topic, 0)
        assert_acknowledged_exactly_once(records, survivors | new, topic)
        assert not {r.value for r in records} & {acknowledged[offset] for offset in range(kept, written)}
        assert_replicas_identical(cluster, topic)


@pytest.mark.parametrize("zookeeper", CLUSTER_MODES)
def test_kip279_unclean_elections_back_and_forth_truncate_in_several_rounds(tmp_path, zookeeper):
    """Kafka's KIP-279 history: leadership moves between A and B by unclean elections, each leader writing while
    the other is down, so B returns with a log whose epochs the leader A does not have. B must walk back epoch by
    epoch (OffsetForLeaderEpoch, then the fetch's diverging epoch) to where the logs agree. B's checkpointed high
    watermark covers its whole divergent log, so truncating to it would keep what A does not have, and so would a
    single round of truncation by epoch."""
    topic = "kip279"
    config = {"log.flush.offset.checkpoint.interval.ms": 100}
    with minikafka.Cluster(brokers=3, data_dir=tmp_path / "cluster", config=config, zookeeper=zookeeper) as cluster:
        a, b = cluster.broker(A), cluster.broker(B)
        create_topic(cluster, topic, **{"unclean.leader.election.enable": "true"})
        kept = produce(cluster, topic, [b"a-epoch-0"])
        cluster.wait_for_replicas_caught_up(topic, timeout=WAIT_S)

        a.kill()  # B is elected cleanly and writes alone
        assert cluster.wait_for_leader(topic, 0, not_on=a, timeout=WAIT_S) is b
        produce(cluster, topic, [b"b-first"])
        b.kill()  # no leader until A returns: an unclean election, A writes alone
        a.start()
        assert cluster.wait_for_leader(topic, 0, not_on=b, timeout=WAIT_S) is a
        kept |= produce(cluster, topic, [(b"a-second-%d-" % i) * 40 for i in range(3)])  # larger batches
        a.kill()  # B back, uncleanly elected, writes alone
        b.start()
        assert cluster.wait_for_leader(topic, 0, not_on=a, timeout=WAIT_S) is b
        produce(cluster, topic, [b"b-second"])
        wait_until(lambda: high_watermark_checkpoint(b, topic, 0) == 3, WAIT_S,
                   message="B's replication-offset-checkpoint to cover its log")
        b.kill()  # A back, uncleanly elected, writes alone
        a.start()
        assert cluster.wait_for_leader(topic, 0, not_on=b, timeout=WAIT_S) is a
        kept |= produce(cluster, topic, [b"a-third-%d" % i for i in range(2)])

        log_start = b.log_path.stat().st_size
        b.start()
        cluster.wait_for_isr(topic, 0, 2, timeout=WAIT_S)
        (final,) = cluster.wait_for_replicas_caught_up(topic, timeout=WAIT_S)
        assert final.leader == A and final.log_end_offsets == {A: 6, B: 6}
        records = cluster.state.records(topic, 0)
        assert [r.value for r in records] == [kept[offset] for offset in sorted(kept)]
        assert_acknowledged_exactly_once(records, kept, topic)
        batches = assert_replicas_identical(cluster, topic)
        assert len({batch.leader_epoch for batch in batches}) == 3  # epoch 0 and A's two unclean leaderships
        with b.log_path.open() as log:
            log.seek(log_start)
            rounds = [line for line in log if f"{topic}-0: " in line and "truncating to" in line]
        assert len(rounds) >= 2, f"B truncated in {len(rounds)} round(s): {rounds}"
