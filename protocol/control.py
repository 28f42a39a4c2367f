"""Framing of minikafka's private control API (fault injection and state inspection), sans-IO.

The control API rides on the Kafka listener so a tool needs only `--bootstrap-server`. Its requests use API key
10000 with an ordinary v1 request header (api key, version, correlation id, client id); the body is one Kafka
BYTES field (int32 length, then data) holding a JSON object. The response is the correlation id and one BYTES
field of JSON. The key is never advertised in ApiVersions, so Kafka clients neither see nor use it.
"""
from __future__ import annotations

import json
import struct
from typing import Any

from . import framing
from .request_header import RequestHeader

CONTROL_API_KEY = 10000
CONTROL_API_VERSION = 0

_INT32 = struct.Struct(">i")


class ControlFramingError(ValueError):
    """A control frame whose body is not one length-prefixed JSON object."""


def _json_bytes(payload: dict[str, Any]) -> bytes:
    data = json.dumps(payload, separators=(",", ":"), sort_keys=True).encode()
    return _INT32.pack(len(data)) + data


def _read_json(buf: bytes | memoryview, pos: int) -> dict[str, Any]:
    if len(buf) < pos + 4:
        raise ControlFramingError("control body shorter than its length field")
    (size,) = _INT32.unpack_from(buf, pos)
    pos += 4
    if size < 0 or pos + size != len(buf):
        raise ControlFramingError(f"control body length {size} does not match the {len(buf) - pos} bytes sent")
    try:
        payload = json.loads(bytes(buf[pos:pos + size]))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ControlFramingError(f"control body is not JSON: {exc}") from None
    if not isinstance(payload, dict):
        raise ControlFramingError("control body must be a JSON object")
    return payload


def encode_request(correlation_id: int, client_id: str | None, payload: dict[str, Any]) -> bytes:
    """A whole size-prefixed control request frame."""
    header = RequestHeader(CONTROL_API_KEY, CONTROL_API_VERSION, correlation_id, client_id)
    return framing.frame(header.encode(), _json_bytes(payload))


def decode_request_body(frame: bytes, body_pos: int) -> dict[str, Any]:
    """The JSON object of a control request frame (without its size prefix), its header already parsed."""
    return _read_json(memoryview(frame), body_pos)


def encode_response(correlation_id: int, payload: dict[str, Any]) -> bytes:
    """A whole size-prefixed control response frame."""
    return framing.frame(_INT32.pack(correlation_id), _json_bytes(payload))


def decode_response(frame: bytes) -> tuple[int, dict[str, Any]]:
    """Correlation id and JSON object of a control response frame (without its size prefix)."""
    if len(frame) < 4:
        raise ControlFramingError("control response shorter than its correlation id")
    (correlation_id,) = _INT32.unpack_from(frame, 0)
    return correlation_id, _read_json(memoryview(frame), 4)
