"""AlterPartitionReassignments (v0-1) and ListPartitionReassignments (v0): moving partitions between brokers
(KIP-455; `kafka-reassign-partitions.sh` and the admin clients' alterPartitionReassignments).

Both are forwarded to the controller as they came and its answer relayed, as Kafka's brokers do. Alter: each
partition's target replica list starts (or replaces) its reassignment, a null list cancels it; the controller
answers per partition UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT (an empty list, a broker named twice
or not registered, a cancel that would need an unclean election), NO_REASSIGNMENT_IN_PROGRESS (a cancel of
nothing); v1 with allow_replication_factor_change false refuses a target of another size with
INVALID_REPLICATION_FACTOR (KIP-860). List: the ongoing reassignments of the named partitions, or of all with a null
topic list, each with its full replica list and the replicas being added and removed. Every version is flexible.
A request whose controller cannot be reached answers REQUEST_TIMED_OUT.

With an authorizer, as Kafka: Alter needs ALTER on the cluster, List DESCRIBE; else CLUSTER_AUTHORIZATION_FAILED
in Kafka's error response (the top-level error and each partition named), and nothing goes to the controller.
"""
from __future__ import annotations

from kafka.protocol.admin.topics import AlterPartitionReassignmentsRequest, ListPartitionReassignmentsRequest
from kafka.protocol.api_message import ApiMessage

from minikafka.broker.security.acl import AclOperation
from minikafka.broker.server.broker_services import RequestContext
from minikafka.broker.server.handlers.common import forward, request_not_authorized
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.errors import ErrorCode


async def handle_alter_partition_reassignments(ctx: RequestContext,
                                               request: AlterPartitionReassignmentsRequest) -> ApiMessage:
    def failed(code: ErrorCode, message: str) -> ApiMessage:
        R = ctx.response_class
        RP = R.ReassignableTopicResponse.ReassignablePartitionResponse
        allow = request.allow_replication_factor_change if ctx.version >= 1 else True
        return ctx.response(throttle_time_ms=0, allow_replication_factor_change=allow, error_code=code,
                            error_message=message, responses=[
                                R.ReassignableTopicResponse(name=t.name, partitions=[
                                    RP(partition_index=p.partition_index, error_code=code, error_message=message)
                                    for p in t.partitions])
                                for t in request.topics])
    if not ctx.authorize_cluster(AclOperation.ALTER):
        return failed(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, request_not_authorized(ctx))
    return await forward(ctx, request, failed)


async def handle_list_partition_reassignments(ctx: RequestContext,
                                              request: ListPartitionReassignmentsRequest) -> ApiMessage:
    def failed(code: ErrorCode, message: str) -> ApiMessage:
        """Kafka's error response: each topic named, with its partitions' indexes alone."""
        R = ctx.response_class.OngoingTopicReassignment
        return ctx.response(throttle_time_ms=0, error_code=code, error_message=message, topics=[
            R(name=t.name, partitions=[R.OngoingPartitionReassignment(partition_index=index, replicas=[],
                                                                      adding_replicas=[], removing_replicas=[])
                                       for index in t.partition_indexes])
            for t in request.topics or []])
    if not ctx.authorize_cluster(AclOperation.DESCRIBE):
        return failed(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, request_not_authorized(ctx))
    return await forward(ctx, request, failed)



HANDLERS = {ApiKey.ALTER_PARTITION_REASSIGNMENTS: handle_alter_partition_reassignments,
            ApiKey.LIST_PARTITION_REASSIGNMENTS: handle_list_partition_reassignments}
