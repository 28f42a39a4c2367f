"""Followers that must truncate: the scenarios of KIP-101 and KIP-279, the DivergingEpoch path of KIP-320, the
high-watermark fallback for a log without epochs, and a restarted follower that resumes where its log ends.

Every scenario ends with replicas holding identical batches; a design that truncated to the high watermark
would leave them diverged (or lose acknowledged records) in the KIP-101 and KIP-279 cases.
"""
from __future__ import annotations

import logging
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatch

from minikafka.storage.log_dir import LogDir
from tests.helpers import wait_until_async
from tests.unit.replication_cluster import ReplicationCluster, produce, running_cluster, stored_batches

TOPIC = "truncated"
TP = (TOPIC, 0)


def in_sync(cluster: ReplicationCluster, brokers: tuple[int, ...]) -> bool:
    """Same batches everywhere, and every high watermark at the end."""
    batches = [stored_batches(cluster.log(b, TOPIC)) for b in brokers]
    end = cluster.log(brokers[0], TOPIC).log_end_offset
    return all(b == batches[0] for b in batches[1:]) and all(
        cluster.partition(b, TOPIC).high_watermark == end for b in brokers)


def assert_identical(cluster: ReplicationCluster, brokers: tuple[int, ...]) -> list[tuple[int, int]]:
    """The replicas' batches and leader-epoch checkpoints agree; returns (base offset, leader epoch) per batch."""
    batches = [stored_batches(cluster.log(b, TOPIC)) for b in brokers]
    assert all(b == batches[0] for b in batches[1:])
    epochs = [cluster.log(b, TOPIC).leader_epoch_cache.epochs for b in brokers]
    assert all(e == epochs[0] for e in epochs[1:])
    return [(base, epoch) for base, epoch, _, _ in batches[0]]


def values(cluster: ReplicationCluster, broker: int) -> list[bytes]:
    return [record.value for _, _, _, data in stored_batches(cluster.log(broker, TOPIC))
            for record in DefaultRecordBatch(data)]


async def test_kip101_a_follower_restarting_with_a_stale_hw_keeps_its_records(tmp_path: Path) -> None:
    """KIP-101 scenario 1: the follower's high watermark checkpoint is behind its log when it restarts, and the
    leader dies right after. Truncating to the HW would lose acknowledged records; truncating by epoch keeps them."""
    async with running_cluster(tmp_path, broker_ids=(1, 2)) as cluster:
        cluster.controller.create_topic(TOPIC, {0: [1, 2]})
        for value in (b"m0", b"m1"):
            assert (await produce(cluster, 1, TOPIC, [value])).error_code == 0
        await wait_until_async(lambda: cluster.log(2, TOPIC).log_end_offset == 2, message="broker 2 to replicate")
        await cluster.crash(2)  # no checkpoint written: its high watermark on restart is 0
        await cluster.start(2)
        assert cluster.partition(2, TOPIC).high_watermark == 0 and cluster.log(2, TOPIC).log_end_offset == 2
        fetchers = cluster.replica_manager(2).fetcher_manager
        await wait_until_async(
            lambda: fetchers.fetch_state(TP) is not None and fetchers.fetch_state(TP).fetch_offset == 2
            and fetchers.fetch_state(TP).state.value == "fetching",
            message="broker 2 to finish truncating")
        await cluster.crash(1)
        cluster.controller.elect(TOPIC, 0, 2, isr=[2])
        assert cluster.log(2, TOPIC).log_end_offset == 2  # both acknowledged records survive
        assert (await produce(cluster, 2, TOPIC, [b"m2"])).base_offset == 2
        await cluster.start(1)
        await wait_until_async(lambda: in_sync(cluster, (1, 2)), message="broker 1 to catch up as follower")
        assert assert_identical(cluster, (1, 2)) == [(0, 0), (1, 0), (2, 1)]


async def test_kip101_the_old_leader_truncates_by_epoch_after_both_crash(tmp_path: Path) -> None:
    """KIP-101 scenario 2: both replicas crash; the one that comes back first lost its unflushed tail and becomes
    leader; the old leader returns and must cut the records the new leader never had, though its HW covers them."""
    async with running_cluster(tmp_path, broker_ids=(1, 2)) as cluster:
        cluster.controller.create_topic(TOPIC, {0: [1, 2]})
        for value in (b"m0", b"m1"):
            assert (await produce(cluster, 1, TOPIC, [value])).error_code == 0
        await wait_until_async(lambda: in_sync(cluster, (1, 2)), message="both replicas to hold both records")
        first_batch = len(stored_batches(cluster.log(2, TOPIC))[0][3])
        await cluster.crash(1)
        await cluster.crash(2)
        segment = tmp_path / "broker-2" / f"{TOPIC}-0" / "00000000000000000000.log"
        with segment.open("r+b") as f:  # the unflushed tail broker 2's crash lost
            f.truncate(first_batch)
        await cluster.start(2)
        cluster.controller.elect(TOPIC, 0, 2, isr=[2])
        assert cluster.log(2, TOPIC).log_end_offset == 1
        assert (await produce(cluster, 2, TOPIC, [b"m2"])).base_offset == 1
        await cluster.start(1)
        await wait_until_async(lambda: in_sync(cluster, (1, 2)), message="broker 1 to truncate and catch up")
        assert assert_identical(cluster, (1, 2)) == [(0, 0), (1, 1)]
        assert values(cluster, 1) == [b"m0", b"m2"]


async def test_kip279_truncation_over_several_rounds(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """KIP-279: leadership moves back and forth through unclean elections, each leader writing in its own epoch.
    The returning replica's latest epoch is unknown to the leader; it truncates once by OffsetForLeaderEpoch, then
    again when a Fetch answers that its log still diverges (KIP-320), and ends identical to the leader."""
    caplog.set_level(logging.INFO, logger="minikafka.replica_fetcher")
    async with running_cluster(tmp_path, broker_ids=(1, 2)) as cluster:
        cluster.controller.create_topic(TOPIC, {0: [1, 2]})
        fetching = {b: cluster.replica_manager(b).fetcher_manager for b in (1, 2)}
        assert (await produce(cluster, 1, TOPIC, [b"m0"])).error_code == 0  # epoch 0, both replicas
        await wait_until_async(lambda: in_sync(cluster, (1, 2)), message="both replicas to hold m0")
        fetching[2].pause_fetching()
        fetching[1].pause_fetching()
        assert (await produce(cluster, 1, TOPIC, [b"m1"], acks=1)).base_offset == 1  # only broker 1
        cluster.controller.elect(TOPIC, 0, 2, isr=[2])  # epoch 1, unclean
        assert (await produce(cluster, 2, TOPIC, [b"m2"], acks=1)).base_offset == 1
        cluster.controller.elect(TOPIC, 0, 1, isr=[1])  # epoch 2, unclean
        assert (await produce(cluster, 1, TOPIC, [b"m3"], acks=1)).base_offset == 2
        cluster.controller.elect(TOPIC, 0, 2, isr=[2])  # epoch 3, unclean
        assert (await produce(cluster, 2, TOPIC, [b"m4"], acks=1)).base_offset == 2
        assert [(e.epoch, e.start_offset) for e in cluster.log(1, TOPIC).leader_epoch_cache.epochs] == [(0, 0),
                                                                                                       (2, 2)]
        fetching[1].resume_fetching()
        fetching[2].resume_fetching()
        await wait_until_async(lambda: in_sync(cluster, (1, 2)), message="broker 1 to converge on broker 2's log")
        assert assert_identical(cluster, (1, 2)) == [(0, 0), (1, 1), (2, 3)]
        assert values(cluster, 1) == [b"m0", b"m2", b"m4"]
    messages = [r.getMessage() for r in caplog.records]
    assert any("truncating to 2 (leader's epoch 1 ends at 2)" in m for m in messages), messages
    assert any("diverging from the leader at epoch 0, end offset 1: truncating to 1" in m for m in messages), messages


async def test_a_restarted_follower_resumes_from_its_log_end(tmp_path: Path,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="minikafka.replica_fetcher")  # a truncation that cuts nothing is DEBUG
    async with running_cluster(tmp_path) as cluster:
        cluster.controller.create_topic(TOPIC, {0: [1, 2, 3]})
        for i in range(5):
            assert (await produce(cluster, 1, TOPIC, [b"before %d" % i])).error_code == 0
        await wait_until_async(lambda: in_sync(cluster, (1, 2, 3)), message="the replicas to catch up")
        await cluster.stop(3)
        segment = tmp_path / "broker-3" / f"{TOPIC}-0" / "00000000000000000000.log"
        kept = segment.read_bytes()
        for i in range(3):
            assert (await produce(cluster, 1, TOPIC, [b"after %d" % i], acks=1)).error_code == 0
        caplog.clear()
        await cluster.start(3)
        await wait_until_async(lambda: cluster.log(3, TOPIC).log_end_offset == 8, message="broker 3 to catch up")
        assert segment.read_bytes()[:len(kept)] == kept
        truncations = [r.getMessage() for r in caplog.records if "truncating to" in r.getMessage()]
        assert truncations == [f"{TOPIC}-0: truncating to 5 (leader's epoch 0 ends at 8)"]
        await wait_until_async(lambda: in_sync(cluster, (1, 2, 3)), message="the replicas to agree")
        assert_identical(cluster, (1, 2, 3))


async def test_a_log_without_epochs_truncates_to_its_high_watermark(tmp_path: Path,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="minikafka.replica_fetcher")
    async with running_cluster(tmp_path, broker_ids=(1, 2)) as cluster:
        cluster.controller.create_topic(TOPIC, {0: [1, 2]})
        for i in range(3):
            assert (await produce(cluster, 1, TOPIC, [b"r%d" % i])).error_code == 0
        await wait_until_async(lambda: in_sync(cluster, (1, 2)), message="the replicas to catch up")
        await cluster.stop(2)
        data_dir = LogDir(tmp_path / "broker-2")
        data_dir.write_high_watermarks({TP: 1})  # a stale high watermark
        (tmp_path / "broker-2" / f"{TOPIC}-0" / "leader-epoch-checkpoint").unlink()
        caplog.clear()
        await cluster.start(2)
        await wait_until_async(lambda: in_sync(cluster, (1, 2)), message="broker 2 to refetch past its high watermark")
        assert [r.getMessage() for r in caplog.records if "truncating" in r.getMessage()] == [
            f"{TOPIC}-0: no leader epochs: truncating to the high watermark 1"]
        assert stored_batches(cluster.log(1, TOPIC)) == stored_batches(cluster.log(2, TOPIC))
