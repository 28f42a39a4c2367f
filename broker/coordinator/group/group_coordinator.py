"""The group membership protocol: Kafka's classic GroupCoordinator for JoinGroup, SyncGroup, Heartbeat, LeaveGroup.

It follows Kafka's rules for classic groups: JoinGroup (with MEMBER_ID_REQUIRED, static membership, the initial
rebalance delay), SyncGroup, Heartbeat, LeaveGroup, session and rebalance timeouts and the group state machine,
with the group admin APIs (DescribeGroups, ListGroups, DeleteGroups) from group_admin. Everything runs on the
broker's trio loop, so a request's state change is atomic between awaits. A JoinGroup or SyncGroup that must wait
for the rest of the group gets a `Completion` that a later request or a timer fills.

The pieces it stands on, each in its own module: the group cache and what persists it (GroupMetadataManager),
committed offsets (OffsetManager), and the keyed timer of delayed operations (CoordinatorTimer). Its side of
transactions is there too: offsets a TxnOffsetCommit left pending are committed or dropped when the transaction's
marker has been written to their partition (on_transaction_completed).
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, TypeVar

import trio

from minikafka.broker.clock.broker_clock import wall_clock_ms
from minikafka.broker.coordinator.group.assignor.assignor_spec import SubscribedTopicDescriber, TopicMetadata
from minikafka.broker.coordinator.group.consumer_group_coordinator import ConsumerGroupCoordinator
from minikafka.broker.coordinator.group.coordinator_timer import CoordinatorTimer
from minikafka.broker.coordinator.group.group import (
    MEMBER_ID_REQUIRED_MIN_VERSION,
    Completion,
    Group,
    GroupState,
    JoinRequest,
    JoinResult,
    Member,
    SyncResult,
)
from minikafka.broker.coordinator.group.group_admin import GroupAdmin
from minikafka.broker.coordinator.group.group_coordinator_config import GroupCoordinatorConfig
from minikafka.broker.coordinator.group.group_metadata_log import GroupMetadataLog
from minikafka.broker.coordinator.group.group_metadata_manager import GroupMetadataManager, MetadataLog, changes_groups
from minikafka.broker.coordinator.group.offset_manager import OffsetManager
from minikafka.broker.coordinator.group.share_group_coordinator import ShareGroupCoordinator
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.protocol.internal_topics import GROUP_METADATA_TOPIC

if TYPE_CHECKING:
    from minikafka.broker.metadata.metadata_cache import MetadataCache
    from minikafka.broker.replication.replica_manager import ReplicaManager
    from minikafka.config import BrokerConfig

log = logging.getLogger("minikafka.group_coordinator")

T = TypeVar("T")

# Kafka's group.classic... new member join timeout: a JoinGroup from a new member is parked at most this long.
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000
# JoinGroup v9+ lets a rejoining static leader skip the assignment (KIP-814).
SKIP_ASSIGNMENT_MIN_VERSION = 9


def _join_error(code: ErrorCode, member_id: str = "") -> JoinResult:
    return JoinResult(code, member_id=member_id)


def _completed(result: T) -> Completion[T]:
    done: Completion[T] = Completion()
    done.complete(result)
    return done


class GroupCoordinator(GroupAdmin):
    """Kafka's classic membership protocol over the groups of `group_manager`; committed offsets are
    `offset_manager`'s. The admin APIs are GroupAdmin's."""

    def __init__(self, config: GroupCoordinatorConfig, metadata_log: MetadataLog,
                 clock_ms: Callable[[], int] = wall_clock_ms,
                 describe_topics: Callable[[], SubscribedTopicDescriber] = SubscribedTopicDescriber,
                 group_configs: Callable[[str], Mapping[str, str]] = lambda _group_id: {}) -> None:
        self.config = config
        self.clock_ms = clock_ms
        self.timer = CoordinatorTimer()
        self.group_manager = GroupMetadataManager(config, metadata_log, clock_ms)
        self.timer.fired = lambda: self.group_manager.groups_changed()
        self.offset_manager = OffsetManager(config, self.group_manager, clock_ms, self._reschedule_heartbeat)
        # KIP-848 consumer groups, on the same groups' partitions and timer.
        self.consumer = ConsumerGroupCoordinator(config, self.group_manager, self.timer, describe_topics, clock_ms,
                                                 group_configs)
        # KIP-932 share groups, likewise.
        self.share = ShareGroupCoordinator(config, self.group_manager, self.timer, describe_topics, clock_ms,
                                           group_configs)
        self.consumer.on_upgraded = self._on_upgraded
        self.consumer.on_downgraded = self._on_downgraded

    # ---- lifecycle -----------------------------------------------------------------------------------------

    def load(self) -> None:
        """Coordinate the groups of every partition of __consumer_offsets (a broker that leads them all)."""
        self.group_manager.active = True
        for partition in range(self.config.num_partitions):
            self.on_elected(partition)

    def on_elected(self, partition: int) -> None:
        """This broker now leads `partition` of __consumer_offsets: serve its groups, with the session timers of
        their members started afresh."""
        for group in self.group_manager.load_partition(partition):
            for member in group.members.values():
                self._reschedule_heartbeat(group, member)
            if len(group.members) > self.config.max_size:
                self._prepare_rebalance(group, f"loaded group is over capacity {self.config.max_size}")
        self.consumer.on_loaded(partition)
        self.share.on_loaded(partition)

    def on_resigned(self, partition: int) -> None:
        """This broker no longer leads `partition`: its groups go, and members parked in a join or sync are told
        NOT_COORDINATOR, so they find the new coordinator."""
        self.consumer.on_unloading(partition)
        self.share.on_unloading(partition)
        for group in self.group_manager.unload_partition(partition):
            self.timer.cancel(self._join_key(group.group_id))
            self.timer.cancel(self._sync_key(group.group_id))
            for member in list(group.members.values()):
                self.timer.cancel(self._heartbeat_key(group.group_id, member.member_id))
                group.complete_join(member, _join_error(ErrorCode.NOT_COORDINATOR, member.member_id))
                group.complete_sync(member, SyncResult(ErrorCode.NOT_COORDINATOR))

    async def run(self, *, task_status: trio.TaskStatus = trio.TASK_STATUS_IGNORED) -> None:
        """The coordinator's timers (session/rebalance timeouts and periodic offset expiry) and the share groups'
        state initializations."""
        self._schedule_expiration()
        async with trio.open_nursery() as nursery:
            await nursery.start(self.share.run_initializer)
            task_status.started()
            await self.timer.run()

    def on_transaction_completed(self, producer_id: int, partitions: Iterable[int], commit: bool) -> None:
        """A COMMIT (or ABORT) marker of `producer_id` has been written to these partitions of __consumer_offsets:
        the offsets its transaction committed in their groups become committed offsets (or are dropped), as
        Kafka's onTransactionCompleted. The marker is in the log already, so this only updates the groups, at
        once: there is nothing to wait for."""
        self.group_manager.handle_txn_completion(producer_id, partitions, commit)

    def shutdown(self) -> None:
        """Stop coordinating: parked joins and syncs answer NOT_COORDINATOR, as when Kafka unloads a partition."""
        if not self.active:
            return
        self.group_manager.active = False
        for group in self.groups.values():
            for member in list(group.members.values()):
                group.complete_join(member, _join_error(ErrorCode.NOT_COORDINATOR, member.member_id))
                group.complete_sync(member, SyncResult(ErrorCode.NOT_COORDINATOR))

    # ---- online migration ----------------------------------------------------------------------------------

    def _on_upgraded(self, group: Group) -> None:
        """The classic group became a consumer group: its timers go, and members parked in a join or sync are
        answered REBALANCE_IN_PROGRESS, so they rejoin the consumer group (Kafka's convertToConsumerGroup)."""
        self.timer.cancel(self._join_key(group.group_id))
        self.timer.cancel(self._sync_key(group.group_id))
        for member in list(group.members.values()):
            self.timer.cancel(self._heartbeat_key(group.group_id, member.member_id))
            group.complete_join(member, _join_error(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))
            group.complete_sync(member, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))

    def _on_downgraded(self, group: Group, reason: str | None) -> None:
        """The consumer group became this classic group: its members' sessions are timed here now, and a
        rebalance for `reason`, if any, tells them to rejoin (Kafka's convertToClassicGroup)."""
        for member in group.members.values():
            self._reschedule_heartbeat(group, member)
        if reason is not None:
            self._prepare_rebalance(group, reason)

    # ---- timers --------------------------------------------------------------------------------------------

    @staticmethod
    def _heartbeat_key(group_id: str, member_id: str) -> str:
        return f"heartbeat-{group_id}-{member_id}"

    @staticmethod
    def _join_key(group_id: str) -> str:
        return f"join-{group_id}"

    @staticmethod
    def _sync_key(group_id: str) -> str:
        return f"sync-{group_id}"

    def _reschedule_heartbeat(self, group: Group, member: Member, timeout_ms: int | None = None) -> None:
        group_id, member_id = group.group_id, member.member_id
        self.timer.schedule(self._heartbeat_key(group_id, member_id),
                            member.session_timeout_ms if timeout_ms is None else timeout_ms,
                            lambda: self._expire_heartbeat(group_id, member_id))

    def _schedule_expiration(self) -> None:
        self.timer.schedule("expire-group-metadata", self.config.offsets_retention_check_interval_ms,
                            self._run_expiration)

    def _run_expiration(self) -> None:
        try:
            self.offset_manager.cleanup_group_metadata()
        finally:
            self._schedule_expiration()

    # ---- JoinGroup -----------------------------------------------------------------------------------------

    @changes_groups
    def join_group(self, req: JoinRequest) -> Completion[JoinResult]:
        """Start a join; the returned completion holds the response once the rebalance gets there."""
        try:
            self.group_manager.check_active(req.group_id)
        except KafkaError as exc:
            return _completed(_join_error(exc.code, req.member_id))
        if req.group_id in self.group_manager.share_groups:
            # As Kafka: a group of another type than classic or consumer.
            return _completed(_join_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
        if not self.config.min_session_timeout_ms <= req.session_timeout_ms <= self.config.max_session_timeout_ms:
            return _completed(_join_error(ErrorCode.INVALID_SESSION_TIMEOUT, req.member_id))
        consumer_group = self.group_manager.consumer_groups.get(req.group_id)
        if consumer_group is not None:
            if not consumer_group.is_empty():
                # A classic member of a consumer group (KIP-848's online migration).
                try:
                    return _completed(self.consumer.classic_join(req))
                except KafkaError as exc:
                    return _completed(_join_error(exc.code, req.member_id))
            # As Kafka: an empty consumer group becomes a classic group, keeping its committed offsets.
            error = self.group_manager.delete_consumer_group(req.group_id, keep_offsets=True)
            if error != ErrorCode.NONE:
                return _completed(_join_error(error, req.member_id))
            log.info("converted the empty consumer group %s to a classic group", req.group_id)
        is_unknown_member = req.member_id == ""
        group = self.groups.get(req.group_id)
        if group is None:
            if not is_unknown_member:
                return _completed(_join_error(ErrorCode.UNKNOWN_MEMBER_ID, req.member_id))
            group = self.groups[req.group_id] = Group(req.group_id, self.clock_ms())
        join: Completion[JoinResult] = Completion()
        if not self._accept_joining_member(group, req.member_id):
            group.remove(req.member_id)
            join.complete(_join_error(ErrorCode.GROUP_MAX_SIZE_REACHED))
        elif is_unknown_member:
            self._join_new_member(group, req, join)
        else:
            self._join_existing_member(group, req, join)
        if group.is_empty and not group.members and not group.pending_join_members and not group.offsets \
                and not group.has_open_transactions and group.protocol_type is None and group.generation_id == 0:
            # A refused first join leaves nothing behind, as Kafka's reverted snapshot would.
            self.groups.pop(req.group_id, None)
        return join

    def _accept_joining_member(self, group: Group, member_id: str) -> bool:
        if group.is_in(GroupState.EMPTY, GroupState.DEAD):
            return True
        if group.is_in(GroupState.PREPARING_REBALANCE):
            member = group.members.get(member_id)
            return (member is not None and member.is_awaiting_join) or group.num_awaiting_join < self.config.max_size
        return member_id in group.members or len(group.members) < self.config.max_size

    def _join_new_member(self, group: Group, req: JoinRequest, join: Completion[JoinResult]) -> None:
        if group.is_in(GroupState.DEAD):
            join.complete(_join_error(ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return
        if not group.supports_protocols(req.protocol_type, {name for name, _ in req.protocols}):
            join.complete(_join_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
            return
        new_member_id = group.generate_member_id(req.client_id, req.group_instance_id)
        if req.group_instance_id is not None:
            existing = group.static_member_id(req.group_instance_id)
            if existing is not None:
                log.info("static member %s of group %s rejoins in %s; replacing member id %s with %s",
                         req.group_instance_id, group.group_id, group.state.value, existing, new_member_id)
                self._update_static_member(group, req, existing, new_member_id, join)
            else:
                self._add_member_and_rebalance(group, req, new_member_id, join)
        elif req.api_version >= MEMBER_ID_REQUIRED_MIN_VERSION:
            group.add_pending_member(new_member_id)
            group_id = group.group_id
            self.timer.schedule(self._heartbeat_key(group_id, new_member_id), req.session_timeout_ms,
                                lambda: self._expire_heartbeat(group_id, new_member_id))
            join.complete(_join_error(ErrorCode.MEMBER_ID_REQUIRED, new_member_id))
        else:
            self._add_member_and_rebalance(group, req, new_member_id, join)

    def _join_existing_member(self, group: Group, req: JoinRequest, join: Completion[JoinResult]) -> None:
        member_id = req.member_id
        if group.is_in(GroupState.DEAD):
            join.complete(_join_error(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id))
            return
        if not group.supports_protocols(req.protocol_type, {name for name, _ in req.protocols}):
            join.complete(_join_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id))
            return
        if group.is_pending_member(member_id):
            if req.group_instance_id is not None:
                join.complete(_join_error(ErrorCode.INVALID_REQUEST, member_id))
                return
            self._add_member_and_rebalance(group, req, member_id, join)
            return
        try:
            group.validate_member(member_id, req.group_instance_id)
        except KafkaError as exc:
            join.complete(_join_error(exc.code, member_id))
            return
        member = group.members[member_id]
        reason = f"member {member_id} rejoins ({req.reason or 'not provided'})"
        if group.is_in(GroupState.PREPARING_REBALANCE):
            self._update_member_and_rebalance(group, member, req, join, reason)
        elif group.is_in(GroupState.COMPLETING_REBALANCE):
            if member.matches(req.protocols):
                # It missed the response of this generation's join: answer it again.
                join.complete(self._join_response(group, member_id,
                                                  with_members=group.is_leader(member_id)))
            else:
                self._update_member_and_rebalance(group, member, req, join, reason)
        elif group.is_in(GroupState.STABLE):
            if group.is_leader(member_id) or not member.matches(req.protocols):
                # A leader rejoining asks for a new assignment (e.g. topic metadata changed).
                self._update_member_and_rebalance(group, member, req, join, reason)
            else:
                join.complete(self._join_response(group, member_id, with_members=False))
        else:
            log.warning("rejoining member %s of group %s in unexpected state %s", member_id, group.group_id,
                        group.state.value)
            join.complete(_join_error(ErrorCode.UNKNOWN_MEMBER_ID, member_id))

    def _join_response(self, group: Group, member_id: str, with_members: bool,
                       skip_assignment: bool = False) -> JoinResult:
        return JoinResult(ErrorCode.NONE, member_id=member_id, generation_id=group.generation_id,
                          protocol_type=group.protocol_type, protocol_name=group.protocol_name,
                          leader=group.leader_id or "",
                          members=group.current_member_metadata() if with_members else [],
                          skip_assignment=skip_assignment)

    def _add_member_and_rebalance(self, group: Group, req: JoinRequest, member_id: str,
                                  join: Completion[JoinResult]) -> None:
        member = Member(member_id, req.group_instance_id, req.client_id, req.client_host, req.rebalance_timeout_ms,
                        req.session_timeout_ms, req.protocol_type, list(req.protocols), is_new=True)
        if group.is_in(GroupState.PREPARING_REBALANCE) and group.previous_state is GroupState.EMPTY:
            group.new_member_added = True
        group.add(member, join)
        # A parked new member cannot heartbeat; expire it if it never completes its join.
        self._reschedule_heartbeat(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance_or_complete_join(
            group, f"adding new member {member_id} with group instance id {req.group_instance_id} "
                   f"({req.reason or 'not provided'})")

    def _update_member_and_rebalance(self, group: Group, member: Member, req: JoinRequest,
                                     join: Completion[JoinResult], reason: str) -> None:
        self._supersede_join(member)
        group.update_member(member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, join)
        self._maybe_prepare_rebalance_or_complete_join(group, reason)

    @staticmethod
    def _supersede_join(member: Member) -> None:
        """A member that joins again while parked gave up on its earlier request: release that one."""
        if member.awaiting_join is not None:
            member.awaiting_join.complete(_join_error(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))

    def _update_static_member(self, group: Group, req: JoinRequest, old_member_id: str, new_member_id: str,
                              join: Completion[JoinResult]) -> None:
        instance_id = req.group_instance_id
        assert instance_id is not None  # only static members are replaced
        current_leader = group.leader_id
        member = group.replace_static_member(instance_id, old_member_id, new_member_id)
        self.timer.cancel(self._heartbeat_key(group.group_id, old_member_id))
        self._reschedule_heartbeat(group, member)
        old_protocols = list(member.protocols)
        old_rebalance, old_session = member.rebalance_timeout_ms, member.session_timeout_ms
        group.update_member(member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, join)
        if group.is_in(GroupState.STABLE):
            if group.protocol_name == group.select_protocol():
                # Same protocol: no rebalance, only persist the new member id and hand back the assignment.
                error = self.group_manager.store_group(group, group.assignments())
                if error != ErrorCode.NONE:
                    group.update_member(member, old_protocols, old_rebalance, old_session, None)
                    restored = group.replace_static_member(instance_id, new_member_id, old_member_id)
                    self.timer.cancel(self._heartbeat_key(group.group_id, new_member_id))
                    self._reschedule_heartbeat(group, restored)
                    join.complete(JoinResult(error, member_id="", generation_id=group.generation_id,
                                             protocol_type=group.protocol_type,
                                             protocol_name=group.protocol_name, leader=current_leader or ""))
                    return
                if req.api_version >= SKIP_ASSIGNMENT_MIN_VERSION:
                    is_leader = group.is_leader(new_member_id)
                    group.complete_join(member, self._join_response(group, new_member_id, with_members=is_leader,
                                                                     skip_assignment=is_leader))
                else:
                    result = self._join_response(group, new_member_id, with_members=False)
                    result.leader = current_leader or ""
                    group.complete_join(member, result)
            else:
                self._maybe_prepare_rebalance_or_complete_join(
                    group, f"static member {req.group_instance_id} rejoined with a change of protocol")
        elif group.is_in(GroupState.COMPLETING_REBALANCE):
            # The leader may be assigning to the old member id: rebalance so the new id gets an assignment.
            self._prepare_rebalance(group, f"static member {req.group_instance_id} rejoined during a rebalance")
        else:
            self._maybe_complete_join_phase(group)

    # ---- rebalance machinery ------------------------------------------------------------------------------

    def _maybe_prepare_rebalance_or_complete_join(self, group: Group, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)
        else:
            self._maybe_complete_join_phase(group)

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, ErrorCode.REBALANCE_IN_PROGRESS)
        self._remove_sync_expiration(group)
        initial = group.is_in(GroupState.EMPTY)
        if initial:
            delay = self.config.initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            self._schedule_initial_rebalance(group.group_id, delay, remaining)
        group.transition_to(GroupState.PREPARING_REBALANCE, self.clock_ms())
        self.group_manager.groups_changed()  # begun inside a JoinGroup that may wait for the rebalance's end
        log.info("preparing to rebalance group %s with old generation %d (reason: %s)", group.group_id,
                 group.generation_id, reason)
        if not initial:
            self._maybe_complete_join_else_schedule(group)

    def _schedule_initial_rebalance(self, group_id: str, delay_ms: int, remaining_ms: int) -> None:
        self.timer.schedule(self._join_key(group_id), delay_ms,
                            lambda: self._try_complete_initial_rebalance(group_id, delay_ms, remaining_ms))

    def _try_complete_initial_rebalance(self, group_id: str, delay_ms: int, remaining_ms: int) -> None:
        """group.initial.rebalance.delay.ms: keep waiting while new members keep arriving, up to the timeout."""
        group = self.groups.get(group_id)
        if group is None:
            return
        if group.new_member_added and remaining_ms != 0:
            group.new_member_added = False
            new_delay = min(self.config.initial_rebalance_delay_ms, remaining_ms)
            self._schedule_initial_rebalance(group_id, new_delay, max(remaining_ms - delay_ms, 0))
        else:
            self._complete_join(group)

    def _maybe_complete_join_else_schedule(self, group: Group) -> None:
        if group.has_all_members_joined():
            self._complete_join(group)
        else:
            group_id = group.group_id
            self.timer.schedule(self._join_key(group_id), group.rebalance_timeout_ms(),
                                lambda: self._complete_join_by_id(group_id))

    def _maybe_complete_join_phase(self, group: Group) -> None:
        if (group.is_in(GroupState.PREPARING_REBALANCE) and group.previous_state is not GroupState.EMPTY
                and group.has_all_members_joined()):
            self._complete_join(group)

    def _complete_join_by_id(self, group_id: str) -> None:
        group = self.groups.get(group_id)
        if group is not None:
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        """End the join phase: drop dynamic members that did not rejoin, start the next generation."""
        self.timer.cancel(self._join_key(group.group_id))
        if not group.is_in(GroupState.PREPARING_REBALANCE):
            return
        gone = [m for m in group.not_yet_rejoined_members() if not m.is_static]
        for member in gone:
            group.remove(member.member_id)
            self.timer.cancel(self._heartbeat_key(group.group_id, member.member_id))
        if gone:
            log.info("group %s removed dynamic members who did not rejoin: %s", group.group_id,
                     [m.member_id for m in gone])
        if not group.maybe_elect_new_joined_leader() and group.members:
            log.error("group %s could not complete its rebalance because no member rejoined", group.group_id)
            group_id = group.group_id
            self.timer.schedule(self._join_key(group_id), group.rebalance_timeout_ms(),
                                lambda: self._complete_join_by_id(group_id))
            return
        group.init_next_generation(self.clock_ms())
        if group.is_empty:
            log.info("group %s with generation %d is now empty", group.group_id, group.generation_id)
            error = self.group_manager.store_group(group, {})
            if error != ErrorCode.NONE:
                log.warning("failed to write empty metadata for group %s: %s", group.group_id, error.name)
            return
        log.info("stabilized group %s generation %d (%s) with %d members", group.group_id, group.generation_id,
                 group.protocol_name, len(group.members))
        for member in list(group.members.values()):
            group.complete_join(member, self._join_response(group, member.member_id,
                                                            with_members=group.is_leader(member.member_id)))
            self._reschedule_heartbeat(group, member)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        group_id, generation = group.group_id, group.generation_id
        self.timer.schedule(self._sync_key(group_id), group.rebalance_timeout_ms(),
                            lambda: self._expire_pending_sync(group_id, generation))

    def _reset_and_propagate_assignment_error(self, group: Group, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: Group, error: ErrorCode) -> None:
        ok = error == ErrorCode.NONE
        for member in group.members.values():
            result = SyncResult(error, member.assignment if ok else b"",
                                group.protocol_type if ok else None, group.protocol_name if ok else None)
            if group.complete_sync(member, result):
                self._reschedule_heartbeat(group, member)

    def _remove_sync_expiration(self, group: Group) -> None:
        group.pending_sync_members.clear()
        self.timer.cancel(self._sync_key(group.group_id))

    def _expire_pending_sync(self, group_id: str, generation_id: int) -> None:
        group = self.groups.get(group_id)
        if group is None or generation_id != group.generation_id:
            return
        if group.is_in(GroupState.COMPLETING_REBALANCE, GroupState.STABLE) and group.pending_sync_members:
            missing = sorted(group.pending_sync_members)
            for member_id in missing:
                group.remove(member_id)
                self.timer.cancel(self._heartbeat_key(group_id, member_id))
            self._prepare_rebalance(group, f"removing {missing} on pending sync request expiration")

    def _expire_heartbeat(self, group_id: str, member_id: str) -> None:
        """Session timeout: a member that neither heartbeated nor is parked in a rebalance leaves the group."""
        group = self.groups.get(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            return
        if group.is_pending_member(member_id):
            log.info("pending member %s of group %s expired after its session timeout", member_id, group_id)
            group.remove(member_id)
            if group.is_in(GroupState.PREPARING_REBALANCE) and group.has_all_members_joined():
                self._complete_join(group)
            return
        member = group.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat():
            return
        log.info("member %s of group %s has failed (session timeout), removing it from the group", member_id,
                 group_id)
        self._remove_member_and_update_group(group, member, f"removing member {member_id} on heartbeat expiration")

    def _remove_member_and_update_group(self, group: Group, member: Member, reason: str) -> None:
        # A parked new member gets UNKNOWN_MEMBER_ID, so a client that is still there rejoins.
        group.complete_join(member, _join_error(ErrorCode.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance_or_complete_join(group, reason)
        elif group.is_in(GroupState.PREPARING_REBALANCE) and group.has_all_members_joined():
            self._complete_join(group)

    # ---- SyncGroup -----------------------------------------------------------------------------------------

    @changes_groups
    def sync_group(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None,
                   protocol_type: str | None, protocol_name: str | None,
                   assignments: list[tuple[str, bytes]]) -> Completion[SyncResult]:
        try:
            self.group_manager.check_active(group_id)
        except KafkaError as exc:
            return _completed(SyncResult(exc.code))
        if group_id in self.group_manager.consumer_groups:
            try:
                return _completed(self.consumer.classic_sync(group_id, generation_id, member_id, group_instance_id,
                                                              protocol_type, protocol_name))
            except KafkaError as exc:
                return _completed(SyncResult(exc.code))
        group = self.groups.get(group_id)
        if group is None or group.is_empty:
            return _completed(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        error = self._validate_sync(group, generation_id, member_id, group_instance_id, protocol_type,
                                    protocol_name)
        if error != ErrorCode.NONE:
            return _completed(SyncResult(error))
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return _completed(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        member = group.members[member_id]
        if group.is_in(GroupState.STABLE):
            self._remove_pending_sync_member(group, member_id)
            return _completed(SyncResult(ErrorCode.NONE, member.assignment, group.protocol_type,
                                         group.protocol_name))
        # CompletingRebalance: park until the leader's assignment is stored.
        sync: Completion[SyncResult] = Completion()
        if member.awaiting_sync is not None:
            member.awaiting_sync.complete(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        member.awaiting_sync = sync
        self._remove_pending_sync_member(group, member_id)
        if group.is_leader(member_id):
            given = dict(assignments)
            assignment = {m: given.get(m, b"") for m in group.members}
            missing = [m for m in group.members if m not in given]
            if missing:
                log.warning("setting empty assignments for members %s of group %s generation %d", missing,
                            group_id, group.generation_id)
            log.info("assignment received from leader %s for group %s generation %d (%d members)", member_id,
                     group_id, group.generation_id, len(group.members))
            store_error = self.group_manager.store_group(group, assignment)
            if group.is_in(GroupState.COMPLETING_REBALANCE) and generation_id == group.generation_id:
                if store_error != ErrorCode.NONE:
                    self._reset_and_propagate_assignment_error(group, store_error)
                    self._maybe_prepare_rebalance_or_complete_join(
                        group, f"error {store_error.name} storing the group assignment")
                else:
                    for m in group.members.values():
                        m.assignment = assignment[m.member_id]
                    self._propagate_assignment(group, ErrorCode.NONE)
                    group.transition_to(GroupState.STABLE, self.clock_ms())
        return sync

    def _validate_sync(self, group: Group, generation_id: int, member_id: str, group_instance_id: str | None,
                       protocol_type: str | None, protocol_name: str | None) -> ErrorCode:
        if group.is_in(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        try:
            group.validate_member(member_id, group_instance_id)
        except KafkaError as exc:
            return exc.code
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if _inconsistent(protocol_type, group.protocol_type) or _inconsistent(protocol_name, group.protocol_name):
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        return ErrorCode.NONE

    def _remove_pending_sync_member(self, group: Group, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if not group.pending_sync_members or not group.is_in(GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            self.timer.cancel(self._sync_key(group.group_id))

    # ---- Heartbeat -----------------------------------------------------------------------------------------

    @changes_groups
    def heartbeat(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None) -> ErrorCode:
        try:
            self.group_manager.check_active(group_id)
            if group_id in self.group_manager.consumer_groups:
                return self.consumer.classic_heartbeat(group_id, generation_id, member_id, group_instance_id)
            group = self.groups.get(group_id)
            if group is None:
                raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID, f"group {group_id} not found")
            if group.is_in(GroupState.DEAD):
                raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
            group.validate_member(member_id, group_instance_id)
            if generation_id != group.generation_id:
                raise KafkaError(ErrorCode.ILLEGAL_GENERATION)
        except KafkaError as exc:
            return exc.code
        if group.is_empty:
            return ErrorCode.UNKNOWN_MEMBER_ID
        self._reschedule_heartbeat(group, group.members[member_id])
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    # ---- LeaveGroup ----------------------------------------------------------------------------------------

    @changes_groups
    def leave_group(self, group_id: str, members: list[tuple[str, str | None, str | None]]
                    ) -> tuple[ErrorCode, list[tuple[str, str | None, ErrorCode]]]:
        """(top-level error, per member (member id, instance id, error)); members are (id, instance id, reason)."""
        try:
            self.group_manager.check_active(group_id)
        except KafkaError as exc:
            return exc.code, []
        if group_id in self.group_manager.consumer_groups:
            try:
                return ErrorCode.NONE, self.consumer.classic_leave(group_id, members)
            except KafkaError as exc:
                return exc.code, []
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID, []
        if group.is_in(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        results: list[tuple[str, str | None, ErrorCode]] = []
        left: list[str] = []
        for member_id, instance_id, reason in members:
            reason = reason or "not provided"
            if member_id == "":
                # Administrative removal of a static member by its instance id alone.
                existing = group.static_member_id(instance_id) if instance_id is not None else None
                if existing is None:
                    results.append((member_id, instance_id, ErrorCode.UNKNOWN_MEMBER_ID))
                    continue
                self._remove_current_member(group, existing, reason)
                left.append(existing)
                results.append((member_id, instance_id, ErrorCode.NONE))
            elif group.is_pending_member(member_id):
                group.remove(member_id)
                self.timer.cancel(self._heartbeat_key(group_id, member_id))
                log.info("pending member %s left group %s (%s)", member_id, group_id, reason)
                left.append(member_id)
                results.append((member_id, instance_id, ErrorCode.NONE))
            else:
                try:
                    group.validate_member(member_id, instance_id)
                except KafkaError as exc:
                    results.append((member_id, instance_id, exc.code))
                    continue
                self._remove_current_member(group, member_id, reason)
                left.append(member_id)
                results.append((member_id, instance_id, ErrorCode.NONE))
        if left:
            reason = f"explicit LeaveGroup request for ({', '.join(left)}) members"
            if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
                self._maybe_prepare_rebalance_or_complete_join(group, reason)
            elif group.is_in(GroupState.PREPARING_REBALANCE):
                self._maybe_complete_join_phase(group)
        return ErrorCode.NONE, results

    def _remove_current_member(self, group: Group, member_id: str, reason: str) -> None:
        member = group.members[member_id]
        self.timer.cancel(self._heartbeat_key(group.group_id, member_id))
        log.info("member %s left group %s through LeaveGroup (%s)", member_id, group.group_id, reason)
        group.complete_join(member, _join_error(ErrorCode.UNKNOWN_MEMBER_ID))
        group.remove(member_id)


def load_group_coordinator(config: BrokerConfig, metadata_cache: MetadataCache,
                           replica_manager: ReplicaManager) -> GroupCoordinator:
    """The coordinator, serving no group until this broker leads a partition of `__consumer_offsets`
    (`on_elected`); built once the broker's metadata has caught up. A fresh cluster has no such topic until a group
    first looks up its coordinator, as in Kafka, so it starts without creating 50 partitions."""
    coordinator_config = GroupCoordinatorConfig.from_broker_config(config)
    topic = metadata_cache.topics.get(GROUP_METADATA_TOPIC)
    if topic is not None and len(topic.partitions) != coordinator_config.num_partitions:
        log.warning("%s has %d partitions but offsets.topic.num.partitions is %d; using the topic's count",
                    GROUP_METADATA_TOPIC, len(topic.partitions), coordinator_config.num_partitions)
        coordinator_config.num_partitions = len(topic.partitions)
    def describe_topics() -> SubscribedTopicDescriber:
        return metadata_cache.derived("consumer-group-topics", lambda: SubscribedTopicDescriber(
            TopicMetadata(t.topic_id, t.name, len(t.partitions)) for t in metadata_cache.topics.values()))

    coordinator = GroupCoordinator(coordinator_config, GroupMetadataLog(replica_manager,
                                                                        config.get("offsets.commit.timeout.ms")),
                                   describe_topics=describe_topics, group_configs=metadata_cache.group_configs)
    coordinator.group_manager.active = True
    return coordinator


def _inconsistent(requested: str | None, current: str | None) -> bool:
    return requested is not None and current is not None and requested != current
