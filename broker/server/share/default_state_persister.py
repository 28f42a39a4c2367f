"""The persister over the network (Kafka's DefaultStatePersister and PersisterStateManager): a share-partition
leader's state calls sent to the share coordinator that owns the share-partition, wherever it is.

Each call first finds the coordinator with FindCoordinator key type SHARE (`group:topicId:partition`, v6), asked of
this broker over the inter-broker listener, then sends the state request to that coordinator on the same listener.
The coordinator found is remembered per share-partition until it fails. As in Kafka, COORDINATOR_NOT_AVAILABLE,
COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR and UNKNOWN_TOPIC_OR_PARTITION (and here also a connection lost or a
request timed out, which a killed coordinator gives) make it look for the coordinator again after an exponential
backoff (1 s doubling to 30 s, with jitter), up to 5 attempts for the lookup and 5 for the request; then the last
error is the answer. Other errors (FENCED_STATE_EPOCH, FENCED_LEADER_EPOCH, INVALID_REQUEST...) are answered at once.
One request per call: Kafka batches the calls of one group to one coordinator; a leader here calls per partition.
"""
from __future__ import annotations

import logging
import random
from typing import Any

import trio
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest

from minikafka.broker.coordinator.share.share_coordinator import coordinator_key
from minikafka.broker.coordinator.share.share_coordinator_shard import SharePartitionKey
from minikafka.broker.network.broker_clients import BrokerClients
from minikafka.broker.network.network_client import DisconnectedError
from minikafka.broker.server.share.persister import (
    PersisterResult,
    PersisterStateBatch,
    ReadStateResult,
    ReadSummaryResult,
)
from minikafka.protocol.client_apis.share_state import (
    DeleteShareGroupStateRequest,
    InitializeShareGroupStateRequest,
    ReadShareGroupStateRequest,
    ReadShareGroupStateSummaryRequest,
    WriteShareGroupStateRequest,
)
from minikafka.protocol.errors import ErrorCode

log = logging.getLogger("minikafka.default_state_persister")

SHARE_KEY_TYPE = 2
FIND_COORDINATOR_VERSION = 6  # the first version with share coordinators
SHARE_STATE_VERSION = 0
REQUEST_BACKOFF_MS = 1_000
REQUEST_BACKOFF_MAX_MS = 30_000
MAX_ATTEMPTS = 5
RETRY_BACKOFF_EXP_BASE = 2  # CommonClientConfigs.RETRY_BACKOFF_EXP_BASE
RETRY_BACKOFF_JITTER = 0.2  # CommonClientConfigs.RETRY_BACKOFF_JITTER

_RETRIABLE = frozenset((ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                        ErrorCode.NOT_COORDINATOR, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        ErrorCode.NETWORK_EXCEPTION, ErrorCode.REQUEST_TIMED_OUT))


class _Backoff:
    """Kafka's ExponentialBackoff with a bound on the attempts (PersisterStateManager's BackoffManager)."""

    def __init__(self, initial_ms: int, max_ms: int, max_attempts: int) -> None:
        self._initial_ms = initial_ms
        self._max_ms = max_ms
        self._max_attempts = max_attempts
        self.attempts = 0

    def can_attempt(self) -> bool:
        return self.attempts < self._max_attempts

    def next_backoff_s(self) -> float:
        """The wait before the next attempt, counting this one."""
        backoff_ms = min(self._initial_ms * RETRY_BACKOFF_EXP_BASE ** self.attempts, self._max_ms)
        self.attempts += 1
        return backoff_ms * random.uniform(1 - RETRY_BACKOFF_JITTER, 1 + RETRY_BACKOFF_JITTER) / 1000

    def reset(self) -> None:
        self.attempts = 0


class DefaultStatePersister:
    """The Persister a broker's share-partitions use: the share coordinator reached over the inter-broker listener."""

    def __init__(self, clients: BrokerClients, local_node_id: int, backoff_ms: int = REQUEST_BACKOFF_MS,
                 backoff_max_ms: int = REQUEST_BACKOFF_MAX_MS, max_attempts: int = MAX_ATTEMPTS) -> None:
        self.clients = clients
        self._local_node_id = local_node_id
        self._backoff_ms = backoff_ms
        self._backoff_max_ms = backoff_max_ms
        self._max_attempts = max_attempts
        self._coordinators: dict[SharePartitionKey, int] = {}

    async def run(self, *, task_status: trio.TaskStatus = trio.TASK_STATUS_IGNORED) -> None:
        """The connections, until cancelled."""
        await self.clients.run(task_status=task_status)

    # ---- Persister ------------------------------------------------------------------------------------------

    async def initialize_state(self, key: SharePartitionKey, state_epoch: int, start_offset: int) -> PersisterResult:
        R = InitializeShareGroupStateRequest
        request = R(version=SHARE_STATE_VERSION, group_id=key.group_id, topics=[R.InitializeStateData(
            topic_id=key.topic_id, partitions=[R.InitializeStateData.PartitionData(
                partition=key.partition, state_epoch=state_epoch, start_offset=start_offset)])])
        error, message, _ = await self._call(key, request)
        return PersisterResult(error, message)

    async def read_state(self, key: SharePartitionKey, leader_epoch: int) -> ReadStateResult:
        R = ReadShareGroupStateRequest
        request = R(version=SHARE_STATE_VERSION, group_id=key.group_id, topics=[R.ReadStateData(
            topic_id=key.topic_id, partitions=[R.ReadStateData.PartitionData(
                partition=key.partition, leader_epoch=leader_epoch)])])
        error, message, result = await self._call(key, request)
        if result is None or error != ErrorCode.NONE:
            return ReadStateResult(error, message, 0, -1, ())
        return ReadStateResult(error, message, result.state_epoch, result.start_offset, tuple(
            PersisterStateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
            for b in result.state_batches))

    async def write_state(self, key: SharePartitionKey, state_epoch: int, leader_epoch: int, start_offset: int,
                          state_batches: tuple[PersisterStateBatch, ...]) -> PersisterResult:
        R = WriteShareGroupStateRequest
        P = R.WriteStateData.PartitionData
        request = R(version=SHARE_STATE_VERSION, group_id=key.group_id, topics=[R.WriteStateData(
            topic_id=key.topic_id, partitions=[P(
                partition=key.partition, state_epoch=state_epoch, leader_epoch=leader_epoch,
                start_offset=start_offset, state_batches=[P.StateBatch(
                    first_offset=b.first_offset, last_offset=b.last_offset, delivery_state=b.delivery_state,
                    delivery_count=b.delivery_count) for b in state_batches])])])
        error, message, _ = await self._call(key, request)
        return PersisterResult(error, message)

    async def delete_state(self, key: SharePartitionKey) -> PersisterResult:
        R = DeleteShareGroupStateRequest
        request = R(version=SHARE_STATE_VERSION, group_id=key.group_id, topics=[R.DeleteStateData(
            topic_id=key.topic_id, partitions=[R.DeleteStateData.PartitionData(partition=key.partition)])])
        error, message, _ = await self._call(key, request)
        return PersisterResult(error, message)

    async def read_summary(self, key: SharePartitionKey, leader_epoch: int) -> ReadSummaryResult:
        R = ReadShareGroupStateSummaryRequest
        request = R(version=SHARE_STATE_VERSION, group_id=key.group_id, topics=[R.ReadStateSummaryData(
            topic_id=key.topic_id, partitions=[R.ReadStateSummaryData.PartitionData(
                partition=key.partition, leader_epoch=leader_epoch)])])
        error, message, result = await self._call(key, request)
        if result is None or error != ErrorCode.NONE:
            return ReadSummaryResult(error, message, 0, 0, -1)
        return ReadSummaryResult(error, message, result.state_epoch, result.leader_epoch, result.start_offset)

    # ---- the calls ------------------------------------------------------------------------------------------

    def _backoff(self) -> _Backoff:
        return _Backoff(self._backoff_ms, self._backoff_max_ms, self._max_attempts)

    async def _call(self, key: SharePartitionKey, request: ApiMessage) -> tuple[ErrorCode, str | None, Any]:
        """Send `request` (about `key` alone) to the key's coordinator, looking for it again and retrying as Kafka
        does; the error, its message and the key's partition result (None when none came)."""
        find_backoff = self._backoff()
        request_backoff = self._backoff()
        while True:
            node = self._coordinators.get(key)
            if node is None:
                error, message, found = await self._find_coordinator(key)
                if error != ErrorCode.NONE:
                    if error in _RETRIABLE and find_backoff.can_attempt():
                        log.debug("no share coordinator for %s yet (%s): looking again", key, error.name)
                        await trio.sleep(find_backoff.next_backoff_s())
                        continue
                    return error, message, None
                find_backoff.reset()
                node = self._coordinators[key] = found
            error, message, result = await self._send(node, key, request)
            if error == ErrorCode.NONE:
                return error, message, result
            if error not in _RETRIABLE:
                return error, message, result
            if self._coordinators.get(key) == node:
                del self._coordinators[key]
            if not request_backoff.can_attempt():
                log.warning("%s of %s failed after %d attempts: %s", type(request).__name__, key,
                            request_backoff.attempts + 1, error.name)
                return error, message, result
            log.debug("%s of %s at node %d: %s, looking for the coordinator again", type(request).__name__, key,
                      node, error.name)
            await trio.sleep(request_backoff.next_backoff_s())

    async def _find_coordinator(self, key: SharePartitionKey) -> tuple[ErrorCode, str | None, int]:
        request = FindCoordinatorRequest[FIND_COORDINATOR_VERSION](
            key_type=SHARE_KEY_TYPE, coordinator_keys=[coordinator_key(key)])
        try:
            client = await self.clients.get(self._local_node_id)
            if client is None:
                return ErrorCode.COORDINATOR_NOT_AVAILABLE, None, -1
            response = await client.send(request)
        except DisconnectedError as exc:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, str(exc), -1
        if len(response.coordinators) != 1:
            return ErrorCode.UNKNOWN_SERVER_ERROR, "Invalid response with multiple coordinators.", -1
        coordinator = response.coordinators[0]
        return ErrorCode(coordinator.error_code), coordinator.error_message, coordinator.node_id

    async def _send(self, node: int, key: SharePartitionKey, request: ApiMessage
                    ) -> tuple[ErrorCode, str | None, Any]:
        try:
            client = await self.clients.get(node)
            if client is None:  # not alive any more, as the metadata says
                return ErrorCode.NETWORK_EXCEPTION, f"node {node} is not alive", None
            response = await client.send(request)
        except DisconnectedError as exc:
            return ErrorCode.NETWORK_EXCEPTION, str(exc), None
        result = _partition_result(response, key)
        if result is None:
            return ErrorCode.UNKNOWN_SERVER_ERROR, f"no result for {key} in the response", None
        return ErrorCode(result.error_code), result.error_message, result


def _partition_result(response: ApiMessage, key: SharePartitionKey) -> Any:
    """The key's partition in a share-state response, None when it is missing."""
    for topic in response.results:
        if topic.topic_id == key.topic_id:
            for partition in topic.partitions:
                if partition.partition == key.partition:
                    return partition
    return None
