"""The log manager: every partition log in the broker's log dirs, their checkpoints, flush and retention.

Recovery happens here at start-up: each log is opened from its recovery point (from
recovery-point-offset-checkpoint), so only what was written after the last flush is scanned. The controller's
metadata log (`__cluster_metadata-0`, in the same directory on a combined node) is the controller's, not a
partition of this broker's.

Damaged files are handled as Kafka's LogManager handles them. An unreadable recovery-point-offset-checkpoint or
log-start-offset-checkpoint is logged and ignored: every log is then recovered from its first segment, or starts
at its first segment's base offset. Any other unreadable file in a log dir (replication-offset-checkpoint, a
partition's leader-epoch-checkpoint or partition.metadata, meta.properties) makes Kafka take the directory
offline, so the start is refused with the file and what is wrong with it. A checkpoint that cannot be written (a
full disk) is logged and the previous one stays: the next start recovers a little more.

With several log dirs (JBOD), a replica moved to another dir by AlterReplicaLogDirs first has a future log there,
`<topic>-<partition>.<unique id>-future`, which the ReplicaAlterLogDirsManager fills; once it has caught up it
replaces the current log (which is renamed `...-delete` and removed). A future log found at start-up is loaded and
its move goes on. A dir whose storage fails (LogDirFailureChannel) is taken offline: its logs are dropped from
here, and the dir answers KAFKA_STORAGE_ERROR until the broker restarts.
"""
from __future__ import annotations

import errno
import logging
import os
import shutil
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import trio

from minikafka.broker.clock.broker_clock import wall_clock_ms
from minikafka.config import ConfigError
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.protocol.internal_topics import METADATA_TOPIC
from minikafka.storage.checkpoint import fsync_dir, offset_checkpoint_bytes
from minikafka.storage.errors import KafkaStorageError
from minikafka.storage.log import Log
from minikafka.storage.log_config import LogConfig
from minikafka.storage.log_dir import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_CHECKPOINT,
    LogDir,
    OffsetMap,
    parse_partition_dir_name,
    partition_dir_name,
)
from minikafka.storage.producer_state import DEFAULT_PRODUCER_ID_EXPIRATION_MS

log = logging.getLogger("minikafka.log_manager")


class DiskSpace(Protocol):
    """A cap on the bytes the log dirs hold, beyond which writes fail as on a full disk: the log manager's
    checkpoints and the replica manager's appends ask it first. Fault injection's disk quota is one."""

    @property
    def quota_bytes(self) -> int | None:
        """The cap, or None when there is none."""
        ...

    def used_bytes(self) -> int:
        """Bytes held under the log dirs now."""
        ...

    def refusal(self, tp: tuple[str, int], size: int) -> KafkaStorageError | None:
        """The error for an append of `size` bytes to `tp` the cap cannot take, or None if it fits."""
        ...

TopicPartition = tuple[str, int]
FUTURE_DIR_SUFFIX = "-future"
DELETE_DIR_SUFFIX = "-delete"
STRAY_DIR_SUFFIX = "-stray"
LOG_CREATION_BATCH = 50  # new logs per worker-thread call: about a hundred ms of mkdir, file creation and fsync
LOG_CREATION_THREADS = 2  # batches created at once: file creation and fsync mostly wait on the disk


@dataclass(frozen=True)
class NewLog:
    """A partition log to create. `leader_epoch`, when this broker is to lead the partition, is the epoch its
    leadership starts: written with the log, so becoming leader writes no file on the event loop."""

    topic: str
    index: int
    topic_id: uuid.UUID
    overrides: dict[str, str]
    leader_epoch: int | None


def now_ms() -> int:
    """The node's wall clock (see minikafka.broker.clock)."""
    return wall_clock_ms()


def future_dir_name(topic: str, index: int) -> str:
    """Kafka's name for a future log's dir: unique, so a move started again never meets an older copy."""
    return f"{partition_dir_name(topic, index)}.{uuid.uuid4().hex}{FUTURE_DIR_SUFFIX}"


def parse_future_dir_name(name: str) -> TopicPartition | None:
    if not name.endswith(FUTURE_DIR_SUFFIX):
        return None
    base, dot, unique = name.removesuffix(FUTURE_DIR_SUFFIX).rpartition(".")
    if not dot or len(unique) != 32:
        return None
    return parse_partition_dir_name(base)


class LogManager:
    def __init__(self, dirs: list[Path], node_id: int, cluster_id: str | None, defaults: LogConfig,
                 disk_quota: DiskSpace, producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS) -> None:
        self.defaults = defaults
        # producer.id.expiration.ms: the producers a log's reloaded producer state leaves out.
        self.producer_id_expiration_ms = producer_id_expiration_ms
        # Every append asks it first: the broker's disk quota, which fault injection sets to act as a full disk.
        self.disk_quota = disk_quota
        self.log_dirs = [LogDir(Path(d)) for d in dirs]
        self.cluster_id = ""
        directory_ids: dict[str, LogDir] = {}
        try:
            for log_dir in self.log_dirs:
                self.cluster_id, directory_id = log_dir.load_or_create_meta(
                    node_id, cluster_id or self.cluster_id or None)
                other = directory_ids.setdefault(directory_id, log_dir)
                if other is not log_dir:
                    raise ValueError(f"Duplicate directory ID {directory_id} found. It was the ID of {other.path}, "
                                     f"but also of {log_dir.path}")
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        self.logs: dict[TopicPartition, Log] = {}
        self._dir_of: dict[TopicPartition, LogDir] = {}
        # Replicas being moved to another log dir: the future log, and the dir it is in.
        self.future_logs: dict[TopicPartition, Log] = {}
        self._future_dir_of: dict[TopicPartition, LogDir] = {}
        # Where AlterReplicaLogDirs asked a partition not hosted yet to be created (Kafka's preferredLogDirs).
        self._preferred_dirs: dict[TopicPartition, LogDir] = {}
        self.offline_dirs: set[Path] = set()
        self._high_watermarks: dict[TopicPartition, int] = {}
        self._last_flush_ms: dict[TopicPartition, int] = {}
        self._unwritten: set[Path] = set()  # checkpoint files whose last write failed: logged once until it works
        # Told of each log deleted, put aside or moved here (the log cleaner drops its checkpoint entry).
        self.removal_listeners: list[Callable[[TopicPartition], None]] = []

    def load_logs(self, topic_configs: dict[str, dict[str, str]]) -> None:
        """Open (and recover) every partition directory found in the log dirs."""
        started = time.monotonic()
        for log_dir in self.log_dirs:
            recovery = _read_or_reset(log_dir.read_recovery_points, "resetting the recovery checkpoint to 0")
            starts = _read_or_reset(log_dir.read_log_start_offsets,
                                    "resetting to the base offset of the first segment")
            self._high_watermarks.update(log_dir.read_high_watermarks())
            for topic, index, path in log_dir.partition_dirs():
                if topic == METADATA_TOPIC:
                    continue
                tp = (topic, index)
                config = LogConfig.from_props(topic_configs.get(topic, {}), self.defaults)
                try:
                    self.logs[tp] = Log.open(path, topic, index, config, recovery_point=recovery.get(tp, 0),
                                             log_start_offset=starts.get(tp, 0), now_ms=now_ms(),
                                             producer_id_expiration_ms=self.producer_id_expiration_ms)
                except OSError as exc:
                    raise KafkaStorageError(f"Error while loading log dir {path}: {exc}") from exc
                self._dir_of[tp] = log_dir
            self._load_special_dirs(log_dir, topic_configs)
        if self.logs:
            log.info("loaded %d partition logs in %.0f ms", len(self.logs), 1000 * (time.monotonic() - started))

    def _load_special_dirs(self, log_dir: LogDir, topic_configs: dict[str, dict[str, str]]) -> None:
        """Future logs (a move the last run did not finish) are opened, to be moved on; `-delete` dirs (a move
        that finished but whose old log was not removed yet) are removed, as Kafka's LogManager does."""
        for entry in sorted(log_dir.path.iterdir()):
            if not entry.is_dir():
                continue
            if entry.name.endswith(DELETE_DIR_SUFFIX):
                shutil.rmtree(entry, ignore_errors=True)
                continue
            tp = parse_future_dir_name(entry.name)
            if tp is None:
                continue
            if tp in self.future_logs:
                log.warning("%s: a second future log of %s-%d; removed", entry, *tp)
                shutil.rmtree(entry, ignore_errors=True)
                continue
            config = LogConfig.from_props(topic_configs.get(tp[0], {}), self.defaults)
            try:
                self.future_logs[tp] = Log.open(entry, tp[0], tp[1], config, now_ms=now_ms(),
                                                producer_id_expiration_ms=self.producer_id_expiration_ms)
            except OSError as exc:
                raise KafkaStorageError(f"Error while loading log dir {entry}: {exc}") from exc
            self._future_dir_of[tp] = log_dir

    def high_watermark_of(self, topic: str, index: int) -> int:
        return self._high_watermarks.get((topic, index), 0)

    def get_or_create_log(self, topic: str, index: int, topic_id: uuid.UUID, overrides: dict[str, str]) -> Log:
        tp = (topic, index)
        existing = self.logs.get(tp)
        if existing is not None:
            return existing
        log_dir = self._placement(tp, None)
        config = LogConfig.from_props(overrides, self.defaults)
        created = Log.open(log_dir.partition_dir(topic, index), topic, index, config, topic_id=topic_id.bytes,
                           now_ms=now_ms(), producer_id_expiration_ms=self.producer_id_expiration_ms)
        self.logs[tp] = created
        self._dir_of[tp] = log_dir
        return created

    async def create_logs(self, new: list[NewLog]) -> None:
        """Create the logs `new` names (those not here yet) on worker threads, LOG_CREATION_BATCH at a time, each
        batch registered on the event loop as it completes: thousands of new partitions, each some mkdir, file
        creation and fsync, never hold the loop, and a cancellation (a shutdown) stops after the batch in hand.
        A log that cannot be created here is left to get_or_create_log, which meets the error again and reports
        it."""
        new = [spec for spec in new if (spec.topic, spec.index) not in self.logs]
        if not new or not self.online_dirs:
            return
        placed = [(spec, self._placement((spec.topic, spec.index), log_dir))
                  for spec, log_dir in zip(new, self._next_log_dirs(len(new)), strict=True)]
        threads = trio.CapacityLimiter(LOG_CREATION_THREADS)
        async with trio.open_nursery() as nursery:
            for start in range(0, len(placed), LOG_CREATION_BATCH):
                nursery.start_soon(self._create_batch, placed[start:start + LOG_CREATION_BATCH], threads)

    async def _create_batch(self, placed: list[tuple[NewLog, LogDir]], threads: trio.CapacityLimiter) -> None:
        created = await trio.to_thread.run_sync(self._open_new_logs, placed, now_ms(), limiter=threads)
        for spec, log_dir, the_log in created:
            self.logs[(spec.topic, spec.index)] = the_log
            self._dir_of[(spec.topic, spec.index)] = log_dir

    def _open_new_logs(self, placed: list[tuple[NewLog, LogDir]], now: int) -> list[tuple[NewLog, LogDir, Log]]:
        """Runs on a worker thread: it only creates files and new Log objects, which nothing else holds yet. `now`
        is the node's wall clock, read on the event loop (its clock is the loop's)."""
        created = []
        for spec, log_dir in placed:
            try:
                config = LogConfig.from_props(spec.overrides, self.defaults)
                the_log = Log.open(log_dir.partition_dir(spec.topic, spec.index), spec.topic, spec.index, config,
                                   topic_id=spec.topic_id.bytes, now_ms=now,
                                   producer_id_expiration_ms=self.producer_id_expiration_ms)
            except (KafkaError, OSError, ValueError) as exc:
                log.debug("%s-%d not created ahead: %s", spec.topic, spec.index, exc)
                continue
            try:
                if spec.leader_epoch is not None:
                    the_log.leader_epoch_cache.assign(spec.leader_epoch, the_log.log_end_offset)
                the_log.flush()  # the new directory entries, here rather than all at once at shutdown
            except (KafkaError, OSError) as exc:  # becoming leader, or the next flush, writes it again and reports
                log.debug("%s-%d: not made durable ahead: %s", spec.topic, spec.index, exc)
            created.append((spec, log_dir, the_log))
        return created

    def _placement(self, tp: TopicPartition, chosen: LogDir | None) -> LogDir:
        """The dir AlterReplicaLogDirs asked for, else `chosen`, else the least loaded one."""
        preferred = self._preferred_dirs.pop(tp, None)
        if preferred is not None:
            return preferred
        return chosen if chosen is not None else self._next_log_dirs(1)[0]

    def _next_log_dirs(self, count: int) -> list[LogDir]:
        """The log dirs for `count` new logs, each to the dir with the fewest logs then (Kafka's nextLogDirs)."""
        online = self.online_dirs
        if not online:
            raise KafkaStorageError("No log directory is online to create a log in")
        held = {id(d): 0 for d in self.log_dirs}
        for log_dir in self._dir_of.values():
            held[id(log_dir)] += 1
        chosen = []
        for _ in range(count):
            log_dir = min(online, key=lambda d: held[id(d)])
            held[id(log_dir)] += 1
            chosen.append(log_dir)
        return chosen

    def delete_log(self, topic: str, index: int) -> None:
        tp = (topic, index)
        removed = self.logs.pop(tp, None)
        self._dir_of.pop(tp, None)
        self._high_watermarks.pop(tp, None)
        if removed is not None:
            removed.delete()
            self._removed(tp)
        self.remove_future_log(tp)

    def _removed(self, tp: TopicPartition) -> None:
        for listener in self.removal_listeners:
            listener(tp)

    def mark_stray(self, topic: str, index: int) -> Path:
        """Put aside a log the cluster metadata has no replica of here (Kafka's stray log): renamed
        `<topic>-<partition>.<unique id>-stray` and kept, never loaded again, for an operator to look at."""
        tp = (topic, index)
        stray = self.logs.pop(tp)
        log_dir = self._dir_of.pop(tp)
        self._high_watermarks.pop(tp, None)
        stray.close()
        self._removed(tp)
        path = log_dir.path / f"{partition_dir_name(topic, index)}.{uuid.uuid4().hex}{STRAY_DIR_SUFFIX}"
        os.rename(stray.dir, path)
        fsync_dir(log_dir.path)
        return path

    # ---- log dirs (JBOD) -------------------------------------------------------------------------------------------

    @property
    def online_dirs(self) -> list[LogDir]:
        return [d for d in self.log_dirs if d.path not in self.offline_dirs]

    def log_dir_named(self, path: str) -> LogDir:
        """The configured log dir `path` names (as an absolute path, as Kafka compares them); KafkaError
        LOG_DIR_NOT_FOUND when there is none, KAFKA_STORAGE_ERROR when it is offline."""
        wanted = Path(os.path.abspath(path))
        for log_dir in self.log_dirs:
            if log_dir.path.absolute() == wanted:
                if log_dir.path in self.offline_dirs:
                    raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"Log directory {path} is offline")
                return log_dir
        raise KafkaError(ErrorCode.LOG_DIR_NOT_FOUND, f"Failed to find log dir {path}")

    def dir_of(self, tp: TopicPartition) -> LogDir | None:
        return self._dir_of.get(tp)

    def future_dir_of(self, tp: TopicPartition) -> LogDir | None:
        return self._future_dir_of.get(tp)

    def logs_in(self, log_dir: LogDir) -> list[tuple[TopicPartition, Log, bool]]:
        """(partition, log, is future) of every log in `log_dir`."""
        found = [(tp, lg, False) for tp, lg in self.logs.items() if self._dir_of.get(tp) is log_dir]
        found += [(tp, lg, True) for tp, lg in self.future_logs.items() if self._future_dir_of.get(tp) is log_dir]
        return found

    def prefer_log_dir(self, tp: TopicPartition, log_dir: LogDir) -> None:
        """Where the replica of `tp` is to be created when it comes here (Kafka's maybeUpdatePreferredLogDir)."""
        if tp not in self.logs:
            self._preferred_dirs[tp] = log_dir

    def maybe_create_future_log(self, tp: TopicPartition, log_dir: LogDir, topic_id: uuid.UUID | None) -> bool:
        """Start moving the replica of `tp` to `log_dir`; True when a new future log was created there. A future
        log in another dir is dropped first; asking for the dir the replica is in drops it too (the move is
        undone). KAFKA_STORAGE_ERROR while any log dir is offline, as in Kafka (a future log could otherwise
        end up beside a copy in a dir that comes back)."""
        current_dir = self._dir_of.get(tp)
        if current_dir is None:
            raise KafkaError(ErrorCode.REPLICA_NOT_AVAILABLE, f"Replica of {tp[0]}-{tp[1]} is not hosted here")
        existing = self._future_dir_of.get(tp)
        if existing is log_dir:
            return False
        if existing is not None:
            self.remove_future_log(tp)
        if current_dir is log_dir:
            return False
        if self.offline_dirs:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, "Cannot create a future log while a log dir is offline")
        current = self.logs[tp]
        path = log_dir.path / future_dir_name(*tp)
        self.future_logs[tp] = Log.open(path, tp[0], tp[1], current.config, now_ms=now_ms(),
                                        topic_id=topic_id.bytes if topic_id is not None else current.topic_id,
                                        producer_id_expiration_ms=self.producer_id_expiration_ms)
        self._future_dir_of[tp] = log_dir
        log.info("%s-%d: moving from %s to %s (future log %s)", *tp, current_dir.path, log_dir.path, path.name)
        return True

    def remove_future_log(self, tp: TopicPartition) -> None:
        removed = self.future_logs.pop(tp, None)
        self._future_dir_of.pop(tp, None)
        if removed is not None:
            removed.delete()
            log.info("%s-%d: future log %s removed", *tp, removed.dir)

    def replace_current_with_future_log(self, tp: TopicPartition) -> tuple[Log, Path]:
        """The move's end (Kafka's replaceCurrentWithFutureLog): the current log's dir is renamed `-delete`, the
        future log's takes its name, and the reopened future log becomes the current one. The caller has checked,
        with no await since, that the future log holds all of the current one. Returns the new current log and the
        `-delete` dir, which the caller removes off the event loop (a start-up removes any left behind); a fetch
        still reading the old files on a worker thread keeps its descriptors until it is done."""
        future = self.future_logs.pop(tp)
        target_dir = self._future_dir_of.pop(tp)
        old = self.logs[tp]
        old_dir = self._dir_of[tp]
        log_start = old.log_start_offset
        future.close()
        current_path = target_dir.partition_dir(*tp)
        deleted_path = old_dir.path / (future.dir.name.removesuffix(FUTURE_DIR_SUFFIX) + DELETE_DIR_SUFFIX)
        os.rename(old.dir, deleted_path)
        os.rename(future.dir, current_path)
        fsync_dir(old_dir.path)
        fsync_dir(target_dir.path)
        moved = Log.open(current_path, tp[0], tp[1], future.config, recovery_point=future.log_end_offset,
                         log_start_offset=log_start, now_ms=now_ms(),
                         producer_id_expiration_ms=self.producer_id_expiration_ms)
        for entry in old.leader_epoch_cache.epochs:  # epochs begun with no batch yet (a new leadership)
            latest = moved.leader_epoch_cache.latest_entry
            if latest is None or (entry.epoch > latest.epoch and entry.start_offset >= latest.start_offset):
                moved.leader_epoch_cache.assign(entry.epoch, entry.start_offset)
        self._removed(tp)
        self.logs[tp] = moved
        self._dir_of[tp] = target_dir
        self._last_flush_ms.pop(tp, None)
        log.info("%s-%d: moved from %s to %s at offset %d", *tp, old_dir.path, target_dir.path,
                 moved.log_end_offset)
        return moved, deleted_path

    def take_offline(self, path: Path) -> list[TopicPartition]:
        """A failed log dir (Kafka's handleLogDirFailure): its logs are dropped, unflushed and unchecked, and
        the partitions whose current log was there are returned. Files stay as they are, for a restart."""
        log_dir = next((d for d in self.log_dirs if d.path == path), None)
        if log_dir is None or path in self.offline_dirs:
            return []
        self.offline_dirs.add(path)
        lost = [tp for tp, d in self._dir_of.items() if d is log_dir]
        for tp in lost:
            self._abandon(self.logs.pop(tp))
            del self._dir_of[tp]
            self._removed(tp)
        for tp in [tp for tp, d in self._future_dir_of.items() if d is log_dir]:
            self._abandon(self.future_logs.pop(tp))
            del self._future_dir_of[tp]
        for tp in [tp for tp, d in self._preferred_dirs.items() if d is log_dir]:
            del self._preferred_dirs[tp]
        log.error("log dir %s is offline: %d partitions lost here", path, len(lost))
        return lost

    @staticmethod
    def _abandon(the_log: Log) -> None:
        try:
            the_log.abandon()
        except OSError as exc:
            log.debug("%s: releasing the files failed: %s", the_log.name, exc)

    def update_topic_config(self, topic: str, overrides: dict[str, str]) -> None:
        config = LogConfig.from_props(overrides, self.defaults)
        for (name, _index), the_log in [*self.logs.items(), *self.future_logs.items()]:
            if name == topic:
                the_log.update_config(config)

    def checkpoint(self, high_watermarks: dict[TopicPartition, int]) -> None:
        """Write the three broker-level checkpoints of every log dir (atomically, as Kafka does), and any
        leader-epoch-checkpoint an earlier write left behind. A file that cannot be written keeps its previous
        content, which is safe: the next start recovers from older recovery points."""
        for the_log in self.logs.values():
            self._write(the_log.leader_epoch_cache.path, the_log.leader_epoch_cache.flush_if_dirty)
        for log_dir in self.online_dirs:
            mine = {tp: lg for tp, lg in self.logs.items() if self._dir_of.get(tp) is log_dir}
            self._write_offsets(log_dir.path / RECOVERY_POINT_CHECKPOINT, log_dir.write_recovery_points,
                                {tp: lg.recovery_point for tp, lg in mine.items()})
            self._write_offsets(log_dir.path / LOG_START_OFFSET_CHECKPOINT, log_dir.write_log_start_offsets,
                                {tp: lg.log_start_offset for tp, lg in mine.items()})
            self._write_offsets(log_dir.path / REPLICATION_CHECKPOINT, log_dir.write_high_watermarks,
                                {tp: high_watermarks.get(tp, 0) for tp in mine})

    def _write_offsets(self, path: Path, write: Callable[[OffsetMap], None], offsets: OffsetMap) -> None:
        def admitted_write() -> None:
            self._admit(path, len(offset_checkpoint_bytes(offsets)))
            write(offsets)

        self._write(path, admitted_write)

    def _admit(self, path: Path, size: int) -> None:
        """A full disk as the disk quota emulates it refuses a checkpoint as it refuses an append."""
        quota = self.disk_quota.quota_bytes
        if quota is not None and self.disk_quota.used_bytes() + size > quota:
            raise KafkaStorageError(f"Error while writing {path}: [Errno {errno.ENOSPC}] "
                                    f"{os.strerror(errno.ENOSPC)} (disk quota of {quota} bytes)")

    def _write(self, path: Path, write: Callable[[], None]) -> None:
        """Run one checkpoint write; a failure is logged (once until a write of that file succeeds again)."""
        try:
            write()
        except (KafkaStorageError, OSError) as exc:
            if path not in self._unwritten:
                self._unwritten.add(path)
                log.error("checkpoint failed, the previous one stays: %s", exc)
            else:
                log.debug("checkpoint failed again: %s", exc)
            return
        if path in self._unwritten:
            self._unwritten.discard(path)
            log.info("%s written again", path)

    def rolled_unflushed(self) -> list[tuple[Log, int]]:
        """Logs with rolled segments not yet fsynced, and the offset to flush up to (the active segment's base).

        Kafka flushes a segment soon after it rolls; this is what moves the recovery point, so that recovery
        after a crash scans only the active segment.
        """
        return [(lg, lg.active_segment.base_offset) for lg in self.logs.values()
                if lg.recovery_point < lg.active_segment.base_offset]

    def flush_due(self, now: int) -> None:
        """Flush logs whose flush.ms has passed since their last flush (log.flush.interval.ms)."""
        for tp, the_log in self.logs.items():
            last = self._last_flush_ms.setdefault(tp, now)
            if now - last >= the_log.config.flush_ms:
                the_log.flush()
                self._last_flush_ms[tp] = now

    def roll_and_retain(self, now: int, high_watermarks: dict[TopicPartition, int]) -> int:
        """Time-based segment rolls and retention (retention.ms / retention.bytes); returns segments deleted."""
        deleted = 0
        for tp, the_log in list(self.logs.items()):
            try:
                the_log.maybe_roll_for_time(now)
                deleted += the_log.delete_old_segments(now, high_watermarks.get(tp, the_log.log_end_offset))
            except OSError as exc:
                log.error("retention of %s-%s failed: %s", tp[0], tp[1], exc)
        return deleted

    def abandon(self) -> None:
        """A crash: release every log's files with no flush and no checkpoint."""
        for the_log in [*self.logs.values(), *self.future_logs.values()]:
            the_log.abandon()

    def shutdown(self, high_watermarks: dict[TopicPartition, int]) -> None:
        """Flush everything and checkpoint so the next start needs no recovery. As in Kafka's LogManager.shutdown,
        a log that cannot be flushed or closed (a full or failing disk) is logged and the others go on; its
        recovery point stays where its last successful flush put it."""
        every = [*self.logs.items(), *self.future_logs.items()]
        for tp, the_log in every:
            try:
                the_log.flush()
            except (KafkaStorageError, OSError) as exc:
                log.error("%s-%s not flushed at shutdown: %s", tp[0], tp[1], exc)
        self.checkpoint(high_watermarks)
        for tp, the_log in every:
            try:
                the_log.close()
            except (KafkaStorageError, OSError) as exc:
                log.error("%s-%s not closed cleanly at shutdown (recovery on the next start repairs it): %s",
                          tp[0], tp[1], exc)
                the_log.abandon()


def _read_or_reset(read: Callable[[], OffsetMap], reset: str) -> OffsetMap:
    """A checkpoint Kafka's LogManager.loadLogs does without when it cannot be read."""
    try:
        return read()
    except KafkaStorageError as exc:
        log.warning("%s; %s", exc, reset)
        return {}
