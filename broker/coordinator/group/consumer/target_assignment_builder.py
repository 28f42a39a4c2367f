"""The group's new target assignment when its epoch moves (Kafka's TargetAssignmentBuilder for consumer groups).

The assignor sees every member with its subscription (names and resolved regexes, as topic ids) and its current
target, with the heartbeat's changed, added or removed member applied; a static member rejoining under a new member
id starts from its predecessor's target. The result is the records to write: one target assignment record per
member whose target changed, then the target assignment epoch record, which the caller appends and replays.
"""
from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from minikafka.broker.coordinator.group.assignor.assignor_spec import (
    EMPTY_ASSIGNMENT,
    Assignment,
    GroupAssignment,
    GroupSpec,
    MemberSubscription,
    PartitionAssignor,
    SubscribedTopicDescriber,
    SubscriptionType,
)
from minikafka.broker.coordinator.group.assignor.java_order import member_hash_order, topic_hash_order
from minikafka.broker.coordinator.group.consumer import record_helpers
from minikafka.broker.coordinator.group.consumer.consumer_group import ConsumerGroup
from minikafka.broker.coordinator.group.consumer.consumer_group_member import ConsumerGroupMember
from minikafka.broker.coordinator.group.consumer.resolved_regular_expression import ResolvedRegularExpression
from minikafka.protocol.coordinator_records.consumer_group_records import ConsumerGroupRecord


@dataclass(frozen=True)
class TargetAssignmentResult:
    """The records to write and every member's new target assignment."""

    records: list[ConsumerGroupRecord]
    target_assignment: GroupAssignment


@dataclass
class TargetAssignmentBuilder:
    """One computation of a group's target assignment at `group_epoch`; `members`, `target_assignment`,
    `inverted_target_assignment`, `static_members` and `resolved_regular_expressions` are the group's now."""

    group_id: str
    group_epoch: int
    assignor: PartitionAssignor
    describer: SubscribedTopicDescriber
    members: Mapping[str, ConsumerGroupMember] = field(default_factory=dict)
    subscription_type: SubscriptionType = SubscriptionType.HOMOGENEOUS
    target_assignment: Mapping[str, Assignment] = field(default_factory=dict)
    inverted_target_assignment: Mapping[uuid.UUID, Mapping[int, str]] = field(default_factory=dict)
    static_members: Mapping[str, str] = field(default_factory=dict)
    resolved_regular_expressions: Mapping[str, ResolvedRegularExpression] = field(default_factory=dict)
    updated_members: dict[str, ConsumerGroupMember | None] = field(default_factory=dict)

    @classmethod
    def for_group(cls, group: ConsumerGroup, group_epoch: int, assignor: PartitionAssignor,
                  describer: SubscribedTopicDescriber, subscription_type: SubscriptionType) -> TargetAssignmentBuilder:
        """A builder over the group as it is now, for the new `group_epoch`; `subscription_type` is the group's
        with the heartbeat's change applied (ConsumerGroup.compute_* and subscription_type_of)."""
        return cls(group.group_id, group_epoch, assignor, describer, group.members, subscription_type,
                   group.target_assignment, group.inverted_target_assignment, group.static_members,
                   group.resolved_regular_expressions)

    def add_or_update_member(self, member_id: str, member: ConsumerGroupMember) -> TargetAssignmentBuilder:
        """Assign as if the group had this member (new or changed by the current heartbeat)."""
        self.updated_members[member_id] = member
        return self

    def remove_member(self, member_id: str) -> TargetAssignmentBuilder:
        """Assign as if the member had left."""
        self.updated_members[member_id] = None
        return self

    def build(self) -> TargetAssignmentResult:
        """Run the assignor; PartitionAssignorError when it cannot assign."""
        specs: dict[str, MemberSubscription] = {
            member_id: self._subscription(member, self.target_assignment.get(member_id, EMPTY_ASSIGNMENT))
            for member_id, member in self.members.items()}
        for member_id, updated in self.updated_members.items():
            if updated is None:
                specs.pop(member_id, None)
                continue
            assignment = self.target_assignment.get(member_id, EMPTY_ASSIGNMENT)
            if updated.instance_id is not None:
                previous_member_id = self.static_members.get(updated.instance_id)
                if previous_member_id is not None and previous_member_id != member_id:
                    assignment = self.target_assignment.get(previous_member_id, EMPTY_ASSIGNMENT)
            specs[member_id] = self._subscription(updated, assignment)
        # Kafka hands the assignor a HashMap of the members: their order decides who gets the extra partitions.
        ordered = {member_id: specs[member_id] for member_id in member_hash_order(specs)}
        new_assignment = self.assignor.assign(
            GroupSpec(ordered, self.subscription_type, self.inverted_target_assignment), self.describer)
        records = []
        for member_id in ordered:
            new = new_assignment.get(member_id, EMPTY_ASSIGNMENT)
            if member_id not in self.target_assignment or not _same(new, self.target_assignment[member_id]):
                records.append(record_helpers.target_assignment_record(self.group_id, member_id, new))
        records.append(record_helpers.target_assignment_epoch_record(self.group_id, self.group_epoch))
        return TargetAssignmentResult(records, new_assignment)

    def _subscription(self, member: ConsumerGroupMember, assignment: Assignment) -> MemberSubscription:
        topics = member.subscribed_topics(self.resolved_regular_expressions)
        # The assignment's topics in Kafka's HashMap order, which the uniform assignor walks when it trims.
        ordered = {topic_id: assignment[topic_id] for topic_id in topic_hash_order(assignment)}
        return MemberSubscription(self.describer.topic_ids(topics), ordered, member.rack_id, member.instance_id)


def _same(a: Assignment, b: Assignment) -> bool:
    return {t: ps for t, ps in a.items() if ps} == {t: ps for t, ps in b.items() if ps}
