"""Idempotent-producer state of one partition, as Kafka's ProducerStateManager.

For each producer id the partition remembers the producer epoch and the metadata of the last
five batches it appended. That is enough to answer a retried batch with its original offsets
(instead of writing it twice), to reject sequence gaps, and to fence older producer epochs.
The state is rebuilt from batch headers when a log is opened, so no snapshot files are kept.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from minikafka.protocol.record_batch import INT32_MAX, NO_SEQUENCE, BatchHeader

from .errors import InvalidProducerEpochError, OutOfOrderSequenceError

NUM_BATCHES_TO_RETAIN = 5
NO_PRODUCER_EPOCH = -1
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86400000  # Kafka's producer.id.expiration.ms


class BatchMetadata(NamedTuple):
    """What is remembered of one appended batch."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass
class ProducerStateEntry:
    """State of one producer id: its epoch and its most recent batches, oldest first."""

    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))
    last_timestamp: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    def find_duplicate(self, header: BatchHeader) -> BatchMetadata | None:
        """The remembered batch with the same epoch and sequence range, if any."""
        if header.producer_epoch != self.producer_epoch:
            return None
        first, last = header.base_sequence, header.last_sequence
        return next((b for b in self.batches if b.first_seq == first and b.last_seq == last), None)

    def add(self, header: BatchHeader) -> None:
        if header.producer_epoch != self.producer_epoch:
            self.batches.clear()
            self.producer_epoch = header.producer_epoch
        if not header.is_control:
            self.batches.append(
                BatchMetadata(
                    header.base_sequence,
                    header.last_sequence,
                    header.base_offset,
                    header.last_offset,
                    header.max_timestamp,
                )
            )
        self.last_timestamp = header.max_timestamp


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


class ProducerStateManager:
    """Producer id -> ProducerStateEntry for one partition."""

    def __init__(self) -> None:
        self._producers: dict[int, ProducerStateEntry] = {}

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self._producers.get(producer_id)

    def last_entries(self) -> dict[int, ProducerStateEntry]:
        """Snapshot of all producer states, for inspection and DescribeProducers."""
        return dict(self._producers)

    def check_client_batches(self, headers: Iterable[BatchHeader]) -> BatchMetadata | None:
        """Validate a client append before it is written.

        Returns the metadata of the original batch if one of `headers` is a retry of a batch
        already in the log (then nothing must be appended); raises InvalidProducerEpochError for
        an epoch older than the producer's, OutOfOrderSequenceError for a sequence that does not
        follow the producer's last one. Several batches of one producer are checked in order.
        """
        pending: dict[int, tuple[int, int]] = {}  # producer id -> (epoch, last seq) after earlier batches
        for header in headers:
            if not header.has_producer_id:
                continue
            entry = self._producers.get(header.producer_id)
            if entry is not None and header.producer_id not in pending:
                duplicate = entry.find_duplicate(header)
                if duplicate is not None:
                    return duplicate
            current_epoch, last_seq = pending.get(
                header.producer_id,
                (entry.producer_epoch, entry.last_seq) if entry is not None else (NO_PRODUCER_EPOCH, NO_SEQUENCE),
            )
            self._check_sequence(header, current_epoch, last_seq)
            pending[header.producer_id] = (header.producer_epoch, header.last_sequence)
        return None

    @staticmethod
    def _check_sequence(header: BatchHeader, current_epoch: int, last_seq: int) -> None:
        producer = header.producer_id
        if header.producer_epoch < current_epoch:
            raise InvalidProducerEpochError(
                f"Epoch of producer {producer} is {header.producer_epoch}, "
                f"which is smaller than the last seen epoch {current_epoch}"
            )
        if header.producer_epoch != current_epoch:
            # A producer this partition has no state for may start at any sequence (its batches
            # may have been removed by retention or DeleteRecords), as in Kafka.
            if header.base_sequence != 0 and current_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceError(
                    f"Invalid sequence number for new epoch of producer {producer}: "
                    f"{header.producer_epoch} (request epoch), {header.base_sequence} (seq. number), "
                    f"{current_epoch} (current producer epoch)"
                )
        elif current_epoch != NO_PRODUCER_EPOCH and not _in_sequence(last_seq, header.base_sequence):
            raise OutOfOrderSequenceError(
                f"Out of order sequence number for producer {producer}: "
                f"{header.base_sequence} (incoming seq. number), {last_seq} (current end sequence number)"
            )

    def update(self, header: BatchHeader) -> None:
        """Record an appended batch (with its final offsets); batches without producer id are ignored."""
        if header.producer_id < 0:
            return
        entry = self._producers.get(header.producer_id)
        if entry is None:
            entry = self._producers[header.producer_id] = ProducerStateEntry(header.producer_id)
        entry.add(header)

    def remove_expired(self, now_ms: int, expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS) -> None:
        """Forget producers idle for `expiration_ms` (Kafka's producer.id.expiration.ms)."""
        expired = [pid for pid, e in self._producers.items() if now_ms - e.last_timestamp >= expiration_ms]
        for pid in expired:
            del self._producers[pid]

    def clear(self) -> None:
        self._producers.clear()
