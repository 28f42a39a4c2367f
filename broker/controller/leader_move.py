"""Moving a partition's leadership to a chosen replica: a fault a test injects through the controller.

Kafka moves leadership to the preferred replica (ElectLeaders) or by reassigning replicas; a test that wants one
particular replica to lead gets a controlled move instead, to a replica a clean election could have picked: in the
ISR, so it holds every committed record, and active (registered, unfenced, not shutting down). The move is one
PartitionChangeRecord naming the new leader, which bumps the leader epoch when replayed, as any election does.
The undo is a preferred-leader election.
"""
from __future__ import annotations

from minikafka.broker.controller.partition_change_builder import PARTITION_CHANGE_RECORD_VERSION
from minikafka.broker.metadata.metadata_image import MetadataImage
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.protocol.metadata_records import PartitionChangeRecord


def leader_move(image: MetadataImage, topic_name: str, index: int, to: int) -> PartitionChangeRecord | None:
    """The record making broker `to` the partition's leader; None when it leads already; KafkaError (with the
    reason) when it cannot lead."""
    topic = image.topics.get(topic_name)
    partition = topic.partitions.get(index) if topic is not None else None
    if topic is None or partition is None:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no partition {topic_name}-{index}")
    where = f"{topic_name}-{index}"
    if to not in partition.replicas:
        raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                         f"broker {to} is not a replica of {where} (replicas {partition.replicas})")
    if to not in partition.isr:
        raise KafkaError(ErrorCode.INELIGIBLE_REPLICA,
                         f"broker {to} is not in the ISR {partition.isr} of {where}: it may lack committed records")
    if not image.is_active(to):
        raise KafkaError(ErrorCode.BROKER_NOT_AVAILABLE,
                         f"broker {to} is fenced or shutting down, so it cannot lead {where}")
    if partition.leader == to:
        return None
    return PartitionChangeRecord(version=PARTITION_CHANGE_RECORD_VERSION, partition_id=index,
                                 topic_id=topic.topic_id, leader=to)
