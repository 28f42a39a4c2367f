"""Connections from this broker to the other brokers (and itself) on the inter-broker listener, opened on first
use and kept: what Kafka's inter-broker send threads (TransactionMarkerChannelManager, AddPartitionsToTxnManager)
each hold. Every connection's reader runs in the nursery of `run()`, so cancelling it closes them all."""
from __future__ import annotations

from collections.abc import Callable

import trio

from minikafka.broker.network.network_client import LinkIsCut, NetworkClient, NetworkClientConfig

# Where a live broker listens on the inter-broker listener, as the metadata says; None for one it has no endpoint of.
EndpointOf = Callable[[int], "tuple[str, int] | None"]


class BrokerClients:
    def __init__(self, client_id: str, endpoint_of: EndpointOf, config: NetworkClientConfig | None = None,
                 link_is_cut: LinkIsCut | None = None) -> None:
        self.client_id = client_id
        self._endpoint_of = endpoint_of
        self._config = config
        self._link_is_cut = link_is_cut
        self._clients: dict[int, tuple[NetworkClient, trio.Event]] = {}  # the event: the client's run() started
        self._nursery: trio.Nursery | None = None

    async def run(self, *, task_status: trio.TaskStatus = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            try:
                await trio.sleep_forever()
            finally:
                self._nursery = None
                for client, _ready in self._clients.values():
                    await client.aclose()

    async def get(self, broker_id: int) -> NetworkClient | None:
        """The connection to a live broker; None for one the metadata has no endpoint of, or after shutdown."""
        known = self._clients.get(broker_id)
        if known is None:
            endpoint = self._endpoint_of(broker_id)
            if endpoint is None or self._nursery is None:
                return None
            client = NetworkClient(broker_id, *endpoint, self.client_id, self._config, self._link_is_cut)
            known = self._clients[broker_id] = (client, trio.Event())
            await self._nursery.start(client.run)
            known[1].set()
        if not known[1].is_set():  # no turn of the scheduler on the way to a connection that runs
            await known[1].wait()
        return known[0]
