"""Lookups several handler families share: topics by name or id, and authorized-operation bitfields."""
from __future__ import annotations

import uuid

from minikafka.protocol.errors import ErrorCode

from ..controller import TopicRegistration
from ..kafka_apis import RequestContext

ZERO_UUID = uuid.UUID(int=0)

# Kafka's AclOperation codes: READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7, DESCRIBE 8, DESCRIBE_CONFIGS 10,
# ALTER_CONFIGS 11. Without authorization every operation is allowed.
TOPIC_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))
CLUSTER_OPERATIONS = sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))
NOT_REQUESTED = -2147483648


def resolve_topic(ctx: RequestContext, name: str | None, topic_id: uuid.UUID | None) -> tuple[TopicRegistration | None, ErrorCode]:
    """A topic named by id (newer versions) or by name, with the error Kafka gives when it is not there."""
    controller = ctx.broker.controller
    if topic_id is not None and topic_id != ZERO_UUID:
        topic = controller.topics_by_id.get(topic_id)
        return topic, ErrorCode.NONE if topic else ErrorCode.UNKNOWN_TOPIC_ID
    topic = controller.topics.get(name) if name is not None else None
    return topic, ErrorCode.NONE if topic else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
