"""Leader epoch -> first offset map of one partition, persisted in leader-epoch-checkpoint.

This is what lets a follower find where its log diverges from a new leader's (KIP-101/279):
OffsetForLeaderEpoch answers "where does epoch E end" from this map.

Durability follows Kafka's LeaderEpochFileCache. A new entry is written before the records of its
epoch are (`assign` raises KafkaStorageError if it cannot be), so the file never lacks an epoch the
log holds. Truncations only remove entries; Kafka writes those in the background, and a stale
file is harmless because loading a log truncates the cache again. Here they are written at once,
and a failure (a full disk) is logged and leaves the file behind the cache: the next `assign` or
`flush_if_dirty` writes it. Nothing is written when the file already holds what the cache does.
"""

from __future__ import annotations

import logging
from pathlib import Path

from .checkpoint import EpochEntry, read_leader_epoch_checkpoint, write_leader_epoch_checkpoint
from .errors import KafkaStorageError

logger = logging.getLogger(__name__)

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class LeaderEpochCache:
    """Epoch entries in increasing epoch and start-offset order, mirrored to the checkpoint file.

    Kafka semantics: assigning an epoch that is not newer than the latest, or a start offset
    below the latest entry's, first drops the entries it conflicts with (a follower that
    truncated and now follows a new leader).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries: list[EpochEntry] = []
        written = read_leader_epoch_checkpoint(path)
        for entry in written:
            try:
                self._put(entry)
            except ValueError as e:  # Kafka refuses the entry as it loads the file, and the log with it
                raise KafkaStorageError(f"Error while reading checkpoint file {path}: {e}") from None
        self._written = written  # what the file holds

    @classmethod
    def in_dir(cls, directory: Path) -> LeaderEpochCache:
        return cls(directory / LEADER_EPOCH_CHECKPOINT)

    @property
    def epochs(self) -> list[EpochEntry]:
        return list(self._entries)

    @property
    def latest_entry(self) -> EpochEntry | None:
        return self._entries[-1] if self._entries else None

    @property
    def latest_epoch(self) -> int | None:
        return self._entries[-1].epoch if self._entries else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        return self._entries[0] if self._entries else None

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that `epoch` starts at `start_offset` and write the file (also when an earlier write failed);
        KafkaStorageError if it cannot be written, before any record of the epoch is appended."""
        self._put(EpochEntry(epoch, start_offset))
        self.flush_if_dirty()

    def _put(self, entry: EpochEntry) -> None:
        if entry.epoch < 0 or entry.start_offset < 0:
            raise ValueError(f"Received invalid partition leader epoch entry {entry}")
        latest = self.latest_entry
        if latest is not None and entry.epoch == latest.epoch and entry.start_offset >= latest.start_offset:
            return
        while self._entries and (
            self._entries[-1].epoch >= entry.epoch or self._entries[-1].start_offset >= entry.start_offset
        ):
            self._entries.pop()
        self._entries.append(entry)

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetForLeaderEpoch.

        The epoch is the largest known epoch <= requested_epoch and the end offset is the start
        offset of the next known epoch, or the log end offset for the latest epoch. An epoch older
        than every known one yields (requested_epoch, first known start offset); an undefined or
        unknown-newer epoch yields (-1, -1).
        """
        latest = self.latest_epoch
        if requested_epoch == UNDEFINED_EPOCH:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if latest is not None and requested_epoch == latest:
            return requested_epoch, log_end_offset
        higher = next((e for e in self._entries if e.epoch > requested_epoch), None)
        if higher is None:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        floor = next((e for e in reversed(self._entries) if e.epoch <= requested_epoch), None)
        if floor is None:
            return requested_epoch, higher.start_offset
        return floor.epoch, higher.start_offset

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch under which `offset` was written, if known."""
        found = None
        for entry in self._entries:
            if entry.start_offset > offset:
                break
            found = entry.epoch
        return found

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop entries starting at or after `end_offset` (the log was truncated there)."""
        if end_offset < 0 or not self._entries or self._entries[-1].start_offset < end_offset:
            return
        while self._entries and self._entries[-1].start_offset >= end_offset:
            self._entries.pop()
        self._flush_or_defer()

    def truncate_from_start(self, start_offset: int) -> None:
        """Drop entries wholly below the new log start offset; the epoch covering it now starts there."""
        below = sum(1 for entry in self._entries if entry.start_offset <= start_offset)
        if below == 0:
            return
        self._entries[:below] = [EpochEntry(self._entries[below - 1].epoch, start_offset)]
        self._flush_or_defer()

    def clear_and_flush(self) -> None:
        self._entries.clear()
        self.flush()

    def flush(self) -> None:
        """Write the file; KafkaStorageError if it cannot be."""
        entries = list(self._entries)
        write_leader_epoch_checkpoint(self.path, entries)
        self._written = entries

    def flush_if_dirty(self) -> None:
        """Write the file unless it holds what the cache does; KafkaStorageError if it cannot be written."""
        if self._entries != self._written:
            self.flush()

    def _flush_or_defer(self) -> None:
        """Write a truncation; if that fails, log it and leave the file to the next write (see the module doc)."""
        try:
            self.flush_if_dirty()
        except KafkaStorageError as e:
            logger.warning("%s left as it was after a truncation of the leader epoch cache (it is written again "
                           "before the next epoch is assigned): %s", self.path, e)
