"""A partition's replica on this broker: its log plus leader state (leader epoch, ISR, high watermark).

The high watermark is the smallest log end offset among the ISR, as in Kafka; with a single replica it follows
the log end offset. Remote replicas' offsets live here so replication can extend this without a new concept.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.storage.log import Log


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
