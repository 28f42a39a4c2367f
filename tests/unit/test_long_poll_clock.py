"""A parked Fetch waits on trio's clock: under trio.testing.MockClock a long poll of minutes takes no real time.

The broker runs in the test's own trio loop (as `minikafka serve` runs it, on a loopback port the OS picks), so
the autojump clock drives its purgatory: when every task waits, the clock jumps to the next deadline.
"""
from __future__ import annotations

import time
from pathlib import Path

import trio
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.consumer.fetch import FetchRequest, FetchResponse
from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse

from minikafka.broker.server.broker_server import BrokerServer
from minikafka.config import BrokerConfig
from tests.node_support import start_broker_with_topic
from tests.raw_client import record_batch

TOPIC = "long-poll"
FIVE_MINUTES_MS = 5 * 60 * 1000
AN_HOUR_MS = 60 * 60 * 1000
REAL_TIME_BUDGET_S = 30.0  # far below the waits the tests ask for: those must pass on the mock clock


class _Connection:
    """Requests over one trio stream, answered in order."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self._stream = stream
        self._buffer = bytearray()
        self._correlation = 0

    async def request(self, request: ApiMessage, response_class: type[ApiMessage]) -> ApiMessage:
        self._correlation += 1
        request.with_header(correlation_id=self._correlation, client_id="long-poll-test")
        await self._stream.send_all(request.encode(header=True, framed=True))
        size = int.from_bytes(await self._receive_exactly(4), "big")
        response = response_class.decode(await self._receive_exactly(size), version=request.API_VERSION, header=True)
        assert response.header.correlation_id == self._correlation
        return response

    async def _receive_exactly(self, count: int) -> bytes:
        while len(self._buffer) < count:  # bounded: every pass receives at least one byte or fails
            data = await self._stream.receive_some(1 << 16)
            assert data, "the broker closed the connection"
            self._buffer += data
        out = bytes(self._buffer[:count])
        del self._buffer[:count]
        return out


def _fetch(offset: int, max_wait_ms: int) -> ApiMessage:
    R = FetchRequest[12]
    partition = R.FetchTopic.FetchPartition(partition=0, current_leader_epoch=-1, fetch_offset=offset,
                                            last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1 << 20)
    return R(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
             session_id=0, session_epoch=-1, topics=[R.FetchTopic(topic=TOPIC, partitions=[partition])],
             forgotten_topics_data=[], rack_id="")


def _produce(value: bytes) -> ApiMessage:
    R = ProduceRequest[9]
    data = R.TopicProduceData(name=TOPIC, partition_data=[
        R.TopicProduceData.PartitionProduceData(index=0, records=record_batch([value]))])
    return R(transactional_id=None, acks=1, timeout_ms=10_000, topic_data=[data])


async def _start_broker(nursery: trio.Nursery, data_dir: Path) -> BrokerServer:
    config = BrokerConfig({"node.id": "1", "listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(data_dir)})
    return await start_broker_with_topic(nursery, config, TOPIC, 1)


async def _until_parked(server: BrokerServer) -> None:
    """Until one request waits in the purgatory (at most 10 s of the mock clock, polled every millisecond): the
    purgatory has no event for a request arriving, only for keys changing."""
    with trio.fail_after(10):
        while server.purgatory.delayed_operations < 1:  # noqa: ASYNC110 - a bounded poll of an observable state
            await trio.sleep(0.001)


async def test_a_parked_fetch_waits_max_wait_on_trios_clock(autojump_clock, tmp_path: Path) -> None:
    real_start = time.monotonic()
    async with trio.open_nursery() as nursery:
        server = await _start_broker(nursery, tmp_path / "data")
        async with await trio.open_tcp_stream(*server.bound_addresses[0]) as stream:
            start = trio.current_time()
            with trio.fail_after(FIVE_MINUTES_MS / 1000 + 60):  # a wait on another clock would overrun this one
                response = await _Connection(stream).request(_fetch(0, FIVE_MINUTES_MS), FetchResponse)
            waited = trio.current_time() - start
        server.stop()
    part = response.responses[0].partitions[0]
    assert part.error_code == 0 and not part.records
    assert waited >= FIVE_MINUTES_MS / 1000
    assert time.monotonic() - real_start < REAL_TIME_BUDGET_S


async def test_a_parked_fetch_completes_when_records_arrive(autojump_clock, tmp_path: Path) -> None:
    real_start = time.monotonic()
    outcome: dict[str, object] = {}
    async with trio.open_nursery() as nursery:
        server = await _start_broker(nursery, tmp_path / "data")
        address = server.bound_addresses[0]

        async def long_poll() -> None:
            async with await trio.open_tcp_stream(*address) as stream:
                start = trio.current_time()
                outcome["response"] = await _Connection(stream).request(_fetch(0, AN_HOUR_MS), FetchResponse)
                outcome["waited"] = trio.current_time() - start

        async with trio.open_nursery() as polls:
            polls.start_soon(long_poll)
            await _until_parked(server)
            async with await trio.open_tcp_stream(*address) as stream:
                produced = await _Connection(stream).request(_produce(b"wake"), ProduceResponse)
        server.stop()
    assert produced.responses[0].partition_responses[0].error_code == 0
    part = outcome["response"].responses[0].partitions[0]  # type: ignore[attr-defined]
    assert part.error_code == 0 and b"wake" in part.records
    assert outcome["waited"] < AN_HOUR_MS / 1000  # type: ignore[operator]
    assert server.purgatory.delayed_operations == 0
    assert time.monotonic() - real_start < REAL_TIME_BUDGET_S
