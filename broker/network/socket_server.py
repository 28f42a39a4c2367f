"""The socket server: one trio task per connection, requests answered one at a time in arrival order.

Like Kafka's SocketServer, a connection is muted while its request is being handled (so responses go out in
request order, and a long-poll fetch holds back only its own connection). A frame that cannot be parsed closes
that connection and nothing else.

No client can take the broker from the others (Kafka's Selector and KafkaChannel mute states, on trio):
- a connection yields to the others after each request, so a client pipelining thousands of requests holds the
  others back by about one request at a time;
- pipelined requests are taken one frame at a time from what was read, as they are answered;
- the responses of pipelined requests are written together, once UNSENT_RESPONSE_BYTES of them wait; a write the
  client does not read keeps the connection muted (nothing more read or answered) until it drains, so a
  connection holds at most one read and one batch of responses (or one larger response) besides its socket's
  buffers;
- a request that waits for others (in a purgatory, or JoinGroup and SyncGroup for the rebalance) is dropped with
  its connection once the client closes or resets it (client_disconnect);
- a client over a client quota is throttled here: its connection muted for the throttle time after the response
  is written, or, for a request version older than KIP-219, the response held back as long.

Security is per listener (broker/security): a TLS listener's connections are wrapped in a TlsStream (tls_stream)
after a handshake bounded in time (a client's certificate gives the connection its principal), and a SASL listener's
connections authenticate first: their frames go to the connection's SaslServerAuthenticator until it lets requests
through to the processor. A failed authentication is answered and the connection closed after Kafka's delay.

Shutdown is structured: `drain()` stops the accept loops (closing the listening sockets) and the reading of new
requests, waits a bounded time for the requests taken to be answered, and leaves the connection tasks for the
owner's cancellation.
"""
from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable

import trio

from minikafka.broker.clock.broker_clock import move_on_at_real, real_time
from minikafka.broker.network.client_disconnect import unless_client_disconnects
from minikafka.broker.network.file_send import send_pieces
from minikafka.broker.network.response_faults import ByteBudget, ConnectionCut, ResponseFaults, ShapedSendStream
from minikafka.broker.network.tls_stream import TlsStream
from minikafka.broker.security.listener_security import ANONYMOUS, ListenerSecurity, ssl_principal
from minikafka.broker.security.sasl_server_authenticator import AuthenticationClose, SaslServerAuthenticator
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.codec import Records, RecordsSend, Response
from minikafka.protocol.file_records import TruncatedFileError
from minikafka.protocol.framing import FrameDecoder, FrameError

log = logging.getLogger("minikafka.server")

# Takes a request frame, returns the framed response (bytes, or a RecordsSend carrying file slices) or None (acks=0
# produce); raises CloseConnection to close. A broker's is its RequestChannel, which parses the frame into a Request.
RequestProcessor = Callable[[bytes, "ConnectionInfo"], Awaitable[Response | None]]
# Told of every connection that has closed, for whatever reason (the controller fences a broker whose own
# connection to it closes: a killed broker's socket closes at once).
ConnectionClosed = Callable[["ConnectionInfo"], None]

RECEIVE_BYTES = 1 << 18
# Responses of pipelined requests written together: up to this many bytes wait for one write.
UNSENT_RESPONSE_BYTES = 1 << 16
# Requests that may wait in a purgatory, as the two big-endian bytes a request frame starts with.
MAY_WAIT_API_KEYS = frozenset(key.to_bytes(2, "big") for key in (ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.JOIN_GROUP,
                                                                   ApiKey.SYNC_GROUP))
# Requests that always wait for other clients (the rebalance): answered under a watch for their client going. A
# produce or fetch is watched by the purgatory, and only if it parks there.
REBALANCE_API_KEYS = frozenset(key.to_bytes(2, "big") for key in (ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP))
# A TLS handshake not done by then closes the connection (a client that connects and sends nothing, or too slowly).
TLS_HANDSHAKE_TIMEOUT_S = 10.0


class CloseConnection(Exception):
    """Raised by request processing where Kafka closes the connection instead of answering."""


class ListenerBindError(OSError):
    """A port a node must listen on cannot be bound. The message names the port and what it is for, which the
    bare "[Errno 98] Address already in use" does not: a node binds a Kafka listener, maybe a controller listener
    and a metrics port."""

    def __init__(self, purpose: str, host: str, port: int, cause: OSError) -> None:
        super().__init__(cause.errno, cause.strerror)
        self.purpose = purpose
        self.host = host
        self.port = port

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"the {self.purpose} cannot bind {host}:{self.port}: {self.strerror}"


async def open_listeners(purpose: str, host: str, port: int) -> list[trio.SocketListener]:
    """trio's listeners on host:port; ListenerBindError, naming `purpose` ("Kafka listener PLAINTEXT"), if the
    port cannot be bound."""
    try:
        return await trio.open_tcp_listeners(port, host=host)
    except OSError as exc:
        raise ListenerBindError(purpose, host, port, exc) from exc


class ConnectionInfo:
    """What handlers may know about the peer."""

    def __init__(self, connection_id: int, peer: str, listener: str, stream: trio.SocketStream | None = None,
                 security_protocol: str = "PLAINTEXT") -> None:
        self.connection_id = connection_id
        self.peer = peer
        self.listener = listener
        self.security_protocol = security_protocol
        self.stream = stream  # the connection's socket, when it has one: a waiting request watches it
        # Kafka's principal ("User:alice"): from SASL or the client's certificate, else ANONYMOUS.
        self.principal = ANONYMOUS
        self.authenticator: SaslServerAuthenticator | None = None  # on a SASL listener
        # Set when the connection is to close once its last response is written, after this many seconds.
        self.close_after_s: float | None = None
        # A client quota's throttle of the request just answered (client_quota_manager): how long the connection
        # stays muted, and whether its response waits that long too (a client older than KIP-219).
        self.throttle_time_ms = 0
        self.throttle_delays_response = False
        # What injected faults do to the response of the request being answered (set by the fault injector).
        self.response_faults: ResponseFaults | None = None
        # The byte budgets of close-after-bytes faults on this connection, by fault id (gone with the connection).
        self.byte_budgets: dict[int, ByteBudget] = {}

    @property
    def host(self) -> str:
        """The peer's address, as ACLs name hosts."""
        return self.peer.rpartition(":")[0]

    def throttle(self, throttle_time_ms: int, *, delay_response: bool) -> None:
        self.throttle_time_ms = throttle_time_ms
        self.throttle_delays_response = delay_response


class _UnsentResponses:
    """Responses of pipelined requests waiting to be written together, in request order; a response carrying file
    slices is written as its pieces (bytes, slices sent from their files)."""

    def __init__(self) -> None:
        self._pieces: list[Records] = []
        self.size = 0

    def __bool__(self) -> bool:
        return bool(self._pieces)

    def add(self, response: Response) -> None:
        if isinstance(response, RecordsSend):
            self._pieces.extend(response.pieces)
        else:
            self._pieces.append(response)
        self.size += len(response)

    async def write(self, stream: trio.abc.SendStream) -> None:
        """Write all of them, leaving none."""
        pieces, self._pieces, self.size = self._pieces, [], 0
        await send_pieces(stream, pieces)


class SocketServer:
    def __init__(self, process: RequestProcessor, max_request_bytes: int, idle_timeout_s: float,
                 on_connection_closed: ConnectionClosed | None = None,
                 security: dict[str, ListenerSecurity] | None = None) -> None:
        self._process = process
        self._security = security or {}
        self._on_connection_closed = on_connection_closed
        self._max_request_bytes = max_request_bytes
        self._idle_timeout_s = idle_timeout_s
        self._next_id = 0
        self.connections: dict[int, ConnectionInfo] = {}
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
        security = self._security.get(listener_name)
        info = ConnectionInfo(conn_id, peer, listener_name, stream,
                              security.protocol if security is not None else "PLAINTEXT")
        self.connections[conn_id] = info
        io: trio.abc.Stream = stream
        try:
            if security is not None and security.ssl_context is not None:
                io = TlsStream(stream, security.ssl_context)
                if not await self._tls_handshake(io, info):
                    return
                info.principal = ssl_principal(io, security)
            if security is not None and security.uses_sasl:
                info.authenticator = SaslServerAuthenticator(security, peer)
            await self._serve_requests(io, info)
        except FrameError as exc:
            log.warning("closing connection %s from %s: %s", conn_id, peer, exc)
        except (CloseConnection, ConnectionCut, TruncatedFileError) as exc:
            log.warning("closing connection %s from %s: %s", conn_id, peer, exc)
        except (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError):
            pass
        except Exception:  # a bug met by one request closes its connection only, as Kafka's Processor does
            log.exception("closing connection %s from %s after an unexpected error", conn_id, peer)
        finally:
            self.connections.pop(conn_id, None)
            if self._on_connection_closed is not None:
                self._on_connection_closed(info)
            with trio.CancelScope(shield=True):
                await io.aclose()

    async def _tls_handshake(self, io: TlsStream, info: ConnectionInfo) -> bool:
        """Whether the TLS handshake succeeded; a failed or slow one is logged in one line."""
        try:
            with trio.fail_after(TLS_HANDSHAKE_TIMEOUT_S):
                await io.do_handshake()
            return True
        except trio.TooSlowError:
            reason = f"no TLS handshake within {TLS_HANDSHAKE_TIMEOUT_S:g} s"
        except trio.BrokenResourceError as exc:
            reason = f"TLS handshake failed: {exc.__cause__ or exc}"
        log.warning("closing connection %s from %s on listener %s: %s", info.connection_id, info.peer, info.listener,
                    reason)
        return False

    async def _serve_requests(self, stream: trio.abc.Stream, info: ConnectionInfo) -> None:
        """Answer the connection's requests in order until it closes, idles out or the server drains.

        Responses wait to be written together only behind requests that answer at once: before a read, and before
        a request that may wait in a purgatory, what is ready is sent first. From the first request taken until
        its responses and those of the requests pipelined behind it are written, the connection counts as
        answering, for `drain()`.
        """
        decoder = FrameDecoder(self._max_request_bytes)
        unsent = _UnsentResponses()
        held: tuple[Response, ResponseFaults] | None = None  # a response reordered behind the next one
        answering = False
        yielded = True  # since the last request answered: a read or write lets the other connections run
        authenticator = info.authenticator
        try:
            while True:
                if authenticator is not None:  # until authenticated, frames are SASL's and bounded as such
                    if authenticator.authenticated:
                        decoder.limit(self._max_request_bytes, "socket.request.max.bytes")
                    else:
                        decoder.limit(authenticator.max_receive_bytes, "sasl.server.max.receive.size")
                request = decoder.next_frame()
                if request is None:
                    if held is not None:
                        await self._queue(stream, unsent, *held)
                        held = None
                    if unsent:
                        await unsent.write(stream)
                    if answering:
                        answering = False
                        self._answered()
                    data = await self._receive(stream, info)
                    if not data:
                        return
                    decoder.append(data)
                    yielded = True
                    continue
                if not yielded:
                    await trio.lowlevel.checkpoint()  # the other connections' turn between pipelined requests
                if self.draining:
                    return
                if not answering:
                    answering = True
                    self._answering += 1
                if unsent and request[:2] in MAY_WAIT_API_KEYS:
                    await unsent.write(stream)
                info.response_faults = None
                response = await self._answer(request, info)
                faults, info.response_faults = info.response_faults, None
                yielded = False
                if faults is not None and faults.on_reordered is not None and response is not None \
                        and held is None and decoder.has_frame:
                    held = (response, faults)  # written after the response to the request pipelined behind it
                    continue
                if held is not None:
                    if response is not None:
                        await self._queue(stream, unsent, response, faults)
                    response, faults = held
                    held = None
                    assert faults.on_reordered is not None
                    faults.on_reordered()
                if info.close_after_s is not None:  # a failed authentication: answered, then closed
                    if response is not None:
                        unsent.add(response)
                    await unsent.write(stream)
                    await trio.sleep(info.close_after_s)
                    return
                if info.throttle_time_ms:
                    await self._throttle(stream, info, unsent, response)
                    yielded = True
                    continue
                if response is not None:
                    await self._queue(stream, unsent, response, faults)
                    if unsent.size >= UNSENT_RESPONSE_BYTES:
                        await unsent.write(stream)  # muted while the client is not reading
                        yielded = True
        finally:
            try:
                if held is not None:
                    unsent.add(held[0])
                if unsent:
                    await unsent.write(stream)
            finally:
                if answering:
                    self._answered()

    @staticmethod
    async def _queue(stream: trio.abc.Stream, unsent: _UnsentResponses, response: Response,
                     faults: ResponseFaults | None) -> None:
        """Add a response to those to write; one whose writes a fault shapes (a bandwidth, a byte budget) is
        written now, on its own, after those before it."""
        if faults is None or not faults.shapes_writes:
            unsent.add(response)
            return
        if unsent:
            await unsent.write(stream)
        unsent.add(response)
        await unsent.write(ShapedSendStream(stream, faults))

    async def _throttle(self, stream: trio.abc.Stream, info: ConnectionInfo, unsent: _UnsentResponses,
                        response: Response | None) -> None:
        """A throttled client's connection: its response written at once (KIP-219) or after the throttle time
        (older clients), and nothing more read from it until that time is over."""
        pause_s, delayed = info.throttle_time_ms / 1000, info.throttle_delays_response
        info.throttle_time_ms = 0
        if delayed:
            await trio.sleep(pause_s)
        if response is not None:
            unsent.add(response)
        if unsent:
            await unsent.write(stream)
        if not delayed:
            await trio.sleep(pause_s)

    async def _answer(self, request: bytes, info: ConnectionInfo) -> Response | None:
        authenticator = info.authenticator
        if authenticator is not None:
            try:
                step = authenticator.take(request)
            except AuthenticationClose as exc:
                raise CloseConnection(str(exc)) from None
            if step is not None:
                info.principal = authenticator.principal
                info.close_after_s = step.close_after_s
                return step.response
        if request[:2] in REBALANCE_API_KEYS and info.stream is not None:
            return await unless_client_disconnects(info.stream, functools.partial(self._process, request, info))
        return await self._process(request, info)

    async def _receive(self, stream: trio.abc.Stream, info: ConnectionInfo) -> bytes | bytearray:
        """The next bytes the client sent; empty when it closed or the connection was idle too long."""
        with move_on_at_real(real_time() + self._idle_timeout_s):  # an advance of a manual clock idles nobody out
            return await stream.receive_some(RECEIVE_BYTES)
        log.info("closing idle connection %s from %s", info.connection_id, info.peer)
        return b""

    def _answered(self) -> None:
        self._answering -= 1
        if not self._answering and self._all_answered is not None:
            self._all_answered.set()

    async def close_connections(self, keep: int) -> int:
        """Close every connection but connection `keep` (the control API's connections.close); how many."""
        others = [info.stream for conn_id, info in list(self.connections.items())
                  if conn_id != keep and info.stream is not None]
        for stream in others:
            await stream.aclose()
        return len(others)

    def expire_sessions(self, user: str | None = None) -> int:
        """End the SASL sessions of `user` (None: every user) now, as if connections.max.reauth.ms had passed:
        each connection closes at its next request unless the client re-authenticates first. Returns how many."""
        expired = 0
        for info in self.connections.values():
            authenticator = info.authenticator
            if authenticator is not None and authenticator.authenticated and \
                    (user is None or authenticator.principal == f"User:{user}"):
                authenticator.expire_session()
                expired += 1
        return expired

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
