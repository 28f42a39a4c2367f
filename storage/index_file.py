"""The file behind an offset or time index: fixed-size big-endian entries, appended in place.

Kafka memory-maps and preallocates index files; here entries live in memory (arrays) and are
written to the file as they are added, so the file always holds exactly the entries and never a
preallocated or garbage tail that Kafka tools would have to trim.
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
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        # Closed on close(), or once nothing references the index (a deleted segment that a
        # reader in another thread still uses keeps a valid descriptor until it is done).
        self._close = weakref.finalize(self, os.close, self._fd)
        self.entries = 0

    def _read_all(self) -> bytes:
        size = os.fstat(self._fd).st_size
        if size % self.entry_size:
            raise CorruptIndexError(f"Index file {self.path} has size {size}, not a multiple of {self.entry_size}")
        data = os.pread(self._fd, size, 0)
        if len(data) != size:
            raise CorruptIndexError(f"Index file {self.path} changed size while being read")
        self.entries = size // self.entry_size
        return data

    def _write_entry(self, data: bytes) -> None:
        os.pwrite(self._fd, data, self.entries * self.entry_size)
        self.entries += 1

    def _truncate_entries(self, entries: int) -> None:
        os.ftruncate(self._fd, entries * self.entry_size)
        self.entries = entries

    def relative(self, offset: int) -> int:
        """`offset` relative to the segment base, as stored; ValueError if it does not fit an int32."""
        relative = offset - self.base_offset
        if not 0 <= relative <= 2**31 - 1:
            raise ValueError(f"Offset {offset} cannot be stored relative to base offset {self.base_offset}")
        return relative

    def flush(self) -> None:
        os.fsync(self._fd)

    def close(self) -> None:
        self._close()
