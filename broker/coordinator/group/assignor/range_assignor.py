"""Kafka's `range` assignor (RangeAssignor of Kafka 4.1): each topic's partitions cut into contiguous ranges, one per
subscriber in member order, the first `partitions % subscribers` ranges one longer.

Members are ordered static members first (by instance id), then the others by member id, so members subscribed to
co-partitioned topics (same partition counts) get the same partition numbers of each topic, which joins need. It
keeps nothing of the current assignment and reads no racks, as in Kafka 4.1.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass

from minikafka.broker.coordinator.group.assignor.assignor_spec import (
    GroupAssignment,
    GroupSpec,
    PartitionAssignorError,
    SubscribedTopicDescriber,
    SubscriptionType,
)

NAME = "range"


@dataclass
class _TopicRanges:
    """Where the next member's range of one topic starts, and how many ranges still get an extra partition."""

    num_partitions: int
    num_members: int = 0
    min_quota: int = -1
    extra_partitions: int = -1
    next_range: int = 0

    def next_partitions(self) -> frozenset[int]:
        if self.min_quota == -1:
            self.min_quota, self.extra_partitions = divmod(self.num_partitions, self.num_members)
        quota = self.min_quota
        if self.extra_partitions > 0:
            quota += 1
            self.extra_partitions -= 1
        start = self.next_range
        self.next_range = min(start + quota, self.num_partitions)
        return frozenset(range(start, self.next_range))


class RangeAssignor:
    """The `range` server assignor."""

    name = NAME

    def assign(self, group_spec: GroupSpec, describer: SubscribedTopicDescriber) -> GroupAssignment:
        """The group's new target assignment."""
        if not group_spec.members:
            return {}
        member_ids = self._sorted_member_ids(group_spec)
        if group_spec.subscription_type is SubscriptionType.HOMOGENEOUS:
            # Every member has every topic, so one subscription says what all take.
            subscribed = group_spec.members[member_ids[0]].subscribed_topic_ids
            topics = {t: _TopicRanges(self._num_partitions(describer, t), len(member_ids)) for t in subscribed}
        else:
            topics = {}
            for member_id in member_ids:
                for topic_id in group_spec.members[member_id].subscribed_topic_ids:
                    if topic_id not in topics:
                        topics[topic_id] = _TopicRanges(self._num_partitions(describer, topic_id))
                    topics[topic_id].num_members += 1
        assignments: GroupAssignment = {}
        for member_id in member_ids:
            assignment: dict[uuid.UUID, frozenset[int]] = {}
            for topic_id in group_spec.members[member_id].subscribed_topic_ids:
                partitions = topics[topic_id].next_partitions()
                if partitions:
                    assignment[topic_id] = partitions
            assignments[member_id] = assignment
        return assignments

    @staticmethod
    def _sorted_member_ids(group_spec: GroupSpec) -> list[str]:
        def order(member_id: str) -> tuple[int, str]:
            instance_id = group_spec.members[member_id].instance_id
            return (0, instance_id) if instance_id is not None else (1, member_id)
        return sorted(group_spec.members, key=order)

    @staticmethod
    def _num_partitions(describer: SubscribedTopicDescriber, topic_id: uuid.UUID) -> int:
        count = describer.num_partitions(topic_id)
        if count == -1:
            raise PartitionAssignorError("Member is subscribed to a non-existent topic")
        return count

