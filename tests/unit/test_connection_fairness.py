"""SocketServer keeps one connection from taking the loop: pipelined requests take turns with other connections,
and a connection whose client does not read its responses stops being answered (muted) until it reads, then gets
every response in order."""
from __future__ import annotations

import trio
import trio.testing

from minikafka.broker.network.socket_server import ConnectionInfo, SocketServer
from minikafka.protocol.framing import FrameDecoder, frame

LOOPBACK = "127.0.0.1"


async def serve(nursery: trio.Nursery, server: SocketServer) -> int:
    listeners = await trio.open_tcp_listeners(0, host=LOOPBACK)
    nursery.start_soon(server.serve, "PLAINTEXT", listeners)
    return listeners[0].socket.getsockname()[1]


async def test_a_request_from_another_connection_is_answered_between_pipelined_requests():
    answered: list[bytes] = []
    first_taken = trio.Event()

    async def process(request: bytes, _info: ConnectionInfo) -> bytes:
        answered.append(request)
        first_taken.set()
        return frame(request)

    server = SocketServer(process, 1 << 20, 60)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            port = await serve(nursery, server)
            pipelining = await trio.open_tcp_stream(LOOPBACK, port)
            other = await trio.open_tcp_stream(LOOPBACK, port)
            try:
                await pipelining.send_all(b"".join(frame(b"p%d" % i) for i in range(2000)))
                await first_taken.wait()
                await other.send_all(frame(b"other"))
                decoder = FrameDecoder(1 << 20)
                while not (frames := decoder.feed(await other.receive_some(1 << 16))):
                    pass
                assert frames == [b"other"]
                assert answered.index(b"other") < 100, "the other connection waited behind the pipelined requests"
                nursery.cancel_scope.cancel()
            finally:
                await pipelining.aclose()
                await other.aclose()


async def test_a_connection_that_does_not_read_is_muted_then_answered_in_order_once_it_reads():
    count, size = 1000, 1 << 16
    taken: list[int] = []

    async def process(request: bytes, _info: ConnectionInfo) -> bytes:
        taken.append(int(request))
        return frame(request, b"x" * size)

    server = SocketServer(process, 1 << 20, 60)
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            port = await serve(nursery, server)
            client = await trio.open_tcp_stream(LOOPBACK, port)
            try:
                await client.send_all(b"".join(frame(b"%d" % i) for i in range(count)))
                await trio.testing.wait_all_tasks_blocked()
                # The socket buffers hold a few MB of the 64 MB of responses: the broker waits for the client.
                assert 0 < len(taken) < count // 2
                decoder = FrameDecoder(1 << 20)
                received: list[int] = []
                while len(received) < count:
                    received += [int(response[:-size]) for response in decoder.feed(await client.receive_some(1 << 20))]
                assert received == list(range(count)) == taken
                nursery.cancel_scope.cancel()
            finally:
                await client.aclose()
