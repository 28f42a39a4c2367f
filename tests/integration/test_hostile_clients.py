"""A client cannot take the broker from the others (issue 10): clients that pipeline requests and never read
their responses do not hold back anyone else, get every response in order once they read, and a request parked
for a client that has gone is dropped with its socket at once.

A real broker process, 200 topics (so a Metadata answer for every topic is a big one), raw sockets. The bounds are
generous: each is a budget for a loaded machine, not an expectation (bench/hostile_clients.py has the figures).
"""
from __future__ import annotations

import os
import socket
import struct
import sys
import time
from collections.abc import Iterator

import pytest
from kafka.protocol.admin.groups import ListGroupsRequest
from kafka.protocol.consumer.fetch import FetchRequest
from kafka.protocol.consumer.group import JoinGroupRequest, SyncGroupRequest
from kafka.protocol.metadata.api_versions import ApiVersionsRequest
from kafka.protocol.metadata.metadata import MetadataRequest
from kafka.protocol.producer.produce import ProduceRequest

import minikafka
from minikafka.protocol.codec import SCHEMAS
from tests.helpers import create_topic, produce, wait_until
from tests.raw_client import RawConnection, record_batch

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts the broker's sockets in /proc")

TOPICS = 200
ANSWERED_WITHIN_S = 5.0  # for a request from a client that behaves, while others flood
RELEASED_WITHIN_S = 10.0  # for a socket whose client has gone
INT32_MAX = (1 << 31) - 1


@pytest.fixture(scope="module")
def broker(tmp_path_factory) -> Iterator[minikafka.Broker]:
    base = tmp_path_factory.mktemp("hostile")
    with minikafka.Broker(data_dir=base / "data", log_path=base / "broker.log") as started:
        with RawConnection(started.bootstrap_servers) as conn:
            for i in range(TOPICS):
                create_topic(conn, f"topic-{i:03d}")
            create_topic(conn, "writes")
        yield started


def broker_sockets(broker: minikafka.Broker) -> int:
    """How many sockets the broker process holds open (listeners and connections)."""
    count = 0
    fds = f"/proc/{broker.pid}/fd"
    for fd in os.listdir(fds):
        try:
            count += os.readlink(f"{fds}/{fd}").startswith("socket:")
        except FileNotFoundError:  # closed while being listed
            pass
    return count


def settled_sockets(broker: minikafka.Broker) -> int:
    """The broker's socket count once the short connections of earlier steps are gone."""
    counts = [broker_sockets(broker)]

    def steady() -> bool:
        counts.append(broker_sockets(broker))
        return counts[-1] == counts[-2]

    wait_until(steady, interval=0.2, message="a steady socket count")
    return counts[-1]


def metadata_frame(correlation_id: int) -> bytes:
    request = MetadataRequest[1](topics=None)
    request.with_header(correlation_id=correlation_id, client_id="flood")
    return request.encode(header=True, framed=True)


class Flooder:
    """Pipelines Metadata requests for every topic and never reads a response."""

    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        self.sock.setblocking(False)

    def flood(self, total: int) -> int:
        """Send up to `total` bytes of requests, as much as the socket takes without blocking; the bytes sent."""
        one = metadata_frame(1)
        data = memoryview(one * (total // len(one)))
        sent = 0
        for _ in range(10_000):
            if sent == len(data):
                break
            try:
                sent += self.sock.send(data[sent:])
            except BlockingIOError:
                break
        return sent

    def close(self) -> None:
        self.sock.close()


def timed(what, *args):
    started = time.monotonic()
    result = what(*args)
    return result, time.monotonic() - started


def fresh_metadata(bootstrap: str) -> int:
    """A client that starts up: connect, ask for every topic; how many it was told of."""
    with RawConnection(bootstrap) as conn:
        return len(conn.request(MetadataRequest[1](topics=None)).topics)


def test_clients_pipelining_without_reading_do_not_hold_back_the_others(broker):
    bootstrap = broker.bootstrap_servers
    baseline = settled_sockets(broker)
    flooders = [Flooder(bootstrap) for _ in range(5)]
    try:
        for flooder in flooders:
            assert flooder.flood(1 << 20) > 0
        with RawConnection(bootstrap) as producer:
            for i in range(3):
                topics, took = timed(fresh_metadata, bootstrap)
                assert topics == TOPICS + 1
                assert took < ANSWERED_WITHIN_S, f"a fresh client's Metadata took {took:.1f} s behind the flood"
                written, took = timed(produce, producer, "writes", 0, record_batch([b"%d" % i]))
                assert written.error_code == 0
                assert took < ANSWERED_WITHIN_S, f"an acks=1 Produce took {took:.1f} s behind the flood"
                for flooder in flooders:  # more of the same, for as much as the broker reads of it
                    flooder.flood(1 << 18)
    finally:
        for flooder in flooders:
            flooder.close()
    wait_until(lambda: broker_sockets(broker) <= baseline, RELEASED_WITHIN_S,
               message="the broker to release the sockets of the clients that flooded and left")


def test_a_muted_connection_gets_every_response_in_order_once_it_reads(broker):
    """Far more responses than the sockets' buffers hold: the broker stops reading the connection and answering
    it until the client reads, serving others meanwhile, then goes on where it stopped."""
    count = 3000
    F = FetchRequest[12]
    parked_fetch = F(replica_id=-1, max_wait_ms=50, min_bytes=INT32_MAX, max_bytes=1 << 20, isolation_level=0,
                     session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="",
                     topics=[F.FetchTopic(topic="writes", partitions=[F.FetchTopic.FetchPartition(
                         partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
                         log_start_offset=-1, partition_max_bytes=1 << 20)])])
    P = ProduceRequest[9]
    write = P(transactional_id=None, acks=1, timeout_ms=10000, topic_data=[P.TopicProduceData(
        name="writes", partition_data=[P.TopicProduceData.PartitionProduceData(index=0,
                                                                              records=record_batch([b"x"]))])])
    expected = []
    with RawConnection(broker.bootstrap_servers, timeout=30) as conn:
        for i in range(count):
            request = (parked_fetch if i % 1000 == 500 else write if i % 100 == 7 else
                       ApiVersionsRequest[3](client_software_name="t", client_software_version="1") if i % 10 == 3
                       else MetadataRequest[1](topics=None))
            expected.append((conn.send(request), request))
        topics, took = timed(fresh_metadata, broker.bootstrap_servers)
        assert topics == TOPICS + 1 and took < ANSWERED_WITHIN_S
        received = 0
        for correlation, request in expected:
            frame = conn.read_frame()
            assert frame is not None, f"the broker closed the connection after {received} responses"
            (got,) = struct.unpack_from(">i", frame)
            assert got == correlation, f"response {received}: correlation id {got}, expected {correlation}"
            schema = SCHEMAS[request.API_KEY]
            version = request.API_VERSION
            body = schema.response[version].decode(frame[4 + schema.response_header_version(version):],
                                                   version=version)
            if isinstance(request, MetadataRequest):
                assert len(body.topics) == TOPICS + 1
            received += 1
        assert conn.request(MetadataRequest[1](topics=[])).topics == []  # and the connection goes on


@pytest.mark.parametrize("leaving", ["closes", "pipelines a request and closes", "resets"])
def test_a_parked_fetch_is_dropped_with_its_socket_when_the_client_goes(broker, leaving):
    baseline = settled_sockets(broker)
    conn = RawConnection(broker.bootstrap_servers)
    try:
        with RawConnection(broker.bootstrap_servers) as probe:  # the end offset, so the fetch waits at it
            end = produce(probe, "writes", 0, record_batch([b"before"])).base_offset + 1
        F = FetchRequest[12]
        waiting = broker.state.delayed_operations()
        conn.send(F(replica_id=-1, max_wait_ms=INT32_MAX, min_bytes=INT32_MAX, max_bytes=INT32_MAX,
                    isolation_level=0, session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="",
                    topics=[F.FetchTopic(topic="writes", partitions=[F.FetchTopic.FetchPartition(
                        partition=0, current_leader_epoch=-1, fetch_offset=end, last_fetched_epoch=-1,
                        log_start_offset=-1, partition_max_bytes=INT32_MAX)])]))
        wait_until(lambda: broker.state.delayed_operations() == waiting + 1, message="the fetch to park")
        if leaving == "pipelines a request and closes":
            conn.send(ApiVersionsRequest[3](client_software_name="t", client_software_version="1"))
        elif leaving == "resets":
            conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    finally:
        conn.close()
    wait_until(lambda: broker.state.delayed_operations() == waiting, RELEASED_WITHIN_S,
               message="the parked fetch of the client that went to be dropped")
    wait_until(lambda: broker_sockets(broker) <= baseline, RELEASED_WITHIN_S,
               message="the broker to release the socket of the client that went")


def test_a_join_waiting_for_the_rebalance_is_dropped_with_its_socket_when_the_client_goes(broker):
    J, S = JoinGroupRequest[3], SyncGroupRequest[2]

    def join():
        return J(group_id="hostile", session_timeout_ms=30000, rebalance_timeout_ms=60000, member_id="",
                 protocol_type="consumer", protocols=[J.JoinGroupRequestProtocol(name="range", metadata=b"")])

    with RawConnection(broker.bootstrap_servers) as first:
        first.find_coordinator("hostile")
        joined = first.request(join())
        assert joined.error_code == 0
        synced = first.request(S(group_id="hostile", generation_id=joined.generation_id, member_id=joined.member_id,
                                 assignments=[S.SyncGroupRequestAssignment(member_id=joined.member_id,
                                                                           assignment=b"")]))
        assert synced.error_code == 0
        baseline = settled_sockets(broker)
        second = RawConnection(broker.bootstrap_servers)
        try:
            second.send(join())  # waits for the first member to join again, up to its rebalance timeout

            def rebalancing() -> bool:
                with RawConnection(broker.bootstrap_servers) as other:
                    return bool(other.request(ListGroupsRequest[4](states_filter=["PreparingRebalance"])).groups)

            wait_until(rebalancing, message="the second member's join to wait for the rebalance")
        finally:
            second.close()
        wait_until(lambda: broker_sockets(broker) <= baseline, RELEASED_WITHIN_S,
                   message="the broker to release the socket of the member that went")
