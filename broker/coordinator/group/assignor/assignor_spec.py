"""What a server-side assignor reads and returns (Kafka's GroupSpec, MemberSubscription, SubscribedTopicDescriber and
GroupAssignment), so assignors are pure functions of the group and the topics' metadata.

An assignment maps topic ids to partition numbers. Assignors never mutate what they are given: a member whose
assignment does not change gets back the very mapping it came with, which lets the target assignment builder skip it.
"""
from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol

Assignment = Mapping[uuid.UUID, frozenset[int]]
GroupAssignment = dict[str, Assignment]

EMPTY_ASSIGNMENT: Assignment = {}


class PartitionAssignorError(Exception):
    """The assignor cannot compute an assignment (Kafka's PartitionAssignorException): the heartbeat that asked for
    it fails with UNKNOWN_SERVER_ERROR, and nothing changes."""


class SubscriptionType(Enum):
    """Whether every member subscribes to the same topics; the assignors pick their algorithm by it."""

    HOMOGENEOUS = "Homogeneous"
    HETEROGENEOUS = "Heterogeneous"


@dataclass(frozen=True)
class MemberSubscription:
    """One member as the assignor sees it: rack, static instance id, subscribed topic ids and its current target
    assignment (the starting point that makes assignors sticky)."""

    subscribed_topic_ids: frozenset[uuid.UUID]
    assignment: Assignment = field(default_factory=dict)
    rack_id: str | None = None
    instance_id: str | None = None


@dataclass(frozen=True)
class GroupSpec:
    """The members to assign, the group's subscription type and the partitions owned in the current target
    assignment (topic id -> partition -> member id)."""

    members: Mapping[str, MemberSubscription]
    subscription_type: SubscriptionType = SubscriptionType.HOMOGENEOUS
    inverted_assignment: Mapping[uuid.UUID, Mapping[int, str]] = field(default_factory=dict)

    def member_ids(self) -> list[str]:
        """The member ids in the order the members were given: assignors take members in this order, as Kafka's
        take them in its map's order (the target assignment builder gives Kafka's HashMap order)."""
        return list(self.members)

    def is_partition_assigned(self, topic_id: uuid.UUID, partition: int) -> bool:
        """Whether the current target assignment gives the partition to a member."""
        return partition in self.inverted_assignment.get(topic_id, {})


@dataclass(frozen=True)
class TopicMetadata:
    """A topic of the cluster's metadata: its id, name, partition count and, where known, each partition's replica
    racks."""

    topic_id: uuid.UUID
    name: str
    num_partitions: int
    partition_racks: Mapping[int, frozenset[str]] = field(default_factory=dict)


class SubscribedTopicDescriber:
    """The topics an assignment may use, from the broker's metadata image (Kafka's SubscribedTopicDescriber over
    its CoordinatorMetadataImage): partition counts and racks by topic id, and ids by name to resolve
    subscriptions."""

    def __init__(self, topics: Iterable[TopicMetadata] = ()) -> None:
        self._by_id = {t.topic_id: t for t in topics}
        self._by_name = {t.name: t for t in self._by_id.values()}

    def num_partitions(self, topic_id: uuid.UUID) -> int:
        """The topic's partition count, -1 when the topic does not exist."""
        topic = self._by_id.get(topic_id)
        return -1 if topic is None else topic.num_partitions

    def racks_for_partition(self, topic_id: uuid.UUID, partition: int) -> frozenset[str]:
        """The racks of the partition's replicas; empty when unknown."""
        topic = self._by_id.get(topic_id)
        return frozenset() if topic is None else topic.partition_racks.get(partition, frozenset())

    def topic_id(self, name: str) -> uuid.UUID | None:
        """The id of the topic named `name`, None when it does not exist."""
        topic = self._by_name.get(name)
        return None if topic is None else topic.topic_id

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        """The name of the topic with id `topic_id`, None when it does not exist."""
        topic = self._by_id.get(topic_id)
        return None if topic is None else topic.name

    def topic_names(self) -> list[str]:
        """The names of every topic, to resolve subscription regexes against."""
        return list(self._by_name)

    def topic_ids(self, names: Iterable[str]) -> frozenset[uuid.UUID]:
        """The ids of the named topics that exist (Kafka's TopicIds: a subscription to a missing topic is ignored)."""
        return frozenset(tid for tid in map(self.topic_id, names) if tid is not None)


class PartitionAssignor(Protocol):
    """A server-side assignor (Kafka's ConsumerGroupPartitionAssignor), chosen by name."""

    @property
    def name(self) -> str: ...

    def assign(self, group_spec: GroupSpec, describer: SubscribedTopicDescriber) -> GroupAssignment:
        """Each member's new target assignment; PartitionAssignorError when there is none."""
        ...
