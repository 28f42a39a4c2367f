"""A full disk for one module of the broker, for tests that need a real ENOSPC where the disk quota fault does not
reach (the controller's metadata log, leader-epoch-checkpoint, a start on a full disk).

The module's `os` is replaced by one whose writes (or fsyncs) fail with ENOSPC, so the module's own error handling
runs as it would on a real full disk; `monkeypatch` undoes it.
"""
from __future__ import annotations

import errno
import os
from types import ModuleType
from typing import Any

import pytest

NO_SPACE = f"[Errno {errno.ENOSPC}] {os.strerror(errno.ENOSPC)}"


class FullDiskOs:
    """`os` as a full disk shows it while `full`: every write fails with ENOSPC, or, with `failing_fsyncs`, writes
    succeed and that many fsyncs fail (-1: all), as on a file system that allocates space late."""

    def __init__(self, failing_fsyncs: int = 0) -> None:
        self.full = True
        self.failing_fsyncs = failing_fsyncs
        self.refused_writes = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)

    def write(self, fd: int, data: Any) -> int:
        if self.full and not self.failing_fsyncs:
            self.refused_writes += 1
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return os.write(fd, data)

    def fsync(self, fd: int) -> None:
        if self.full and self.failing_fsyncs:
            self.failing_fsyncs -= 1
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        os.fsync(fd)


def fill_disk(monkeypatch: pytest.MonkeyPatch, *modules: ModuleType, failing_fsyncs: int = 0) -> FullDiskOs:
    """Make the disk full for `modules` (one shared FullDiskOs: set `.full = False` to free it)."""
    disk = FullDiskOs(failing_fsyncs)
    for module in modules:
        monkeypatch.setattr(module, "os", disk)
    return disk
