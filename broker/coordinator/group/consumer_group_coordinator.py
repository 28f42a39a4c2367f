"""KIP-848 consumer groups on the coordinator: ConsumerGroupHeartbeat and the member timers, as Kafka 4.1's
GroupMetadataManager.consumerGroupHeartbeat.

A heartbeat joins (member epoch 0; from v1 with a member id the consumer made up, in v0 one made here), stays in,
or leaves (-1; -2 for a static member that will come back) a group. Each heartbeat writes what changed to the
group's `__consumer_offsets` partition as consumer group records and applies them by replay, in three steps, each
of them a state the group may be left in: the member's subscription and a group epoch bump (when the subscription,
a resolved regex or the subscribed topics' metadata changed); the new target assignment of the group's assignor
when the group epoch is past the target's; the member's reconciliation (CurrentAssignmentBuilder), whose new
assignment is answered. A member that stops heartbeating for the session timeout, or that does not revoke
partitions within its rebalance timeout, is fenced: its records are tombstoned and the group epoch bumped, so the
others get its partitions.

Differences from Kafka, for now: regexes (RE2/J syntax: what RE2 lacks is INVALID_REGULAR_EXPRESSION) are matched
whole against the topic names, resolved at once on the heartbeat that brings them and refreshed on each heartbeat
when the topics they match changed, internal topics excluded; the group's metadata hash (Kafka's, metadata_hash.py)
is compared on every heartbeat. A classic group with members is converted online as Kafka 4.1 does (when
group.consumer.migration.policy, its protocol type and group.consumer.max.size allow it; GROUP_ID_NOT_FOUND with
Kafka's reason otherwise): its members stay, served through JoinGroup, SyncGroup, Heartbeat and LeaveGroup with the
server's assignment, and the group becomes classic again when its last consumer protocol member leaves, is fenced,
or is replaced by a static classic member; an empty group of either type becomes one of the other, keeping its
committed offsets, as in Kafka.
"""
from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from minikafka.broker.coordinator.group.assignor.assignor_spec import (
    Assignment,
    PartitionAssignor,
    PartitionAssignorError,
    SubscribedTopicDescriber,
)
from minikafka.broker.coordinator.group.assignor.range_assignor import RangeAssignor
from minikafka.broker.coordinator.group.assignor.uniform_assignor import UniformAssignor
from minikafka.broker.coordinator.group.consumer import record_helpers as rh
from minikafka.broker.coordinator.group.consumer.consumer_group import CONSUMER_PROTOCOL_TYPE, ConsumerGroup
from minikafka.broker.coordinator.group.consumer.consumer_group_member import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroupMember,
    MemberState,
)
from minikafka.broker.coordinator.group.consumer.current_assignment_builder import CurrentAssignmentBuilder
from minikafka.broker.coordinator.group.consumer.resolved_regular_expression import ResolvedRegularExpression
from minikafka.broker.coordinator.group.consumer.target_assignment_builder import TargetAssignmentBuilder
from minikafka.broker.coordinator.group.coordinator_timer import CoordinatorTimer
from minikafka.broker.coordinator.group.group import (
    MEMBER_ID_REQUIRED_MIN_VERSION,
    Group,
    JoinRequest,
    JoinResult,
    SyncResult,
)
from minikafka.broker.coordinator.group.group_config import CONSUMER_HEARTBEAT_INTERVAL_MS, CONSUMER_SESSION_TIMEOUT_MS
from minikafka.broker.coordinator.group.group_conversion import (
    classic_group_from_consumer,
    classic_member_metadata,
    consumer_group_from_classic,
    consumer_group_records,
    prepare_assignment,
    to_assignment,
)
from minikafka.broker.coordinator.group.group_coordinator_config import GroupCoordinatorConfig
from minikafka.broker.coordinator.group.group_metadata_manager import GroupMetadataManager, changes_groups
from minikafka.broker.coordinator.group.metadata_hash import metadata_hash
from minikafka.protocol.consumer_protocol import ConsumerProtocolError, parse_subscription
from minikafka.protocol.coordinator_records.consumer_group_records import (
    ConsumerGroupRecord,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
)
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.protocol.re2_pattern import re2_pattern

log = logging.getLogger("minikafka.consumer_group_coordinator")

# From ConsumerGroupHeartbeat v1 the consumer makes its member id up itself (KIP-1082).
CONSUMER_GENERATED_MEMBER_ID_REQUIRED_VERSION = 1
_ASSIGNORS: dict[str, Callable[[], PartitionAssignor]] = {"uniform": UniformAssignor, "range": RangeAssignor}


@dataclass
class HeartbeatRequest:
    """A ConsumerGroupHeartbeat as the coordinator reads it; `owned_partitions` is None when the request's topic
    partitions are (unchanged since the last heartbeat)."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: list[str] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned_partitions: Mapping[uuid.UUID, list[int]] | None = None
    client_id: str = ""
    client_host: str = ""
    api_version: int = 1


@dataclass
class HeartbeatResult:
    """The answer: the member's id and epoch, the heartbeat interval, and its assignment when given."""

    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None


def _is_subset(owned: Mapping[uuid.UUID, list[int]] | None, assigned: Assignment) -> bool:
    if owned is None:
        return False
    return all(p in assigned.get(topic_id, frozenset()) for topic_id, ps in owned.items() for p in ps)


class ConsumerGroupCoordinator:
    """Heartbeats and timers of the consumer groups in `group_manager`; `describe_topics()` is the cluster's topics
    now, `now_ms()` the wall clock for regex resolution times, `group_configs(group_id)` a group's own config
    overrides (resource type GROUP), which take the place of the broker's group.consumer.* defaults."""

    def __init__(self, config: GroupCoordinatorConfig, group_manager: GroupMetadataManager, timer: CoordinatorTimer,
                 describe_topics: Callable[[], SubscribedTopicDescriber], now_ms: Callable[[], int],
                 group_configs: Callable[[str], Mapping[str, str]] = lambda _group_id: {}) -> None:
        self.config = config
        self.group_configs = group_configs
        self.group_manager = group_manager
        self.timer = timer
        self.describe_topics = describe_topics
        self.now_ms = now_ms
        # Set by the classic coordinator: a classic group just became a consumer group (what was parked in its
        # joins and syncs is released), or a consumer group a classic one (which it rebalances, with `reason`).
        self.on_upgraded: Callable[[Group], None] = lambda _classic: None
        self.on_downgraded: Callable[[Group, str | None], None] = lambda _classic, _reason: None

    @property
    def groups(self) -> dict[str, ConsumerGroup]:
        return self.group_manager.consumer_groups

    # ---- timers --------------------------------------------------------------------------------------------

    @staticmethod
    def _session_key(group_id: str, member_id: str) -> str:
        return f"consumer-session-{group_id}-{member_id}"

    @staticmethod
    def _rebalance_key(group_id: str, member_id: str) -> str:
        return f"consumer-rebalance-{group_id}-{member_id}"

    def _group_config(self, group_id: str, name: str, default: int) -> int:
        """A group's own setting (Kafka's GroupConfigManager), else the broker's."""
        value = self.group_configs(group_id).get(name)
        try:
            return int(value) if value is not None else default
        except ValueError:  # validated by the controller; a value from elsewhere falls back to the broker's
            return default

    def session_timeout_ms(self, group_id: str) -> int:
        return self._group_config(group_id, CONSUMER_SESSION_TIMEOUT_MS, self.config.consumer_session_timeout_ms)

    def heartbeat_interval_ms(self, group_id: str) -> int:
        return self._group_config(group_id, CONSUMER_HEARTBEAT_INTERVAL_MS,
                                  self.config.consumer_heartbeat_interval_ms)

    @staticmethod
    def _join_key(group_id: str, member_id: str) -> str:
        return f"consumer-join-{group_id}-{member_id}"

    @staticmethod
    def _sync_key(group_id: str, member_id: str) -> str:
        return f"consumer-sync-{group_id}-{member_id}"

    def _schedule_session_timeout(self, group_id: str, member_id: str, timeout_ms: int | None = None) -> None:
        """The member is fenced unless it is heard from within its session timeout: the group's for a member of
        the consumer protocol, the one it joined with for a classic member (`timeout_ms`)."""
        self.timer.schedule(self._session_key(group_id, member_id),
                            self.session_timeout_ms(group_id) if timeout_ms is None else timeout_ms,
                            lambda: self._fence_on_timeout(group_id, member_id, None, "session timeout"))

    def _schedule_member_session_timeout(self, group_id: str, member: ConsumerGroupMember) -> None:
        metadata = member.classic_member_metadata
        self._schedule_session_timeout(group_id, member.member_id,
                                       None if metadata is None else metadata.session_timeout_ms)

    def _schedule_join_timeout_if_absent(self, group_id: str, member: ConsumerGroupMember) -> None:
        """A classic member told to rejoin must do so within its rebalance timeout, or be fenced."""
        key = self._join_key(group_id, member.member_id)
        if not self.timer.is_scheduled(key):
            member_id = member.member_id
            self.timer.schedule(key, member.rebalance_timeout_ms, lambda: self._fence_on_timeout(
                group_id, member_id, None, "the classic member failed to join within the rebalance timeout"))

    def _schedule_sync_timeout(self, group_id: str, member_id: str, rebalance_timeout_ms: int) -> None:
        """A classic member that joined must send SyncGroup within its rebalance timeout, or be fenced."""
        self.timer.schedule(self._sync_key(group_id, member_id), rebalance_timeout_ms, lambda: self._fence_on_timeout(
            group_id, member_id, None, "the member failed to sync within timeout"))

    def _schedule_rebalance_timeout(self, group_id: str, member: ConsumerGroupMember) -> None:
        member_id, epoch = member.member_id, member.member_epoch
        self.timer.schedule(self._rebalance_key(group_id, member_id), member.rebalance_timeout_ms,
                            lambda: self._fence_on_timeout(group_id, member_id, epoch,
                                                           f"it failed to transition from epoch {epoch} within "
                                                           f"{member.rebalance_timeout_ms}ms"))

    def _cancel_timers(self, group_id: str, member_id: str) -> None:
        for key in (self._session_key, self._rebalance_key, self._join_key, self._sync_key):
            self.timer.cancel(key(group_id, member_id))

    def _fence_on_timeout(self, group_id: str, member_id: str, epoch: int | None, reason: str) -> None:
        """A timer fired: fence the member unless it is gone (or, for a rebalance timeout, left that epoch). The
        records are written without waiting for their replication, as Kafka's timer operations."""
        group = self.groups.get(group_id)
        member = None if group is None else group.members.get(member_id)
        if group is None or member is None or not self.group_manager.is_owned(group_id):
            return
        if epoch is not None and member.member_epoch != epoch:
            return
        log.info("member %s fenced from consumer group %s because %s", member_id, group_id, reason)
        try:
            self._fence_members(group, [member])
        except KafkaError as exc:
            log.warning("fencing member %s of consumer group %s failed: %s", member_id, group_id, exc.code.name)

    def on_loaded(self, partition: int) -> None:
        """The groups of `partition` were loaded: every member gets a session timeout, and one revoking partitions
        its rebalance timeout, started afresh (Kafka schedules them on replay)."""
        for group_id, group in self.groups.items():
            if self.group_manager.partition_for(group_id) != partition:
                continue
            for member in group.members.values():
                self._schedule_member_session_timeout(group_id, member)
                if member.state is MemberState.UNREVOKED_PARTITIONS:
                    self._schedule_rebalance_timeout(group_id, member)

    def on_unloading(self, partition: int) -> None:
        """The groups of `partition` are about to be unloaded: their members' timers go."""
        for group_id, group in self.groups.items():
            if self.group_manager.partition_for(group_id) == partition:
                for member_id in group.members:
                    self._cancel_timers(group_id, member_id)

    # ---- validation ----------------------------------------------------------------------------------------

    def validate(self, req: HeartbeatRequest) -> None:
        """Kafka's GroupCoordinatorService checks of the request (INVALID_REQUEST, UNSUPPORTED_ASSIGNOR)."""
        def invalid(message: str) -> KafkaError:
            return KafkaError(ErrorCode.INVALID_REQUEST, message)

        if ((req.api_version >= CONSUMER_GENERATED_MEMBER_ID_REQUIRED_VERSION or req.member_epoch > 0
             or req.member_epoch == LEAVE_GROUP_MEMBER_EPOCH) and req.member_id == ""):
            raise invalid("MemberId can't be empty.")
        if req.group_id == "":
            raise invalid("GroupId can't be empty.")
        if req.instance_id == "":
            raise invalid("InstanceId can't be empty.")
        if req.rack_id == "":
            raise invalid("RackId can't be empty.")
        if req.member_epoch == 0:
            if req.rebalance_timeout_ms == -1:
                raise invalid("RebalanceTimeoutMs must be provided in first request.")
            if req.owned_partitions is None or req.owned_partitions:
                raise invalid("TopicPartitions must be empty when (re-)joining.")
            if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
                raise invalid("Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when "
                              "(re-)joining.")
        elif req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if req.instance_id is None:
                raise invalid("InstanceId can't be null.")
        elif req.member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            raise invalid("MemberEpoch is invalid.")
        if req.server_assignor is not None and req.server_assignor not in self.config.consumer_assignors:
            raise KafkaError(ErrorCode.UNSUPPORTED_ASSIGNOR,
                             f"ServerAssignor {req.server_assignor} is not supported. Supported assignors: "
                             f"{', '.join(self.config.consumer_assignors)}.")

    # ---- heartbeat -----------------------------------------------------------------------------------------

    @changes_groups
    def heartbeat(self, req: HeartbeatRequest) -> HeartbeatResult:
        """Handle one heartbeat: its records are written and applied before this returns (the caller waits for
        their replication before answering); KafkaError for the error to answer."""
        self.validate(req)
        self.group_manager.check_active(req.group_id)
        if req.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            return self._leave(req)
        group_id = req.group_id
        create = req.member_epoch == 0
        member_id = req.member_id or str(uuid.uuid4())
        group = self._get_or_maybe_create_group(req, create, member_id)
        if len(group.members) >= self.config.consumer_max_size and (
                req.member_id == "" or not group.has_member(req.member_id)):
            raise self._group_full()
        describer = self.describe_topics()
        records: list[ConsumerGroupRecord] = []
        if req.instance_id is None:
            member = group.get_or_maybe_create_member(member_id, create)
            self._check_member_epoch(member, req)
        else:
            member = self._static_member(group, member_id, req, create, records)
        if member_id not in group.members and not records:
            log.info("member %s joins consumer group %s", member_id, group_id)
        updated = member.replace(
            instance_id=req.instance_id if req.instance_id is not None else member.instance_id,
            rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=(req.rebalance_timeout_ms if req.rebalance_timeout_ms != -1
                                  else member.rebalance_timeout_ms),
            server_assignor_name=(req.server_assignor if req.server_assignor is not None
                                  else member.server_assignor_name),
            subscribed_topic_names=(frozenset(req.subscribed_topic_names) if req.subscribed_topic_names is not None
                                    else member.subscribed_topic_names),
            subscribed_topic_regex=(req.subscribed_topic_regex if req.subscribed_topic_regex is not None
                                    else member.subscribed_topic_regex),
            client_id=req.client_id, client_host=req.client_host, classic_member_metadata=None)

        reconciled, _subscription_changed = self._update_and_reconcile(group, member, updated, describer,
                                                                       req.owned_partitions, records)
        self._schedule_session_timeout(group_id, member_id)

        full_request = (req.rebalance_timeout_ms != -1 and (req.subscribed_topic_names is not None
                                                             or req.subscribed_topic_regex is not None)
                        and req.owned_partitions is not None)
        give_assignment = (req.member_epoch == 0 or full_request
                           or reconciled.assigned_partitions != member.assigned_partitions)
        return HeartbeatResult(member_id, reconciled.member_epoch, self.heartbeat_interval_ms(group_id),
                               reconciled.assigned_partitions if give_assignment else None)

    def _update_and_reconcile(self, group: ConsumerGroup, member: ConsumerGroupMember, updated: ConsumerGroupMember,
                              describer: SubscribedTopicDescriber,
                              owned_partitions: Mapping[uuid.UUID, list[int]] | None,
                              records: list[ConsumerGroupRecord]) -> tuple[ConsumerGroupMember, bool]:
        """Kafka's three steps for a member that (re)joins or heartbeats, whichever protocol it speaks: its
        subscription and the group epoch, the target assignment, its reconciliation; returns the reconciled
        member and whether its subscription changed."""
        group_id, member_id = group.group_id, member.member_id
        # 1. The member's subscription, regexes, and the group epoch.
        in_group = member_id in group.members
        if updated != member or not in_group:
            records.append(rh.member_subscription_record(group_id, updated))
        names_changed = updated.subscribed_topic_names != member.subscribed_topic_names
        regex_changed = updated.subscribed_topic_regex != member.subscribed_topic_regex
        regex_records = self._regex_records(group, member if in_group else None, updated, describer)
        records += regex_records
        subscription_changed = names_changed or regex_changed
        # The subscribed topics with this member's change and the regexes as now resolved.
        new_hash = metadata_hash(self._subscribed_topic_names(group, [member] if in_group else [], updated,
                                                              regex_records), describer)
        group_epoch = group.group_epoch
        if group_epoch == 0 or subscription_changed or bool(regex_records) or new_hash != group.metadata_hash:
            group_epoch += 1
            records.append(rh.group_epoch_record(group_id, group_epoch, new_hash))
            log.info("consumer group %s: bumped group epoch to %d", group_id, group_epoch)
        if group.has_subscription_metadata_record:
            records.append(rh.subscription_metadata_tombstone(group_id))
        self.group_manager.append_consumer_group_records(group_id, records)
        group = self.groups[group_id]
        current = group.members[member_id]

        # 2. The target assignment.
        if group.group_epoch > group.target_assignment_epoch:
            self._update_target_assignment(group, describer)

        # 3. The member's reconciliation.
        reconciled = current
        if subscription_changed or not current.is_reconciled_to(group.target_assignment_epoch):
            reconciled = CurrentAssignmentBuilder(
                current, group.target_assignment_epoch, group.target_assignment_of(member_id),
                group.current_partition_epoch, describer,
                owned_topic_partitions=owned_partitions, has_subscription_changed=subscription_changed,
                resolved_regular_expressions=group.resolved_regular_expressions).build()
            if reconciled != current:
                self.group_manager.append_consumer_group_records(
                    group_id, [rh.current_assignment_record(group_id, reconciled)])
                if reconciled.state is MemberState.UNREVOKED_PARTITIONS:
                    self._schedule_rebalance_timeout(group_id, reconciled)
                else:
                    self.timer.cancel(self._rebalance_key(group_id, member_id))
        return reconciled, subscription_changed

    def _get_or_maybe_create_group(self, req: HeartbeatRequest, create: bool, member_id: str) -> ConsumerGroup:
        group_id = req.group_id
        group = self.groups.get(group_id)
        if group is not None:
            return group
        if group_id in self.group_manager.share_groups:
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        classic = self.group_manager.groups.get(group_id)
        if classic is not None and classic.members:
            if create:
                self._validate_online_upgrade(classic)
                self._validate_joining_member(classic, member_id, req)
                return self._convert_to_consumer_group(classic)
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        if not create:
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
        # A new group, or an empty classic group (whose committed offsets it keeps) becoming a consumer group.
        return ConsumerGroup(group_id)

    def _validate_online_upgrade(self, classic: Group) -> None:
        """GROUP_ID_NOT_FOUND with Kafka's reason when a classic group with members may not become a consumer
        group: the migration policy forbids it, its members do not use the consumer embedded protocol, or it has
        more members than group.consumer.max.size (Kafka's validateOnlineUpgrade, checked in that order)."""
        prefix = f"Cannot upgrade classic group {classic.group_id} to consumer group because"
        if not self.config.upgrade_enabled:
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"{prefix} online upgrade is disabled.")
        if not classic.uses_consumer_protocol:
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND,
                             f"{prefix} the group does not use the consumer embedded protocol.")
        if len(classic.members) > self.config.consumer_max_size:
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND,
                             f"{prefix} the group size exceeds the consumer group maximum size.")

    def _validate_joining_member(self, classic: Group, member_id: str, req: HeartbeatRequest) -> None:
        """The errors the joining member's heartbeat would meet in the converted group, checked before converting:
        Kafka discards a conversion whose heartbeat then fails, and the group stays classic."""
        if len(classic.members) >= self.config.consumer_max_size:
            raise self._group_full()
        owner = None if req.instance_id is None else classic.static_member_id(req.instance_id)
        if owner is not None:
            raise _unreleased_instance_id(member_id, req.instance_id, owner)
        if req.subscribed_topic_regex is not None:
            _check_regex(req.subscribed_topic_regex)

    def _group_full(self) -> KafkaError:
        return KafkaError(ErrorCode.GROUP_MAX_SIZE_REACHED, "The consumer group has reached its maximum capacity of "
                                                            f"{self.config.consumer_max_size} members.")

    @staticmethod
    def _check_member_epoch(member: ConsumerGroupMember, req: HeartbeatRequest) -> None:
        received = req.member_epoch
        if received > member.member_epoch:
            raise KafkaError(ErrorCode.FENCED_MEMBER_EPOCH,
                             f"The consumer group member has a greater member epoch ({received}) than the one known "
                             f"by the group coordinator ({member.member_epoch}). The member must abandon all its "
                             "partitions and rejoin.")
        if received < member.member_epoch and (received != member.previous_member_epoch
                                               or not _is_subset(req.owned_partitions, member.assigned_partitions)):
            raise KafkaError(ErrorCode.FENCED_MEMBER_EPOCH,
                             f"The consumer group member has a smaller member epoch ({received}) than the one known "
                             f"by the group coordinator ({member.member_epoch}). The member must abandon all its "
                             "partitions and rejoin.")

    def _static_member(self, group: ConsumerGroup, member_id: str, req: HeartbeatRequest, create: bool,
                       records: list[ConsumerGroupRecord]) -> ConsumerGroupMember:
        """The static member with the request's instance id; a rejoin (epoch 0) of an instance whose previous
        member left temporarily (-2) replaces that member, taking over its target assignment."""
        instance_id = req.instance_id
        existing = group.static_member(instance_id)
        if create:
            if existing is None:
                log.info("static member %s with instance id %s joins consumer group %s", member_id, instance_id,
                         group.group_id)
                return group.get_or_maybe_create_member(member_id, True)
            if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                raise _unreleased_instance_id(member_id, instance_id, existing.member_id)
            return self._replace_static_member(group, existing, member_id, records)
        if existing is None:
            raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
        if existing.member_id != member_id:
            raise KafkaError(ErrorCode.FENCED_INSTANCE_ID,
                             f"Static member {member_id} with instance id {instance_id} was fenced by member "
                             f"{existing.member_id}.")
        self._check_member_epoch(existing, req)
        return existing

    def _replace_static_member(self, group: ConsumerGroup, existing: ConsumerGroupMember, member_id: str,
                               records: list[ConsumerGroupRecord]) -> ConsumerGroupMember:
        """A static member rejoining under `member_id` takes the place and target assignment of the member its
        instance id had (Kafka's replaceMember), written at once with `records` so far; returns the new member."""
        new_member = existing.replace(member_id=member_id, member_epoch=0, previous_member_epoch=0)
        group_id = group.group_id
        records += rh.member_removal_records(group_id, existing.member_id)
        records += [rh.member_subscription_record(group_id, new_member),
                    rh.target_assignment_record(group_id, member_id, group.target_assignment_of(existing.member_id)),
                    rh.current_assignment_record(group_id, new_member)]
        self._cancel_timers(group_id, existing.member_id)
        log.info("static member with instance id %s rejoins consumer group %s as %s, replacing %s",
                 existing.instance_id, group_id, member_id, existing.member_id)
        # The member the rest of the request compares with is the replacement as now written.
        self.group_manager.append_consumer_group_records(group_id, records)
        records.clear()
        return self.groups[group_id].members[member_id]

    # ---- regular expressions -------------------------------------------------------------------------------

    @staticmethod
    def _resolve(regex: str, describer: SubscribedTopicDescriber) -> frozenset[str]:
        pattern = re2_pattern(regex)
        return frozenset(name for name in describer.topic_names()
                         if not name.startswith("__") and pattern.fullmatch(name))

    def _regex_records(self, group: ConsumerGroup, old: ConsumerGroupMember | None, new: ConsumerGroupMember,
                       describer: SubscribedTopicDescriber) -> list[ConsumerGroupRecord]:
        """Records for the regexes: the member's new regex resolved, an old one no member uses any more deleted,
        and every other resolved regex whose topics changed refreshed."""
        group_id = group.group_id
        regexes = group.compute_subscribed_regular_expressions(old, new)
        records = []
        old_regex = None if old is None else old.subscribed_topic_regex
        if old_regex is not None and old_regex not in regexes and old_regex in group.resolved_regular_expressions:
            records.append(rh.regular_expression_tombstone(group_id, old_regex))
        for regex in regexes:
            if new.subscribed_topic_regex == regex and old_regex != regex:
                _check_regex(regex)
            topics = self._resolve(regex, describer)
            resolved = group.resolved_regular_expressions.get(regex)
            if resolved is None or resolved.topics != topics:
                version = 0 if resolved is None else resolved.version + 1
                records.append(rh.regular_expression_record(
                    group_id, regex, ResolvedRegularExpression(topics, version, self.now_ms())))
        return records

    @staticmethod
    def _subscribed_topic_names(group: ConsumerGroup, removed: Iterable[ConsumerGroupMember],
                                added: ConsumerGroupMember | None,
                                regex_records: Iterable[ConsumerGroupRecord] = ()) -> set[str]:
        """The topics the group subscribes to (by name or through a resolved regex) with `removed` gone, `added`
        in, and the regex records applied."""
        members = dict(group.members)
        for member in removed:
            members.pop(member.member_id, None)
        if added is not None:
            members[added.member_id] = added
        resolved = {regex: r.topics for regex, r in group.resolved_regular_expressions.items()}
        for record in regex_records:
            assert isinstance(record.key, ConsumerGroupRegularExpressionKey)
            if record.value is None:
                resolved.pop(record.key.regular_expression, None)
            else:
                assert isinstance(record.value, ConsumerGroupRegularExpressionValue)
                resolved[record.key.regular_expression] = frozenset(record.value.topics)
        names: set[str] = set()
        for member in members.values():
            names |= member.subscribed_topic_names
            if member.subscribed_topic_regex is not None:
                names |= resolved.get(member.subscribed_topic_regex, frozenset())
        return names

    # ---- online migration ----------------------------------------------------------------------------------

    def _convert_to_consumer_group(self, classic: Group) -> ConsumerGroup:
        """Kafka's convertToConsumerGroup: the classic group's tombstone and the consumer group's records written
        as one batch; its members keep their assignments and are timed out by their classic session timeouts."""
        describer = self.describe_topics()
        converted = consumer_group_from_classic(classic, describer)
        converted.metadata_hash = metadata_hash(converted.subscribed_topic_names, describer)
        group_id = classic.group_id
        self.group_manager.upgrade_to_consumer_group(classic, consumer_group_records(converted))
        # Members parked in a join or sync rejoin the rebalance the joining member starts.
        self.on_upgraded(classic)
        group = self.groups[group_id]
        for member in group.members.values():
            self._schedule_member_session_timeout(group_id, member)
        log.info("converted the classic group %s to a consumer group", group_id)
        return group

    def _validate_online_downgrade(self, group: ConsumerGroup, leaving: list[ConsumerGroupMember]) -> bool:
        """Whether the group becomes a classic group once `leaving` are gone (Kafka's
        validateOnlineDowngradeWithFencedMembers): all the others are classic members, there is one at least,
        the policy allows it and they fit in group.max.size."""
        remaining = len(group.members) - len(leaving)
        if not group.all_members_use_classic_protocol_except(leaving) or remaining <= 0:
            return False
        if not self.config.downgrade_enabled:
            log.info("cannot downgrade consumer group %s to classic group because the online downgrade is "
                     "disabled", group.group_id)
            return False
        if remaining > self.config.max_size:
            log.info("cannot downgrade consumer group %s to classic group because its group size is greater than "
                     "classic group max size", group.group_id)
            return False
        return True

    def _validate_online_downgrade_with_replaced_member(self, group: ConsumerGroup,
                                                        replaced: ConsumerGroupMember) -> bool:
        """Whether a static classic member joining in the place of `replaced` leaves only classic members, so the
        group becomes classic (Kafka's validateOnlineDowngradeWithReplacedMember)."""
        if not group.all_members_use_classic_protocol_except([replaced]):
            return False
        if not self.config.downgrade_enabled:
            log.info("cannot downgrade consumer group %s to classic group because the online downgrade is "
                     "disabled", group.group_id)
            return False
        if len(group.members) > self.config.max_size:
            log.info("cannot downgrade consumer group %s to classic group because its group size is greater than "
                     "classic group max size", group.group_id)
            return False
        return True

    def _convert_to_classic_group(self, group: ConsumerGroup, leaving: list[ConsumerGroupMember],
                                  reason: str | None) -> None:
        """Kafka's convertToClassicGroup: the consumer group's tombstones and the classic group without
        `leaving` (its members keeping their target assignments) written as one batch, then a rebalance for
        `reason` if given."""
        group_id = group.group_id
        classic = classic_group_from_consumer(group, leaving, self.describe_topics(), self.now_ms())
        tombstones = rh.group_tombstone_records(group_id, list(group.members),
                                                list(group.resolved_regular_expressions))
        self.group_manager.downgrade_to_classic_group(classic, tombstones)
        for member_id in list(group.members):
            self._cancel_timers(group_id, member_id)
        log.info("converted the consumer group %s to a classic group", group_id)
        self.on_downgraded(classic, reason)

    # ---- classic members of a consumer group ---------------------------------------------------------------

    def _validate_classic_member(self, group: ConsumerGroup, member_id: str,
                                 instance_id: str | None) -> ConsumerGroupMember:
        """The classic member a SyncGroup or Heartbeat comes from (Kafka's validateConsumerGroupMember and
        throwIfMemberDoesNotUseClassicProtocol)."""
        if instance_id is None:
            member = group.get_or_maybe_create_member(member_id, False)
        else:
            found = group.static_member(instance_id)
            if found is None:
                raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member with instance id {instance_id} is not a "
                                 f"member of group {group.group_id}.")
            if found.member_id != member_id:
                raise KafkaError(ErrorCode.FENCED_INSTANCE_ID, f"Static member {member_id} with instance id "
                                 f"{instance_id} was fenced by member {found.member_id}.")
            member = found
        if not member.use_classic_protocol:
            raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member.member_id} does not use the classic "
                             "protocol.")
        return member

    @staticmethod
    def _check_generation(member: ConsumerGroupMember, generation_id: int) -> None:
        if member.member_epoch != generation_id:
            raise KafkaError(ErrorCode.ILLEGAL_GENERATION, f"The request generation id {generation_id} is not "
                             f"equal to the member epoch {member.member_epoch} of member {member.member_id}.")

    @changes_groups
    def classic_join(self, req: JoinRequest) -> JoinResult:
        """A JoinGroup of a classic member to this consumer group (Kafka's classicGroupJoinToConsumerGroup): the
        member's subscription from its metadata, the group epoch and target assignment as for a heartbeat, and an
        answer at once, its generation the member epoch; KafkaError for the error to answer."""
        group = self.groups[req.group_id]
        group_id = group.group_id
        is_unknown_member = req.member_id == ""
        member_id = str(uuid.uuid4()) if is_unknown_member else req.member_id
        if len(group.members) >= self.config.consumer_max_size and not group.has_member(member_id):
            raise self._group_full()
        if not group.supports_classic_protocols(req.protocol_type, [name for name, _ in req.protocols]):
            raise KafkaError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, f"Member {member_id}'s protocols are not "
                             "supported.")
        if is_unknown_member and req.group_instance_id is None and req.api_version >= MEMBER_ID_REQUIRED_MIN_VERSION:
            log.info("dynamic member with unknown member id joins consumer group %s; asked to rejoin as %s",
                     group_id, member_id)
            return JoinResult(ErrorCode.MEMBER_ID_REQUIRED, member_id=member_id)
        downgrade = False
        if req.group_instance_id is None:
            member = group.get_or_maybe_create_member(member_id, True)
        else:
            # A static member joining with no member id is new, or replaces the one its instance id had (whichever
            # protocol that one spoke); one with a member id must be that instance's member.
            existing = group.static_member(req.group_instance_id)
            downgrade = existing is not None and self._validate_online_downgrade_with_replaced_member(group, existing)
            if is_unknown_member:
                member = (group.get_or_maybe_create_member(member_id, True) if existing is None
                          else self._replace_static_member(group, existing, member_id, []))
            elif existing is None:
                raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {req.group_instance_id} is unknown.")
            elif existing.member_id != member_id:
                raise KafkaError(ErrorCode.FENCED_INSTANCE_ID, f"Static member {member_id} with instance id "
                                 f"{req.group_instance_id} was fenced by member {existing.member_id}.")
            else:
                member = existing
        try:
            subscription = parse_subscription(req.protocols[0][1])
        except (ConsumerProtocolError, IndexError) as exc:
            raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, "Malformed embedded consumer protocol in subscription "
                             f"deserialization: {exc}") from None
        describer = self.describe_topics()
        if member_id not in group.members:
            log.info("classic member %s joins consumer group %s", member_id, group_id)
        updated = member.replace(
            instance_id=req.group_instance_id if req.group_instance_id is not None else member.instance_id,
            rack_id=subscription.rack_id if subscription.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=(req.rebalance_timeout_ms if req.rebalance_timeout_ms != -1
                                  else member.rebalance_timeout_ms),
            subscribed_topic_names=frozenset(subscription.topics), client_id=req.client_id,
            client_host=req.client_host,
            classic_member_metadata=classic_member_metadata(req.session_timeout_ms, req.protocols))
        owned = {topic_id: sorted(ps) for topic_id, ps in to_assignment(subscription.owned_partitions,
                                                                         describer).items()}
        reconciled, changed = self._update_and_reconcile(group, member, updated, describer, owned, [])
        self.timer.cancel(self._join_key(group_id, member_id))
        if downgrade:
            # Only classic members are left once the static member is replaced: the group is classic again, and
            # rebalances if the newcomer subscribes to other topics (Kafka's convertToClassicGroup).
            self._convert_to_classic_group(group, [], f"Downgrade group {group_id} from consumer to classic for "
                                           "static member replacement with different subscription." if changed
                                           else None)
        else:
            self._schedule_session_timeout(group_id, member_id, req.session_timeout_ms)
            self._schedule_sync_timeout(group_id, member_id, reconciled.rebalance_timeout_ms)
        return JoinResult(ErrorCode.NONE, member_id=member_id, generation_id=reconciled.member_epoch,
                          protocol_type=CONSUMER_PROTOCOL_TYPE, protocol_name=req.protocols[0][0], leader="")

    @changes_groups
    def classic_sync(self, group_id: str, generation_id: int, member_id: str, instance_id: str | None,
                     protocol_type: str | None, protocol_name: str | None) -> SyncResult:
        """A SyncGroup of a classic member (Kafka's classicGroupSyncToConsumerGroup): its assigned partitions in
        its consumer protocol version, or REBALANCE_IN_PROGRESS when a newer group epoch needs it to rejoin."""
        group = self.groups[group_id]
        member = self._validate_classic_member(group, member_id, instance_id)
        self._check_generation(member, generation_id)
        assert member.classic_member_metadata is not None  # checked above
        protocols = member.classic_member_metadata.supported_protocols
        if protocol_type is not None and protocol_type != CONSUMER_PROTOCOL_TYPE:
            raise KafkaError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, f"The protocol type {protocol_type} from member "
                             f"{member_id} request is not equal to the group protocol type {CONSUMER_PROTOCOL_TYPE}.")
        if protocol_name is not None and protocols and protocol_name != protocols[0].name:
            raise KafkaError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, f"The protocol name {protocol_name} from member "
                             f"{member_id} request is not equal to the protocol name {protocols[0].name} returned "
                             "in the join response.")
        if group.group_epoch > member.member_epoch and member.state is not MemberState.UNREVOKED_PARTITIONS:
            self._schedule_join_timeout_if_absent(group_id, member)
            raise KafkaError(ErrorCode.REBALANCE_IN_PROGRESS, f"A new rebalance is triggered in group {group_id} "
                             f"and member {member_id} should rejoin to catch up.")
        self.timer.cancel(self._sync_key(group_id, member_id))
        self._schedule_member_session_timeout(group_id, member)
        return SyncResult(ErrorCode.NONE, prepare_assignment(member, self.describe_topics()), protocol_type,
                          protocol_name)

    @changes_groups
    def classic_heartbeat(self, group_id: str, generation_id: int, member_id: str, instance_id: str | None
                          ) -> ErrorCode:
        """A Heartbeat of a classic member (Kafka's classicGroupHeartbeatToConsumerGroup): REBALANCE_IN_PROGRESS
        when it must rejoin, as its epoch is behind the group's, it has partitions to revoke, or partitions it
        waited for are free now."""
        group = self.groups[group_id]
        member = self._validate_classic_member(group, member_id, instance_id)
        self._check_generation(member, generation_id)
        self._schedule_member_session_timeout(group_id, member)
        if (member.member_epoch < group.group_epoch or member.state is MemberState.UNREVOKED_PARTITIONS
                or (member.state is MemberState.UNRELEASED_PARTITIONS
                    and not group.waiting_on_unreleased_partition(member))):
            self._schedule_join_timeout_if_absent(group_id, member)
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    @changes_groups
    def classic_leave(self, group_id: str, members: list[tuple[str, str | None, str | None]]
                      ) -> list[tuple[str, str | None, ErrorCode]]:
        """A LeaveGroup to this consumer group (Kafka's classicGroupLeaveToConsumerGroup): each member found
        leaves (one by instance id alone, administratively), all fenced together; per member its error."""
        group = self.groups[group_id]
        results: list[tuple[str, str | None, ErrorCode]] = []
        leaving: dict[str, ConsumerGroupMember] = {}
        for member_id, instance_id, reason in members:
            try:
                if instance_id is None:
                    member = group.get_or_maybe_create_member(member_id, False)
                else:
                    found = group.static_member(instance_id)
                    if found is None:
                        raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
                    if member_id and found.member_id != member_id:
                        raise KafkaError(ErrorCode.FENCED_INSTANCE_ID)
                    member = found
            except KafkaError as exc:
                results.append((member_id, instance_id, exc.code))
                continue
            log.info("member %s left consumer group %s through LeaveGroup (%s)", member.member_id, group_id,
                     reason or "not provided")
            leaving[member.member_id] = member
            results.append((member_id, instance_id, ErrorCode.NONE))
        if leaving:
            self._fence_members(group, list(leaving.values()))
        return results

    # ---- describing ----------------------------------------------------------------------------------------

    def describe_group(self, group_id: str) -> ConsumerGroup:
        """The group ConsumerGroupDescribe describes; KafkaError as Kafka answers for one it cannot."""
        self.group_manager.check_active(group_id)
        group = self.groups.get(group_id)
        if group is None:
            if group_id in self.group_manager.groups or group_id in self.group_manager.share_groups:
                raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        return group

    def assignor_name(self, group: ConsumerGroup) -> str:
        """The name of the assignor the group's target assignment is computed with."""
        return group.preferred_server_assignor() or self.config.consumer_assignors[0]

    # ---- target assignment ---------------------------------------------------------------------------------

    def _assignor(self, group: ConsumerGroup) -> PartitionAssignor:
        """The assignor most members asked for, else the first of group.consumer.assignors."""
        return _ASSIGNORS[self.assignor_name(group)]()

    def _update_target_assignment(self, group: ConsumerGroup, describer: SubscribedTopicDescriber) -> None:
        try:
            result = TargetAssignmentBuilder.for_group(group, group.group_epoch, self._assignor(group), describer,
                                                       group.subscription_type).build()
        except PartitionAssignorError as exc:
            log.error("consumer group %s: computing the target assignment of epoch %d failed: %s", group.group_id,
                      group.group_epoch, exc)
            raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR,
                             f"Failed to compute a new target assignment for epoch {group.group_epoch}: {exc}."
                             ) from exc
        self.group_manager.append_consumer_group_records(group.group_id, result.records)
        log.info("consumer group %s: new target assignment at epoch %d", group.group_id, group.group_epoch)

    # ---- leaving and fencing -------------------------------------------------------------------------------

    def _leave(self, req: HeartbeatRequest) -> HeartbeatResult:
        group = self.groups.get(req.group_id)
        if group is None:
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group {req.group_id} not found.")
        if req.instance_id is None:
            member = group.get_or_maybe_create_member(req.member_id, False)
            log.info("member %s left consumer group %s", member.member_id, group.group_id)
            self._fence_members(group, [member])
            return HeartbeatResult(req.member_id, req.member_epoch)
        member_or_none = group.static_member(req.instance_id)
        if member_or_none is None:
            raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown.")
        member = member_or_none
        if member.member_id != req.member_id:
            raise KafkaError(ErrorCode.FENCED_INSTANCE_ID,
                             f"Static member {req.member_id} with instance id {req.instance_id} was fenced by member "
                             f"{member.member_id}.")
        if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            log.info("static member %s with instance id %s temporarily left consumer group %s", member.member_id,
                     req.instance_id, group.group_id)
            leaving = member.replace(member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, partitions_pending_revocation={})
            self.group_manager.append_consumer_group_records(
                group.group_id, [rh.current_assignment_record(group.group_id, leaving)])
            self.timer.cancel(self._rebalance_key(group.group_id, member.member_id))
            return HeartbeatResult(member.member_id, LEAVE_GROUP_STATIC_MEMBER_EPOCH)
        log.info("static member %s with instance id %s left consumer group %s", member.member_id, req.instance_id,
                 group.group_id)
        self._fence_members(group, [member])
        return HeartbeatResult(req.member_id, req.member_epoch)

    def _fence_members(self, group: ConsumerGroup, members: list[ConsumerGroupMember]) -> None:
        """Remove the members (tombstones, unused regexes deleted) and bump the group epoch, so their partitions
        go to the others; when only classic members remain, the group becomes a classic group instead."""
        group_id = group.group_id
        if self._validate_online_downgrade(group, members):
            self._convert_to_classic_group(group, members, f"Downgrade group {group_id} from consumer to classic "
                                           "for member leaving.")
            return
        records: list[ConsumerGroupRecord] = []
        for member in members:
            records += rh.member_removal_records(group_id, member.member_id)
        leaving_regexes: dict[str, int] = {}
        for member in members:
            if member.subscribed_topic_regex is not None:
                leaving_regexes[member.subscribed_topic_regex] = leaving_regexes.get(
                    member.subscribed_topic_regex, 0) + 1
        deleted = [regex for regex, n in leaving_regexes.items() if group.num_subscribed_members(regex) == n]
        records += [rh.regular_expression_tombstone(group_id, regex) for regex in deleted
                    if regex in group.resolved_regular_expressions]
        new_hash = metadata_hash(self._subscribed_topic_names(group, members, None), self.describe_topics())
        records.append(rh.group_epoch_record(group_id, group.group_epoch + 1, new_hash))
        self.group_manager.append_consumer_group_records(group_id, records)
        for member in members:
            self._cancel_timers(group_id, member.member_id)


def _unreleased_instance_id(member_id: str, instance_id: str | None, owner: str) -> KafkaError:
    return KafkaError(ErrorCode.UNRELEASED_INSTANCE_ID, f"Static member {member_id} with instance id {instance_id} "
                                                        f"cannot join the group because the instance id is owned by "
                                                        f"{owner} member.")


def _check_regex(regex: str) -> None:
    try:
        re2_pattern(regex)
    except re.error as exc:
        raise KafkaError(ErrorCode.INVALID_REGULAR_EXPRESSION,
                         f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {exc}.") from None
