"""The log cleaner: compaction of every compacted log of this broker (Kafka's LogCleaner and its CleanerThreads).

log.cleaner.threads tasks each take the dirtiest log due a cleaning (log_cleaner_manager), clean it in a cleaner
process (storage/log_cleaner.py's clean_segments over a snapshot of its inactive segments, writing `.cleaned`
files; a process, so that the cleaning's CPU work never holds the broker's interpreter lock; a worker thread for a
broker run in-process), then swap the cleaned
segments in on the event loop, where nothing else can touch the log in between. A log truncated (a follower's
truncation), deleted, moved, taken offline or shortened by retention while it was being cleaned is not swapped:
its `.cleaned` files are removed and the next pass starts again, as Kafka's abortAndPauseCleaning has it. Fetches
still reading a replaced segment keep its file descriptors until they are done. Reads and writes are throttled to
log.cleaner.io.max.bytes.per.second, shared evenly by the cleaners. With nothing to clean a task waits
log.cleaner.backoff.ms.

A log whose cleaning fails (a corrupt batch, a codec it cannot write, a disk error) is marked uncleanable with one
log line and skipped until the broker restarts; the broker goes on.
"""
from __future__ import annotations

import logging
import math
import multiprocessing
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import trio

from minikafka.broker.clock.broker_clock import wall_clock_ms
from minikafka.broker.log.log_cleaner_manager import LogCleanerManager, LogToClean, TopicPartition
from minikafka.broker.log.log_manager import LogManager
from minikafka.storage.errors import KafkaStorageError
from minikafka.storage.log_cleaner import CleanedGroup, SegmentSnapshot, clean_segments, discard_cleaned
from minikafka.storage.log_dir import CLEANER_OFFSET_CHECKPOINT, LogDir
from minikafka.storage.segment import LogSegment

log = logging.getLogger("minikafka.log_cleaner")

MB = 1024 * 1024
THROTTLE_CHECK_INTERVAL_S = 0.3  # Kafka's Throttler checks the rate every 300 ms
MIN_READ_BUFFER = 4096
PARENT_CHECK_INTERVAL_S = 0.2  # how soon a cleaner process notices that its broker is gone


@dataclass(frozen=True)
class CleanerConfig:
    """The broker's log.cleaner.* settings (Kafka's CleanerConfig)."""

    num_threads: int = 1
    dedupe_buffer_size: int = 128 * MB
    dedupe_buffer_load_factor: float = 0.9
    io_buffer_size: int = 512 * 1024
    max_io_bytes_per_second: float = 1.7976931348623157e308
    backoff_ms: int = 15000
    enable_cleaner: bool = True

    @classmethod
    def from_broker_config(cls, get: Callable[[str], Any]) -> CleanerConfig:
        return cls(num_threads=int(get("log.cleaner.threads")),
                   dedupe_buffer_size=int(get("log.cleaner.dedupe.buffer.size")),
                   dedupe_buffer_load_factor=float(get("log.cleaner.io.buffer.load.factor")),
                   io_buffer_size=int(get("log.cleaner.io.buffer.size")),
                   max_io_bytes_per_second=float(get("log.cleaner.io.max.bytes.per.second")),
                   backoff_ms=int(get("log.cleaner.backoff.ms")),
                   enable_cleaner=bool(get("log.cleaner.enable")))


class Throttler:
    """Bytes per second (Kafka's Throttler): past the rate, the caller sleeps until the bytes so far fit it."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self._lock = threading.Lock()
        self._period_start = time.monotonic()
        self._observed = 0

    def maybe_throttle(self, observed: int) -> None:
        if math.isinf(self.rate) or self.rate >= 1e300:
            return
        with self._lock:
            self._observed += observed
            elapsed = time.monotonic() - self._period_start
            if elapsed < THROTTLE_CHECK_INTERVAL_S:
                return
            sleep = self._observed / self.rate - elapsed
            self._period_start = time.monotonic()
            self._observed = 0
        if sleep > 0:
            time.sleep(sleep)


class CleanerStopped(Exception):
    """The broker crashed at a fault point of the cleaner (an in-process broker: the process itself is killed
    otherwise); nothing more is cleaned."""


@dataclass
class CleanerStats:
    """What one cleaning did (Kafka's CleanerStats), for the log line and the metrics."""

    bytes_read: int = 0
    bytes_written: int = 0
    messages_read: int = 0
    messages_written: int = 0
    elapsed_s: float = 0.0


@dataclass
class CleanResult:
    """A cleaning swapped in: the log, where its next cleaning starts, and what it did."""

    tp: TopicPartition
    first_dirty_offset: int
    end_offset: int
    stats: CleanerStats

    def as_dict(self) -> dict[str, Any]:
        return {"topic": self.tp[0], "partition": self.tp[1], "first_dirty_offset": self.first_dirty_offset,
                "cleaned_up_to": self.end_offset, "bytes_read": self.stats.bytes_read,
                "bytes_written": self.stats.bytes_written, "messages_read": self.stats.messages_read,
                "messages_retained": self.stats.messages_written, "elapsed_s": self.stats.elapsed_s}


@dataclass
class CleanerThreadState:
    """Per cleaner thread: the last cleaning's stats (Kafka keeps them for its gauges)."""

    last_stats: CleanerStats = field(default_factory=CleanerStats)


class LogCleaner:
    """The broker's cleaner threads and the test API's `clean_logs`."""

    def __init__(self, config: CleanerConfig, log_manager: LogManager,
                 high_watermark_of: Callable[[TopicPartition], int | None],
                 now_ms: Callable[[], int] = wall_clock_ms) -> None:
        self.config = config
        self.log_manager = log_manager
        self.manager = LogCleanerManager(lambda: log_manager.logs, log_manager.dir_of, log_manager.log_dirs,
                                         high_watermark_of)
        self._now_ms = now_ms
        self.threads = [CleanerThreadState() for _ in range(max(config.num_threads, 1))]
        self._stopping = False
        self._retiring = False
        self._restart = trio.Event()
        self._pending_config = config
        self._wake = trio.Event()
        self._finished = trio.Event()
        self._limiter = trio.CapacityLimiter(max(config.num_threads, 1))
        self._executor: Executor | None = None
        self.time_of_last_run_ms = now_ms()
        # Fault injection's crash points of a swap (broker/faults/cleaner_crashes.py), called on the loop.
        self.fault_point: Callable[[TopicPartition, str], None] = lambda _tp, _point: None

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The cleaner threads, until cancelled; none when log.cleaner.enable is false. A reconfiguration retires
        them once their cleanings under way are swapped in, and starts the new config's threads."""
        started = False
        try:
            while True:
                self._restart = trio.Event()
                self._retiring = False
                async with trio.open_nursery() as nursery:
                    if self.config.enable_cleaner:
                        for thread_id in range(len(self.threads)):
                            nursery.start_soon(self._cleaner_thread, thread_id)
                    if not started:
                        task_status.started()
                        started = True
                    await self._restart.wait()
                    self._retiring = True
                    self.wake()
                self._apply(self._pending_config)
        finally:
            self._stopping = True
            if self._executor is not None:
                # A cleaning under way is dropped: its .cleaned files are removed by the next start.
                self._executor.shutdown(wait=False, cancel_futures=True)
                self._executor = None

    def reconfigure(self, config: CleanerConfig) -> None:
        """Dynamic log.cleaner.* configs (Kafka's LogCleaner.reconfigure): the cleaner threads restart with them."""
        if config == self.config and config == self._pending_config:
            return
        log.info("log cleaner reconfigured: %s", config)
        self._pending_config = config
        self._restart.set()

    def _apply(self, config: CleanerConfig) -> None:
        """The threads, their share of the buffers and the pool for `config`; cleanings of clean_logs under way
        keep the pool they run in."""
        self.config = config
        threads = max(config.num_threads, 1)
        if threads != len(self.threads):
            self.threads = [CleanerThreadState() for _ in range(threads)]
            self._limiter = trio.CapacityLimiter(threads)
            if self._executor is not None:
                self._executor.shutdown(wait=False)
                self._executor = None

    def _pool(self) -> Executor:
        """Where cleanings run, started with the first one. A broker in a process of its own (its event loop on
        the main thread) cleans in cleaner processes, so that the cleaning's CPU work never holds its interpreter
        lock and requests are served meanwhile as if no cleaning ran. A broker run on a thread of another program
        (in-process, for tests) cleans on worker threads: a new process would import that program's main module
        again."""
        if self._executor is None:
            if threading.current_thread() is threading.main_thread():
                self._executor = ProcessPoolExecutor(
                    len(self.threads), mp_context=multiprocessing.get_context("spawn"), initializer=exit_with_broker,
                    initargs=(os.getpid(),))
            else:
                self._executor = ThreadPoolExecutor(len(self.threads), thread_name_prefix="log-cleaner")
        return self._executor

    async def _cleaner_thread(self, thread_id: int) -> None:
        while not self._retiring:
            grabbed = None
            try:
                grabbed, _result = await self._clean_filthiest(thread_id, lambda _tp: True)
            except (OSError, KafkaStorageError) as exc:
                log.error("Cleaner %d: %s", thread_id, exc)
            except CleanerStopped:
                await trio.sleep_forever()
            if grabbed is None:
                with trio.move_on_after(self.config.backoff_ms / 1000):
                    await self._wake.wait()

    def wake(self) -> None:
        """A config change may have made a log due a cleaning: look again now."""
        self._wake.set()
        self._wake = trio.Event()

    async def clean_logs(self, topic: str | None = None) -> list[CleanResult]:
        """One pass now over the compacted logs (of `topic`, if given), each cleaned once if it is due a cleaning
        by Kafka's rules, waiting for cleanings of those logs already under way. For tests: no sleeping."""
        done: set[TopicPartition] = set()
        results: list[CleanResult] = []

        def wanted(tp: TopicPartition) -> bool:
            return (topic is None or tp[0] == topic) and tp not in done

        while True:
            while any(wanted(tp) for tp in self.manager.in_progress):
                await self._finished.wait()
            grabbed, result = await self._clean_filthiest(0, wanted)
            if grabbed is None:
                return results
            done.add(grabbed)
            if result is not None:
                results.append(result)

    async def _clean_filthiest(self, thread_id: int, wanted: Callable[[TopicPartition], bool]
                               ) -> tuple[TopicPartition | None, CleanResult | None]:
        """The log taken (None: none was due a cleaning) and its cleaning, if it was swapped in."""
        now = self._now_ms()
        self.time_of_last_run_ms = now
        to_clean = self.manager.grab_filthiest(now, wanted)
        if to_clean is None:
            return None, None
        try:
            return to_clean.tp, await self._clean(thread_id, to_clean)
        finally:
            self.manager.done_cleaning(to_clean.tp)
            self._finished.set()
            self._finished = trio.Event()

    async def _clean(self, thread_id: int, to_clean: LogToClean) -> CleanResult | None:
        """Kafka's Cleaner.clean: the dirty section on a worker thread, the swap here."""
        tp, the_log = to_clean.tp, to_clean.log
        truncations = the_log.truncations
        everything = the_log.segments
        segments = [s for s in everything if s.base_offset < to_clean.first_uncleanable_offset]
        snapshots = [SegmentSnapshot.of(s, the_log.collect_aborted_transactions(s.base_offset, upper.base_offset))
                     for s, upper in zip(segments, everything[1:], strict=False)]
        last_of_producer = {pid: entry.batches[-1].last_offset
                            for pid, entry in the_log.producer_state.last_entries().items() if entry.batches}
        config = the_log.config
        now = self._now_ms()
        started = time.monotonic()

        def changed() -> bool:
            """The log was truncated, deleted, moved, or lost a segment to retention meanwhile."""
            current = the_log.segments
            return (self._stopping or the_log.deleted or the_log.truncations != truncations
                    or self.log_manager.logs.get(tp) is not the_log or any(s not in current for s in segments))

        log.info("Cleaner %d: Beginning cleaning of log %s (cleaning from offset %d up to %d, cleanable ratio "
                 "%.2f)", thread_id, the_log.name, to_clean.first_dirty_offset, to_clean.first_uncleanable_offset,
                 to_clean.cleanable_ratio)
        dedupe = max(self.config.dedupe_buffer_size // len(self.threads), 24)
        try:
            future = self._pool().submit(
                clean_in_cleaner_process, the_log.dir, snapshots, to_clean.first_dirty_offset,
                to_clean.first_uncleanable_offset, last_of_producer, now, config.delete_retention_ms, dedupe,
                config.segment_size, config.segment_index_bytes, self.config.dedupe_buffer_load_factor,
                self.config.max_io_bytes_per_second / len(self.threads),
                # Kafka's split: each cleaner's share of log.cleaner.io.buffer.size, half of it for reading.
                max(self.config.io_buffer_size // len(self.threads) // 2, MIN_READ_BUFFER))
            groups, end_offset = await trio.to_thread.run_sync(future.result, limiter=self._limiter,
                                                               abandon_on_cancel=True)
        except Exception as exc:  # noqa: BLE001 - any failure marks the log uncleanable, never the broker down
            if isinstance(exc, BrokenProcessPool):
                self._executor = None  # a cleaner process died (killed, out of memory): the next cleaning starts anew
            if changed():
                log.info("Cleaner %d: cleaning of log %s dropped: the log changed meanwhile", thread_id,
                         the_log.name)
                return None
            self.manager.mark_uncleanable(tp)
            log.error("Cleaner %d: Unexpected exception thrown when cleaning log %s. Marking its partition (%s) as "
                      "uncleanable: %s", thread_id, the_log.name, the_log.name, exc)
            return None
        if changed():
            await trio.to_thread.run_sync(discard_cleaned, the_log.dir, [g.base_offset for g in groups])
            log.info("Cleaner %d: cleaning of log %s dropped: the log changed meanwhile", thread_id, the_log.name)
            return None
        swapped = self._swap(tp, groups, {s.base_offset: s for s in segments})
        if swapped is None:
            return None
        stats, cleaned_segments = swapped
        # Their offset and time indexes are built from the cleaned log here rather than by the first read.
        await trio.to_thread.run_sync(lambda: [s.offset_index for s in cleaned_segments], limiter=self._limiter)
        stats.elapsed_s = time.monotonic() - started
        self.threads[thread_id % len(self.threads)].last_stats = stats
        log_dir = self.manager.set_checkpoint(tp, end_offset)
        if log_dir is not None:
            await self._write_checkpoint(log_dir)
        self._log_cleaning(thread_id, the_log.name, to_clean.first_dirty_offset, end_offset, stats)
        return CleanResult(tp, to_clean.first_dirty_offset, end_offset, stats)

    def _swap(self, tp: TopicPartition, groups: list[CleanedGroup], by_base: dict[int, LogSegment]
              ) -> tuple[CleanerStats, list[LogSegment]] | None:
        """Swap the cleaned groups in, on the loop: nothing else changes the log meanwhile. A group whose segments
        retention deleted meanwhile is dropped with the rest, and the checkpoint stays."""
        the_log = self.log_manager.logs[tp]
        stats = CleanerStats()
        cleaned = []
        for i, group in enumerate(groups):
            self.fault_point(tp, "before-swap")
            try:
                segment = the_log.replace_segments(group.base_offset, [by_base[b] for b in group.replaced],
                                                   self._now_ms(),
                                         partial(self.fault_point, tp, "mid-swap"))
            except ValueError:
                discard_cleaned(the_log.dir, [g.base_offset for g in groups[i:]])
                return None
            cleaned.append(segment)
            self.fault_point(tp, "after-swap")
            stats.bytes_read += group.bytes_read
            stats.bytes_written += group.bytes_written
            stats.messages_read += group.messages_read
            stats.messages_written += group.messages_retained
        return stats, cleaned

    async def _write_checkpoint(self, log_dir: Path) -> None:
        offsets = self.manager.checkpoint_of(log_dir)
        target = next((d for d in self.log_manager.log_dirs if d.path == log_dir), None)
        if target is None or log_dir in self.log_manager.offline_dirs:
            return
        try:
            await trio.to_thread.run_sync(_write_cleaner_offsets, target, offsets)
        except (OSError, KafkaStorageError) as exc:
            log.error("Failed to write %s of %s, the previous one stays: %s", CLEANER_OFFSET_CHECKPOINT, log_dir,
                      exc)

    @staticmethod
    def _log_cleaning(thread_id: int, name: str, first_dirty: int, end_offset: int, stats: CleanerStats) -> None:
        elapsed = max(stats.elapsed_s, 1e-9)
        reduction = 100.0 * (1.0 - stats.bytes_written / stats.bytes_read) if stats.bytes_read else 0.0
        log.info("Cleaner %d: Log %s cleaned from offset %d up to %d: %.1f MB of log processed in %.3f seconds "
                 "(%.1f MB/sec), %.1f MB written, %.1f%% size reduction, %d messages read, %d retained",
                 thread_id, name, first_dirty, end_offset, stats.bytes_read / MB, elapsed,
                 stats.bytes_read / MB / elapsed, stats.bytes_written / MB, reduction, stats.messages_read,
                 stats.messages_written)

    # ---- figures for metrics and state -----------------------------------------------------------------------------

    @property
    def max_clean_time_secs(self) -> float:
        return max((t.last_stats.elapsed_s for t in self.threads), default=0.0)

    @property
    def cleaner_recopy_percent(self) -> float:
        rates = [t.last_stats.bytes_written / max(t.last_stats.bytes_read, 1) for t in self.threads]
        return 100.0 * sum(rates) / len(rates)

    @property
    def time_since_last_run_ms(self) -> int:
        return max(self._now_ms() - self.time_of_last_run_ms, 0)

    def uncleanable_bytes(self, partitions: list[TopicPartition]) -> int:
        """The cleanable bytes of these (uncleanable) logs now."""
        total = 0
        now = self._now_ms()
        for tp in partitions:
            the_log = self.log_manager.logs.get(tp)
            to_clean = None if the_log is None else self.manager.log_to_clean(tp, the_log, now, look=False)
            total += 0 if to_clean is None else to_clean.cleanable_bytes
        return total

    def uncleanable_by_dir(self) -> dict[Path, list[TopicPartition]]:
        by_dir: dict[Path, list[TopicPartition]] = {d.path: [] for d in self.log_manager.log_dirs}
        for tp, path in self.manager.uncleanable.items():
            by_dir.setdefault(path, []).append(tp)
        return by_dir


def exit_with_broker(broker_pid: int) -> None:
    """A cleaner process ends when its broker's does, even killed (kill -9): nothing else would tell it."""

    def watch() -> None:
        while os.getppid() == broker_pid:
            time.sleep(PARENT_CHECK_INTERVAL_S)
        os._exit(0)

    threading.Thread(target=watch, name="exit-with-broker", daemon=True).start()


def clean_in_cleaner_process(directory: Path, snapshots: list[SegmentSnapshot], first_dirty_offset: int,
                             first_uncleanable_offset: int, last_batch_offset_of_producer: dict[int, int],
                             now_ms: int, delete_retention_ms: int, dedupe_buffer_size: int, max_segment_bytes: int,
                             max_index_bytes: int, load_factor: float, max_io_bytes_per_second: float,
                             read_buffer_size: int) -> tuple[list[CleanedGroup], int]:
    """One cleaning, in a cleaner process: reads the segments by their files and writes `.cleaned` files, at most
    `max_io_bytes_per_second` (this process's share of log.cleaner.io.max.bytes.per.second)."""
    throttler = Throttler(max_io_bytes_per_second)
    return clean_segments(directory, snapshots, first_dirty_offset, first_uncleanable_offset,
                          last_batch_offset_of_producer, now_ms, delete_retention_ms, dedupe_buffer_size,
                          max_segment_bytes, max_index_bytes, throttler.maybe_throttle, load_factor,
                          read_buffer_size)


def _write_cleaner_offsets(log_dir: LogDir, offsets: dict[TopicPartition, int]) -> None:
    log_dir.write_cleaner_offsets(offsets)
