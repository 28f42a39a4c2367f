"""Kafka's DelayedFetch: a fetch that found less than min_bytes waits, on trio's clock, for more.

A consumer waits for the high watermark to move, a follower for the leader's log end offset. The wait ends early
— and the fetch is answered with whatever there is then — when a partition stops being led here or the caller's
leader epoch is fenced, when the fetch offset falls outside what can be read (a truncated leader) or on an older
segment, when a follower's last fetched epoch now diverges, or once min_bytes are there; the bytes of a partition
the leader's replication quota holds back from this follower count for nothing. Appends, high watermark moves and
leadership changes check it; nothing polls.

As Kafka's, it reads nothing while it waits: where its fetch offset sits in the log (segment and byte position) is
taken once, when it parks, and the bytes that have accumulated are the distance from there to where the high
watermark (a follower: the log end) sits now. Checking costs the same whatever min_bytes asks or the log holds,
so the purgatory can check every parked fetch of a partition on each append; the records are read once, after.
"""
from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import trio
from kafka.protocol.consumer.offsets import IsolationLevel

from minikafka.broker.replication.purgatory import Purgatory
from minikafka.protocol.codec import Records
from minikafka.protocol.errors import KafkaError
from minikafka.storage.log_offset_metadata import LogOffsetMetadata
from minikafka.storage.transaction_index import AbortedTxn

if TYPE_CHECKING:
    from minikafka.broker.replication.partition import Partition, PartitionLookup

TopicPartition = tuple[str, int]
# Kafka's shouldLeaderThrottle: whether the leader's replication quota holds back a partition from a follower.
LeaderThrottle = Callable[["Partition", int], bool]
UNDEFINED = -1


def fetch_key(tp: TopicPartition) -> Hashable:
    """The purgatory key fetches of `tp` wait on."""
    return ("fetch", *tp)


@dataclass(frozen=True)
class FetchParams:
    """What a Fetch request asks of every partition (Kafka's FetchParams)."""

    replica_id: int = -1  # a follower's broker id; negative for consumers
    replica_epoch: int = -1  # the follower's broker epoch, -1 when not sent
    max_wait_ms: int = 0
    min_bytes: int = 1
    max_bytes: int = 0x7FFFFFFF
    isolation_level: int = IsolationLevel.READ_UNCOMMITTED

    @property
    def is_from_follower(self) -> bool:
        return self.replica_id >= 0


@dataclass
class FetchPartitionRequest:
    topic_partition: TopicPartition
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    log_start_offset: int = -1  # a follower's own


@dataclass
class FetchPartitionResult:
    error: KafkaError | None = None
    records: Records = b""
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    diverging_epoch: tuple[int, int] | None = None
    leader_id: int = -1
    leader_epoch: int = -1
    # read_committed: the aborted transactions overlapping `records`; None for other readers
    aborted_transactions: list[AbortedTxn] | None = None


class DelayedFetch:
    __slots__ = ("_params", "_partitions", "_should_leader_throttle", "_statuses")

    def __init__(self, partitions: PartitionLookup, should_leader_throttle: LeaderThrottle, params: FetchParams,
                 requests: list[FetchPartitionRequest]) -> None:
        self._partitions = partitions
        self._should_leader_throttle = should_leader_throttle
        self._params = params
        # Each partition with where its fetch offset is (Kafka's FetchPartitionStatus), None if it has no place now.
        self._statuses = [(request, self._start_offset_metadata(request)) for request in requests]

    def _start_offset_metadata(self, request: FetchPartitionRequest) -> LogOffsetMetadata | None:
        try:
            return self._partitions.partition_or_error(*request.topic_partition).offset_metadata(
                request.fetch_offset)
        except KafkaError:
            return None

    def try_complete(self) -> bool:
        """Whether the fetch is worth answering now (Kafka's DelayedFetch.tryComplete), reading no records. The
        purgatory calls this for every fetch parked on a partition at each of its appends: keep it cheap."""
        params = self._params
        accumulated = 0
        for request, start in self._statuses:
            if start is None:
                return True  # the partition was changed under the fetch before it parked
            try:
                # A partition gone (or offline) since is an error here: worth answering now.
                partition = self._partitions.partition_or_error(*request.topic_partition)
                partition.check_leader(request.current_leader_epoch)
                if params.is_from_follower:
                    end = partition.log.log_end_offset_metadata
                elif params.isolation_level == IsolationLevel.READ_COMMITTED:
                    end = partition.last_stable_offset_metadata()
                else:
                    end = partition.high_watermark_metadata()
                offset = start.message_offset
                if offset > end.message_offset or offset < partition.log.log_start_offset:
                    return True  # a truncated leader, or records deleted from under the fetch
                throttled = params.is_from_follower and self._should_leader_throttle(partition, params.replica_id)
                if offset < end.message_offset and not throttled:  # a throttled partition adds nothing (Kafka)
                    if start.segment_base_offset < end.segment_base_offset:
                        return True  # a read of rolled segments, or the log just rolled: worth answering now
                    if start.segment_base_offset == end.segment_base_offset:
                        accumulated += min(end.relative_position_in_segment - start.relative_position_in_segment,
                                           request.max_bytes)
                if request.last_fetched_epoch >= 0:
                    epoch, end_offset = partition.log.end_offset_for_epoch(request.last_fetched_epoch)
                    if UNDEFINED in (epoch, end_offset) or epoch < request.last_fetched_epoch or end_offset < offset:
                        return True
            except KafkaError:
                return True
        return accumulated >= params.min_bytes

    async def wait(self, purgatory: Purgatory, deadline: float, client: trio.SocketStream | None = None,
                   stop_early: Callable[[], bool] | None = None) -> None:
        """Until the fetch can complete, its deadline passes or `stop_early()` (the broker is shutting down)."""
        keys = [fetch_key(request.topic_partition) for request, _ in self._statuses]
        while not self.try_complete():
            remaining = deadline - trio.current_time()
            if remaining <= 0 or (stop_early is not None and stop_early()):
                return
            await purgatory.wait_any(keys, remaining, client, self.try_complete)
