"""KIP-932's share-group state APIs, answered by the share coordinator for share-partition leaders:
InitializeShareGroupState (83), ReadShareGroupState (84), WriteShareGroupState (85), DeleteShareGroupState (86)
and ReadShareGroupStateSummary (87), each v0 (flexible) as Kafka 4.1 serves them.

Each share-partition in a request is answered on its own: NOT_COORDINATOR where this broker does not lead its
`__share_group_state` partition (or the topic does not exist yet), COORDINATOR_LOAD_IN_PROGRESS while that partition
loads, else what the coordinator's shard answers once its records are replicated: FENCED_STATE_EPOCH,
FENCED_LEADER_EPOCH, INVALID_REQUEST for a read or write of an uninitialized share-partition,
UNKNOWN_TOPIC_OR_PARTITION for a partition the topic lacks. ReadShareGroupStateSummary of an uninitialized
share-partition answers start offset -1 and epochs 0, as Kafka does.

FindCoordinator key type SHARE (v6+, key `group:topicId:partition`) finds the leader of a share-partition's
`__share_group_state` partition, so a share-partition leader's persister knows where to send these; the first lookup
creates the topic.

Authorization, with an authorizer: CLUSTER_ACTION on the cluster (they come from brokers), else
CLUSTER_AUTHORIZATION_FAILED for every partition.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kafka.protocol.api_message import ApiMessage

from minikafka.broker.coordinator.share.share_coordinator import ShareOperation, parse_coordinator_key
from minikafka.broker.coordinator.share.share_coordinator_shard import (
    SharePartitionKey,
    ShareStateResult,
)
from minikafka.broker.security.acl import AclOperation
from minikafka.broker.server.broker_services import RequestContext
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.coordinator_records.share_coordinator_records import StateBatch
from minikafka.protocol.errors import DEFAULT_MESSAGES, ErrorCode
from minikafka.protocol.internal_topics import SHARE_GROUP_STATE_TOPIC

UNINITIALIZED_START_OFFSET = -1
DEFAULT_EPOCH = 0


Results = list[tuple[Any, list[tuple[int, ShareStateResult]]]]


async def _results(ctx: RequestContext, request: Any,
                   op: Callable[[SharePartitionKey, Any], ShareOperation]) -> Results:
    """Each share-partition of `request` answered on its own by the share coordinator; the first request creates
    `__share_group_state` (its partitions answer NOT_COORDINATOR until their leaders have loaded them)."""
    allowed = ctx.authorize_cluster(AclOperation.CLUSTER_ACTION)
    if allowed and SHARE_GROUP_STATE_TOPIC not in ctx.services.metadata_cache.topics:
        await ctx.services.auto_topic_creation.create_topics([SHARE_GROUP_STATE_TOPIC], internal=True)
    results = []
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            key = SharePartitionKey(request.group_id, topic.topic_id, p.partition)
            if not allowed:
                result = ShareStateResult(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
            else:
                result = await ctx.services.share_coordinator.execute(key, op(key, p))
            partitions.append((p.partition, result))
        results.append((topic.topic_id, partitions))
    return results


async def find_share_coordinator(ctx: RequestContext, key: str) -> tuple[ErrorCode, int, str, int]:
    """FindCoordinator for a share-partition: the leader of its `__share_group_state` partition on the listener the
    request came in on; INVALID_REQUEST for a key that is not group:topicId:partition."""
    share_partition = parse_coordinator_key(key)
    if share_partition is None:
        return ErrorCode.INVALID_REQUEST, -1, "", -1
    services = ctx.services
    cache = services.metadata_cache
    if SHARE_GROUP_STATE_TOPIC not in cache.topics:
        errors = await services.auto_topic_creation.create_topics([SHARE_GROUP_STATE_TOPIC], internal=True)
        if SHARE_GROUP_STATE_TOPIC in errors:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
    topic = cache.topics.get(SHARE_GROUP_STATE_TOPIC)
    partition = (topic.partitions.get(services.share_coordinator.partition_for(share_partition))
                 if topic is not None else None)
    endpoint = cache.alive_endpoint(partition.leader, ctx.conn.listener) if partition is not None else None
    if partition is None or endpoint is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
    return ErrorCode.NONE, partition.leader, endpoint.host, endpoint.port


def _error(result: ShareStateResult) -> dict[str, Any]:
    message = result.error_message
    if message is None and result.error != ErrorCode.NONE:
        message = DEFAULT_MESSAGES.get(result.error)
    return {"error_code": result.error, "error_message": message}


def _batches(batches: Any) -> tuple[StateBatch, ...]:
    return tuple(StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in batches)


def _errors_only(ctx: RequestContext, results: Results, result_class_name: str) -> ApiMessage:
    """The answer of the APIs that give only an error per share-partition (Initialize, Write, Delete)."""
    R = ctx.response_class
    T = getattr(R, result_class_name)
    return R(results=[T(topic_id=topic_id, partitions=[
        T.PartitionResult(partition=partition, **_error(result)) for partition, result in partitions])
        for topic_id, partitions in results])


async def handle_initialize(ctx: RequestContext, request: Any) -> ApiMessage:
    results = await _results(ctx, request, lambda key, p: lambda shard: shard.initialize(
        key, p.state_epoch, p.start_offset))
    return _errors_only(ctx, results, "InitializeStateResult")


async def handle_read(ctx: RequestContext, request: Any) -> ApiMessage:
    results = await _results(ctx, request, lambda key, p: lambda shard: shard.read(key, p.leader_epoch))
    R = ctx.response_class
    P = R.ReadStateResult.PartitionResult

    def partition_result(partition: int, result: ShareStateResult) -> Any:
        state = result.state if result.error == ErrorCode.NONE else None
        return P(partition=partition, **_error(result),
                 state_epoch=state.state_epoch if state else DEFAULT_EPOCH,
                 start_offset=state.start_offset if state else UNINITIALIZED_START_OFFSET,
                 state_batches=[P.StateBatch(first_offset=b.first_offset, last_offset=b.last_offset,
                                             delivery_state=b.delivery_state, delivery_count=b.delivery_count)
                                for b in (state.state_batches if state else ())])

    return R(results=[R.ReadStateResult(topic_id=topic_id, partitions=[
        partition_result(partition, result) for partition, result in partitions]) for topic_id, partitions in results])


async def handle_write(ctx: RequestContext, request: Any) -> ApiMessage:
    results = await _results(ctx, request, lambda key, p: lambda shard: shard.write(
        key, p.state_epoch, p.leader_epoch, p.start_offset, _batches(p.state_batches)))
    return _errors_only(ctx, results, "WriteStateResult")


async def handle_delete(ctx: RequestContext, request: Any) -> ApiMessage:
    results = await _results(ctx, request, lambda key, p: lambda shard: shard.delete(key))
    return _errors_only(ctx, results, "DeleteStateResult")


async def handle_read_summary(ctx: RequestContext, request: Any) -> ApiMessage:
    results = await _results(ctx, request, lambda key, p: lambda shard: shard.read_summary(key))
    R = ctx.response_class
    P = R.ReadStateSummaryResult.PartitionResult

    def partition_result(partition: int, result: ShareStateResult) -> Any:
        state = result.state if result.error == ErrorCode.NONE else None
        return P(partition=partition, **_error(result),
                 state_epoch=state.state_epoch if state else DEFAULT_EPOCH,
                 leader_epoch=state.leader_epoch if state else DEFAULT_EPOCH,
                 start_offset=state.start_offset if state else UNINITIALIZED_START_OFFSET)

    return R(results=[R.ReadStateSummaryResult(topic_id=topic_id, partitions=[
        partition_result(partition, result) for partition, result in partitions]) for topic_id, partitions in results])


HANDLERS = {
    ApiKey.INITIALIZE_SHARE_GROUP_STATE: handle_initialize,
    ApiKey.READ_SHARE_GROUP_STATE: handle_read,
    ApiKey.WRITE_SHARE_GROUP_STATE: handle_write,
    ApiKey.DELETE_SHARE_GROUP_STATE: handle_delete,
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: handle_read_summary,
}
