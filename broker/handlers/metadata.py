"""Metadata (v0-13) and DescribeTopicPartitions (v0): brokers, topics, partitions, leaders, leader epochs, topic ids.

Metadata per version:
- v0: an empty topic list asks for every topic; from v1 an empty list asks for none and a null list for all;
- v1+: broker racks, the controller id and whether a topic is internal; v2+ the cluster id; v3+ throttle time;
- v4+: allow_auto_topic_creation; before v4 a missing topic is auto-created whenever auto.create.topics.enable
  allows it;
- v5+: offline replicas (always none); v7+: each partition's leader epoch;
- v8+: topic authorized operations when asked for (without authorization, all of them); cluster authorized
  operations (v8-10) are never filled in: DescribeCluster answers them;
- v9+: flexible; v10+: every topic carries its id, and a topic asked for by id alone (null name) is resolved by
  it (UNKNOWN_TOPIC_ID when unknown), which Kafka serves from v12; v13 adds a top-level error code, always NONE.
An invalid topic name is INVALID_TOPIC_EXCEPTION; a failed auto-creation answers the creation's error.

DescribeTopicPartitions (KIP-966, the Java AdminClient's describeTopics) is flexible and pages through the topics
in name order with a cursor, at most response_partition_limit partitions (capped at Kafka's 2000, at least 1) per
answer.
"""
from __future__ import annotations

import logging

from kafka.protocol.admin.topics import DescribeTopicPartitionsRequest
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.metadata.metadata import MetadataRequest

from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.storage.log_dir import validate_topic_name

from ..controller import TopicRegistration
from ..kafka_apis import RequestContext
from .common import NOT_REQUESTED, TOPIC_OPERATIONS, ZERO_UUID, operations_int32

log = logging.getLogger("minikafka.metadata")

# Kafka's max.request.partition.size.limit default: the most partitions one DescribeTopicPartitions answer holds.
MAX_REQUEST_PARTITION_SIZE_LIMIT = 2000


def _partition_entries(cls, topic: TopicRegistration, start: int = 0, limit: int | None = None) -> list:
    out = []
    for index in sorted(topic.partitions)[start:None if limit is None else start + limit]:
        reg = topic.partitions[index]
        out.append(cls(error_code=ErrorCode.NONE, partition_index=index, leader_id=reg.leader,
                       leader_epoch=reg.leader_epoch, replica_nodes=list(reg.replicas), isr_nodes=list(reg.isr),
                       offline_replicas=[]))
    return out


async def handle_metadata(ctx: RequestContext, request: MetadataRequest) -> ApiMessage:
    R = ctx.response_class
    broker = ctx.broker
    controller = broker.controller
    include_ops = ctx.version >= 8 and request.include_topic_authorized_operations
    allow_auto_create = request.allow_auto_topic_creation if ctx.version >= 4 else True
    if request.topics is None or (ctx.version == 0 and not request.topics):
        wanted = [(name, None) for name in sorted(controller.topics)]
    else:
        wanted = [(t.name, t.topic_id if ctx.version >= 10 else None) for t in request.topics]
    topics = []
    for name, topic_id in wanted:
        error = ErrorCode.NONE
        topic = None
        if name is None and topic_id is not None and topic_id != ZERO_UUID:
            topic = controller.topics_by_id.get(topic_id)
            if topic is None:
                error = ErrorCode.UNKNOWN_TOPIC_ID
        elif name is not None:
            topic = controller.topics.get(name)
            if topic is None:
                if validate_topic_name(name):
                    error = ErrorCode.INVALID_TOPIC_EXCEPTION
                elif allow_auto_create:
                    try:
                        topic = broker.auto_create_topic(name)
                    except KafkaError as exc:
                        error = exc.code
                else:
                    error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        else:
            error = ErrorCode.INVALID_REQUEST
        if topic is None:
            topics.append(R.MetadataResponseTopic(error_code=error, name=name, topic_id=topic_id or ZERO_UUID,
                                                  is_internal=False, partitions=[],
                                                  authorized_operations=NOT_REQUESTED))
            continue
        topics.append(R.MetadataResponseTopic(
            error_code=ErrorCode.NONE, name=topic.name, topic_id=topic.uuid, is_internal=topic.is_internal,
            partitions=_partition_entries(R.MetadataResponseTopic.MetadataResponsePartition, topic),
            authorized_operations=TOPIC_OPERATIONS if include_ops else NOT_REQUESTED))
    brokers = [R.MetadataResponseBroker(node_id=e.node_id, host=e.host, port=e.port, rack=e.rack)
               for e in broker.endpoints]
    return ctx.response(throttle_time_ms=0, brokers=brokers, cluster_id=controller.cluster_id,
                        controller_id=broker.node_id, topics=topics, authorized_operations=NOT_REQUESTED,
                        error_code=ErrorCode.NONE)


async def handle_describe_topic_partitions(ctx: RequestContext,
                                           request: DescribeTopicPartitionsRequest) -> ApiMessage:
    """KIP-966's paginated topic description (used by the Java AdminClient's describeTopics)."""
    R = ctx.response_class
    controller = ctx.broker.controller
    # Kafka pages through the topics in name order, whatever order the request lists them in.
    names = sorted({t.name for t in request.topics} if request.topics else controller.topics)
    cursor = request.cursor
    if cursor is not None:
        names = [n for n in names if n >= cursor.topic_name]
    # As Kafka: at least one partition per response (a limit of 0 would page forever), at most
    # max.request.partition.size.limit.
    budget = max(min(request.response_partition_limit, MAX_REQUEST_PARTITION_SIZE_LIMIT), 1)
    topics, next_cursor = [], None
    for name in names:
        topic = controller.topics.get(name)
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
            reg = topic.partitions[index]
            parts.append(R.DescribeTopicPartitionsResponseTopic.DescribeTopicPartitionsResponsePartition(
                error_code=ErrorCode.NONE, partition_index=index, leader_id=reg.leader, leader_epoch=reg.leader_epoch,
                replica_nodes=list(reg.replicas), isr_nodes=list(reg.isr), eligible_leader_replicas=[],
                last_known_elr=[], offline_replicas=[]))
        budget -= len(parts)
        topics.append(R.DescribeTopicPartitionsResponseTopic(
            error_code=ErrorCode.NONE, name=name, topic_id=topic.uuid, is_internal=topic.is_internal,
            partitions=parts, topic_authorized_operations=operations_int32(TOPIC_OPERATIONS)))
        if start + len(parts) < len(topic.partitions):
            next_cursor = R.Cursor(topic_name=name, partition_index=start + len(parts))
            break
    return ctx.response(throttle_time_ms=0, topics=topics, next_cursor=next_cursor)


HANDLERS = {ApiKey.METADATA: handle_metadata, ApiKey.DESCRIBE_TOPIC_PARTITIONS: handle_describe_topic_partitions}
