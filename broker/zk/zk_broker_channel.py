"""A ZooKeeper-mode broker's channel to the controller: to whichever broker the latest UpdateMetadata named.

The controller is another broker's inter-broker listener, or the controller running in this very broker, which
then gets the request in process. A request answered NOT_CONTROLLER, or that could not be delivered, waits for
the next UpdateMetadata (a new controller announces itself with one) and goes again, until the channel's
deadline; only then does the caller see DisconnectedError. As over KRaft's channel, a response that came back is
never resent unless it says the receiver was not the controller (which then did nothing).
"""
from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import trio
from kafka.protocol.api_message import ApiMessage

from minikafka.broker.network.network_client import DisconnectedError, LinkIsCut, NetworkClient, NetworkClientConfig
from minikafka.broker.network.socket_server import ConnectionInfo
from minikafka.protocol.errors import ErrorCode

log = logging.getLogger("minikafka.zk_broker_channel")

# The controller in this broker's process: KafkaController.apis.handle, or None while it is not running.
LocalController = Callable[[], Callable[[ApiMessage, int, ConnectionInfo | None], Awaitable[ApiMessage]] | None]
# The active controller's id as last announced and its inter-broker address, if known.
ControllerAddress = Callable[[], tuple[int, tuple[str, int] | None] | None]
ENTRY_LISTS = ("topics", "results", "responses")  # where admin responses keep their per-entity errors


def not_controller(response: Any) -> bool:
    """Whether the receiver answered as a broker that is not (or no longer) the controller."""
    if getattr(response, "error_code", None) == ErrorCode.NOT_CONTROLLER:
        return True
    for name in ENTRY_LISTS:
        entries = getattr(response, name, None)
        if isinstance(entries, list) and entries:
            return all(getattr(e, "error_code", None) == ErrorCode.NOT_CONTROLLER for e in entries)
    return False


class ZkControllerChannel:
    def __init__(self, node_id: int, controller: ControllerAddress, local: LocalController,
                 metadata_changed: Callable[[], Awaitable[None]], config: NetworkClientConfig,
                 retry_timeout_ms: int, link_is_cut: LinkIsCut | None = None) -> None:
        self._node_id = node_id
        self._controller = controller
        self._local = local
        self._metadata_changed = metadata_changed
        self._config = config
        self._retry_timeout_s = retry_timeout_ms / 1000
        self._link_is_cut = link_is_cut
        self._clients: dict[int, NetworkClient] = {}
        self._nursery: trio.Nursery | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Hold the connections to controllers until cancelled."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            await trio.sleep_forever()

    async def send(self, request: ApiMessage, version: int | None = None) -> ApiMessage:
        version = request.API_VERSION if version is None else version
        if version is None:
            raise ValueError(f"{type(request).__name__} has no version to send at")
        deadline = trio.current_time() + self._retry_timeout_s
        problem = "no controller known yet"
        while True:
            with trio.move_on_at(deadline):
                try:
                    response = await self._send_once(request, version)
                except DisconnectedError as exc:
                    problem = str(exc)
                else:
                    if not not_controller(response):
                        return response
                    problem = "the broker named as controller is no longer the controller"
                log.debug("%s to the controller: %s; waiting for new metadata", type(request).__name__, problem)
                await self._metadata_changed()
                continue
            raise DisconnectedError(f"no controller answered within {self._retry_timeout_s:.1f} s: {problem}")

    async def _send_once(self, request: ApiMessage, version: int) -> ApiMessage:
        known = self._controller()
        if known is None:
            raise DisconnectedError("no controller known yet")
        controller_id, address = known
        if controller_id == self._node_id:
            handle = self._local()
            if handle is None:
                raise DisconnectedError("the controller of this broker is not running")
            return await handle(request, version, None)
        if address is None:
            raise DisconnectedError(f"controller {controller_id} has no inter-broker endpoint in the metadata")
        if self._link_is_cut is not None and self._link_is_cut(controller_id):
            raise DisconnectedError(f"the link to controller {controller_id} is cut")
        client = await self._client(controller_id, *address)
        response = await client.send(request, version)
        if self._link_is_cut is not None and self._link_is_cut(controller_id):
            raise DisconnectedError(f"the link to controller {controller_id} is cut")  # the answer is lost with it
        return response

    async def _client(self, broker_id: int, host: str, port: int) -> NetworkClient:
        client = self._clients.get(broker_id)
        if client is not None and (client.host, client.port) == (host, port):
            return client
        if client is not None:  # the broker came back on another address
            await client.aclose()
        if self._nursery is None:
            raise DisconnectedError("the controller channel is not running")
        client = NetworkClient(broker_id, host, port, f"broker-{self._node_id}-to-controller", self._config)
        await self._nursery.start(client.run)
        self._clients[broker_id] = client
        return client
