"""Moving a replica between log dirs: the future log, its copy from the current log, and the swap (LogManager,
ReplicaAlterLogDirsFetcher), plus AlterReplicaLogDirs' per-partition answers and an offline log dir."""
from __future__ import annotations

import time
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest
import trio
from trio.testing import MockClock

from minikafka.broker.faults.disk_quota import DiskQuota
from minikafka.broker.log.log_manager import LogManager
from minikafka.broker.replication.delayed_fetch import fetch_key
from minikafka.broker.replication.partition import Partition
from minikafka.broker.replication.purgatory import Purgatory
from minikafka.broker.replication.replica_alter_log_dirs_fetcher import ReplicaAlterLogDirsFetcher, truncate_future_log
from minikafka.broker.replication.replica_alter_log_dirs_manager import ReplicaAlterLogDirsManager
from minikafka.broker.replication.replica_manager import ReplicaManager
from minikafka.broker.replication.replication_config import ReplicationConfig
from minikafka.broker.server.handlers.log_dirs import alter_replica_log_dir
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.storage.log import Log
from minikafka.storage.log_config import LogConfig
from tests.record_bytes import values_batch

CLUSTER = "Hs1sHQZRQ2yTK7SDYhXZ0Q"
TOPIC_ID = uuid.uuid4()
TP = ("moving", 0)
MAX_STEPS = 1000
CLOCK_RATE = 20
MAX_REAL_WAIT_S = 60


def new_manager(dirs: list[Path]) -> LogManager:
    return LogManager(dirs, 1, CLUSTER, LogConfig(segment_bytes=4096), DiskQuota(dirs))


def fill(the_log: Log, batches: int, epoch: int) -> None:
    now_ms = int(time.time() * 1000)
    for i in range(batches):
        the_log.append_as_leader(values_batch([f"e{epoch}-{i}-{n}".encode() * 10 for n in range(5)]), epoch, now_ms)


def log_bytes(the_log: Log) -> bytes:
    """Through the segments' descriptors: a moved log's old files are gone from the directory."""
    return b"".join(segment.read_bytes(0, segment.size) for segment in the_log.segments)


def run_move(manager: LogManager, partition: Partition, max_bytes: int = 1000) -> int:
    """Steps until the swap; returns how many it took."""
    fetcher = ReplicaAlterLogDirsFetcher(manager, max_bytes)

    async def steps() -> int:
        for step in range(1, MAX_STEPS + 1):
            _, moved = await fetcher.step(TP, partition)
            if moved is not None:
                return step
        raise AssertionError(f"no swap after {MAX_STEPS} steps")

    return trio.run(steps)


def hosted(tmp_path: Path) -> tuple[LogManager, Partition, Path, Path]:
    a, b = tmp_path / "a", tmp_path / "b"
    manager = new_manager([a, b])
    manager.prefer_log_dir(TP, manager.log_dirs[0])
    current = manager.get_or_create_log(*TP, TOPIC_ID, {})
    assert current.dir == a / "moving-0"
    partition = Partition(*TP, TOPIC_ID, current, 1)
    return manager, partition, a, b


def test_future_log_copies_the_current_one_and_replaces_it(tmp_path: Path) -> None:
    manager, partition, a, b = hosted(tmp_path)
    current = partition.log
    fill(current, 30, epoch=0)
    fill(current, 30, epoch=3)
    current.leader_epoch_cache.assign(5, current.log_end_offset)  # a leadership with nothing appended yet
    partition.high_watermark = current.log_end_offset
    expected = log_bytes(current)
    assert len(current.segments) > 1

    assert manager.maybe_create_future_log(TP, manager.log_dirs[1], TOPIC_ID)
    future_dir = manager.future_logs[TP].dir
    assert future_dir.parent == b and future_dir.name.startswith("moving-0.") and future_dir.name.endswith("-future")
    assert not manager.maybe_create_future_log(TP, manager.log_dirs[1], TOPIC_ID)  # already moving there

    assert run_move(manager, partition) > 1  # a chunk at a time
    moved = partition.log
    assert moved is manager.logs[TP] and moved is not current
    assert moved.dir == b / "moving-0" and manager.dir_of(TP) is manager.log_dirs[1]
    assert not future_dir.exists()
    assert sorted(p.name for p in a.iterdir() if p.is_dir()) == []  # neither the old log nor a -delete dir
    assert log_bytes(moved) == expected
    assert moved.log_end_offset == current.log_end_offset
    assert moved.leader_epoch_cache.epochs == current.leader_epoch_cache.epochs
    assert TP not in manager.future_logs
    fill(moved, 1, epoch=5)  # the moved log takes appends
    assert moved.log_end_offset == current.log_end_offset + 5


def test_future_log_keeps_up_with_appends_while_copying(tmp_path: Path) -> None:
    manager, partition, _a, _b = hosted(tmp_path)
    fill(partition.log, 20, epoch=1)
    manager.maybe_create_future_log(TP, manager.log_dirs[1], TOPIC_ID)
    fetcher = ReplicaAlterLogDirsFetcher(manager, 500)

    async def copy_while_appending() -> None:
        for _ in range(10):
            await fetcher.step(TP, partition)
            fill(partition.log, 1, epoch=1)  # the leader goes on taking produces
        for _ in range(MAX_STEPS):
            _, moved = await fetcher.step(TP, partition)
            if moved is not None:
                return
        raise AssertionError("never caught up")

    before = partition.log
    trio.run(copy_while_appending)
    assert log_bytes(partition.log) == log_bytes(before)


def test_future_log_truncated_where_the_current_log_diverged(tmp_path: Path) -> None:
    manager, partition, _a, _b = hosted(tmp_path)
    current = partition.log
    fill(current, 10, epoch=1)
    manager.maybe_create_future_log(TP, manager.log_dirs[1], TOPIC_ID)
    future = manager.future_logs[TP]
    future.append_as_follower(current.read(0, 1 << 20))
    copied_end = future.log_end_offset
    assert copied_end == current.log_end_offset
    current.truncate_to(20)  # the follower truncated to a new leader's log ...
    fill(current, 4, epoch=2)  # ... and took its records of a later epoch
    truncate_future_log(current, future)
    assert future.log_end_offset == 20
    run_move(manager, partition)
    assert partition.log.leader_epoch_cache.epochs == current.leader_epoch_cache.epochs
    assert log_bytes(partition.log) == log_bytes(current)


def test_future_log_starts_at_the_current_log_start(tmp_path: Path) -> None:
    manager, partition, _a, _b = hosted(tmp_path)
    current = partition.log
    fill(current, 40, epoch=0)
    current.maybe_increment_log_start_offset(current.segments[2].base_offset)
    start = current.log_start_offset
    manager.maybe_create_future_log(TP, manager.log_dirs[1], TOPIC_ID)
    run_move(manager, partition)
    assert partition.log.log_start_offset == start
    assert partition.log.segments[0].base_offset == start
    assert partition.log.log_end_offset == current.log_end_offset


def test_unfinished_move_resumes_after_a_restart(tmp_path: Path) -> None:
    manager, partition, a, b = hosted(tmp_path)
    fill(partition.log, 10, epoch=0)
    manager.maybe_create_future_log(TP, manager.log_dirs[1], TOPIC_ID)
    manager.future_logs[TP].append_as_follower(partition.log.read(0, 300))
    manager.shutdown({TP: partition.log.log_end_offset})

    again = new_manager([a, b])
    again.load_logs({})
    assert set(again.logs) == {TP} and set(again.future_logs) == {TP}
    assert again.dir_of(TP) is again.log_dirs[0] and again.future_dir_of(TP) is again.log_dirs[1]
    resumed = Partition(*TP, TOPIC_ID, again.logs[TP], 1)
    run_move(again, resumed)
    assert resumed.log.dir == b / "moving-0"
    again.shutdown({})


def test_moving_back_to_the_current_dir_drops_the_future_log(tmp_path: Path) -> None:
    manager, _partition, _a, _b = hosted(tmp_path)
    manager.maybe_create_future_log(TP, manager.log_dirs[1], TOPIC_ID)
    future_dir = manager.future_logs[TP].dir
    assert not manager.maybe_create_future_log(TP, manager.log_dirs[0], TOPIC_ID)
    assert TP not in manager.future_logs and not future_dir.exists()


def test_alter_replica_log_dir_answers(tmp_path: Path) -> None:
    manager, partition, a, b = hosted(tmp_path)
    replica_manager = cast(ReplicaManager, SimpleNamespace(log_manager=manager, partitions={TP: partition}))
    assert alter_replica_log_dir(replica_manager, TP, str(tmp_path / "elsewhere")) == ErrorCode.LOG_DIR_NOT_FOUND
    assert alter_replica_log_dir(replica_manager, TP, str(a)) == ErrorCode.NONE  # where it is: nothing to move
    assert TP not in manager.future_logs
    assert alter_replica_log_dir(replica_manager, TP, str(b)) == ErrorCode.NONE
    assert manager.future_dir_of(TP) is manager.log_dirs[1]
    # Not hosted: REPLICA_NOT_AVAILABLE, and the replica is created in that dir when it comes.
    assert alter_replica_log_dir(replica_manager, ("later", 0), str(b)) == ErrorCode.REPLICA_NOT_AVAILABLE
    assert manager.get_or_create_log("later", 0, uuid.uuid4(), {}).dir == b / "later-0"
    long_name = ("t" * 249, 0)
    assert alter_replica_log_dir(replica_manager, long_name, str(b)) == ErrorCode.INVALID_TOPIC_EXCEPTION


def test_offline_log_dir(tmp_path: Path) -> None:
    manager, partition, a, b = hosted(tmp_path)
    other = manager.get_or_create_log("other", 0, uuid.uuid4(), {})
    assert manager.dir_of(("other", 0)) is manager.log_dirs[1]
    assert manager.take_offline(a) == [TP]
    assert manager.take_offline(a) == []
    assert set(manager.logs) == {("other", 0)} and manager.logs[("other", 0)] is other
    with pytest.raises(KafkaError) as offline:
        manager.log_dir_named(str(a))
    assert offline.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    assert manager.get_or_create_log("new", 0, uuid.uuid4(), {}).dir == b / "new-0"  # only online dirs get logs
    with pytest.raises(KafkaError) as refused:  # no future log while a dir is offline
        manager.maybe_create_future_log(("other", 0), manager.log_dirs[0], None)
    assert refused.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    manager.shutdown({})


def test_manager_moves_every_future_log_at_the_configured_rate(tmp_path: Path) -> None:
    """The manager's task copies each future log a chunk at a time and swaps it in; at a rate of R bytes/s a log
    of B bytes cannot be copied in less than about B/R s of trio's clock (a mock clock running CLOCK_RATE times
    faster than real time, as the copy's reads and fsyncs run on worker threads in real time)."""
    manager, partition, _a, b = hosted(tmp_path)
    fill(partition.log, 40, epoch=0)
    size = partition.log.size_in_bytes
    rate = 2_000
    purgatory = Purgatory()
    mover = ReplicaAlterLogDirsManager(manager, ReplicationConfig(replica_fetch_max_bytes=1000,
                                                                  replica_fetch_backoff_ms=100),
                                       {TP: partition}.get, purgatory)
    mover.io_max_bytes_per_second = lambda: rate

    async def move() -> float:
        async with trio.open_nursery() as nursery:
            await nursery.start(mover.run)
            started = trio.current_time()
            manager.maybe_create_future_log(TP, manager.log_dirs[1], TOPIC_ID)
            mover.wake()
            # The swap wakes fetches parked on the partition, as it wakes this wait.
            await purgatory.wait_any([fetch_key(TP)], MAX_REAL_WAIT_S * CLOCK_RATE, None)
            nursery.cancel_scope.cancel()
            return trio.current_time() - started

    took = trio.run(move, clock=MockClock(rate=CLOCK_RATE))
    assert TP not in manager.future_logs and partition.log.dir == b / "moving-0"
    assert took >= 0.9 * (size - 1000) / rate
