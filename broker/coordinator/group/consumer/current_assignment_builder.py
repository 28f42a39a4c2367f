"""A member's reconciliation towards its target assignment (Kafka 4.1's CurrentAssignmentBuilder).

Each heartbeat computes the member's next state from its current one, the group's target assignment and epoch, and
the partitions the member says it owns:
- a member must first revoke what its target no longer holds: it stays at its epoch in UNREVOKED_PARTITIONS until
  its heartbeat no longer lists those partitions, and only then moves on (one epoch at a time, never past the
  target's);
- partitions of its target still owned by another member (at any epoch) are withheld: the member moves to the
  target epoch in UNRELEASED_PARTITIONS and gets them on a later heartbeat, once they are free;
- otherwise it moves to the target epoch, STABLE, with its whole target.
A member whose subscription changed drops the partitions of topics it left at once (to revoke), even before a new
target assignment exists.
"""
from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field

from minikafka.broker.coordinator.group.assignor.assignor_spec import Assignment, SubscribedTopicDescriber
from minikafka.broker.coordinator.group.consumer.consumer_group_member import ConsumerGroupMember, MemberState
from minikafka.broker.coordinator.group.consumer.resolved_regular_expression import ResolvedRegularExpression
from minikafka.protocol.errors import ErrorCode, KafkaError

# The partitions a heartbeat says the member owns, by topic id; None when the heartbeat did not say.
OwnedTopicPartitions = Mapping[uuid.UUID, Collection[int]] | None


@dataclass
class CurrentAssignmentBuilder:
    """The inputs of one reconciliation step; `build()` returns the member's next state (the same object when
    nothing changes). `current_partition_epoch(topic_id, partition)` is the group's: -1 for a free partition."""

    member: ConsumerGroupMember
    target_assignment_epoch: int
    target_assignment: Assignment
    current_partition_epoch: Callable[[uuid.UUID, int], int]
    describer: SubscribedTopicDescriber
    owned_topic_partitions: OwnedTopicPartitions = None
    has_subscription_changed: bool = False
    resolved_regular_expressions: Mapping[str, ResolvedRegularExpression] = field(default_factory=dict)

    def build(self) -> ConsumerGroupMember:
        member = self.member
        if member.state is MemberState.STABLE:
            # A newer target assignment: reconcile to it. Otherwise drop unsubscribed topics, if any.
            if member.member_epoch != self.target_assignment_epoch:
                return self._compute_next_assignment(member.member_epoch, member.assigned_partitions)
            if self.has_subscription_changed:
                return self._update_current_assignment(member.assigned_partitions)
            return member
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            # Wait until the heartbeat no longer lists the partitions to revoke.
            if self._owns_revoked_partitions(member.partitions_pending_revocation):
                if self.has_subscription_changed:
                    return self._update_current_assignment(member.assigned_partitions)
                return member
            # Revoked: on to the next epoch, but not past the target's (a subscription change may have brought
            # the member here before a new target assignment exists).
            return self._compute_next_assignment(min(member.member_epoch + 1, self.target_assignment_epoch),
                                                 member.assigned_partitions)
        if member.state is MemberState.UNRELEASED_PARTITIONS:
            return self._compute_next_assignment(member.member_epoch, member.assigned_partitions)
        # UNKNOWN: written by a newer broker; the member must give up everything and start over.
        if self.owned_topic_partitions is None or self.owned_topic_partitions:
            raise KafkaError(ErrorCode.FENCED_MEMBER_EPOCH,
                             "The consumer group member is in a unknown state. The member must abandon all its "
                             "partitions and rejoin.")
        return self._compute_next_assignment(self.target_assignment_epoch, member.assigned_partitions)

    def _subscribed_topic_ids(self) -> frozenset[uuid.UUID]:
        return self.describer.topic_ids(self.member.subscribed_topics(self.resolved_regular_expressions))

    def _owns_revoked_partitions(self, pending: Assignment) -> bool:
        """Whether the heartbeat lists a partition of `pending`; a heartbeat that lists nothing owns them all."""
        if self.owned_topic_partitions is None:
            return True
        return any(p in pending.get(topic_id, ()) for topic_id, partitions in self.owned_topic_partitions.items()
                   for p in partitions)

    def _update_current_assignment(self, assigned: Assignment) -> ConsumerGroupMember:
        """Move the partitions of topics the member no longer subscribes to from assigned to pending revocation."""
        member = self.member
        subscribed = self._subscribed_topic_ids()
        if not subscribed and not member.partitions_pending_revocation:
            new_assigned: Assignment = {}
            new_pending: Assignment = assigned
        else:
            new_assigned = {t: ps for t, ps in assigned.items() if t in subscribed}
            pending = dict(member.partitions_pending_revocation)
            for topic_id, partitions in assigned.items():
                if topic_id not in subscribed:
                    pending[topic_id] = pending.get(topic_id, frozenset()) | partitions
            new_pending = pending
        if new_assigned == assigned:
            return member
        if new_pending and self._owns_revoked_partitions(new_pending):
            return member.replace(state=MemberState.UNREVOKED_PARTITIONS, assigned_partitions=new_assigned,
                                  partitions_pending_revocation=new_pending)
        # What was dropped is revoked already: just shrink the assignment.
        return member.replace(assigned_partitions=new_assigned)

    def _compute_next_assignment(self, member_epoch: int, assigned: Assignment) -> ConsumerGroupMember:
        member = self.member
        subscribed = self._subscribed_topic_ids()
        has_unreleased = False
        new_assigned: dict[uuid.UUID, frozenset[int]] = {}
        new_pending_revocation: dict[uuid.UUID, frozenset[int]] = {}
        new_pending_assignment: dict[uuid.UUID, frozenset[int]] = {}
        for topic_id in self.target_assignment.keys() | assigned.keys():
            # A topic the member left counts as not in its target.
            target = self.target_assignment.get(topic_id, frozenset()) if topic_id in subscribed else frozenset()
            current = assigned.get(topic_id, frozenset())
            kept = current & target
            to_revoke = current - kept
            to_assign = target - kept
            free = frozenset(p for p in to_assign if self.current_partition_epoch(topic_id, p) == -1)
            has_unreleased = has_unreleased or free != to_assign
            if kept:
                new_assigned[topic_id] = kept
            if to_revoke:
                new_pending_revocation[topic_id] = to_revoke
            if free:
                new_pending_assignment[topic_id] = free
        if new_pending_revocation and self._owns_revoked_partitions(new_pending_revocation):
            # Revoke first, at the current epoch.
            return member.update_member_epoch(member_epoch).replace(
                state=MemberState.UNREVOKED_PARTITIONS, assigned_partitions=new_assigned,
                partitions_pending_revocation=new_pending_revocation)
        for topic_id, partitions in new_pending_assignment.items():
            new_assigned[topic_id] = new_assigned.get(topic_id, frozenset()) | partitions
        state = MemberState.UNRELEASED_PARTITIONS if has_unreleased else MemberState.STABLE
        return member.update_member_epoch(self.target_assignment_epoch).replace(
            state=state, assigned_partitions=new_assigned, partitions_pending_revocation={})
