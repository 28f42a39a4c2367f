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

With an authorizer the broker checks, before forwarding, what Kafka's controller checks (the forwarded request
carries no principal): only what the principal may change reaches the controller, the rest is answered here.
- CreateTopics: CREATE on the cluster, else on each topic (TOPIC_AUTHORIZATION_FAILED, "Authorization failed.");
  a topic listed twice and __cluster_metadata go to the controller unchecked, which refuses them. A created topic
  whose configs the principal may not DESCRIBE_CONFIGS is answered without them (topic_config_error_code
  TOPIC_AUTHORIZATION_FAILED, no partition count or replication factor).
- DeleteTopics: DELETE on the cluster, else on each topic. A topic the principal may not delete is
  TOPIC_AUTHORIZATION_FAILED, except one named that it may DESCRIBE and that does not exist
  (UNKNOWN_TOPIC_OR_PARTITION); named by id, its name is answered only if it may DESCRIBE it (ids are not secret:
  an unknown id is UNKNOWN_TOPIC_ID). Refused before that, as Kafka: a topic named twice (INVALID_REQUEST), an
  entry with neither a name nor an id, or both.
- CreatePartitions: ALTER on each topic (TOPIC_AUTHORIZATION_FAILED); a topic named twice is INVALID_REQUEST first.
- ElectLeaders: ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED for the request and each partition.
- DeleteRecords: DELETE on each topic (TOPIC_AUTHORIZATION_FAILED for its partitions, whether it exists or not).
Refused entries follow the controller's answers, as Kafka appends them.
"""
from __future__ import annotations

import copy
import uuid
from collections import Counter
from typing import Any

from kafka.protocol.admin.topics import (
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteRecordsRequest,
    DeleteTopicsRequest,
    ElectLeadersRequest,
)
from kafka.protocol.api_message import ApiMessage

from minikafka.broker.security.acl import AclOperation, ResourceType
from minikafka.broker.server.broker_services import RequestContext
from minikafka.broker.server.handlers.common import ZERO_UUID, forward, per_partition, request_not_authorized
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.errors import DEFAULT_MESSAGES, ErrorCode
from minikafka.protocol.internal_topics import METADATA_TOPIC

CONFIGS_IN_RESPONSE_MIN_VERSION = 5  # KIP-525
# Kafka's messages (its Errors' defaults where Kafka gives no other).
CREATION_NOT_AUTHORIZED = "Authorization failed."
UNKNOWN_TOPIC = "This server does not host this topic-partition."
UNKNOWN_TOPIC_ID = "This server does not host this topic ID."
DUPLICATE_NAME = "Duplicate topic name."
DUPLICATE_ID = "Duplicate topic id."
NEITHER_NAME_NOR_ID = "Neither topic name nor id were specified."
BOTH_NAME_AND_ID = "You may not specify both topic name and topic id."

# A refused entry's answer: its name (None: not disclosed) and id, the error and its message.
Refusal = tuple[str | None, uuid.UUID, ErrorCode, str | None]



def _with_entries(request: ApiMessage, field: str, entries: list) -> ApiMessage:
    """`request` with only `entries` in its list `field`: what goes to the controller once some are refused here."""
    narrowed = copy.copy(request)
    setattr(narrowed, field, entries)
    return narrowed


async def handle_create_topics(ctx: RequestContext, request: CreateTopicsRequest) -> ApiMessage:
    R = ctx.response_class
    refused: list[str] = []
    describable: set[str] | None = None  # None: every created topic's configs are answered
    if ctx.services.authorizer is not None:
        counts = Counter(t.name for t in request.topics)
        # A topic named twice and the metadata topic are the controller's to refuse, whoever asks (as Kafka's).
        checked = [t.name for t in request.topics if counts[t.name] == 1 and t.name != METADATA_TOPIC]
        if not ctx.authorize_cluster(AclOperation.CREATE, log_if_denied=False):
            refused = [name for name in checked if not ctx.authorize(AclOperation.CREATE, ResourceType.TOPIC, name)]
        describable = {name for name in checked if ctx.authorize(AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC,
                                                                  name, log_if_denied=False)}
        if refused:
            request = _with_entries(request, "topics", [t for t in request.topics if t.name not in refused])

    def failed(code: ErrorCode, message: str) -> ApiMessage:
        return ctx.response(throttle_time_ms=0, topics=[
            R.CreatableTopicResult(name=t.name, topic_id=ZERO_UUID, error_code=code, error_message=message,
                                   num_partitions=-1, replication_factor=-1, configs=None)
            for t in request.topics])

    if refused and not request.topics:
        response = ctx.response(throttle_time_ms=0, topics=[])
    else:
        response = await forward(ctx, request, failed)
    if describable is not None and ctx.version >= CONFIGS_IN_RESPONSE_MIN_VERSION:
        for result in response.topics:
            if result.error_code == ErrorCode.NONE and result.name not in describable:
                result.num_partitions, result.replication_factor, result.configs = -1, -1, []
                result.topic_config_error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
    response.topics += [R.CreatableTopicResult(name=name, topic_id=ZERO_UUID,
                                               error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                               error_message=CREATION_NOT_AUTHORIZED, num_partitions=-1,
                                               replication_factor=-1, configs=[])
                        for name in refused]
    return response


async def handle_delete_topics(ctx: RequestContext, request: DeleteTopicsRequest) -> ApiMessage:
    R = ctx.response_class
    field = "topics" if ctx.version >= 6 else "topic_names"
    refusals: dict[int, Refusal] = {}
    if ctx.services.authorizer is not None and not ctx.authorize_cluster(AclOperation.DELETE, log_if_denied=False):
        refusals = _deletion_refusals(ctx, _deletion_targets(ctx, request))
        if refusals:
            request = _with_entries(request, field, [entry for i, entry in enumerate(getattr(request, field))
                                                     if i not in refusals])

    def failed(code: ErrorCode, message: str) -> ApiMessage:
        return ctx.response(throttle_time_ms=0, responses=[
            R.DeletableTopicResult(name=name, topic_id=topic_id or ZERO_UUID, error_code=code, error_message=message)
            for name, topic_id in _deletion_targets(ctx, request)])

    if refusals and not getattr(request, field):
        response = ctx.response(throttle_time_ms=0, responses=[])
    else:
        response = await forward(ctx, request, failed)
    response.responses += [R.DeletableTopicResult(name=name, topic_id=topic_id, error_code=code,
                                                  error_message=message)
                           for name, topic_id, code, message in refusals.values()]
    return response


def _deletion_targets(ctx: RequestContext, request: DeleteTopicsRequest) -> list[tuple[str | None, Any]]:
    """Each entry's (name, topic id): by name before v6, by name or id from v6."""
    if ctx.version >= 6:
        return [(t.name, t.topic_id) for t in request.topics]
    return [(name, None) for name in request.topic_names]


def _deletion_key(name: str | None, topic_id: Any) -> Any:
    """What names a topic to delete: its id when one is given, else its name."""
    return topic_id if topic_id not in (None, ZERO_UUID) else name


def _deletion_refusals(ctx: RequestContext, targets: list[tuple[str | None, Any]]) -> dict[int, Refusal]:
    """The entries (by position) not to forward, with Kafka's answer to each: the controller's checks of the
    request's shape first, then authorization (an id the metadata does not know cannot be authorized)."""
    cache = ctx.services.metadata_cache
    keys = Counter(_deletion_key(name, topic_id) for name, topic_id in targets)
    refusals: dict[int, Refusal] = {}
    for i, (name, topic_id) in enumerate(targets):
        by_id = topic_id not in (None, ZERO_UUID)
        if name is None and not by_id:
            refusals[i] = (None, ZERO_UUID, ErrorCode.INVALID_REQUEST, NEITHER_NAME_NOR_ID)
        elif name is not None and by_id:
            refusals[i] = (name, topic_id, ErrorCode.INVALID_REQUEST, BOTH_NAME_AND_ID)
        elif keys[_deletion_key(name, topic_id)] > 1:
            refusals[i] = (None, topic_id, ErrorCode.INVALID_REQUEST, DUPLICATE_ID) if by_id else \
                (name, ZERO_UUID, ErrorCode.INVALID_REQUEST, DUPLICATE_NAME)
        elif name is not None:
            if not ctx.authorize(AclOperation.DELETE, ResourceType.TOPIC, name):
                # Whether it exists is told only to whom may describe it.
                unknown = (name not in cache.topics
                           and ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name, log_if_denied=False))
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if unknown else ErrorCode.TOPIC_AUTHORIZATION_FAILED
                refusals[i] = (name, ZERO_UUID, code, UNKNOWN_TOPIC if unknown else DEFAULT_MESSAGES[code])
        else:
            topic = cache.topics_by_id.get(topic_id)
            if topic is None:
                refusals[i] = (None, topic_id, ErrorCode.UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_ID)
            elif not ctx.authorize(AclOperation.DELETE, ResourceType.TOPIC, topic.name):
                # The name only to whom may describe it; the id is not secret.
                describable = ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, topic.name)
                refusals[i] = (topic.name if describable else None, topic_id, ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                               DEFAULT_MESSAGES[ErrorCode.TOPIC_AUTHORIZATION_FAILED])
    return refusals


async def handle_create_partitions(ctx: RequestContext, request: CreatePartitionsRequest) -> ApiMessage:
    R = ctx.response_class
    refusals: list[tuple[str, ErrorCode, str | None]] = []
    if ctx.services.authorizer is not None:
        counts = Counter(t.name for t in request.topics)
        # As Kafka: a topic named twice is INVALID_REQUEST before it is authorized.
        refusals = [(t.name, ErrorCode.INVALID_REQUEST, DUPLICATE_NAME) if counts[t.name] > 1 else
                    (t.name, ErrorCode.TOPIC_AUTHORIZATION_FAILED, None) for t in request.topics
                    if counts[t.name] > 1 or not ctx.authorize(AclOperation.ALTER, ResourceType.TOPIC, t.name)]
        if refusals:
            refused = {name for name, _code, _message in refusals}
            request = _with_entries(request, "topics", [t for t in request.topics if t.name not in refused])

    def failed(code: ErrorCode, message: str) -> ApiMessage:
        return ctx.response(throttle_time_ms=0, results=[
            R.CreatePartitionsTopicResult(name=t.name, error_code=code, error_message=message)
            for t in request.topics])

    if refusals and not request.topics:
        response = ctx.response(throttle_time_ms=0, results=[])
    else:
        response = await forward(ctx, request, failed)
    response.results += [R.CreatePartitionsTopicResult(name=name, error_code=code, error_message=message)
                         for name, code, message in refusals]
    return response


async def handle_elect_leaders(ctx: RequestContext, request: ElectLeadersRequest) -> ApiMessage:
    def failed(code: ErrorCode, message: str) -> ApiMessage:
        R = ctx.response_class
        ER = R.ReplicaElectionResult
        return ctx.response(throttle_time_ms=0, error_code=code, replica_election_results=[
            ER(topic=t.topic, partition_result=[ER.PartitionResult(partition_id=p, error_code=code,
                                                                   error_message=message)
                                                for p in t.partitions])
            for t in request.topic_partitions or []])
    if not ctx.authorize_cluster(AclOperation.ALTER):
        return failed(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, request_not_authorized(ctx))
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

    def authorized(t: Any) -> bool:
        return ctx.authorize(AclOperation.DELETE, ResourceType.TOPIC, t.name)

    return ctx.response(throttle_time_ms=0, topics=[
        R.DeleteRecordsTopicResult(name=t.name, partitions=parts)
        for t, parts in per_partition(request.topics, answer, failed, authorized)])


HANDLERS = {ApiKey.CREATE_TOPICS: handle_create_topics, ApiKey.DELETE_TOPICS: handle_delete_topics,
            ApiKey.CREATE_PARTITIONS: handle_create_partitions, ApiKey.DELETE_RECORDS: handle_delete_records,
            ApiKey.ELECT_LEADERS: handle_elect_leaders}
