"""The group coordinator: Kafka's classic group protocol, committed offsets, and their durability.

It follows Kafka's GroupMetadataManager / OffsetMetadataManager for classic groups: JoinGroup (with
MEMBER_ID_REQUIRED, static membership, the initial rebalance delay), SyncGroup, Heartbeat, LeaveGroup, session
and rebalance timeouts, OffsetCommit/Fetch/Delete, DescribeGroups, ListGroups, DeleteGroups and offset expiry.
Everything runs on the broker's trio loop, so a request's state change is atomic between awaits. A JoinGroup or
SyncGroup that must wait for the rest of the group gets a `Completion` that a later request or a timer fills.

State changes that Kafka persists are written to `__consumer_offsets` before they take effect (group metadata
when a generation completes, offsets when committed, tombstones when deleted or expired); on start-up the
partition logs are replayed to rebuild every group and offset.
"""
from __future__ import annotations

import functools
import heapq
import logging
import math
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

import trio

from minikafka.config import BrokerConfig
from minikafka.protocol.errors import ErrorCode, KafkaError

from .group import (
    GROUP_TYPE_CLASSIC,
    Completion,
    Group,
    GroupState,
    JoinResult,
    Member,
    OffsetAndMetadata,
    Protocols,
    SyncResult,
)
from .group_metadata_log import (
    GROUP_METADATA_TOPIC,
    GroupMetadataKey,
    GroupMetadataLog,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    RecordKey,
    RecordValue,
    group_metadata_record,
    offset_commit_record,
)

log = logging.getLogger("minikafka.group_coordinator")

# Kafka's group.classic... new member join timeout: a JoinGroup from a new member is parked at most this long.
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000
# JoinGroup v4+ needs a member id from the coordinator before it may join (KIP-394).
MEMBER_ID_REQUIRED_MIN_VERSION = 4
# JoinGroup v9+ lets a rejoining static leader skip the assignment (KIP-814).
SKIP_ASSIGNMENT_MIN_VERSION = 9
# OffsetCommit v9+ answers GROUP_ID_NOT_FOUND for a generation-bearing commit to an unknown group.
GROUP_ID_NOT_FOUND_COMMIT_MIN_VERSION = 9
# A partition of __consumer_offsets is rewritten once this many of its records are superseded and they are at
# least min.cleanable.dirty.ratio (Kafka's default 0.5) of the log.
COMPACTION_MIN_DEAD_RECORDS = 10000
MIN_CLEANABLE_DIRTY_RATIO = 0.5

Record = tuple[bytes, bytes | None]


class MetadataLog(Protocol):
    def append(self, partition: int, records: list[Record], now_ms: int) -> ErrorCode: ...

    def replay(self, partition: int) -> Iterable[tuple[RecordKey, RecordValue]]: ...

    def rewrite(self, partition: int, records: list[Record], now_ms: int) -> ErrorCode: ...


@functools.lru_cache(maxsize=65536)
def java_string_hashcode(value: str) -> int:
    """Java's String.hashCode (over UTF-16 code units, 32-bit overflow), which Kafka uses to place groups."""
    h = 0
    data = value.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group_id: str, num_partitions: int) -> int:
    """Kafka's Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions."""
    h = java_string_hashcode(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


class DelayTimer:
    """Keyed one-shot timers on the trio clock, like Kafka's coordinator timer: scheduling a key replaces it."""

    def __init__(self) -> None:
        self._entries: dict[str, tuple[float, int, Callable[[], None]]] = {}
        self._heap: list[tuple[float, int, str]] = []
        self._next_seq = 0
        self._changed = trio.Event()

    def schedule(self, key: str, delay_ms: float, callback: Callable[[], None]) -> None:
        deadline = trio.current_time() + max(delay_ms, 0) / 1000
        seq = self._next_seq
        self._next_seq += 1
        self._entries[key] = (deadline, seq, callback)
        heapq.heappush(self._heap, (deadline, seq, key))
        self._changed.set()

    def cancel(self, key: str) -> None:
        self._entries.pop(key, None)

    def is_scheduled(self, key: str) -> bool:
        return key in self._entries

    def _next_due(self) -> tuple[float, int]:
        """(deadline, seq) of the earliest live entry, dropping replaced or cancelled ones."""
        while self._heap:
            deadline, seq, key = self._heap[0]
            entry = self._entries.get(key)
            if entry is not None and entry[1] == seq:
                return deadline, seq
            heapq.heappop(self._heap)
        return math.inf, -1

    def fire_due(self) -> int:
        """Run every callback whose deadline has passed; one scheduled meanwhile waits for the next pass."""
        fired = 0
        now = trio.current_time()
        limit = self._next_seq
        while True:
            deadline, seq = self._next_due()
            if deadline > now or seq >= limit:
                return fired
            _deadline, _seq, key = heapq.heappop(self._heap)
            _, _, callback = self._entries.pop(key)
            fired += 1
            try:
                callback()
            except Exception:  # noqa: BLE001 - one failing timer must not stop the others
                log.exception("group coordinator timer %s failed", key)

    async def run(self) -> None:
        while True:
            self.fire_due()
            self._changed = trio.Event()
            with trio.move_on_at(self._next_due()[0]):
                await self._changed.wait()


@dataclass
class CoordinatorConfig:
    num_partitions: int = 50
    offsets_retention_ms: int = 10080 * 60 * 1000
    offsets_retention_check_interval_ms: int = 600000
    offset_metadata_max_bytes: int = 4096
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    initial_rebalance_delay_ms: int = 3000
    max_size: int = 2147483647

    @classmethod
    def from_broker_config(cls, config: BrokerConfig) -> CoordinatorConfig:
        return cls(num_partitions=config.get("offsets.topic.num.partitions"),
                   offsets_retention_ms=config.get("offsets.retention.minutes") * 60 * 1000,
                   offsets_retention_check_interval_ms=config.get("offsets.retention.check.interval.ms"),
                   offset_metadata_max_bytes=config.get("offset.metadata.max.bytes"),
                   min_session_timeout_ms=config.get("group.min.session.timeout.ms"),
                   max_session_timeout_ms=config.get("group.max.session.timeout.ms"),
                   initial_rebalance_delay_ms=config.get("group.initial.rebalance.delay.ms"),
                   max_size=config.get("group.max.size"))


@dataclass
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    api_version: int
    reason: str | None = None


@dataclass
class OffsetCommitEntry:
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str | None


@dataclass
class DescribedGroup:
    group_id: str
    error: ErrorCode
    state: str
    protocol_type: str
    protocol_data: str
    members: list[tuple[Member, bytes]]


def _join_error(code: ErrorCode, member_id: str = "") -> JoinResult:
    return JoinResult(code, member_id=member_id)


def _completed(result) -> Completion:
    done: Completion = Completion()
    done.complete(result)
    return done


class GroupCoordinator:
    def __init__(self, config: CoordinatorConfig, metadata_log: MetadataLog,
                 clock_ms: Callable[[], int] = wall_clock_ms) -> None:
        self.config = config
        self.metadata_log = metadata_log
        self.clock_ms = clock_ms
        self.groups: dict[str, Group] = {}
        self.timer = DelayTimer()
        self.active = False
        # The group metadata last written for each group (what a rewrite of its partition must keep), and how
        # many records each partition's log holds since its start, to know when rewriting it pays.
        self._stored_metadata: dict[str, GroupMetadataValue] = {}
        self._log_records: Counter[int] = Counter()

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.config.num_partitions)

    # ---- lifecycle -----------------------------------------------------------------------------------------

    def load(self) -> None:
        """Replay every partition of __consumer_offsets, then start session timers of loaded members."""
        started = time.monotonic()
        records = 0
        for partition in range(self.config.num_partitions):
            for key, value in self.metadata_log.replay(partition):
                self._replay(key, value)
                records += 1
                self._log_records[partition] += 1
        for group in self.groups.values():
            for member in group.members.values():
                self._reschedule_heartbeat(group, member)
            if len(group.members) > self.config.max_size:
                self._prepare_rebalance(group, f"loaded group is over capacity {self.config.max_size}")
        self.active = True
        log.info("loaded %d groups from %d coordinator records in %.0f ms", len(self.groups), records,
                 1000 * (time.monotonic() - started))
        self.maybe_compact()

    async def run(self, *, task_status: trio.TaskStatus = trio.TASK_STATUS_IGNORED) -> None:
        """The coordinator's timers: session/rebalance timeouts and periodic offset expiry."""
        self._schedule_expiration()
        task_status.started()
        await self.timer.run()

    def shutdown(self) -> None:
        """Stop coordinating: parked joins and syncs answer NOT_COORDINATOR, as when Kafka unloads a partition."""
        if not self.active:
            return
        self.active = False
        for group in self.groups.values():
            for member in list(group.members.values()):
                group.complete_join(member, _join_error(ErrorCode.NOT_COORDINATOR, member.member_id))
                group.complete_sync(member, SyncResult(ErrorCode.NOT_COORDINATOR))

    def _replay(self, key: RecordKey, value: RecordValue) -> None:
        if isinstance(key, OffsetCommitKey):
            group = self.groups.get(key.group)
            if value is None:
                if group is not None:
                    group.offsets.pop((key.topic, key.partition), None)
                return
            if group is None:
                group = self.groups[key.group] = Group(key.group, self.clock_ms())
            group.offsets[(key.topic, key.partition)] = value
        elif isinstance(key, GroupMetadataKey):
            previous = self.groups.pop(key.group, None)
            self._stored_metadata.pop(key.group, None)
            if value is None:
                return
            self._stored_metadata[key.group] = value
            try:
                group = self._group_from_record(key.group, value)
            except ValueError as exc:
                log.error("group %s: unusable stored membership (%s); loading it without members", key.group, exc)
                group = Group(key.group, self.clock_ms(), GroupState.EMPTY, value.generation,
                              value.protocol_type or None)
            if previous is not None:
                group.offsets = previous.offsets
            self.groups[key.group] = group

    def _group_from_record(self, group_id: str, value: GroupMetadataValue) -> Group:
        members = value.members if value.protocol is not None else []
        group = Group(group_id, self.clock_ms(), GroupState.STABLE if members else GroupState.EMPTY,
                      value.generation, value.protocol_type or None, value.protocol, value.leader,
                      None if value.current_state_timestamp == -1 else value.current_state_timestamp)
        for m in members:
            rebalance_timeout = m.session_timeout if m.rebalance_timeout == -1 else m.rebalance_timeout
            group.add(Member(m.member_id, m.group_instance_id, m.client_id, m.client_host, rebalance_timeout,
                             m.session_timeout, value.protocol_type, [(value.protocol, m.subscription)],
                             m.assignment))
        if value.leader is not None:
            group.leader_id = value.leader
        return group

    # ---- persistence ---------------------------------------------------------------------------------------

    def _group_metadata(self, group: Group, assignment: dict[str, bytes]) -> GroupMetadataValue:
        members = [MemberMetadata(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                  m.rebalance_timeout_ms, m.session_timeout_ms, m.metadata(group.protocol_name),
                                  assignment.get(m.member_id, b""))
                   for m in group.members.values()]
        return GroupMetadataValue(group.protocol_type or "", group.generation_id, group.protocol_name,
                                  group.leader_id, group.state_timestamp if group.state_timestamp is not None else -1,
                                  members)

    def _append(self, partition: int, records: list[Record], now_ms: int) -> ErrorCode:
        error = self.metadata_log.append(partition, records, now_ms)
        if error == ErrorCode.NONE:
            self._log_records[partition] += len(records)
        return error

    def _store_group(self, group: Group, assignment: dict[str, bytes]) -> ErrorCode:
        value = self._group_metadata(group, assignment)
        error = self._append(self.partition_for(group.group_id), [group_metadata_record(group.group_id, value)],
                             self.clock_ms())
        if error == ErrorCode.NONE:
            self._stored_metadata[group.group_id] = value
        return error

    # ---- keeping __consumer_offsets small --------------------------------------------------------------------

    def _live_records(self, partition: int) -> list[Record]:
        """The records that rebuild this partition's groups and offsets exactly as stored now."""
        records: list[Record] = []
        for group_id, group in self.groups.items():
            if self.partition_for(group_id) != partition:
                continue
            stored = self._stored_metadata.get(group_id)
            if stored is not None:
                records.append(group_metadata_record(group_id, stored))
            records.extend(offset_commit_record(group_id, topic, p, value)
                           for (topic, p), value in group.offsets.items())
        return records

    def maybe_compact(self) -> int:
        """Rewrite partitions whose logs are mostly superseded records; returns how many were rewritten.

        Standing in for Kafka's log cleaner on this compacted topic: the live records are appended to a new
        segment and the log start offset moves past everything older, so start-up replay stays short. A crash
        in between is harmless: replaying old records and then the rewrite yields the same state.
        """
        if not self.active:
            return 0
        live_counts: Counter[int] = Counter()
        for group_id, group in self.groups.items():
            live_counts[self.partition_for(group_id)] += (group_id in self._stored_metadata) + len(group.offsets)
        rewritten = 0
        for partition, count in list(self._log_records.items()):
            dead = count - live_counts[partition]
            if dead < COMPACTION_MIN_DEAD_RECORDS or dead < MIN_CLEANABLE_DIRTY_RATIO * count:
                continue
            live = self._live_records(partition)
            error = self.metadata_log.rewrite(partition, live, self.clock_ms())
            if error != ErrorCode.NONE:
                log.warning("rewriting %s-%d failed: %s", GROUP_METADATA_TOPIC, partition, error.name)
                continue
            log.info("rewrote %s-%d: kept %d live records, dropped %d superseded ones", GROUP_METADATA_TOPIC,
                     partition, len(live), dead)
            self._log_records[partition] = len(live)
            rewritten += 1
        return rewritten


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
            self.cleanup_group_metadata()
            self.maybe_compact()
        finally:
            self._schedule_expiration()

    # ---- request validation shared by the group APIs -------------------------------------------------------

    def _check_active(self, group_id: str | None, allow_empty: bool = False) -> None:
        """COORDINATOR_NOT_AVAILABLE when not serving; INVALID_GROUP_ID for a null (or, for the membership
        APIs, empty) group id, as Kafka checks before a request reaches the group."""
        if not self.active:
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "the group coordinator is not active")
        if group_id is None or (not group_id and not allow_empty):
            raise KafkaError(ErrorCode.INVALID_GROUP_ID, "group id must not be empty")

    # ---- JoinGroup -----------------------------------------------------------------------------------------

    def join_group(self, req: JoinRequest) -> Completion[JoinResult]:
        """Start a join; the returned completion holds the response once the rebalance gets there."""
        try:
            self._check_active(req.group_id)
        except KafkaError as exc:
            return _completed(_join_error(exc.code, req.member_id))
        if not self.config.min_session_timeout_ms <= req.session_timeout_ms <= self.config.max_session_timeout_ms:
            return _completed(_join_error(ErrorCode.INVALID_SESSION_TIMEOUT, req.member_id))
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
                and group.protocol_type is None and group.generation_id == 0:
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
        current_leader = group.leader_id
        member = group.replace_static_member(req.group_instance_id, old_member_id, new_member_id)
        self.timer.cancel(self._heartbeat_key(group.group_id, old_member_id))
        self._reschedule_heartbeat(group, member)
        old_protocols = list(member.protocols)
        old_rebalance, old_session = member.rebalance_timeout_ms, member.session_timeout_ms
        group.update_member(member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, join)
        if group.is_in(GroupState.STABLE):
            if group.protocol_name == group.select_protocol():
                # Same protocol: no rebalance, only persist the new member id and hand back the assignment.
                error = self._store_group(group, group.assignments())
                if error != ErrorCode.NONE:
                    group.update_member(member, old_protocols, old_rebalance, old_session, None)
                    restored = group.replace_static_member(req.group_instance_id, new_member_id, old_member_id)
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
            error = self._store_group(group, {})
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

    def sync_group(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None,
                   protocol_type: str | None, protocol_name: str | None,
                   assignments: list[tuple[str, bytes]]) -> Completion[SyncResult]:
        try:
            self._check_active(group_id)
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
            store_error = self._store_group(group, assignment)
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

    def heartbeat(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None) -> ErrorCode:
        try:
            self._check_active(group_id)
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

    def leave_group(self, group_id: str, members: list[tuple[str, str | None, str | None]]
                    ) -> tuple[ErrorCode, list[tuple[str, str | None, ErrorCode]]]:
        """(top-level error, per member (member id, instance id, error)); members are (id, instance id, reason)."""
        try:
            self._check_active(group_id)
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

    # ---- offsets -------------------------------------------------------------------------------------------

    def _validate_offset_commit(self, group: Group | None, group_id: str, member_id: str,
                                group_instance_id: str | None, generation_id: int, api_version: int) -> Group:
        if group is None:
            if generation_id < 0:
                log.info("creating simple group %s through a manual offset commit", group_id)
                return Group(group_id, self.clock_ms())
            if api_version >= GROUP_ID_NOT_FOUND_COMMIT_MIN_VERSION:
                raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"group {group_id} not found")
            raise KafkaError(ErrorCode.ILLEGAL_GENERATION, f"group {group_id} not found")
        if group.is_in(GroupState.DEAD):
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if generation_id < 0 and group.is_empty:
            # assign()-only consumers and admin clients commit without membership to an empty group.
            return group
        if generation_id >= 0 or member_id or group_instance_id is not None:
            group.validate_member(member_id, group_instance_id)
            if generation_id != group.generation_id:
                raise KafkaError(ErrorCode.ILLEGAL_GENERATION,
                                 f"generation {generation_id} is not the group's {group.generation_id}")
        elif not group.is_empty:
            raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID, "a commit without membership needs an empty group")
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            raise KafkaError(ErrorCode.REBALANCE_IN_PROGRESS)
        return group

    def commit_offsets(self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int,
                       retention_time_ms: int, entries: list[OffsetCommitEntry], api_version: int
                       ) -> list[ErrorCode]:
        """One error per entry; a group-level problem raises KafkaError (every partition gets that code)."""
        self._check_active(group_id, allow_empty=True)
        existing = self.groups.get(group_id)
        group = self._validate_offset_commit(existing, group_id, member_id, group_instance_id, generation_id,
                                             api_version)
        if group.is_in(GroupState.STABLE, GroupState.PREPARING_REBALANCE) and member_id in group.members:
            self._reschedule_heartbeat(group, group.members[member_id])
        now = self.clock_ms()
        expire = None if retention_time_ms == -1 else now + retention_time_ms
        errors: list[ErrorCode] = []
        records: list[Record] = []
        staged: list[tuple[tuple[str, int], OffsetAndMetadata]] = []
        for entry in entries:
            metadata = entry.metadata if entry.metadata is not None else ""
            if entry.metadata is not None and len(entry.metadata) > self.config.offset_metadata_max_bytes:
                errors.append(ErrorCode.OFFSET_METADATA_TOO_LARGE)
                continue
            value = OffsetAndMetadata(entry.offset, entry.leader_epoch, metadata, now, expire)
            records.append(offset_commit_record(group_id, entry.topic, entry.partition, value))
            staged.append(((entry.topic, entry.partition), value))
            errors.append(ErrorCode.NONE)
        if records:
            error = self._append(self.partition_for(group_id), records, now)
            if error != ErrorCode.NONE:
                raise KafkaError(error, f"storing offsets of group {group_id} failed")
            if existing is None:
                self.groups[group_id] = group
            for tp, value in staged:
                group.offsets[tp] = value
        return errors

    def fetch_offsets(self, group_id: str | None, partitions: list[tuple[str, list[int]]] | None
                      ) -> list[tuple[str, list[tuple[int, OffsetAndMetadata | None]]]]:
        """Committed offsets by topic; `partitions` None means every committed offset of the group."""
        self._check_active(group_id, allow_empty=True)
        group = self.groups.get(group_id)
        offsets = group.offsets if group is not None and not group.is_in(GroupState.DEAD) else {}
        if partitions is None:
            by_topic: dict[str, list[tuple[int, OffsetAndMetadata | None]]] = {}
            for (topic, partition), value in offsets.items():
                by_topic.setdefault(topic, []).append((partition, value))
            return [(topic, sorted(parts, key=lambda p: p[0])) for topic, parts in by_topic.items()]
        return [(topic, [(p, offsets.get((topic, p))) for p in indexes]) for topic, indexes in partitions]

    def delete_offsets(self, group_id: str, partitions: list[tuple[str, list[int]]]
                       ) -> list[tuple[str, list[tuple[int, ErrorCode]]]]:
        """OffsetDelete; group-level errors raise KafkaError."""
        self._check_active(group_id)
        group = self.groups.get(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"group {group_id} not found")
        if group.is_in(GroupState.STABLE, GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE) \
                and not group.uses_consumer_protocol:
            raise KafkaError(ErrorCode.NON_EMPTY_GROUP)
        results = []
        records: list[Record] = []
        deleted: list[tuple[str, int]] = []
        for topic, indexes in partitions:
            if group.is_subscribed_to(topic):
                results.append((topic, [(p, ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC) for p in indexes]))
                continue
            for p in indexes:
                if (topic, p) in group.offsets:
                    records.append(offset_commit_record(group_id, topic, p, None))
                    deleted.append((topic, p))
            results.append((topic, [(p, ErrorCode.NONE) for p in indexes]))
        error = self._append(self.partition_for(group_id), records, self.clock_ms())
        if error != ErrorCode.NONE:
            raise KafkaError(error, f"deleting offsets of group {group_id} failed")
        for tp in deleted:
            group.offsets.pop(tp, None)
        return results

    def on_topic_deleted(self, topic: str) -> int:
        """Kafka's onPartitionsDeleted: committed offsets of a deleted topic are tombstoned, so a topic created
        again under the same name starts without them. Returns how many offsets were removed."""
        removed = 0
        for group in list(self.groups.values()):
            gone = [tp for tp in group.offsets if tp[0] == topic]
            if not gone:
                continue
            records = [offset_commit_record(group.group_id, t, p, None) for t, p in gone]
            error = self._append(self.partition_for(group.group_id), records, self.clock_ms())
            if error != ErrorCode.NONE:
                log.warning("removing offsets of deleted topic %s from group %s failed: %s", topic, group.group_id,
                            error.name)
                continue
            for tp in gone:
                group.offsets.pop(tp, None)
            removed += len(gone)
        if removed:
            log.info("removed %d committed offsets of deleted topic %s", removed, topic)
        return removed

    # ---- admin ---------------------------------------------------------------------------------------------

    def describe_group(self, group_id: str, api_version: int) -> DescribedGroup:
        if not self.active:
            return DescribedGroup(group_id, ErrorCode.COORDINATOR_NOT_AVAILABLE, "", "", "", [])
        if not group_id:
            return DescribedGroup(group_id, ErrorCode.INVALID_GROUP_ID, "", "", "", [])
        group = self.groups.get(group_id)
        if group is None:
            error = ErrorCode.GROUP_ID_NOT_FOUND if api_version >= 6 else ErrorCode.NONE
            return DescribedGroup(group_id, error, GroupState.DEAD.value, "", "", [])
        if group.is_in(GroupState.STABLE):
            members = [(m, m.metadata(group.protocol_name)) for m in group.members.values()]
            return DescribedGroup(group_id, ErrorCode.NONE, group.state.value, group.protocol_type or "",
                                  group.protocol_name or "", members)
        return DescribedGroup(group_id, ErrorCode.NONE, group.state.value, group.protocol_type or "", "",
                              [(m, b"") for m in group.members.values()])

    def list_groups(self, states_filter: list[str], types_filter: list[str]) -> list[Group]:
        if not self.active:
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        states = {s.strip().lower() for s in states_filter}
        types = {t.strip().lower() for t in types_filter}
        return [g for g in self.groups.values()
                if (not states or g.state.value.lower() in states) and (not types or GROUP_TYPE_CLASSIC in types)]

    def delete_groups(self, group_ids: list[str | None]) -> list[tuple[str | None, ErrorCode]]:
        results: list[tuple[str | None, ErrorCode]] = []
        for group_id in group_ids:
            if not self.active:
                results.append((group_id, ErrorCode.COORDINATOR_NOT_AVAILABLE))
                continue
            if group_id is None:
                results.append((group_id, ErrorCode.INVALID_GROUP_ID))
                continue
            group = self.groups.get(group_id)
            if group is None or group.is_in(GroupState.DEAD):
                results.append((group_id, ErrorCode.GROUP_ID_NOT_FOUND))
                continue
            if not group.is_empty:
                results.append((group_id, ErrorCode.NON_EMPTY_GROUP))
                continue
            records = [offset_commit_record(group_id, topic, p, None) for topic, p in group.offsets]
            records.append(group_metadata_record(group_id, None))
            error = self._append(self.partition_for(group_id), records, self.clock_ms())
            if error != ErrorCode.NONE:
                results.append((group_id, error))
                continue
            self._remove_group(group)
            log.info("deleted group %s and %d committed offsets", group_id, len(records) - 1)
            results.append((group_id, ErrorCode.NONE))
        return results

    def _remove_group(self, group: Group) -> None:
        group.transition_to(GroupState.DEAD, self.clock_ms())
        group.offsets.clear()
        self.groups.pop(group.group_id, None)
        self._stored_metadata.pop(group.group_id, None)

    # ---- offsets.retention.minutes -------------------------------------------------------------------------

    def _offset_expiry_base(self, group: Group) -> Callable[[OffsetAndMetadata], int] | None:
        """When an offset's retention clock starts, per Kafka's OffsetExpirationCondition; None: never expire."""
        if group.protocol_type is None:
            return lambda o: o.commit_timestamp
        if group.is_empty:
            return lambda o: group.state_timestamp if group.state_timestamp is not None else o.commit_timestamp
        if group.uses_consumer_protocol and group.is_in(GroupState.STABLE) and group.subscribed_topics() is not None:
            return lambda o: o.commit_timestamp
        return None

    def cleanup_group_metadata(self) -> int:
        """Expire offsets past offsets.retention.minutes; delete empty groups left without offsets."""
        if not self.active:
            return 0
        now = self.clock_ms()
        retention = self.config.offsets_retention_ms
        removed = 0
        for group in list(self.groups.values()):
            base = self._offset_expiry_base(group)
            expired: list[tuple[str, int]] = []
            all_expired = True
            if group.offsets and base is None:
                all_expired = False
            elif group.offsets:
                for (topic, partition), value in group.offsets.items():
                    if group.is_subscribed_to(topic):
                        all_expired = False
                        continue
                    if value.expire_timestamp is not None:
                        is_expired = now >= value.expire_timestamp
                    else:
                        is_expired = now - base(value) >= retention
                    if is_expired:
                        expired.append((topic, partition))
                    else:
                        all_expired = False
            records = [offset_commit_record(group.group_id, topic, p, None) for topic, p in expired]
            delete_group = all_expired and group.is_empty
            if delete_group:
                records.append(group_metadata_record(group.group_id, None))
            if not records:
                continue
            error = self._append(self.partition_for(group.group_id), records, now)
            if error != ErrorCode.NONE:
                log.warning("expiring offsets of group %s failed: %s", group.group_id, error.name)
                continue
            for tp in expired:
                group.offsets.pop(tp, None)
            removed += len(expired)
            if delete_group:
                self._remove_group(group)
                log.info("group %s expired and was removed", group.group_id)
        if removed:
            log.info("expired %d committed offsets", removed)
        return removed


def load_group_coordinator(broker) -> GroupCoordinator:
    """Replay `__consumer_offsets` if it exists and return the coordinator, ready to serve. `broker` is the
    BrokerServer, after its partitions are hosted. A fresh broker has no such topic until a group API first
    needs it (`ensure_offsets_topic`), as in Kafka, so it starts without creating 50 partitions."""
    config = CoordinatorConfig.from_broker_config(broker.config)
    topic = broker.controller.topics.get(GROUP_METADATA_TOPIC)
    if topic is not None and len(topic.partitions) != config.num_partitions:
        log.warning("%s has %d partitions but offsets.topic.num.partitions is %d; using the topic's count",
                    GROUP_METADATA_TOPIC, len(topic.partitions), config.num_partitions)
        config.num_partitions = len(topic.partitions)
    coordinator = GroupCoordinator(config, GroupMetadataLog(broker.replica_manager))
    coordinator.load()
    return coordinator


def ensure_offsets_topic(broker, coordinator: GroupCoordinator) -> None:
    """Create `__consumer_offsets` (offsets.topic.num.partitions, compacted) the first time a group needs it."""
    if GROUP_METADATA_TOPIC in broker.controller.topics:
        return
    replication = min(broker.config.get("offsets.topic.replication.factor"), len(broker.controller.live_brokers))
    broker.create_topic(GROUP_METADATA_TOPIC, coordinator.config.num_partitions, replication, {},
                        {"cleanup.policy": "compact"})


def _inconsistent(requested: str | None, current: str | None) -> bool:
    return requested is not None and current is not None and requested != current
