"""A member of a KIP-932 share group (Kafka's ShareGroupMember): who it is, what it subscribes to, its epochs and the
partitions it is assigned.

Share partitions are not owned exclusively, so a member never revokes anything: at a new target assignment it moves
to the target's epoch with the target's partitions at once (Kafka's ShareGroupAssignmentBuilder), always STABLE.
Immutable, as the consumer group's members: each change makes a new member.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from minikafka.broker.coordinator.group.assignor.assignor_spec import Assignment, SubscribedTopicDescriber

# The member epoch a leaving member sends (and of one whose current assignment was deleted).
LEAVE_GROUP_MEMBER_EPOCH = -1
# MemberState.STABLE's id, the only state a share group member is in.
STABLE_STATE = 0


@dataclass(frozen=True, kw_only=True)
class ShareGroupMember:
    """One member; `assigned_partitions` maps topic ids to partitions."""

    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: int = STABLE_STATE
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: frozenset[str] = frozenset()
    assigned_partitions: Assignment = field(default_factory=dict)

    def replace(self, **changes: Any) -> ShareGroupMember:
        return dataclasses.replace(self, **changes)

    def is_reconciled_to(self, target_assignment_epoch: int) -> bool:
        return self.member_epoch == target_assignment_epoch

    def reconciled(self, target_epoch: int, target: Assignment, describer: SubscribedTopicDescriber,
                   subscription_changed: bool) -> ShareGroupMember:
        """The member at the target assignment (Kafka's ShareGroupAssignmentBuilder): the target's epoch and
        partitions when the target moved on, the target's partitions again when the subscription changed, limited
        to the topics it subscribes to."""
        subscribed = describer.topic_ids(self.subscribed_topic_names)
        partitions = {t: ps for t, ps in target.items() if t in subscribed and ps}
        if target_epoch != self.member_epoch:
            return self.replace(state=STABLE_STATE, assigned_partitions=partitions,
                                previous_member_epoch=self.member_epoch, member_epoch=target_epoch)
        if subscription_changed:
            return self.replace(assigned_partitions=partitions)
        return self
