"""Noticing that a client has gone while one of its requests waits (a long-poll fetch, an acks=all produce, a
JoinGroup or SyncGroup held for the rebalance), so the request is dropped and its socket released at once.

The connection is not read while a request is answered (responses go out in request order), so what the client
sends meanwhile stays in the socket. With nothing there, the socket becomes readable when the client closes or
resets it: a peek tells that from the client's next request. Once a next request is there the socket stays
readable, and where epoll is available EPOLLRDHUP still tells a close (FIN) or a reset behind those bytes, which are
left unread for the server. Elsewhere a client that pipelined a request is taken to be there until its wait ends.
A connection closed here (the control API's connections.close) ends the wait too, but once a next request is
there only when the wait ends by itself: epoll forgets a socket closed under it.
"""
from __future__ import annotations

import select
import socket
from collections.abc import Awaitable, Callable
from typing import TypeVar

import trio

T = TypeVar("T")

# Linux's "peer closed its end" event, which epoll reports whether or not unread bytes come before the close.
_PEER_CLOSED = getattr(select, "EPOLLRDHUP", None) if hasattr(select, "epoll") else None


class ClientGone(ConnectionError):
    """The client closed its connection while its request waited: there is nobody to answer."""


async def unless_client_disconnects(client: trio.SocketStream, wait: Callable[[], Awaitable[T]]) -> T:
    """The result of `wait()`, or ClientGone (with `wait()` cancelled) once `client` closes or resets its
    connection. `wait()` must be safe to cancel where it waits; what it raises comes out as it is."""
    results: list[T] = []
    errors: list[Exception] = []
    async with trio.open_nursery() as nursery:

        async def watch() -> None:
            try:
                await wait_for_disconnect(client)
            except (OSError, trio.ClosedResourceError):
                pass  # closed here: nobody to answer either
            nursery.cancel_scope.cancel()

        nursery.start_soon(watch)
        try:
            results.append(await wait())
        except Exception as exc:  # noqa: BLE001 - raised below, outside the nursery, so it is not wrapped in a group
            errors.append(exc)
        nursery.cancel_scope.cancel()
    if errors:
        raise errors[0]
    if not results:
        raise ClientGone("the client closed its connection while its request waited")
    return results[0]


async def wait_for_disconnect(client: trio.SocketStream) -> None:
    """Return once the client has closed or reset the connection, leaving unread whatever it sent before."""
    sock = client.socket
    await trio.lowlevel.wait_readable(sock)
    try:
        if not await sock.recv(1, socket.MSG_PEEK):
            return  # end of stream: the client closed its side
    except OSError:
        return  # reset
    if _PEER_CLOSED is None:
        await trio.sleep_forever()
    with select.epoll(1) as poller:
        poller.register(sock.fileno(), _PEER_CLOSED)
        await trio.lowlevel.wait_readable(poller.fileno())
