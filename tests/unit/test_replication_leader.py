"""Replication between real brokers on loopback, seen from the leader: identical replicas, the high watermark,
acks=all, ISR shrink and expansion, and what followers and fenced clients are told.

Three in-process brokers run in the test's trio loop; a stand-in controller decides leadership and answers the
leaders' AlterPartition requests (tests/unit/replication_cluster.py).
"""
from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import trio
from kafka.protocol.consumer.fetch import FetchRequest
from kafka.protocol.consumer.offsets import ListOffsetsRequest, OffsetForLeaderEpochRequest

from minikafka.protocol.errors import ErrorCode
from tests.helpers import wait_until_async
from tests.unit.replication_cluster import (
    REPLICATION,
    ReplicationCluster,
    fetch_request,
    produce,
    produce_request,
    running_cluster,
    stored_batches,
)

TOPIC = "replicated"
SLOW_SHRINK = dataclasses.replace(REPLICATION, replica_lag_time_max_ms=30_000)  # the ISR must not shrink


def replicas_agree(cluster: ReplicationCluster, brokers: tuple[int, ...] = (1, 2, 3)) -> bool:
    ends = {cluster.log(b, TOPIC).log_end_offset for b in brokers}
    hws = {cluster.partition(b, TOPIC).high_watermark for b in brokers}
    return len(ends) == 1 and hws == ends


async def test_produced_batches_replicate_byte_for_byte(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster:
        cluster.controller.create_topic(TOPIC, {0: [1, 2, 3]})
        for i in range(5):
            assert (await produce(cluster, 1, TOPIC, [b"a%d" % i, b"b%d" % i], acks=-1 if i % 2 else 1)).error_code == 0
        await wait_until_async(lambda: replicas_agree(cluster), message="the replicas to catch up")
        cluster.controller.elect(TOPIC, 0, 2)  # a clean leader change: a second leader epoch
        await wait_until_async(lambda: cluster.partition(2, TOPIC).is_leader, message="broker 2 to lead")
        response = await produce(cluster, 2, TOPIC, [b"c"])
        assert response.error_code == 0 and response.base_offset == 10
        await wait_until_async(lambda: replicas_agree(cluster), message="the replicas to catch up again")
        batches = {b: stored_batches(cluster.log(b, TOPIC)) for b in (1, 2, 3)}
        assert [(base, epoch) for base, epoch, _, _ in batches[1]] == [(0, 0), (2, 0), (4, 0), (6, 0), (8, 0), (10, 1)]
        assert batches[1] == batches[2] == batches[3]  # base offset, leader epoch, CRC and every byte
        caches = {b: cluster.log(b, TOPIC).leader_epoch_cache for b in (1, 2, 3)}
        assert caches[1].epochs == caches[2].epochs == caches[3].epochs
        assert [(e.epoch, e.start_offset) for e in caches[1].epochs] == [(0, 0), (1, 10)]
        assert caches[1].path.read_bytes() == caches[2].path.read_bytes() == caches[3].path.read_bytes()


async def test_the_log_start_offset_reaches_followers(tmp_path: Path) -> None:
    async with running_cluster(tmp_path, config=SLOW_SHRINK) as cluster:
        cluster.controller.create_topic(TOPIC, {0: [1, 2, 3]})
        for i in range(5):
            assert (await produce(cluster, 1, TOPIC, [b"%d" % i])).error_code == 0
        await wait_until_async(lambda: replicas_agree(cluster), message="the replicas to catch up")
        assert cluster.replica_manager(1).delete_records((TOPIC, 0), 3) == 3  # DeleteRecords on the leader
        await wait_until_async(lambda: all(cluster.log(b, TOPIC).log_start_offset == 3 for b in (2, 3)),
                               message="the followers' log start offsets to follow the leader's")


async def test_the_high_watermark_follows_the_slowest_isr_member(tmp_path: Path) -> None:
    async with running_cluster(tmp_path, config=SLOW_SHRINK) as cluster:
        cluster.controller.create_topic(TOPIC, {0: [1, 2, 3]})
        assert (await produce(cluster, 1, TOPIC, [b"x"])).error_code == 0
        await wait_until_async(lambda: replicas_agree(cluster), message="the replicas to catch up")
        cluster.replica_manager(3).fetcher_manager.pause_fetching()
        for _ in range(3):
            assert (await produce(cluster, 1, TOPIC, [b"y"], acks=1)).error_code == 0
        leader = cluster.partition(1, TOPIC)
        await wait_until_async(lambda: leader.remote_log_end_offsets[2] == 4,
                               message="broker 2 to replicate everything")
        assert leader.high_watermark == 1  # broker 3, in the ISR, is still at 1
        client = await cluster.client(1)
        consumed = await client.request(fetch_request(TOPIC, 1))
        part = consumed.responses[0].partitions[0]
        assert part.high_watermark == 1 and not part.records
        await client.aclose()
        cluster.replica_manager(3).fetcher_manager.resume_fetching()
        await wait_until_async(lambda: leader.high_watermark == 4,
                               message="the HW to reach the log end once broker 3 caught up")


async def test_a_parked_consumer_fetch_completes_when_the_high_watermark_moves(tmp_path: Path) -> None:
    async with running_cluster(tmp_path, config=SLOW_SHRINK) as cluster:
        cluster.controller.create_topic(TOPIC, {0: [1, 2, 3]})
        cluster.replica_manager(3).fetcher_manager.pause_fetching()
        client = await cluster.client(1)
        await client.send(fetch_request(TOPIC, 0, max_wait_ms=15_000))
        assert (await produce(cluster, 1, TOPIC, [b"wake"], acks=1)).error_code == 0
        started = time.monotonic()
        cluster.replica_manager(3).fetcher_manager.resume_fetching()
        with trio.fail_after(10):
            response = await client.receive(fetch_request(TOPIC, 0))
        part = response.responses[0].partitions[0]
        assert part.error_code == 0 and b"wake" in part.records and part.high_watermark == 1
        assert time.monotonic() - started < 10  # woken by the HW move, not by its max wait
        await client.aclose()


async def test_acks_all_waits_for_the_isr(tmp_path: Path) -> None:
    async with running_cluster(tmp_path, config=SLOW_SHRINK) as cluster:
        cluster.controller.create_topic(TOPIC, {0: [1, 2, 3]})
        cluster.replica_manager(3).fetcher_manager.pause_fetching()
        outcome: dict[str, object] = {}

        async def produce_all() -> None:
            outcome["response"] = await produce(cluster, 1, TOPIC, [b"durable"], acks=-1)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(produce_all)
            leader = cluster.partition(1, TOPIC)
            await wait_until_async(lambda: leader.remote_log_end_offsets[2] == 1,
                                   message="broker 2 to replicate the record")
            assert leader.high_watermark == 0 and "response" not in outcome  # broker 3 has not got it
            cluster.replica_manager(3).fetcher_manager.resume_fetching()
        response = outcome["response"]
        assert response.error_code == 0 and response.base_offset == 0  # type: ignore[attr-defined]
        assert leader.high_watermark == 1


async def test_acks_all_refused_below_min_insync_replicas(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster:
        cluster.controller.create_topic(TOPIC, {0: [1, 2, 3]}, {"min.insync.replicas": "3"})
        cluster.replica_manager(3).fetcher_manager.pause_fetching()
        # A follower at the leader's log end counts as in sync however long it is silent: move the end.
        assert (await produce(cluster, 1, TOPIC, [b"first"], acks=1)).error_code == 0
        await wait_until_async(lambda: cluster.controller.state(TOPIC, 0).isr == [1, 2],
                               message="broker 3 to leave the ISR")
        await wait_until_async(lambda: cluster.partition(1, TOPIC).isr == [1, 2],
                               message="the leader to apply the shrink")
        refused = await produce(cluster, 1, TOPIC, [b"no"], acks=-1)
        assert refused.error_code == ErrorCode.NOT_ENOUGH_REPLICAS
        assert cluster.log(1, TOPIC).log_end_offset == 1  # refused before appending
        assert (await produce(cluster, 1, TOPIC, [b"yes"], acks=1)).error_code == 0


async def test_acks_all_times_out(tmp_path: Path) -> None:
    async with running_cluster(tmp_path, config=SLOW_SHRINK) as cluster:
        cluster.controller.create_topic(TOPIC, {0: [1, 2, 3]})
        cluster.replica_manager(2).fetcher_manager.pause_fetching()
        started = trio.current_time()
        response = await produce(cluster, 1, TOPIC, [b"late"], acks=-1, timeout_ms=300)
        assert response.error_code == ErrorCode.REQUEST_TIMED_OUT
        assert trio.current_time() - started >= 0.3
        assert cluster.log(1, TOPIC).log_end_offset == 1  # appended, only not acknowledged in time


async def test_acks_all_answers_not_leader_when_leadership_moves(tmp_path: Path) -> None:
    async with running_cluster(tmp_path, config=SLOW_SHRINK) as cluster:
        cluster.controller.create_topic(TOPIC, {0: [1, 2, 3]})
        cluster.replica_manager(3).fetcher_manager.pause_fetching()
        client = await cluster.client(1)
        await client.send(produce_request(TOPIC, [b"moved"], version=10))
        leader = cluster.partition(1, TOPIC)
        await wait_until_async(lambda: leader.log_end_offset == 1, message="the append")
        cluster.controller.elect(TOPIC, 0, 2, isr=[2, 3])
        with trio.fail_after(10):
            response = await client.receive(produce_request(TOPIC, [], version=10))
        part = response.responses[0].partition_responses[0]
        assert part.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert (part.current_leader.leader_id, part.current_leader.leader_epoch) == (2, 1)
        assert [(n.node_id, (n.host, n.port)) for n in response.node_endpoints] == [(2, cluster.endpoint(2))]
        await client.aclose()


async def test_a_parked_produce_is_dropped_when_its_client_leaves(tmp_path: Path) -> None:
    async with running_cluster(tmp_path, config=SLOW_SHRINK) as cluster:
        cluster.controller.create_topic(TOPIC, {0: [1, 2, 3]})
        for broker in (2, 3):
            cluster.replica_manager(broker).fetcher_manager.pause_fetching()
        purgatory = cluster.servers[1].purgatory
        await wait_until_async(lambda: purgatory.delayed_operations == 0, message="the followers' last fetches to end")
        client = await cluster.client(1)
        await client.send(produce_request(TOPIC, [b"abandoned"]))
        await wait_until_async(lambda: purgatory.delayed_operations == 1, message="the produce to wait for the ISR")
        await client.aclose()
        await wait_until_async(lambda: purgatory.delayed_operations == 0, message="the produce to be dropped")


async def test_isr_shrinks_when_a_follower_stops_and_expands_when_it_resumes(tmp_path: Path) -> None:
    lag_ms = REPLICATION.replica_lag_time_max_ms
    async with running_cluster(tmp_path) as cluster:
        cluster.controller.create_topic(TOPIC, {0: [1, 2, 3]})
        assert (await produce(cluster, 1, TOPIC, [b"before"])).error_code == 0
        await wait_until_async(lambda: replicas_agree(cluster), message="the replicas to catch up")
        cluster.replica_manager(3).fetcher_manager.pause_fetching()
        stopped = trio.current_time()
        # A follower at the leader's log end counts as in sync however long it is silent: move the end.
        assert (await produce(cluster, 1, TOPIC, [b"unseen"], acks=1)).error_code == 0
        await wait_until_async(lambda: cluster.controller.state(TOPIC, 0).isr == [1, 2],
                               message="broker 3 to leave the ISR")
        assert trio.current_time() - stopped < 1.5 * lag_ms / 1000 + 1.0  # checked every lag / 2
        for _ in range(3):
            assert (await produce(cluster, 1, TOPIC, [b"while out"], acks=-1)).error_code == 0
        cluster.replica_manager(3).fetcher_manager.resume_fetching()
        await wait_until_async(lambda: cluster.controller.state(TOPIC, 0).isr == [1, 2, 3],
                               message="broker 3 to rejoin the ISR")
        await wait_until_async(lambda: replicas_agree(cluster), message="the replicas to agree")
        assert cluster.partition(1, TOPIC).isr == [1, 2, 3]


async def test_followers_send_clients_to_the_leader(tmp_path: Path) -> None:
    async with running_cluster(tmp_path, config=SLOW_SHRINK) as cluster:
        cluster.controller.create_topic(TOPIC, {0: [1, 2, 3]})
        client = await cluster.client(2)
        produced = await client.request(produce_request(TOPIC, [b"to a follower"], version=10))
        part = produced.responses[0].partition_responses[0]
        assert part.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert (part.current_leader.leader_id, part.current_leader.leader_epoch) == (1, 0)
        assert [(n.node_id, (n.host, n.port)) for n in produced.node_endpoints] == [(1, cluster.endpoint(1))]
        topic_id = cluster.controller.topics[TOPIC].topic_id
        fetched = await client.request(fetch_request(TOPIC, 0, version=16, topic_id=topic_id))
        fpart = fetched.responses[0].partitions[0]
        assert fpart.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert (fpart.current_leader.leader_id, fpart.current_leader.leader_epoch) == (1, 0)
        assert [(n.node_id, (n.host, n.port)) for n in fetched.node_endpoints] == [(1, cluster.endpoint(1))]
        await client.aclose()


async def test_leader_epoch_fencing_in_kafkas_order(tmp_path: Path) -> None:
    async with running_cluster(tmp_path, config=SLOW_SHRINK) as cluster:
        cluster.controller.create_topic(TOPIC, {0: [1, 2, 3]})
        cluster.controller.elect(TOPIC, 0, 2)  # leader epoch 1
        await wait_until_async(lambda: cluster.partition(1, TOPIC).leader_epoch == 1,
                               message="broker 1 to follow at epoch 1")
        old_leader, leader = await cluster.client(1), await cluster.client(2)
        cases = [(old_leader, 0, ErrorCode.FENCED_LEADER_EPOCH),  # a stale epoch, even on a follower
                 (old_leader, 1, ErrorCode.NOT_LEADER_OR_FOLLOWER),
                 (old_leader, 2, ErrorCode.UNKNOWN_LEADER_EPOCH),
                 (leader, 0, ErrorCode.FENCED_LEADER_EPOCH),
                 (leader, 2, ErrorCode.UNKNOWN_LEADER_EPOCH),
                 (leader, 1, ErrorCode.NONE)]
        for client, epoch, code in cases:
            fetched = await client.request(fetch_request(TOPIC, 0, current_leader_epoch=epoch))
            assert fetched.responses[0].partitions[0].error_code == code, ("Fetch", epoch)
            L = ListOffsetsRequest[7]
            listed = await client.request(L(replica_id=-1, isolation_level=0, topics=[L.ListOffsetsTopic(
                name=TOPIC, partitions=[L.ListOffsetsTopic.ListOffsetsPartition(
                    partition_index=0, current_leader_epoch=epoch, timestamp=-1)])]))
            assert listed.topics[0].partitions[0].error_code == code, ("ListOffsets", epoch)
            E = OffsetForLeaderEpochRequest[4]
            ended = await client.request(E(replica_id=-1, topics=[E.OffsetForLeaderTopic(
                topic=TOPIC, partitions=[E.OffsetForLeaderTopic.OffsetForLeaderPartition(
                    partition=0, current_leader_epoch=epoch, leader_epoch=0)])]))
            assert ended.topics[0].partitions[0].error_code == code, ("OffsetForLeaderEpoch", epoch)
        for client in (old_leader, leader):
            await client.aclose()


async def test_a_fetch_from_a_broker_outside_the_assignment_is_refused(tmp_path: Path) -> None:
    async with running_cluster(tmp_path, config=SLOW_SHRINK) as cluster:
        cluster.controller.create_topic(TOPIC, {0: [1, 2]})
        topic_id = cluster.controller.topics[TOPIC].topic_id
        R = FetchRequest[17]
        client = await cluster.client(1)
        for epoch, code in ((0, ErrorCode.UNKNOWN_LEADER_EPOCH), (-1, ErrorCode.NOT_LEADER_OR_FOLLOWER)):
            request = R(replica_state=R.ReplicaState(replica_id=3, replica_epoch=cluster.broker_epochs[3]),
                        max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0,
                        session_epoch=-1, topics=[R.FetchTopic(topic_id=topic_id, partitions=[
                            R.FetchTopic.FetchPartition(partition=0, current_leader_epoch=epoch, fetch_offset=0,
                                                        last_fetched_epoch=-1, log_start_offset=0,
                                                        partition_max_bytes=1 << 20)])],
                        forgotten_topics_data=[], rack_id="")
            response = await client.request(request)
            assert response.responses[0].partitions[0].error_code == code
        assert 3 not in cluster.partition(1, TOPIC).remote_log_end_offsets
        await client.aclose()


async def test_a_fetch_in_flight_when_fetching_is_paused_brings_nothing_back(tmp_path: Path) -> None:
    """A pause starts at once: the answer to a fetch parked at the leader when the pause came is dropped, so a
    record produced after the pause never reaches the paused follower (what an unclean-election test relies on)."""
    async with running_cluster(tmp_path, config=SLOW_SHRINK) as cluster:
        cluster.controller.create_topic(TOPIC, {0: [1, 2, 3]})
        assert (await produce(cluster, 1, TOPIC, [b"x"])).error_code == 0
        await wait_until_async(lambda: replicas_agree(cluster), message="the replicas to catch up")
        leader = cluster.partition(1, TOPIC)
        await wait_until_async(lambda: cluster.replica_manager(1).purgatory.delayed_operations == 2,
                               message="both followers' fetches parked at the leader")
        cluster.replica_manager(3).fetcher_manager.pause_fetching()
        assert (await produce(cluster, 1, TOPIC, [b"after the pause"], acks=1)).error_code == 0
        # Broker 2's next fetch tells the leader it has the record: the parked fetches were answered before it.
        await wait_until_async(lambda: leader.remote_log_end_offsets[2] == 2,
                               message="broker 2 to replicate the record")
        assert cluster.log(3, TOPIC).log_end_offset == 1
        cluster.replica_manager(3).fetcher_manager.resume_fetching()
        await wait_until_async(lambda: cluster.log(3, TOPIC).log_end_offset == 2,
                               message="broker 3 to fetch it once resumed")
