"""Partition reassignments on the controller (KIP-455: Kafka's ReplicationControlManager alterPartitionReassignments
and listPartitionReassignments).

A reassignment starts with one PartitionChangeRecord: replicas become the target followed by the current replicas
the target drops, with adding and removing replicas set. The new replicas are followers like any other: they
create their logs, fetch from the leader and join the ISR through the leader's AlterPartition; the ISR change that
brings the last target replica in also completes the reassignment (partition_change_builder), electing a new leader
when the old one is being removed. Brokers dropped from the replica list stop and delete their replicas when they
see the change. Cancelling (a null replica list) goes back to the original replicas. Nothing here keeps state: an
ongoing reassignment is the adding and removing replicas of the partition in the metadata image, so a controller
that takes over resumes it.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from minikafka.broker.controller.configuration_control import unclean_leader_election_enabled
from minikafka.broker.controller.controller_config import QuorumControllerConfig
from minikafka.broker.controller.partition_change_builder import Election, build_partition_change
from minikafka.broker.controller.partition_reassignment_replicas import (
    PartitionReassignmentReplicas,
    PartitionReassignmentRevert,
)
from minikafka.broker.metadata.metadata_image import MetadataImage, PartitionInfo, TopicInfo
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.protocol.metadata_records import PartitionChangeRecord


@dataclass(frozen=True)
class ReassignablePartition:
    """One partition of an AlterPartitionReassignments request: its target replicas, or None to cancel."""

    topic: str
    index: int
    replicas: list[int] | None


@dataclass(frozen=True)
class OngoingPartitionReassignment:
    topic: str
    index: int
    replicas: list[int]
    adding_replicas: list[int]
    removing_replicas: list[int]


class PartitionReassignment:
    def __init__(self, image: MetadataImage, config: QuorumControllerConfig) -> None:
        self._image = image
        self._config = config

    def alter(self, target: ReassignablePartition,
              allow_replication_factor_change: bool = True) -> PartitionChangeRecord | None:
        """The record starting, changing or cancelling the reassignment of one partition (None when nothing needs
        to change), or KafkaError with Kafka's code."""
        topic = self._image.topics.get(target.topic)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {target.topic}.")
        partition = topic.partitions.get(target.index)
        if partition is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             f"Unable to find partition {target.topic}:{target.index}.")
        if target.replicas is None:
            return self._cancel(topic, target.index, partition)
        return self._change(topic, target.index, partition, list(target.replicas), allow_replication_factor_change)

    def _change(self, topic: TopicInfo, index: int, partition: PartitionInfo, target: list[int],
                allow_replication_factor_change: bool) -> PartitionChangeRecord | None:
        self._validate(target)
        ongoing = PartitionReassignmentReplicas(list(partition.removing_replicas), list(partition.adding_replicas),
                                                list(partition.replicas))
        current = ongoing.original_replicas()
        if not allow_replication_factor_change and len(target) != len(current):
            raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                             f"The replication factor is changed from {len(current)} to {len(target)}")
        # A new target replaces an ongoing reassignment: the move is worked out from the replicas it has now.
        reassignment = PartitionReassignmentReplicas.of(list(partition.replicas), target)
        return build_partition_change(topic, index, partition, self._image.is_active,
                                      target_replicas=reassignment.replicas, target_removing=reassignment.removing,
                                      target_adding=reassignment.adding)

    def _validate(self, replicas: list[int]) -> None:
        """Kafka's checks of a manual assignment: not empty, registered brokers, each once."""
        if not replicas:
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             "The manual partition assignment includes an empty replica list.")
        seen: set[int] = set()
        for broker_id in sorted(replicas):
            if broker_id not in self._image.brokers:
                raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"The manual partition assignment includes broker {broker_id}, but no such broker "
                                 f"is registered.")
            if broker_id in seen:
                raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"The manual partition assignment includes the broker {broker_id} more than once.")
            seen.add(broker_id)

    def _cancel(self, topic: TopicInfo, index: int, partition: PartitionInfo) -> PartitionChangeRecord | None:
        if not partition.is_reassigning:
            raise KafkaError(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "No partition reassignment is in progress.")
        ongoing = PartitionReassignmentReplicas(list(partition.removing_replicas), list(partition.adding_replicas),
                                                list(partition.replicas))
        revert = PartitionReassignmentRevert.of(ongoing, list(partition.isr))
        unclean = unclean_leader_election_enabled(self._image, topic.name, self._config.node_id,
                                                  self._config.log_defaults)
        if revert.unclean and not unclean:
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"Unable to revert partition assignment for {topic.name}:{index} because it would "
                             f"require an unclean leader election.")
        return build_partition_change(topic, index, partition, self._image.is_active,
                                      election=Election.UNCLEAN if unclean else Election.ONLINE,
                                      target_isr=revert.isr, target_replicas=revert.replicas, target_removing=[],
                                      target_adding=[])

    def list(self, wanted: Sequence[tuple[str, Sequence[int]]] | None) -> list[OngoingPartitionReassignment]:
        """The ongoing reassignments of the named partitions, or of all with None; unknown topics and partitions
        and those not moving are left out, as Kafka does."""
        if wanted is None:
            named = [(topic.name, index) for topic, index, _ in self._image.partitions()]
        else:
            named = [(name, index) for name, indexes in wanted for index in indexes]
        ongoing = []
        for name, index in named:
            topic = self._image.topics.get(name)
            partition = topic.partitions.get(index) if topic is not None else None
            if partition is not None and partition.is_reassigning:
                ongoing.append(OngoingPartitionReassignment(name, index, list(partition.replicas),
                                                            list(partition.adding_replicas),
                                                            list(partition.removing_replicas)))
        return ongoing
