"""Metadata (v0-13) and DescribeTopicPartitions (v0): brokers, topics, partitions, leaders, leader epochs, topic ids.

Metadata per version:
- v0: an empty topic list asks for every topic; from v1 an empty list asks for none and a null list for all;
- v1+: broker racks, the controller id and whether a topic is internal; v2+ the cluster id; v3+ throttle time;
- v4+: allow_auto_topic_creation; before v4 a missing topic is auto-created whenever auto.create.topics.enable
  allows it;
- v5+: offline replicas (replicas on fenced or unregistered brokers); v7+: each partition's leader epoch;
- v8+: topic authorized operations when asked for (without an authorizer, all of them); cluster authorized
  operations (v8-10) when asked for (none without DESCRIBE on the cluster);
- v9+: flexible; v10+: every topic carries its id, and a topic asked for by id alone (null name) is resolved by
  it (UNKNOWN_TOPIC_ID when unknown), which Kafka serves from v12; v13 adds a top-level error code, always NONE.
An invalid topic name is INVALID_TOPIC_EXCEPTION; auto-creation goes to the controller, and a failed one answers
the creation's error.

Brokers are the live (unfenced) ones with an endpoint on the listener the request came in on; the controller id is
a random live broker, as KRaft brokers answer (clients reach the controller only through brokers), or in ZooKeeper
mode the current controller. A partition
whose leader is unknown or gone answers LEADER_NOT_AVAILABLE with leader -1 (LISTENER_NOT_FOUND from v6 when its
leader lacks this listener); v0 lists only live replicas and answers REPLICA_NOT_AVAILABLE when some are not.

Each topic's entry is encoded once per change of the metadata image and kept in the metadata cache: a client asking
for every topic again and again costs a join of bytes, not a build and encode of every partition. While fault rules
are set, which rewrite responses, the response is built whole instead.

With an authorizer (Kafka's rules): a request for every topic lists only the topics the principal may DESCRIBE; a
topic named that it may not describe is TOPIC_AUTHORIZATION_FAILED whether it exists or not (its existence is not
disclosed), and one asked for by id is answered with its id and a null name; auto-creation needs CREATE on the
cluster or on the topic (TOPIC_AUTHORIZATION_FAILED, nothing created). Those answers are built per request, not
taken from the per-image encoding. DescribeTopicPartitions filters the same way.

DescribeTopicPartitions (KIP-966, the Java AdminClient's describeTopics) is flexible and pages through the topics
in name order with a cursor, at most response_partition_limit partitions (capped at Kafka's 2000, at least 1) per
answer.
"""
from __future__ import annotations

import logging
import uuid
from collections.abc import Collection
from typing import Any

from kafka.protocol.admin.topics import DescribeTopicPartitionsRequest
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.metadata.metadata import MetadataRequest

from minikafka.broker.metadata.metadata_cache import MetadataCache, is_internal
from minikafka.broker.metadata.metadata_image import PartitionInfo, TopicInfo
from minikafka.broker.security.acl import AclOperation, ResourceType
from minikafka.broker.server.broker_services import RequestContext
from minikafka.broker.server.handlers.common import (
    NOT_REQUESTED,
    ZERO_UUID,
    cluster_authorized_operations,
    operation_set,
)
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.codec import RecordsSplicer
from minikafka.protocol.errors import ErrorCode
from minikafka.protocol.varint import encode_uvarint
from minikafka.storage.log_dir import validate_topic_name

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
    cache = ctx.services.metadata_cache
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
    services = ctx.services
    cache = services.metadata_cache
    include_ops = ctx.version >= 8 and request.include_topic_authorized_operations
    allow_auto_create = request.allow_auto_topic_creation if ctx.version >= 4 else True
    every_topic = request.topics is None or (ctx.version == 0 and not request.topics)
    wanted = [] if every_topic else [(t.name, t.topic_id if ctx.version >= 10 else None) for t in request.topics]
    denied: set[str] = set()
    if services.authorizer is not None:
        wanted, denied = _authorized_topics(ctx, every_topic, wanted)
    missing = [name for name in dict.fromkeys(name for name, _ in wanted if name is not None)
               if name not in cache.topics and name not in denied and not validate_topic_name(name)]
    creation_errors: dict[str, ErrorCode] = {}
    if missing and allow_auto_create and services.authorizer is not None \
            and services.config.get("auto.create.topics.enable") \
            and not ctx.authorize_cluster(AclOperation.CREATE, log_if_denied=False):
        # Auto-creation needs CREATE on the cluster or on the topic: a topic it would create without is refused.
        for name in missing:
            if not ctx.authorize(AclOperation.CREATE, ResourceType.TOPIC, name):
                creation_errors[name] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        missing = [name for name in missing if name not in creation_errors]
    if missing and allow_auto_create:
        creation_errors.update(await services.auto_topic_creation.create_topics(missing))
    if services.faults.error_rules or services.authorizer is not None:
        if every_topic and services.authorizer is None:  # with one, _authorized_topics listed them
            wanted = [(name, None) for name in sorted(cache.topics)]
        topics = [_topic_response(ctx, include_ops, name, topic_id, creation_errors, denied)
                  for name, topic_id in wanted]
    else:
        topics = []
        ctx.splicer = _encoded_topics(ctx, include_ops, every_topic, wanted, creation_errors)
    brokers = [ctx.response_class.MetadataResponseBroker(node_id=b.broker_id, host=e.host, port=e.port, rack=b.rack)
               for b, e in cache.alive_brokers(ctx.conn.listener)]
    cluster_ops = NOT_REQUESTED
    if 8 <= ctx.version <= 10 and request.include_cluster_authorized_operations:
        cluster_ops = cluster_authorized_operations(ctx)
    return ctx.response(throttle_time_ms=0, brokers=brokers, cluster_id=cache.cluster_id,
                        controller_id=cache.controller_id(), topics=topics,
                        authorized_operations=cluster_ops, error_code=ErrorCode.NONE)


def _authorized_topics(ctx: RequestContext, every_topic: bool, wanted: list[tuple[str | None, uuid.UUID | None]]
                       ) -> tuple[list[tuple[str | None, uuid.UUID | None]], set[str]]:
    """Kafka's DESCRIBE filter: a request for every topic lists only those the principal may describe; a topic
    named that it may not is answered TOPIC_AUTHORIZATION_FAILED (whether it exists or not), and one asked for by
    id with a null name (ids are not secret)."""
    cache = ctx.services.metadata_cache
    if every_topic:
        return [(name, None) for name in sorted(cache.topics)
                if ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name, log_if_denied=False)], set()
    denied: set[str] = set()
    for name, topic_id in wanted:
        if name is None and topic_id is not None:
            topic = cache.topics_by_id.get(topic_id)
            name = topic.name if topic is not None else None
        if name is not None and not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name):
            denied.add(name)
    return wanted, denied


def _topic_response(ctx: RequestContext, include_ops: bool, name: str | None, topic_id: uuid.UUID | None,
                    creation_errors: dict[str, ErrorCode], denied: Collection[str] = ()) -> Any:
    """One topic's entry: the topic as the cache has it, or the error of looking it up (or creating it)."""
    cls = ctx.response_class.MetadataResponseTopic
    cache = ctx.services.metadata_cache
    error = ErrorCode.NONE
    topic = None
    if name is None and topic_id is not None and topic_id != ZERO_UUID:
        topic = cache.topics_by_id.get(topic_id)
        if topic is None:
            error = ErrorCode.UNKNOWN_TOPIC_ID
        elif topic.name in denied:
            topic, error = None, ErrorCode.TOPIC_AUTHORIZATION_FAILED
    elif name is not None and name in denied:
        error, topic_id = ErrorCode.TOPIC_AUTHORIZATION_FAILED, None
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
        return cls(error_code=error, name=name, topic_id=topic_id or ZERO_UUID, is_internal=False, partitions=[],
                   authorized_operations=NOT_REQUESTED)
    operations = NOT_REQUESTED
    if include_ops:
        operations = operation_set(ctx.authorized_operations(ResourceType.TOPIC, topic.name))
    return cls(error_code=ErrorCode.NONE, name=topic.name, topic_id=topic.topic_id, is_internal=is_internal(topic.name),
               partitions=_partition_entries(cls.MetadataResponsePartition, ctx, topic),
               authorized_operations=operations)


# ---- encoding once per metadata image ------------------------------------------------------------------------

EVERY_TOPIC = object()  # in a derived key: the whole topics array of a request for every topic


def _encoded_topics(ctx: RequestContext, include_ops: bool, every_topic: bool,
                    wanted: list[tuple[str | None, uuid.UUID | None]],
                    creation_errors: dict[str, ErrorCode]) -> EncodedTopics:
    """The response's topics array, from the topics' entries encoded for this image, listener and version."""
    cache = ctx.services.metadata_cache
    per_image = (ctx.version, ctx.conn.listener, include_ops)

    def encoded(name: str) -> bytes:  # of a topic the cache has
        return cache.derived((*per_image, name), lambda: _encode_topic(
            ctx, _topic_response(ctx, include_ops, name, None, {})))

    if every_topic:
        count, joined = cache.derived((*per_image, EVERY_TOPIC), lambda: (
            len(cache.topics), b"".join([encoded(name) for name in sorted(cache.topics)])))
        return EncodedTopics(count, [joined], ctx.version)
    entries = []
    for name, topic_id in wanted:
        if name is not None and name in cache.topics:  # a name is looked up by name, whatever id comes with it
            entries.append(encoded(name))
        else:  # asked by id, or not there: an entry of this request's own
            entries.append(_encode_topic(ctx, _topic_response(ctx, include_ops, name, topic_id, creation_errors)))
    return EncodedTopics(len(entries), entries, ctx.version)


def _tail_size(version: int) -> int:
    """Bytes after the topics array in a Metadata response body: cluster authorized operations (int32, v8-10), the
    top-level error code (int16, v13+) and, in flexible versions (v9+), the empty tagged fields."""
    return (4 if 8 <= version <= 10 else 0) + (2 if version >= 13 else 0) + (1 if version >= 9 else 0)


def _array_size_bytes(version: int) -> int:
    """Bytes of an array's element count: an int32, or from v9 (flexible) a uvarint, one byte for 0 or 1 elements."""
    return 1 if version >= 9 else 4


_EMPTY_BODIES: dict[int, bytes] = {}


def _encode_topic(ctx: RequestContext, entry: Any) -> bytes:
    """One topic entry's bytes: cut from a response that holds it alone, past what an empty response holds."""
    version = ctx.version
    empty = _EMPTY_BODIES.get(version)
    if empty is None:
        empty = _EMPTY_BODIES[version] = _bare_response(ctx, []).encode(version=version)
    one = _bare_response(ctx, [entry]).encode(version=version)
    tail = _tail_size(version)
    return one[len(empty) - tail:len(one) - tail]


def _bare_response(ctx: RequestContext, topics: list) -> ApiMessage:
    return ctx.response(throttle_time_ms=0, brokers=[], cluster_id=None, controller_id=-1, topics=topics,
                        authorized_operations=NOT_REQUESTED, error_code=ErrorCode.NONE)


class EncodedTopics(RecordsSplicer):
    """Puts encoded topic entries in the place of the empty topics array the response was encoded with, as the
    records of a fetch are put in place of their stand-ins."""

    def __init__(self, count: int, entries: list[bytes], version: int) -> None:
        super().__init__()
        self._count = count
        self._entries = entries
        self._version = version

    def splice(self, body: bytes, flexible: bool) -> list[bytes]:
        tail = len(body) - _tail_size(self._version)
        head = tail - _array_size_bytes(self._version)
        count = encode_uvarint(self._count + 1) if flexible else self._count.to_bytes(4, "big")
        return [body[:head], count, *self._entries, body[tail:]]


async def handle_describe_topic_partitions(ctx: RequestContext,
                                           request: DescribeTopicPartitionsRequest) -> ApiMessage:
    """KIP-966's paginated topic description (used by the Java AdminClient's describeTopics)."""
    R = ctx.response_class
    PR = R.DescribeTopicPartitionsResponseTopic.DescribeTopicPartitionsResponsePartition
    cache = ctx.services.metadata_cache
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
        describable = ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name, log_if_denied=bool(request.topics))
        if not describable and not request.topics:
            continue  # every topic: only those the principal may describe
        if topic is None or not describable:
            error = ErrorCode.TOPIC_AUTHORIZATION_FAILED if not describable else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            topics.append(R.DescribeTopicPartitionsResponseTopic(
                error_code=error, name=name, topic_id=ZERO_UUID, is_internal=False, partitions=[],
                topic_authorized_operations=ctx.authorized_operations(ResourceType.TOPIC, name)))
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
            partitions=parts, topic_authorized_operations=ctx.authorized_operations(ResourceType.TOPIC, name)))
        if start + len(parts) < len(topic.partitions):
            next_cursor = R.Cursor(topic_name=name, partition_index=start + len(parts))
            break
    return ctx.response(throttle_time_ms=0, topics=topics, next_cursor=next_cursor)


HANDLERS = {ApiKey.METADATA: handle_metadata, ApiKey.DESCRIBE_TOPIC_PARTITIONS: handle_describe_topic_partitions}
