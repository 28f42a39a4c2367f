"""What a parked fetch costs: it counts accumulated bytes by log positions, never by reading records; it holds a
few hundred bytes; and the purgatory checks it in place on each append, waking only the fetches that complete.

Partitions here are real logs on disk under a single-replica leader, so each append moves the high watermark, as
on a broker of its own; the replica manager is reduced to the partitions it hosts.
"""
from __future__ import annotations

import time
import tracemalloc
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
import trio
import trio.testing

from minikafka.broker.metadata.metadata_image import PartitionInfo
from minikafka.broker.replication.delayed_fetch import DelayedFetch, FetchParams, FetchPartitionRequest
from minikafka.broker.replication.partition import Partition
from minikafka.broker.replication.purgatory import Purgatory
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.storage.errors import OffsetOutOfRangeError
from minikafka.storage.log import Log
from minikafka.storage.log_config import LogConfig
from minikafka.storage.log_offset_metadata import LogOffsetMetadata
from minikafka.storage.segment import LogSegment
from tests.raw_client import record_batch

BIG = (1 << 31) - 1
BATCH = record_batch([b"v" * 100])
PARKED = 500


class Partitions:
    """The part of the replica manager a DelayedFetch looks at: the partitions hosted here."""

    def __init__(self) -> None:
        self.partitions: dict[tuple[str, int], Partition] = {}

    def partition_or_error(self, topic: str, index: int) -> Partition:
        partition = self.partitions.get((topic, index))
        if partition is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic}-{index} is not hosted here")
        return partition


def _not_throttled(_partition: Partition, _replica_id: int) -> bool:
    return False


def _now_ms() -> int:
    return int(time.time() * 1000)


def _leader(tmp_path: Path, hosted: Partitions, index: int = 0, epoch: int = 0) -> Partition:
    the_log = Log.open(tmp_path / f"t-{index}", "t", index, LogConfig(), now_ms=_now_ms())
    partition = Partition("t", index, uuid.uuid4(), the_log, 1)
    assert partition.make_leader(PartitionInfo([1], [1], 1, epoch, epoch), 0) is True
    hosted.partitions[("t", index)] = partition
    return partition


def _append(partition: Partition, count: int = 1) -> None:
    for _ in range(count):
        partition.log.append_as_leader(bytearray(BATCH), partition.leader_epoch, _now_ms())
        assert partition.maybe_increment_high_watermark(_now_ms())


def _park(hosted: Partitions, partition: Partition, min_bytes: int, *, offset: int | None = None,
          leader_epoch: int = -1, max_bytes: int = BIG) -> DelayedFetch:
    at = partition.log.log_end_offset if offset is None else offset
    request = FetchPartitionRequest(("t", partition.index), at, max_bytes, leader_epoch)
    return DelayedFetch(hosted, _not_throttled, FetchParams(max_wait_ms=BIG, min_bytes=min_bytes, max_bytes=BIG),  # type: ignore[arg-type]
                        [request])


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every read of segment bytes, by its length."""
    seen: list[int] = []
    original = LogSegment.read_bytes

    def counted(self: LogSegment, position: int, length: int) -> bytes:
        seen.append(length)
        return original(self, position, length)

    monkeypatch.setattr(LogSegment, "read_bytes", counted)
    return seen


def test_accumulated_bytes_come_from_positions_without_reading(tmp_path: Path, reads: list[int]) -> None:
    hosted = Partitions()
    partition = _leader(tmp_path, hosted)
    _append(partition, 3)
    fetch = _park(hosted, partition, min_bytes=len(BATCH) * 5 // 2)
    for _ in range(2):
        _append(partition)
        assert not fetch.try_complete()
    _append(partition)
    assert fetch.try_complete()
    assert reads == []


def test_bytes_add_up_over_partitions_each_capped_at_its_max_bytes(tmp_path: Path) -> None:
    hosted = Partitions()
    first, second = _leader(tmp_path, hosted, 0), _leader(tmp_path, hosted, 1)
    requests = [FetchPartitionRequest(("t", 0), 0, BIG), FetchPartitionRequest(("t", 1), 0, len(BATCH) // 2)]
    fetch = DelayedFetch(hosted, _not_throttled, FetchParams(max_wait_ms=BIG, min_bytes=len(BATCH) * 2),  # type: ignore[arg-type]
                         requests)
    _append(first)
    _append(second, 3)  # counts for half a batch: the partition's max_bytes
    assert not fetch.try_complete()
    _append(first)
    assert fetch.try_complete()


def test_a_fetch_left_on_a_rolled_segment_completes(tmp_path: Path) -> None:
    hosted = Partitions()
    partition = _leader(tmp_path, hosted)
    _append(partition)
    fetch = _park(hosted, partition, min_bytes=BIG)
    partition.log.roll(_now_ms())
    assert not fetch.try_complete()  # the high watermark is where it was
    _append(partition)
    assert fetch.try_complete()


def test_leadership_changes_and_deleted_records_complete_it(tmp_path: Path) -> None:
    hosted = Partitions()
    partition = _leader(tmp_path, hosted, epoch=3)
    _append(partition, 4)
    fenced = _park(hosted, partition, min_bytes=BIG, leader_epoch=3)
    gone = _park(hosted, partition, min_bytes=BIG)
    behind = _park(hosted, partition, min_bytes=BIG, offset=1)
    assert not any(f.try_complete() for f in (fenced, gone, behind))

    partition.log.maybe_increment_log_start_offset(2)
    assert behind.try_complete() and not gone.try_complete()
    assert partition.make_leader(PartitionInfo([1], [1], 1, 4, 4), 0) is True
    assert fenced.try_complete() and not gone.try_complete()
    del hosted.partitions[("t", 0)]
    assert gone.try_complete()


def test_offset_metadata_is_where_the_batch_holding_the_offset_starts(tmp_path: Path) -> None:
    the_log = Log.open(tmp_path / "t-0", "t", 0, LogConfig(), now_ms=_now_ms())
    three = record_batch([b"a", b"b", b"c"])
    the_log.append_as_leader(bytearray(three), 0, _now_ms())  # offsets 0-2
    the_log.append_as_leader(bytearray(BATCH), 0, _now_ms())  # offset 3
    the_log.roll(_now_ms())
    the_log.append_as_leader(bytearray(BATCH), 0, _now_ms())  # offset 4, on the new segment

    assert the_log.offset_metadata(1) == LogOffsetMetadata(1, 0, 0)
    assert the_log.offset_metadata(3) == LogOffsetMetadata(3, 0, len(three))
    assert the_log.offset_metadata(4) == LogOffsetMetadata(4, 4, 0)
    assert the_log.offset_metadata(5) == the_log.log_end_offset_metadata == LogOffsetMetadata(5, 4, len(BATCH))
    for outside in (-1, 6):
        with pytest.raises(OffsetOutOfRangeError):
            the_log.offset_metadata(outside)


def test_the_high_watermark_keeps_its_metadata_until_it_moves(tmp_path: Path, reads: list[int]) -> None:
    hosted = Partitions()
    partition = _leader(tmp_path, hosted)
    _append(partition, 3)
    at_end = partition.high_watermark_metadata()
    assert at_end == partition.log.log_end_offset_metadata and reads == []  # at the log end: nothing to read
    assert partition.offset_metadata(3) is at_end

    partition.high_watermark = 1  # as behind a follower that has only the first batch
    assert partition.high_watermark_metadata() == LogOffsetMetadata(1, 0, len(BATCH))
    looked_up = len(reads)
    assert partition.high_watermark_metadata() is partition.high_watermark_metadata()
    assert len(reads) == looked_up  # looked up once per move, then shared


def test_a_parked_fetch_holds_a_few_hundred_bytes(tmp_path: Path) -> None:
    hosted = Partitions()
    partition = _leader(tmp_path, hosted)
    _append(partition)
    params = FetchParams(max_wait_ms=BIG, min_bytes=BIG, max_bytes=BIG)
    requests = [[FetchPartitionRequest(("t", 0), partition.log.log_end_offset, BIG)] for _ in range(1000)]
    partition.high_watermark_metadata()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        parked = [DelayedFetch(hosted, _not_throttled, params, request) for request in requests]  # type: ignore[arg-type]
        each = (tracemalloc.get_traced_memory()[0] - before) / len(parked)
    finally:
        tracemalloc.stop()
    assert each < 400, f"a parked fetch holds {each:.0f} bytes"


async def test_an_append_checks_every_parked_fetch_in_place_and_wakes_only_those_it_completes(
        tmp_path: Path, reads: list[int]) -> None:
    hosted = Partitions()
    partition = _leader(tmp_path, hosted)
    _append(partition)
    purgatory = Purgatory()
    checks = [0]
    answered: list[int] = []

    async def parked(number: int, min_bytes: int) -> None:
        fetch = _park(hosted, partition, min_bytes)

        def counted() -> bool:
            checks[0] += 1
            return fetch.try_complete()

        await purgatory.wait_any([("fetch", "t", 0)], 60, try_complete=counted)
        answered.append(number)

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            for number in range(PARKED):
                nursery.start_soon(parked, number, BIG if number else len(BATCH))
            await trio.testing.wait_all_tasks_blocked()
            assert purgatory.delayed_operations == PARKED

            _append(partition)
            purgatory.check_and_complete(("fetch", "t", 0))
            assert checks[0] == PARKED and purgatory.delayed_operations == PARKED - 1
            await trio.testing.wait_all_tasks_blocked()
            assert answered == [0]

            purgatory.wake_all()  # shutdown: whatever the conditions say
    assert sorted(answered) == list(range(PARKED))
    assert reads == []


async def test_a_wait_without_a_condition_is_woken_by_any_check_and_a_failing_condition_wakes_its_waiter() -> None:
    purgatory = Purgatory()
    woken: list[str] = []

    def fails() -> bool:
        raise RuntimeError("a bug in a condition")

    async def wait(name: str, condition: Callable[[], bool] | None) -> None:
        await purgatory.wait_any(["k"], 60, try_complete=condition)
        woken.append(name)

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(wait, "unconditional", None)
            nursery.start_soon(wait, "failing", fails)
            nursery.start_soon(wait, "never", lambda: False)
            await trio.testing.wait_all_tasks_blocked()
            purgatory.check_and_complete("k")
            await trio.testing.wait_all_tasks_blocked()
            assert sorted(woken) == ["failing", "unconditional"]
            assert purgatory.delayed_operations == 1
            purgatory.wake_all()
    assert woken[-1] == "never"
