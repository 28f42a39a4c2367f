"""The share partition manager's own parts: what a share fetch answers of what it read (the batch headers of bytes
and of file slices alike, a partial batch at the end left out; only the batches that hold acquired offsets, still
as a slice of the segment file when read from one; ranges cut by batch_size), acquisition locks that run out on
trio's clock, and a member's records released when its session ends or its connection closes."""
from __future__ import annotations

import os
import struct
import uuid
from pathlib import Path

import trio
from trio.testing import MockClock, wait_all_tasks_blocked

from minikafka.broker.coordinator.share.share_coordinator_shard import SharePartitionKey
from minikafka.broker.replication.purgatory import Purgatory
from minikafka.broker.server.share.persister import PersisterResult, PersisterStateBatch, ReadStateResult
from minikafka.broker.server.share.share_partition import AcquiredRecords, SharePartition
from minikafka.broker.server.share.share_partition_manager import (
    SharePartitionManager,
    _Read,
    batch_headers,
    iso_duration_ms,
    records_of,
    split_at_batches,
)
from minikafka.config import BrokerConfig
from minikafka.protocol.errors import ErrorCode
from minikafka.protocol.file_records import FileRecords
from tests.raw_client import record_batch


def batches(*spans: tuple[int, int]) -> bytes:
    """Batches of the given (base offset, record count), back to back as a log holds them."""
    out = b""
    for base, count in spans:
        batch = bytearray(record_batch([b"v%d" % (base + i) for i in range(count)]))
        struct.pack_into(">q", batch, 0, base)  # the base offset is outside the CRC, as the log rewrites it
        out += bytes(batch)
    return out


def test_batch_headers_of_bytes_and_of_a_file(tmp_path: Path) -> None:
    data = batches((10, 3), (13, 2), (15, 4))
    path = tmp_path / "segment.log"
    path.write_bytes(b"x" * 7 + data)
    fd = os.open(path, os.O_RDONLY)
    try:
        from_file = FileRecords(fd, 7, len(data) - 5)  # the last batch cut short: not a batch yet
        in_memory = [(pos, h.base_offset, h.last_offset) for pos, h in batch_headers(data)]
        assert [(pos, h.base_offset, h.last_offset) for pos, h in batch_headers(from_file)] == in_memory[:2]
        assert [(b, e) for _, b, e in in_memory] == [(10, 12), (13, 14), (15, 18)]
        whole = FileRecords(fd, 7, len(data))
        read = _Read(None, 14, whole, batch_headers(whole))  # type: ignore[arg-type]
        middle = records_of(read, [AcquiredRecords(14, 14, 1)])
        assert isinstance(middle, FileRecords) and middle.read() == data[in_memory[1][0]:in_memory[2][0]]
        tail = records_of(read, [AcquiredRecords(14, 14, 1), AcquiredRecords(16, 17, 2)])
        assert tail.read() == data[in_memory[1][0]:]  # type: ignore[union-attr]
        assert records_of(read, []) == b""
        in_bytes = _Read(None, 10, data, batch_headers(data))  # type: ignore[arg-type]
        assert records_of(in_bytes, [AcquiredRecords(10, 11, 1)]) == data[:in_memory[1][0]]
    finally:
        os.close(fd)


def test_share_auto_offset_reset_durations() -> None:
    assert iso_duration_ms("PT1H") == 3_600_000
    assert iso_duration_ms("P1DT2M3.5S") == 86_400_000 + 120_000 + 3_500
    assert iso_duration_ms("pt0.25s") == 250


def test_acquired_ranges_split_at_log_batches_by_batch_size() -> None:
    bases = [0, 3, 5, 9, 10, 20]  # log batches 0-2, 3-4, 5-8, 9, 10-19, 20-...
    assert split_at_batches([AcquiredRecords(0, 24, 1)], bases, 4) == [
        AcquiredRecords(0, 4, 1), AcquiredRecords(5, 8, 1), AcquiredRecords(9, 19, 1), AcquiredRecords(20, 24, 1)]
    assert split_at_batches([AcquiredRecords(4, 12, 2)], bases, 100) == [AcquiredRecords(4, 12, 2)]
    assert split_at_batches([AcquiredRecords(1, 1, 1), AcquiredRecords(3, 9, 1)], bases, 1) == [
        AcquiredRecords(1, 1, 1), AcquiredRecords(3, 4, 1), AcquiredRecords(5, 8, 1), AcquiredRecords(9, 9, 1)]
    assert split_at_batches([AcquiredRecords(0, 9, 1)], bases, 0) == [AcquiredRecords(0, 9, 1)]


TOPIC_ID = uuid.UUID(int=7)
KEY = SharePartitionKey("g", TOPIC_ID, 0)


class MemoryPersister:
    """The share coordinator as a leader sees it, in memory: every state written is kept."""

    def __init__(self) -> None:
        self.writes: list[tuple[int, tuple[PersisterStateBatch, ...]]] = []

    async def read_state(self, key: SharePartitionKey, leader_epoch: int) -> ReadStateResult:
        return ReadStateResult(ErrorCode.NONE, None, 1, 0, ())

    async def write_state(self, key: SharePartitionKey, state_epoch: int, leader_epoch: int, start_offset: int,
                          state_batches: tuple[PersisterStateBatch, ...]) -> PersisterResult:
        self.writes.append((start_offset, state_batches))
        return PersisterResult(ErrorCode.NONE)


class Leadership:
    """The part of the replica manager the share partition manager listens to."""

    node_id = 1

    def __init__(self) -> None:
        self.on_become_leader: list = []
        self.on_become_follower: list = []
        self.partitions: dict = {}


async def loaded_manager(nursery: trio.Nursery, persister: MemoryPersister) -> tuple[SharePartitionManager,
                                                                                    SharePartition]:
    manager = SharePartitionManager(BrokerConfig({}), Leadership(), Purgatory(),  # type: ignore[arg-type]
                                    lambda: persister, lambda _group: {})
    await nursery.start(manager.run)
    share_partition = SharePartition(KEY, 0, persister, topic_partition=("t", 0))  # type: ignore[arg-type]
    manager.partitions[KEY] = share_partition

    async def earliest() -> int:
        return 0

    assert await share_partition.maybe_initialize(earliest) == ErrorCode.NONE
    return manager, share_partition


async def acquire(manager: SharePartitionManager, share_partition: SharePartition, member: str, lock_ms: int,
                  delivery: int = 1) -> None:
    data = batches((0, 5))
    manager.config = BrokerConfig({"group.share.record.lock.duration.ms": lock_ms})
    results: dict = {}
    assert await manager._acquire("g", member, 10, 10, {KEY: _Read(share_partition, 0, data, batch_headers(data))},
                                  results)
    assert results[KEY].acquired == [AcquiredRecords(0, 4, delivery)]


def states(share_partition: SharePartition) -> list[tuple[str, int]]:
    state = share_partition.state
    assert state is not None
    return [(r.state.name, r.delivery_count) for o in range(state.start_offset, state.end_offset)
            if (r := state.record(o)) is not None]


def test_the_groups_last_session_ending_drops_its_share_partitions() -> None:
    """As a connection closing does: state changed in the share coordinator meanwhile (an offsets reset) is read
    anew by the next member's fetch."""
    persister = MemoryPersister()

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            manager, share_partition = await loaded_manager(nursery, persister)
            manager.new_context("g", "m", 0, [(TOPIC_ID, 0)], [], False, "connection-1")
            manager.new_context("g", "n", 0, [(TOPIC_ID, 0)], [], False, "connection-2")
            await acquire(manager, share_partition, "m", 30_000)
            assert await manager.release_session("g", "m") == ErrorCode.NONE
            assert manager.partitions == {KEY: share_partition}  # n's session is still open
            assert await manager.release_session("g", "n") == ErrorCode.NONE
            assert manager.partitions == {}
            nursery.cancel_scope.cancel()

    trio.run(main, clock=MockClock(autojump_threshold=0))


def test_acquisition_locks_expire_on_time() -> None:
    persister = MemoryPersister()

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            manager, share_partition = await loaded_manager(nursery, persister)
            await acquire(manager, share_partition, "m", 1000)
            await trio.sleep(0.999)
            assert states(share_partition) == [("ACQUIRED", 1)] * 5 and persister.writes == []
            await trio.sleep(0.002)
            assert states(share_partition) == [("AVAILABLE", 1)] * 5
            assert persister.writes == [(0, (PersisterStateBatch(0, 4, 0, 1),))]
            nursery.cancel_scope.cancel()

    trio.run(main, clock=MockClock(autojump_threshold=0))


def test_a_session_ending_or_its_connection_closing_releases_its_records() -> None:
    persister = MemoryPersister()

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            manager, share_partition = await loaded_manager(nursery, persister)
            manager.new_context("g", "m", 0, [(TOPIC_ID, 0)], [], False, "connection-1")
            manager.new_context("g", "o", 0, [(TOPIC_ID, 0)], [], False, "connection-3")
            await acquire(manager, share_partition, "m", 30_000)
            assert await manager.release_session("g", "m") == ErrorCode.NONE
            assert states(share_partition) == [("AVAILABLE", 1)] * 5 and manager.sessions.get("g", "m") is None
            assert await manager.release_session("g", "m") == ErrorCode.SHARE_SESSION_NOT_FOUND
            manager.new_context("g", "n", 0, [(TOPIC_ID, 0)], [], False, "connection-2")
            await acquire(manager, share_partition, "n", 30_000, delivery=2)
            manager.connection_closed("connection-1")  # not n's connection
            await wait_all_tasks_blocked()
            assert states(share_partition) == [("ACQUIRED", 2)] * 5
            manager.connection_closed("connection-2")
            await wait_all_tasks_blocked()
            assert states(share_partition) == [("AVAILABLE", 2)] * 5 and len(manager.sessions) == 1
            assert manager.partitions == {KEY: share_partition}  # o's session is still open here
            manager.connection_closed("connection-3")
            await wait_all_tasks_blocked()
            assert manager.partitions == {}  # the group's last session here is gone: its share-partitions too
            nursery.cancel_scope.cancel()

    trio.run(main, clock=MockClock(autojump_threshold=0))
