"""Admin requests that change cluster metadata go to the controller (Kafka's ForwardingManager, KIP-590).

CreateTopics, DeleteTopics, CreatePartitions, topic AlterConfigs / IncrementalAlterConfigs and ElectLeaders are
sent to the controller as the same Kafka request, and its response is relayed to the client. Before answering,
the broker catches up with the controller (a strategy of its metadata source): a KRaft broker waits (bounded) until
its own metadata image has replayed everything the controller had committed when it answered, so a client that
creates a topic and then produces to this broker finds it here; a ZooKeeper-mode controller answers only once every
live broker has its UpdateMetadata, so there is nothing to wait for. A broker that
begins to shut down stops waiting and relays the answer at once (the controller's decision stands; the broker
applies the rest when it starts again), so a large change in flight never holds a shutdown. A request the
controller could not be reached for is answered with REQUEST_TIMED_OUT in every entry, as Kafka answers a
forwarded request that timed out.
"""
from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import trio
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.metadata.api_versions import ApiVersionsRequest

from minikafka.broker.network.controller_channel import ControllerChannel
from minikafka.broker.network.network_client import DisconnectedError
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger("minikafka.forwarding")

API_VERSIONS_VERSION = 3

# Returns when waiting for this broker's metadata is no longer worth it (the broker is shutting down).
Interrupt = Callable[[], Awaitable[object]]


class ForwardingError(KafkaError):
    """The controller could not be asked, or cannot take this version of the request; `code` is the error to
    answer each entry with."""


# Waits (bounded) until this broker's metadata holds what the controller has decided so far; False if it could not.
CatchUp = Callable[[], Awaitable[bool]]


class ForwardingManager:
    def __init__(self, channel: ControllerChannel, catch_up: CatchUp) -> None:
        self._channel = channel
        self._catch_up = catch_up
        self._controller_versions: dict[int, tuple[int, int]] | None = None

    @property
    def channel(self) -> ControllerChannel:
        return self._channel

    async def forward(self, request: ApiMessage, version: int, interrupt: Interrupt | None = None) -> ApiMessage:
        """The controller's response to `request` at `version`, once this broker's metadata has caught up with it
        (or `interrupt()` has returned). Raises ForwardingError when there is no answer to relay."""
        await self._check_version(request.API_KEY, version)
        try:
            response = await self._channel.send(_encodable(request), version)
        except DisconnectedError as exc:
            log.warning("%s not forwarded: %s", type(request).__name__, exc)
            raise ForwardingError(ErrorCode.REQUEST_TIMED_OUT, str(exc)) from None
        await self.catch_up(interrupt)
        return _encodable(response)

    async def catch_up(self, interrupt: Interrupt | None = None) -> bool:
        """Wait (bounded) until this broker has replayed what the controller has committed now; False if the
        wait ran out, the controller could not be asked or `interrupt()` returned first."""
        if interrupt is None:
            return await self._catch_up()
        caught_up = False
        async with trio.open_nursery() as nursery:
            async def catching_up() -> None:
                nonlocal caught_up
                caught_up = await self._catch_up()
                nursery.cancel_scope.cancel()

            async def interrupted() -> None:
                await interrupt()
                log.info("stopped waiting for this broker's metadata to catch up with the controller")
                nursery.cancel_scope.cancel()

            nursery.start_soon(catching_up)
            nursery.start_soon(interrupted)
        return caught_up

    async def _check_version(self, api_key: int, version: int) -> None:
        """Refuse a version the controller does not serve, before sending it (the controller would close the
        connection). The controller's ranges are asked once; a controller that does not say is trusted."""
        if self._controller_versions is None:
            self._controller_versions = await self._ask_versions()
        lo, hi = self._controller_versions.get(api_key, (version, version))
        if not lo <= version <= hi:
            raise ForwardingError(ErrorCode.UNSUPPORTED_VERSION,
                                  f"the controller serves {ApiKey(api_key).api_name} v{lo}-{hi}, not v{version}")

    async def _ask_versions(self) -> dict[int, tuple[int, int]]:
        request = ApiVersionsRequest[API_VERSIONS_VERSION](client_software_name="minikafka",
                                                           client_software_version="1")
        try:
            response = await self._channel.send(request, API_VERSIONS_VERSION)
        except DisconnectedError as exc:
            raise ForwardingError(ErrorCode.REQUEST_TIMED_OUT, str(exc)) from None
        except Exception as exc:  # noqa: BLE001 - a controller that cannot say is trusted with the client's version
            log.warning("the controller did not answer ApiVersions (%r); forwarding at the clients' versions", exc)
            return {}
        if response.error_code != ErrorCode.NONE:
            return {}
        return {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}


def _encodable(message: ApiMessage) -> ApiMessage:
    """`message`, ready to be encoded again: kafka-python's decoder leaves out the (empty) header slot its
    constructor sets, and its encoder looks at that slot when it is given a version."""
    if not hasattr(message, "_header"):
        message._header = None
    return message

