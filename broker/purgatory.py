"""A purgatory for delayed requests: a request waits until a watched key changes or its timeout fires.

Kafka's DelayedOperationPurgatory keeps operations keyed by topic-partition and re-checks them when that
partition changes. Here the waiting request is a task, so the purgatory only has to wake it: the request
re-checks its own completion condition after every wake-up. Timeouts run on trio's clock, as every deadline of a
waiting request does, so a test's trio.testing.MockClock drives them.
"""
from __future__ import annotations

from collections.abc import Hashable, Iterable

import trio


class Purgatory:
    def __init__(self) -> None:
        self._watchers: dict[Hashable, set[trio.Event]] = {}

    async def wait_any(self, keys: Iterable[Hashable], timeout_s: float) -> bool:
        """Wait until any key is checked or `timeout_s` seconds of trio's clock pass; True if woken by a key."""
        event = trio.Event()
        keys = list(keys)
        for key in keys:
            self._watchers.setdefault(key, set()).add(event)
        try:
            with trio.move_on_after(max(0.0, timeout_s)):
                await event.wait()
        finally:
            for key in keys:
                watchers = self._watchers.get(key)
                if watchers is not None:
                    watchers.discard(event)
                    if not watchers:
                        del self._watchers[key]
        return event.is_set()

    @property
    def delayed_operations(self) -> int:
        """How many requests wait here now (Kafka's NumDelayedOperations), for state inspection."""
        return len({event for events in self._watchers.values() for event in events})

    def check_and_complete(self, key: Hashable) -> None:
        """Something changed for `key`: wake every request watching it."""
        for event in self._watchers.pop(key, ()):
            event.set()

    def wake_all(self) -> None:
        """Complete every waiting request now (shutdown)."""
        for key in list(self._watchers):
            self.check_and_complete(key)
