"""A KIP-932 share group (Kafka's ShareGroup over ModernGroup): its epochs, members, target assignment, and which of
its share partitions have their state initialized in the share coordinator.

As the consumer group, it changes only through the mutators the record replay calls, so a coordinator that loads
`__consumer_offsets` rebuilds it exactly. Its state is Empty without members and Stable with them (a share group
never waits on a revocation); Dead is only what a deleted group answers.
"""
from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum

from minikafka.broker.coordinator.group.assignor.assignor_spec import EMPTY_ASSIGNMENT, Assignment, SubscriptionType
from minikafka.broker.coordinator.group.share.share_group_member import ShareGroupMember
from minikafka.protocol.errors import ErrorCode, KafkaError

SHARE_PROTOCOL_TYPE = "share"


class ShareGroupState(Enum):
    """The group's state as Kafka names it (ListGroups, ShareGroupDescribe)."""

    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True)
class InitMapValue:
    """A topic's share partitions in one stage of their state's life: its name, the partitions and when they
    entered the stage (ms; when replayed, the replay's time, as the record does not keep it)."""

    name: str
    partitions: frozenset[int]
    timestamp: int = -1


@dataclass
class StatePartitionMetadata:
    """Kafka's ShareGroupStatePartitionMetadataInfo: the topics whose share state is being initialized, is
    initialized, or is being deleted, in the share coordinator."""

    initializing_topics: dict[uuid.UUID, InitMapValue] = field(default_factory=dict)
    initialized_topics: dict[uuid.UUID, InitMapValue] = field(default_factory=dict)
    deleting_topics: dict[uuid.UUID, str] = field(default_factory=dict)


class ShareGroup:
    """One share group's state. Epochs start at 0."""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.metadata_hash = 0
        self.target_assignment_epoch = 0
        self.members: dict[str, ShareGroupMember] = {}
        self.target_assignment: dict[str, Assignment] = {}
        self.inverted_target_assignment: dict[uuid.UUID, dict[int, set[str]]] = {}
        self.subscribed_topic_names: dict[str, int] = {}
        self.subscription_type = SubscriptionType.HOMOGENEOUS
        self.state_metadata: StatePartitionMetadata | None = None

    # ---- state ---------------------------------------------------------------------------------------------

    @property
    def state(self) -> ShareGroupState:
        return ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY

    def is_empty(self) -> bool:
        return not self.members

    def validate_delete_group(self) -> None:
        """NON_EMPTY_GROUP unless the group has no member (Kafka's validateEmptyGroup)."""
        if self.members:
            raise KafkaError(ErrorCode.NON_EMPTY_GROUP, "The group is not empty.")

    # ---- members -------------------------------------------------------------------------------------------

    def get_or_maybe_create_member(self, member_id: str, create_if_not_exists: bool) -> ShareGroupMember:
        """The member, a new one (not yet in the group) when asked to create it, or UNKNOWN_MEMBER_ID."""
        member = self.members.get(member_id)
        if member is not None:
            return member
        if not create_if_not_exists:
            raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID,
                             f"Member {member_id} is not a member of group {self.group_id}.")
        return ShareGroupMember(member_id=member_id)

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def update_member(self, member: ShareGroupMember) -> None:
        old = self.members.get(member.member_id)
        self.members[member.member_id] = member
        _count(self.subscribed_topic_names, () if old is None else old.subscribed_topic_names, -1)
        _count(self.subscribed_topic_names, member.subscribed_topic_names, 1)
        self.subscription_type = subscription_type_of(self.subscribed_topic_names, len(self.members))

    def remove_member(self, member_id: str) -> None:
        old = self.members.pop(member_id, None)
        if old is not None:
            _count(self.subscribed_topic_names, old.subscribed_topic_names, -1)
            self.subscription_type = subscription_type_of(self.subscribed_topic_names, len(self.members))

    def compute_subscribed_topic_names(self, old: ShareGroupMember | None,
                                       new: ShareGroupMember | None) -> dict[str, int]:
        """The subscribed topic counts were `old` replaced by `new` (either may be None)."""
        counts = dict(self.subscribed_topic_names)
        _count(counts, () if old is None else old.subscribed_topic_names, -1)
        _count(counts, () if new is None else new.subscribed_topic_names, 1)
        return counts

    # ---- target assignment ---------------------------------------------------------------------------------

    def target_assignment_of(self, member_id: str) -> Assignment:
        return self.target_assignment.get(member_id, EMPTY_ASSIGNMENT)

    def update_target_assignment(self, member_id: str, assignment: Assignment) -> None:
        self._invert(member_id, self.target_assignment.get(member_id, {}), -1)
        self.target_assignment[member_id] = assignment
        self._invert(member_id, assignment, 1)

    def remove_target_assignment(self, member_id: str) -> None:
        self._invert(member_id, self.target_assignment.pop(member_id, {}), -1)

    def _invert(self, member_id: str, assignment: Assignment, delta: int) -> None:
        for topic_id, partitions in assignment.items():
            owners = self.inverted_target_assignment.setdefault(topic_id, {})
            for partition in partitions:
                members = owners.setdefault(partition, set())
                if delta > 0:
                    members.add(member_id)
                else:
                    members.discard(member_id)
                    if not members:
                        del owners[partition]
            if not owners:
                del self.inverted_target_assignment[topic_id]

    def assigned_partitions(self) -> dict[uuid.UUID, set[int]]:
        """Every partition some member's target assignment holds."""
        return {topic_id: set(owners) for topic_id, owners in self.inverted_target_assignment.items()}

    # ---- share state -----------------------------------------------------------------------------------------

    def initialized_partitions(self) -> dict[uuid.UUID, frozenset[int]]:
        """The share partitions whose state the share coordinator has, by topic id."""
        if self.state_metadata is None:
            return {}
        return {topic_id: v.partitions for topic_id, v in self.state_metadata.initialized_topics.items()}


def _count(counts: dict[str, int], names: Iterable[str], delta: int) -> None:
    for name in names:
        value = counts.get(name, 0) + delta
        if value > 0:
            counts[name] = value
        else:
            counts.pop(name, None)


def subscription_type_of(subscribed_topic_names: dict[str, int], number_of_members: int) -> SubscriptionType:
    """Homogeneous when every member subscribes to the same topics."""
    if all(count == number_of_members for count in subscribed_topic_names.values()):
        return SubscriptionType.HOMOGENEOUS
    return SubscriptionType.HETEROGENEOUS
