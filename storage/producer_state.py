"""Producer state of one partition, as Kafka's ProducerStateManager: idempotence and open transactions.

For each producer id the partition remembers the producer epoch and the metadata of the last
five batches it appended. That is enough to answer a retried batch with its original offsets
(instead of writing it twice), to reject sequence gaps, and to fence older producer epochs.

A transactional producer's first batch in the partition opens its transaction there; the end
marker the coordinator writes closes it. The first offset of the earliest transaction not yet
closed, or closed by a marker not yet below the high watermark, is the first unstable offset:
read_committed readers stop there (the last stable offset).

Snapshots (Kafka's `<offset>.snapshot` files, producer_state_snapshot) keep the state across restarts: per
producer id the metadata of its last batch only, its epochs and its open transaction's first offset. As in
Kafka's UnifiedLog, the log takes one when a segment rolls (at the new base offset, fsynced later with the
segment flush), at a clean close, and when loading or truncating: there at the end, and at the base offsets of
the last two segments as the replay passes them (all three fsynced). It deletes them past the new end on
truncation, all of them on truncate_fully_and_start_at, and those below the first segment left when segments
are deleted (Kafka deletes the deleted segments' ones at once and any other below the log start at the next
load). A load deletes the stray ones and those at or below the log start offset, loads the latest readable one
(a corrupt one is deleted with a warning, and the next older tried) without the expired producers, and replays
the batches after it; with none it replays the log as before snapshots existed.

After an unclean shutdown Kafka re-validates each unflushed segment from the latest snapshot at or below its base
offset, deleting the later ones, and snapshots every segment it re-validated. Here the one replay starts from the
latest snapshot at or below the first re-validated segment (the later ones are deleted: written since the last
flush, they are not trusted) and rebuilds the transaction indexes of all re-validated segments; snapshots are
taken as in any load. Kafka's shortcut for brokers upgraded from versions without snapshots (no snapshot after a
clean shutdown: take empty ones, replay nothing) is not taken: no snapshot means a full replay, which is always
right. Entries are written in producer id order: Kafka writes its hash map's order, which no reader depends on
(the two agree while the ids are below the map's table size). A snapshot does not hold the closed transactions
whose marker is not yet below the high watermark: as in Kafka, a reload counts those before it as stable.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from minikafka.protocol.end_transaction_marker import EndTransactionMarker
from minikafka.protocol.record_batch import INT32_MAX, NO_SEQUENCE, BatchHeader

from .errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from .producer_state_snapshot import (
    CorruptSnapshotError,
    ProducerEntry,
    list_snapshot_offsets,
    read_snapshot,
    snapshot_file,
    write_snapshot,
)

logger = logging.getLogger(__name__)

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


class CompletedTxn(NamedTuple):
    """A transaction an end marker closed in this partition: from its first batch to the marker."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


@dataclass
class TxnMetadata:
    """A transaction open in this partition (last_offset None) or closed by a marker above the high watermark."""

    producer_id: int
    first_offset: int
    last_offset: int | None = None


@dataclass
class ProducerStateEntry:
    """State of one producer id: its epoch and its most recent batches, oldest first."""

    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))
    last_timestamp: int = -1
    coordinator_epoch: int = -1
    current_txn_first_offset: int | None = None

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
        self.maybe_update_epoch(header.producer_epoch)
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

    def maybe_update_epoch(self, epoch: int) -> None:
        if epoch != self.producer_epoch:
            self.batches.clear()
            self.producer_epoch = epoch


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


def _decrement_sequence(sequence: int, decrement: int) -> int:
    """The sequence `decrement` before `sequence`, wrapping below 0 to INT32_MAX as producers do."""
    return sequence - decrement if sequence >= decrement else INT32_MAX - (decrement - sequence) + 1


def _snapshot_entry(entry: ProducerStateEntry) -> ProducerEntry:
    """What a snapshot keeps of a producer, as Kafka's writeSnapshot: its last batch (LastOffset -1, OffsetDelta 0
    when it has none), its epochs and its open transaction (-1 when none)."""
    last = entry.batches[-1] if entry.batches else None
    return ProducerEntry(
        entry.producer_id,
        entry.producer_epoch,
        entry.last_seq,
        -1 if last is None else last.last_offset,
        0 if last is None else last.last_offset - last.first_offset,
        entry.last_timestamp,
        entry.coordinator_epoch,
        -1 if entry.current_txn_first_offset is None else entry.current_txn_first_offset,
    )


def _loaded_entry(snapshot: ProducerEntry) -> ProducerStateEntry:
    """A producer read back from a snapshot, as Kafka's readSnapshot: at most one batch, the last one."""
    entry = ProducerStateEntry(
        snapshot.producer_id,
        snapshot.epoch,
        last_timestamp=snapshot.timestamp,
        coordinator_epoch=snapshot.coordinator_epoch,
        current_txn_first_offset=snapshot.current_txn_first_offset if snapshot.current_txn_first_offset >= 0
        else None,
    )
    if snapshot.last_offset >= 0:
        entry.batches.append(BatchMetadata(
            _decrement_sequence(snapshot.last_sequence, snapshot.offset_delta),
            snapshot.last_sequence,
            snapshot.last_offset - snapshot.offset_delta,
            snapshot.last_offset,
            snapshot.timestamp,
        ))
    return entry


def _is_expired(entry: ProducerStateEntry, now_ms: int, expiration_ms: int) -> bool:
    """Kafka's isProducerExpired: idle for `expiration_ms`, and no transaction open here."""
    return entry.current_txn_first_offset is None and now_ms - entry.last_timestamp >= expiration_ms


class ProducerStateManager:
    """Producer id -> ProducerStateEntry for one partition, and the snapshot files of its directory."""

    def __init__(self, directory: Path) -> None:
        self._dir = directory
        self._producers: dict[int, ProducerStateEntry] = {}
        # By first offset. Transactions open in offset order, so the first key is the smallest.
        self._ongoing: dict[int, TxnMetadata] = {}
        self._unreplicated: dict[int, TxnMetadata] = {}
        self._snapshots = list_snapshot_offsets(directory)  # ascending
        # Kafka's lastSnapOffset: a snapshot is worth taking only past it (the state has not changed otherwise).
        # Once loaded, never below the latest snapshot.
        self._last_snap_offset = 0

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self._producers.get(producer_id)

    def has_ongoing_transaction(self, producer_id: int, producer_epoch: int) -> bool:
        """Whether the producer's transaction at this epoch is open here (a transaction version 2 producer's next
        transaction, at the epoch its last EndTxn bumped to, is not the same one)."""
        entry = self._producers.get(producer_id)
        return (entry is not None and entry.current_txn_first_offset is not None
                and entry.producer_epoch == producer_epoch)

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
        # producer id -> (epoch, last seq, in a transaction) after earlier batches of the append
        pending: dict[int, tuple[int, int, bool]] = {}
        for header in headers:
            if not header.has_producer_id:
                continue
            entry = self._producers.get(header.producer_id)
            if entry is not None and header.producer_id not in pending:
                duplicate = entry.find_duplicate(header)
                if duplicate is not None:
                    return duplicate
            current_epoch, last_seq, in_txn = pending.get(
                header.producer_id,
                (entry.producer_epoch, entry.last_seq, entry.current_txn_first_offset is not None)
                if entry is not None else (NO_PRODUCER_EPOCH, NO_SEQUENCE, False),
            )
            self._check_sequence(header, current_epoch, last_seq)
            if in_txn and not header.is_transactional:
                raise InvalidTxnStateError(
                    f"Expected transactional write from producer {header.producer_id}: its transaction in this "
                    "partition is still open"
                )
            pending[header.producer_id] = (header.producer_epoch, header.last_sequence,
                                           in_txn or header.is_transactional)
        return None

    def check_coordinator_batches(self, headers: Iterable[BatchHeader]) -> None:
        """A coordinator's own batches (a transactional offset commit is written at sequence 0 every time) are
        checked for the producer epoch only, as Kafka checks appends of origin COORDINATOR."""
        for header in headers:
            if header.has_producer_id:
                self._check_epoch(header.producer_id, header.producer_epoch)

    def _check_epoch(self, producer_id: int, producer_epoch: int) -> ProducerStateEntry | None:
        entry = self._producers.get(producer_id)
        if entry is not None and producer_epoch < entry.producer_epoch:
            raise InvalidProducerEpochError(
                f"Epoch of producer {producer_id} is {producer_epoch}, "
                f"which is smaller than the last seen epoch {entry.producer_epoch}"
            )
        return entry

    def check_end_txn_marker(self, producer_id: int, producer_epoch: int, marker: EndTransactionMarker) -> None:
        """Refuse a coordinator's marker from an older producer epoch or an older coordinator epoch."""
        entry = self._check_epoch(producer_id, producer_epoch)
        if entry is None:
            return
        if marker.coordinator_epoch < entry.coordinator_epoch:
            raise TransactionCoordinatorFencedError(
                f"Invalid coordinator epoch for producerId {producer_id}: {marker.coordinator_epoch} (zombie), "
                f"{entry.coordinator_epoch} (current)"
            )

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

    def update(self, header: BatchHeader, marker: EndTransactionMarker | None = None) -> CompletedTxn | None:
        """Record an appended batch (with its final offsets); batches without producer id are ignored.

        A transactional data batch opens its producer's transaction here if none is open; an end marker (`marker`,
        read from a control batch) closes it and returns it, to be completed with complete_txn once its abort, if
        it is one, is in the transaction index. An empty control batch changes nothing.
        """
        producer_id = header.producer_id
        if producer_id < 0 or (header.is_control and marker is None):
            return None
        entry = self._producers.get(producer_id)
        if entry is None:
            entry = self._producers[producer_id] = ProducerStateEntry(producer_id)
        if marker is None:
            entry.add(header)
            if header.is_transactional and entry.current_txn_first_offset is None:
                entry.current_txn_first_offset = header.base_offset
                self._ongoing[header.base_offset] = TxnMetadata(producer_id, header.base_offset)
            return None
        first_offset = entry.current_txn_first_offset
        entry.maybe_update_epoch(header.producer_epoch)
        entry.coordinator_epoch = marker.coordinator_epoch
        entry.last_timestamp = header.max_timestamp
        entry.current_txn_first_offset = None
        if first_offset is None:
            return None  # a marker with no data of the transaction here: nothing to close
        return CompletedTxn(producer_id, first_offset, header.base_offset, marker.is_abort)

    def last_stable_offset(self, completed: CompletedTxn) -> int:
        """The last stable offset once `completed` is closed: the start of the earliest other open transaction,
        else the offset after its marker (what the transaction index records with an abort)."""
        other = next((t for t in self._ongoing.values() if t.producer_id != completed.producer_id), None)
        return other.first_offset if other is not None else completed.last_offset + 1

    def complete_txn(self, completed: CompletedTxn) -> None:
        """Close a transaction; it stays unstable until its marker is below the high watermark."""
        txn = self._ongoing.pop(completed.first_offset)
        txn.last_offset = completed.last_offset
        self._unreplicated[completed.first_offset] = txn

    def first_unstable_offset(self) -> int | None:
        """The first offset of the earliest open or unreplicated transaction; None when every one is stable."""
        firsts = [next(iter(self._ongoing))] if self._ongoing else []
        if self._unreplicated:
            firsts.append(min(self._unreplicated))
        return min(firsts) if firsts else None

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        """Transactions whose marker is below the high watermark are stable."""
        self._remove_unreplicated_before(high_watermark)

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        self._remove_unreplicated_before(log_start_offset)
        self._last_snap_offset = self._snapshots[-1] if self._snapshots else log_start_offset

    def _remove_unreplicated_before(self, offset: int) -> None:
        if self._unreplicated:
            for first in [f for f, t in self._unreplicated.items() if t.last_offset is not None
                          and t.last_offset < offset]:
                del self._unreplicated[first]

    def ongoing_transactions(self) -> list[TxnMetadata]:
        """The transactions open in this partition, oldest first (DescribeProducers, inspection)."""
        return list(self._ongoing.values())

    def remove_expired(self, now_ms: int, expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS) -> None:
        """Forget producers idle for `expiration_ms` (Kafka's producer.id.expiration.ms), except those with a
        transaction open here."""
        expired = [pid for pid, e in self._producers.items() if _is_expired(e, now_ms, expiration_ms)]
        for pid in expired:
            del self._producers[pid]

    def _clear(self) -> None:
        self._producers.clear()
        self._ongoing.clear()
        self._unreplicated.clear()

    # ----------------------------------------------------------------- snapshots

    def take_snapshot(self, offset: int, *, sync: bool) -> bool:
        """Write the state as the snapshot at `offset` (the log end offset, or a new segment's base offset) unless
        no offset past the last snapshot's has been reached; True if it was written. Without `sync` the caller
        fsyncs it later (with the segment flush after a roll), as Kafka does."""
        if offset <= self._last_snap_offset:
            return False
        path = snapshot_file(self._dir, offset)
        write_snapshot(path, [_snapshot_entry(e) for _, e in sorted(self._producers.items())], sync=sync)
        self._snapshots.append(offset)
        self._last_snap_offset = offset
        logger.debug("Wrote producer snapshot %s with %d producer ids", path, len(self._producers))
        return True

    def truncate_and_reload(self, log_start_offset: int, log_end_offset: int, now_ms: int,
                            expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS) -> int | None:
        """Kafka's truncateAndReload: delete the snapshots past `log_end_offset` or at or below
        `log_start_offset`, forget the state, and load the latest snapshot left that can be read (a corrupt one
        is deleted with a warning and the next older one tried), without the producers expired by `now_ms`.
        Returns that snapshot's offset, from which the log's batches are to be replayed; None when there is
        none."""
        for offset in [o for o in self._snapshots if o > log_end_offset or o <= log_start_offset]:
            self._delete_snapshot(offset)
        self._clear()
        while self._snapshots:
            offset = self._snapshots[-1]
            path = snapshot_file(self._dir, offset)
            try:
                entries = read_snapshot(path)
            except CorruptSnapshotError as e:
                logger.warning("Failed to load producer snapshot from '%s': %s", path, e)
                self._delete_snapshot(offset)
                continue
            logger.debug("Loading producer state from snapshot file '%s'", path)
            self._load_producer_entries(e for e in map(_loaded_entry, entries)
                                        if not _is_expired(e, now_ms, expiration_ms))
            self._last_snap_offset = offset
            return offset
        self._last_snap_offset = log_start_offset
        return None

    def _load_producer_entries(self, entries: Iterable[ProducerStateEntry]) -> None:
        """Kafka's loadProducerEntry, for all of a snapshot's producers: a current transaction first offset is an
        open transaction (registered in offset order, as _ongoing needs)."""
        for entry in entries:
            self._producers[entry.producer_id] = entry
        ongoing = {e.current_txn_first_offset: e.producer_id for e in self._producers.values()
                   if e.current_txn_first_offset is not None}
        for first in sorted(ongoing):
            self._ongoing[first] = TxnMetadata(ongoing[first], first)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Forget the state and delete every snapshot: the log starts again, empty, at `offset`."""
        self._clear()
        for snapshot in list(self._snapshots):
            self._delete_snapshot(snapshot)
        self._last_snap_offset = offset

    def remove_stray_snapshots(self, segment_base_offsets: Iterable[int]) -> None:
        """On load (Kafka's removeStraySnapshots): delete the snapshots at no segment's base offset, except the
        latest such one when it is past the last segment's base offset (the one a clean close wrote)."""
        bases = set(segment_base_offsets)
        strays = [offset for offset in self._snapshots if offset not in bases]
        if strays and strays[-1] > max(bases, default=-1):
            strays.pop()
        for offset in strays:
            self._delete_snapshot(offset)

    def delete_snapshots_before(self, offset: int) -> None:
        """Delete the snapshots below `offset` (the segments they start are gone)."""
        for snapshot in [o for o in self._snapshots if o < offset]:
            self._delete_snapshot(snapshot)

    def _delete_snapshot(self, offset: int) -> None:
        self._snapshots.remove(offset)
        path = snapshot_file(self._dir, offset)
        path.unlink(missing_ok=True)
        logger.info("Deleted producer state snapshot %s", path)
