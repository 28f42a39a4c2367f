"""A blocking client for one broker's control API (fault injection and state inspection), over its Kafka port."""
from __future__ import annotations

import itertools
import socket
import ssl
import time
from typing import Any

from minikafka.handle_security import ClientSecurity
from minikafka.protocol.control import decode_response, encode_request
from minikafka.protocol.framing import FrameDecoder, FrameError

DEFAULT_TIMEOUT_S = 15.0
RECEIVE_BYTES = 1 << 16
# A describe of many partitions is big; the size prefix alone bounds what a response may be.
MAX_RESPONSE_BYTES = (1 << 31) - 1


class ControlError(RuntimeError):
    """The broker refused a control operation; the message is the broker's reason."""


def parse_address(address: str) -> tuple[str, int]:
    """'host:port' (or '[v6]:port', or 'PLAINTEXT://host:port') as a (host, port) pair."""
    address = address.strip().split("://", 1)[-1]
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"expected HOST:PORT, got {address!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


class ControlClient:
    """Sends control operations to the broker at `address`; one short connection per call."""

    _correlation = itertools.count(1)

    def __init__(self, address: str, timeout_s: float = DEFAULT_TIMEOUT_S,
                 client_id: str = "minikafka-control", security: ClientSecurity | None = None) -> None:
        self.address = parse_address(address.split(",")[0])
        self.timeout_s = timeout_s
        self.client_id = client_id
        self.security = security

    def with_timeout(self, timeout_s: float) -> ControlClient:
        """The same client with another time limit per call (for operations that wait at the broker)."""
        client = ControlClient(f"{self.address[0]}:{self.address[1]}", timeout_s, self.client_id, self.security)
        return client

    def call(self, op: str, **fields: Any) -> dict[str, Any]:
        """Run one operation; returns the broker's answer or raises ControlError (refused) or OSError (network)."""
        correlation_id = next(self._correlation) & 0x7FFFFFFF
        payload = {"op": op, **fields}
        deadline = time.monotonic() + self.timeout_s
        with self.connect(deadline) as sock:
            sock.sendall(encode_request(correlation_id, self.client_id, payload))
            got_id, answer = decode_response(_receive_frame(sock, deadline))
        if got_id != correlation_id:
            raise ConnectionError(f"control response for request {got_id}, expected {correlation_id}")
        if not answer.get("ok"):
            raise ControlError(answer.get("error", "control operation failed"))
        answer.pop("ok", None)
        return answer

    def connect(self, deadline: float) -> socket.socket:
        """A connection to the broker, over TLS and authenticated (SASL) where the listener asks for it."""
        sock = socket.create_connection(self.address, timeout=self.timeout_s)
        security = self.security
        if security is None:
            return sock
        try:
            if security.tls:
                context = ssl.create_default_context(cafile=security.ca_file)
                sock = context.wrap_socket(sock, server_hostname=self.address[0])
            if security.sasl:
                self._authenticate(sock, security, deadline)
        except BaseException:
            sock.close()
            raise
        return sock

    def _authenticate(self, sock: socket.socket, security: ClientSecurity, deadline: float) -> None:
        """SASL as the brokers authenticate to each other (their client authenticator): SaslHandshake, then
        SaslAuthenticate until the mechanism completes."""
        # Imported here: kafka-python's schemas are for secured listeners only, not every `import minikafka`.
        from minikafka.broker.security.sasl_client import SaslClientLogin
        from minikafka.broker.security.sasl_client_authenticator import AuthenticationError, SaslClientAuthenticator
        from minikafka.protocol import codec

        login = SaslClientLogin(security.mechanism, {"username": security.username or "",
                                                     "password": security.password or ""}, "sasl.jaas.config")
        authenticator = SaslClientAuthenticator(login.create_client())
        request = authenticator.handshake_request()
        while request is not None:
            schema, version = codec.SCHEMAS[request.API_KEY], request.API_VERSION
            correlation_id = next(self._correlation) & 0x7FFFFFFF
            sock.sendall(codec.encode_request(schema, version, correlation_id, self.client_id, request))
            response = _receive_frame(sock, deadline)
            if int.from_bytes(response[:4], "big", signed=True) != correlation_id:
                raise ConnectionError(f"SASL response for another request than {correlation_id}")
            try:
                request = authenticator.receive(codec.decode_response(schema, version, response))
            except AuthenticationError as exc:
                raise ControlError(f"authentication failed: {exc}") from None


def _receive_frame(sock: socket.socket, deadline: float) -> bytes:
    decoder = FrameDecoder(MAX_RESPONSE_BYTES)
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("no control response in time")
        sock.settimeout(remaining)
        chunk = sock.recv(RECEIVE_BYTES)
        if not chunk:
            raise ConnectionError("the broker closed the control connection")
        try:
            frames = decoder.feed(chunk)
        except FrameError as exc:
            raise ConnectionError(f"malformed control response: {exc}") from None
        if frames:
            return frames[0]
