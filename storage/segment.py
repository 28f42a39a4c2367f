"""One log segment: `<base offset>.log` plus its offset and time indexes.

The .log file is a plain concatenation of record batches exactly as clients and followers
receive them. Appends go through os.write on an O_APPEND descriptor and reads through
os.pread, so readers in other threads never share a file position with the writer.
"""

from __future__ import annotations

import logging
import os
import random
import threading
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

from minikafka.protocol.file_records import FileRecords
from minikafka.protocol.record_batch import (
    CURRENT_MAGIC,
    HEADER_SIZE,
    INT32_MAX,
    MIN_BATCH_LENGTH,
    BatchHeader,
    batch_crc_ok,
    iter_batches,
    parse_header,
)

from .errors import KafkaStorageError
from .index_file import CorruptIndexError
from .log_config import LogConfig
from .offset_index import OffsetIndex
from .time_index import NO_TIMESTAMP, TimeIndex, TimestampOffset
from .transaction_index import TransactionIndex

logger = logging.getLogger(__name__)

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
SCAN_CHUNK = 64 * 1024
RECOVERY_CHUNK = 1024 * 1024


def file_prefix(base_offset: int) -> str:
    """Kafka's segment file name stem: the base offset as 20 zero-padded digits."""
    return f"{base_offset:020d}"


class BatchPosition(NamedTuple):
    position: int
    header: BatchHeader


class LogSegment:
    """A segment of a partition log; only the last (active) one of a log takes appends.

    Indexes, the next offset and the largest timestamp are loaded on first use, so opening a log
    with many segments costs one stat per segment. An index that fails its sanity check on load
    is rebuilt from the batch headers of the .log file.
    """

    def __init__(self, directory: Path, base_offset: int, config: LogConfig, now_ms: int, *, new: bool) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.log_path = directory / (file_prefix(base_offset) + LOG_SUFFIX)
        self.index_path = directory / (file_prefix(base_offset) + INDEX_SUFFIX)
        self.time_index_path = directory / (file_prefix(base_offset) + TIME_INDEX_SUFFIX)
        self.txn_index = TransactionIndex(directory / (file_prefix(base_offset) + TXN_INDEX_SUFFIX))
        flags = os.O_RDWR | os.O_CREAT | os.O_APPEND | (os.O_TRUNC if new else 0)
        self._fd = os.open(self.log_path, flags, 0o644)
        # See IndexFile: the descriptor outlives delete() while a reader still holds the segment.
        self._close_log = weakref.finalize(self, os.close, self._fd)
        self.size = os.fstat(self._fd).st_size
        self.created_ms = now_ms
        self._config = config
        self.roll_jitter_ms = random.randrange(config.segment_jitter_ms) if config.segment_jitter_ms else 0
        self._offset_index: OffsetIndex | None = None
        self._time_index: TimeIndex | None = None
        self._next_offset: int | None = base_offset if new else None
        self._max_timestamp: TimestampOffset | None = TimestampOffset(NO_TIMESTAMP, base_offset) if new else None
        self._rolling_timestamp: int | None = None
        self._bytes_since_last_index_entry = 0
        self._load_lock = threading.Lock()  # readers in worker threads may race to load indexes
        if new:
            for path in (self.index_path, self.time_index_path):
                path.unlink(missing_ok=True)
            self.txn_index.reset()
            self._load_indexes()

    @classmethod
    def create(cls, directory: Path, base_offset: int, config: LogConfig, now_ms: int) -> LogSegment:
        """A new empty segment (any old files with that base offset are replaced)."""
        return cls(directory, base_offset, config, now_ms, new=True)

    @classmethod
    def open(cls, directory: Path, base_offset: int, config: LogConfig, now_ms: int) -> LogSegment:
        """An existing segment; its indexes are checked lazily."""
        return cls(directory, base_offset, config, now_ms, new=False)

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self.size})"

    # ----------------------------------------------------------------- lazy state

    @property
    def offset_index(self) -> OffsetIndex:
        if self._offset_index is None:
            self._load_indexes()
        assert self._offset_index is not None
        return self._offset_index

    @property
    def time_index(self) -> TimeIndex:
        if self._time_index is None:
            self._load_indexes()
        assert self._time_index is not None
        return self._time_index

    def _load_indexes(self) -> None:
        with self._load_lock:
            if self._offset_index is None or self._time_index is None:
                self._open_indexes()

    def _open_indexes(self) -> None:
        max_size = self._config.segment_index_bytes
        index_missing = self.size > 0 and not self.index_path.exists()
        offset_index = OffsetIndex(self.index_path, self.base_offset, max_size)
        time_index = TimeIndex(self.time_index_path, self.base_offset, max_size)
        if index_missing:  # a cleaned segment just swapped in, or indexes deleted by hand: built from the log
            logger.info("Building the indexes of %s", self.log_path)
            self._index_batches(self.batches(0), offset_index, time_index)
            self._time_index = time_index
            self._offset_index = offset_index
            return
        try:
            offset_index.load(self.size)
            if self._next_offset is None:
                self._next_offset = self._next_offset_from(offset_index.last_entry.position)
            time_index.load(self._next_offset)
        except CorruptIndexError as e:
            logger.warning("Rebuilding the indexes of %s: %s", self.log_path, e)
            self._index_batches(self.batches(0), offset_index, time_index)
        # Published only once loaded: readers in other threads test these without the lock.
        self._time_index = time_index
        self._offset_index = offset_index

    def _next_offset_from(self, position: int) -> int:
        next_offset = self.base_offset
        for batch in self.batches(position):
            next_offset = batch.header.last_offset + 1
        return next_offset

    @property
    def next_offset(self) -> int:
        """One past the last offset in the segment; the base offset when empty."""
        if self._next_offset is None:
            self._next_offset = self._next_offset_from(self.offset_index.last_entry.position)
        return self._next_offset

    def ends_cleanly(self) -> bool:
        """Whether the file ends right after a complete batch (no torn write at its tail)."""
        end = self.offset_index.last_entry.position
        for position, header in self.batches(end):
            end = position + header.size
        return end == self.size

    @property
    def max_timestamp_so_far(self) -> TimestampOffset:
        """Largest batch max timestamp in the segment and the last offset of that batch."""
        if self._max_timestamp is None:
            best = self.time_index.last_entry
            for _, header in self.batches(self.offset_index.lookup(best.offset).position):
                if header.max_timestamp > best.timestamp:
                    best = TimestampOffset(header.max_timestamp, header.last_offset)
            self._max_timestamp = best
        return self._max_timestamp

    @property
    def rolling_timestamp(self) -> int | None:
        """Max timestamp of the first batch: the clock segment.ms rolls by."""
        if self._rolling_timestamp is None and self.size >= HEADER_SIZE:
            self._rolling_timestamp = parse_header(self.read_bytes(0, HEADER_SIZE)).max_timestamp
        return self._rolling_timestamp

    @property
    def largest_timestamp(self) -> int:
        """What retention.ms compares against: max record timestamp, else the file's mtime."""
        timestamp = self.max_timestamp_so_far.timestamp
        if timestamp >= 0:
            return timestamp
        return self.last_modified_ms

    @property
    def last_modified_ms(self) -> int:
        return os.fstat(self._fd).st_mtime_ns // 1_000_000

    # ----------------------------------------------------------------- writing

    def append(self, data: bytes | bytearray | memoryview, headers: list[BatchHeader]) -> None:
        """Write batches (`data` = exactly the batches of `headers`, contiguous) and index them."""
        position = self.size
        offset_index, time_index = self.offset_index, self.time_index
        try:
            with memoryview(data) as view:
                while view:
                    view = view[os.write(self._fd, view) :]
        except OSError as e:
            self._undo_partial_write(position)
            raise KafkaStorageError(f"Error while appending to {self.log_path}: {e}") from e
        if position == 0:
            self._rolling_timestamp = headers[0].max_timestamp
        self.size = position + len(data)
        self._next_offset = headers[-1].last_offset + 1
        self._index_headers(position, headers, offset_index, time_index)

    def _undo_partial_write(self, position: int) -> None:
        try:
            os.ftruncate(self._fd, position)
        except OSError:
            self.size = os.fstat(self._fd).st_size

    def _index_headers(
        self, position: int, headers: list[BatchHeader], offset_index: OffsetIndex, time_index: TimeIndex
    ) -> None:
        interval = self._config.index_interval_bytes
        max_timestamp = self.max_timestamp_so_far
        for header in headers:
            if header.max_timestamp > max_timestamp.timestamp:
                max_timestamp = TimestampOffset(header.max_timestamp, header.last_offset)
            if self._bytes_since_last_index_entry > interval:
                offset_index.append(header.last_offset, position)
                time_index.maybe_append(*max_timestamp)
                self._bytes_since_last_index_entry = 0
            self._bytes_since_last_index_entry += header.size
            position += header.size
        self._max_timestamp = max_timestamp

    def _index_batches(self, batches: Iterator[BatchPosition], offset_index: OffsetIndex, time_index: TimeIndex) -> int:
        """Rebuild both indexes from `batches`; returns the end position of the last one."""
        offset_index.reset()
        time_index.reset()
        self._bytes_since_last_index_entry = 0
        self._max_timestamp = TimestampOffset(NO_TIMESTAMP, self.base_offset)
        end = 0
        next_offset = self.base_offset
        for position, header in batches:
            self._index_headers(position, [header], offset_index, time_index)
            end = position + header.size
            next_offset = header.last_offset + 1
        self._next_offset = next_offset
        return end

    def recover(self, on_batch: Callable[[BatchHeader], None]) -> int:
        """Re-validate every batch (CRC, magic, offsets), rebuild the indexes, cut off a bad tail.

        `on_batch` sees each valid batch header in order. Returns the number of bytes truncated.
        """
        def valid_batches() -> Iterator[BatchPosition]:
            previous_last = self.base_offset - 1
            for position, header, chunk, chunk_pos in self._scan_whole(0):
                if (
                    header.base_offset <= previous_last
                    or header.last_offset < header.base_offset
                    or header.last_offset - self.base_offset > INT32_MAX
                    or not batch_crc_ok(chunk, chunk_pos, header)
                ):
                    return
                previous_last = header.last_offset
                on_batch(header)
                yield BatchPosition(position, header)

        valid = self._index_batches(valid_batches(), self.offset_index, self.time_index)
        truncated = self.size - valid
        if truncated:
            os.ftruncate(self._fd, valid)
            self.size = valid
            self._rolling_timestamp = None
        self.time_index.maybe_append(*self.max_timestamp_so_far)
        return truncated

    def truncate_to(self, offset: int, now_ms: int) -> int:
        """Remove the batch holding `offset` and everything after; returns bytes removed."""
        found = self.translate_offset(offset)
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        if found is None:
            return 0
        removed = self.size - found.position
        os.ftruncate(self._fd, found.position)
        self.size = found.position
        self._next_offset = None if found.position else self.base_offset
        self._max_timestamp = None
        self._rolling_timestamp = None
        self._bytes_since_last_index_entry = 0
        if self.size == 0:
            self.created_ms = now_ms
        return removed

    def on_become_inactive(self) -> None:
        """Write the final time index entry (largest timestamp) as Kafka does when rolling, and
        let go of the index write descriptors."""
        self.time_index.maybe_append(*self.max_timestamp_so_far)
        self.time_index.release()
        self.offset_index.release()

    def update_config(self, config: LogConfig) -> None:
        self._config = config

    def flush(self) -> None:
        try:
            os.fsync(self._fd)
            if self._offset_index is not None:
                self._offset_index.flush()
            if self._time_index is not None:
                self._time_index.flush()
            self.txn_index.flush()
        except OSError as e:
            raise KafkaStorageError(f"Error while flushing {self.log_path}: {e}") from e

    def close(self) -> None:
        if not self._close_log.alive:
            return
        if self._time_index is not None and self._max_timestamp is not None:
            self.on_become_inactive()
        self.abandon()

    def abandon(self) -> None:
        """Let go of the files and write nothing more, as a killed process would (crash tests)."""
        for index in (self._offset_index, self._time_index):
            if index is not None:
                index.release()
        self._close_log()

    def delete(self) -> None:
        """Remove the segment's files. Descriptors stay open for readers still holding the segment."""
        # Load the indexes first, so that such a reader never recreates their files.
        self._load_indexes()
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            (self.directory / (file_prefix(self.base_offset) + suffix)).unlink(missing_ok=True)

    # ----------------------------------------------------------------- reading

    def read_bytes(self, position: int, length: int) -> bytes:
        """Up to `length` bytes from `position` (fewer only at the end of the file)."""
        data = os.pread(self._fd, length, position)
        if len(data) == length or len(data) == 0:
            return data
        parts = [data]
        got = len(data)
        while got < length:
            more = os.pread(self._fd, length - got, position + got)
            if not more:
                break
            parts.append(more)
            got += len(more)
        return b"".join(parts)

    def batches(self, position: int = 0, end: int | None = None) -> Iterator[BatchPosition]:
        """(position, header) of each complete batch from `position` up to `end` (default: the
        end of the file), reading headers only."""
        end = self.size if end is None else end
        want = SCAN_CHUNK
        while end - position >= HEADER_SIZE:
            chunk = self.read_bytes(position, min(want, end - position))
            step = 0
            while len(chunk) - step >= HEADER_SIZE:
                header = parse_header(chunk, step)
                if header.magic != CURRENT_MAGIC or header.batch_length < MIN_BATCH_LENGTH:
                    return
                if position + step + header.size > end:
                    return
                yield BatchPosition(position + step, header)
                step += header.size
            if step == 0:
                return
            position += step
            # Among batches larger than a chunk, read just the next header.
            want = HEADER_SIZE if header.size > SCAN_CHUNK else SCAN_CHUNK

    def _scan_whole(self, position: int) -> Iterator[tuple[int, BatchHeader, bytes, int]]:
        """Like batches(), but each batch comes with a buffer holding all of it: (position,
        header, buffer, position in buffer)."""
        end = self.size
        while end - position >= HEADER_SIZE:
            chunk = self.read_bytes(position, min(RECOVERY_CHUNK, end - position))
            step = 0
            for chunk_position, header in iter_batches(chunk):
                yield position + chunk_position, header, chunk, chunk_position
                step = chunk_position + header.size
            if step == 0:  # the first batch is larger than the chunk, or not a batch at all
                if len(chunk) < HEADER_SIZE:
                    return
                first = parse_header(chunk)
                if first.magic != CURRENT_MAGIC or first.batch_length < MIN_BATCH_LENGTH:
                    return
                if position + first.size > end:
                    return
                chunk = self.read_bytes(position, first.size)
                if len(chunk) < first.size:
                    return
                yield position, first, chunk, 0
                step = first.size
            position += step

    def translate_offset(self, offset: int, start_position: int = 0) -> BatchPosition | None:
        """The first batch whose last offset is >= `offset`, or None if the segment ends before it."""
        position = max(self.offset_index.lookup(offset).position, start_position)
        for found in self.batches(position):
            if found.header.last_offset >= offset:
                return found
        return None

    def read(self, offset: int, max_size: int, max_offset: int | None, min_one_message: bool) -> bytes | None:
        """Whole batches from the one holding `offset`, at most `max_size` bytes (but one batch if
        `min_one_message`), none reaching `max_offset`. None when the segment ends before `offset`."""
        found = self.slice(offset, max_size, max_offset, min_one_message)
        if found is None:
            return None
        position, size = found
        return self.read_bytes(position, size) if size else b""

    def file_records(self, position: int, size: int) -> FileRecords:
        """`size` bytes from `position` as a slice of the file, readable whatever happens to the segment after."""
        return FileRecords(self._fd, position, size)

    def slice(self, offset: int, max_size: int, max_offset: int | None,
              min_one_message: bool) -> tuple[int, int] | None:
        """(position, size) of what `read` returns; None when the segment ends before `offset`."""
        start = self.translate_offset(offset)
        if start is None:
            return None
        end = self.size
        if max_offset is not None:
            if start.header.last_offset >= max_offset:
                return start.position, 0
            if max_offset < self.next_offset:
                holder = self.translate_offset(max_offset, start.position)
                if holder is not None:
                    end = holder.position
        limit = start.position + max(min(max_size, end - start.position), 0)
        # Batches before an indexed position are whole: only headers after it need reading.
        complete = max(self.offset_index.lookup_position(limit).position, start.position)
        for position, header in self.batches(complete, limit):
            complete = position + header.size
        if complete > start.position:
            return start.position, complete - start.position
        if min_one_message and start.position + start.header.size <= end:
            return start.position, start.header.size
        return start.position, 0

    def timestamp_search_start(self, timestamp: int, starting_offset: int) -> int:
        """A position from which scanning finds the first batch with max timestamp >= `timestamp`."""
        indexed = self.time_index.lookup(timestamp)
        return self.offset_index.lookup(max(indexed.offset, starting_offset)).position

    def should_roll(self, messages_size: int, max_timestamp: int, max_offset: int, now_ms: int) -> bool:
        """Kafka's roll rule: size, age (segment.ms - jitter), a full index or an offset too far."""
        config = self._config
        reached_roll_ms = self.time_waited_for_roll(now_ms, max_timestamp) > config.segment_ms - self.roll_jitter_ms
        return (
            self.size > config.segment_size - messages_size
            or (self.size > 0 and reached_roll_ms)
            or self.offset_index.is_full
            or self.time_index.is_full
            or max_offset - self.base_offset > INT32_MAX
        )

    def time_waited_for_roll(self, now_ms: int, message_timestamp: int) -> int:
        rolling = self.rolling_timestamp
        if rolling is not None and rolling >= 0:
            return message_timestamp - rolling
        return now_ms - self.created_ms
