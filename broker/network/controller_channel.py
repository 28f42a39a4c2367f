"""How a broker reaches its controller (Kafka's NodeToControllerChannelManager): one small protocol, two transports.

A broker-only node sends its control-plane and forwarded requests over the network to the controller named by
controller.quorum.voters or controller.quorum.bootstrap.servers; a combined node hands them to its in-process
controller directly, with no socket. Callers see the same `send(request, version) -> response` either way.

Over the network a request that cannot be delivered (the controller is down, restarting, or cut off) is retried
after a backoff, on the next controller address in turn, until the channel's deadline; only then does the caller
see DisconnectedError. A response that came back is never resent: the controller may have acted on the request.
A cut link (fault injection) fails each attempt before it is sent but leaves the connection open and silent, as a
network partition does: the controller then fences the broker when its session runs out, not at once as it does
when a broker's connection closes.
"""
from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

import trio
from kafka.protocol.api_message import ApiMessage

from minikafka.broker.clock.broker_clock import fail_at_real, move_on_at_real, real_time
from minikafka.broker.network.network_client import DisconnectedError, LinkIsCut, NetworkClient, NetworkClientConfig
from minikafka.config import ControllerAddress

log = logging.getLogger("minikafka.controller_channel")

# What a combined node's broker calls: ControllerApis.handle(request, version, peer) of the in-process controller,
# with no peer connection.
ControllerHandler = Callable[[ApiMessage, int, None], Awaitable[ApiMessage]]


class ControllerChannel(Protocol):
    """How a broker reaches its controller (over the network, or in-process in a combined node)."""

    async def send(self, request: ApiMessage, version: int | None = None) -> ApiMessage: ...


class NetworkControllerChannel:
    """Requests to the controller over one connection at a time; its owner runs `run()` in a nursery.

    `retry_timeout_ms` bounds how long one `send` keeps trying to deliver its request; `client_id` names this
    channel in the controller's logs (e.g. `broker-2-heartbeat`).
    """

    def __init__(self, addresses: Sequence[ControllerAddress], client_id: str, config: NetworkClientConfig,
                 retry_timeout_ms: int, link_is_cut: LinkIsCut | None = None) -> None:
        if not addresses:
            raise ValueError("a controller channel needs at least one controller address")
        self._clients = [NetworkClient(a.node_id, a.host, a.port, client_id, config) for a in addresses]
        self._link_is_cut = link_is_cut
        self._current = 0
        self._retry_timeout_s = retry_timeout_ms / 1000
        self._config = config

    def __repr__(self) -> str:
        client = self._clients[self._current]
        return f"NetworkControllerChannel({client.host}:{client.port}, {client.client_id})"

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the connections' readers until cancelled."""
        async with trio.open_nursery() as nursery:
            for client in self._clients:
                await nursery.start(client.run)
            task_status.started()

    async def aclose(self) -> None:
        for client in self._clients:
            await client.aclose()

    async def send(self, request: ApiMessage, version: int | None = None) -> ApiMessage:
        deadline = real_time() + self._retry_timeout_s  # liveness: real time (see minikafka.broker.clock)
        failures = 0
        while True:
            client = self._clients[self._current]
            try:
                self._check_link(client)
                with fail_at_real(deadline):
                    response = await client.send(request, version)
            except (DisconnectedError, trio.TooSlowError) as exc:
                failures += 1
                if real_time() >= deadline:
                    raise DisconnectedError(f"no controller reachable at {self._addresses()} within "
                                            f"{self._retry_timeout_s:.1f} s: {exc}") from None
                log.debug("%r: %s; trying again", self, exc)
                self._current = (self._current + 1) % len(self._clients)
                with move_on_at_real(deadline):
                    await trio.sleep(self._config.reconnect_backoff_s(failures))
            else:
                self._check_link(client)  # a response that came after the cut is lost with it (and not resent)
                return response

    def _check_link(self, client: NetworkClient) -> None:
        if self._link_is_cut is not None and self._link_is_cut(client.node_id):
            raise DisconnectedError(f"the link to the controller at {client.host}:{client.port} is cut")

    def _addresses(self) -> str:
        return ", ".join(f"{c.host}:{c.port}" for c in self._clients)


class LocalControllerChannel:
    """A combined node's path to its own controller: the request object goes in, the response object comes out."""

    def __init__(self, handle: ControllerHandler) -> None:
        self._handle = handle

    async def send(self, request: ApiMessage, version: int | None = None) -> ApiMessage:
        version = request.API_VERSION if version is None else version
        if version is None:
            raise ValueError(f"{type(request).__name__} has no version to send at")
        return await self._handle(request, version, None)
