"""The log cleaner on a live log: a cleaning is swapped in only if the log did not change while it ran, so a
follower's truncation, retention or the partition's deletion meanwhile leaves the log as they made it, with no
cleaned files behind and no checkpoint moved."""
from __future__ import annotations

import uuid
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

from minikafka.broker.faults.disk_quota import DiskQuota
from minikafka.broker.log.log_cleaner import CleanerConfig, LogCleaner
from minikafka.broker.log.log_manager import LogManager
from minikafka.storage.log import Log
from minikafka.storage.log_config import LogConfig

from .test_log_cleaner_core import NOW, batch

TP = ("table", 0)
COMPACT = {"cleanup.policy": "compact"}


class InlinePool:
    """Runs a cleaning at once on the calling thread (the event loop), then `meanwhile`: what the broker did while
    the cleaner process worked."""

    def __init__(self, meanwhile: Callable[[], None]) -> None:
        self.meanwhile = meanwhile

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        future: Future = Future()
        future.set_result(fn(*args))
        self.meanwhile()
        return future


def setup(tmp_path: Path) -> tuple[LogManager, Log, LogCleaner]:
    manager = LogManager([tmp_path], 1, "cleaner-tests", LogConfig(), DiskQuota([tmp_path]))
    log = manager.get_or_create_log(*TP, uuid.uuid4(), COMPACT)
    for records in ([(b"a", b"1"), (b"b", b"1")], [(b"a", b"2"), (b"c", b"1")], [(b"a", b"3")]):
        log.append_as_leader(bytearray(batch(0, records)), leader_epoch=0, now_ms=NOW)
        log.roll(NOW)
    log.append_as_leader(bytearray(batch(0, [(b"d", b"1")])), leader_epoch=0, now_ms=NOW)
    cleaner = LogCleaner(CleanerConfig(enable_cleaner=False), manager, lambda tp: log.log_end_offset)
    return manager, log, cleaner


def leftovers(log: Log) -> list[str]:
    return [p.name for p in log.dir.iterdir() if p.name.endswith((".cleaned", ".swap"))]


async def test_an_undisturbed_cleaning_is_swapped_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _manager, log, cleaner = setup(tmp_path)
    monkeypatch.setattr(cleaner, "_pool", lambda: InlinePool(lambda: None))
    [result] = await cleaner.clean_logs()
    assert (result.first_dirty_offset, result.end_offset) == (0, 5)
    assert [s.base_offset for s in log.segments] == [0, 5]
    assert cleaner.manager.last_clean_offset(TP) == 5
    assert not leftovers(log)


@pytest.mark.parametrize("change", ["truncation", "retention", "deletion"])
async def test_a_cleaning_of_a_log_changed_meanwhile_is_dropped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               change: str) -> None:
    manager, log, cleaner = setup(tmp_path)
    before = [(s.base_offset, s.size) for s in log.segments]

    def meanwhile() -> None:
        if change == "truncation":
            log.truncate_to(4, now_ms=NOW)
        elif change == "retention":
            log.maybe_increment_log_start_offset(2)
        else:
            manager.delete_log(*TP)

    monkeypatch.setattr(cleaner, "_pool", lambda: InlinePool(meanwhile))
    assert await cleaner.clean_logs() == []
    assert cleaner.manager.last_clean_offset(TP) is None
    assert not cleaner.manager.uncleanable, "a log changed meanwhile is not uncleanable"
    if change == "deletion":
        assert not log.dir.exists()
        return
    assert not leftovers(log)
    expected = [(0, before[0][1]), (2, before[1][1]), (4, 0)] if change == "truncation" \
        else before[1:]
    assert [(s.base_offset, s.size) for s in log.segments] == expected
