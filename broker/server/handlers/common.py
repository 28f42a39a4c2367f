"""What several handler families share: topics by name or id, authorized-operation bitfields, per-partition
answering, forwarding a request to the controller, and what the group families (classic, consumer, share) share."""
from __future__ import annotations

import math
import uuid
from collections.abc import Callable
from typing import Any

from kafka.protocol.api_message import ApiMessage

from minikafka.broker.coordinator.group.assignor.assignor_spec import Assignment
from minikafka.broker.metadata.metadata_image import TopicInfo
from minikafka.broker.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from minikafka.broker.server.broker_services import RequestContext
from minikafka.broker.server.forwarding import ForwardingError
from minikafka.protocol.errors import ErrorCode, error_of
from minikafka.protocol.internal_topics import GROUP_METADATA_TOPIC

ZERO_UUID = uuid.UUID(int=0)
# A purgatory key nothing checks: only the shutdown's wake_all ends a wait on it.
SHUTDOWN_KEY = "shutdown"

# authorized_operations not asked for: kafka-python's `bitfield` fields take the set of operation codes, and None
# encodes "not requested" (-2147483648 on the wire).
NOT_REQUESTED = None


def request_not_authorized(ctx: RequestContext) -> str:
    """Kafka's message for a request refused as a whole for want of a cluster operation (its broker names the
    request object; here its API and principal)."""
    return f"Request {ctx.schema.request.__name__.removesuffix('Request')} from {ctx.principal} is not authorized."


def operation_set(bitfield: int) -> frozenset[int]:
    """An authorized_operations bitfield as the operation codes kafka-python's bitfield fields take."""
    return frozenset(op for op in range(32) if bitfield >> op & 1)


def cluster_authorized_operations(ctx: RequestContext) -> frozenset[int]:
    """Metadata's and DescribeCluster's cluster authorized operations: the principal's, if it may DESCRIBE the
    cluster, else none (Kafka's rule)."""
    if not ctx.authorize_cluster(AclOperation.DESCRIBE):
        return frozenset()
    return operation_set(ctx.authorized_operations(ResourceType.CLUSTER, CLUSTER_NAME))


def resolve_topic(ctx: RequestContext, name: str | None,
                  topic_id: uuid.UUID | None) -> tuple[TopicInfo | None, ErrorCode]:
    """A topic named by id (newer versions) or by name, with the error Kafka gives when it is not there."""
    cache = ctx.services.metadata_cache
    if topic_id is not None and topic_id != ZERO_UUID:
        topic = cache.topics_by_id.get(topic_id)
        return topic, ErrorCode.NONE if topic else ErrorCode.UNKNOWN_TOPIC_ID
    topic = cache.topics.get(name) if name is not None else None
    return topic, ErrorCode.NONE if topic else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def per_partition(topics: list, answer: Callable[[Any, Any], Any], failed: Callable[[Any, ErrorCode], Any],
                  authorized: Callable[[Any], bool] = lambda t: True) -> list[tuple[Any, list]]:
    """Kafka's per-partition answering: each requested partition gets `answer(topic, partition)`, or, when that
    raises, `failed(partition, code)` with the error's Kafka code; nothing fails the whole request. The partitions
    of a topic not `authorized` fail with TOPIC_AUTHORIZATION_FAILED without being looked at."""
    out = []
    for t in topics:
        parts = []
        allowed = authorized(t)
        for p in t.partitions:
            if not allowed:
                parts.append(failed(p, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            try:
                parts.append(answer(t, p))
            except Exception as exc:  # noqa: BLE001 - reported per partition
                parts.append(failed(p, error_of(exc).code))
        out.append((t, parts))
    return out


async def forward(ctx: RequestContext, request: ApiMessage,
                  failed: Callable[[ErrorCode, str], ApiMessage]) -> ApiMessage:
    """A handler's whole work for a forwarded request: the controller's answer, or `failed`'s (every entry with
    the error and message); waiting for this broker's metadata to catch up ends once it begins to shut down."""
    try:
        return await ctx.services.forwarding.forward(request, ctx.version, lambda: shutdown_begins(ctx))
    except ForwardingError as exc:
        return failed(exc.code, str(exc))


async def shutdown_begins(ctx: RequestContext) -> None:
    """Returns once the broker begins to shut down: when it stops taking requests, its purgatory's wake_all ends
    every wait in it, this one too."""
    if not ctx.draining():
        await ctx.services.purgatory.wait_any([SHUTDOWN_KEY], math.inf)


async def ensure_offsets_topic(ctx: RequestContext) -> None:
    """A group request may come before any coordinator lookup (from a client that remembers its coordinator): the
    coordinator's partitions come into being with it, as they would with the lookup."""
    if GROUP_METADATA_TOPIC not in ctx.services.metadata_cache.topics:
        await ctx.services.auto_topic_creation.create_topics([GROUP_METADATA_TOPIC], internal=True)


def client_host(ctx: RequestContext) -> str:
    """Kafka reports a group member's peer as InetAddress.toString(): '/' then the address."""
    host = ctx.conn.peer.rsplit(":", 1)[0] if ":" in ctx.conn.peer else ctx.conn.peer
    return "/" + host


def described_assignment(ctx: RequestContext, assignment_type: Any, assignment: Assignment) -> object:
    """A member's assignment as ConsumerGroupDescribe and ShareGroupDescribe answer it (`assignment_type`, their
    Assignment): by topic id with the topic's name, partitions sorted; deleted topics left out."""
    topics = []
    for topic_id, partitions in sorted(assignment.items()):
        topic = ctx.services.metadata_cache.topics_by_id.get(topic_id)
        if topic is not None and partitions:
            topics.append(assignment_type.TopicPartitions(topic_id=topic_id, topic_name=topic.name,
                                                          partitions=sorted(partitions)))
    return assignment_type(topic_partitions=topics)
