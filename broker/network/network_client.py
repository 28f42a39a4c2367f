"""The inter-broker side of Kafka's NetworkClient: one connection to one remote node, requests pipelined on it.

Follower fetchers, the controller channel and broker-to-controller calls all need the same thing: send a request
in Kafka's wire format, get its response back, and learn at once when the node is gone. Responses arrive in the
order the requests were sent (Kafka answers each connection in order), so a single reader task matches each
response to the oldest request in flight. Any failure — a timeout, an I/O error, a response that does not
match — closes the connection and fails every request in flight with `DisconnectedError`, as Kafka's client
does; the next request reconnects after an exponential backoff.

A connection is secured as the listener it goes to asks (`NetworkClientConfig.security`): before any request, a
TLS handshake and a SASL authentication, both within socket.connection.setup.timeout.ms. A refused authentication is
logged (once per run of failures) and fails the request with DisconnectedError, with the reconnect backoff: a wrong
password never spins. A SASL session the server bounds (KIP-368) is renewed on the same connection before it ends,
between two requests.

The client owns no task of its own: its owner runs `run()` in a nursery (or uses `NetworkClient.open`); `aclose()`
or cancelling that nursery shuts it down.
"""
from __future__ import annotations

import logging
import random
import ssl
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

import trio
from kafka.protocol.api_message import ApiMessage

from minikafka.broker.clock.broker_clock import fail_at_real, move_on_at_real, real_time
from minikafka.broker.network.failure_log import FailureLog
from minikafka.broker.network.tls_stream import TlsStream
from minikafka.broker.security.client_security import ClientChannelSecurity
from minikafka.broker.security.sasl_client_authenticator import AuthenticationError
from minikafka.protocol import framing
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.codec import SCHEMAS, ApiSchema, decode_response, encode_request
from minikafka.protocol.control_plane import CONTROL_PLANE_SCHEMAS

log = logging.getLogger("minikafka.network_client")

RECEIVE_BYTES = 1 << 18
MAX_RESPONSE_BYTES = (1 << 31) - 1  # a response is as large as the request asked for; Kafka sets no cap either
BACKOFF_JITTER = 0.2  # Kafka's: spreads the reconnects of many clients to one node that came back
# Kafka's: a SASL session is renewed at 85-95% of its lifetime, spread so that connections do not all renew at once.
REAUTHENTICATE_AT = (0.85, 0.95)

# Answers whether the link from this broker to a node is cut (fault injection): a request to it then fails as if
# the node were unreachable.
LinkIsCut = Callable[[int], bool]


class DisconnectedError(Exception):
    """The node could not be reached, or the connection to it closed before the response came: the one failure
    callers handle (back off, then retry or pick another node)."""


@dataclass(frozen=True)
class NetworkClientConfig:
    """Kafka's client settings for a connection, under their property names' defaults."""

    connection_setup_timeout_ms: int = 10_000  # socket.connection.setup.timeout.ms
    reconnect_backoff_ms: int = 50  # reconnect.backoff.ms
    reconnect_backoff_max_ms: int = 1000  # reconnect.backoff.max.ms
    request_timeout_ms: int = 30_000  # request.timeout.ms
    # The target listener's TLS and SASL (Kafka's client ChannelBuilder); None for a PLAINTEXT listener.
    security: ClientChannelSecurity | None = None

    def reconnect_backoff_s(self, failures: int) -> float:
        """Doubles with each consecutive failure up to the maximum, with Kafka's jitter."""
        backoff_ms = min(self.reconnect_backoff_ms * 2 ** min(failures, 32), self.reconnect_backoff_max_ms)
        return backoff_ms * random.uniform(1 - BACKOFF_JITTER, 1 + BACKOFF_JITTER) / 1000


async def connect(host: str, port: int, ssl_context: ssl.SSLContext | None) -> tuple[trio.abc.Stream,
                                                                                   trio.socket.SocketType]:
    """A TCP connection to host:port, TLS over it when `ssl_context` is given (the server's certificate and host name
    checked as the context says), and its socket, which closing ends it at once. OSError, or BrokenResourceError
    with the TLS error as its cause; the caller bounds the time."""
    stream = await trio.open_tcp_stream(host, port)
    if ssl_context is None:
        return stream, stream.socket
    tls = TlsStream(stream, ssl_context, server_side=False, server_hostname=host)
    try:
        await tls.do_handshake()
    except BaseException:
        stream.socket.close()
        raise
    return tls, stream.socket


def schema_of(request: ApiMessage) -> ApiSchema:
    """The schema a request belongs to: a client API from kafka-python or a control-plane API of this project."""
    for table in (CONTROL_PLANE_SCHEMAS, SCHEMAS):
        schema = table.get(request.API_KEY)
        if schema is not None and isinstance(request, schema.request):
            return schema
    raise ValueError(f"no schema for {type(request).__name__}")


class _InFlight:
    """A request sent and not yet answered: the reader completes it with a response or an error."""

    __slots__ = ("correlation_id", "schema", "version", "done", "response", "error")

    def __init__(self, correlation_id: int, schema: ApiSchema, version: int) -> None:
        self.correlation_id = correlation_id
        self.schema = schema
        self.version = version
        self.done = trio.Event()
        self.response: ApiMessage | None = None
        self.error: DisconnectedError | None = None

    def result(self) -> ApiMessage:
        if self.error is not None:
            raise self.error
        assert self.response is not None
        return self.response


class _Connection:
    """One TCP connection (TLS over it when secured) and the requests in flight on it, oldest first."""

    def __init__(self, stream: trio.abc.Stream, socket: trio.socket.SocketType) -> None:
        self.stream = stream
        self.socket = socket
        self.in_flight: deque[_InFlight] = deque()
        self.closed = False
        self.reauthenticate_at: float | None = None  # trio time when its SASL session is renewed; None: never

    def close(self, reason: str) -> None:
        """Fail every request in flight and close the socket; synchronous, so no cancellation can cut it short
        (closing a trio socket wakes the tasks blocked on it)."""
        if self.closed:
            return
        self.closed = True
        self.socket.close()
        while self.in_flight:
            request = self.in_flight.popleft()
            request.error = DisconnectedError(reason)
            request.done.set()


class NetworkClient:
    """Requests to one node over one connection, opened on demand; `client_id` is the request header's, e.g.
    `broker-1-fetcher-0`, so the remote node's logs say who is asking."""

    def __init__(self, node_id: int, host: str, port: int, client_id: str,
                 config: NetworkClientConfig | None = None, link_is_cut: LinkIsCut | None = None) -> None:
        self.node_id = node_id
        self.host = host
        self.port = port
        self.client_id = client_id
        self.config = config or NetworkClientConfig()
        self._link_is_cut = link_is_cut
        self._connection: _Connection | None = None
        self._readers: trio.Nursery | None = None
        self._send_lock = trio.Lock()  # one writer at a time, and requests queued in the order they are written
        self._correlation_id = 0
        self._failures = 0  # disconnects and failed connects since the last successful connect
        self._reconnect_at = float("-inf")
        self._stopped = trio.Event()  # set by aclose(): ends run(), and no connection is opened again
        self._authentication_failures = FailureLog(log, f"authentication to node {node_id} at {host}:{port}",
                                                   logging.ERROR)

    def __repr__(self) -> str:
        return f"NetworkClient(node {self.node_id} at {self.host}:{self.port}, {self.client_id})"

    @classmethod
    @asynccontextmanager
    async def open(cls, node_id: int, host: str, port: int, client_id: str,
                   config: NetworkClientConfig | None = None,
                   link_is_cut: LinkIsCut | None = None) -> AsyncIterator[NetworkClient]:
        """A client whose reader runs in a nursery of this block; leaving the block closes it."""
        client = cls(node_id, host, port, client_id, config, link_is_cut)
        async with trio.open_nursery() as nursery:
            await nursery.start(client.run)
            try:
                yield client
            finally:
                await client.aclose()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Read the responses of every connection this client opens, until `aclose()` or cancellation."""
        try:
            async with trio.open_nursery() as readers:
                self._readers = readers
                task_status.started()
                await self._stopped.wait()
                readers.cancel_scope.cancel()
        finally:
            self._readers = None
            self._close("the network client stopped")

    async def aclose(self) -> None:
        """Close the connection, failing requests in flight, and end `run()`; later requests fail with
        DisconnectedError."""
        self._close("the network client was closed")
        await trio.lowlevel.checkpoint()

    def _close(self, reason: str) -> None:
        self._stopped.set()
        self._disconnect(reason)

    @property
    def connected(self) -> bool:
        return self._connection is not None and not self._connection.closed

    async def send(self, request: ApiMessage, version: int | None = None) -> ApiMessage:
        """Send `request` at `version` (default: the version it was built at) and return the decoded response.

        Raises DisconnectedError when the node is unreachable, the link to it is cut (before the response came:
        a partition loses responses too), the connection closes or the response does not come within
        request.timeout.ms; the connection is closed in each case.
        """
        version = request.API_VERSION if version is None else version
        schema = schema_of(request)
        if version is None or not schema.min_version <= version <= schema.max_version:
            raise ValueError(f"{type(request).__name__} has no version {version}")
        api = ApiKey(request.API_KEY).api_name
        if self._link_is_cut is not None and self._link_is_cut(self.node_id):
            self._disconnect(f"the link to node {self.node_id} is cut")
            raise DisconnectedError(f"cannot send {api} to node {self.node_id}: the link is cut")
        # Taken without a turn of the scheduler when free: the request is written at once (its write lets the
        # other tasks run), not after everything else this process has to do.
        try:
            self._send_lock.acquire_nowait()
        except trio.WouldBlock:
            await self._send_lock.acquire()
        try:
            connection = await self._ready()
            if connection.reauthenticate_at is not None and trio.current_time() >= connection.reauthenticate_at:
                timeout_ms = self.config.request_timeout_ms
                await self._authenticate(connection, real_time() + timeout_ms / 1000, timeout_ms)
            deadline = real_time() + self.config.request_timeout_ms / 1000  # liveness: real time
            in_flight = await self._write(connection, request, schema, version, deadline)
        finally:
            self._send_lock.release()
        response = await self._response(connection, in_flight, deadline, self.config.request_timeout_ms)
        if self._link_is_cut is not None and self._link_is_cut(self.node_id):  # cut while the request was out
            self._disconnect(f"the link to node {self.node_id} is cut", connection)
            raise DisconnectedError(f"no response to {api} from node {self.node_id}: the link is cut")
        return response

    async def _write(self, connection: _Connection, request: ApiMessage, schema: ApiSchema, version: int,
                     deadline: float) -> _InFlight:
        """Send one request on `connection`, its response awaited from then on; the caller holds the send lock."""
        api = ApiKey(request.API_KEY).api_name
        correlation_id = (self._correlation_id + 1) & 0x7FFFFFFF
        frame = encode_request(schema, version, correlation_id, self.client_id, request)
        self._correlation_id = correlation_id
        in_flight = _InFlight(correlation_id, schema, version)
        connection.in_flight.append(in_flight)
        sent = False
        try:
            with move_on_at_real(deadline):
                await connection.stream.send_all(frame)
                sent = True
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            self._disconnect(f"cannot send {api} to node {self.node_id}: {exc!r}", connection)
        finally:  # a write cut short leaves part of a frame on the wire: the connection is unusable
            if not sent:
                self._disconnect(f"sending {api} to node {self.node_id} did not complete", connection)
        return in_flight

    async def _response(self, connection: _Connection, in_flight: _InFlight, deadline: float,
                        timeout_ms: int) -> ApiMessage:
        """The response to a request written on `connection`; DisconnectedError (the connection closed) when it
        did not come by `deadline` (`timeout_ms` after the request began, in real time: see
        minikafka.broker.clock) or the connection closed first."""
        with move_on_at_real(deadline):
            await in_flight.done.wait()
        if not in_flight.done.is_set():
            api = ApiKey(in_flight.schema.request.API_KEY).api_name
            self._disconnect(f"{api} to node {self.node_id} timed out after {timeout_ms} ms", connection)
        return in_flight.result()

    async def _ready(self) -> _Connection:
        """The open connection, or a new one once the reconnect backoff has passed."""
        if self._connection is not None and not self._connection.closed:
            return self._connection
        if self._reconnect_at > trio.current_time():
            await trio.sleep_until(self._reconnect_at)
        if self._stopped.is_set():
            raise DisconnectedError(f"the network client to node {self.node_id} is closed")
        if self._readers is None:
            raise RuntimeError(f"{self!r} is not running: start run() in a nursery first")
        self._connection = await self._connect(self._readers)
        self._failures = 0
        log.debug("%r connected", self)
        return self._connection

    async def _connect(self, readers: trio.Nursery) -> _Connection:
        """A connection ready for requests: TCP, then the TLS handshake and the SASL authentication the target
        listener asks for, all within socket.connection.setup.timeout.ms; DisconnectedError (and the reconnect
        backoff) otherwise."""
        timeout_ms = self.config.connection_setup_timeout_ms
        deadline = real_time() + timeout_ms / 1000
        security = self.config.security
        where = f"node {self.node_id} at {self.host}:{self.port}"
        try:
            with fail_at_real(deadline):
                stream, socket = await connect(self.host, self.port, security.ssl_context if security else None)
        except (OSError, trio.BrokenResourceError, trio.TooSlowError) as exc:
            self._back_off()
            if isinstance(exc, trio.TooSlowError):
                raise DisconnectedError(f"connecting to {where} timed out after {timeout_ms} ms") from None
            if isinstance(exc, trio.BrokenResourceError):
                raise DisconnectedError(f"TLS handshake with {where} failed: {exc.__cause__ or exc}") from None
            raise DisconnectedError(f"cannot connect to {where}: {exc}") from exc
        connection = _Connection(stream, socket)
        readers.start_soon(self._read_responses, connection)
        if security is not None and security.sasl_login is not None:
            await self._authenticate(connection, deadline, timeout_ms)
        return connection

    async def _authenticate(self, connection: _Connection, deadline: float, timeout_ms: int) -> None:
        """SASL authentication on `connection` by `deadline` (`timeout_ms` from its start), first or renewed
        (KIP-368): the exchange is requests like any other, answered in order after those already in flight; the
        caller holds the send lock, so none is written in between. A refusal closes the connection:
        DisconnectedError saying why."""
        security = self.config.security
        authenticator = security.sasl_authenticator() if security is not None else None
        assert authenticator is not None, "authenticating without a SASL login"
        try:
            request: ApiMessage | None = authenticator.handshake_request()
            while request is not None:
                version = request.API_VERSION
                assert version is not None
                in_flight = await self._write(connection, request, schema_of(request), version, deadline)
                request = authenticator.receive(await self._response(connection, in_flight, deadline, timeout_ms))
        except AuthenticationError as exc:
            self._authentication_failures.failed(f"SASL/{authenticator.mechanism}: {exc}")  # the log's one line
            reason = f"SASL/{authenticator.mechanism} authentication to node {self.node_id} failed: {exc}"
            connection.close(reason)
            self._back_off()
            raise DisconnectedError(reason) from None
        except BaseException:  # cut short (a failure, a cancellation): the exchange cannot resume on this connection
            connection.close("SASL authentication did not complete")
            raise
        self._authentication_failures.succeeded()
        lifetime_s = authenticator.session_lifetime_ms / 1000
        connection.reauthenticate_at = \
            trio.current_time() + lifetime_s * random.uniform(*REAUTHENTICATE_AT) if lifetime_s else None

    def _back_off(self) -> None:
        self._reconnect_at = trio.current_time() + self.config.reconnect_backoff_s(self._failures)
        self._failures += 1

    def _disconnect(self, reason: str, connection: _Connection | None = None) -> None:
        """Close `connection` (default: the current one) if still open, and start the reconnect backoff."""
        connection = connection or self._connection
        if connection is None or connection.closed:
            return
        log.info("%r disconnected: %s", self, reason)
        connection.close(reason)
        self._back_off()

    async def _read_responses(self, connection: _Connection) -> None:
        """Complete the requests of one connection in order, until it closes."""
        decoder = framing.FrameDecoder(MAX_RESPONSE_BYTES)
        try:
            while not connection.closed:
                data = await connection.stream.receive_some(RECEIVE_BYTES)
                if not data:
                    self._disconnect(f"node {self.node_id} closed the connection", connection)
                    return
                for frame in decoder.feed(data):
                    self._complete(connection, frame)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError, framing.FrameError) as exc:
            self._disconnect(f"reading from node {self.node_id} failed: {exc!r}", connection)

    def _complete(self, connection: _Connection, frame: bytes) -> None:
        if connection.closed:
            return
        if not connection.in_flight:
            self._disconnect(f"node {self.node_id} sent a response to no request", connection)
            return
        request = connection.in_flight[0]
        correlation_id = int.from_bytes(frame[:4], "big", signed=True) if len(frame) >= 4 else None
        if correlation_id != request.correlation_id:
            self._disconnect(f"correlation id mismatch from node {self.node_id}: expected "
                             f"{request.correlation_id}, got {correlation_id}", connection)
            return
        try:
            response = decode_response(request.schema, request.version, frame)
        except Exception as exc:  # noqa: BLE001 - a malformed header raises InvalidRequestError, the decoders anything
            self._disconnect(f"cannot decode {request.schema.response.__name__} v{request.version} from node "
                             f"{self.node_id}: {exc!r}", connection)
            return
        connection.in_flight.popleft()
        request.response = response
        request.done.set()
