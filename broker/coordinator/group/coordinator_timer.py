"""The group coordinator's timer: keyed one-shot deadlines that fire on the broker's trio loop.

Kafka's coordinator keeps every delayed group operation (a member's session, a join or sync phase waiting for the
rest of the group, periodic offset expiry) as a keyed entry on one timer, where scheduling a key again replaces
its entry. Here that timer is one trio task, so each callback runs on the loop that owns the group state,
between requests, and never needs a lock.
"""
from __future__ import annotations

import heapq
import logging
import math
from collections.abc import Callable

import trio

log = logging.getLogger("minikafka.coordinator_timer")


class CoordinatorTimer:
    """Keyed one-shot timers on the trio clock: scheduling a key replaces it, cancelling forgets it."""

    def __init__(self) -> None:
        self._entries: dict[str, tuple[float, int, Callable[[], None]]] = {}
        self._heap: list[tuple[float, int, str]] = []
        self._next_seq = 0
        self._changed = trio.Event()
        self.fired: Callable[[], None] = lambda: None  # after callbacks ran: what they changed may be awaited

    def schedule(self, key: str, delay_ms: float, callback: Callable[[], None]) -> None:
        deadline = trio.current_time() + max(delay_ms, 0) / 1000
        seq = self._next_seq
        self._next_seq += 1
        self._entries[key] = (deadline, seq, callback)
        heapq.heappush(self._heap, (deadline, seq, key))
        self._changed.set()

    def cancel(self, key: str) -> None:
        self._entries.pop(key, None)

    def is_scheduled(self, key: str) -> bool:
        return key in self._entries

    def _next_due(self) -> tuple[float, int]:
        """(deadline, seq) of the earliest live entry, dropping replaced or cancelled ones."""
        while self._heap:
            deadline, seq, key = self._heap[0]
            entry = self._entries.get(key)
            if entry is not None and entry[1] == seq:
                return deadline, seq
            heapq.heappop(self._heap)
        return math.inf, -1

    def fire_due(self) -> int:
        """Run every callback whose deadline has passed; one scheduled meanwhile waits for the next pass."""
        fired = 0
        now = trio.current_time()
        limit = self._next_seq
        while True:
            deadline, seq = self._next_due()
            if deadline > now or seq >= limit:
                return fired
            _deadline, _seq, key = heapq.heappop(self._heap)
            _, _, callback = self._entries.pop(key)
            fired += 1
            try:
                callback()
            except Exception:  # one failing timer must not stop the others
                log.exception("group coordinator timer %s failed", key)

    async def run(self) -> None:
        while True:
            if self.fire_due():
                self.fired()
            self._changed = trio.Event()
            with trio.move_on_at(self._next_due()[0]):
                await self._changed.wait()
