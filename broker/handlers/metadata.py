"""Metadata (v0-13) and DescribeTopicPartitions (v0): brokers, topics, partitions, leaders, leader epochs, topic ids.

Metadata per version:
- v0: an empty topic list asks for every topic; from v1 an empty list asks for none and a null list for all;
- v1+: broker racks, the controller id and whether a topic is internal; v2+ the cluster id; v3+ throttle time;
- v4+: allow_auto_topic_creation; before v4 a missing topic is auto-created whenever auto.create.topics.enable
  allows it;
- v5+: offline replicas (replicas on fenced or unregistered brokers); v7+: each partition's leader epoch;
- v8+: topic authorized operations when asked for (without authorization, all of them); cluster authorized
  operations (v8-10) are never filled in: DescribeCluster answers them;
- v9+: flexible; v10+: every topic carries its id, and a topic asked for by id alone (null name) is resolved by
  it (UNKNOWN_TOPIC_ID when unknown), which Kafka serves from v12; v13 adds a top-level error code, always NONE.
An invalid topic name is INVALID_TOPIC_EXCEPTION; auto-creation goes to the controller, and a failed one answers
the creation's error.

Brokers are the live (unfenced) ones with an endpoint on the listener the request came in on; the controller id is
a random live broker, as KRaft brokers answer (clients reach the controller only through brokers). A partition
whose leader is unknown or gone answers LEADER_NOT_AVAILABLE with leader -1 (LISTENER_NOT_FOUND from v6 when its
leader lacks this listener); v0 lists only live replicas and answers REPLICA_NOT_AVAILABLE when some are not.

DescribeTopicPartitions (KIP-966, the Java AdminClient's describeTopics) is flexible and pages through the topics
in name order with a cursor, at most response_partition_limit partitions (capped at Kafka's 2000, at least 1) per
answer.
"""
from __future__ import annotations

import logging
from typing import Any

from kafka.protocol.admin.topics import DescribeTopicPartitionsRequest
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.metadata.metadata import MetadataRequest

from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.errors import ErrorCode
from minikafka.storage.log_dir import validate_topic_name

from ..kafka_apis import RequestContext
from ..metadata_cache import MetadataCache, is_internal
from ..metadata_image import PartitionInfo, TopicInfo
from .common import NOT_REQUESTED, TOPIC_OPERATIONS, ZERO_UUID, operations_int32

log = logging.getLogger("minikafka.metadata")

# Kafka's max.request.partition.size.limit default: the most partitions one DescribeTopicPartitions answer holds.
MAX_REQUEST_PARTITION_SIZE_LIMIT = 2000
# Metadata v6+ tells a partition whose leader has no endpoint on the request's listener apart (KIP-291).
LISTENER_NOT_FOUND_MIN_VERSION = 6


def partition_state(cache: MetadataCache, partition: PartitionInfo, listener: str,
                    only_alive: bool = False) -> tuple[ErrorCode, int, list[int], list[int], list[int]]:
    """(error, leader id, replicas, ISR, offline replicas) of one partition as a client on `listener` sees it;
    `only_alive` leaves out replicas that are offline (Metadata v0)."""
    replicas, isr = list(partition.replicas), list(partition.isr)
    if only_alive:
        replicas, isr = cache.alive_replicas(replicas, listener), cache.alive_replicas(isr, listener)
    offline = cache.offline_replicas(partition, listener)
    if cache.leader_endpoint(partition.leader, listener) is None:
        error = ErrorCode.LISTENER_NOT_FOUND if cache.is_registered(partition.leader) else \
            ErrorCode.LEADER_NOT_AVAILABLE
        return error, -1, replicas, isr, offline
    if len(replicas) < len(partition.replicas) or len(isr) < len(partition.isr):
        return ErrorCode.REPLICA_NOT_AVAILABLE, partition.leader, replicas, isr, offline
    return ErrorCode.NONE, partition.leader, replicas, isr, offline


def _partition_entries(cls: Any, ctx: RequestContext, topic: TopicInfo) -> list:
    cache = ctx.broker.metadata_cache
    out = []
    for index in sorted(topic.partitions):
        partition = topic.partitions[index]
        error, leader, replicas, isr, offline = partition_state(cache, partition, ctx.conn.listener,
                                                                only_alive=ctx.version == 0)
        if error == ErrorCode.LISTENER_NOT_FOUND and ctx.version < LISTENER_NOT_FOUND_MIN_VERSION:
            error = ErrorCode.LEADER_NOT_AVAILABLE
        out.append(cls(error_code=error, partition_index=index, leader_id=leader,
                       leader_epoch=partition.leader_epoch, replica_nodes=replicas, isr_nodes=isr,
                       offline_replicas=offline))
    return out


async def handle_metadata(ctx: RequestContext, request: MetadataRequest) -> ApiMessage:
    R = ctx.response_class
    broker = ctx.broker
    cache = broker.metadata_cache
    include_ops = ctx.version >= 8 and request.include_topic_authorized_operations
    allow_auto_create = request.allow_auto_topic_creation if ctx.version >= 4 else True
    if request.topics is None or (ctx.version == 0 and not request.topics):
        wanted = [(name, None) for name in sorted(cache.topics)]
    else:
        wanted = [(t.name, t.topic_id if ctx.version >= 10 else None) for t in request.topics]
    missing = [name for name in dict.fromkeys(name for name, _ in wanted if name is not None)
               if name not in cache.topics and not validate_topic_name(name)]
    creation_errors: dict[str, ErrorCode] = {}
    if missing and allow_auto_create:
        creation_errors = await broker.auto_topic_creation.create_topics(missing)
    topics = []
    for name, topic_id in wanted:
        error = ErrorCode.NONE
        topic = None
        if name is None and topic_id is not None and topic_id != ZERO_UUID:
            topic = cache.topics_by_id.get(topic_id)
            if topic is None:
                error = ErrorCode.UNKNOWN_TOPIC_ID
        elif name is not None:
            topic = cache.topics.get(name)
            if topic is None:
                if validate_topic_name(name):
                    error = ErrorCode.INVALID_TOPIC_EXCEPTION
                else:
                    error = creation_errors.get(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        else:
            error = ErrorCode.INVALID_REQUEST
        if topic is None:
            topics.append(R.MetadataResponseTopic(error_code=error, name=name, topic_id=topic_id or ZERO_UUID,
                                                  is_internal=False, partitions=[],
                                                  authorized_operations=NOT_REQUESTED))
            continue
        topics.append(R.MetadataResponseTopic(
            error_code=ErrorCode.NONE, name=topic.name, topic_id=topic.topic_id, is_internal=is_internal(topic.name),
            partitions=_partition_entries(R.MetadataResponseTopic.MetadataResponsePartition, ctx, topic),
            authorized_operations=TOPIC_OPERATIONS if include_ops else NOT_REQUESTED))
    brokers = [R.MetadataResponseBroker(node_id=b.broker_id, host=e.host, port=e.port, rack=b.rack)
               for b, e in cache.alive_brokers(ctx.conn.listener)]
    return ctx.response(throttle_time_ms=0, brokers=brokers, cluster_id=cache.cluster_id,
                        controller_id=cache.random_alive_broker_id(), topics=topics,
                        authorized_operations=NOT_REQUESTED, error_code=ErrorCode.NONE)


async def handle_describe_topic_partitions(ctx: RequestContext,
                                           request: DescribeTopicPartitionsRequest) -> ApiMessage:
    """KIP-966's paginated topic description (used by the Java AdminClient's describeTopics)."""
    R = ctx.response_class
    PR = R.DescribeTopicPartitionsResponseTopic.DescribeTopicPartitionsResponsePartition
    cache = ctx.broker.metadata_cache
    listener = ctx.conn.listener
    # Kafka pages through the topics in name order, whatever order the request lists them in.
    names = sorted({t.name for t in request.topics} if request.topics else cache.topics)
    cursor = request.cursor
    if cursor is not None:
        names = [n for n in names if n >= cursor.topic_name]
    # As Kafka: at least one partition per response (a limit of 0 would page forever), at most
    # max.request.partition.size.limit.
    budget = max(min(request.response_partition_limit, MAX_REQUEST_PARTITION_SIZE_LIMIT), 1)
    topics, next_cursor = [], None
    for name in names:
        topic = cache.topics.get(name)
        if topic is None:
            topics.append(R.DescribeTopicPartitionsResponseTopic(
                error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name=name, topic_id=ZERO_UUID, is_internal=False,
                partitions=[], topic_authorized_operations=operations_int32(TOPIC_OPERATIONS)))
            continue
        start = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        if budget <= 0:
            next_cursor = R.Cursor(topic_name=name, partition_index=start)
            break
        parts = []
        for index in sorted(topic.partitions)[start:start + budget]:
            partition = topic.partitions[index]
            _error, leader, replicas, isr, offline = partition_state(cache, partition, listener)
            # Kafka answers no per-partition error here: the leader id -1 says it all.
            parts.append(PR(error_code=ErrorCode.NONE, partition_index=index, leader_id=leader,
                            leader_epoch=partition.leader_epoch, replica_nodes=replicas, isr_nodes=isr,
                            eligible_leader_replicas=[], last_known_elr=[], offline_replicas=offline))
        budget -= len(parts)
        topics.append(R.DescribeTopicPartitionsResponseTopic(
            error_code=ErrorCode.NONE, name=name, topic_id=topic.topic_id, is_internal=is_internal(name),
            partitions=parts, topic_authorized_operations=operations_int32(TOPIC_OPERATIONS)))
        if start + len(parts) < len(topic.partitions):
            next_cursor = R.Cursor(topic_name=name, partition_index=start + len(parts))
            break
    return ctx.response(throttle_time_ms=0, topics=topics, next_cursor=next_cursor)


HANDLERS = {ApiKey.METADATA: handle_metadata, ApiKey.DESCRIBE_TOPIC_PARTITIONS: handle_describe_topic_partitions}
