"""Paused replica fetching: a follower that stays up and answers clients but stops fetching from its leaders.

Its leaders then see it fall behind and take it out of their ISRs after replica.lag.time.max.ms; once resumed it
catches up and rejoins. A pause covers every partition this broker follows (also those it starts following
later) or some topic-partitions. The replica fetcher manager does the pausing, its fetchers asking it before each
fetch and before taking a fetch's answer (what a fetch in flight at the pause brings back is dropped, so nothing
is fetched from the moment of the pause); this keeps the pauses as faults with ids and keeps the manager's paused
set the union of them.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from minikafka.broker.replication.replica_fetcher_manager import ReplicaFetcherManager

log = logging.getLogger("minikafka.faults")

TopicPartition = tuple[str, int]
# What is paused: every partition (None) or these.
Scope = frozenset[TopicPartition] | None


@dataclass
class FetchPause:
    id: int
    topic: str | None  # None: every partition
    partition: int | None  # None with a topic: every partition of the topic this broker has a replica of
    partitions: Scope
    hits: int = 0  # partition fetches it held back (a partition left out of a fetch round)

    def describe(self) -> dict[str, Any]:
        return {"kind": "fetch-pause", "id": self.id, "topic": self.topic, "partition": self.partition,
                "partitions": None if self.partitions is None else [list(tp) for tp in sorted(self.partitions)],
                "hits": self.hits}


class FetchPauses:
    def __init__(self) -> None:
        self.pauses: list[FetchPause] = []
        self._manager: ReplicaFetcherManager | None = None

    def pause(self, fault_id: int, manager: ReplicaFetcherManager, topic: str | None, partition: int | None,
              partitions: Scope) -> FetchPause:
        """Stop fetching `partitions` (None: all) until the pause is cleared."""
        self._manager = manager
        manager.on_held_back = self._held_back
        before = self._scope()
        pause = FetchPause(fault_id, topic, partition, partitions)
        self.pauses.append(pause)
        self._apply(before)
        log.warning("fault added: %s", pause.describe())
        return pause

    def resume(self, rule_id: int | None = None) -> int:
        """End every pause (or the one with this fault id); returns how many ended."""
        before = self._scope()
        kept = [p for p in self.pauses if rule_id is not None and p.id != rule_id]
        ended = len(self.pauses) - len(kept)
        self.pauses = kept
        if ended:
            self._apply(before)
        return ended

    def describe(self) -> list[dict[str, Any]]:
        return [pause.describe() for pause in self.pauses]

    def _held_back(self, tp: TopicPartition) -> None:
        """A fetch left `tp` out: the first pause covering it counts the hit."""
        pause = next((p for p in self.pauses if p.partitions is None or tp in p.partitions), None)
        if pause is not None:
            pause.hits += 1

    def _scope(self) -> Scope:
        """What the pauses cover together: None once one covers everything."""
        covered: set[TopicPartition] = set()
        for pause in self.pauses:
            if pause.partitions is None:
                return None
            covered |= pause.partitions
        return frozenset(covered)

    def _apply(self, before: Scope) -> None:
        """Bring the manager from pausing `before` to pausing what the pauses cover now."""
        manager, after = self._manager, self._scope()
        if manager is None or after == before:
            return
        if after is None:
            manager.pause_fetching(None)
            return
        if before is None:
            manager.resume_fetching(None)
            before = frozenset()
        if before - after:
            manager.resume_fetching(before - after)
        if after - before:
            manager.pause_fetching(after - before)
