"""The private control API: its framing, its refusal of bad input, and its invisibility to Kafka clients."""
from __future__ import annotations

import socket
import struct

import pytest
from kafka.protocol.metadata import ApiVersionsRequest

from minikafka.control_client import ControlClient, ControlError
from minikafka.protocol.control import (
    CONTROL_API_KEY,
    ControlFramingError,
    decode_request_body,
    decode_response,
    encode_request,
    encode_response,
)
from tests.raw_client import RawConnection


def test_request_and_response_framing_round_trip():
    frame = encode_request(7, "me", {"op": "describe", "topics": ["t"]})
    (size,) = struct.unpack_from(">i", frame)
    assert size == len(frame) - 4
    api_key, version, correlation_id, client_len = struct.unpack_from(">hhih", frame, 4)
    assert (api_key, version, correlation_id, client_len) == (CONTROL_API_KEY, 0, 7, 2)
    assert decode_request_body(frame[4:], 10 + client_len) == {"op": "describe", "topics": ["t"]}
    response = encode_response(7, {"ok": True, "n": 1})
    assert decode_response(response[4:]) == (7, {"ok": True, "n": 1})


@pytest.mark.parametrize("body", [b"", b"\x00\x00\x00\x05{}", b"\x00\x00\x00\x02[]", b"\x00\x00\x00\x03{x}"])
def test_malformed_bodies_are_refused(body):
    with pytest.raises(ControlFramingError):
        decode_request_body(b"\x00" * 10 + body, 10)


def test_control_key_is_not_advertised_to_kafka_clients(minikafka_broker):
    with RawConnection(minikafka_broker.bootstrap_servers) as conn:
        response = conn.request(ApiVersionsRequest[3](client_software_name="t", client_software_version="1"))
    keys = {entry.api_key for entry in response.api_keys}
    assert response.error_code == 0 and 0 in keys and CONTROL_API_KEY not in keys


def test_unknown_operation_and_missing_fields_are_answered_with_reasons(minikafka_broker):
    control = ControlClient(minikafka_broker.bootstrap_servers)
    with pytest.raises(ControlError, match="unknown control operation 'nope'"):
        control.call("nope")
    with pytest.raises(ControlError, match="needs field 'api'"):
        control.call("fault.add", kind="error", error="NOT_LEADER_OR_FOLLOWER")
    with pytest.raises(ControlError, match="unknown fault kind"):
        control.call("fault.add", kind="meteor")
    assert control.call("describe")["node_id"] == 1


def test_garbage_control_frame_closes_only_its_connection(minikafka_broker):
    host, port = minikafka_broker.bootstrap_servers.split(":")
    bad = b"\x27\x10\x00\x00\x00\x00\x00\x01\xff\xffnot-json"
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(bad)) + bad)
        assert sock.recv(16) == b""  # closed, nothing answered
    assert ControlClient(minikafka_broker.bootstrap_servers).call("fault.list") == {"faults": []}
    assert "control body" in minikafka_broker.log_path.read_text()
