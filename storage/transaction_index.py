"""A segment's aborted-transaction index (`<base offset>.txnindex`), Kafka's TransactionIndex.

One entry per transaction whose ABORT marker is in the segment: version (int16, 0), producer id (int64), first
offset, last offset (the marker's) and the last stable offset when the marker was written (int64 each), 34 bytes
big-endian. A read_committed fetch returns the entries that overlap what it reads, so the consumer can drop the
aborted records. The file exists only once a segment has an entry, as in Kafka, so most segments have none.

As Kafka's TransactionIndex, a read takes the whole entries only: a partial one at the end (an append under way) is
not an entry yet. Loading a log sanity-checks every index (`sanity_check`); one that fails is rebuilt from the
segment's markers (Kafka's LogLoader recovers that segment).
"""
from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import NamedTuple

from .index_file import CorruptIndexError

ENTRY_VERSION = 0
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TxnIndexSearchResult(NamedTuple):
    """The entries found, and whether the search may stop here: an entry's last stable offset reached the upper
    bound, so no later segment holds an aborted transaction that starts below it."""

    aborted: list[AbortedTxn]
    is_complete: bool


class TransactionIndex:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries: list[AbortedTxn] | None = None

    @property
    def entries(self) -> list[AbortedTxn]:
        if self._entries is None:
            self._entries = self._load()
        return self._entries

    def _read(self) -> tuple[list[AbortedTxn], int]:
        """The whole entries of the file, and its size. Raises CorruptIndexError for an entry of an unknown
        version."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return [], 0
        entries = []
        for version, *fields in _ENTRY.iter_unpack(memoryview(data)[:len(data) - len(data) % ENTRY_SIZE]):
            if version != ENTRY_VERSION:
                raise CorruptIndexError(f"Transaction index {self.path} has an entry of unknown version {version}")
            entries.append(AbortedTxn(*fields))
        return entries, len(data)

    def _load(self) -> list[AbortedTxn]:
        return self._read()[0]

    def sanity_check(self, start_offset: int) -> None:
        """Raise CorruptIndexError if the file cannot be this segment's index: an entry of an unknown version, one
        whose last offset is below the segment's base offset `start_offset` (Kafka's check), or a partial entry at
        the end (a torn or damaged file: its last entries cannot be trusted, and an append after it would be
        misread)."""
        entries, size = self._read()
        if size % ENTRY_SIZE:
            raise CorruptIndexError(f"Transaction index {self.path} has size {size}, not a multiple of {ENTRY_SIZE}")
        for txn in entries:
            if txn.last_offset < start_offset:
                raise CorruptIndexError(f"Last offset of aborted transaction {txn} in index {self.path} is less "
                                        f"than start offset {start_offset}")

    def append(self, txn: AbortedTxn) -> None:
        entries = self.entries
        if entries and txn.last_offset <= entries[-1].last_offset:
            raise ValueError(f"The last offset of appended transactions must increase sequentially, but "
                             f"{txn.last_offset} is not greater than current last offset "
                             f"{entries[-1].last_offset} of index {self.path}")
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, _ENTRY.pack(ENTRY_VERSION, *txn))
        finally:
            os.close(fd)
        entries.append(txn)

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> TxnIndexSearchResult:
        """Transactions that end at or after `fetch_offset` and start below `upper_bound_offset`."""
        found = []
        for txn in self.entries:
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return TxnIndexSearchResult(found, True)
        return TxnIndexSearchResult(found, False)

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or after `offset` (the log is cut there)."""
        entries = self.entries
        keep = next((i for i, txn in enumerate(entries) if txn.last_offset >= offset), len(entries))
        if keep < len(entries):
            del entries[keep:]
            os.truncate(self.path, keep * ENTRY_SIZE)

    def reset(self) -> None:
        """Forget every entry (recovery rebuilds them from the segment's markers)."""
        self._entries = []
        self.path.unlink(missing_ok=True)

    def flush(self) -> None:
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
