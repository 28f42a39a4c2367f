"""A KIP-848 consumer group (Kafka's ConsumerGroup over ModernGroup): its epochs, members, target assignment, and
the bookkeeping derived from them.

The group changes only through the mutators the record replay calls (set the epochs, update or remove a member or
its target assignment, a resolved regex), so what a coordinator rebuilds from `__consumer_offsets` is what it had.
From those it keeps, as Kafka does: how many members subscribe to each topic (by name and by regex), the static
members by instance id, the server assignors members asked for, the member epoch at which each partition is owned
(so a partition is handed to a new owner only once its previous owner has revoked it), and the inverted target
assignment. The `compute_*` methods answer "what would it be with this member changed" without changing anything,
for the heartbeat that decides which records to write.
"""
from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum

from minikafka.broker.coordinator.group.assignor.assignor_spec import EMPTY_ASSIGNMENT, Assignment, SubscriptionType
from minikafka.broker.coordinator.group.assignor.java_order import member_hash_order
from minikafka.broker.coordinator.group.consumer.consumer_group_member import ConsumerGroupMember, MemberState
from minikafka.broker.coordinator.group.consumer.resolved_regular_expression import ResolvedRegularExpression
from minikafka.protocol.errors import ErrorCode, KafkaError

CONSUMER_PROTOCOL_TYPE = "consumer"
# The generation / member epoch and member id of a request from outside group management (an admin client).
UNKNOWN_GENERATION_ID = -1
UNKNOWN_MEMBER_ID = ""


class ConsumerGroupState(Enum):
    """The group's state as Kafka names it (ListGroups, DescribeGroups, ConsumerGroupDescribe)."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True)
class SubscriptionCount:
    """How many members subscribe to a topic by name, and how many resolved regexes match it."""

    by_name_count: int = 0
    by_regex_count: int = 0


def _add_count(counts: dict[str, int], key: str, delta: int) -> None:
    value = counts.get(key, 0) + delta
    if value > 0:
        counts[key] = value
    else:
        counts.pop(key, None)


def _add_subscription(counts: dict[str, SubscriptionCount], topic: str, by_name: int, by_regex: int) -> None:
    old = counts.get(topic, SubscriptionCount())
    new = SubscriptionCount(old.by_name_count + by_name, old.by_regex_count + by_regex)
    if new.by_name_count > 0 or new.by_regex_count > 0:
        counts[topic] = new
    else:
        counts.pop(topic, None)


def subscription_type_of(subscribed_regular_expressions: Mapping[str, int],
                         subscribed_topic_names: Mapping[str, SubscriptionCount],
                         number_of_members: int) -> SubscriptionType:
    """Homogeneous when every member subscribes to the same topics by name, or every member to the same single
    regex and no one by name; heterogeneous otherwise."""
    if not subscribed_regular_expressions:
        if all(c.by_name_count == number_of_members for c in subscribed_topic_names.values()):
            return SubscriptionType.HOMOGENEOUS
        return SubscriptionType.HETEROGENEOUS
    if next(iter(subscribed_regular_expressions.values())) == number_of_members:
        if all(c.by_regex_count == 1 and c.by_name_count == 0 for c in subscribed_topic_names.values()):
            return SubscriptionType.HOMOGENEOUS
    return SubscriptionType.HETEROGENEOUS


class ConsumerGroup:
    """One consumer group's state. Epochs start at 0; a deleted target assignment leaves its epoch at -1."""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.metadata_hash = 0
        self.target_assignment_epoch = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        self.target_assignment: dict[str, Assignment] = {}
        self.inverted_target_assignment: dict[uuid.UUID, dict[int, str]] = {}
        self.subscribed_topic_names: dict[str, SubscriptionCount] = {}
        self.subscription_type = SubscriptionType.HOMOGENEOUS
        self.static_members: dict[str, str] = {}
        self.server_assignors: dict[str, int] = {}
        self.num_classic_protocol_members = 0
        self.classic_protocol_members_supported_protocols: dict[str, int] = {}
        self.subscribed_regular_expressions: dict[str, int] = {}
        self.resolved_regular_expressions: dict[str, ResolvedRegularExpression] = {}
        # Whether an old ConsumerGroupPartitionMetadata record is still in the log, to be tombstoned.
        self.has_subscription_metadata_record = False
        self._partition_epochs: dict[uuid.UUID, dict[int, int]] = {}

    # ---- state -------------------------------------------------------------------------------------------------

    @property
    def state(self) -> ConsumerGroupState:
        """Empty without members; Assigning while the target assignment lags the group epoch; Reconciling while a
        member is not yet stable at the target assignment's epoch; Stable otherwise."""
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.target_assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(not m.is_reconciled_to(self.target_assignment_epoch) for m in self.members.values()):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def is_empty(self) -> bool:
        return self.state is ConsumerGroupState.EMPTY

    def is_in_states(self, states_filter: Iterable[str]) -> bool:
        """Whether the state's lower-case name is in the ListGroups states filter."""
        return self.state.value.lower() in set(states_filter)

    # ---- members -----------------------------------------------------------------------------------------------

    def get_or_maybe_create_member(self, member_id: str, create_if_not_exists: bool) -> ConsumerGroupMember:
        """The member, a new one (not yet in the group) when asked to create it, or UNKNOWN_MEMBER_ID."""
        member = self.members.get(member_id)
        if member is not None:
            return member
        if not create_if_not_exists:
            raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID,
                             f"Member {member_id} is not a member of group {self.group_id}.")
        return ConsumerGroupMember(member_id=member_id)

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def static_member_id(self, instance_id: str | None) -> str | None:
        """The member id of the static member with this instance id, if any."""
        return None if instance_id is None else self.static_members.get(instance_id)

    def static_member(self, instance_id: str | None) -> ConsumerGroupMember | None:
        member_id = self.static_member_id(instance_id)
        return None if member_id is None else self.members[member_id]

    def has_static_member(self, instance_id: str | None) -> bool:
        return instance_id is not None and instance_id in self.static_members

    def update_member(self, new_member: ConsumerGroupMember) -> None:
        """Add or replace a member, and keep every count derived from members right."""
        old_member = self.members.get(new_member.member_id)
        self.members[new_member.member_id] = new_member
        self._update_subscribed_topic_names(self.subscribed_topic_names, old_member, new_member)
        self._update_server_assignors(self.server_assignors, old_member, new_member)
        self._remove_partition_epochs_of(old_member)
        self._add_partition_epochs(new_member.assigned_partitions, new_member.member_epoch)
        self._add_partition_epochs(new_member.partitions_pending_revocation, new_member.member_epoch)
        self._update_subscribed_regular_expressions(old_member, new_member)
        if new_member.instance_id is not None:
            self.static_members[new_member.instance_id] = new_member.member_id
        self._update_classic_members(old_member, new_member)
        self._update_subscription_type()

    def remove_member(self, member_id: str) -> None:
        """Remove a member (its target assignment is removed separately)."""
        old_member = self.members.pop(member_id, None)
        if old_member is None:
            return
        self._update_subscribed_topic_names(self.subscribed_topic_names, old_member, None)
        self._update_server_assignors(self.server_assignors, old_member, None)
        self._remove_partition_epochs_of(old_member)
        self._update_subscribed_regular_expressions(old_member, None)
        if old_member.instance_id is not None:
            self.static_members.pop(old_member.instance_id, None)
        self._update_classic_members(old_member, None)
        self._update_subscription_type()

    # ---- target assignment -------------------------------------------------------------------------------------

    def target_assignment_of(self, member_id: str, instance_id: str | None = None) -> Assignment:
        """A member's target assignment; for a static member, the one of the member id its instance id has now
        (a static member rejoining under a new member id takes over its predecessor's)."""
        if instance_id is not None:
            member_id_now = self.static_member_id(instance_id)
            if member_id_now is None:
                return EMPTY_ASSIGNMENT
            member_id = member_id_now
        return self.target_assignment.get(member_id, EMPTY_ASSIGNMENT)

    def update_target_assignment(self, member_id: str, assignment: Assignment) -> None:
        self._update_inverted_target_assignment(member_id, self.target_assignment.get(member_id, {}), assignment)
        self.target_assignment[member_id] = assignment

    def remove_target_assignment(self, member_id: str) -> None:
        self._update_inverted_target_assignment(member_id, self.target_assignment.get(member_id, {}), {})
        self.target_assignment.pop(member_id, None)

    def _update_inverted_target_assignment(self, member_id: str, old: Assignment, new: Assignment) -> None:
        for topic_id in old.keys() | new.keys():
            old_partitions = old.get(topic_id, frozenset())
            new_partitions = new.get(topic_id, frozenset())
            owners = self.inverted_target_assignment.setdefault(topic_id, {})
            # A partition moved from A to B may have been given to B first: only A's own entry is removed.
            for partition in old_partitions - new_partitions:
                if owners.get(partition) == member_id:
                    del owners[partition]
            for partition in new_partitions - old_partitions:
                owners[partition] = member_id
            if not owners:
                del self.inverted_target_assignment[topic_id]

    # ---- partition epochs --------------------------------------------------------------------------------------

    def current_partition_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        """The member epoch at which the partition is owned (assigned or pending revocation), -1 when free."""
        return self._partition_epochs.get(topic_id, {}).get(partition, -1)

    def _remove_partition_epochs_of(self, member: ConsumerGroupMember | None) -> None:
        if member is not None:
            self._remove_partition_epochs(member.assigned_partitions, member.member_epoch)
            self._remove_partition_epochs(member.partitions_pending_revocation, member.member_epoch)

    def _remove_partition_epochs(self, assignment: Assignment, expected_epoch: int) -> None:
        for topic_id, partitions in assignment.items():
            epochs = self._partition_epochs.get(topic_id)
            if epochs is None:
                raise RuntimeError(f"Cannot remove the epoch {expected_epoch} from {topic_id} because it does "
                                   "not have any epoch")
            for partition in partitions:
                previous = epochs.pop(partition, None)
                if previous != expected_epoch:
                    raise RuntimeError(f"Cannot remove the epoch {expected_epoch} from {topic_id}-{partition} "
                                       f"because the partition is still owned at a different epoch {previous}")
            if not epochs:
                del self._partition_epochs[topic_id]

    def _add_partition_epochs(self, assignment: Assignment, epoch: int) -> None:
        for topic_id, partitions in assignment.items():
            epochs = self._partition_epochs.setdefault(topic_id, {})
            for partition in partitions:
                previous = epochs.get(partition)
                if previous is not None:
                    raise RuntimeError(f"Cannot set the epoch of {topic_id}-{partition} to {epoch} because the "
                                       f"partition is still owned at epoch {previous}")
                epochs[partition] = epoch

    def waiting_on_unreleased_partition(self, member: ConsumerGroupMember) -> bool:
        """Whether the member waits for a partition of its target that another member still owns."""
        if member.state is not MemberState.UNRELEASED_PARTITIONS:
            return False
        for topic_id, partitions in self.target_assignment.get(member.member_id, {}).items():
            assigned = member.assigned_partitions.get(topic_id, frozenset())
            if any(p not in assigned and self.current_partition_epoch(topic_id, p) != -1 for p in partitions):
                return True
        return False

    # ---- subscriptions -----------------------------------------------------------------------------------------

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return topic in self.subscribed_topic_names

    def num_subscribed_members(self, regex: str) -> int:
        return self.subscribed_regular_expressions.get(regex, 0)

    def compute_subscribed_topic_names(self, old_member: ConsumerGroupMember | None,
                                       new_member: ConsumerGroupMember | None) -> dict[str, SubscriptionCount]:
        """The subscribed topic counts were `old_member` replaced by `new_member` (either may be None); a regex
        left by its last member stops counting its topics."""
        counts = dict(self.subscribed_topic_names)
        self._update_subscribed_topic_names(counts, old_member, new_member)
        old_regex = None if old_member is None else old_member.subscribed_topic_regex
        new_regex = None if new_member is None else new_member.subscribed_topic_regex
        if old_regex is not None and old_regex != new_regex and self.num_subscribed_members(old_regex) == 1:
            resolved = self.resolved_regular_expressions.get(old_regex)
            for topic in () if resolved is None else resolved.topics:
                _add_subscription(counts, topic, 0, -1)
        return counts

    def compute_subscribed_regular_expressions(self, old_member: ConsumerGroupMember | None,
                                               new_member: ConsumerGroupMember | None) -> dict[str, int]:
        """The regex subscription counts were `old_member` replaced by `new_member`."""
        counts = dict(self.subscribed_regular_expressions)
        old_regex = None if old_member is None else old_member.subscribed_topic_regex
        new_regex = None if new_member is None else new_member.subscribed_topic_regex
        if old_regex != new_regex:
            if old_regex is not None:
                _add_count(counts, old_regex, -1)
            if new_regex is not None:
                _add_count(counts, new_regex, 1)
        return counts

    def compute_subscribed_topic_names_without_deleted_members(
            self, removed_members: Iterable[ConsumerGroupMember], removed_regexes: Iterable[str],
    ) -> dict[str, SubscriptionCount]:
        """The subscribed topic counts without these members and regexes (members leaving together)."""
        counts = dict(self.subscribed_topic_names)
        for member in removed_members:
            self._update_subscribed_topic_names(counts, member, None)
        for regex in removed_regexes:
            resolved = self.resolved_regular_expressions.get(regex)
            for topic in () if resolved is None else resolved.topics:
                _add_subscription(counts, topic, 0, -1)
        return counts

    def update_resolved_regular_expression(self, regex: str, resolved: ResolvedRegularExpression | None) -> None:
        """Replace what a regex resolved to; its topics count as subscribed once per regex."""
        self.remove_resolved_regular_expression(regex)
        if resolved is not None:
            self.resolved_regular_expressions[regex] = resolved
            for topic in resolved.topics:
                _add_subscription(self.subscribed_topic_names, topic, 0, 1)
        self._update_subscription_type()

    def remove_resolved_regular_expression(self, regex: str) -> None:
        old = self.resolved_regular_expressions.pop(regex, None)
        if old is not None:
            for topic in old.topics:
                _add_subscription(self.subscribed_topic_names, topic, 0, -1)
        self._update_subscription_type()

    def last_resolved_regular_expression_refresh_time_ms(self) -> int | None:
        """When the regexes were last resolved (all are resolved together); None when there are none."""
        first = next(iter(self.resolved_regular_expressions.values()), None)
        return None if first is None else first.timestamp

    def last_resolved_regular_expression_version(self) -> int:
        """The metadata version the regexes were last resolved at; 0 when there are none."""
        first = next(iter(self.resolved_regular_expressions.values()), None)
        return 0 if first is None else first.version

    def _update_subscribed_topic_names(self, counts: dict[str, SubscriptionCount],
                                       old_member: ConsumerGroupMember | None,
                                       new_member: ConsumerGroupMember | None) -> None:
        for topic in () if old_member is None else old_member.subscribed_topic_names:
            _add_subscription(counts, topic, -1, 0)
        for topic in () if new_member is None else new_member.subscribed_topic_names:
            _add_subscription(counts, topic, 1, 0)

    def _update_subscribed_regular_expressions(self, old_member: ConsumerGroupMember | None,
                                               new_member: ConsumerGroupMember | None) -> None:
        if old_member is not None and old_member.subscribed_topic_regex is not None:
            _add_count(self.subscribed_regular_expressions, old_member.subscribed_topic_regex, -1)
        if new_member is not None and new_member.subscribed_topic_regex is not None:
            _add_count(self.subscribed_regular_expressions, new_member.subscribed_topic_regex, 1)

    def _update_subscription_type(self) -> None:
        self.subscription_type = subscription_type_of(self.subscribed_regular_expressions,
                                                      self.subscribed_topic_names, len(self.members))

    # ---- server assignors --------------------------------------------------------------------------------------

    @staticmethod
    def _update_server_assignors(counts: dict[str, int], old_member: ConsumerGroupMember | None,
                                 new_member: ConsumerGroupMember | None) -> None:
        if old_member is not None and old_member.server_assignor_name is not None:
            _add_count(counts, old_member.server_assignor_name, -1)
        if new_member is not None and new_member.server_assignor_name is not None:
            _add_count(counts, new_member.server_assignor_name, 1)

    def preferred_server_assignor(self) -> str | None:
        """The assignor most members asked for (the first such in the counts on a tie); None when none asked."""
        return _most_requested(self.server_assignors)

    def compute_preferred_server_assignor(self, old_member: ConsumerGroupMember | None,
                                          new_member: ConsumerGroupMember | None) -> str | None:
        """The preferred assignor were `old_member` replaced by `new_member`."""
        counts = dict(self.server_assignors)
        self._update_server_assignors(counts, old_member, new_member)
        return _most_requested(counts)

    # ---- classic members ---------------------------------------------------------------------------------------

    def _update_classic_members(self, old_member: ConsumerGroupMember | None,
                                new_member: ConsumerGroupMember | None) -> None:
        for member, delta in ((old_member, -1), (new_member, 1)):
            if member is not None and member.classic_member_metadata is not None:
                self.num_classic_protocol_members += delta
                for protocol in member.classic_member_metadata.supported_protocols:
                    _add_count(self.classic_protocol_members_supported_protocols, protocol.name, delta)

    def supports_classic_protocols(self, member_protocol_type: str, member_protocols: Iterable[str]) -> bool:
        """Whether a classic member with these protocols may join: a consumer protocol type, and (unless the group
        is empty) a protocol every classic member supports."""
        if member_protocol_type != CONSUMER_PROTOCOL_TYPE:
            return False
        protocols = list(member_protocols)
        if self.is_empty():
            return bool(protocols)
        return any(self.classic_protocol_members_supported_protocols.get(name, 0) == self.num_classic_protocol_members
                   for name in protocols)

    def all_members_use_classic_protocol_except(self, excluded: Iterable[ConsumerGroupMember]) -> bool:
        """Whether every member but `excluded` joined with the classic protocol (a downgrade's condition)."""
        excluded = list(excluded)
        excluded_classic = sum(1 for m in excluded if m.use_classic_protocol)
        return self.num_classic_protocol_members - excluded_classic == len(self.members) - len(excluded)

    # ---- validations -------------------------------------------------------------------------------------------

    def validate_offset_commit(self, member_id: str, group_instance_id: str | None, member_epoch: int,
                               is_transactional: bool, api_version: int) -> None:
        """Raise the error Kafka answers an OffsetCommit (or TxnOffsetCommit) with: an epoch below 0 commits only
        to an empty group; an unknown member is UNKNOWN_MEMBER_ID; a consumer protocol member needs OffsetCommit
        v9+; a wrong epoch is STALE_MEMBER_EPOCH (ILLEGAL_GENERATION for a classic member)."""
        if member_epoch < 0 and not self.members:
            return
        if (is_transactional and member_epoch == UNKNOWN_GENERATION_ID and member_id == UNKNOWN_MEMBER_ID
                and group_instance_id is None):
            return
        member = self.get_or_maybe_create_member(member_id, False)
        if not is_transactional and not member.use_classic_protocol and api_version < 9:
            raise KafkaError(ErrorCode.UNSUPPORTED_VERSION,
                             "OffsetCommit version 9 or above must be used by members using the modern group "
                             "protocol")
        self._validate_member_epoch(member_epoch, member.member_epoch, member.use_classic_protocol)

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> None:
        """Raise the error Kafka answers an OffsetFetch with: without member id and epoch it is accepted;
        otherwise the member must exist and be at `member_epoch`."""
        if member_id is None and member_epoch < 0:
            return
        member = self.members.get(member_id) if member_id is not None else None
        if member is None:
            raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID,
                             f"Member {member_id} is not a member of group {self.group_id}.")
        self._validate_member_epoch(member_epoch, member.member_epoch, member.use_classic_protocol)

    def validate_delete_group(self) -> None:
        """Only an empty group may be deleted (NON_EMPTY_GROUP)."""
        if self.state is not ConsumerGroupState.EMPTY:
            raise KafkaError(ErrorCode.NON_EMPTY_GROUP)

    @staticmethod
    def _validate_member_epoch(received: int, expected: int, use_classic_protocol: bool) -> None:
        if received != expected:
            if use_classic_protocol:
                raise KafkaError(ErrorCode.ILLEGAL_GENERATION,
                                 f"The received generation id {received} does not match the expected member "
                                 f"epoch {expected}.")
            raise KafkaError(ErrorCode.STALE_MEMBER_EPOCH,
                             f"The received member epoch {received} does not match the expected member epoch "
                             f"{expected}.")


def _most_requested(counts: Mapping[str, int]) -> str | None:
    """The name with the highest count; on a tie the first in Kafka's HashMap order, as Kafka picks."""
    best: str | None = None
    for name in member_hash_order(counts):
        if best is None or counts[name] > counts[best]:
            best = name
    return best
