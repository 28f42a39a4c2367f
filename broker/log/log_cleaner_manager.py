"""Which compacted log the cleaner takes next, and where each one's next cleaning starts (Kafka's
LogCleanerManager).

A log's first dirty offset is its entry in the `cleaner-offset-checkpoint` of its log dir (the log start offset when
it has none, or when the entry is below the log start or past the log end). The cleaner never cleans at or past
the first uncleanable offset: the last stable offset (itself at most the high watermark), the active segment's base
offset, and the first dirty segment younger than min.compaction.lag.ms. The dirtiest log by cleanable ratio goes
first, when the ratio exceeds min.cleanable.dirty.ratio or its oldest dirty record is older than
max.compaction.lag.ms (KIP-354). A log whose cleaning failed is marked uncleanable and skipped until restart.

All of it runs on the event loop; the cleaning itself runs on worker threads (log_cleaner).
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from minikafka.storage.errors import KafkaStorageError
from minikafka.storage.log import Log
from minikafka.storage.log_dir import LogDir

log = logging.getLogger("minikafka.log_cleaner")

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class OffsetsToClean:
    """The dirty section a cleaning may take, and whether the checkpointed offset was invalid and is reset."""

    first_dirty_offset: int
    first_uncleanable_offset: int
    force_update_checkpoint: bool


def cleanable_offsets(the_log: Log, last_clean_offset: int | None, now_ms: int, high_watermark: int) -> OffsetsToClean:
    """Kafka's LogCleanerManager.cleanableOffsets."""
    log_start = the_log.log_start_offset
    checkpointed = log_start if last_clean_offset is None else last_clean_offset
    if checkpointed < log_start:
        if not (the_log.config.compact_enabled and the_log.config.delete_enabled):
            log.warning("Resetting first dirty offset of %s to log start offset %d since the checkpointed offset "
                        "%d is invalid.", the_log.name, log_start, checkpointed)
        first_dirty, force = log_start, True
    elif checkpointed > the_log.log_end_offset:
        log.warning("The last checkpoint dirty offset for partition %s is %d, which is larger than the log end "
                    "offset %d. Resetting to the log start offset %d.", the_log.name, checkpointed,
                    the_log.log_end_offset, log_start)
        first_dirty, force = log_start, True
    else:
        first_dirty, force = checkpointed, False
    unstable = the_log.first_unstable_offset
    last_stable = high_watermark if unstable is None else min(unstable, high_watermark)
    candidates = [last_stable, the_log.active_segment.base_offset]
    min_lag = max(the_log.config.min_compaction_lag_ms, 0)
    if min_lag > 0:
        for segment in _non_active_segments_from(the_log, first_dirty):
            if segment.largest_timestamp > now_ms - min_lag:
                candidates.append(segment.base_offset)
                break
    return OffsetsToClean(first_dirty, max(first_dirty, min(candidates)), force)


def _non_active_segments_from(the_log: Log, offset: int) -> list:
    """The inactive segments holding offsets at or past `offset` (Kafka's nonActiveLogSegmentsFrom)."""
    segments = the_log.segments[:-1]
    return [s for i, s in enumerate(segments)
            if (segments[i + 1].base_offset if i + 1 < len(segments) else the_log.active_segment.base_offset) > offset]


def max_compaction_delay_ms(the_log: Log, first_dirty_offset: int, now_ms: int) -> int:
    """How long past max.compaction.lag.ms the oldest dirty record is (0: not overdue)."""
    firsts = [t for s in _non_active_segments_from(the_log, first_dirty_offset)
              if (t := s.rolling_timestamp) is not None and t > 0]
    if not firsts:
        return 0
    clean_until = now_ms - max(the_log.config.max_compaction_lag_ms, 0)
    earliest = min(firsts)
    return clean_until - earliest if earliest < clean_until else 0


@dataclass
class LogToClean:
    """A compacted log with its clean and cleanable bytes (Kafka's LogToClean); the cleaning stops at
    `first_uncleanable_offset`, the base of the segment holding the first uncleanable offset."""

    tp: TopicPartition
    log: Log
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    needs_compaction_now: bool

    @classmethod
    def of(cls, tp: TopicPartition, the_log: Log, first_dirty: int, uncleanable: int, overdue: bool) -> LogToClean:
        segments = the_log.segments
        ends = [s.base_offset for s in segments[1:]] + [the_log.log_end_offset + 1]
        first_uncleanable_segment = next(
            (s for s, end in zip(segments[:-1], ends, strict=False) if end > uncleanable), segments[-1])
        upper = first_uncleanable_segment.base_offset
        lower = min(first_dirty, upper)
        clean = sum(s.size for s in segments if s.base_offset < first_dirty)
        cleanable = sum(s.size for s, end in zip(segments, ends, strict=True) if end > lower and s.base_offset < upper)
        return cls(tp, the_log, first_dirty, upper, clean, cleanable, overdue)

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0


class LogCleanerManager:
    """The cleaner's bookkeeping: checkpoints per log dir, logs being cleaned, uncleanable logs."""

    def __init__(self, logs: Callable[[], dict[TopicPartition, Log]],
                 dir_of: Callable[[TopicPartition], LogDir | None], log_dirs: list[LogDir],
                 high_watermark_of: Callable[[TopicPartition], int | None]) -> None:
        self._logs = logs
        self._dir_of = dir_of
        self._high_watermark_of = high_watermark_of
        self.checkpoints: dict[Path, dict[TopicPartition, int]] = {}
        for log_dir in log_dirs:
            try:
                self.checkpoints[log_dir.path] = log_dir.read_cleaner_offsets()
            except KafkaStorageError as exc:
                log.warning("%s; every compacted log of %s is cleaned from its start", exc, log_dir.path)
                self.checkpoints[log_dir.path] = {}
        self.in_progress: set[TopicPartition] = set()
        self.uncleanable: dict[TopicPartition, Path] = {}
        self.dirtiest_cleanable_ratio = 0.0
        self.max_compaction_delay_ms = 0

    def last_clean_offset(self, tp: TopicPartition) -> int | None:
        log_dir = self._dir_of(tp)
        return None if log_dir is None else self.checkpoints.get(log_dir.path, {}).get(tp)

    def log_to_clean(self, tp: TopicPartition, the_log: Log, now_ms: int, *, look: bool = True) -> LogToClean | None:
        """The log's dirty section now; None when its high watermark is unknown here. A look by the cleaner
        (`look`) also resets an invalid checkpoint and records the compaction delay for the metrics."""
        high_watermark = self._high_watermark_of(tp)
        if high_watermark is None:
            return None
        offsets = cleanable_offsets(the_log, self.last_clean_offset(tp), now_ms, high_watermark)
        if offsets.force_update_checkpoint and look:
            self.set_checkpoint(tp, offsets.first_dirty_offset)
        delay = max_compaction_delay_ms(the_log, offsets.first_dirty_offset, now_ms)
        if look:
            self.max_compaction_delay_ms = max(self.max_compaction_delay_ms, delay)
        return LogToClean.of(tp, the_log, offsets.first_dirty_offset, offsets.first_uncleanable_offset, delay > 0)

    def grab_filthiest(self, now_ms: int, wanted: Callable[[TopicPartition], bool] = lambda _tp: True
                       ) -> LogToClean | None:
        """The dirtiest compacted log due a cleaning (Kafka's grabFilthiestCompactedLog), marked in progress."""
        self.max_compaction_delay_ms = 0
        dirty = []
        for tp, the_log in list(self._logs().items()):
            if (not the_log.config.compact_enabled or tp in self.in_progress or tp in self.uncleanable
                    or not wanted(tp)):
                continue
            candidate = self.log_to_clean(tp, the_log, now_ms)
            if candidate is not None and candidate.total_bytes > 0:
                dirty.append(candidate)
        self.dirtiest_cleanable_ratio = max((c.cleanable_ratio for c in dirty), default=0.0)
        cleanable = [c for c in dirty if (c.needs_compaction_now and c.cleanable_bytes > 0)
                     or c.cleanable_ratio > c.log.config.min_cleanable_dirty_ratio]
        if not cleanable:
            return None
        filthiest = max(cleanable, key=lambda c: c.cleanable_ratio)
        self.in_progress.add(filthiest.tp)
        return filthiest

    def set_checkpoint(self, tp: TopicPartition, offset: int) -> Path | None:
        """Record where the log's next cleaning starts; returns the log dir whose checkpoint file is to be
        written again."""
        log_dir = self._dir_of(tp)
        if log_dir is None:
            return None
        self.checkpoints.setdefault(log_dir.path, {})[tp] = offset
        return log_dir.path

    def done_cleaning(self, tp: TopicPartition) -> None:
        self.in_progress.discard(tp)

    def mark_uncleanable(self, tp: TopicPartition) -> None:
        log_dir = self._dir_of(tp)
        if log_dir is not None:
            self.uncleanable[tp] = log_dir.path

    def forget(self, tp: TopicPartition) -> None:
        """A log deleted or moved: its checkpoint entry goes with it."""
        for offsets in self.checkpoints.values():
            offsets.pop(tp, None)
        self.uncleanable.pop(tp, None)

    def checkpoint_of(self, log_dir: Path) -> dict[TopicPartition, int]:
        """The checkpoint of `log_dir` as it is to be written: only the logs still there."""
        logs = self._logs()
        offsets = self.checkpoints.get(log_dir, {})
        for tp in [tp for tp in offsets if tp not in logs]:
            del offsets[tp]
        return dict(offsets)

    def dirty_ratio(self, tp: TopicPartition, now_ms: int) -> float | None:
        """The log's cleanable ratio now, None if it is not a compacted log here."""
        the_log = self._logs().get(tp)
        if the_log is None or not the_log.config.compact_enabled:
            return None
        candidate = self.log_to_clean(tp, the_log, now_ms, look=False)
        return None if candidate is None else candidate.cleanable_ratio
