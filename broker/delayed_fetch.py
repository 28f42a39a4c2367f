"""Kafka's DelayedFetch: a fetch that found less than min_bytes waits, on trio's clock, for more.

A consumer waits for the high watermark to move, a follower for the leader's log end offset. The wait ends early
— and the fetch is answered with whatever there is then — when a partition stops being led here or the caller's
leader epoch is fenced, when the fetch offset falls outside what can be read (a truncated leader) or on an older
segment, when a follower's last fetched epoch now diverges, or once min_bytes are there. Appends, high watermark
moves and leadership changes wake it; nothing polls.
"""
from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import trio
from kafka.protocol.consumer.offsets import IsolationLevel

from minikafka.protocol.errors import KafkaError

from .purgatory import Purgatory

if TYPE_CHECKING:
    from .replica_manager import ReplicaManager

TopicPartition = tuple[str, int]
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
    records: bytes = b""
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    diverging_epoch: tuple[int, int] | None = None
    leader_id: int = -1
    leader_epoch: int = -1


class DelayedFetch:
    def __init__(self, replica_manager: ReplicaManager, params: FetchParams,
                 requests: list[FetchPartitionRequest]) -> None:
        self._replica_manager = replica_manager
        self._params = params
        self._requests = requests

    def try_complete(self) -> bool:
        params = self._params
        accumulated = 0
        for request in self._requests:
            try:
                partition = self._replica_manager.partition_or_error(*request.topic_partition)
                partition.check_leader(request.current_leader_epoch)
                the_log = partition.log
                if params.is_from_follower:
                    end = the_log.log_end_offset
                elif params.isolation_level == IsolationLevel.READ_COMMITTED:
                    end = partition.last_stable_offset()
                else:
                    end = partition.high_watermark
                offset = request.fetch_offset
                if offset > end or offset < the_log.log_start_offset:
                    return True
                if offset < end:
                    if offset < the_log.active_segment.base_offset:
                        return True  # a read of rolled segments: worth answering now
                    if params.min_bytes <= 1:
                        return True
                    wanted = min(request.max_bytes, params.min_bytes - accumulated)
                    accumulated += len(the_log.read(offset, wanted, max_offset=end, min_one_message=True))
                if request.last_fetched_epoch >= 0:
                    epoch, end_offset = the_log.end_offset_for_epoch(request.last_fetched_epoch)
                    if (UNDEFINED in (epoch, end_offset) or epoch < request.last_fetched_epoch
                            or end_offset < offset):
                        return True
            except KafkaError:
                return True
        return accumulated >= params.min_bytes

    async def wait(self, purgatory: Purgatory, deadline: float, client: trio.SocketStream | None = None,
                   stop_early: Callable[[], bool] | None = None) -> None:
        """Until the fetch can complete, its deadline passes or `stop_early()` (the broker is shutting down)."""
        keys = [fetch_key(request.topic_partition) for request in self._requests]
        while not self.try_complete():
            remaining = deadline - trio.current_time()
            if remaining <= 0 or (stop_early is not None and stop_early()):
                return
            await purgatory.wait_any(keys, remaining, client)
