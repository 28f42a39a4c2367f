"""A partition's replica on this broker: its log plus the leader or follower state of Kafka's Partition.

As leader it keeps the leader epoch and the offset that epoch started at, the partition epoch, one Replica per
follower, and the ISR the controller committed plus at most one change in flight. While an expansion is in
flight the maximal ISR (the committed one plus the replica being added, KIP-497) bounds the high watermark, which
is the smallest log end offset over it and never moves back; a shrink counts only once the controller accepts it.
As follower it keeps the leader, its epoch, and the high watermark the leader reported.

The leader's answers that depend on this state (offsets by time or epoch, record deletion, whether an acks=all
append is replicated) are made here, as Kafka's Partition makes them. This module does no I/O: the replica manager
sends the ISR changes prepared here and wakes the requests that wait on what moved.
"""
from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from kafka.protocol.consumer.offsets import IsolationLevel

from minikafka.broker.replication.replica import NO_BROKER_EPOCH, Replica
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.protocol.record_batch import NO_TIMESTAMP
from minikafka.storage.errors import KafkaStorageError
from minikafka.storage.log import Log, TimestampAndOffset
from minikafka.storage.log_offset_metadata import LogOffsetMetadata
from minikafka.storage.special_timestamps import SpecialTimestamp

log = logging.getLogger("minikafka.partition")

NO_LEADER = -1
# DeleteRecords' offset for "everything below the high watermark" (Kafka's DeleteRecordsRequest.HIGH_WATERMARK).
HIGH_WATERMARK = -1
# ListOffsets' answer when no offset matches (Kafka's UNKNOWN_TIMESTAMP, UNKNOWN_OFFSET and no leader epoch).
UNKNOWN_TIMESTAMP_AND_OFFSET = TimestampAndOffset(offset=-1, timestamp=NO_TIMESTAMP, leader_epoch=-1)
_SPECIAL = frozenset(SpecialTimestamp)
# Special timestamps the log answers without looking at any record, so the last fetchable offset does not bound them.
_POSITIONS = frozenset({SpecialTimestamp.EARLIEST_TIMESTAMP, SpecialTimestamp.EARLIEST_LOCAL_TIMESTAMP,
                        SpecialTimestamp.LATEST_TIERED_TIMESTAMP, SpecialTimestamp.EARLIEST_PENDING_UPLOAD_TIMESTAMP})
# AlterPartition answers after which the change stays pending, unretried, until new metadata replaces it: the
# leader's view (epoch, partition epoch, the topic itself) is out of date.
_WAIT_FOR_METADATA = frozenset({ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID,
                                ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.INVALID_UPDATE_VERSION,
                                ErrorCode.INVALID_REQUEST, ErrorCode.NEW_LEADER_ELECTED})
# AlterPartition answers that say the change was not applied and the committed state is still current.
_NOT_APPLIED = frozenset({ErrorCode.OPERATION_NOT_ATTEMPTED, ErrorCode.INELIGIBLE_REPLICA})


class PartitionRegistration(Protocol):
    """The controller's decision for one partition, as the metadata image holds it."""

    @property
    def replicas(self) -> list[int]: ...
    @property
    def adding_replicas(self) -> list[int]: ...
    @property
    def isr(self) -> list[int]: ...
    @property
    def leader(self) -> int: ...
    @property
    def leader_epoch(self) -> int: ...
    @property
    def partition_epoch(self) -> int: ...


@dataclass(frozen=True)
class LeaderAndIsr:
    """A partition's leader, ISR and epochs as the controller answers an AlterPartition (Kafka's LeaderAndIsr)."""

    leader: int
    leader_epoch: int
    isr: list[int]
    partition_epoch: int


@dataclass(eq=False)
class PendingIsrChange:
    """An ISR change sent to the controller and not answered yet. Compared by identity: an answer applies only
    while this very change is still the partition's pending one."""

    topic_id: uuid.UUID
    index: int
    leader_epoch: int
    partition_epoch: int
    # The proposed ISR with each member's broker epoch as the leader knows it (-1 unknown; the sender's own is
    # filled in by the AlterPartitionManager).
    new_isr_with_epochs: list[tuple[int, int]]
    maximal_isr: list[int]

    @property
    def new_isr(self) -> list[int]:
        return [broker for broker, _ in self.new_isr_with_epochs]


class Partition:
    def __init__(self, topic: str, index: int, topic_id: uuid.UUID, log: Log, node_id: int, *,
                 high_watermark: int = 0, alive_broker_epochs: Mapping[int, int] | None = None,
                 replica_lag_time_max_ms: int = 30_000) -> None:
        self.topic = topic
        self.index = index
        self.topic_id = topic_id
        self.log = log
        self.node_id = node_id
        self.leader_id = NO_LEADER
        self.leader_epoch = -1
        self.partition_epoch = -1
        self.replicas: list[int] = []
        self.adding_replicas: list[int] = []  # those of `replicas` a reassignment adds
        self.isr: list[int] = []  # as the controller committed it
        self.pending_isr_change: PendingIsrChange | None = None
        self.remote_replicas: dict[int, Replica] = {}  # leader only: the followers
        self.leader_epoch_start_offset: int | None = None  # leader only: where this leader epoch began
        self._high_watermark = high_watermark
        self._high_watermark_metadata: LogOffsetMetadata | None = None
        # Shared with the replica manager, which keeps it current: the brokers allowed to join an ISR.
        self.alive_broker_epochs: Mapping[int, int] = alive_broker_epochs if alive_broker_epochs is not None else {}
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.clamp_high_watermark()

    def __repr__(self) -> str:
        return (f"Partition({self.topic}-{self.index}, leader={self.leader_id}, leader_epoch={self.leader_epoch}, "
                f"partition_epoch={self.partition_epoch}, isr={self.isr}, hw={self.high_watermark})")

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.node_id

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def replication_factor(self) -> int:
        """The replicas the partition is meant to have: during a reassignment, not counting those it adds (Kafka's
        AssignmentState.replicationFactor), so a replica still catching up does not make it under-replicated."""
        return len(self.replicas) - len(self.adding_replicas)

    @property
    def is_under_replicated(self) -> bool:
        """Kafka's isUnderReplicated: led here, with an ISR smaller than the replication factor."""
        return self.is_leader and len(self.isr) < self.replication_factor

    @property
    def is_under_min_isr(self) -> bool:
        """Kafka's isUnderMinIsr: led here, with an ISR smaller than min.insync.replicas (or the replica count)."""
        return self.is_leader and len(self.isr) < self._effective_min_isr()

    @property
    def maximal_isr(self) -> list[int]:
        pending = self.pending_isr_change
        return pending.maximal_isr if pending is not None else self.isr

    @property
    def remote_log_end_offsets(self) -> dict[int, int]:
        """Each follower's log end offset as of its last fetch (-1 before its first under this leadership)."""
        return {broker: replica.log_end_offset for broker, replica in self.remote_replicas.items()}

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @high_watermark.setter
    def high_watermark(self, offset: int) -> None:
        self._high_watermark = offset
        self._high_watermark_metadata = None
        self.log.producer_state.on_high_watermark_updated(offset)

    def high_watermark_metadata(self) -> LogOffsetMetadata:
        """The high watermark with its place in the log, as Kafka keeps it: worked out once per move (nothing to
        read when it is the log end), then shared by every fetch parked on this partition."""
        metadata = self._high_watermark_metadata
        if metadata is None:
            metadata = self._high_watermark_metadata = self.log.offset_metadata(self._high_watermark)
        return metadata

    def offset_metadata(self, offset: int) -> LogOffsetMetadata:
        """`offset` with its place in the log; at the high watermark, the one every parked consumer shares."""
        if offset == self._high_watermark:
            return self.high_watermark_metadata()
        return self.log.offset_metadata(offset)

    def last_stable_offset(self) -> int:
        """Where read_committed readers stop (Kafka's lastStableOffset): the first unstable offset, if below the
        high watermark, else the high watermark."""
        unstable = self.log.first_unstable_offset
        return unstable if unstable is not None and unstable < self._high_watermark else self._high_watermark

    def last_stable_offset_metadata(self) -> LogOffsetMetadata:
        return self.offset_metadata(self.last_stable_offset())

    # ---- leadership -----------------------------------------------------------------------------------------

    def make_leader(self, state: PartitionRegistration, now_ms: int) -> bool | None:
        """Kafka's makeLeader. None when `state` is older than what this replica knows (a partition epoch below
        its own, e.g. from the metadata log after the AlterPartition answer); True when this is a new leadership
        (a new leader, or a new leader epoch); False when only the assignment or ISR changed."""
        if state.partition_epoch < self.partition_epoch:
            log.info("%s-%d: skipped becoming leader at partition epoch %d: already at %d", self.topic, self.index,
                     state.partition_epoch, self.partition_epoch)
            return None
        is_new_leader = not self.is_leader
        is_new_epoch = state.leader_epoch > self.leader_epoch
        self._update_assignment(state, leader=True)
        self.isr = list(state.isr)
        self.pending_isr_change = None
        if is_new_epoch:
            start = self.log.log_end_offset
            # Cached at once, so a follower that saw later epochs of an earlier leadership truncates correctly.
            try:
                self.log.leader_epoch_cache.assign(state.leader_epoch, start)
            except KafkaStorageError as exc:  # a full disk: cached all the same, and written before the first append
                log.warning("%s-%d: %s", self.topic, self.index, exc)
            for replica in self.remote_replicas.values():
                replica.reset(now_ms, start, is_new_leader, replica.broker_id in state.isr)
            log.debug("%s-%d: leader at epoch %d from offset %d (partition epoch %d, ISR %s, high watermark %d)",
                      self.topic, self.index, state.leader_epoch, start, state.partition_epoch, self.isr,
                      self.high_watermark)
            self.leader_epoch = state.leader_epoch
            self.leader_epoch_start_offset = start
        self.partition_epoch = state.partition_epoch
        self.leader_id = self.node_id
        self.clamp_high_watermark()
        self.maybe_increment_high_watermark(now_ms)
        return is_new_leader or is_new_epoch

    def make_follower(self, state: PartitionRegistration) -> bool | None:
        """Kafka's makeFollower. None when `state` is older than what this replica knows; True when the leader
        epoch is new (the fetcher must start over, from truncation), False otherwise."""
        if state.partition_epoch < self.partition_epoch:
            log.info("%s-%d: skipped becoming follower at partition epoch %d: already at %d", self.topic,
                     self.index, state.partition_epoch, self.partition_epoch)
            return None
        is_new_epoch = state.leader_epoch > self.leader_epoch
        self.leader_id = state.leader
        self.leader_epoch = state.leader_epoch
        self.leader_epoch_start_offset = None
        self.partition_epoch = state.partition_epoch
        self._update_assignment(state, leader=False)
        self.isr = list(state.isr)
        self.pending_isr_change = None
        if is_new_epoch:
            log.debug("%s-%d: follower of %d at epoch %d from offset %d (partition epoch %d, high watermark %d)",
                      self.topic, self.index, state.leader, state.leader_epoch, self.log.log_end_offset,
                      state.partition_epoch, self.high_watermark)
        return is_new_epoch

    def _update_assignment(self, state: PartitionRegistration, leader: bool) -> None:
        self.replicas = list(state.replicas)
        self.adding_replicas = list(state.adding_replicas)
        if not leader:
            self.remote_replicas.clear()
            return
        followers = [r for r in self.replicas if r != self.node_id]
        self.remote_replicas = {r: self.remote_replicas.get(r) or Replica(r) for r in followers}

    # ---- fencing ----------------------------------------------------------------------------------------------

    def check_leader_epoch(self, current_leader_epoch: int) -> None:
        """Kafka's fencing (KIP-320): a stale or future view of the leader epoch is an error."""
        if current_leader_epoch < 0 or current_leader_epoch == self.leader_epoch:
            return
        if current_leader_epoch < self.leader_epoch:
            raise KafkaError(ErrorCode.FENCED_LEADER_EPOCH,
                             f"leader epoch {current_leader_epoch} is older than {self.leader_epoch}")
        raise KafkaError(ErrorCode.UNKNOWN_LEADER_EPOCH,
                         f"leader epoch {current_leader_epoch} is newer than {self.leader_epoch}")

    def require_leader(self) -> None:
        if not self.is_leader:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                             f"broker {self.node_id} is not the leader of {self.topic}-{self.index}")

    def check_leader(self, current_leader_epoch: int) -> None:
        """Kafka's order of checks for leader-only requests: the caller's epoch first, then leadership."""
        self.check_leader_epoch(current_leader_epoch)
        self.require_leader()

    def follower_replica(self, replica_id: int, current_leader_epoch: int) -> Replica:
        """The fetching follower's state; a broker outside the assignment is refused. With an epoch in its request
        the epoch is right but this replica set does not know the broker yet (UNKNOWN_LEADER_EPOCH: it retries);
        without one there is no telling which side is stale (NOT_LEADER_OR_FOLLOWER)."""
        replica = self.remote_replicas.get(replica_id)
        if replica is None:
            code = ErrorCode.UNKNOWN_LEADER_EPOCH if current_leader_epoch >= 0 else ErrorCode.NOT_LEADER_OR_FOLLOWER
            raise KafkaError(code, f"replica {replica_id} is not one of {self.topic}-{self.index}'s replicas "
                                   f"{self.replicas} at leader epoch {self.leader_epoch}")
        return replica

    # ---- the leader's view of its followers ----------------------------------------------------------------------

    def update_follower_fetch_state(self, replica: Replica, fetch_offset: int, follower_start_offset: int,
                                    now_ms: int, leader_end_offset: int,
                                    broker_epoch: int) -> tuple[bool, PendingIsrChange | None]:
        """A follower fetched from `fetch_offset`: record it, maybe take it into the ISR, maybe advance the high
        watermark. Returns (high watermark moved, ISR expansion to send)."""
        previous_end = replica.log_end_offset
        replica.update_fetch_state(fetch_offset, follower_start_offset, now_ms, leader_end_offset, broker_epoch,
                                   self.alive_broker_epochs)
        expansion = self._maybe_expand_isr(replica)
        moved = previous_end != replica.log_end_offset and self.maybe_increment_high_watermark(now_ms)
        return moved, expansion

    def _maybe_expand_isr(self, replica: Replica) -> PendingIsrChange | None:
        """A follower joins the ISR once it has caught up to the high watermark and into this leader epoch: a
        follower short of the epoch might become leader without committed records between the HW and the LEO."""
        if (self.pending_isr_change is not None or replica.broker_id in self.isr
                or not replica.isr_eligible(self.alive_broker_epochs)):
            return None
        start = self.leader_epoch_start_offset
        if start is None or replica.log_end_offset < self.high_watermark or replica.log_end_offset < start:
            return None
        new_isr = [*self.isr, replica.broker_id]
        log.info("%s-%d: expanding ISR from %s to %s", self.topic, self.index, self.isr, new_isr)
        return self._prepare_isr_change(new_isr, maximal=new_isr)

    def maybe_shrink_isr(self, now_ms: int) -> PendingIsrChange | None:
        """Followers in the ISR that have not caught up within replica.lag.time.max.ms leave it (stuck ones and
        slow ones alike: both show in the last caught-up time)."""
        if not self.is_leader or self.pending_isr_change is not None:
            return None
        end = self.log.log_end_offset
        lag = self.replica_lag_time_max_ms
        out = [r for r in self.isr if r != self.node_id
               and (r not in self.remote_replicas or not self.remote_replicas[r].is_caught_up(end, now_ms, lag))]
        if not out:
            return None
        new_isr = [r for r in self.isr if r not in out]
        details = ", ".join(f"{r} (end offset {self.remote_replicas[r].log_end_offset}, caught up "
                            f"{now_ms - self.remote_replicas[r].last_caught_up_time_ms} ms ago)"
                            if r in self.remote_replicas else str(r) for r in out)
        log.info("%s-%d: shrinking ISR from %s to %s (high watermark %d, end offset %d); out of sync: %s",
                 self.topic, self.index, self.isr, new_isr, self.high_watermark, end, details)
        # The committed ISR stays the maximal one: until the controller agrees, the shrink must not advance the HW.
        return self._prepare_isr_change(new_isr, maximal=list(self.isr))

    def _prepare_isr_change(self, new_isr: list[int], maximal: list[int]) -> PendingIsrChange:
        """Each member with the broker epoch its last fetch carried, where the metadata has an epoch to hold it to
        (KRaft). In ZooKeeper mode it has none, so -1 goes, as from Kafka's leaders there: the last fetch of a
        follower restarted since was its previous process's."""
        with_epochs = []
        for broker in new_isr:
            replica = self.remote_replicas.get(broker)
            known = self.alive_broker_epochs.get(broker) != NO_BROKER_EPOCH
            epoch = replica.broker_epoch if replica is not None and known else None
            with_epochs.append((broker, NO_BROKER_EPOCH if epoch is None else epoch))
        change = PendingIsrChange(self.topic_id, self.index, self.leader_epoch, self.partition_epoch, with_epochs,
                                  maximal)
        self.pending_isr_change = change
        return change

    def on_isr_change_answered(self, change: PendingIsrChange, answer: LeaderAndIsr | ErrorCode,
                               now_ms: int) -> tuple[bool, bool]:
        """Apply the controller's answer to `change`; returns (high watermark moved, send `change` again).

        An answer to a change that is no longer pending (new metadata replaced it) is out of date and ignored. A
        refusal that says the leader's view is stale leaves the change pending, so no other is made, until
        metadata arrives; one that says nothing was applied returns to the committed ISR.
        """
        if self.pending_isr_change is not change:
            return False, False
        if isinstance(answer, ErrorCode):
            if answer in _NOT_APPLIED:
                self.pending_isr_change = None
                log.info("%s-%d: ISR change to %s refused (%s); back to %s", self.topic, self.index, change.new_isr,
                         answer.name, self.isr)
                return False, False
            if answer in _WAIT_FOR_METADATA:
                log.info("%s-%d: ISR change to %s refused (%s); waiting for new metadata", self.topic, self.index,
                         change.new_isr, answer.name)
                return False, False
            log.warning("%s-%d: ISR change to %s failed (%s); retrying", self.topic, self.index, change.new_isr,
                        answer.name)
            return False, True
        if answer.leader_epoch != self.leader_epoch or answer.partition_epoch < self.partition_epoch:
            log.info("%s-%d: ignoring ISR %s at leader epoch %d, partition epoch %d: this replica is at %d, %d",
                     self.topic, self.index, answer.isr, answer.leader_epoch, answer.partition_epoch,
                     self.leader_epoch, self.partition_epoch)
            return False, False
        self.isr = list(answer.isr)
        self.partition_epoch = answer.partition_epoch
        self.pending_isr_change = None
        log.info("%s-%d: ISR is now %s (partition epoch %d)%s", self.topic, self.index, self.isr,
                 self.partition_epoch, " (under min ISR)" if self.is_under_min_isr else "")
        return self.maybe_increment_high_watermark(now_ms), False

    # ---- the high watermark -------------------------------------------------------------------------------------

    def _effective_min_isr(self) -> int:
        """min.insync.replicas, but never more than the replication factor."""
        return min(self.log.config.min_insync_replicas, len(self.remote_replicas) + 1)

    def maybe_increment_high_watermark(self, now_ms: int) -> bool:
        """Advance the leader's HW to the smallest log end offset over the maximal ISR and over the followers
        about to join it (caught up and eligible: waiting for them is what lets them join); never while the ISR
        is below min.insync.replicas (KIP-966). True if it moved."""
        if not self.is_leader or self.is_under_min_isr:
            return False
        end = self.log.log_end_offset
        new_hw = end
        maximal = self.maximal_isr
        lag = self.replica_lag_time_max_ms
        for replica in self.remote_replicas.values():
            if replica.log_end_offset < new_hw and (
                    replica.broker_id in maximal
                    or (replica.is_caught_up(end, now_ms, lag) and replica.isr_eligible(self.alive_broker_epochs))):
                new_hw = replica.log_end_offset
        if new_hw > self.high_watermark:
            self.high_watermark = new_hw
            return True
        return False

    def check_enough_replicas_reach_offset(self, required_offset: int) -> tuple[bool, ErrorCode]:
        """For an acks=all append ending before `required_offset`: (done, error). Done once the HW passes it;
        NOT_ENOUGH_REPLICAS_AFTER_APPEND if by then the ISR is smaller than min.insync.replicas."""
        if not self.is_leader:
            return True, ErrorCode.NOT_LEADER_OR_FOLLOWER
        if self.high_watermark < required_offset:
            return False, ErrorCode.NONE
        if len(self.maximal_isr) < self.log.config.min_insync_replicas:
            return True, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return True, ErrorCode.NONE

    def update_follower_high_watermark(self, leader_high_watermark: int) -> bool:
        """A follower's HW is the leader's, within its own log; True if it changed."""
        new_hw = max(self.log.log_start_offset, min(leader_high_watermark, self.log.log_end_offset))
        if new_hw == self.high_watermark:
            return False
        self.high_watermark = new_hw
        return True

    def clamp_high_watermark(self) -> None:
        """After truncation or restart the HW may not exceed the log, nor trail its start."""
        self.high_watermark = max(self.log.log_start_offset, min(self.high_watermark, self.log.log_end_offset))

    # ---- leader answers ----------------------------------------------------------------------------------------

    def diverging_epoch(self, last_fetched_epoch: int, fetch_offset: int) -> tuple[int, int] | None:
        """Kafka's validateFetchOffsetAndMaybeGetDivergingEpoch (KIP-320): where the leader's copy of the fetcher's
        last epoch ends, when the fetcher's log has gone past it; OFFSET_OUT_OF_RANGE when the leader has no end
        for that epoch. None for a fetcher that names no epoch or agrees."""
        if last_fetched_epoch < 0:
            return None
        the_log = self.log
        epoch, end_offset = the_log.end_offset_for_epoch(last_fetched_epoch)
        if epoch == -1 or end_offset == -1 or fetch_offset < the_log.log_start_offset:
            raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE, f"no end offset for epoch {last_fetched_epoch} of "
                             f"{self.topic}-{self.index} at offset {fetch_offset}")
        if epoch < last_fetched_epoch or end_offset < fetch_offset:
            return epoch, end_offset
        return None

    def last_fetchable_offset(self, isolation_level: int | None) -> int:
        """Where a reader stops: the last stable offset (read_committed) or the high watermark for clients, the
        log end offset for replicas (no isolation level)."""
        if isolation_level is None:
            return self.log.log_end_offset
        if isolation_level == IsolationLevel.READ_COMMITTED:
            return self.last_stable_offset()
        return self.high_watermark

    def fetch_offset_for_timestamp(self, timestamp: int, isolation_level: int | None) -> TimestampAndOffset:
        """ListOffsets on the leader (Kafka's fetchOffsetForTimestamp): the log's answer, except that latest means
        the last fetchable offset and a record at or past that offset is not found yet."""
        last_fetchable = self.last_fetchable_offset(isolation_level)
        if timestamp == SpecialTimestamp.LATEST_TIMESTAMP:
            return TimestampAndOffset(last_fetchable, NO_TIMESTAMP, self.leader_epoch)
        if timestamp < 0 and timestamp not in _SPECIAL:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"unknown special timestamp {timestamp}")
        found = self.log.fetch_offset_by_timestamp(timestamp)
        if timestamp in _POSITIONS and found is not None:
            return found
        if found is None or found.offset >= last_fetchable:
            return UNKNOWN_TIMESTAMP_AND_OFFSET
        return found

    def last_offset_for_leader_epoch(self, leader_epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch (Kafka's lastOffsetForLeaderEpoch): the largest epoch <= `leader_epoch` this log
        knows and the offset where it ends; (-1, -1) if unknown."""
        return self.log.end_offset_for_epoch(leader_epoch)

    def delete_records_on_leader(self, offset: int) -> int:
        """DeleteRecords: move the log start offset up to `offset` (HIGH_WATERMARK: the high watermark), never past
        the high watermark; returns the new low watermark (the log start offset)."""
        converted = self.high_watermark if offset == HIGH_WATERMARK else offset
        if converted < 0 or converted > self.high_watermark:
            raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE,
                             f"offset {offset} of {self.topic}-{self.index} is beyond the high watermark "
                             f"{self.high_watermark}")
        return self.log.maybe_increment_log_start_offset(converted)


class PartitionLookup(Protocol):
    """The partitions hosted here, as the delayed operations and fetchers the ReplicaManager owns look them up: they
    hold this narrow view of it, not the manager itself."""

    def get_partition(self, topic: str, index: int) -> Partition | None: ...

    def partition_or_error(self, topic: str, index: int) -> Partition:
        """The hosted partition, or the Kafka error a request for it is answered with."""
        ...

    def unhosted_error(self, tp: tuple[str, int]) -> ErrorCode:
        """The error for a partition with no replica here."""
        ...
