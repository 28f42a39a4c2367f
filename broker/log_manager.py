"""The log manager: every partition log in the broker's log dirs, their checkpoints, flush and retention.

Recovery happens here at start-up: each log is opened from its recovery point (from
recovery-point-offset-checkpoint), so only what was written after the last flush is scanned. The controller's
metadata log (`__cluster_metadata-0`, in the same directory on a combined node) is the controller's, not a
partition of this broker's.
"""
from __future__ import annotations

import logging
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from minikafka.config import ConfigError
from minikafka.storage.log import Log
from minikafka.storage.log_config import LogConfig
from minikafka.storage.log_dir import LogDir
from minikafka.storage.metadata_log import METADATA_TOPIC

if TYPE_CHECKING:
    from .faults.disk_quota import DiskQuota

log = logging.getLogger("minikafka.log_manager")

TopicPartition = tuple[str, int]


def now_ms() -> int:
    return int(time.time() * 1000)


class LogManager:
    def __init__(self, dirs: list[Path], node_id: int, cluster_id: str | None, defaults: LogConfig,
                 disk_quota: DiskQuota) -> None:
        self.defaults = defaults
        # Every append asks it first: the broker's disk quota, which fault injection sets to act as a full disk.
        self.disk_quota = disk_quota
        self.log_dirs = [LogDir(Path(d)) for d in dirs]
        self.cluster_id = ""
        try:
            for log_dir in self.log_dirs:
                self.cluster_id, _directory_id = log_dir.load_or_create_meta(
                    node_id, cluster_id or self.cluster_id or None)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        self.logs: dict[TopicPartition, Log] = {}
        self._dir_of: dict[TopicPartition, LogDir] = {}
        self._high_watermarks: dict[TopicPartition, int] = {}
        self._last_flush_ms: dict[TopicPartition, int] = {}

    def load_logs(self, topic_configs: dict[str, dict[str, str]]) -> None:
        """Open (and recover) every partition directory found in the log dirs."""
        started = time.monotonic()
        for log_dir in self.log_dirs:
            recovery = log_dir.read_recovery_points()
            starts = log_dir.read_log_start_offsets()
            self._high_watermarks.update(log_dir.read_high_watermarks())
            for topic, index, path in log_dir.partition_dirs():
                if topic == METADATA_TOPIC:
                    continue
                tp = (topic, index)
                config = LogConfig.from_props(topic_configs.get(topic, {}), self.defaults)
                self.logs[tp] = Log.open(path, topic, index, config, recovery_point=recovery.get(tp, 0),
                                         log_start_offset=starts.get(tp, 0), now_ms=now_ms())
                self._dir_of[tp] = log_dir
        if self.logs:
            log.info("loaded %d partition logs in %.0f ms", len(self.logs), 1000 * (time.monotonic() - started))

    def high_watermark_of(self, topic: str, index: int) -> int:
        return self._high_watermarks.get((topic, index), 0)

    def get_or_create_log(self, topic: str, index: int, topic_id: uuid.UUID, overrides: dict[str, str]) -> Log:
        tp = (topic, index)
        existing = self.logs.get(tp)
        if existing is not None:
            return existing
        log_dir = min(self.log_dirs, key=lambda d: sum(1 for v in self._dir_of.values() if v is d))
        config = LogConfig.from_props(overrides, self.defaults)
        created = Log.open(log_dir.partition_dir(topic, index), topic, index, config, topic_id=topic_id.bytes,
                           now_ms=now_ms())
        self.logs[tp] = created
        self._dir_of[tp] = log_dir
        return created

    def delete_log(self, topic: str, index: int) -> None:
        tp = (topic, index)
        removed = self.logs.pop(tp, None)
        self._dir_of.pop(tp, None)
        self._high_watermarks.pop(tp, None)
        if removed is not None:
            removed.delete()

    def update_topic_config(self, topic: str, overrides: dict[str, str]) -> None:
        config = LogConfig.from_props(overrides, self.defaults)
        for (name, _index), the_log in self.logs.items():
            if name == topic:
                the_log.update_config(config)

    def checkpoint(self, high_watermarks: dict[TopicPartition, int]) -> None:
        """Write the three broker-level checkpoints of every log dir (atomically, as Kafka does)."""
        for log_dir in self.log_dirs:
            mine = {tp: lg for tp, lg in self.logs.items() if self._dir_of.get(tp) is log_dir}
            log_dir.write_recovery_points({tp: lg.recovery_point for tp, lg in mine.items()})
            log_dir.write_log_start_offsets({tp: lg.log_start_offset for tp, lg in mine.items()})
            log_dir.write_high_watermarks({tp: high_watermarks.get(tp, 0) for tp in mine})

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
        for the_log in self.logs.values():
            the_log.abandon()

    def shutdown(self, high_watermarks: dict[TopicPartition, int]) -> None:
        """Flush everything and checkpoint so the next start needs no recovery."""
        for the_log in self.logs.values():
            the_log.flush()
        self.checkpoint(high_watermarks)
        for the_log in self.logs.values():
            the_log.close()
