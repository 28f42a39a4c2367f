"""A waiting request notices its client going: a close, a close behind a pipelined request (left unread), a reset;
otherwise the wait's own result or error comes out as it is."""
from __future__ import annotations

import select
import socket
import struct

import pytest
import trio
import trio.testing

from minikafka.broker.network.client_disconnect import ClientGone, unless_client_disconnects

LOOPBACK = "127.0.0.1"


async def connected_pair() -> tuple[trio.SocketStream, trio.SocketStream]:
    """(the server's end, the client's end) of a loopback TCP connection."""
    listener = (await trio.open_tcp_listeners(0, host=LOOPBACK))[0]
    async with listener:
        client = await trio.open_tcp_stream(LOOPBACK, listener.socket.getsockname()[1])
        server = await listener.accept()
    return server, client


async def test_the_wait_result_comes_out_while_the_client_stays():
    server, client = await connected_pair()
    async with server, client:
        done = trio.Event()

        async def wait() -> str:
            await done.wait()
            return "answered"

        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.send_all, b"next request")  # pipelined: the client is still there
            results = []

            async def run() -> None:
                results.append(await unless_client_disconnects(server, wait))

            nursery.start_soon(run)
            await trio.testing.wait_all_tasks_blocked()
            done.set()
        assert results == ["answered"]
        assert await server.receive_some(100) == b"next request"  # left for the server to read


async def test_an_error_of_the_wait_comes_out_unwrapped():
    server, client = await connected_pair()
    async with server, client:
        async def wait() -> None:
            raise KeyError("from the request")

        with pytest.raises(KeyError, match="from the request"):
            await unless_client_disconnects(server, wait)


@pytest.mark.parametrize("leaving", ["closes", "resets", "closes behind a pipelined request"])
async def test_the_wait_ends_with_client_gone_when_the_client_goes(leaving):
    if leaving == "closes behind a pipelined request" and not hasattr(select, "epoll"):
        pytest.skip("only epoll tells a close behind unread bytes")
    server, client = await connected_pair()
    async with server:
        cancelled = []

        async def wait() -> None:
            try:
                await trio.sleep_forever()
            finally:
                cancelled.append(True)

        async def leave() -> None:
            await trio.testing.wait_all_tasks_blocked()
            if leaving == "closes behind a pipelined request":
                await client.send_all(b"next request")
                await trio.testing.wait_all_tasks_blocked()
            elif leaving == "resets":
                client.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            await client.aclose()

        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(leave)
                with pytest.raises(ClientGone):
                    await unless_client_disconnects(server, wait)
        assert cancelled == [True]


async def test_a_connection_closed_here_ends_the_wait():
    server, client = await connected_pair()
    async with client:
        async with trio.open_nursery() as nursery:

            async def close_here() -> None:
                await trio.testing.wait_all_tasks_blocked()
                await server.aclose()

            nursery.start_soon(close_here)
            with trio.fail_after(10), pytest.raises(ClientGone):
                await unless_client_disconnects(server, trio.sleep_forever)
