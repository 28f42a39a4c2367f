"""A minimal blocking Kafka protocol client for tests that must send exactly the bytes they choose."""
from __future__ import annotations

import socket
import struct
from collections import deque

from kafka.protocol.api_message import ApiMessage
from kafka.record.memory_records import MemoryRecordsBuilder

from minikafka.protocol.codec import SCHEMAS
from minikafka.protocol.framing import FrameDecoder

MAX_RESPONSE_BYTES = (1 << 31) - 1


class RawConnection:
    def __init__(self, bootstrap: str, timeout: float = 10.0) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self._correlation = 0
        self._decoder = FrameDecoder(MAX_RESPONSE_BYTES)
        self._frames: deque[bytes] = deque()

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawConnection:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def send_bytes(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send(self, request: ApiMessage) -> int:
        self._correlation += 1
        request.with_header(correlation_id=self._correlation, client_id="raw-test")
        self.sock.sendall(request.encode(header=True, framed=True))
        return self._correlation

    def pipeline(self, *requests: ApiMessage) -> list[int]:
        """Send the requests in one write, so the broker has all of them before it answers the first; their
        correlation ids."""
        frames, correlations = [], []
        for request in requests:
            self._correlation += 1
            request.with_header(correlation_id=self._correlation, client_id="raw-test")
            frames.append(request.encode(header=True, framed=True))
            correlations.append(self._correlation)
        self.sock.sendall(b"".join(frames))
        return correlations

    def read_frame(self) -> bytes | None:
        """One response frame, or None if the broker closed the connection."""
        while not self._frames:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                return None
            self._frames.extend(self._decoder.feed(chunk))
        return self._frames.popleft()

    def request(self, request: ApiMessage) -> ApiMessage:
        correlation = self.send(request)
        frame = self.read_frame()
        assert frame is not None, "broker closed the connection"
        (got,) = struct.unpack_from(">i", frame)
        assert got == correlation
        version = request.API_VERSION
        schema = SCHEMAS[request.API_KEY]
        pos = 4 + schema.response_header_version(version)  # v1 adds empty tagged fields
        return schema.response.decode(frame[pos:], version=version)

    def authenticate_plain(self, user: str, password: str) -> RawConnection:
        """SASL/PLAIN on a SASL listener (SaslHandshake v1, SaslAuthenticate v2): later requests are the user's."""
        from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

        assert self.request(SaslHandshakeRequest[1](mechanism="PLAIN")).error_code == 0
        token = b"\0" + user.encode() + b"\0" + password.encode()
        response = self.request(SaslAuthenticateRequest[2](auth_bytes=token))
        assert response.error_code == 0, response.error_message
        return self

    def find_coordinator(self, group_id: str) -> None:
        """What every group client does first (and what creates `__consumer_offsets` on a fresh broker)."""
        from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest

        assert self.request(FindCoordinatorRequest[3](key=group_id, key_type=0)).error_code == 0

    def is_closed_by_broker(self) -> bool:
        try:
            return self.sock.recv(1) == b""
        except (TimeoutError, ConnectionResetError):
            return True


def record_batch(values: list[bytes], *, compression: int = 0, timestamp: int | None = None) -> bytes:
    builder = MemoryRecordsBuilder(magic=2, compression_type=compression, batch_size=1 << 24)
    for value in values:
        builder.append(timestamp=timestamp, key=None, value=value, headers=[])
    builder.close()
    return bytes(builder.buffer())
