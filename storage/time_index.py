"""Sparse timestamp -> offset index of one segment (`<base offset>.timeindex`).

Entries are 12 bytes: the largest timestamp seen so far in the segment (int64) and the
relative offset (int32) of the batch that carried it. Timestamps only grow, so a lookup finds
the place in the log from which batches with timestamps >= a target can start.
"""

from __future__ import annotations

import struct
from array import array
from bisect import bisect_right
from itertools import islice
from operator import le, lt
from pathlib import Path
from typing import NamedTuple

from .index_file import CorruptIndexError, IndexFile

_ENTRY = struct.Struct(">qi")
NO_TIMESTAMP = -1


class TimestampOffset(NamedTuple):
    timestamp: int
    offset: int


class TimeIndex(IndexFile):
    """Time index loaded into memory from (and appended through to) its file."""

    entry_size = 12

    def __init__(self, path: Path, base_offset: int, max_index_size: int) -> None:
        super().__init__(path, base_offset, max_index_size)
        self._timestamps = array("q")
        self._relative = array("i")

    def load(self, next_offset: int) -> None:
        """Read the file; CorruptIndexError unless entries grow and stay below `next_offset`."""
        data = self._read_all()
        fields = struct.unpack(">" + "qi" * self.entries, data)
        timestamps, relative = array("q", fields[0::2]), array("i", fields[1::2])
        if relative and (
            relative[0] < 0
            or timestamps[0] <= NO_TIMESTAMP
            or self.base_offset + relative[-1] >= next_offset
            or not all(map(lt, timestamps, islice(timestamps, 1, None)))
            or not all(map(le, relative, islice(relative, 1, None)))
        ):
            raise CorruptIndexError(f"Corrupt time index {self.path}: entries are not increasing or point past the log")
        self._timestamps, self._relative = timestamps, relative

    @property
    def is_full(self) -> bool:
        """Kafka keeps the last slot free for the entry written when the segment is rolled."""
        return self.entries >= self.max_entries - 1

    @property
    def last_entry(self) -> TimestampOffset:
        """The last entry, or (-1, base offset) when empty."""
        if not self.entries:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return TimestampOffset(self._timestamps[-1], self.base_offset + self._relative[-1])

    def lookup(self, timestamp: int) -> TimestampOffset:
        """The entry with the largest timestamp <= `timestamp`, or (-1, base offset)."""
        slot = bisect_right(self._timestamps, timestamp) - 1
        if slot < 0:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return TimestampOffset(self._timestamps[slot], self.base_offset + self._relative[slot])

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Add an entry if `timestamp` is newer than the last one.

        Nothing is preallocated, so a full index still takes entries: fullness only makes the
        log roll before the next append.
        """
        if timestamp <= self.last_entry.timestamp:
            return
        relative = self.relative(offset)
        if self.entries and relative < self._relative[-1]:
            raise ValueError(f"Attempt to append offset {offset} smaller than the last offset in {self.path}")
        self._write_entry(_ENTRY.pack(timestamp, relative))
        self._timestamps.append(timestamp)
        self._relative.append(relative)

    def truncate_to(self, offset: int) -> None:
        """Remove entries for offsets >= `offset`."""
        relative = offset - self.base_offset
        keep = self.entries
        while keep and self._relative[keep - 1] >= relative:
            keep -= 1
        if keep < self.entries:
            self._truncate_entries(keep)
            del self._timestamps[keep:]
            del self._relative[keep:]

    def reset(self) -> None:
        self._truncate_entries(0)
        del self._timestamps[:]
        del self._relative[:]
