"""The file behind an offset or time index: fixed-size big-endian entries, appended in place.

Kafka memory-maps and preallocates index files; here entries live in memory (arrays) and are
written to the file as they are added, so the file always holds exactly the entries and never a
preallocated or garbage tail that Kafka tools would have to trim.

A descriptor is held only while the index takes entries (the active segment), so a broker with
many partitions keeps one descriptor per inactive segment, not three.
"""

from __future__ import annotations

import os
import weakref
from pathlib import Path


class CorruptIndexError(ValueError):
    """An index file that cannot be trusted; the segment rebuilds it from the log."""


class IndexFile:
    """Fixed-size entries in a file, owned by one index."""

    entry_size: int

    def __init__(self, path: Path, base_offset: int, max_index_size: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max_index_size // self.entry_size
        self.entries = 0
        self._fd: int | None = None
        self._close_fd: weakref.finalize | None = None
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o644))

    def _read_all(self) -> bytes:
        data = self.path.read_bytes()
        if len(data) % self.entry_size:
            raise CorruptIndexError(
                f"Index file {self.path} has size {len(data)}, not a multiple of {self.entry_size}"
            )
        self.entries = len(data) // self.entry_size
        return data

    def _write_entry(self, data: bytes) -> None:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY)
            # Closed by release(), or when the index is dropped.
            self._close_fd = weakref.finalize(self, os.close, self._fd)
        os.pwrite(self._fd, data, self.entries * self.entry_size)
        self.entries += 1

    def _truncate_entries(self, entries: int) -> None:
        os.truncate(self.path, entries * self.entry_size)
        self.entries = entries

    def relative(self, offset: int) -> int:
        """`offset` relative to the segment base, as stored; ValueError if it does not fit an int32."""
        relative = offset - self.base_offset
        if not 0 <= relative <= 2**31 - 1:
            raise ValueError(f"Offset {offset} cannot be stored relative to base offset {self.base_offset}")
        return relative

    def flush(self) -> None:
        """fsync the file (through a descriptor of its own: flushes may run in another thread)."""
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:  # the segment was deleted meanwhile
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def release(self) -> None:
        """Close the write descriptor; a later entry reopens the file."""
        if self._close_fd is not None:
            self._close_fd()
            self._fd = self._close_fd = None
