"""A purgatory for delayed requests: a request waits until a watched key changes or its timeout fires.

Kafka's DelayedOperationPurgatory keeps operations keyed by topic-partition and re-checks them when that
partition changes. Here the waiting request is a task, so the purgatory only has to wake it: the request
re-checks its own completion condition after every wake-up (DelayedFetch, DelayedProduce). Timeouts run on trio's
clock, as every deadline of a waiting request does, so a test's trio.testing.MockClock drives them.

A waiting request may name its client's connection: when the client closes it, the wait ends with ClientGone and
the request is dropped, since nobody is left to answer.
"""
from __future__ import annotations

import socket
from collections.abc import Hashable, Iterable

import trio


class ClientGone(ConnectionError):
    """The client closed its connection while its request waited: there is nobody to answer."""


class Purgatory:
    def __init__(self) -> None:
        self._watchers: dict[Hashable, set[trio.Event]] = {}

    async def wait_any(self, keys: Iterable[Hashable], timeout_s: float,
                       client: trio.SocketStream | None = None) -> bool:
        """Wait until any key is checked or `timeout_s` seconds of trio's clock pass; True if woken by a key.
        Raises ClientGone if `client` closes its connection meanwhile."""
        event = trio.Event()
        keys = list(keys)
        for key in keys:
            self._watchers.setdefault(key, set()).add(event)
        try:
            with trio.move_on_after(max(0.0, timeout_s)):
                if client is None:
                    await event.wait()
                else:
                    await _wait_unless_client_closes(event, client)
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


async def _wait_unless_client_closes(event: trio.Event, client: trio.SocketStream) -> None:
    gone = False
    async with trio.open_nursery() as nursery:

        async def watch() -> None:
            nonlocal gone
            if await _closed_by_peer(client):
                gone = True
                nursery.cancel_scope.cancel()

        nursery.start_soon(watch)
        await event.wait()
        nursery.cancel_scope.cancel()
    if gone:
        raise ClientGone("the client closed its connection while its request waited")


async def _closed_by_peer(client: trio.SocketStream) -> bool:
    """Whether the peer closes the connection before sending anything more. Bytes that arrive first are the
    client's next request (a pipelining client is still there): they are only peeked at, left for the server."""
    sock = client.socket
    try:
        await trio.lowlevel.wait_readable(sock)
        return not await sock.recv(1, socket.MSG_PEEK)
    except OSError:
        return True
