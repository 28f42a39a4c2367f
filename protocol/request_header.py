"""The request header every Kafka request starts with, apart from the schema classes.

Apart so that the control API's clients (fault injection, state inspection) frame requests without loading
kafka-python's schema classes, which take a tenth of a second to import.
"""
import struct
from typing import NamedTuple

_HEADER = struct.Struct(">hhih")


class InvalidRequestError(Exception):
    """The frame is not a request this broker can parse; Kafka closes the connection on this."""


class RequestHeader(NamedTuple):
    """The v1 part of a request header, which every request header version starts with (v2 adds tagged fields,
    skipped with the body's decoding since only the flexibility of the API version says they are there)."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None

    def encode(self) -> bytes:
        client = self.client_id.encode() if self.client_id is not None else b""
        length = -1 if self.client_id is None else len(client)
        return _HEADER.pack(self.api_key, self.api_version, self.correlation_id, length) + client

    @classmethod
    def parse(cls, frame: bytes | memoryview) -> tuple["RequestHeader", int]:
        """The header of a request frame (without its size prefix), and the position after client_id."""
        if len(frame) < _HEADER.size:
            raise InvalidRequestError(f"request of {len(frame)} bytes is shorter than a request header")
        api_key, api_version, correlation_id, client_len = _HEADER.unpack_from(frame, 0)
        pos = _HEADER.size
        client_id = None
        if client_len >= 0:
            if pos + client_len > len(frame):
                raise InvalidRequestError("client_id runs past the end of the request")
            client_id = bytes(frame[pos:pos + client_len]).decode("utf-8", "replace")
            pos += client_len
        return cls(api_key, api_version, correlation_id, client_id), pos
