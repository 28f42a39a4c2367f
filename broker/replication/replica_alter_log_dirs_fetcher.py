"""Moving one replica between log dirs (Kafka's ReplicaAlterLogDirsThread, for one partition at a time).

The future log is a follower whose leader is the current log of the same broker: each step first truncates the
future log where it diverges from the current one (by leader epoch, as a follower against its leader, KIP-101/279,
and never past the current log end or below its start), then copies the next batches by reading the current log
locally and appending them as a follower would (offsets and leader epochs kept, so the bytes are those of the
current log). When the future log holds all of the current one, the step swaps them with no await between the
check and the swap: the event loop is the partition's lock, so no append or read sees a half-moved replica.
"""
from __future__ import annotations

import functools
import logging
import shutil
from typing import TYPE_CHECKING

import trio

from minikafka.storage.log import Log

if TYPE_CHECKING:
    from minikafka.broker.log.log_manager import LogManager
    from minikafka.broker.replication.partition import Partition

log = logging.getLogger("minikafka.replica_alter_log_dirs")

TopicPartition = tuple[str, int]
MAX_TRUNCATION_ROUNDS = 100  # each round drops at least one epoch of the future log; a log has few of them


def truncate_future_log(current: Log, future: Log) -> None:
    """Cut the future log where it stops matching the current one (Kafka's truncation of a follower against its
    leader's OffsetForLeaderEpoch answers, asked of the local current log)."""
    for _ in range(MAX_TRUNCATION_ROUNDS):
        if future.log_end_offset < current.log_start_offset or future.log_start_offset > current.log_end_offset:
            future.truncate_fully_and_start_at(current.log_start_offset)
            return
        target = min(future.log_end_offset, current.log_end_offset)
        latest = future.leader_epoch_cache.latest_epoch
        if latest is not None:
            epoch, end = current.end_offset_for_epoch(latest)
            if end < 0:
                target = current.log_start_offset
            elif epoch == latest:
                target = min(target, end)
            else:  # an epoch the current log does not have: back to where the epoch below ends in both
                _, future_end = future.end_offset_for_epoch(epoch)
                target = min(target, end, max(future_end, 0))
        if target >= future.log_end_offset:
            return
        if target < future.log_start_offset or target < current.log_start_offset:
            future.truncate_fully_and_start_at(current.log_start_offset)
            return
        log.info("%s: truncating the future log to %d (current log %d..%d)", future.name, target,
                 current.log_start_offset, current.log_end_offset)
        future.truncate_to(target)


class ReplicaAlterLogDirsFetcher:
    """Copies current logs into future logs, a chunk per step, and swaps them once caught up."""

    def __init__(self, log_manager: LogManager, max_bytes: int) -> None:
        self.log_manager = log_manager
        self.max_bytes = max_bytes

    async def step(self, tp: TopicPartition, partition: Partition) -> tuple[int, Log | None]:
        """Copy one chunk of `tp`'s current log into its future log, or swap them if the future log is complete.
        Returns the bytes copied and, after a swap, the new current log (already the partition's)."""
        future = self.log_manager.future_logs[tp]
        current = partition.log
        truncate_future_log(current, future)
        if future.log_end_offset == current.log_end_offset:
            if future.recovery_point < future.log_end_offset:  # fsync off the loop; the swap flushes only the rest
                await trio.to_thread.run_sync(future.flush)
                if not self._unchanged(tp, partition, current, future):
                    return 0, None
                truncate_future_log(current, future)
                if future.log_end_offset != current.log_end_offset:
                    return 0, None
            moved, deleted = self.log_manager.replace_current_with_future_log(tp)
            partition.log = moved
            partition.high_watermark = partition.high_watermark  # its place in the log is worked out again
            await trio.to_thread.run_sync(functools.partial(shutil.rmtree, deleted, ignore_errors=True))
            return 0, moved
        offset = future.log_end_offset
        read = functools.partial(current.read, offset, self.max_bytes, min_one_message=True)
        data = await trio.to_thread.run_sync(read) if offset < current.active_segment.base_offset else read()
        if not data or not self._unchanged(tp, partition, current, future) or future.log_end_offset != offset:
            return 0, None
        appended = future.append_as_follower(data)
        start = min(current.log_start_offset, future.log_end_offset)
        if start > future.log_start_offset:
            future.maybe_increment_log_start_offset(start)
        return (len(data) if appended.last_offset >= 0 else 0), None

    def _unchanged(self, tp: TopicPartition, partition: Partition, current: Log, future: Log) -> bool:
        """After an await: the same logs are still current and future (no swap, removal or new move)."""
        return partition.log is current and self.log_manager.future_logs.get(tp) is future \
            and self.log_manager.logs.get(tp) is current
