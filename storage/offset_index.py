"""Sparse offset -> file position index of one segment (`<base offset>.index`).

Entries are 8 bytes: offset relative to the segment base (int32) and the position in the .log
file (int32) of the batch whose last offset that is. A lookup gives a position at or before the
batch holding an offset; the reader scans batch headers forward from there.
"""

from __future__ import annotations

import struct
import sys
from array import array
from bisect import bisect_left, bisect_right
from itertools import islice
from operator import lt
from pathlib import Path
from typing import NamedTuple

from .index_file import CorruptIndexError, IndexFile

_ENTRY = struct.Struct(">ii")


class OffsetPosition(NamedTuple):
    offset: int
    position: int


class OffsetIndex(IndexFile):
    """Offset index loaded into memory from (and appended through to) its file."""

    entry_size = 8

    def __init__(self, path: Path, base_offset: int, max_index_size: int) -> None:
        super().__init__(path, base_offset, max_index_size)
        self._relative = array("i")
        self._positions = array("i")

    def load(self, log_size: int) -> None:
        """Read the file; CorruptIndexError if it is not a plausible index of a `log_size`-byte log."""
        words = array("i")
        words.frombytes(self._read_all())
        if sys.byteorder == "little":
            words.byteswap()
        relative, positions = words[0::2], words[1::2]
        if relative and (
            relative[0] < 0
            or positions[0] <= 0
            or positions[-1] >= log_size
            or not all(map(lt, relative, islice(relative, 1, None)))
            or not all(map(lt, positions, islice(positions, 1, None)))
        ):
            raise CorruptIndexError(
                f"Corrupt offset index {self.path}: entries are not increasing or point past the log")
        self._relative, self._positions = relative, positions

    @property
    def is_full(self) -> bool:
        return self.entries >= self.max_entries

    @property
    def last_entry(self) -> OffsetPosition:
        """The last entry, or (base offset, 0) when empty."""
        if not self.entries:
            return OffsetPosition(self.base_offset, 0)
        return OffsetPosition(self.base_offset + self._relative[-1], self._positions[-1])

    def lookup(self, offset: int) -> OffsetPosition:
        """The entry with the largest offset <= `offset`, or (base offset, 0)."""
        slot = bisect_right(self._relative, offset - self.base_offset) - 1
        if slot < 0:
            return OffsetPosition(self.base_offset, 0)
        return OffsetPosition(self.base_offset + self._relative[slot], self._positions[slot])

    def lookup_position(self, position: int) -> OffsetPosition:
        """The entry with the largest position <= `position`, or (base offset, 0)."""
        slot = bisect_right(self._positions, position) - 1
        if slot < 0:
            return OffsetPosition(self.base_offset, 0)
        return OffsetPosition(self.base_offset + self._relative[slot], self._positions[slot])

    def fetch_upper_bound_offset(self, position: int) -> int | None:
        """The offset of the first entry at or after `position`: no batch before it ends later (Kafka's
        fetchUpperBoundOffset, which bounds the aborted transactions a fetch of the bytes before `position`
        needs); None when no entry is that far."""
        slot = bisect_left(self._positions, position)
        return self.base_offset + self._relative[slot] if slot < len(self._positions) else None

    def append(self, offset: int, position: int) -> None:
        relative = self.relative(offset)
        if self.entries and relative <= self._relative[-1]:
            raise ValueError(f"Attempt to append offset {offset} no larger than the last offset in {self.path}")
        self._write_entry(_ENTRY.pack(relative, position))
        self._relative.append(relative)
        self._positions.append(position)

    def truncate_to(self, offset: int) -> None:
        """Remove entries for offsets >= `offset`."""
        keep = bisect_right(self._relative, offset - self.base_offset - 1)
        if keep < self.entries:
            self._truncate_entries(keep)
            del self._relative[keep:]
            del self._positions[keep:]

    def reset(self) -> None:
        self._truncate_entries(0)
        del self._relative[:]
        del self._positions[:]
