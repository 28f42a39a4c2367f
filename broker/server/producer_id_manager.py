"""Producer ids for InitProducerId, from blocks the controller hands out (Kafka's RPCProducerIdManager).

The controller owns the producer-id space and gives each broker a block at a time through AllocateProducerIds,
recorded in the metadata log, so no id is ever handed out twice across brokers or restarts. The broker asks for
the next block once 90% of the current one is used, so a producer rarely waits for one.
"""
from __future__ import annotations

import logging
from collections.abc import Callable

import trio

from minikafka.broker.network.controller_channel import ControllerChannel
from minikafka.broker.network.network_client import DisconnectedError
from minikafka.protocol.control_plane import AllocateProducerIdsRequest
from minikafka.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger("minikafka.producer_id_manager")

ALLOCATE_PRODUCER_IDS_VERSION = 0
PREFETCH_RATIO = 0.9


class ProducerIdManager:
    def __init__(self, node_id: int, channel: ControllerChannel, broker_epoch: Callable[[], int]) -> None:
        self._node_id = node_id
        self._channel = channel
        self._broker_epoch = broker_epoch
        self._next = 0
        self._end = 0  # the current block is [_next, _end)
        self._prefetch_at = 0
        self._pending: tuple[int, int] | None = None  # the next block, fetched ahead
        self._lock = trio.Lock()  # one AllocateProducerIds in flight
        self._prefetch_wanted = trio.Event()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Fetch the next block ahead whenever the current one runs low, until cancelled."""
        task_status.started()
        while True:
            await self._prefetch_wanted.wait()
            self._prefetch_wanted = trio.Event()
            await self._fetch_block()

    async def generate_producer_id(self) -> int:
        """The next unused producer id; COORDINATOR_LOAD_IN_PROGRESS (which clients retry) when no block could be
        obtained from the controller."""
        if self._next >= self._end:
            if self._pending is None:
                await self._fetch_block()
            if self._pending is None:
                raise KafkaError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, "no producer id block from the controller")
            self._next, self._end = self._pending
            self._prefetch_at = self._next + int((self._end - self._next) * PREFETCH_RATIO)
            self._pending = None
        producer_id = self._next
        self._next += 1
        if self._next >= self._prefetch_at and self._pending is None:
            self._prefetch_wanted.set()
        return producer_id

    async def _fetch_block(self) -> None:
        async with self._lock:
            if self._pending is not None:
                return
            request = AllocateProducerIdsRequest(broker_id=self._node_id, broker_epoch=self._broker_epoch())
            try:
                response = await self._channel.send(request, ALLOCATE_PRODUCER_IDS_VERSION)
            except DisconnectedError as exc:
                log.warning("no producer id block: %s", exc)
                return
            if response.error_code != ErrorCode.NONE:
                log.warning("no producer id block: the controller answered %s", ErrorCode(response.error_code).name)
                return
            start, length = response.producer_id_start, response.producer_id_len
            log.info("producer id block [%d, %d) from the controller", start, start + length)
            self._pending = (start, start + length)
