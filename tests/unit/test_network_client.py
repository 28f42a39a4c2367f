"""The inter-broker NetworkClient: round trips with a real broker in this trio loop, and its failures against small
listeners that answer late, never, wrongly or not at all."""
from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import trio
import trio.testing
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.metadata.api_versions import ApiVersionsRequest, ApiVersionsResponse
from kafka.protocol.metadata.metadata import MetadataRequest

from minikafka.broker.network.network_client import DisconnectedError, NetworkClient, NetworkClientConfig
from minikafka.broker.server.broker_server import BrokerServer
from minikafka.config import BrokerConfig
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.codec import SCHEMAS, decode_request, encode_response
from minikafka.protocol.control_plane import CONTROL_PLANE_SCHEMAS, BrokerHeartbeatRequest, BrokerHeartbeatResponse
from minikafka.protocol.framing import FrameDecoder
from minikafka.protocol.request_header import RequestHeader
from tests.node_support import start_broker_with_topic

LOOPBACK = "127.0.0.1"
NODE = 2
CLIENT_ID = "broker-1-fetcher-0"
TEST_TIMEOUT_S = 10
FAST = NetworkClientConfig(connection_setup_timeout_ms=2000, reconnect_backoff_ms=10, reconnect_backoff_max_ms=50,
                           request_timeout_ms=2000)
TOPIC = "inter-broker"


def _api_versions() -> ApiMessage:
    return ApiVersionsRequest[3](client_software_name="minikafka", client_software_version="0")


def _heartbeat(broker_epoch: int) -> ApiMessage:
    return BrokerHeartbeatRequest(broker_id=1, broker_epoch=broker_epoch, current_metadata_offset=0,
                                  want_fence=False, want_shut_down=False, offline_log_dirs=[])


# ---- a real broker ---------------------------------------------------------------------------------------------


async def _start_broker(nursery: trio.Nursery, data_dir: Path) -> BrokerServer:
    config = BrokerConfig({"node.id": str(NODE), "listeners": f"PLAINTEXT://{LOOPBACK}:0",
                           "log.dirs": str(data_dir)})
    return await start_broker_with_topic(nursery, config, TOPIC, 2)


async def test_api_versions_and_metadata_round_trips_with_a_broker(tmp_path: Path) -> None:
    with trio.fail_after(TEST_TIMEOUT_S):
        async with trio.open_nursery() as nursery:
            server = await _start_broker(nursery, tmp_path / "data")
            host, port = server.bound_addresses[0]
            async with NetworkClient.open(NODE, host, port, CLIENT_ID, FAST) as client:
                versions = await client.send(_api_versions())
                legacy = await client.send(ApiVersionsRequest[0]())
                metadata = await client.send(MetadataRequest[12](
                    topics=[MetadataRequest.MetadataRequestTopic(name=TOPIC)], allow_auto_topic_creation=False))
                old_metadata = await client.send(MetadataRequest(topics=None), version=1)
            server.stop()
    assert versions.error_code == 0 and legacy.error_code == 0
    assert ApiKey.FETCH in {entry.api_key for entry in versions.api_keys}
    assert [t.name for t in metadata.topics] == [TOPIC]
    assert sorted(p.partition_index for p in metadata.topics[0].partitions) == [0, 1]
    assert [b.node_id for b in metadata.brokers] == [NODE] == [b.node_id for b in old_metadata.brokers]


async def test_requests_in_flight_together_are_each_answered_with_their_own_response(tmp_path: Path) -> None:
    results: dict[int, ApiMessage] = {}
    with trio.fail_after(TEST_TIMEOUT_S):
        async with trio.open_nursery() as nursery:
            server = await _start_broker(nursery, tmp_path / "data")
            async with NetworkClient.open(NODE, *server.bound_addresses[0], CLIENT_ID, FAST) as client:

                async def ask(index: int) -> None:
                    request = _api_versions() if index % 2 else MetadataRequest[12](
                        topics=[MetadataRequest.MetadataRequestTopic(name=TOPIC)], allow_auto_topic_creation=False)
                    results[index] = await client.send(request)

                async with trio.open_nursery() as requests:
                    for index in range(8):
                        requests.start_soon(ask, index)
            server.stop()
    assert sorted(results) == list(range(8))
    for index, response in results.items():
        if index % 2:
            assert isinstance(response, ApiVersionsResponse) and response.error_code == 0
        else:
            assert [t.name for t in response.topics] == [TOPIC]


# ---- small listeners for the failure cases ---------------------------------------------------------------------

Behaviour = Callable[["FakeNode", trio.SocketStream, list[bytes]], Awaitable[None]]


class FakeNode:
    """A listener that hands each connection's request frames, as they accumulate, to a behaviour; it counts the
    connections it saw end."""

    def __init__(self, behaviour: Behaviour) -> None:
        self.behaviour = behaviour
        self.headers: list[RequestHeader] = []
        self.connections_ended = 0
        self.connection_ended = trio.Event()

    async def serve(self, port: int = 0, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(port, host=LOOPBACK)
        task_status.started(listeners[0].socket.getsockname()[1])
        await trio.serve_listeners(self._handle, listeners)

    async def _handle(self, stream: trio.SocketStream) -> None:
        decoder = FrameDecoder(1 << 20)
        received: list[bytes] = []
        try:
            async with stream:
                while data := await stream.receive_some(1 << 16):
                    for frame in decoder.feed(data):
                        self.headers.append(RequestHeader.parse(frame)[0])
                        received.append(frame)
                    await self.behaviour(self, stream, received)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            self.connections_ended += 1
            self.connection_ended.set()


def _answer(frame: bytes, correlation_shift: int = 0) -> bytes:
    header, pos = RequestHeader.parse(frame)
    if header.api_key == ApiKey.API_VERSIONS:
        schema = SCHEMAS[header.api_key]
        response: ApiMessage = ApiVersionsResponse(error_code=0, api_keys=[], throttle_time_ms=0)
    else:
        schema = CONTROL_PLANE_SCHEMAS[header.api_key]
        request = decode_request(schema, header, frame, pos)
        response = BrokerHeartbeatResponse(throttle_time_ms=0, error_code=0, is_caught_up=True,
                                           is_fenced=request.broker_epoch < 0, should_shut_down=False)
    return encode_response(schema, header.api_version, header.correlation_id + correlation_shift, response)


async def answer_each(node: FakeNode, stream: trio.SocketStream, received: list[bytes]) -> None:
    while received:
        await stream.send_all(_answer(received.pop(0)))


def answer_once_together(count: int) -> Behaviour:
    """Answers nothing until `count` requests are in flight, then all of them, in order, in one write."""

    async def behaviour(node: FakeNode, stream: trio.SocketStream, received: list[bytes]) -> None:
        if len(received) >= count:
            await stream.send_all(b"".join(_answer(frame) for frame in received))
            received.clear()

    return behaviour


async def never_answer(node: FakeNode, stream: trio.SocketStream, received: list[bytes]) -> None:
    received.clear()


def close_after(count: int) -> Behaviour:
    async def behaviour(node: FakeNode, stream: trio.SocketStream, received: list[bytes]) -> None:
        if len(received) >= count:
            await stream.aclose()

    return behaviour


async def answer_with_a_wrong_correlation_id(node: FakeNode, stream: trio.SocketStream,
                                             received: list[bytes]) -> None:
    while received:
        await stream.send_all(_answer(received.pop(0), correlation_shift=1000))


async def test_pipelined_requests_share_one_connection_and_keep_their_order() -> None:
    node = FakeNode(answer_once_together(3))
    results: dict[int, ApiMessage] = {}
    with trio.fail_after(TEST_TIMEOUT_S):
        async with trio.open_nursery() as nursery:
            port = await nursery.start(node.serve)
            async with NetworkClient.open(NODE, LOOPBACK, port, CLIENT_ID, FAST) as client:

                async def heartbeat(epoch: int) -> None:
                    results[epoch] = await client.send(_heartbeat(epoch), version=1)

                async with trio.open_nursery() as requests:
                    for epoch in (-1, 5, -7):
                        requests.start_soon(heartbeat, epoch)
            nursery.cancel_scope.cancel()
    assert {epoch: response.is_fenced for epoch, response in results.items()} == {-1: True, 5: False, -7: True}
    assert all(isinstance(response, BrokerHeartbeatResponse) for response in results.values())
    assert len({h.correlation_id for h in node.headers}) == 3
    assert {h.client_id for h in node.headers} == {CLIENT_ID}
    assert node.connections_ended == 1


async def test_a_request_timeout_fails_every_request_in_flight_and_closes_the_connection() -> None:
    node = FakeNode(never_answer)
    config = NetworkClientConfig(request_timeout_ms=200)
    failures: list[DisconnectedError] = []
    with trio.fail_after(TEST_TIMEOUT_S):
        async with trio.open_nursery() as nursery:
            port = await nursery.start(node.serve)
            async with NetworkClient.open(NODE, LOOPBACK, port, CLIENT_ID, config) as client:

                async def ask() -> None:
                    with pytest.raises(DisconnectedError) as failure:
                        await client.send(_api_versions())
                    failures.append(failure.value)

                async with trio.open_nursery() as requests:
                    for _ in range(2):
                        requests.start_soon(ask)
                assert not client.connected
                await node.connection_ended.wait()
            nursery.cancel_scope.cancel()
    assert len(failures) == 2 and all("timed out" in str(failure) for failure in failures)
    assert len(node.headers) == 2 and node.connections_ended == 1


async def test_the_node_closing_the_connection_fails_the_requests_in_flight() -> None:
    node = FakeNode(close_after(2))
    failures: list[DisconnectedError] = []
    with trio.fail_after(TEST_TIMEOUT_S):
        async with trio.open_nursery() as nursery:
            port = await nursery.start(node.serve)
            async with NetworkClient.open(NODE, LOOPBACK, port, CLIENT_ID, FAST) as client:

                async def ask() -> None:
                    with pytest.raises(DisconnectedError) as failure:
                        await client.send(_api_versions())
                    failures.append(failure.value)

                async with trio.open_nursery() as requests:
                    for _ in range(2):
                        requests.start_soon(ask)
                assert not client.connected
            nursery.cancel_scope.cancel()
    assert len(failures) == 2 and all("closed the connection" in str(failure) for failure in failures)


async def test_reconnects_with_backoff_once_the_node_is_back() -> None:
    config = NetworkClientConfig(reconnect_backoff_ms=100, reconnect_backoff_max_ms=1000, request_timeout_ms=2000)
    with trio.fail_after(TEST_TIMEOUT_S):
        async with trio.open_nursery() as outer:
            first = FakeNode(answer_each)
            async with trio.open_nursery() as serving:
                port = await serving.start(first.serve)
                client = NetworkClient(NODE, LOOPBACK, port, CLIENT_ID, config)
                await outer.start(client.run)
                assert (await client.send(_api_versions())).error_code == 0
                serving.cancel_scope.cancel()
            await first.connection_ended.wait()

            # the node is down: the reader saw the connection end, and connecting is refused, each failure
            # doubling the wait before the next attempt
            attempts = []
            for _ in range(2):
                start = trio.current_time()
                with pytest.raises(DisconnectedError, match="cannot connect"):
                    await client.send(_api_versions())
                attempts.append(trio.current_time() - start)
            assert attempts[0] >= 0.1 * 0.8 and attempts[1] >= 0.2 * 0.8

            second = FakeNode(answer_each)
            await outer.start(second.serve, port)
            assert (await client.send(_api_versions())).error_code == 0
            assert client.connected and len(second.headers) == 1
            await client.aclose()
            with pytest.raises(DisconnectedError, match="closed"):
                await client.send(_api_versions())
            outer.cancel_scope.cancel()


async def test_a_cut_link_fails_requests_as_if_the_node_were_unreachable() -> None:
    node = FakeNode(answer_each)
    cut: set[int] = set()
    with trio.fail_after(TEST_TIMEOUT_S):
        async with trio.open_nursery() as nursery:
            port = await nursery.start(node.serve)
            async with NetworkClient.open(NODE, LOOPBACK, port, CLIENT_ID, FAST, link_is_cut=cut.__contains__) \
                    as client:
                assert (await client.send(_api_versions())).error_code == 0
                cut.add(NODE)
                for _ in range(2):
                    with pytest.raises(DisconnectedError, match="link"):
                        await client.send(_api_versions())
                assert not client.connected
                await node.connection_ended.wait()
                cut.clear()
                assert (await client.send(_api_versions())).error_code == 0
            nursery.cancel_scope.cancel()
    assert len(node.headers) == 2 and node.connections_ended == 2


async def test_a_response_with_another_correlation_id_is_an_error() -> None:
    node = FakeNode(answer_with_a_wrong_correlation_id)
    with trio.fail_after(TEST_TIMEOUT_S):
        async with trio.open_nursery() as nursery:
            port = await nursery.start(node.serve)
            async with NetworkClient.open(NODE, LOOPBACK, port, CLIENT_ID, FAST) as client:
                with pytest.raises(DisconnectedError, match="correlation id"):
                    await client.send(_api_versions())
                assert not client.connected
            nursery.cancel_scope.cancel()


async def test_sending_before_run_is_a_programming_error() -> None:
    client = NetworkClient(NODE, LOOPBACK, 9, CLIENT_ID)
    with pytest.raises(RuntimeError, match="run"):
        await client.send(_api_versions())
