"""A classic consumer group and its members: Kafka's group state machine and membership bookkeeping.

This is the in-memory model (Kafka's ClassicGroup / ClassicGroupMember); the coordinator drives it and decides
when to rebalance, the group metadata manager persists it. Members waiting on a JoinGroup or SyncGroup response
hold a `Completion` that the coordinator fills in when the rebalance reaches that point. Besides its committed
offsets a group holds, per producer, the offsets committed in a transaction that has not ended yet (Kafka's
pending transactional offset commits): invisible to OffsetFetch until the transaction's COMMIT marker.
"""
from __future__ import annotations

import enum
import uuid
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import trio

from minikafka.protocol.errors import ErrorCode, KafkaError

T = TypeVar("T")

CONSUMER_PROTOCOL_TYPE = "consumer"
GROUP_TYPE_CLASSIC = "classic"


class GroupState(enum.Enum):
    """Kafka's names; `value` is what DescribeGroups and ListGroups report."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset({GroupState.STABLE, GroupState.COMPLETING_REBALANCE,
                                               GroupState.EMPTY}),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


class Completion(Generic[T]):
    """A response that a parked request waits for; completed at most once."""

    def __init__(self) -> None:
        self._event = trio.Event()
        self.result: T | None = None

    @property
    def done(self) -> bool:
        return self._event.is_set()

    def complete(self, result: T) -> bool:
        if self._event.is_set():
            return False
        self.result = result
        self._event.set()
        return True

    async def wait(self) -> T:
        await self._event.wait()
        assert self.result is not None  # complete() sets it before the event
        return self.result


Protocols = list[tuple[str, bytes]]
# JoinGroup v4+ needs a member id from the coordinator before it may join (KIP-394).
MEMBER_ID_REQUIRED_MIN_VERSION = 4


@dataclass
class JoinRequest:
    """A JoinGroup as the coordinators read it, whether the group is classic or a consumer group."""

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
class JoinResult:
    """What a JoinGroup response carries; `members` is non-empty only for the leader."""

    error: ErrorCode
    member_id: str = ""
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)
    skip_assignment: bool = False


@dataclass
class SyncResult:
    error: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass
class OffsetAndMetadata:
    """A committed offset as stored in __consumer_offsets (OffsetCommitValue).

    `write_order` places its record among the others of its partition of __consumer_offsets (Kafka keeps the
    record's offset for this): a transaction's offset becomes the committed one only if it was written after the
    offset it would replace, so a mix of plain and transactional commits ends as the log's order says."""

    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int | None = None
    write_order: int = field(default=0, compare=False)



@dataclass
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    assignment: bytes = b""
    awaiting_join: Completion[JoinResult] | None = None
    awaiting_sync: Completion[SyncResult] | None = None
    is_new: bool = False

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.awaiting_join is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.awaiting_sync is not None

    def protocol_names(self) -> set[str]:
        return {name for name, _ in self.protocols}

    def metadata(self, protocol_name: str | None) -> bytes:
        """The member's metadata for a protocol; ValueError for one it does not support (or none chosen)."""
        for name, metadata in self.protocols:
            if name == protocol_name:
                return metadata
        raise ValueError(f"member {self.member_id} does not support protocol {protocol_name}")

    def matches(self, protocols: Protocols) -> bool:
        return list(protocols) == list(self.protocols)

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among those every member supports."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def has_satisfied_heartbeat(self) -> bool:
        """A member parked in a join or sync needs no heartbeat; a new member can still expire."""
        if self.is_new:
            return False
        return self.is_awaiting_join or self.is_awaiting_sync


class Group:
    """A classic group: members, generation, selected protocol, state; plus its committed offsets."""

    def __init__(self, group_id: str, now_ms: int, state: GroupState = GroupState.EMPTY, generation_id: int = 0,
                 protocol_type: str | None = None, protocol_name: str | None = None, leader_id: str | None = None,
                 state_timestamp: int | None = None) -> None:
        self.group_id = group_id
        self.state = state
        self.previous_state = GroupState.DEAD
        self.state_timestamp: int | None = now_ms if state_timestamp is None else state_timestamp
        self.generation_id = generation_id
        self.protocol_type = protocol_type
        self.protocol_name = protocol_name
        self.leader_id = leader_id
        self.members: dict[str, Member] = {}
        self.static_members: dict[str, str] = {}
        self.pending_join_members: set[str] = set()
        self.pending_sync_members: set[str] = set()
        self.num_awaiting_join = 0
        self.supported_protocols: Counter[str] = Counter()
        self.new_member_added = False
        self.offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
        # Producer id -> offsets its open transaction committed (TxnOffsetCommit) and no marker has ended yet. A
        # producer stays here until its marker, even when tombstones have taken all its offsets.
        self.pending_txn_offsets: dict[int, dict[tuple[str, int], OffsetAndMetadata]] = {}

    def __repr__(self) -> str:
        return f"Group({self.group_id!r}, {self.state.value}, generation {self.generation_id}, " \
               f"{len(self.members)} members)"

    # ---- state ---------------------------------------------------------------------------------------------

    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    def can_rebalance(self) -> bool:
        return self.state in VALID_PREVIOUS_STATES[GroupState.PREPARING_REBALANCE]

    def transition_to(self, target: GroupState, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS_STATES[target]:
            raise ValueError(f"group {self.group_id} cannot go from {self.state.value} to {target.value}")
        self.previous_state = self.state
        self.state = target
        self.state_timestamp = now_ms

    @property
    def is_empty(self) -> bool:
        return self.state is GroupState.EMPTY

    @property
    def uses_consumer_protocol(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    # ---- members -------------------------------------------------------------------------------------------

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id is not None and self.leader_id == member_id

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self.pending_join_members

    def add_pending_member(self, member_id: str) -> None:
        if member_id in self.members:
            raise ValueError(f"{member_id} is already a member of {self.group_id}")
        self.pending_join_members.add(member_id)

    def static_member_id(self, group_instance_id: str) -> str | None:
        return self.static_members.get(group_instance_id)

    def generate_member_id(self, client_id: str, group_instance_id: str | None) -> str:
        """Kafka's form: client id (or instance id for static members), '-', a random UUID."""
        return f"{group_instance_id if group_instance_id is not None else client_id}-{uuid.uuid4()}"

    def add(self, member: Member, join: Completion[JoinResult] | None = None) -> None:
        if member.group_instance_id is not None:
            if member.group_instance_id in self.static_members:
                raise ValueError(f"static member {member.group_instance_id} is already in {self.group_id}")
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.protocol_type != member.protocol_type:
            raise ValueError("the group and member's protocol type must be the same")
        if not self.supports_protocols(member.protocol_type, member.protocol_names()):
            raise ValueError("none of the member's protocols can be supported")
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self.supported_protocols.update(member.protocol_names())
        member.awaiting_join = join
        if member.is_awaiting_join:
            self.num_awaiting_join += 1
        self.pending_join_members.discard(member.member_id)

    def remove(self, member_id: str) -> None:
        removed = self.members.pop(member_id, None)
        if removed is not None:
            self.supported_protocols.subtract(removed.protocol_names())
            if removed.awaiting_join is not None:
                # Nothing may stay parked on a member that is gone.
                removed.awaiting_join.complete(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID))
                removed.awaiting_join = None
                self.num_awaiting_join -= 1
            if removed.awaiting_sync is not None:
                removed.awaiting_sync.complete(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
                removed.awaiting_sync = None
            if removed.group_instance_id is not None:
                self.static_members.pop(removed.group_instance_id, None)
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_join_members.discard(member_id)
        self.pending_sync_members.discard(member_id)

    def update_member(self, member: Member, protocols: Protocols, rebalance_timeout_ms: int,
                      session_timeout_ms: int, join: Completion[JoinResult] | None) -> None:
        self.supported_protocols.subtract(member.protocol_names())
        member.protocols = list(protocols)
        self.supported_protocols.update(member.protocol_names())
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if join is not None and not member.is_awaiting_join:
            self.num_awaiting_join += 1
        elif join is None and member.is_awaiting_join:
            self.num_awaiting_join -= 1
        member.awaiting_join = join

    def replace_static_member(self, group_instance_id: str, old_member_id: str, new_member_id: str) -> Member:
        """A static member rejoined with a new member id: fence the old id, keep its place and assignment."""
        old = self.members.pop(old_member_id, None)
        if old is None:
            raise ValueError(f"cannot replace unknown member {old_member_id}")
        self.complete_join(old, JoinResult(ErrorCode.FENCED_INSTANCE_ID, member_id=old_member_id))
        self.complete_sync(old, SyncResult(ErrorCode.FENCED_INSTANCE_ID))
        new = Member(new_member_id, old.group_instance_id, old.client_id, old.client_host,
                     old.rebalance_timeout_ms, old.session_timeout_ms, old.protocol_type, list(old.protocols),
                     old.assignment)
        self.members[new_member_id] = new
        if self.is_leader(old_member_id):
            self.leader_id = new_member_id
        self.static_members[group_instance_id] = new_member_id
        return new

    def validate_member(self, member_id: str, group_instance_id: str | None) -> None:
        """UNKNOWN_MEMBER_ID, or FENCED_INSTANCE_ID when a static instance now has another member id."""
        if group_instance_id is not None:
            existing = self.static_members.get(group_instance_id)
            if existing is None:
                raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID, f"unknown group instance id {group_instance_id}")
            if existing != member_id:
                raise KafkaError(ErrorCode.FENCED_INSTANCE_ID,
                                 f"instance {group_instance_id} is now member {existing}, not {member_id}")
        if member_id not in self.members:
            raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID, f"unknown member {member_id!r} in group {self.group_id}")

    def maybe_elect_new_joined_leader(self) -> bool:
        """If the leader did not rejoin, make a member that did the leader; False if nobody rejoined."""
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.is_awaiting_join:
            return True
        for member in self.members.values():
            if member.is_awaiting_join:
                self.leader_id = member.member_id
                return True
        return False

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_awaiting_join and not self.pending_join_members

    def not_yet_rejoined_members(self) -> list[Member]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # ---- protocols -----------------------------------------------------------------------------------------

    def supports_protocols(self, protocol_type: str, protocol_names: set[str]) -> bool:
        """An empty group takes any non-empty protocol; otherwise type must match and one protocol be common."""
        if self.state is GroupState.EMPTY:
            return bool(protocol_type) and bool(protocol_names)
        return self.protocol_type == protocol_type and any(
            self.supported_protocols.get(name, 0) == len(self.members) for name in protocol_names)

    def candidate_protocols(self) -> set[str]:
        return {name for name, count in self.supported_protocols.items() if count == len(self.members)}

    def select_protocol(self) -> str:
        """The protocol all members support that gets the most first-preference votes."""
        if not self.members:
            raise ValueError(f"cannot select a protocol for empty group {self.group_id}")
        candidates = self.candidate_protocols()
        votes = Counter(member.vote(candidates) for member in self.members.values())
        return votes.most_common(1)[0][0]

    # ---- rebalance -----------------------------------------------------------------------------------------

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.transition_to(GroupState.EMPTY, now_ms)
        self.pending_sync_members.clear()

    def current_member_metadata(self) -> list[tuple[str, str | None, bytes]]:
        """(member id, instance id, metadata for the selected protocol): what the leader assigns from."""
        if self.state in (GroupState.DEAD, GroupState.PREPARING_REBALANCE):
            raise ValueError(f"no member metadata for group {self.group_id} in state {self.state.value}")
        return [(m.member_id, m.group_instance_id, m.metadata(self.protocol_name)) for m in self.members.values()]

    def complete_join(self, member: Member, result: JoinResult) -> bool:
        if member.awaiting_join is None:
            return False
        member.awaiting_join.complete(result)
        member.awaiting_join = None
        self.num_awaiting_join -= 1
        return True

    def complete_sync(self, member: Member, result: SyncResult) -> bool:
        if member.awaiting_sync is None:
            return False
        member.awaiting_sync.complete(result)
        member.awaiting_sync = None
        return True

    def assignments(self) -> dict[str, bytes]:
        return {m.member_id: m.assignment for m in self.members.values()}

    # ---- offsets -------------------------------------------------------------------------------------------

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to (consumer protocol), or None when the coordinator cannot know."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return set()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        try:
            for member in self.members.values():
                topics.update(parse_subscription_topics(member.metadata(self.protocol_name)))
        except ValueError:
            return None
        return topics

    def is_subscribed_to(self, topic: str) -> bool:
        topics = self.subscribed_topics()
        return topic in topics if topics is not None else self.uses_consumer_protocol

    @property
    def has_open_transactions(self) -> bool:
        """A transaction committed offsets for this group and has not ended: the group must not expire."""
        return bool(self.pending_txn_offsets)

    def has_pending_txn_offset(self, tp: tuple[str, int]) -> bool:
        """An open transaction holds an offset for `tp` (OffsetFetch with require_stable answers it unstable)."""
        return any(tp in offsets for offsets in self.pending_txn_offsets.values())

    def offset_partitions(self) -> list[tuple[str, int]]:
        """Every partition the group holds an offset for, committed or pending in a transaction (what deleting
        all its offsets tombstones)."""
        pending = (tp for offsets in self.pending_txn_offsets.values() for tp in offsets)
        return list(dict.fromkeys([*self.offsets, *pending]))

    def complete_pending_txn_offset_commit(self, producer_id: int, commit: bool) -> None:
        """The producer's transaction ended: on COMMIT its offsets become the committed ones, except where a later
        written offset is committed already; on ABORT they are dropped."""
        pending = self.pending_txn_offsets.pop(producer_id, {})
        if not commit:
            return
        for tp, value in pending.items():
            current = self.offsets.get(tp)
            if current is None or value.write_order > current.write_order:
                self.offsets[tp] = value

    def remove_offsets(self, tps: Iterable[tuple[str, int]]) -> None:
        """What an offset tombstone does: the committed offset goes, and so does any offset pending for it."""
        for tp in tps:
            self.offsets.pop(tp, None)
            for offsets in self.pending_txn_offsets.values():
                offsets.pop(tp, None)


def parse_subscription_topics(metadata: bytes) -> list[str]:
    """The topic list of a consumer protocol Subscription (its v0 prefix is common to every version)."""
    view = bytes(metadata)
    if len(view) < 6:
        raise ValueError("consumer subscription shorter than its header")
    count = int.from_bytes(view[2:6], "big", signed=True)
    pos = 6
    topics = []
    for _ in range(max(count, 0)):
        if pos + 2 > len(view):
            raise ValueError("truncated consumer subscription")
        length = int.from_bytes(view[pos:pos + 2], "big", signed=True)
        pos += 2
        if length < 0 or pos + length > len(view):
            raise ValueError("bad topic name in consumer subscription")
        try:
            topics.append(view[pos:pos + length].decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise ValueError(f"topic name is not UTF-8: {exc}") from None
        pos += length
    return topics
