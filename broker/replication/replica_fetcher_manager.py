"""The follower side's fetcher tasks (Kafka's ReplicaFetcherManager / AbstractFetcherManager).

Partitions are spread over num.replica.fetchers fetchers per leader by a hash of topic and partition (Kafka's
formula), so a partition keeps its fetcher as long as its leader keeps its address. Fetchers come and go with
leadership: one is started for a leader when a partition first follows it, and stopped once it follows nothing.
A partition whose replication failed (fenced, a broken log) leaves its fetcher until new metadata makes it a
follower again.

For fault injection, fetching can be paused for every partition or some: the follower then stalls as a stuck
broker would (its fetches stop, so the leader sees it fall behind), until resumed.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

import trio

from minikafka.broker.network.network_client import LinkIsCut
from minikafka.broker.replication.replica_fetcher import (
    FollowerReplicas,
    InitialFetchState,
    PartitionFetchState,
    ReplicaFetcher,
)
from minikafka.broker.replication.replication_config import ReplicationConfig

log = logging.getLogger("minikafka.replica_fetcher_manager")

TopicPartition = tuple[str, int]


def java_string_hash(text: str) -> int:
    """Java's String.hashCode, as a signed 32-bit int (stable across processes, unlike Python's hash)."""
    units = text.encode("utf-16-be")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + int.from_bytes(units[i:i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def fetcher_id(tp: TopicPartition, num_fetchers: int) -> int:
    """Kafka's getFetcherId: abs(31 * topic.hashCode + partition) % num.replica.fetchers."""
    return ((31 * java_string_hash(tp[0]) + tp[1]) & 0x7FFFFFFF) % num_fetchers


class ReplicaFetcherManager:
    def __init__(self, replica_manager: FollowerReplicas, config: ReplicationConfig,
                 link_is_cut: LinkIsCut | None = None) -> None:
        self._replica_manager = replica_manager
        self._config = config
        self._link_is_cut = link_is_cut
        self.fetchers: dict[tuple[int, int], ReplicaFetcher] = {}  # by (leader broker id, fetcher id)
        self._paused_all = False
        self._paused: set[TopicPartition] = set()
        # Told of each paused partition a fetch leaves out (the fetch-pause faults count their hits by it).
        self.on_held_back: Callable[[TopicPartition], None] | None = None
        self._nursery: trio.Nursery | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the fetchers until cancelled; fetchers added before this starts begin now."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                for fetcher in self.fetchers.values():
                    nursery.start_soon(fetcher.run)
                task_status.started()
                await trio.sleep_forever()
        finally:
            self._nursery = None

    def add_fetcher_for_partitions(self, initial_states: dict[TopicPartition, InitialFetchState]) -> None:
        grouped: dict[tuple[int, int], dict[TopicPartition, InitialFetchState]] = {}
        for tp, initial in initial_states.items():
            key = (initial.leader_id, fetcher_id(tp, self._config.num_replica_fetchers))
            grouped.setdefault(key, {})[tp] = initial
        for key, states in grouped.items():
            endpoint = next(iter(states.values())).leader_endpoint
            fetcher = self.fetchers.get(key)
            if fetcher is not None and fetcher.leader_endpoint != endpoint:
                # The leader came back at another address: a new connection, and the partitions go along.
                moved = fetcher.partition_states
                fetcher.shutdown()
                fetcher = self._start_fetcher(key, endpoint)
                fetcher.partition_states.update(moved)
            elif fetcher is None:
                fetcher = self._start_fetcher(key, endpoint)
            fetcher.add_partitions(states)
            log.debug("fetching %s from broker %d at %s:%d", sorted(states), key[0], *endpoint)

    def _start_fetcher(self, key: tuple[int, int], endpoint: tuple[str, int]) -> ReplicaFetcher:
        leader_id, fid = key
        fetcher = ReplicaFetcher(fid, leader_id, endpoint, self._replica_manager, self._config, self.is_paused,
                                 self._link_is_cut, self._held_back)
        self.fetchers[key] = fetcher
        if self._nursery is not None:
            self._nursery.start_soon(fetcher.run)
        return fetcher

    def remove_fetcher_for_partitions(self, tps: list[TopicPartition]) -> None:
        for fetcher in self.fetchers.values():
            fetcher.remove_partitions(tps)

    def shutdown_idle_fetchers(self) -> None:
        for key, fetcher in list(self.fetchers.items()):
            if not fetcher.partition_states:
                fetcher.shutdown()
                del self.fetchers[key]

    def pause_fetching(self, tps: Iterable[TopicPartition] | None = None) -> None:
        """Stop fetching `tps` (None: every partition, including those that start following later)."""
        if tps is None:
            self._paused_all = True
        else:
            self._paused.update(tps)
        log.warning("replica fetching paused for %s", "every partition" if tps is None else sorted(self._paused))

    def resume_fetching(self, tps: Iterable[TopicPartition] | None = None) -> None:
        """Undo pause_fetching (None: resume everything)."""
        if tps is None:
            self._paused_all = False
            self._paused.clear()
        else:
            self._paused.difference_update(tps)
        for fetcher in self.fetchers.values():
            fetcher.wake()
        log.warning("replica fetching resumed for %s", "every partition" if tps is None else sorted(tps))

    def is_paused(self, tp: TopicPartition) -> bool:
        return self._paused_all or tp in self._paused

    def _held_back(self, tp: TopicPartition) -> None:
        if self.on_held_back is not None:
            self.on_held_back(tp)

    def fetch_state(self, tp: TopicPartition) -> PartitionFetchState | None:
        for fetcher in self.fetchers.values():
            state = fetcher.partition_states.get(tp)
            if state is not None:
                return state
        return None
