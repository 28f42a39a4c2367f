"""Which log the cleaner takes and how far (Kafka's LogCleanerManager): the first dirty and first uncleanable
offsets, the cleanable ratio, KIP-354's max compaction lag, and the dirtiest-first choice."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from minikafka.broker.log.log_cleaner_manager import (
    LogCleanerManager,
    LogToClean,
    cleanable_offsets,
    max_compaction_delay_ms,
)
from minikafka.storage.log import Log
from minikafka.storage.log_config import LogConfig
from minikafka.storage.log_dir import LogDir

from .test_log_cleaner_core import NOW, batch

COMPACT = LogConfig(cleanup_policy="compact")


def three_segment_log(directory: Path, config: LogConfig = COMPACT) -> Log:
    """Segments at 0 and 2 (two records each, timestamps NOW and NOW + 1) and an active one at 4 (one record)."""
    log = Log.open(directory, directory.name.rsplit("-", 1)[0], 0, config, now_ms=NOW)
    for records in ([(b"a", b"1"), (b"b", b"1")], [(b"a", b"2"), (b"c", b"1")]):
        log.append_as_leader(bytearray(batch(0, records)), leader_epoch=0, now_ms=NOW)
        log.roll(NOW)
    log.append_as_leader(bytearray(batch(0, [(b"d", b"1")])), leader_epoch=0, now_ms=NOW)
    return log


@pytest.fixture
def log(tmp_path: Path):
    opened = three_segment_log(tmp_path / "topic-0")
    yield opened
    opened.close()


def test_never_past_the_active_segment_nor_the_high_watermark(log: Log) -> None:
    assert cleanable_offsets(log, None, NOW, high_watermark=5).first_uncleanable_offset == 4
    assert cleanable_offsets(log, None, NOW, high_watermark=3).first_uncleanable_offset == 3
    offsets = cleanable_offsets(log, 2, NOW, high_watermark=5)
    assert (offsets.first_dirty_offset, offsets.force_update_checkpoint) == (2, False)


def test_an_invalid_checkpoint_is_reset_to_the_log_start(log: Log) -> None:
    for bad in (6, -1):
        offsets = cleanable_offsets(log, bad, NOW, high_watermark=5)
        assert (offsets.first_dirty_offset, offsets.force_update_checkpoint) == (0, True)


def test_segments_younger_than_min_compaction_lag_stay_dirty(log: Log) -> None:
    log.update_config(dataclasses.replace(COMPACT, min_compaction_lag_ms=1000))
    assert cleanable_offsets(log, None, NOW + 500, high_watermark=5).first_uncleanable_offset == 0
    assert cleanable_offsets(log, None, NOW + 1001, high_watermark=5).first_uncleanable_offset == 4


def test_a_log_past_max_compaction_lag_is_overdue(log: Log) -> None:
    log.update_config(dataclasses.replace(COMPACT, max_compaction_lag_ms=1000))
    assert max_compaction_delay_ms(log, 0, NOW + 1001) == 0  # its first batches' timestamp is NOW + 1
    assert max_compaction_delay_ms(log, 0, NOW + 5000) == 3999
    assert max_compaction_delay_ms(log, 4, NOW + 5000) == 0  # nothing dirty but the active segment


def test_cleanable_ratio_counts_whole_segments(log: Log) -> None:
    sizes = [s.size for s in log.segments]
    never_cleaned = LogToClean.of(("topic", 0), log, 0, 4, False)
    assert (never_cleaned.clean_bytes, never_cleaned.cleanable_bytes) == (0, sizes[0] + sizes[1])
    assert never_cleaned.cleanable_ratio == 1.0
    half = LogToClean.of(("topic", 0), log, 2, 4, False)
    assert (half.clean_bytes, half.cleanable_bytes) == (sizes[0], sizes[1])
    # The uncleanable offset inside a segment stops the cleaning at that segment's base.
    assert LogToClean.of(("topic", 0), log, 0, 3, False).first_uncleanable_offset == 2


def test_the_dirtiest_compacted_log_goes_first(tmp_path: Path) -> None:
    logs = {("dirty", 0): three_segment_log(tmp_path / "dirty-0"),
            ("half", 0): three_segment_log(tmp_path / "half-0",
                                           dataclasses.replace(COMPACT, min_cleanable_dirty_ratio=0.1)),
            ("plain", 0): three_segment_log(tmp_path / "plain-0", LogConfig())}
    log_dir = LogDir(tmp_path)
    try:
        manager = LogCleanerManager(lambda: logs, lambda _tp: log_dir, [log_dir], lambda _tp: 5)
        manager.set_checkpoint(("half", 0), 2)
        first = manager.grab_filthiest(NOW)
        assert first is not None and first.tp == ("dirty", 0)
        assert manager.dirtiest_cleanable_ratio == 1.0
        second = manager.grab_filthiest(NOW)  # the dirty one is in progress; this one's ratio is about a half
        assert second is not None and second.tp == ("half", 0) and 0.1 < second.cleanable_ratio < 1
        assert manager.grab_filthiest(NOW) is None  # a log without cleanup.policy=compact is never taken
        manager.done_cleaning(("dirty", 0))
        manager.mark_uncleanable(("dirty", 0))
        manager.done_cleaning(("half", 0))
        logs[("half", 0)].update_config(dataclasses.replace(COMPACT, min_cleanable_dirty_ratio=0.9))
        assert manager.grab_filthiest(NOW) is None  # uncleanable, and below its min.cleanable.dirty.ratio
        assert manager.checkpoint_of(tmp_path) == {("half", 0): 2}
    finally:
        for opened in logs.values():
            opened.close()
