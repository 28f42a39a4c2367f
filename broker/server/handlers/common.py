"""Lookups several handler families share: topics by name or id, and authorized-operation bitfields."""
from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from minikafka.broker.metadata.metadata_image import TopicInfo
from minikafka.broker.replication.replica_manager import error_of
from minikafka.broker.server.kafka_apis import RequestContext
from minikafka.protocol.errors import ErrorCode

ZERO_UUID = uuid.UUID(int=0)

# Kafka's AclOperation codes: READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7, DESCRIBE 8, CLUSTER_ACTION 9,
# DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12. Without authorization every operation is allowed.
# kafka-python's `bitfield` fields take the set of bit positions; None encodes "not requested".
TOPIC_OPERATIONS = frozenset({3, 4, 5, 6, 7, 8, 10, 11})
CLUSTER_OPERATIONS = frozenset({5, 7, 8, 9, 10, 11, 12})
NOT_REQUESTED = None


def operations_int32(operations: frozenset[int]) -> int:
    """The same operations for schemas that declare the field as a plain int32."""
    return sum(1 << op for op in operations)


def resolve_topic(ctx: RequestContext, name: str | None,
                  topic_id: uuid.UUID | None) -> tuple[TopicInfo | None, ErrorCode]:
    """A topic named by id (newer versions) or by name, with the error Kafka gives when it is not there."""
    cache = ctx.broker.metadata_cache
    if topic_id is not None and topic_id != ZERO_UUID:
        topic = cache.topics_by_id.get(topic_id)
        return topic, ErrorCode.NONE if topic else ErrorCode.UNKNOWN_TOPIC_ID
    topic = cache.topics.get(name) if name is not None else None
    return topic, ErrorCode.NONE if topic else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def per_partition(topics: list, answer: Callable[[Any, Any], Any],
                  failed: Callable[[Any, ErrorCode], Any]) -> list[tuple[Any, list]]:
    """Kafka's per-partition answering: each requested partition gets `answer(topic, partition)`, or, when that
    raises, `failed(partition, code)` with the error's Kafka code; nothing fails the whole request."""
    out = []
    for t in topics:
        parts = []
        for p in t.partitions:
            try:
                parts.append(answer(t, p))
            except Exception as exc:  # noqa: BLE001 - reported per partition
                parts.append(failed(p, error_of(exc).code))
        out.append((t, parts))
    return out
