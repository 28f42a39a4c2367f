"""A disk quota: a cap on the bytes the broker's log dirs hold, beyond which appends fail as on a full disk.

The broker owns one and hands it to its log manager; every append asks it first (`refusal`), before anything is
written, so group coordinator writes hit it too, as in Kafka. A refused append answers KAFKA_STORAGE_ERROR with
the ENOSPC text a full disk gives. Figures are apparent file sizes: what an append adds to them is its own size
(plus the odd index entry), so "in use + this append > quota" is exactly the test the refusal states.
"""
from __future__ import annotations

import errno
import logging
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from minikafka.broker.faults.rules import FaultError
from minikafka.storage.errors import KafkaStorageError

log = logging.getLogger("minikafka.faults")

TopicPartition = tuple[str, int]


class DiskQuota:
    def __init__(self, log_dirs: Iterable[Path | str]) -> None:
        self.log_dirs = [Path(d) for d in log_dirs]
        self.quota_bytes: int | None = None
        self.fault_id: int | None = None  # the fault the quota is, once set
        self.hits = 0  # appends refused since it was set
        # Partitions refused since the quota was set and not appended to since: their refusals are logged once.
        self._refused: set[TopicPartition] = set()

    def used_bytes(self) -> int:
        """Bytes held under the log dirs (every file's size, checkpoints and metadata included)."""
        return sum(_tree_bytes(path) for path in self.log_dirs)

    def set(self, quota_bytes: int | None, fault_id: int | None = None) -> dict[str, Any]:
        """Cap the log dirs at `quota_bytes` (None: what they hold now, i.e. the disk is full); returns the fault."""
        used = self.used_bytes()
        quota = used if quota_bytes is None else int(quota_bytes)
        if quota < 0:
            raise FaultError(f"disk quota must not be negative, got {quota}")
        self.quota_bytes, self.fault_id, self.hits = quota, fault_id, 0
        self._refused.clear()
        fault = self._describe(quota, used)
        log.warning("fault added: disk quota of %d bytes on %s (%d in use)", quota,
                    ", ".join(map(str, self.log_dirs)), used)
        return fault

    def clear(self) -> bool:
        """Lift the quota; True if one was set."""
        was_set = self.quota_bytes is not None
        self.quota_bytes = None
        self._refused.clear()
        return was_set

    def describe(self) -> dict[str, Any] | None:
        """The quota as a fault, or None when there is none."""
        return None if self.quota_bytes is None else self._describe(self.quota_bytes, self.used_bytes())

    def _describe(self, quota: int, used: int) -> dict[str, Any]:
        return {"kind": "disk", "id": self.fault_id, "quota_bytes": quota, "used_bytes": used,
                "free_bytes": max(0, quota - used), "hits": self.hits}

    def refusal(self, tp: TopicPartition, size: int) -> KafkaStorageError | None:
        """The error for an append of `size` bytes to `tp` the quota cannot take, or None if it fits.

        A refusal is logged once per partition and episode: until an append to that partition fits again or the
        quota is set anew or cleared, so a producer retrying against a full disk does not flood the log.
        """
        if self.quota_bytes is None:
            return None
        used = self.used_bytes()
        if used + size <= self.quota_bytes:
            self._refused.discard(tp)
            return None
        error = KafkaStorageError(
            f"[Errno {errno.ENOSPC}] {os.strerror(errno.ENOSPC)}: appending {size} bytes would take the log dirs to "
            f"{used + size} bytes, past the disk quota of {self.quota_bytes} ({used} in use, "
            f"{max(0, self.quota_bytes - used)} free)")
        self.hits += 1
        if tp in self._refused:
            log.debug("append to %s-%s refused: %s", tp[0], tp[1], error)
        else:
            self._refused.add(tp)
            log.error("append to %s-%s refused: %s (logged once until an append to it fits or the disk fault is "
                      "cleared)", tp[0], tp[1], error)
        return error


def _tree_bytes(root: Path) -> int:
    total = 0
    stack = [root]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(Path(entry.path))
                elif entry.is_file(follow_symlinks=False):
                    total += entry.stat(follow_symlinks=False).st_size
            except OSError:
                continue
    return total
