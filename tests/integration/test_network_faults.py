"""The faults on how responses travel: one connection delayed, pipelined responses reordered, a bandwidth, a
connection closed after N bytes, a Fetch answered with its last batch cut short; with what clients do about them."""
from __future__ import annotations

import re
import struct
import subprocess
import sys
import time

import pytest
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import Producer as ConfluentProducer
from kafka import KafkaConsumer, KafkaProducer
from kafka.protocol.metadata.api_versions import ApiVersionsRequest
from kafka.protocol.metadata.metadata import MetadataRequest

from minikafka.control_client import ControlError
from tests.helpers import fetch, produce
from tests.raw_client import RawConnection, record_batch


def correlation_of(frame: bytes) -> int:
    return struct.unpack_from(">i", frame)[0]


def test_connection_delay_holds_back_one_connection_only(minikafka_broker):
    broker = minikafka_broker
    fault = broker.faults.delay_connection(1500, when={"client_id": "raw-test"})
    with RawConnection(broker.bootstrap_servers) as first, RawConnection(broker.bootstrap_servers) as second:
        started = time.monotonic()
        first.request(ApiVersionsRequest[3](client_software_name="t", client_software_version="1"))
        assert time.monotonic() - started >= 1.5  # the first matching connection is the delayed one
        assert fault.hits == 1
        second.request(ApiVersionsRequest[3](client_software_name="t", client_software_version="1"))
        assert fault.hits == 1  # the same client id on another connection is answered without delay
        described = next(f for f in broker.faults.list() if f["id"] == fault.id)
        assert described["connection_id"] is not None and described["peer"]
        first.request(MetadataRequest[1](topics=[]))
        assert fault.hits == 2
    fault.clear()
    assert not fault.active and fault.hits == 2


def test_reordered_pipelined_responses_still_match_by_correlation_id(minikafka_broker):
    broker = minikafka_broker
    fault = broker.faults.reorder_responses(api="Metadata", count=1)
    with RawConnection(broker.bootstrap_servers) as conn:
        first, second = conn.pipeline(MetadataRequest[1](topics=[]), ApiVersionsRequest[0]())
        frames = [conn.read_frame(), conn.read_frame()]
        assert [correlation_of(f) for f in frames] == [second, first]  # request N+1 answered before request N
        fault.wait(hits=1)
        assert not fault.active  # its count is used up: the next pipelined pair comes back in order
        third, fourth = conn.pipeline(MetadataRequest[1](topics=[]), ApiVersionsRequest[0]())
        assert [correlation_of(conn.read_frame()), correlation_of(conn.read_frame())] == [third, fourth]


def test_reorder_without_pipelining_changes_nothing(minikafka_broker):
    broker = minikafka_broker
    fault = broker.faults.reorder_responses()
    with RawConnection(broker.bootstrap_servers) as conn:
        for _ in range(3):
            conn.request(MetadataRequest[1](topics=[]))  # one at a time: nothing behind it to answer first
    assert fault.hits == 0


def test_bandwidth_paces_responses(minikafka_broker):
    broker = minikafka_broker
    broker.state.create_topic("paced")
    with RawConnection(broker.bootstrap_servers) as conn:
        produce(conn, "paced", 0, record_batch([b"x" * 20000]))
        fault = broker.faults.throttle_bandwidth(20000, api="Fetch")
        started = time.monotonic()
        response = fetch(conn, "paced", 0, 0)
        assert time.monotonic() - started >= 1.0  # 20 kB at 20 kB/s: at least a second
        assert len(response.records) > 20000
        assert fault.hits == 1


def test_close_after_bytes_cuts_the_response_under_way(minikafka_broker):
    broker = minikafka_broker
    fault = broker.faults.close_after_bytes(30)
    with RawConnection(broker.bootstrap_servers) as conn:
        conn.send(MetadataRequest[1](topics=[]))
        received = b""
        while chunk := conn.sock.recv(1 << 16):
            received += chunk
        assert len(received) == 30  # exactly the budget, then the connection closed
        assert struct.unpack_from(">i", received)[0] > 26  # a frame announcing more than it got
    fault.wait(hits=1)
    assert not fault.active  # count=1: one connection
    with RawConnection(broker.bootstrap_servers) as conn:
        conn.request(MetadataRequest[1](topics=[]))  # the next connection is answered whole


def test_partial_fetch_cuts_the_last_batch(minikafka_broker):
    broker = minikafka_broker
    broker.state.create_topic("cut")
    with RawConnection(broker.bootstrap_servers) as conn:
        for value in (b"a", b"b", b"c"):
            produce(conn, "cut", 0, record_batch([value * 100]))
        whole = fetch(conn, "cut", 0, 0).records
        fault = broker.faults.partial_fetch()
        partial = fetch(conn, "cut", 0, 0).records
        assert fault.hits == 1 and not fault.active
    batch = len(whole) // 3  # three batches of the same size
    assert len(partial) == 2 * batch + batch // 2  # the first two whole, the last cut to half
    assert partial == whole[:len(partial)]


@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
def test_consumers_skip_a_partial_batch_and_fetch_it_again(minikafka_broker, client):
    broker = minikafka_broker
    broker.state.create_topic("cut")
    with RawConnection(broker.bootstrap_servers) as conn:
        for i in range(5):
            produce(conn, "cut", 0, record_batch([f"v{i}".encode()]))
    fault = broker.faults.partial_fetch(count=3)
    values: list[bytes] = []
    deadline = time.monotonic() + 30
    if client == "kafka-python":
        consumer = KafkaConsumer("cut", bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest",
                                 group_id=None, consumer_timeout_ms=1000)
        try:
            while len(values) < 5 and time.monotonic() < deadline:
                for batch in consumer.poll(timeout_ms=500).values():
                    values += [r.value for r in batch]
        finally:
            consumer.close()
    else:
        consumer = ConfluentConsumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "cut-reader",
                                      "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumer.subscribe(["cut"])
        try:
            while len(values) < 5 and time.monotonic() < deadline:
                message = consumer.poll(0.5)
                if message is not None and message.error() is None:
                    values.append(message.value())
        finally:
            consumer.close()
    assert values == [f"v{i}".encode() for i in range(5)]  # each record once, in order, none lost
    assert fault.hits >= 1


def test_network_faults_are_refused_without_their_parameter(minikafka_broker):
    control = minikafka_broker.faults._control
    with pytest.raises(ControlError, match="bytes_per_s of at least 1"):
        control.call("fault.add", kind="bandwidth")
    with pytest.raises(ControlError, match="partial-fetch fault answers Fetch requests only"):
        control.call("fault.add", kind="partial-fetch", api="Produce")


def test_cli_adds_lists_and_clears_the_network_faults(minikafka_broker):
    broker = minikafka_broker

    def cli(*args: str) -> str:
        proc = subprocess.run([sys.executable, "-m", "minikafka", "fault", *args, "--bootstrap-server",
                               broker.bootstrap_servers], capture_output=True, timeout=60)
        assert proc.returncode == 0, proc.stderr.decode()
        return proc.stdout.decode()

    assert cli("connection-delay", "--ms", "500", "--when", "client_id=billing") == (
        "Added fault 1: every response on the first connection to match delayed 500 ms, until cleared "
        "when client_id=billing\n")
    cli("reorder", "--api", "Metadata", "--count", "2")
    cli("bandwidth", "--bytes-per-s", "10000", "--api", "Fetch")
    cli("close-after-bytes", "--bytes", "30", "--count", "2")
    cli("partial-fetch", "--forever")
    with RawConnection(broker.bootstrap_servers) as conn:
        conn.send(MetadataRequest[1](topics=[]))
        while conn.sock.recv(1 << 16):
            pass  # closed after 30 bytes
    listed = cli("list").splitlines()
    assert [line.split("\t")[1] for line in listed] == ["connection-delay", "reorder", "bandwidth",
                                                        "close-after-bytes", "partial-fetch"]
    # the Metadata request took the reorder fault's connection, though with nothing pipelined none was swapped
    assert re.fullmatch(r"2\treorder\tMetadata response on connection \d+ \(127.0.0.1:\d+\) written after the "
                        r"next pipelined response, 2 more time\(s\)", listed[1])
    assert listed[3] == ("4\tclose-after-bytes\tconnection closed after 30 bytes of every response, "
                         "1 more time(s) (hit 1 so far)")
    assert cli("clear", "--kind", "bandwidth") == "Cleared 1 fault(s).\n"
    assert [f["kind"] for f in broker.faults.list()] == ["connection-delay", "reorder", "close-after-bytes",
                                                         "partial-fetch"]
    assert cli("clear") == "Cleared 4 fault(s).\n"


def produce_pipelined(broker, client_id: str) -> None:
    """Make a client pipeline its Produce requests: the broker holds each response back a while, so the client
    sends the next ones (max.in.flight) before the first is answered."""
    broker.state.create_topic("pipelined", partitions=4)
    broker.faults.add_latency(100, api="Produce", when={"client_id": client_id})


def test_librdkafka_matches_reordered_produce_responses_by_correlation_id(minikafka_broker):
    broker = minikafka_broker
    produce_pipelined(broker, "rdk")
    fault = broker.faults.reorder_responses(api="Produce", when={"client_id": "rdk"})
    producer = ConfluentProducer({"bootstrap.servers": broker.bootstrap_servers, "client.id": "rdk",
                                  "linger.ms": 0, "batch.size": 2000, "max.in.flight": 5})
    failed: list = []
    for i in range(200):
        producer.produce("pipelined", b"x" * 1000, partition=i % 4,
                         on_delivery=lambda err, _msg: failed.append(err) if err else None)
        producer.poll(0)
    assert producer.flush(60) == 0
    assert failed == []  # every response found its request by correlation id
    assert fault.hits >= 1
    assert broker.wait_for_records("pipelined", 200) == 200  # each record once


def test_kafka_python_refuses_a_reordered_response_and_drops_the_connection(minikafka_broker):
    broker = minikafka_broker
    produce_pipelined(broker, "kp")
    fault = broker.faults.reorder_responses(api="Produce", when={"client_id": "kp"}, count=1)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, client_id="kp", linger_ms=0,
                             batch_size=1000, max_in_flight_requests_per_connection=5, retries=0)
    try:
        sent = [producer.send("pipelined", b"x" * 1000, partition=i % 4) for i in range(100)]
        producer.flush(60)
    finally:
        producer.close()
    errors = {type(future.exception).__name__ for future in sent if future.failed()}
    assert errors == {"CorrelationIdError"}  # kafka-python expects responses in order, as Kafka sends them
    assert fault.hits == 1
