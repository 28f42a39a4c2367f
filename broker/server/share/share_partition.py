"""The in-flight records of one share-partition on its leader (the state machine of Kafka's SharePartition), sans-IO.

Every offset from the start offset up to (not including) the end offset has a state: AVAILABLE (to be delivered),
ACQUIRED (delivered to one member, under an acquisition lock until its deadline), ACKNOWLEDGED or ARCHIVED (done).
Each acquisition counts one delivery; a record released (RELEASE, a lock that expired, its member gone) becomes
AVAILABLE again unless it has been delivered group.share.delivery.count.limit times, then it is ARCHIVED, as REJECT
(and GAP) make it at once. The start offset moves past the done records at its front, so what is in flight stays
bounded by group.share.partition.max.record.locks. The state a persister keeps is `state_batches()`: every in-flight
offset, an acquired one as the AVAILABLE record it was before its delivery, so a new leader delivers it again.
The state machine (`SharePartitionState`) does no I/O: its callers read the log and give the clock (milliseconds).
`SharePartition` loads it from the persister and writes it back after each change.
"""
from __future__ import annotations

import copy
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import IntEnum

import trio

from minikafka.broker.coordinator.share.share_coordinator_shard import SharePartitionKey
from minikafka.broker.server.share.persister import Persister, PersisterStateBatch
from minikafka.protocol.errors import ErrorCode

log = logging.getLogger("minikafka.share_partition")

NO_MEMBER = ""


class RecordState(IntEnum):
    """Kafka's RecordState ids, as persisted."""
    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AcknowledgeType(IntEnum):
    """ShareFetch/ShareAcknowledge acknowledge types (0 GAP: an offset with no record)."""
    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3


@dataclass
class InFlightRecord:
    state: RecordState
    delivery_count: int
    member_id: str = NO_MEMBER
    lock_deadline_ms: int = 0


@dataclass(frozen=True)
class AcquiredRecords:
    """A range of offsets given to a member, each delivered delivery_count times (ShareFetch's AcquiredRecords)."""
    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True)
class AcknowledgementBatch:
    """A range a member acknowledges: one type for all of it, or one type per offset."""
    first_offset: int
    last_offset: int
    acknowledge_types: tuple[int, ...]


class SharePartitionError(Exception):
    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


class SharePartitionState:
    """The in-flight records of one share-partition, from its start offset to its end offset."""

    def __init__(self, start_offset: int, state_batches: tuple[PersisterStateBatch, ...] = (), *,
                 delivery_count_limit: int = 5, max_record_locks: int = 2000) -> None:
        """From the persisted state: offsets from start_offset the batches do not name were never delivered."""
        self.start_offset = start_offset
        self.delivery_count_limit = delivery_count_limit
        self.max_record_locks = max_record_locks
        self._records: dict[int, InFlightRecord] = {}
        end = start_offset
        for batch in sorted(state_batches, key=lambda b: b.first_offset):
            for offset in range(max(batch.first_offset, start_offset), batch.last_offset + 1):
                state = RecordState(batch.delivery_state)
                if state == RecordState.ACQUIRED:  # never persisted so; read as it was before the delivery
                    state = RecordState.AVAILABLE
                self._records[offset] = InFlightRecord(state, batch.delivery_count)
            end = max(end, batch.last_offset + 1)
        for offset in range(start_offset, end):
            self._records.setdefault(offset, InFlightRecord(RecordState.AVAILABLE, 0))
        self.end_offset = end
        self._advance_start_offset()

    # ---- reading ----------------------------------------------------------------------------------------------

    def record(self, offset: int) -> InFlightRecord | None:
        return self._records.get(offset)

    def next_fetch_offset(self) -> int:
        """Where the next read of the log starts: the first AVAILABLE in-flight offset, else the end offset."""
        return next((o for o in range(self.start_offset, self.end_offset)
                     if self._records[o].state == RecordState.AVAILABLE), self.end_offset)

    def can_acquire(self) -> bool:
        """Whether some record could be acquired now: an AVAILABLE one in flight or room for new ones."""
        return (self.end_offset - self.start_offset < self.max_record_locks
                or self.next_fetch_offset() < self.end_offset)

    def next_lock_deadline_ms(self) -> int | None:
        return min((r.lock_deadline_ms for r in self._records.values() if r.state == RecordState.ACQUIRED),
                   default=None)

    def state_batches(self) -> tuple[PersisterStateBatch, ...]:
        """What the persister keeps: the in-flight offsets in ranges of one state and count."""
        batches: list[PersisterStateBatch] = []
        for offset in range(self.start_offset, self.end_offset):
            record = self._records[offset]
            state, count = record.state, record.delivery_count
            if state == RecordState.ACQUIRED:
                state, count = RecordState.AVAILABLE, count - 1
            last = batches[-1] if batches else None
            if (last is not None and last.last_offset == offset - 1 and last.delivery_state == state
                    and last.delivery_count == count):
                batches[-1] = PersisterStateBatch(last.first_offset, offset, state, count)
            else:
                batches.append(PersisterStateBatch(offset, offset, state, count))
        return tuple(batches)

    # ---- changes ----------------------------------------------------------------------------------------------

    def acquire(self, member_id: str, first_offset: int, last_offset: int, max_records: int, now_ms: int,
                lock_duration_ms: int) -> list[AcquiredRecords]:
        """Acquire for `member_id`, under a lock until now + lock_duration_ms, at most `max_records` of the offsets
        first_offset..last_offset read from the log: those AVAILABLE in flight and new ones past the end offset
        while in-flight records stay within max.record.locks. Offsets the log skipped before first_offset (past
        the end offset) have no record: they are archived."""
        acquired: list[AcquiredRecords] = []
        if first_offset > self.end_offset:
            for offset in range(self.end_offset, first_offset):
                self._records[offset] = InFlightRecord(RecordState.ARCHIVED, 0)
            self.end_offset = first_offset
        deadline = now_ms + lock_duration_ms
        for offset in range(max(first_offset, self.start_offset), last_offset + 1):
            if max_records <= 0:
                break
            record = self._records.get(offset)
            if record is None:
                if offset != self.end_offset or self.end_offset - self.start_offset >= self.max_record_locks:
                    break
                record = self._records[offset] = InFlightRecord(RecordState.AVAILABLE, 0)
                self.end_offset = offset + 1
            if record.state != RecordState.AVAILABLE:
                continue
            record.state = RecordState.ACQUIRED
            record.delivery_count += 1
            record.member_id = member_id
            record.lock_deadline_ms = deadline
            max_records -= 1
            last = acquired[-1] if acquired else None
            if last is not None and last.last_offset == offset - 1 and last.delivery_count == record.delivery_count:
                acquired[-1] = AcquiredRecords(last.first_offset, offset, record.delivery_count)
            else:
                acquired.append(AcquiredRecords(offset, offset, record.delivery_count))
        return acquired

    def acknowledge(self, member_id: str, batches: list[AcknowledgementBatch]) -> bool:
        """Apply a member's acknowledgements, all or none, and say whether any record changed. SharePartitionError
        INVALID_REQUEST for an unknown type, a type list that does not match its range or offsets past the acquired
        ones, INVALID_RECORD_STATE for a record not acquired by this member. Offsets below the start offset are
        done already."""
        changes: dict[int, RecordState] = {}
        for batch in batches:
            span = batch.last_offset - batch.first_offset + 1
            if span <= 0 or len(batch.acknowledge_types) not in (1, span):
                raise SharePartitionError(ErrorCode.INVALID_REQUEST, "Invalid acknowledgement batch.")
            if any(t not in AcknowledgeType._value2member_map_ for t in batch.acknowledge_types):
                raise SharePartitionError(ErrorCode.INVALID_REQUEST,
                                          f"Invalid acknowledge type: {list(batch.acknowledge_types)}")
            if batch.last_offset < self.start_offset:
                continue
            if batch.last_offset >= self.end_offset:
                raise SharePartitionError(ErrorCode.INVALID_REQUEST,
                                          "Batch record not found. The last offset in request is past acquired "
                                          "records.")
            for offset in range(max(batch.first_offset, self.start_offset), batch.last_offset + 1):
                record = self._records[offset]
                if record.state != RecordState.ACQUIRED or offset in changes:  # twice in one request too
                    raise SharePartitionError(ErrorCode.INVALID_RECORD_STATE,
                                              "The offset cannot be acknowledged. The offset is not acquired.")
                if record.member_id != member_id:
                    raise SharePartitionError(ErrorCode.INVALID_RECORD_STATE, "Member is not the owner of offset")
                ack = AcknowledgeType(batch.acknowledge_types[0 if len(batch.acknowledge_types) == 1
                                                             else offset - batch.first_offset])
                changes[offset] = (RecordState.ACKNOWLEDGED if ack == AcknowledgeType.ACCEPT
                                   else self._released_state(record) if ack == AcknowledgeType.RELEASE
                                   else RecordState.ARCHIVED)
        for offset, state in changes.items():
            self._set(offset, state)
        self._advance_start_offset()
        return bool(changes)

    def archive_acquired(self, member_id: str, first_offset: int, last_offset: int) -> None:
        """Archive what `member_id` just acquired of first_offset..last_offset: records a read_committed share
        group must never deliver (an aborted transaction's)."""
        for offset in range(max(first_offset, self.start_offset), min(last_offset + 1, self.end_offset)):
            record = self._records[offset]
            if record.state == RecordState.ACQUIRED and record.member_id == member_id:
                self._set(offset, RecordState.ARCHIVED)
        self._advance_start_offset()

    def release_acquired_records(self, member_id: str) -> bool:
        """A member left (its share session closed): its records are released; whether any was."""
        offsets = [o for o, r in self._records.items() if r.state == RecordState.ACQUIRED and r.member_id == member_id]
        for offset in offsets:
            self._set(offset, self._released_state(self._records[offset]))
        self._advance_start_offset()
        return bool(offsets)

    def expire_locks(self, now_ms: int) -> bool:
        """Release the records whose acquisition lock has run out; whether any was."""
        offsets = [o for o, r in self._records.items()
                   if r.state == RecordState.ACQUIRED and r.lock_deadline_ms <= now_ms]
        for offset in offsets:
            self._set(offset, self._released_state(self._records[offset]))
        self._advance_start_offset()
        return bool(offsets)

    def update_log_start_offset(self, log_start_offset: int) -> bool:
        """The log lost records below log_start_offset (retention, deletion): they can no longer be delivered,
        so the start offset moves up to it; whether it moved."""
        if log_start_offset <= self.start_offset:
            return False
        for offset in range(self.start_offset, min(log_start_offset, self.end_offset)):
            del self._records[offset]
        self.start_offset = log_start_offset
        self.end_offset = max(self.end_offset, log_start_offset)
        self._advance_start_offset()
        return True

    def _released_state(self, record: InFlightRecord) -> RecordState:
        return RecordState.ARCHIVED if record.delivery_count >= self.delivery_count_limit else RecordState.AVAILABLE

    def _set(self, offset: int, state: RecordState) -> None:
        record = self._records[offset]
        record.state = state
        record.member_id = NO_MEMBER
        record.lock_deadline_ms = 0

    def _advance_start_offset(self) -> None:
        while (self.start_offset < self.end_offset
               and self._records[self.start_offset].state in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)):
            del self._records[self.start_offset]
            self.start_offset += 1


def without_ranges(acquired: list[AcquiredRecords], ranges: tuple[tuple[int, int], ...]) -> list[AcquiredRecords]:
    """The acquired ranges with the offsets of `ranges` cut out."""
    out = list(acquired)
    for first, last in ranges:
        cut: list[AcquiredRecords] = []
        for a in out:
            if a.last_offset < first or a.first_offset > last:
                cut.append(a)
                continue
            if a.first_offset < first:
                cut.append(AcquiredRecords(a.first_offset, first - 1, a.delivery_count))
            if a.last_offset > last:
                cut.append(AcquiredRecords(last + 1, a.last_offset, a.delivery_count))
        out = cut
    return out


UNINITIALIZED_START_OFFSET = -1

_PERSISTER_ERRORS = {
    ErrorCode.NOT_COORDINATOR: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.COORDINATOR_NOT_AVAILABLE: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.GROUP_ID_NOT_FOUND: ErrorCode.GROUP_ID_NOT_FOUND,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.FENCED_LEADER_EPOCH: ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.FENCED_STATE_EPOCH: ErrorCode.NOT_LEADER_OR_FOLLOWER,
}


def persister_error(error: ErrorCode) -> ErrorCode:
    """The error a share fetch or acknowledgement reports for a persister's (Kafka's fetchPersisterError): a fenced
    epoch means another leader owns the share-partition."""
    return _PERSISTER_ERRORS.get(error, ErrorCode.UNKNOWN_SERVER_ERROR)


class SharePartition:
    """A share-partition on its leader: the state machine, loaded from the persister at the leader epoch and
    written back after each change, one change at a time. A change whose write fails is undone, as Kafka rolls
    back an acknowledgement it could not persist."""

    def __init__(self, key: SharePartitionKey, leader_epoch: int, persister: Persister, *,
                 delivery_count_limit: int = 5, max_record_locks: int = 2000,
                 topic_partition: tuple[str, int] = ("", -1)) -> None:
        self.key = key
        self.topic_partition = topic_partition  # the log's name for the partition, where its leader reads it
        self.leader_epoch = leader_epoch
        self.persister = persister
        self.delivery_count_limit = delivery_count_limit
        self.max_record_locks = max_record_locks
        self.state_epoch = 0
        self.state: SharePartitionState | None = None
        # Set by whoever loads it in the background: a load under way, and why the last one failed.
        self.loading = False
        self.load_error = ErrorCode.NONE
        self._lock = trio.Lock()

    async def maybe_initialize(self, reset_offset: Callable[[], Awaitable[int]]) -> ErrorCode:
        """Load the persisted state once; a share-partition the persister has no start offset for starts where
        share.auto.offset.reset says (`reset_offset`). The error a fetch reports when it cannot load."""
        async with self._lock:
            if self.state is not None:
                return ErrorCode.NONE
            read = await self.persister.read_state(self.key, self.leader_epoch)
            if read.error != ErrorCode.NONE:
                log.info("share-partition %s not loaded: %s (%s)", self.key, read.error.name, read.error_message)
                return persister_error(read.error)
            start_offset = read.start_offset
            if start_offset == UNINITIALIZED_START_OFFSET:
                start_offset = await reset_offset()
            self.state_epoch = read.state_epoch
            self.state = SharePartitionState(start_offset, read.state_batches,
                                             delivery_count_limit=self.delivery_count_limit,
                                             max_record_locks=self.max_record_locks)
            return ErrorCode.NONE

    async def acquire(self, member_id: str, first_offset: int, last_offset: int, max_records: int, now_ms: int,
                      lock_duration_ms: int, archive: tuple[tuple[int, int], ...] = ()) -> list[AcquiredRecords]:
        """Acquire records read from the log (see SharePartitionState.acquire), never while a change is being
        written: an acquisition is not persisted, so an undone change must not take it back. Of what is
        acquired, the `archive` ranges (aborted transactions' records, for read_committed) are archived at once
        and left out of the answer."""
        async with self._lock:
            state = self.state
            if state is None:
                return []
            acquired = state.acquire(member_id, first_offset, last_offset, max_records, now_ms, lock_duration_ms)
            for first, last in archive:
                state.archive_acquired(member_id, first, last)
            return without_ranges(acquired, archive)

    async def update_log_start_offset(self, log_start_offset: int) -> tuple[ErrorCode, str | None]:
        """The log lost records below log_start_offset: the share-partition's start offset follows, persisted."""
        return await self._change(lambda state: state.update_log_start_offset(log_start_offset))

    async def acknowledge(self, member_id: str, batches: list[AcknowledgementBatch]) -> tuple[ErrorCode, str | None]:
        """Apply and persist a member's acknowledgements: the error and its message for the member."""
        try:
            return await self._change(lambda state: state.acknowledge(member_id, batches))
        except SharePartitionError as exc:
            return exc.error, exc.message

    async def release_acquired_records(self, member_id: str) -> tuple[ErrorCode, str | None]:
        return await self._change(lambda state: state.release_acquired_records(member_id))

    async def expire_locks(self, now_ms: int) -> tuple[ErrorCode, str | None]:
        return await self._change(lambda state: state.expire_locks(now_ms))

    async def _change(self, change: Callable[[SharePartitionState], bool]) -> tuple[ErrorCode, str | None]:
        async with self._lock:
            state = self.state
            if state is None:
                return ErrorCode.COORDINATOR_NOT_AVAILABLE, "The share-partition is not loaded."
            before = copy.deepcopy(state)
            if not change(state):
                return ErrorCode.NONE, None
            result = await self.persister.write_state(self.key, self.state_epoch, self.leader_epoch,
                                                      state.start_offset, state.state_batches())
            if result.error != ErrorCode.NONE:
                log.info("state of share-partition %s not written: %s (%s); the change is undone", self.key,
                         result.error.name, result.error_message)
                self.state = before
                return persister_error(result.error), result.error_message
            return ErrorCode.NONE, None
