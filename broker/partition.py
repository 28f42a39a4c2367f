"""A partition's replica on this broker: its log plus leader state (leader epoch, ISR, high watermark).

The high watermark is the smallest log end offset among the ISR, as in Kafka; with a single replica it follows
the log end offset. Remote replicas' offsets live here so replication can extend this without a new concept.
The leader's answers that depend on that state (offsets by time or epoch, record deletion) are made here, as
Kafka's Partition makes them; the replica manager checks leadership first.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from kafka.protocol.consumer.offsets import IsolationLevel

from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.protocol.record_batch import NO_TIMESTAMP
from minikafka.storage.log import Log, TimestampAndOffset
from minikafka.storage.special_timestamps import SpecialTimestamp

# DeleteRecords' offset for "everything below the high watermark" (Kafka's DeleteRecordsRequest.HIGH_WATERMARK).
HIGH_WATERMARK = -1
# ListOffsets' answer when no offset matches (Kafka's UNKNOWN_TIMESTAMP, UNKNOWN_OFFSET and no leader epoch).
UNKNOWN_TIMESTAMP_AND_OFFSET = TimestampAndOffset(offset=-1, timestamp=NO_TIMESTAMP, leader_epoch=-1)
_SPECIAL = frozenset(SpecialTimestamp)
# Special timestamps the log answers without looking at any record, so the last fetchable offset does not bound them.
_POSITIONS = frozenset({SpecialTimestamp.EARLIEST_TIMESTAMP, SpecialTimestamp.EARLIEST_LOCAL_TIMESTAMP,
                        SpecialTimestamp.LATEST_TIERED_TIMESTAMP, SpecialTimestamp.EARLIEST_PENDING_UPLOAD_TIMESTAMP})


@dataclass
class Partition:
    topic: str
    index: int
    topic_id: uuid.UUID
    log: Log
    node_id: int
    leader_id: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    high_watermark: int = 0
    remote_log_end_offsets: dict[int, int] = field(default_factory=dict)

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.node_id

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    def last_stable_offset(self) -> int:
        """Without transactions every record below the high watermark is stable."""
        return self.high_watermark

    def check_leader_epoch(self, current_leader_epoch: int) -> None:
        """Kafka's fencing (KIP-320): a client's stale or future view of the leader epoch is an error."""
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

    def maybe_increment_high_watermark(self) -> bool:
        """Advance the HW to the minimum LEO of the ISR; True if it moved."""
        ends = [self.log.log_end_offset if r == self.node_id else self.remote_log_end_offsets.get(r, 0)
                for r in self.isr]
        new_hw = min(ends) if ends else self.log.log_end_offset
        if new_hw > self.high_watermark:
            self.high_watermark = new_hw
            return True
        return False

    def clamp_high_watermark(self) -> None:
        """After truncation or restart the HW may not exceed the log, nor trail its start."""
        self.high_watermark = max(self.log.log_start_offset, min(self.high_watermark, self.log.log_end_offset))

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
