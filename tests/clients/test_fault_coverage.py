"""Every fault kind covers every API it applies to (as franz-go kfake's fault-coverage test): a selector-less fault
of the kind answers, or shapes the response to, a minimal valid request of each API the broker serves (the ApiVersions
list), sent with the raw client. A new API or a new fault kind that the faults miss fails here."""
from __future__ import annotations

import struct
import time
from typing import Any

import pytest
from kafka.protocol.metadata.api_versions import ApiVersionsRequest

from minikafka.control_client import ControlError
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.codec import SCHEMAS
from minikafka.protocol.errors import ErrorCode
from tests.helpers import fetch, produce
from tests.raw_client import RawConnection, record_batch

# Kinds whose faults act on requests of any API, each covered below.
PER_REQUEST_KINDS = ("error", "latency", "drop-response", "connection-delay", "reorder", "bandwidth",
                     "close-after-bytes", "partial-fetch")
# Kinds that act on something else than the requests of an API: the disk (appends), links between nodes, replica
# fetching, transaction markers, SASL authentication, the wall clock, the log cleaner; each has its own tests.
OTHER_KINDS = ("disk", "link", "fetch-pause", "txn-markers-hold", "auth-failure", "clock-jump", "cleaner-crash")
INJECTED = ErrorCode.KAFKA_STORAGE_ERROR
DELAY_MS = 150
BYTES_PER_S = 4000


def served_apis(bootstrap: str) -> list[tuple[ApiKey, int]]:
    """(API, highest version) of every API the broker lists in ApiVersions."""
    with RawConnection(bootstrap) as conn:
        response = conn.request(ApiVersionsRequest[3](client_software_name="coverage", client_software_version="1"))
    assert response.error_code == 0
    return [(ApiKey(api.api_key), api.max_version) for api in response.api_keys]


def minimal_request(api: ApiKey, version: int, *, with_entries: bool = False) -> Any:
    """The request with every field at its default (empty lists), acks=1 for a Produce; `with_entries` puts one
    default entry in each list of entries, three levels deep, for an error to be answered in."""
    request = SCHEMAS[api].request[version]()
    if api == ApiKey.PRODUCE:
        request.acks = 1
    if with_entries:
        _fill(request, depth=3)
    return request


def _fill(message: Any, depth: int) -> None:
    for name, field in type(message)._struct.fields.items():
        if not field.is_array() or not field.for_version_q(message.version) or getattr(message, name):
            continue
        if field.is_struct_array():
            entry = field.data_class(version=message.version)
            if depth > 1:
                _fill(entry, depth - 1)
            setattr(message, name, [entry])
        elif field.type_str == "[]string":
            setattr(message, name, ["covered"])  # a list of names: groups, coordinator keys
        elif field.type_str == "[]int32":
            setattr(message, name, [0])  # a list of partition indexes


def error_codes(message: Any) -> list[int]:
    """Every error code in a response, at any depth."""
    codes = []
    for name, field in type(message)._struct.fields.items():
        if not field.for_version_q(message.version):
            continue
        value = getattr(message, name, None)
        if name in ("error_code", "partition_error_code") and value is not None:
            codes.append(value)
        for item in value if isinstance(value, list) else ():
            if hasattr(type(item), "_struct"):
                codes += error_codes(item)
    return codes


def answered_error_codes(conn: RawConnection, request: Any) -> list[int]:
    """The error codes of the response to `request`. An ApiVersions response in error is read by its first field,
    the error code, in every version (kafka-python decodes any ApiVersions error as v0, the Java client tries the
    request's version first; the broker answers in the request's version, as Kafka does)."""
    if request.API_KEY != ApiKey.API_VERSIONS:
        return error_codes(conn.request(request))
    correlation = conn.send(request)
    frame = conn.read_frame()
    assert frame is not None and frame_correlation(frame) == correlation
    return [struct.unpack_from(">h", frame, 4)[0]]


def has_error_field(message_class: Any) -> bool:
    fields = message_class._struct.fields
    return "error_code" in fields or any(field.is_struct_array() and has_error_field(field.data_class)
                                         for field in fields.values())


def frame_correlation(frame: bytes) -> int:
    return struct.unpack_from(">i", frame)[0]


def test_every_per_request_kind_is_covered_here():
    from minikafka.broker.faults.injector import KINDS

    assert set(KINDS) == set(PER_REQUEST_KINDS) | set(OTHER_KINDS)


def test_an_error_fault_answers_every_api_with_an_error_code(minikafka_broker):
    broker = minikafka_broker
    refused, missed = [], []
    for api, version in served_apis(broker.bootstrap_servers):
        try:
            fault = broker.faults.fail_requests(api.api_name, INJECTED.name, count=None)
        except ControlError as exc:
            assert "carry no error code" in str(exc)
            refused.append(api)
            continue
        top_error = SCHEMAS[api].response._struct.fields.get("error_code")
        request = minimal_request(api, version, with_entries=top_error is None or not top_error.for_version_q(version))
        with RawConnection(broker.bootstrap_servers) as conn:
            codes = answered_error_codes(conn, request)
        if INJECTED not in codes or fault.hits != 1:
            missed.append((api, fault.hits, codes))
        fault.clear()
    assert missed == [], [(api.api_name, hits, codes) for api, hits, codes in missed]
    # Only an API whose responses carry no error code at all is refused, and the broker serves none.
    assert refused == [api for api, _ in served_apis(broker.bootstrap_servers)
                       if not has_error_field(SCHEMAS[api].response)] == []


def test_a_latency_fault_holds_back_every_api(minikafka_broker):
    broker = minikafka_broker
    fault = broker.faults.add_latency(DELAY_MS)
    apis = served_apis(broker.bootstrap_servers)
    fault.wait(hits=1)  # the ApiVersions of served_apis
    with RawConnection(broker.bootstrap_servers) as conn:
        for done, (api, version) in enumerate(apis, start=2):
            started = time.monotonic()
            conn.request(minimal_request(api, version))
            assert time.monotonic() - started >= DELAY_MS / 1000, api
            assert fault.hits == done, api


def test_a_drop_response_fault_leaves_every_api_unanswered(minikafka_broker):
    broker = minikafka_broker
    for api, version in served_apis(broker.bootstrap_servers):
        fault = broker.faults.drop_responses(api.api_name, count=None)
        with RawConnection(broker.bootstrap_servers) as conn:
            conn.send(minimal_request(api, version))
            assert conn.read_frame() is None, api  # closed instead of answered
        assert fault.hits == 1, api
        fault.clear()


def test_a_connection_delay_holds_back_every_api_on_its_connection(minikafka_broker):
    broker = minikafka_broker
    apis = served_apis(broker.bootstrap_servers)
    fault = broker.faults.delay_connection(DELAY_MS)
    with RawConnection(broker.bootstrap_servers) as conn:
        for done, (api, version) in enumerate(apis, start=1):
            started = time.monotonic()
            conn.request(minimal_request(api, version))
            assert time.monotonic() - started >= DELAY_MS / 1000, api
            assert fault.hits == done, api


def test_a_reorder_fault_answers_every_api_after_the_request_behind_it(minikafka_broker):
    broker = minikafka_broker
    apis = served_apis(broker.bootstrap_servers)
    fault = broker.faults.reorder_responses()
    with RawConnection(broker.bootstrap_servers) as conn:
        for done, (api, version) in enumerate(apis, start=1):
            first, second = conn.pipeline(minimal_request(api, version), ApiVersionsRequest[0]())
            assert [frame_correlation(conn.read_frame()), frame_correlation(conn.read_frame())] == [second, first], \
                api
            assert fault.hits == done, api


def test_a_bandwidth_fault_paces_every_api(minikafka_broker):
    broker = minikafka_broker
    apis = served_apis(broker.bootstrap_servers)
    fault = broker.faults.throttle_bandwidth(BYTES_PER_S)
    with RawConnection(broker.bootstrap_servers) as conn:
        for done, (api, version) in enumerate(apis, start=1):
            started = time.monotonic()
            conn.send(minimal_request(api, version))
            frame = conn.read_frame()
            assert frame is not None, api
            assert time.monotonic() - started >= (len(frame) + 4) / BYTES_PER_S, api
            assert fault.hits == done, api


def test_a_close_after_bytes_fault_cuts_every_api(minikafka_broker):
    broker = minikafka_broker
    apis = served_apis(broker.bootstrap_servers)
    fault = broker.faults.close_after_bytes(8, count=None)  # the size and the correlation id, then closed
    for done, (api, version) in enumerate(apis, start=1):
        with RawConnection(broker.bootstrap_servers) as conn:
            correlation = conn.send(minimal_request(api, version))
            received = b""
            while chunk := conn.sock.recv(1 << 16):
                received += chunk
        size, got = struct.unpack(">ii", received)
        assert (len(received), got) == (8, correlation) and size > 4, api
        fault.wait(hits=done)


def test_a_partial_fetch_fault_cuts_fetches_and_leaves_other_apis_alone(minikafka_broker):
    broker = minikafka_broker
    broker.state.create_topic("covered")
    with RawConnection(broker.bootstrap_servers) as conn:
        for value in (b"a", b"b"):
            produce(conn, "covered", 0, record_batch([value * 50]))
        whole = fetch(conn, "covered", 0, 0).records
        fault = broker.faults.partial_fetch(count=None)
        for api, version in served_apis(broker.bootstrap_servers):
            if api != ApiKey.FETCH:
                conn.request(minimal_request(api, version))
        assert fault.hits == 0  # no other API is touched
        partial = fetch(conn, "covered", 0, 0).records
    assert fault.hits == 1 and len(whole) // 2 < len(partial) < len(whole)
    with pytest.raises(ControlError, match="Fetch requests only"):
        broker.faults._control.call("fault.add", kind="partial-fetch", api="Produce")
