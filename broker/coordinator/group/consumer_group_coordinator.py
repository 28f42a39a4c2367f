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

Differences from Kafka, for now: regexes (RE2/J syntax: what RE2 lacks is INVALID_REGULAR_EXPRESSION) are
matched whole against the topic names, resolved at once on the heartbeat that brings them and refreshed on each
heartbeat when the topics they match changed, internal topics excluded; the group's metadata hash is this broker's
own hash of the subscribed topics' ids, names and partition counts (not Kafka's Murmur3 of the topic image),
compared on every heartbeat; a classic group with members is not converted online: the first heartbeat answers
GROUP_ID_NOT_FOUND, with Kafka's reason when group.consumer.migration.policy, the group's protocol type or
group.consumer.max.size forbids the upgrade; classic members do not join a consumer group through JoinGroup
(INCONSISTENT_GROUP_PROTOCOL); an empty group of either type becomes one of the other, keeping its committed
offsets, as in Kafka.
"""
from __future__ import annotations

import hashlib
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
from minikafka.broker.coordinator.group.consumer.consumer_group import ConsumerGroup
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
from minikafka.broker.coordinator.group.group import Group
from minikafka.broker.coordinator.group.group_config import CONSUMER_HEARTBEAT_INTERVAL_MS, CONSUMER_SESSION_TIMEOUT_MS
from minikafka.broker.coordinator.group.group_coordinator_config import GroupCoordinatorConfig
from minikafka.broker.coordinator.group.group_metadata_manager import GroupMetadataManager, changes_groups
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


def metadata_hash(topics: Iterable[str], describer: SubscribedTopicDescriber) -> int:
    """A hash of the subscribed topics that exist (id, name, partition count), as a signed 64-bit int: a change of
    it (a topic created, deleted or given partitions) bumps the group epoch."""
    parts = []
    for name in sorted(topics):
        topic_id = describer.topic_id(name)
        if topic_id is not None:
            parts.append(f"{topic_id}:{name}:{describer.num_partitions(topic_id)}")
    if not parts:
        return 0
    digest = hashlib.blake2b("\n".join(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


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

    def _schedule_session_timeout(self, group_id: str, member_id: str) -> None:
        self.timer.schedule(self._session_key(group_id, member_id), self.session_timeout_ms(group_id),
                            lambda: self._fence_on_timeout(group_id, member_id, None, "session timeout"))

    def _schedule_rebalance_timeout(self, group_id: str, member: ConsumerGroupMember) -> None:
        member_id, epoch = member.member_id, member.member_epoch
        self.timer.schedule(self._rebalance_key(group_id, member_id), member.rebalance_timeout_ms,
                            lambda: self._fence_on_timeout(group_id, member_id, epoch,
                                                           f"it failed to transition from epoch {epoch} within "
                                                           f"{member.rebalance_timeout_ms}ms"))

    def _cancel_timers(self, group_id: str, member_id: str) -> None:
        self.timer.cancel(self._session_key(group_id, member_id))
        self.timer.cancel(self._rebalance_key(group_id, member_id))

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
                self._schedule_session_timeout(group_id, member.member_id)
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
        group = self._get_or_maybe_create_group(group_id, create)
        if len(group.members) >= self.config.consumer_max_size and (
                req.member_id == "" or not group.has_member(req.member_id)):
            raise KafkaError(ErrorCode.GROUP_MAX_SIZE_REACHED,
                             f"The consumer group has reached its maximum capacity of {self.config.consumer_max_size}"
                             " members.")
        member_id = req.member_id or str(uuid.uuid4())
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
                owned_topic_partitions=req.owned_partitions, has_subscription_changed=subscription_changed,
                resolved_regular_expressions=group.resolved_regular_expressions).build()
            if reconciled != current:
                self.group_manager.append_consumer_group_records(
                    group_id, [rh.current_assignment_record(group_id, reconciled)])
                if reconciled.state is MemberState.UNREVOKED_PARTITIONS:
                    self._schedule_rebalance_timeout(group_id, reconciled)
                else:
                    self.timer.cancel(self._rebalance_key(group_id, member_id))
        self._schedule_session_timeout(group_id, member_id)

        full_request = (req.rebalance_timeout_ms != -1 and (req.subscribed_topic_names is not None
                                                             or req.subscribed_topic_regex is not None)
                        and req.owned_partitions is not None)
        give_assignment = (req.member_epoch == 0 or full_request
                           or reconciled.assigned_partitions != member.assigned_partitions)
        return HeartbeatResult(member_id, reconciled.member_epoch, self.heartbeat_interval_ms(group_id),
                               reconciled.assigned_partitions if give_assignment else None)

    def _get_or_maybe_create_group(self, group_id: str, create: bool) -> ConsumerGroup:
        group = self.groups.get(group_id)
        if group is not None:
            return group
        if group_id in self.group_manager.share_groups:
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        classic = self.group_manager.groups.get(group_id)
        if classic is not None and classic.members:
            if create:
                self._validate_online_upgrade(classic)
                # The conversion itself (Kafka's convertToConsumerGroup) is not served.
                raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Cannot upgrade classic group {group_id} to "
                                 "consumer group because an online upgrade is not supported by this broker.")
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
                raise KafkaError(ErrorCode.UNRELEASED_INSTANCE_ID,
                                 f"Static member {member_id} with instance id {instance_id} cannot join the group "
                                 f"because the instance id is owned by {existing.member_id} member.")
            new_member = existing.replace(member_id=member_id, member_epoch=0, previous_member_epoch=0)
            group_id = group.group_id
            records += rh.member_removal_records(group_id, existing.member_id)
            records += [rh.member_subscription_record(group_id, new_member),
                        rh.target_assignment_record(group_id, member_id, group.target_assignment_of(
                            existing.member_id)),
                        rh.current_assignment_record(group_id, new_member)]
            self._cancel_timers(group_id, existing.member_id)
            log.info("static member with instance id %s rejoins consumer group %s as %s, replacing %s", instance_id,
                     group_id, member_id, existing.member_id)
            # The member the rest of the heartbeat compares with is the replacement as now written.
            self.group_manager.append_consumer_group_records(group_id, records)
            records.clear()
            return self.groups[group_id].members[member_id]
        if existing is None:
            raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
        if existing.member_id != member_id:
            raise KafkaError(ErrorCode.FENCED_INSTANCE_ID,
                             f"Static member {member_id} with instance id {instance_id} was fenced by member "
                             f"{existing.member_id}.")
        self._check_member_epoch(existing, req)
        return existing

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
                try:
                    re2_pattern(regex)
                except re.error as exc:
                    raise KafkaError(ErrorCode.INVALID_REGULAR_EXPRESSION,
                                     f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {exc}."
                                     ) from None
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
        go to the others."""
        group_id = group.group_id
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
