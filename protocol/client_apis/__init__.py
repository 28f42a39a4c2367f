"""Client APIs whose schemas kafka-python lacks, defined from Kafka's message specs: their message classes."""
from .messages import (
    CLIENT_API_MESSAGES,
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    ShareGroupDescribeRequest,
    ShareGroupDescribeResponse,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
)

__all__ = [
    "CLIENT_API_MESSAGES",
    "ConsumerGroupDescribeRequest",
    "ConsumerGroupDescribeResponse",
    "ConsumerGroupHeartbeatRequest",
    "ConsumerGroupHeartbeatResponse",
    "ShareGroupDescribeRequest",
    "ShareGroupDescribeResponse",
    "ShareGroupHeartbeatRequest",
    "ShareGroupHeartbeatResponse",
]
