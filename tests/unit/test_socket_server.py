"""SocketServer's structured shutdown: drain() stops accepting, lets the requests taken be answered, and is bounded."""
import pytest
import trio
import trio.testing

from minikafka.broker.network.socket_server import SocketServer
from minikafka.protocol.framing import FrameDecoder, frame

LOOPBACK = "127.0.0.1"


class Echo:
    """Answers each request with its own bytes, once `release` is set; `taken` is set when a request arrives."""

    def __init__(self) -> None:
        self.taken = trio.Event()
        self.release = trio.Event()

    async def process(self, request: bytes, _info) -> bytes:
        self.taken.set()
        await self.release.wait()
        return frame(request)


async def _serve(nursery: trio.Nursery, server: SocketServer) -> int:
    listeners = await trio.open_tcp_listeners(0, host=LOOPBACK)
    nursery.start_soon(server.serve, "PLAINTEXT", listeners)
    return listeners[0].socket.getsockname()[1]


async def _read_frame(stream: trio.SocketStream) -> bytes | None:
    decoder = FrameDecoder(1 << 20)
    while data := await stream.receive_some(1 << 16):
        frames = decoder.feed(data)
        if frames:
            return frames[0]
    return None


async def test_drain_stops_accepting_and_waits_for_the_request_taken_to_be_answered():
    echo = Echo()
    server = SocketServer(echo.process, 1 << 20, 60)
    drained = trio.Event()

    async def drain() -> None:
        await server.drain(30)
        drained.set()

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            port = await _serve(nursery, server)
            client = await trio.open_tcp_stream(LOOPBACK, port)
            try:
                await client.send_all(frame(b"\x00\x01in flight"))
                await echo.taken.wait()
                nursery.start_soon(drain)
                await trio.testing.wait_all_tasks_blocked()
                assert server.draining and not drained.is_set()
                with pytest.raises(OSError):
                    await trio.open_tcp_stream(LOOPBACK, port)
                echo.release.set()
                await drained.wait()
                assert await _read_frame(client) == b"\x00\x01in flight"
                nursery.cancel_scope.cancel()
            finally:
                await client.aclose()


async def test_drain_with_nothing_in_flight_returns_at_once_and_new_requests_close_their_connection():
    echo = Echo()
    echo.release.set()
    server = SocketServer(echo.process, 1 << 20, 60)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            port = await _serve(nursery, server)
            client = await trio.open_tcp_stream(LOOPBACK, port)
            try:
                await server.drain(30)
                await client.send_all(frame(b"after drain"))
                assert await _read_frame(client) is None
                assert not echo.taken.is_set()
                nursery.cancel_scope.cancel()
            finally:
                await client.aclose()


async def test_drain_gives_up_on_a_request_that_never_ends_after_its_timeout():
    echo = Echo()  # never released
    server = SocketServer(echo.process, 1 << 20, 60)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            port = await _serve(nursery, server)
            client = await trio.open_tcp_stream(LOOPBACK, port)
            try:
                await client.send_all(frame(b"stuck"))
                await echo.taken.wait()
                started = trio.current_time()
                await server.drain(0.2)
                assert 0.2 <= trio.current_time() - started < 5
                nursery.cancel_scope.cancel()
            finally:
                await client.aclose()
