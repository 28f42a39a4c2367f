"""What the active ZooKeeper-mode controller serves to brokers (Kafka's KafkaApis handlers that reach its
KafkaController): AlterPartition, ControlledShutdown, AllocateProducerIds and the admin requests brokers forward
(CreateTopics, DeleteTopics, CreatePartitions, IncrementalAlterConfigs, AlterConfigs, ElectLeaders,
AlterPartitionReassignments, AlterClientQuotas, AlterUserScramCredentials, UpdateFeatures) and
ListPartitionReassignments.

All but ControlledShutdown are the KRaft controller's own handlers (ControllerApis) over the quorum controller the
active KafkaController holds: the same checks, records and answers, with ZooKeeper as the store. An admin request
is answered once the brokers answered the requests its change caused (bounded by request.timeout.ms), so a client
that creates a topic finds it on any broker next. A broker that is not the active controller, or was deposed while
handling the request, answers NOT_CONTROLLER; the sender finds the controller again and resends.
"""
from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from kafka.protocol.api_message import ApiMessage
from kazoo.exceptions import KazooException

from minikafka.broker.controller.controller_apis import ControllerApis
from minikafka.broker.controller.controller_errors import error_response
from minikafka.broker.controller.quorum_controller import QuorumController
from minikafka.broker.network.socket_server import ConnectionInfo
from minikafka.broker.zk.kafka_zk_client import ControllerMovedError
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.control_plane import CONTROL_PLANE_SCHEMAS
from minikafka.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger("minikafka.controller")

ADMIN_KEYS = frozenset({ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS, ApiKey.CREATE_PARTITIONS,
                        ApiKey.INCREMENTAL_ALTER_CONFIGS, ApiKey.ALTER_CONFIGS, ApiKey.ELECT_LEADERS,
                        ApiKey.ALTER_PARTITION_REASSIGNMENTS, ApiKey.ALTER_CLIENT_QUOTAS,
                        ApiKey.ALTER_USER_SCRAM_CREDENTIALS, ApiKey.CREATE_ACLS, ApiKey.DELETE_ACLS,
                        ApiKey.UPDATE_FEATURES})
SHARED_KEYS = ADMIN_KEYS | {ApiKey.ALTER_PARTITION, ApiKey.ALLOCATE_PRODUCER_IDS, ApiKey.LIST_PARTITION_REASSIGNMENTS,
                            ApiKey.ASSIGN_REPLICAS_TO_DIRS}
SERVED_KEYS = SHARED_KEYS | {ApiKey.CONTROLLED_SHUTDOWN}


class ZkControllerApis:
    """Takes from its KafkaController only the quorum controller it holds while active (None otherwise) and the wait
    for the brokers' answers, so the APIs need not know the controller that owns them."""

    def __init__(self, active_quorum: Callable[[], QuorumController | None],
                 wait_propagated: Callable[[], Awaitable[None]]) -> None:
        self._active_quorum = active_quorum
        self._wait_propagated = wait_propagated
        self._shared: tuple[QuorumController, ControllerApis] | None = None

    def _kraft_apis(self, quorum: QuorumController) -> ControllerApis:
        if self._shared is None or self._shared[0] is not quorum:
            self._shared = (quorum, ControllerApis(quorum))
        return self._shared[1]

    async def handle(self, request: ApiMessage, version: int, peer: ConnectionInfo | None) -> ApiMessage:
        """The response to `request` at `version`; raises ValueError for an API not served here."""
        key = request.API_KEY
        if key not in SERVED_KEYS:
            raise ValueError(f"the controller does not serve {type(request).__name__}")
        quorum = self._active_quorum()
        if quorum is None:
            return error_response(request, version, ErrorCode.NOT_CONTROLLER)
        try:
            if key == ApiKey.CONTROLLED_SHUTDOWN:
                response = await self._controlled_shutdown(quorum, request, version)
            else:
                response = await self._kraft_apis(quorum).handle(request, version, peer)
        except ControllerMovedError:
            return error_response(request, version, ErrorCode.NOT_CONTROLLER)
        except KazooException:
            log.exception("the controller could not carry out %s", type(request).__name__)
            return error_response(request, version, ErrorCode.UNKNOWN_SERVER_ERROR)
        if key in ADMIN_KEYS:
            await self._wait_propagated()
        return response

    async def _controlled_shutdown(self, quorum: QuorumController, request: Any, version: int) -> ApiMessage:
        """v2+ carries the broker epoch; the answer lists the partitions the broker still leads."""
        R = CONTROL_PLANE_SCHEMAS[ApiKey.CONTROLLED_SHUTDOWN].response[version]
        known = quorum.image.brokers.get(request.broker_id)
        broker_epoch = request.broker_epoch if version >= 2 else known.broker_epoch if known is not None else -1
        try:
            remaining = await quorum.controlled_shutdown(request.broker_id, broker_epoch)
        except KafkaError as exc:
            return R(error_code=exc.code, remaining_partitions=[])
        response: ApiMessage = R(error_code=ErrorCode.NONE, remaining_partitions=[
            R.RemainingPartition(topic_name=topic, partition_index=index) for topic, index in remaining])
        return response
