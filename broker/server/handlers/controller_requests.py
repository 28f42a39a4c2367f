"""The control-plane requests a ZooKeeper-mode broker serves, on its inter-broker listener only and never in a
client's ApiVersions (Kafka's KafkaApis handleLeaderAndIsrRequest / handleUpdateMetadataRequest /
handleStopReplicaRequest, and the controller's own APIs).

From the controller: LeaderAndIsr (v0-7; this broker's replicas become leaders or followers), UpdateMetadata (v0-8;
the broker's metadata image: live brokers, partition states, the controller id) and StopReplica (v0-4; replicas
stopped, and deleted when asked). Each is refused as a whole with STALE_CONTROLLER_EPOCH when its controller epoch
is older than the latest this broker has seen, then with STALE_BROKER_EPOCH when it was meant for an earlier
registration of this broker; the rules live in the broker's ZooKeeper metadata source, which the in-process
controller also calls.

From other brokers: AlterPartition, ControlledShutdown, AllocateProducerIds and AssignReplicasToDirs (replicas lost
with a failed log dir) go to the controller running in this broker, which answers NOT_CONTROLLER unless it is the
active one.

With an authorizer, every one of them needs CLUSTER_ACTION on the cluster, checked first as Kafka's brokers and
controllers check it: else CLUSTER_AUTHORIZATION_FAILED for the request as a whole, and nothing is done. The
principal is the sender's on the inter-broker listener (ANONYMOUS while that listener is PLAINTEXT, so it must be a
super user there).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafka.protocol.api_message import ApiMessage

from minikafka.broker.security.acl import AclOperation
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from minikafka.broker.server.broker_services import RequestContext
    from minikafka.broker.zk.zk_broker_metadata import ZkMetadataSource


def _source(ctx: RequestContext) -> ZkMetadataSource:
    source: Any = ctx.services.metadata
    return source


async def handle_from_controller(ctx: RequestContext, request: ApiMessage) -> ApiMessage:
    if not ctx.authorize_cluster(AclOperation.CLUSTER_ACTION):
        return _not_authorized(ctx)
    return await _source(ctx).handle_from_controller(request, ctx.version)


async def handle_for_controller(ctx: RequestContext, request: ApiMessage) -> ApiMessage:
    if not ctx.authorize_cluster(AclOperation.CLUSTER_ACTION):
        return _not_authorized(ctx)
    return await _source(ctx).handle_for_controller(request, ctx.version, ctx.conn)


def _not_authorized(ctx: RequestContext) -> ApiMessage:
    """The request refused as a whole, as the broker refuses a stale epoch: the top-level error, without the copy
    of it for each partition that Kafka's LeaderAndIsr and StopReplica error responses add."""
    return ctx.response(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)


CONTROL_PLANE_HANDLERS = {
    ApiKey.LEADER_AND_ISR: handle_from_controller,
    ApiKey.UPDATE_METADATA: handle_from_controller,
    ApiKey.STOP_REPLICA: handle_from_controller,
    ApiKey.ALTER_PARTITION: handle_for_controller,
    ApiKey.CONTROLLED_SHUTDOWN: handle_for_controller,
    ApiKey.ALLOCATE_PRODUCER_IDS: handle_for_controller,
    ApiKey.ASSIGN_REPLICAS_TO_DIRS: handle_for_controller,
}
