"""The broker's replica moves between its log dirs (Kafka's ReplicaAlterLogDirsManager).

One task copies every future log the LogManager holds, a chunk per partition in turn, so many moves share the
disk fairly, and sleeps while there is none. A move whose step fails (a broken log) waits
replica.fetch.backoff.ms before it is tried again.
The copy rate of all moves together is bounded by replica.alter.log.dirs.io.max.bytes.per.second (unbounded
when unset), a dynamic broker config: `io_max_bytes_per_second` reads its current value.
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

import trio

from minikafka.broker.log.log_manager import LogManager
from minikafka.broker.replication.delayed_fetch import fetch_key
from minikafka.broker.replication.purgatory import Purgatory
from minikafka.broker.replication.replica_alter_log_dirs_fetcher import ReplicaAlterLogDirsFetcher
from minikafka.broker.replication.replication_config import ReplicationConfig
from minikafka.protocol.errors import KafkaError

if TYPE_CHECKING:
    from minikafka.broker.replication.partition import Partition

log = logging.getLogger("minikafka.replica_alter_log_dirs")

TopicPartition = tuple[str, int]
# The partition hosted here, if any: a move goes on only while this broker has a replica of it.
HostedPartition = Callable[[TopicPartition], "Partition | None"]
UNLIMITED = 2**63 - 1  # Kafka's Long.MAX_VALUE: no bound


def _unlimited() -> int:
    return UNLIMITED


class ReplicaAlterLogDirsManager:
    def __init__(self, log_manager: LogManager, config: ReplicationConfig, hosted_partition: HostedPartition,
                 purgatory: Purgatory) -> None:
        self._log_manager = log_manager
        self._hosted_partition = hosted_partition
        self._purgatory = purgatory
        self.io_max_bytes_per_second: Callable[[], int] = _unlimited
        self.fetcher = ReplicaAlterLogDirsFetcher(log_manager, config.replica_fetch_max_bytes)
        self._backoff_s = config.replica_fetch_backoff_ms / 1000
        self._delayed_until: dict[TopicPartition, float] = {}
        self._changed = trio.Event()

    def wake(self) -> None:
        """A move was added (or may be able to go on)."""
        self._changed.set()

    def moving(self) -> list[TopicPartition]:
        """The partitions with a future log and a replica hosted here."""
        return [tp for tp in self._log_manager.future_logs if self._hosted_partition(tp) is not None]

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            self._changed = trio.Event()
            now = trio.current_time()
            ready = [tp for tp in self.moving() if self._delayed_until.get(tp, 0.0) <= now]
            if not ready:
                waits = [until - now for tp, until in self._delayed_until.items() if tp in self.moving()]
                with trio.move_on_after(min(waits) if waits else float("inf")):
                    await self._changed.wait()
                continue
            for tp in ready:
                await self._step(tp)

    async def _step(self, tp: TopicPartition) -> None:
        partition = self._hosted_partition(tp)
        if partition is None or tp not in self._log_manager.future_logs:
            return
        try:
            copied, moved = await self.fetcher.step(tp, partition)
        except (KafkaError, OSError) as exc:
            self._delayed_until[tp] = trio.current_time() + self._backoff_s
            log.error("%s-%d: moving the replica failed, trying again in %.1f s: %s", *tp, self._backoff_s, exc)
            return
        self._delayed_until.pop(tp, None)
        if moved is not None:  # fetches parked on the old log's positions look again
            self._purgatory.check_and_complete(fetch_key(tp))
        rate = self.io_max_bytes_per_second()
        if copied and 0 < rate < UNLIMITED:
            await trio.sleep(copied / rate)
        else:
            await trio.lowlevel.checkpoint()
