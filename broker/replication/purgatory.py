"""A purgatory for delayed requests: a request waits until a watched key changes or its timeout fires.

Kafka's DelayedOperationPurgatory keeps operations keyed by topic-partition and re-checks them when that
partition changes. Here the waiting request is a task, so the purgatory only has to wake it: the request
re-checks its own completion condition after every wake-up (DelayedFetch, DelayedProduce). A request may hand its
condition to the purgatory (Kafka's tryComplete): a change of a key then checks it in place and wakes only the
requests it completes, so a change costs a call per waiting request rather than a task switch. Timeouts run on trio's
clock, as every deadline of a waiting request does, so a test's trio.testing.MockClock drives them.

A waiting request may name its client's connection: when the client closes or resets it, the wait ends with
ClientGone (see client_disconnect) and the request is dropped, since nobody is left to answer. The connection is
watched only once the wait has lasted DISCONNECT_WATCH_AFTER_S: most waits (an acks=all append, a follower's
fetch woken by the next append) end sooner, and should not pay for the watch on their way.
"""
from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable

import trio

from minikafka.broker.network.client_disconnect import unless_client_disconnects

# A waiting request notices its client has gone after at most this long.
DISCONNECT_WATCH_AFTER_S = 0.05


class Purgatory:
    def __init__(self) -> None:
        self._watchers: dict[Hashable, set[trio.Event]] = {}
        self._conditions: dict[trio.Event, Callable[[], bool]] = {}  # of the waits that gave one

    async def wait_any(self, keys: Iterable[Hashable], timeout_s: float,
                       client: trio.SocketStream | None = None,
                       try_complete: Callable[[], bool] | None = None) -> bool:
        """Wait until any key is checked (and, if given, `try_complete()` then holds) or `timeout_s` seconds of
        trio's clock pass; True if woken by a key. Raises ClientGone if `client` closes its connection meanwhile."""
        event = trio.Event()
        keys = list(keys)
        for key in keys:
            self._watchers.setdefault(key, set()).add(event)
        if try_complete is not None:
            self._conditions[event] = try_complete
        try:
            with trio.move_on_after(max(0.0, timeout_s)):
                if client is not None:
                    # Most waits end within a replication round trip: only a longer one pays for watching the
                    # client's connection (a task and two epoll calls), which would delay every short one.
                    with trio.move_on_after(DISCONNECT_WATCH_AFTER_S):
                        await event.wait()
                    if not event.is_set():
                        await unless_client_disconnects(client, event.wait)
                else:
                    await event.wait()
        finally:
            self._conditions.pop(event, None)
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

    def delayed_operations_by_kind(self) -> dict[Hashable, int]:
        """How many requests wait on keys of each kind (a key's first part: "produce", "fetch"), for Kafka's
        PurgatorySize per delayed operation."""
        kinds: dict[Hashable, set[trio.Event]] = {}
        for key, events in self._watchers.items():
            kind = key[0] if isinstance(key, tuple) and key else key
            kinds.setdefault(kind, set()).update(events)
        return {kind: len(events) for kind, events in kinds.items()}

    def check_and_complete(self, key: Hashable) -> None:
        """Something changed for `key`: wake every request watching it that gave no condition or whose condition
        now holds."""
        watchers = self._watchers.get(key)
        if watchers is None:
            return
        conditions = self._conditions
        for event in list(watchers):
            condition = conditions.get(event)
            if condition is not None:
                try:
                    holds = condition()
                except Exception:  # noqa: BLE001 - woken, the request meets the error again in its own task
                    holds = True
                if not holds:
                    continue
            watchers.discard(event)
            event.set()
        if not watchers:
            del self._watchers[key]

    def wake_all(self) -> None:
        """Complete every waiting request now (shutdown), whatever their conditions say."""
        for watchers in self._watchers.values():
            for event in watchers:
                event.set()
        self._watchers.clear()
