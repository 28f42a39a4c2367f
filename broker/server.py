"""The socket server: one trio task per connection, requests answered one at a time in arrival order.

Like Kafka's SocketServer, a connection is muted while its request is being handled (so responses go out in
request order, and a long-poll fetch holds back only its own connection). A frame that cannot be parsed closes
that connection and nothing else.

Shutdown is structured: `drain()` stops the accept loops (closing the listening sockets) and the reading of new
requests, waits a bounded time for the requests taken to be answered, and leaves the connection tasks for the
owner's cancellation.
"""
from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable

import trio

from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.framing import FrameDecoder, FrameError

log = logging.getLogger("minikafka.server")

# Takes a request frame, returns the framed response or None (acks=0 produce); raises CloseConnection to close.
RequestProcessor = Callable[[bytes, "ConnectionInfo"], Awaitable[bytes | None]]
# Told of every connection that has closed, for whatever reason (the controller fences a broker whose own
# connection to it closes: a killed broker's socket closes at once).
ConnectionClosed = Callable[["ConnectionInfo"], None]

RECEIVE_BYTES = 1 << 18
# Requests that may wait in a purgatory, as the two big-endian bytes a request frame starts with.
MAY_WAIT_API_KEYS = frozenset(key.to_bytes(2, "big") for key in (ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.JOIN_GROUP,
                                                                   ApiKey.SYNC_GROUP))


class CloseConnection(Exception):
    """Raised by request processing where Kafka closes the connection instead of answering."""


class ConnectionInfo:
    """What handlers may know about the peer."""

    def __init__(self, connection_id: int, peer: str, listener: str) -> None:
        self.connection_id = connection_id
        self.peer = peer
        self.listener = listener


class SocketServer:
    def __init__(self, process: RequestProcessor, max_request_bytes: int, idle_timeout_s: float,
                 on_connection_closed: ConnectionClosed | None = None) -> None:
        self._process = process
        self._on_connection_closed = on_connection_closed
        self._max_request_bytes = max_request_bytes
        self._idle_timeout_s = idle_timeout_s
        self._next_id = 0
        self.connections: dict[int, trio.SocketStream] = {}
        self.draining = False
        self._accepting: list[trio.CancelScope] = []
        self._answering = 0  # connections answering requests they have taken
        self._all_answered: trio.Event | None = None  # while draining: set when _answering drops to zero

    async def serve(self, listener_name: str, listeners: list[trio.SocketListener]) -> None:
        """Accept connections until `drain()`, then serve those accepted until cancelled."""
        async with trio.open_nursery() as connections:
            with trio.CancelScope() as accepting:
                self._accepting.append(accepting)
                if self.draining:
                    accepting.cancel()
                await trio.serve_listeners(functools.partial(self._handle, listener_name), listeners,
                                           handler_nursery=connections)

    async def _handle(self, listener_name: str, stream: trio.SocketStream) -> None:
        self._next_id += 1
        conn_id = self._next_id
        try:
            host, port = stream.socket.getpeername()[:2]
            peer = f"{host}:{port}"
        except OSError:
            peer = "?"
        info = ConnectionInfo(conn_id, peer, listener_name)
        decoder = FrameDecoder(self._max_request_bytes)
        self.connections[conn_id] = stream
        try:
            while True:
                with trio.move_on_after(self._idle_timeout_s) as idle:
                    data = await stream.receive_some(RECEIVE_BYTES)
                if idle.cancelled_caught:
                    log.info("closing idle connection %s from %s", conn_id, peer)
                    return
                if not data:
                    return
                if not await self._answer(stream, decoder.feed(data), info):
                    return
        except FrameError as exc:
            log.warning("closing connection %s from %s: %s", conn_id, peer, exc)
        except CloseConnection as exc:
            log.warning("closing connection %s from %s: %s", conn_id, peer, exc)
        except (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError):
            pass
        except Exception:
            log.exception("closing connection %s from %s after an unexpected error", conn_id, peer)
        finally:
            self.connections.pop(conn_id, None)
            if self._on_connection_closed is not None:
                self._on_connection_closed(info)
            with trio.CancelScope(shield=True):
                await stream.aclose()

    async def _answer(self, stream: trio.SocketStream, frames: list[bytes], info: ConnectionInfo) -> bool:
        """Answer requests as `_answer_in_order`, counted until their responses are written, for `drain()`."""
        if not frames:
            return True
        self._answering += 1
        try:
            return await self._answer_in_order(stream, frames, info)
        finally:
            self._answering -= 1
            if not self._answering and self._all_answered is not None:
                self._all_answered.set()

    async def _answer_in_order(self, stream: trio.SocketStream, frames: list[bytes], info: ConnectionInfo) -> bool:
        """Answer pipelined requests in order, their responses sent together in as few writes as possible.

        Responses wait for the batch's end only behind requests that answer at once: before one that may wait
        in a purgatory, what is ready is sent first. Returns False when the connection should close.
        """
        ready: list[bytes] = []
        try:
            for frame in frames:
                if self.draining:
                    return False
                if ready and frame[:2] in MAY_WAIT_API_KEYS:
                    await stream.send_all(b"".join(ready))
                    ready.clear()
                response = await self._process(frame, info)
                if response is not None:
                    ready.append(response)
            return True
        finally:
            if ready:
                await stream.send_all(b"".join(ready))

    async def drain(self, timeout_s: float) -> None:
        """Stop accepting connections and taking requests; wait (at most `timeout_s`) for those taken to be
        answered (a long poll ends early when it sees `draining`)."""
        self.draining = True
        for accepting in self._accepting:
            accepting.cancel()
        if self._answering:
            self._all_answered = trio.Event()
            with trio.move_on_after(timeout_s):
                await self._all_answered.wait()
