"""CreateTopics (v2-7), DeleteTopics (v1-6), CreatePartitions (v0-3), DeleteRecords (v0-2): topic and partition
lifecycle.

CreateTopics: a partition count or replication factor of -1 takes num.partitions / default.replication.factor
(KIP-464, v4+; older clients never send -1); a topic listed twice is INVALID_REQUEST; validate_only checks without
creating. v5+ is flexible and answers the topic's partition count, replication factor and configs (KIP-525); v7
answers its topic id. DeleteTopics: by name, and from v6 by name or id (UNKNOWN_TOPIC_ID); v4+ is flexible, v5+
carries error messages; delete.topic.enable=false answers TOPIC_DELETION_DISABLED. CreatePartitions: only ever
more partitions (INVALID_PARTITIONS otherwise), with or without explicit assignments; v2+ is flexible.
DeleteRecords: moves each partition's log start offset on its leader; offset -1 means the high watermark, beyond
it is OFFSET_OUT_OF_RANGE; the answer is the new low watermark; v2 is flexible.
"""
from __future__ import annotations

import logging

from kafka.protocol.admin.topics import (
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteRecordsRequest,
    DeleteTopicsRequest,
)
from kafka.protocol.api_message import ApiMessage

from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.errors import ErrorCode, KafkaError

from ..kafka_apis import RequestContext
from .common import ZERO_UUID, per_partition, resolve_topic
from .configs import topic_config_entries

log = logging.getLogger("minikafka.topics")


async def handle_create_topics(ctx: RequestContext, request: CreateTopicsRequest) -> ApiMessage:
    R = ctx.response_class
    broker = ctx.broker
    results = []
    seen: dict[str, int] = {}
    for t in request.topics:
        seen[t.name] = seen.get(t.name, 0) + 1
    for t in request.topics:
        result = R.CreatableTopicResult(name=t.name, topic_id=ZERO_UUID, error_code=ErrorCode.NONE,
                                        error_message=None, num_partitions=-1, replication_factor=-1, configs=None)
        try:
            if seen[t.name] > 1:
                raise KafkaError(ErrorCode.INVALID_REQUEST, f"Create topics request from client contains "
                                 f"multiple entries for topic {t.name}")
            configs = {c.name: c.value for c in t.configs}
            assignments = {a.partition_index: list(a.broker_ids) for a in t.assignments}
            num_partitions = t.num_partitions if t.num_partitions != -1 or assignments else \
                broker.config.get("num.partitions")
            replication_factor = t.replication_factor if t.replication_factor != -1 or assignments else \
                broker.config.get("default.replication.factor")
            topic = broker.create_topic(t.name, num_partitions, replication_factor, assignments, configs,
                                        validate_only=request.validate_only)
            if topic is not None:
                result.topic_id = topic.uuid
                num_partitions = len(topic.partitions)
                replication_factor = len(topic.partitions[0].replicas)
            else:
                num_partitions = len(assignments) if assignments else num_partitions
                replication_factor = len(next(iter(assignments.values()))) if assignments else replication_factor
            result.num_partitions = num_partitions
            result.replication_factor = replication_factor
            result.configs = [R.CreatableTopicResult.CreatableTopicConfigs(
                name=e.name, value=e.value, read_only=e.read_only, config_source=e.source,
                is_sensitive=e.is_sensitive) for e in topic_config_entries(broker, configs)]
        except KafkaError as exc:
            log.info("CreateTopics %s: %s %s", t.name, exc.code.name, exc.message or "")
            result.error_code = exc.code
            result.error_message = exc.message
        results.append(result)
    return ctx.response(throttle_time_ms=0, topics=results)


async def handle_delete_topics(ctx: RequestContext, request: DeleteTopicsRequest) -> ApiMessage:
    R = ctx.response_class
    if ctx.version >= 6:
        targets = [(t.name, t.topic_id) for t in request.topics]
    else:
        targets = [(name, None) for name in request.topic_names]
    results = []
    for name, topic_id in targets:
        topic, code = resolve_topic(ctx, name, topic_id)
        message = None
        if topic is not None:
            try:
                ctx.broker.delete_topic(topic.name)
            except KafkaError as exc:
                code, message = exc.code, exc.message
        results.append(R.DeletableTopicResult(name=topic.name if topic else name,
                                              topic_id=topic.uuid if topic else (topic_id or ZERO_UUID),
                                              error_code=code, error_message=message))
    return ctx.response(throttle_time_ms=0, responses=results)


async def handle_create_partitions(ctx: RequestContext, request: CreatePartitionsRequest) -> ApiMessage:
    R = ctx.response_class
    results = []
    for t in request.topics:
        code, message = ErrorCode.NONE, None
        try:
            assignments = [list(a.broker_ids) for a in t.assignments] if t.assignments else None
            ctx.broker.create_partitions(t.name, t.count, assignments, validate_only=request.validate_only)
        except KafkaError as exc:
            code, message = exc.code, exc.message
        results.append(R.CreatePartitionsTopicResult(name=t.name, error_code=code, error_message=message))
    return ctx.response(throttle_time_ms=0, results=results)


async def handle_delete_records(ctx: RequestContext, request: DeleteRecordsRequest) -> ApiMessage:
    """Move log start offsets forward; -1 means up to the high watermark, as in Kafka."""
    R = ctx.response_class
    PR = R.DeleteRecordsTopicResult.DeleteRecordsPartitionResult
    replica_manager = ctx.broker.replica_manager

    def answer(t, p):
        low = replica_manager.delete_records((t.name, p.partition_index), p.offset)
        return PR(partition_index=p.partition_index, low_watermark=low, error_code=ErrorCode.NONE)

    def failed(p, code):
        return PR(partition_index=p.partition_index, low_watermark=-1, error_code=code)

    return ctx.response(throttle_time_ms=0, topics=[
        R.DeleteRecordsTopicResult(name=t.name, partitions=parts)
        for t, parts in per_partition(request.topics, answer, failed)])


HANDLERS = {ApiKey.CREATE_TOPICS: handle_create_topics, ApiKey.DELETE_TOPICS: handle_delete_topics,
            ApiKey.CREATE_PARTITIONS: handle_create_partitions, ApiKey.DELETE_RECORDS: handle_delete_records}
