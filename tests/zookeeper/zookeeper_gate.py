"""A gate between a ZooKeeper server that a test restarts and the client under test, so that the client reaches the
restarted server only once it serves.

ZooKeeper accepts connections as soon as its port is bound, before it has created its database. A ConnectRequest
arriving in that moment is refused with an exception whose handling fails in turn (a NullPointerException in
ZooKeeperServer.removeCnxn, ZOOKEEPER-5051: in the 3.8.0 that Debian packages, still open upstream), so the
connection is left open and never answered. The client then waits out its connect timeout, the session timeout
divided by the number of hosts (in ZooKeeper's Java client as in kazoo): with one host, the whole session, which the
restarted server may expire meanwhile. Held, the gate closes each new connection at once (the client sees it drop, as
from a server that is down, and tries again); released, it forwards to the server.
"""
from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio

from minikafka.zookeeper_server import ZooKeeperServer


class ZooKeeperGate:
    def __init__(self, server: ZooKeeperServer, listener: trio.SocketListener) -> None:
        self._server = server
        self._listener = listener
        self._held = False

    @property
    def connect_string(self) -> str:
        """HOST:PORT of the gate, for a client's `zookeeper.connect` (append a chroot as needed)."""
        host, port = self._listener.socket.getsockname()[:2]
        return f"{host}:{port}"

    def hold(self) -> None:
        """Close each new connection at once until `release()`; connections already through are the server's."""
        self._held = True

    def release(self) -> None:
        """Forward new connections to the server again."""
        self._held = False

    async def _serve(self, client: trio.SocketStream) -> None:
        async with client:
            if self._held:
                return
            try:
                upstream = await trio.open_tcp_stream(self._server.host, self._server.port)
            except OSError:
                return  # the server is down: the client sees its connection drop
            async with upstream, trio.open_nursery() as nursery:
                nursery.start_soon(_pump, client, upstream, nursery.cancel_scope)
                nursery.start_soon(_pump, upstream, client, nursery.cancel_scope)


async def _pump(source: trio.SocketStream, sink: trio.SocketStream, pair: trio.CancelScope) -> None:
    """Copy one direction until either side ends, then end both (ZooKeeper's protocol never half-closes)."""
    try:
        async for chunk in source:
            await sink.send_all(chunk)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass
    finally:
        pair.cancel()


@asynccontextmanager
async def zookeeper_gate(server: ZooKeeperServer) -> AsyncIterator[ZooKeeperGate]:
    """A released gate to `server` on a free local port, closed (with the connections through it) on leaving."""
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    gate = ZooKeeperGate(server, listeners[0])
    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.serve_listeners, gate._serve, listeners)
        try:
            yield gate
        finally:
            nursery.cancel_scope.cancel()
