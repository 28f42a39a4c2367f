"""A member of a KIP-848 consumer group (Kafka's ConsumerGroupMember): who it is, what it subscribes to, and where
it stands on its way to its target assignment.

A member is immutable: every change (a heartbeat's new subscription, a reconciliation step, a replayed record) makes
a new one, and the group compares old and new to keep its counts and partition epochs right.
"""
from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from minikafka.broker.coordinator.group.assignor.assignor_spec import Assignment
from minikafka.broker.coordinator.group.consumer.resolved_regular_expression import ResolvedRegularExpression
from minikafka.protocol.coordinator_records.consumer_group_records import ClassicMemberMetadata

# The member epoch of a member that leaves (and of one whose current assignment was deleted).
LEAVE_GROUP_MEMBER_EPOCH = -1
# The member epoch of a static member that leaves, meaning to come back.
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


class MemberState(IntEnum):
    """Where a member is in its reconciliation (Kafka's MemberState; the value is what records store)."""

    STABLE = 0
    """Reconciled with its target assignment."""
    UNREVOKED_PARTITIONS = 1
    """Must revoke partitions before it can move to the next epoch."""
    UNRELEASED_PARTITIONS = 2
    """At the target epoch, waiting for partitions their previous owners have not revoked yet."""
    UNKNOWN = 127
    """A state this broker does not know (written by a newer one): the member is fenced and starts over."""

    @classmethod
    def from_value(cls, value: int) -> MemberState:
        """The state a record's value names; UNKNOWN for a value this broker does not know."""
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


@dataclass(frozen=True, kw_only=True)
class ConsumerGroupMember:
    """One member. `assigned_partitions` and `partitions_pending_revocation` map topic ids to partitions; the
    subscribed regex is None when the member subscribes by names only."""

    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: frozenset[str] = frozenset()
    subscribed_topic_regex: str | None = None
    server_assignor_name: str | None = None
    assigned_partitions: Assignment = field(default_factory=dict)
    partitions_pending_revocation: Assignment = field(default_factory=dict)
    classic_member_metadata: ClassicMemberMetadata | None = None

    def __post_init__(self) -> None:
        # Kafka writes an empty regex for "none"; one spelling keeps comparisons and counts simple.
        if self.subscribed_topic_regex == "":
            object.__setattr__(self, "subscribed_topic_regex", None)

    def replace(self, **changes: Any) -> ConsumerGroupMember:
        """A copy with `changes` (the fields' names as keywords)."""
        return dataclasses.replace(self, **changes)

    def update_member_epoch(self, member_epoch: int) -> ConsumerGroupMember:
        """A copy at `member_epoch`, the current epoch becoming the previous one."""
        return dataclasses.replace(self, member_epoch=member_epoch, previous_member_epoch=self.member_epoch)

    def is_reconciled_to(self, target_assignment_epoch: int) -> bool:
        """Whether the member is stable at the target assignment's epoch."""
        return self.state is MemberState.STABLE and self.member_epoch == target_assignment_epoch

    @property
    def use_classic_protocol(self) -> bool:
        """Whether the member joined through JoinGroup/SyncGroup (a classic member of a consumer group)."""
        return self.classic_member_metadata is not None

    def subscribed_topics(self, resolved_regular_expressions: Mapping[str, ResolvedRegularExpression]
                          ) -> frozenset[str]:
        """The topic names the member subscribes to: its names and what its regex resolved to (nothing while the
        regex is unresolved)."""
        if self.subscribed_topic_regex is None:
            return self.subscribed_topic_names
        resolved = resolved_regular_expressions.get(self.subscribed_topic_regex)
        return self.subscribed_topic_names if resolved is None else self.subscribed_topic_names | resolved.topics

    def owned_partition_count(self) -> int:
        """How many partitions the member holds, assigned or pending revocation."""
        return sum(map(len, self.assigned_partitions.values())) + sum(
            map(len, self.partitions_pending_revocation.values()))


def assignment_of(partitions: Mapping[uuid.UUID, Iterable[int]]) -> dict[uuid.UUID, frozenset[int]]:
    """A topic id -> partitions mapping with frozen partition sets and no empty topic."""
    frozen = {topic_id: frozenset(values) for topic_id, values in partitions.items()}
    return {topic_id: values for topic_id, values in frozen.items() if values}
