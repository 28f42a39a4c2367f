"""Replication throttling on the fetch path (Kafka's shouldLeaderThrottle and shouldFollowerThrottle): only replicas
outside the ISR of throttled partitions are held back, only while the quota is exceeded, and a held-back
partition's bytes do not complete a parked follower fetch."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import trio
from kafka.protocol.consumer.fetch import FetchRequest

from minikafka.broker.replication.replication_quota_manager import UNLIMITED
from minikafka.protocol.errors import ErrorCode
from tests.helpers import wait_until_async
from tests.unit.replication_cluster import REPLICATION, ReplicationCluster, produce, running_cluster

TOPIC = "throttled"
ALL = {"leader.replication.throttled.replicas": "*", "follower.replication.throttled.replicas": "*"}
SLOW_SHRINK = dataclasses.replace(REPLICATION, replica_lag_time_max_ms=30_000)


def follower_fetch(cluster: ReplicationCluster, replica_id: int, offset: int, *, max_wait_ms: int = 0) -> object:
    R = FetchRequest[17]
    epoch = cluster.broker_epochs.get(replica_id, -1)
    return R(replica_state=R.ReplicaState(replica_id=replica_id, replica_epoch=epoch),
             max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0,
             session_epoch=-1, topics=[R.FetchTopic(topic_id=cluster.controller.topics[TOPIC].topic_id, partitions=[
                 R.FetchTopic.FetchPartition(partition=0, current_leader_epoch=-1, fetch_offset=offset,
                                             last_fetched_epoch=-1, log_start_offset=0, partition_max_bytes=1 << 20)])],
             forgotten_topics_data=[], rack_id="")


async def test_the_leader_holds_back_only_a_throttled_follower_outside_the_isr(tmp_path: Path) -> None:
    async with running_cluster(tmp_path, broker_ids=(1, 2), config=SLOW_SHRINK) as cluster:
        cluster.controller.create_topic(TOPIC, {0: [1, 2, 3]})
        cluster.controller.elect(TOPIC, 0, 1, isr=[1, 2])  # broker 3 is down: outside the ISR
        await wait_until_async(lambda: cluster.partition(1, TOPIC).is_leader, message="broker 1 to lead")
        for i in range(5):
            assert (await produce(cluster, 1, TOPIC, [b"record-%d" % i])).error_code == 0
        quotas = cluster.replica_manager(1).replication_quotas
        quotas.update_topic(TOPIC, ALL)
        quotas.update_rates(100, UNLIMITED)
        quotas.leader.record(100_000)
        assert quotas.leader.is_quota_exceeded()

        client = await cluster.client(1)
        try:
            start = trio.current_time()
            held = (await client.request(follower_fetch(cluster, 3, 0, max_wait_ms=300))).responses[0].partitions[0]
            # the throttled bytes counted for nothing: the fetch waited its whole max_wait_ms
            assert trio.current_time() - start >= 0.3
            assert held.error_code == ErrorCode.NONE and not held.records and held.high_watermark == 5
            assert cluster.partition(1, TOPIC).remote_log_end_offsets[3] == 0  # its position still counts

            in_sync = (await client.request(follower_fetch(cluster, 2, 0))).responses[0].partitions[0]
            assert in_sync.error_code == ErrorCode.NONE and in_sync.records

            quotas.update_rates(UNLIMITED, UNLIMITED)
            served = (await client.request(follower_fetch(cluster, 3, 0))).responses[0].partitions[0]
            assert served.records == in_sync.records
        finally:
            await client.aclose()


async def test_the_follower_leaves_a_throttled_partition_out_of_its_fetches(tmp_path: Path) -> None:
    small_fetches = dataclasses.replace(SLOW_SHRINK, replica_fetch_max_bytes=1000)
    async with running_cluster(tmp_path, config=small_fetches) as cluster:
        cluster.controller.create_topic(TOPIC, {0: [1, 2, 3]})
        await cluster.stop(3)
        cluster.controller.elect(TOPIC, 0, 1, isr=[1, 2])
        for i in range(20):
            assert (await produce(cluster, 1, TOPIC, [b"%d" % i + b"x" * 500])).error_code == 0
        follower = await cluster.start(3)
        quotas = follower.replica_manager.replication_quotas
        quotas.update_topic(TOPIC, ALL)
        quotas.update_rates(UNLIMITED, 100)
        quotas.follower.record(100_000)
        await wait_until_async(lambda: cluster.log(3, TOPIC).log_end_offset > 0, message="broker 3's first fetch")
        await wait_until_async(
            lambda: all(s.lag > 0 for f in follower.replica_manager.fetcher_manager.fetchers.values()
                        for s in f.partition_states.values()),
            message="broker 3 to know it lags")
        held_at = cluster.log(3, TOPIC).log_end_offset
        await trio.sleep(0.5)  # fetchers retry every 50 ms here: several rounds in which nothing may come
        assert cluster.log(3, TOPIC).log_end_offset <= held_at + 2  # at most a fetch already on its way
        assert held_at + 2 < 20

        quotas.update_rates(UNLIMITED, UNLIMITED)
        await wait_until_async(lambda: cluster.log(3, TOPIC).log_end_offset == 20, message="broker 3 to catch up")
