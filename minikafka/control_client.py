"""A blocking client for one broker's control API (fault injection and state inspection), over its Kafka port."""
from __future__ import annotations

import itertools
import socket
import ssl
import struct
import time
from typing import Any

from minikafka.handle_security import ClientSecurity
from minikafka.protocol.control import decode_response, encode_request
from minikafka.protocol.framing import FrameDecoder, FrameError, frame
from minikafka.protocol.request_header import RequestHeader

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

    def call(self, op: str, **fields: Any) -> dict[str, Any]:
        """Run one operation; returns the broker's answer or raises ControlError (refused) or OSError (network)."""
        correlation_id = next(self._correlation) & 0x7FFFFFFF
        payload = {"op": op, **fields}
        deadline = time.monotonic() + self.timeout_s
        with self._connect(deadline) as sock:
            sock.sendall(encode_request(correlation_id, self.client_id, payload))
            got_id, answer = decode_response(_receive_frame(sock, deadline))
        if got_id != correlation_id:
            raise ConnectionError(f"control response for request {got_id}, expected {correlation_id}")
        if not answer.get("ok"):
            raise ControlError(answer.get("error", "control operation failed"))
        answer.pop("ok", None)
        return answer


    def _connect(self, deadline: float) -> socket.socket:
        """A connection to the broker, over TLS and authenticated (SASL/PLAIN) where the listener asks for it."""
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
        """SaslHandshake v1 and SaslAuthenticate v0 with a PLAIN token, by hand: no schema library needed."""
        handshake = RequestHeader(SASL_HANDSHAKE, 1, 1, self.client_id).encode() + _string(b"PLAIN")
        sock.sendall(frame(handshake))
        (error,) = struct.unpack_from(">h", _receive_frame(sock, deadline), 4)
        if error:
            raise ControlError(f"the broker refused SASL/PLAIN (error {error})")
        token = b"\0" + (security.username or "").encode() + b"\0" + (security.password or "").encode()
        authenticate = RequestHeader(SASL_AUTHENTICATE, 0, 2, self.client_id).encode() + \
            struct.pack(">i", len(token)) + token
        sock.sendall(frame(authenticate))
        response = _receive_frame(sock, deadline)
        (error, length) = struct.unpack_from(">hh", response, 4)
        if error:
            message = response[8:8 + length].decode("utf-8", "replace") if length >= 0 else ""
            raise ControlError(f"authentication failed: {message}")


SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36


def _string(value: bytes) -> bytes:
    return struct.pack(">h", len(value)) + value


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
