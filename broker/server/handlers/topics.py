"""CreateTopics (v2-7), DeleteTopics (v1-6), CreatePartitions (v0-3) and ElectLeaders (v0-2), which the controller
decides, and DeleteRecords (v0-2), which leaders do: topic and partition lifecycle.

The first four are forwarded to the controller as they came and its answer relayed (KIP-590), once this broker has
replayed the change; the controller validates them as Kafka does. CreateTopics: a partition count or replication
factor of -1 takes num.partitions / default.replication.factor (KIP-464, v4+); a topic listed twice is
INVALID_REQUEST; validate_only checks without creating; v5+ is flexible and answers the topic's partition count,
replication factor and configs (KIP-525); v7 answers its topic id. DeleteTopics: by name, and from v6 by name or id
(UNKNOWN_TOPIC_ID); v4+ is flexible, v5+ carries error messages; delete.topic.enable=false answers
TOPIC_DELETION_DISABLED. CreatePartitions: only ever more partitions (INVALID_PARTITIONS otherwise), with or
without explicit assignments; v2+ is flexible. ElectLeaders (kafka-leader-election.sh): preferred (0) or unclean
(1) elections of the listed partitions, or of all with a null list; v1+ has a top-level error, v2 is flexible.
A forwarded request whose controller cannot be reached answers REQUEST_TIMED_OUT in every entry.
DeleteRecords: moves each partition's log start offset on its leader; offset -1 means the high watermark, beyond
it is OFFSET_OUT_OF_RANGE; the answer is the new low watermark; v2 is flexible.
"""
from __future__ import annotations

from kafka.protocol.admin.topics import (
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteRecordsRequest,
    DeleteTopicsRequest,
    ElectLeadersRequest,
)
from kafka.protocol.api_message import ApiMessage

from minikafka.broker.server.broker_services import RequestContext
from minikafka.broker.server.handlers.common import ZERO_UUID, forward, per_partition
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.errors import ErrorCode


async def handle_create_topics(ctx: RequestContext, request: CreateTopicsRequest) -> ApiMessage:
    def failed(code: ErrorCode, message: str) -> ApiMessage:
        R = ctx.response_class
        return ctx.response(throttle_time_ms=0, topics=[
            R.CreatableTopicResult(name=t.name, topic_id=ZERO_UUID, error_code=code, error_message=message,
                                   num_partitions=-1, replication_factor=-1, configs=None)
            for t in request.topics])
    return await forward(ctx, request, failed)


async def handle_delete_topics(ctx: RequestContext, request: DeleteTopicsRequest) -> ApiMessage:
    def failed(code: ErrorCode, message: str) -> ApiMessage:
        R = ctx.response_class
        targets = [(t.name, t.topic_id) for t in request.topics] if ctx.version >= 6 else \
            [(name, None) for name in request.topic_names]
        return ctx.response(throttle_time_ms=0, responses=[
            R.DeletableTopicResult(name=name, topic_id=topic_id or ZERO_UUID, error_code=code, error_message=message)
            for name, topic_id in targets])
    return await forward(ctx, request, failed)


async def handle_create_partitions(ctx: RequestContext, request: CreatePartitionsRequest) -> ApiMessage:
    def failed(code: ErrorCode, message: str) -> ApiMessage:
        R = ctx.response_class
        return ctx.response(throttle_time_ms=0, results=[
            R.CreatePartitionsTopicResult(name=t.name, error_code=code, error_message=message)
            for t in request.topics])
    return await forward(ctx, request, failed)


async def handle_elect_leaders(ctx: RequestContext, request: ElectLeadersRequest) -> ApiMessage:
    def failed(code: ErrorCode, message: str) -> ApiMessage:
        R = ctx.response_class
        ER = R.ReplicaElectionResult
        return ctx.response(throttle_time_ms=0, error_code=code, replica_election_results=[
            ER(topic=t.topic, partition_result=[ER.PartitionResult(partition_id=p, error_code=code,
                                                                   error_message=message)
                                                for p in t.partitions])
            for t in request.topic_partitions or []])
    return await forward(ctx, request, failed)


async def handle_delete_records(ctx: RequestContext, request: DeleteRecordsRequest) -> ApiMessage:
    """Move log start offsets forward; -1 means up to the high watermark, as in Kafka."""
    R = ctx.response_class
    PR = R.DeleteRecordsTopicResult.DeleteRecordsPartitionResult
    replica_manager = ctx.services.replica_manager

    def answer(t, p):
        low = replica_manager.delete_records((t.name, p.partition_index), p.offset)
        return PR(partition_index=p.partition_index, low_watermark=low, error_code=ErrorCode.NONE)

    def failed(p, code):
        return PR(partition_index=p.partition_index, low_watermark=-1, error_code=code)

    return ctx.response(throttle_time_ms=0, topics=[
        R.DeleteRecordsTopicResult(name=t.name, partitions=parts)
        for t, parts in per_partition(request.topics, answer, failed)])


HANDLERS = {ApiKey.CREATE_TOPICS: handle_create_topics, ApiKey.DELETE_TOPICS: handle_delete_topics,
            ApiKey.CREATE_PARTITIONS: handle_create_partitions, ApiKey.DELETE_RECORDS: handle_delete_records,
            ApiKey.ELECT_LEADERS: handle_elect_leaders}
