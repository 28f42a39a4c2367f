"""KIP-932 share groups on the coordinator: ShareGroupHeartbeat, the members' session timers and the initialization of
the share partitions' state, as Kafka 4.1's GroupMetadataManager.shareGroupHeartbeat and GroupCoordinatorService.

A heartbeat joins (member epoch 0, with the member id the consumer made up), stays in, or leaves (-1) a share group.
Each writes what changed to the group's `__consumer_offsets` partition as share group records and applies them by
replay, in three steps: the member's subscription and a group epoch bump (when a subscription or the subscribed
topics' metadata changed, or partitions whose state was initialized since are not yet assigned); the new target
assignment of the `simple` assignor over the partitions whose share state is initialized, when the group epoch is past
the target's; the member moved to the target (share partitions are never revoked, so at once).

A share partition is assigned only once the share coordinator holds its state: a heartbeat that finds subscribed
partitions not yet initialized records them as initializing (ShareGroupStatePartitionMetadata) and hands them to the
initializer task, which asks the share coordinator to initialize them (state epoch = group epoch, start offset -1:
share.auto.offset.reset decides at the first fetch) and then records them as initialized, so the next heartbeat
bumps the group epoch and assigns them. Partitions still initializing after group.share.initialize.retry.interval.ms,
or when a coordinator loads the group, are tried again; a failed initialization takes them back out.

A member that stops heartbeating for the session timeout (share.session.timeout.ms of the group, else
group.share.session.timeout.ms) is fenced: its records are tombstoned and the group epoch bumped. The metadata hash
(Kafka's, metadata_hash.py) is recomputed on every heartbeat. Difference from Kafka: the share coordinator is asked
one partition per call, concurrently.
"""
from __future__ import annotations

import logging
import math
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

import trio

from minikafka.broker.coordinator.group.assignor.assignor_spec import (
    Assignment,
    GroupSpec,
    MemberSubscription,
    PartitionAssignorError,
    SubscribedTopicDescriber,
    SubscriptionType,
)
from minikafka.broker.coordinator.group.assignor.java_order import member_hash_order, topic_hash_order
from minikafka.broker.coordinator.group.assignor.simple_assignor import SIMPLE_ASSIGNOR_NAME, SimpleAssignor
from minikafka.broker.coordinator.group.coordinator_timer import CoordinatorTimer
from minikafka.broker.coordinator.group.group_config import SHARE_HEARTBEAT_INTERVAL_MS, SHARE_SESSION_TIMEOUT_MS
from minikafka.broker.coordinator.group.group_coordinator_config import GroupCoordinatorConfig
from minikafka.broker.coordinator.group.group_metadata_manager import GroupMetadataManager, changes_groups
from minikafka.broker.coordinator.group.metadata_hash import metadata_hash
from minikafka.broker.coordinator.group.share import record_helpers as rh
from minikafka.broker.coordinator.group.share.share_group import InitMapValue, ShareGroup, subscription_type_of
from minikafka.broker.coordinator.group.share.share_group_member import LEAVE_GROUP_MEMBER_EPOCH, ShareGroupMember
from minikafka.broker.coordinator.share.share_coordinator_shard import SharePartitionKey
from minikafka.protocol.coordinator_records.consumer_group_records import ShareGroupRecord
from minikafka.protocol.errors import DEFAULT_MESSAGES, ErrorCode, KafkaError

log = logging.getLogger("minikafka.share_group_coordinator")

# The start offset Kafka initializes a share partition's state with: share.auto.offset.reset decides later.
UNINITIALIZED_START_OFFSET = -1


class StateResult(Protocol):
    @property
    def error(self) -> ErrorCode: ...


class SummaryResult(StateResult, Protocol):
    @property
    def leader_epoch(self) -> int: ...

    @property
    def start_offset(self) -> int: ...


class ShareStateInitializer(Protocol):
    """The share coordinator as the group coordinator reaches it (the broker's Persister)."""

    async def initialize_state(self, key: SharePartitionKey, state_epoch: int, start_offset: int) -> StateResult: ...

    async def delete_state(self, key: SharePartitionKey) -> StateResult: ...

    async def read_summary(self, key: SharePartitionKey, leader_epoch: int) -> SummaryResult: ...


@dataclass
class ShareHeartbeatRequest:
    """A ShareGroupHeartbeat as the coordinator reads it; `subscribed_topic_names` is None when unchanged."""

    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None = None
    subscribed_topic_names: list[str] | None = None
    client_id: str = ""
    client_host: str = ""


@dataclass
class ShareHeartbeatResult:
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None


@dataclass(frozen=True)
class InitializeRequest:
    """Share partitions to initialize in the share coordinator, at the group's epoch."""

    group_id: str
    group_epoch: int
    partitions: Mapping[uuid.UUID, frozenset[int]]


@dataclass
class OffsetsAlteration:
    """What AlterShareGroupOffsets asked for, once checked: per topic its id (None when unknown) and each partition's
    error; the share-partitions to initialize at `state_epoch` with their new start offsets."""

    group_id: str
    state_epoch: int
    topics: dict[str, tuple[uuid.UUID | None, dict[int, ErrorCode]]]
    start_offsets: dict[uuid.UUID, dict[int, int]]


@dataclass
class OffsetsDeletion:
    """What DeleteShareGroupOffsets asked for, once checked: the topics refused with their error and message, and
    the share-partitions whose state to delete per topic id (with the topic's name)."""

    group_id: str
    refused: dict[str, tuple[ErrorCode, str]]
    partitions: dict[uuid.UUID, tuple[str, frozenset[int]]]


def _same(a: Assignment, b: Assignment) -> bool:
    return {t: ps for t, ps in a.items() if ps} == {t: ps for t, ps in b.items() if ps}


def _combine(initialized: Mapping[uuid.UUID, InitMapValue],
             initializing: Mapping[uuid.UUID, InitMapValue]) -> dict[uuid.UUID, InitMapValue]:
    """Kafka's combineInitMaps: the partitions of both, the name and time of the second where it has the topic."""
    combined = {}
    for topic_id in initialized.keys() | initializing.keys():
        first, second = initialized.get(topic_id), initializing.get(topic_id)
        partitions = (first.partitions if first else frozenset()) | (second.partitions if second else frozenset())
        source = second or first
        assert source is not None
        combined[topic_id] = InitMapValue(source.name, partitions, source.timestamp)
    return combined


class ShareGroupCoordinator:
    """Heartbeats, timers and share-state initialization of the share groups in `group_manager`;
    `describe_topics()` is the cluster's topics now, `now_ms()` the wall clock, `group_configs(group_id)` a group's
    own config overrides. `state_initializer` is set by the broker once its persister exists."""

    def __init__(self, config: GroupCoordinatorConfig, group_manager: GroupMetadataManager, timer: CoordinatorTimer,
                 describe_topics: Callable[[], SubscribedTopicDescriber], now_ms: Callable[[], int],
                 group_configs: Callable[[str], Mapping[str, str]] = lambda _group_id: {}) -> None:
        self.config = config
        self.group_manager = group_manager
        self.timer = timer
        self.describe_topics = describe_topics
        self.now_ms = now_ms
        self.group_configs = group_configs
        self.state_initializer: ShareStateInitializer | None = None
        self._send_initialize, self._receive_initialize = trio.open_memory_channel[InitializeRequest](math.inf)

    @property
    def groups(self) -> dict[str, ShareGroup]:
        return self.group_manager.share_groups

    # ---- settings ------------------------------------------------------------------------------------------

    def _group_config(self, group_id: str, name: str, default: int) -> int:
        value = self.group_configs(group_id).get(name)
        try:
            return int(value) if value is not None else default
        except ValueError:
            return default

    def session_timeout_ms(self, group_id: str) -> int:
        return self._group_config(group_id, SHARE_SESSION_TIMEOUT_MS, self.config.share_session_timeout_ms)

    def heartbeat_interval_ms(self, group_id: str) -> int:
        return self._group_config(group_id, SHARE_HEARTBEAT_INTERVAL_MS, self.config.share_heartbeat_interval_ms)

    # ---- timers --------------------------------------------------------------------------------------------

    @staticmethod
    def _session_key(group_id: str, member_id: str) -> str:
        return f"share-session-{group_id}-{member_id}"

    def _schedule_session_timeout(self, group_id: str, member_id: str) -> None:
        self.timer.schedule(self._session_key(group_id, member_id), self.session_timeout_ms(group_id),
                            lambda: self._fence_on_timeout(group_id, member_id))

    def _fence_on_timeout(self, group_id: str, member_id: str) -> None:
        group = self.groups.get(group_id)
        member = None if group is None else group.members.get(member_id)
        if group is None or member is None or not self.group_manager.is_owned(group_id):
            return
        log.info("member %s fenced from share group %s because the member session expired", member_id, group_id)
        try:
            self._fence_member(group, member)
        except KafkaError as exc:
            log.warning("fencing member %s of share group %s failed: %s", member_id, group_id, exc.code.name)
        self.group_manager.groups_changed()

    def on_loaded(self, partition: int) -> None:
        """The groups of `partition` were loaded: every member's session timeout starts afresh, and partitions left
        initializing are initialized again."""
        for group_id, group in self.groups.items():
            if self.group_manager.partition_for(group_id) != partition:
                continue
            for member_id in group.members:
                self._schedule_session_timeout(group_id, member_id)
            metadata = group.state_metadata
            if metadata is not None and metadata.initializing_topics:
                self._send_initialize.send_nowait(InitializeRequest(
                    group_id, group.group_epoch,
                    {t: v.partitions for t, v in metadata.initializing_topics.items()}))

    def on_unloading(self, partition: int) -> None:
        for group_id, group in self.groups.items():
            if self.group_manager.partition_for(group_id) == partition:
                for member_id in group.members:
                    self.timer.cancel(self._session_key(group_id, member_id))

    # ---- heartbeat -----------------------------------------------------------------------------------------

    @staticmethod
    def validate(req: ShareHeartbeatRequest) -> None:
        """Kafka's GroupCoordinatorService checks of the request (INVALID_REQUEST)."""
        if req.member_id == "":
            raise KafkaError(ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")
        if req.group_id == "":
            raise KafkaError(ErrorCode.INVALID_REQUEST, "GroupId can't be empty.")
        if req.rack_id == "":
            raise KafkaError(ErrorCode.INVALID_REQUEST, "RackId can't be empty.")
        if req.member_epoch == 0:
            if not req.subscribed_topic_names:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "SubscribedTopicNames must be set in first request.")
        elif req.member_epoch < LEAVE_GROUP_MEMBER_EPOCH:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "MemberEpoch is invalid.")

    @changes_groups
    def heartbeat(self, req: ShareHeartbeatRequest) -> tuple[ShareHeartbeatResult, InitializeRequest | None]:
        """Handle one heartbeat: its records are written and applied before this returns (the caller waits for
        their replication before answering), with the share partitions to initialize, if any; KafkaError for the
        error to answer."""
        self.validate(req)
        self.group_manager.check_active(req.group_id)
        if req.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
            return self._leave(req), None
        group_id = req.group_id
        create = req.member_epoch == 0
        group = self._get_or_maybe_create_group(group_id, create)
        if len(group.members) >= self.config.share_max_size and not group.has_member(req.member_id):
            raise KafkaError(ErrorCode.GROUP_MAX_SIZE_REACHED,
                             f"The share group has reached its maximum capacity of {self.config.share_max_size} "
                             "members.")
        member = group.get_or_maybe_create_member(req.member_id, create)
        self._check_member_epoch(member, req.member_epoch)
        if create and not group.has_member(req.member_id):
            log.info("member %s joins share group %s", req.member_id, group_id)
        describer = self.describe_topics()
        updated = member.replace(
            rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
            subscribed_topic_names=(frozenset(req.subscribed_topic_names) if req.subscribed_topic_names is not None
                                    else member.subscribed_topic_names),
            client_id=req.client_id, client_host=req.client_host)
        records: list[ShareGroupRecord] = []
        subscription_changed = False
        if updated != member or not group.has_member(req.member_id):
            records.append(rh.member_subscription_record(group_id, updated))
            subscription_changed = updated.subscribed_topic_names != member.subscribed_topic_names
        bump = subscription_changed or self._initialized_assignment_pending(group)
        subscribed = group.compute_subscribed_topic_names(group.members.get(req.member_id), updated)
        new_hash = metadata_hash(subscribed, describer)
        group_epoch = group.group_epoch
        if bump or new_hash != group.metadata_hash:
            group_epoch += 1
            records.append(rh.group_epoch_record(group_id, group_epoch, new_hash))
            log.info("share group %s: group epoch bumped to %d", group_id, group_epoch)
        self.group_manager.append_share_group_records(group_id, records)
        group = self.groups[group_id]
        if group_epoch > group.target_assignment_epoch:
            self._update_target_assignment(group, describer)
        target = group.target_assignment_of(req.member_id)
        current = group.members[req.member_id]
        reconciled = current.reconciled(group.target_assignment_epoch, target, describer, subscription_changed)
        if reconciled != current:
            self.group_manager.append_share_group_records(group_id, [rh.current_assignment_record(group_id,
                                                                                                   reconciled)])
        self._schedule_session_timeout(group_id, req.member_id)
        initialize = self._maybe_initialize(group, set(subscribed), describer)
        result = ShareHeartbeatResult(req.member_id, reconciled.member_epoch, self.heartbeat_interval_ms(group_id))
        if req.member_epoch == 0 or req.subscribed_topic_names is not None or not _same(
                member.assigned_partitions, reconciled.assigned_partitions):
            result.assignment = reconciled.assigned_partitions
        return result, initialize

    def _get_or_maybe_create_group(self, group_id: str, create: bool) -> ShareGroup:
        group = self.groups.get(group_id)
        if group is not None:
            return group
        other = (self.group_manager.consumer_groups.get(group_id) is not None
                 or self.group_manager.groups.get(group_id) is not None)
        if other:
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
        if not create:
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Share group {group_id} not found.")
        return ShareGroup(group_id)

    @staticmethod
    def _check_member_epoch(member: ShareGroupMember, received: int) -> None:
        if received > member.member_epoch:
            raise KafkaError(ErrorCode.FENCED_MEMBER_EPOCH,
                             f"The share group member has a greater member epoch ({received}) than the one known by "
                             f"the group coordinator ({member.member_epoch}). The member must abandon all its "
                             "partitions and rejoin.")
        if received < member.member_epoch and received != member.previous_member_epoch:
            raise KafkaError(ErrorCode.FENCED_MEMBER_EPOCH,
                             f"The share group member has a smaller member epoch ({received}) than the one known by "
                             f"the group coordinator ({member.member_epoch}), and it does not match the previous "
                             f"member epoch ({member.previous_member_epoch}). The member must abandon all its "
                             "partitions and rejoin.")

    # ---- target assignment ---------------------------------------------------------------------------------

    def _initialized_assignment_pending(self, group: ShareGroup) -> bool:
        """Whether partitions of subscribed topics were initialized and are not all in the target assignment."""
        if not group.members or group.state_metadata is None or not group.subscribed_topic_names:
            return False
        assigned = group.assigned_partitions()
        describer = self.describe_topics()
        for topic_id, value in group.state_metadata.initialized_topics.items():
            # A topic deleted (or deleted and made again under a new id) is not waiting to be assigned.
            if (value.name in group.subscribed_topic_names and describer.topic_id(value.name) == topic_id
                    and assigned.get(topic_id) != set(value.partitions)):
                return True
        return False

    def _update_target_assignment(self, group: ShareGroup, describer: SubscribedTopicDescriber) -> None:
        initialized = group.initialized_partitions()
        assignor = SimpleAssignor(lambda t, p: p in initialized.get(t, frozenset()))
        specs = {}
        for member_id in member_hash_order(group.members):
            member = group.members[member_id]
            current = group.target_assignment_of(member_id)
            specs[member_id] = MemberSubscription(
                describer.topic_ids(member.subscribed_topic_names),
                {t: current[t] for t in topic_hash_order(current)}, member.rack_id)
        subscription_type = subscription_type_of(group.subscribed_topic_names, len(group.members))
        try:
            assignment = assignor.assign(GroupSpec(specs, subscription_type), describer)
        except PartitionAssignorError as exc:
            log.error("share group %s: computing the target assignment of epoch %d failed: %s", group.group_id,
                      group.group_epoch, exc)
            raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR,
                             f"Failed to compute a new target assignment for epoch {group.group_epoch}: {exc}."
                             ) from exc
        records = []
        for member_id in specs:
            new = assignment.get(member_id, {})
            if member_id not in group.target_assignment or not _same(new, group.target_assignment[member_id]):
                records.append(rh.target_assignment_record(group.group_id, member_id, new))
        records.append(rh.target_assignment_epoch_record(group.group_id, group.group_epoch))
        self.group_manager.append_share_group_records(group.group_id, records)
        log.info("share group %s: new target assignment at epoch %d (%s)", group.group_id, group.group_epoch,
                 "homogeneous" if subscription_type is SubscriptionType.HOMOGENEOUS else "heterogeneous")

    def assignor_name(self) -> str:
        return SIMPLE_ASSIGNOR_NAME

    # ---- leaving and fencing -------------------------------------------------------------------------------

    def _leave(self, req: ShareHeartbeatRequest) -> ShareHeartbeatResult:
        group = self.groups.get(req.group_id)
        if group is None:
            if req.group_id in self.group_manager.consumer_groups or req.group_id in self.group_manager.groups:
                raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {req.group_id} is not a share group.")
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {req.group_id} not found.")
        member = group.get_or_maybe_create_member(req.member_id, False)
        log.info("member %s left share group %s", member.member_id, group.group_id)
        self._fence_member(group, member)
        return ShareHeartbeatResult(req.member_id, req.member_epoch)

    def _fence_member(self, group: ShareGroup, member: ShareGroupMember) -> None:
        """Remove the member and bump the group epoch, so its partitions go to the others."""
        group_id = group.group_id
        records = rh.member_removal_records(group_id, member.member_id)
        new_hash = metadata_hash(group.compute_subscribed_topic_names(member, None), self.describe_topics())
        records.append(rh.group_epoch_record(group_id, group.group_epoch + 1, new_hash))
        self.group_manager.append_share_group_records(group_id, records)
        self.timer.cancel(self._session_key(group_id, member.member_id))

    # ---- share state initialization ------------------------------------------------------------------------

    def _maybe_initialize(self, group: ShareGroup, subscribed: set[str],
                          describer: SubscribedTopicDescriber) -> InitializeRequest | None:
        """Record the subscribed partitions that are neither initialized nor recently initializing as initializing
        (Kafka's subscribedTopicsChangeMap and addInitializingTopicsRecords), and return them to initialize."""
        if not subscribed:
            return None
        now = self.now_ms()
        metadata = group.state_metadata
        initializing = {} if metadata is None else metadata.initializing_topics
        initialized = {} if metadata is None else metadata.initialized_topics
        fresh = {t: v for t, v in initializing.items()
                 if now - v.timestamp < self.config.share_initialize_retry_interval_ms}
        known = _combine(initialized, fresh)
        changes: dict[uuid.UUID, InitMapValue] = {}
        for name in sorted(subscribed):
            topic_id = describer.topic_id(name)
            if topic_id is None:
                continue
            count = describer.num_partitions(topic_id)
            have = known[topic_id].partitions if topic_id in known else frozenset()
            if len(have) < count:
                changes[topic_id] = InitMapValue(name, frozenset(range(count)) - have, now)
        if not changes:
            return None
        deleting = {} if metadata is None else dict(metadata.deleting_topics)
        for topic_id in changes:
            deleting.pop(topic_id, None)
        self.group_manager.append_share_group_records(group.group_id, [rh.state_partition_metadata_record(
            group.group_id, _combine(initializing, changes), initialized, deleting)])
        return InitializeRequest(group.group_id, group.group_epoch, {t: v.partitions for t, v in changes.items()})

    def request_initialize(self, request: InitializeRequest) -> None:
        """Hand share partitions to the initializer task (after the heartbeat that recorded them is answered)."""
        self._send_initialize.send_nowait(request)

    async def run_initializer(self, *, task_status: trio.TaskStatus = trio.TASK_STATUS_IGNORED) -> None:
        """Initialize the share partitions handed over, each request in its own task (a share coordinator that
        keeps one waiting holds up no other group), until cancelled."""
        async with trio.open_nursery() as nursery:
            task_status.started()
            async for request in self._receive_initialize:
                nursery.start_soon(self._initialize_logged, request)

    async def _initialize_logged(self, request: InitializeRequest) -> None:
        try:
            await self._initialize(request)
        except KafkaError as exc:
            log.warning("initializing the share state of group %s failed: %s", request.group_id, exc.code.name)

    async def _initialize(self, request: InitializeRequest) -> None:
        initializer = self.state_initializer
        if initializer is None:
            return
        errors: list[ErrorCode] = []

        async def one(key: SharePartitionKey) -> None:
            result = await initializer.initialize_state(key, request.group_epoch, UNINITIALIZED_START_OFFSET)
            if result.error != ErrorCode.NONE:
                errors.append(result.error)

        async with trio.open_nursery() as nursery:
            for topic_id, partitions in request.partitions.items():
                for partition in sorted(partitions):
                    nursery.start_soon(one, SharePartitionKey(request.group_id, topic_id, partition))
        if not self.group_manager.is_owned(request.group_id) or request.group_id not in self.groups:
            return
        if errors:
            log.error("share group %s: initializing share state failed with %s", request.group_id, errors[0].name)
            self.uninitialize_share_group_state(request.group_id, request.partitions)
        else:
            self.initialize_share_group_state(request.group_id, request.partitions)
        await self.group_manager.wait_replicated(request.group_id)

    @changes_groups
    def initialize_share_group_state(self, group_id: str, partitions: Mapping[uuid.UUID, frozenset[int]]) -> None:
        """The share coordinator initialized these partitions: move them from initializing to initialized."""
        group = self.groups.get(group_id)
        if group is None or not partitions:
            return
        describer = self.describe_topics()
        now = self.now_ms()
        enriched = {t: InitMapValue(describer.topic_name(t) or "<UNKNOWN>", frozenset(ps), now)
                    for t, ps in partitions.items()}
        metadata = group.state_metadata
        if metadata is None:
            records = [rh.state_partition_metadata_record(group_id, {}, enriched, {})]
        else:
            initializing = {}
            for topic_id, value in metadata.initializing_topics.items():
                rest = value.partitions - partitions.get(topic_id, frozenset())
                if rest:
                    initializing[topic_id] = InitMapValue(value.name, rest, value.timestamp)
            records = [rh.state_partition_metadata_record(
                group_id, initializing, _combine(metadata.initialized_topics, enriched), metadata.deleting_topics)]
        self.group_manager.append_share_group_records(group_id, records)
        log.info("share group %s: share state initialized for %d partitions", group_id,
                 sum(len(ps) for ps in partitions.values()))

    def uninitialize_share_group_state(self, group_id: str, partitions: Mapping[uuid.UUID, frozenset[int]]) -> None:
        """Initializing these partitions failed: take them out of initializing, so a later heartbeat tries again."""
        group = self.groups.get(group_id)
        metadata = None if group is None else group.state_metadata
        if metadata is None or not metadata.initializing_topics or not partitions:
            return
        initializing = {}
        for topic_id, value in metadata.initializing_topics.items():
            rest = value.partitions - partitions.get(topic_id, frozenset())
            if rest:
                initializing[topic_id] = InitMapValue(value.name, rest, value.timestamp)
        self.group_manager.append_share_group_records(group_id, [rh.state_partition_metadata_record(
            group_id, initializing, metadata.initialized_topics, metadata.deleting_topics)])

    # ---- describing and deleting ---------------------------------------------------------------------------

    def describe_group(self, group_id: str) -> ShareGroup:
        """The group ShareGroupDescribe describes; KafkaError as Kafka answers for one it cannot."""
        self.group_manager.check_active(group_id)
        group = self.groups.get(group_id)
        if group is None:
            if group_id in self.group_manager.groups or group_id in self.group_manager.consumer_groups:
                raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        return group

    async def delete_share_state(self, group_id: str, partitions: Mapping[uuid.UUID, frozenset[int]]) -> ErrorCode:
        """Delete a deleted group's share partitions' state in the share coordinator (Kafka's
        DeleteShareGroupState on group deletion); the first error, or NONE."""
        initializer = self.state_initializer
        if initializer is None:
            return ErrorCode.NONE
        errors: list[ErrorCode] = []

        async def one(key: SharePartitionKey) -> None:
            result = await initializer.delete_state(key)
            if result.error != ErrorCode.NONE:
                errors.append(result.error)

        async with trio.open_nursery() as nursery:
            for topic_id, ps in partitions.items():
                for partition in sorted(ps):
                    nursery.start_soon(one, SharePartitionKey(group_id, topic_id, partition))
        return errors[0] if errors else ErrorCode.NONE

    # ---- offsets: DescribeShareGroupOffsets, AlterShareGroupOffsets, DeleteShareGroupOffsets --------------------

    def initialized_partitions(self, group_id: str) -> dict[uuid.UUID, frozenset[int]]:
        """The share-partitions whose state the group has initialized (Kafka's initializedShareGroupPartitions):
        what DescribeShareGroupOffsets without topics describes; none for an unknown group."""
        self.group_manager.check_active(group_id)
        group = self.groups.get(group_id)
        metadata = None if group is None else group.state_metadata
        return {} if metadata is None else {t: v.partitions for t, v in metadata.initialized_topics.items()}

    async def read_start_offsets(self, group_id: str, partitions: Mapping[uuid.UUID, Iterable[int]]
                                 ) -> dict[tuple[uuid.UUID, int], tuple[int, int]]:
        """Each share-partition's start offset and leader epoch, read from the share coordinator
        (ReadShareGroupStateSummary); -1 and -1 where it has no state, as Kafka treats an error there as no data."""
        reader = self.state_initializer
        found: dict[tuple[uuid.UUID, int], tuple[int, int]] = {
            (t, p): (UNINITIALIZED_START_OFFSET, -1) for t, ps in partitions.items() for p in ps}
        if reader is None:
            return found

        async def one(topic_id: uuid.UUID, partition: int) -> None:
            result = await reader.read_summary(SharePartitionKey(group_id, topic_id, partition), -1)
            if result.error == ErrorCode.NONE:
                found[(topic_id, partition)] = (result.start_offset, result.leader_epoch)

        async with trio.open_nursery() as nursery:
            for topic_id, partition in list(found):
                nursery.start_soon(one, topic_id, partition)
        return found

    @changes_groups
    def begin_alter_offsets(self, group_id: str, offsets: Mapping[str, Mapping[int, int]]) -> OffsetsAlteration:
        """Check an AlterShareGroupOffsets (only an empty share group: NON_EMPTY_GROUP otherwise) and record the
        share-partitions it sets as initializing, as Kafka's completeAlterShareGroupOffsets; their state is then
        initialized with the new start offsets at the group epoch by `finish_alter_offsets`."""
        group = self.describe_group(group_id)
        if group.members:
            raise KafkaError(ErrorCode.NON_EMPTY_GROUP, "The group is not empty.")
        describer = self.describe_topics()
        alteration = OffsetsAlteration(group_id, group.group_epoch, {}, {})
        initializing: dict[uuid.UUID, InitMapValue] = {}
        now = self.now_ms()
        for name, partitions in offsets.items():
            topic_id = describer.topic_id(name)
            count = 0 if topic_id is None else describer.num_partitions(topic_id)
            errors = {p: ErrorCode.NONE if p < count and p >= 0 else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                      for p in partitions}
            alteration.topics[name] = (topic_id, errors)
            if topic_id is None:
                continue
            valid = {p: o for p, o in partitions.items() if errors[p] == ErrorCode.NONE}
            alteration.start_offsets[topic_id] = valid
            initializing[topic_id] = InitMapValue(name, frozenset(valid), now)
        if initializing:
            metadata = group.state_metadata
            if metadata is None:
                record = rh.state_partition_metadata_record(group_id, initializing, {}, {})
            else:
                record = rh.state_partition_metadata_record(
                    group_id, _combine(metadata.initializing_topics, initializing), metadata.initialized_topics,
                    {t: n for t, n in metadata.deleting_topics.items() if t not in initializing})
            self.group_manager.append_share_group_records(group_id, [record])
        return alteration

    async def finish_alter_offsets(self, alteration: OffsetsAlteration) -> None:
        """Initialize the altered share-partitions' state with their new start offsets (a new state epoch, which
        fences a share-partition leader still holding the old state) and record them initialized; a partition the
        share coordinator refuses gets its error, and stays initializing (Kafka does not undo it either)."""
        initializer = self.state_initializer
        if initializer is None or not alteration.start_offsets:
            return
        failed: dict[tuple[uuid.UUID, int], ErrorCode] = {}

        async def one(topic_id: uuid.UUID, partition: int, start_offset: int) -> None:
            key = SharePartitionKey(alteration.group_id, topic_id, partition)
            result = await initializer.initialize_state(key, alteration.state_epoch, start_offset)
            if result.error != ErrorCode.NONE:
                failed[(topic_id, partition)] = result.error

        async with trio.open_nursery() as nursery:
            for topic_id, partitions in alteration.start_offsets.items():
                for partition, start_offset in sorted(partitions.items()):
                    nursery.start_soon(one, topic_id, partition, start_offset)
        for known_id, errors in alteration.topics.values():
            for partition in errors:
                if known_id is not None and (known_id, partition) in failed:
                    errors[partition] = failed[(known_id, partition)]
        if failed:
            log.error("share group %s: altering the offsets of %d share-partitions failed with %s",
                      alteration.group_id, len(failed), next(iter(failed.values())).name)
            return
        if self.group_manager.is_owned(alteration.group_id) and alteration.group_id in self.groups:
            self.initialize_share_group_state(alteration.group_id, {
                t: frozenset(ps) for t, ps in alteration.start_offsets.items() if ps})
            await self.group_manager.wait_replicated(alteration.group_id)

    @changes_groups
    def begin_delete_offsets(self, group_id: str, topics: list[str]) -> OffsetsDeletion:
        """Check a DeleteShareGroupOffsets (only an empty share group) and record the topics' initialized
        share-partitions as deleting, as Kafka's sharePartitionsEligibleForOffsetDeletion; `finish_delete_offsets`
        then deletes their state in the share coordinator. A topic deleting already is deleted again whole."""
        group = self.describe_group(group_id)
        if group.members:
            raise KafkaError(ErrorCode.NON_EMPTY_GROUP, "The group is not empty.")
        describer = self.describe_topics()
        deletion = OffsetsDeletion(group_id, {}, {})
        metadata = group.state_metadata
        if metadata is None:
            return deletion
        initialized = dict(metadata.initialized_topics)
        deleting = dict(metadata.deleting_topics)
        unknown = DEFAULT_MESSAGES[ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
        for name in topics:
            topic_id = describer.topic_id(name)
            if topic_id is None:
                deletion.refused[name] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, unknown)
            elif topic_id in initialized:
                deletion.partitions[topic_id] = (name, initialized.pop(topic_id).partitions)
                deleting[topic_id] = name
            elif topic_id in deleting:
                deletion.partitions[topic_id] = (name, frozenset(range(describer.num_partitions(topic_id))))
            else:
                deletion.refused[name] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                          "There is no offset information to delete.")
        self.group_manager.append_share_group_records(group_id, [rh.state_partition_metadata_record(
            group_id, metadata.initializing_topics, initialized, deleting)])
        return deletion

    async def finish_delete_offsets(self, deletion: OffsetsDeletion) -> dict[uuid.UUID, ErrorCode]:
        """Delete the share-partitions' state in the share coordinator; the topics whose state is all gone leave
        the group's deleting topics (Kafka's completeDeleteShareGroupOffsets). Each topic's error, NONE when
        deleted."""
        results: dict[uuid.UUID, ErrorCode] = {t: ErrorCode.NONE for t in deletion.partitions}
        initializer = self.state_initializer
        if initializer is None or not deletion.partitions:
            return results

        async def one(topic_id: uuid.UUID, partition: int) -> None:
            result = await initializer.delete_state(SharePartitionKey(deletion.group_id, topic_id, partition))
            if result.error != ErrorCode.NONE:
                results[topic_id] = result.error

        async with trio.open_nursery() as nursery:
            for topic_id, (_name, partitions) in deletion.partitions.items():
                for partition in sorted(partitions):
                    nursery.start_soon(one, topic_id, partition)
        deleted = {t for t, error in results.items() if error == ErrorCode.NONE}
        group = self.groups.get(deletion.group_id)
        metadata = None if group is None else group.state_metadata
        if deleted and metadata is not None and self.group_manager.is_owned(deletion.group_id):
            self._delete_offsets_done(deletion.group_id, deleted)
            await self.group_manager.wait_replicated(deletion.group_id)
        return results

    @changes_groups
    def _delete_offsets_done(self, group_id: str, deleted: set[uuid.UUID]) -> None:
        metadata = self.groups[group_id].state_metadata
        assert metadata is not None
        self.group_manager.append_share_group_records(group_id, [rh.state_partition_metadata_record(
            group_id, metadata.initializing_topics, metadata.initialized_topics,
            {t: n for t, n in metadata.deleting_topics.items() if t not in deleted})])

    @changes_groups
    def on_topic_deleted(self, topic: str) -> None:
        """A topic was deleted: the share groups this coordinator serves forget its share partitions' state
        metadata (Kafka's maybeCleanupShareGroupState; the share coordinator deletes the state itself)."""
        describer = self.describe_topics()
        for group_id, group in list(self.groups.items()):
            metadata = group.state_metadata
            if metadata is None or not self.group_manager.is_owned(group_id):
                continue
            gone = {t for t, v in (*metadata.initialized_topics.items(), *metadata.initializing_topics.items())
                    if v.name == topic and describer.topic_name(t) is None}
            gone |= {t for t, name in metadata.deleting_topics.items() if name == topic and
                     describer.topic_name(t) is None}
            if not gone:
                continue
            try:
                self.group_manager.append_share_group_records(group_id, [rh.state_partition_metadata_record(
                    group_id, {t: v for t, v in metadata.initializing_topics.items() if t not in gone},
                    {t: v for t, v in metadata.initialized_topics.items() if t not in gone},
                    {t: n for t, n in metadata.deleting_topics.items() if t not in gone})])
            except KafkaError as exc:
                log.warning("share group %s: forgetting deleted topic %s failed: %s", group_id, topic,
                            exc.code.name)

    @changes_groups
    def share_partitions_to_delete(self, group_ids: list[str | None]) -> dict[str, dict[uuid.UUID, frozenset[int]]]:
        """The share partitions of the empty share groups among `group_ids` this coordinator serves, whose state
        DeleteGroups deletes in the share coordinator before the groups (Kafka's sharePartitionDeleteRequests): the
        initialized and initializing topics are first recorded as deleting, so a deletion that fails is tried again
        by the next DeleteGroups; every partition of a deleting topic that still exists is deleted."""
        describer = self.describe_topics()
        partitions: dict[str, dict[uuid.UUID, frozenset[int]]] = {}
        for group_id in group_ids:
            group = None if group_id is None else self.groups.get(group_id)
            if group is None or group.members or not self.group_manager.is_owned(group.group_id):
                continue
            metadata = group.state_metadata
            if metadata is None:
                partitions[group.group_id] = {}
                continue
            deleting = {**metadata.deleting_topics,
                        **{t: v.name for t, v in _combine(metadata.initialized_topics,
                                                          metadata.initializing_topics).items()}}
            if metadata.initialized_topics or metadata.initializing_topics:
                self.group_manager.append_share_group_records(group.group_id, [rh.state_partition_metadata_record(
                    group.group_id, {}, {}, deleting)])
            partitions[group.group_id] = {t: frozenset(range(describer.num_partitions(t))) for t in deleting
                                          if describer.num_partitions(t) > 0}
        return partitions
