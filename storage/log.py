"""The log of one partition replica: Kafka's UnifiedLog (local part) over LogSegments.

A leader's appends check each batch's header and records (log_validator), stamp headers in place
and write the bytes as they came; a follower's appends check headers and CRCs only, as Kafka's do;
reads return byte ranges of segment files.

Threading: every method that changes the log runs on the owning thread (the broker's event
loop). read(), fetch_offset_by_timestamp(), offset_of_max_timestamp() and flush() may run in a
worker thread meanwhile: they work on a snapshot of the segment list, and a segment deleted
under them keeps its file descriptors until they let go of it.
"""

from __future__ import annotations

import enum
import logging
import shutil
import time
from bisect import bisect_right
from collections.abc import Callable
from operator import attrgetter
from pathlib import Path
from typing import NamedTuple

from kafka.record.default_records import DefaultRecordBatch

from minikafka.protocol.end_transaction_marker import EndTransactionMarker, parse_marker
from minikafka.protocol.file_records import FileRecords
from minikafka.protocol.record_batch import (
    HEADER_SIZE,
    NO_TIMESTAMP,
    BatchHeader,
    assign_offsets,
    batch_crc_ok,
    iter_batches,
    parse_header,
    validate_batches,
)

from .checkpoint import fsync_dir
from .errors import (
    CorruptRecordError,
    InconsistentTopicIdError,
    InvalidRecordError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    UnexpectedAppendOffsetError,
)
from .leader_epoch_cache import LeaderEpochCache
from .log_cleaner import begin_swap, complete_swap
from .log_config import LogConfig
from .log_loader import load_segments, recover_segments
from .log_offset_metadata import LogOffsetMetadata
from .log_validator import validate_records
from .partition_metadata import read_partition_metadata, uuid_to_str, write_partition_metadata
from .producer_state import DEFAULT_PRODUCER_ID_EXPIRATION_MS, ProducerStateManager
from .producer_state_snapshot import flush_snapshot, snapshot_file
from .segment import LogSegment
from .special_timestamps import SpecialTimestamp
from .transaction_index import AbortedTxn

logger = logging.getLogger(__name__)

_base_offset = attrgetter("base_offset")
SegmentPredicate = Callable[[LogSegment, "LogSegment | None"], bool]


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _end_markers(data: bytes | bytearray | memoryview,
                 headers: list[BatchHeader]) -> list[EndTransactionMarker | None]:
    """The end-transaction marker of each control batch of `data`, None for the other batches."""
    markers: list[EndTransactionMarker | None] = []
    position = 0
    for header in headers:
        markers.append(parse_marker(data[position:position + header.size], header) if header.is_control else None)
        position += header.size
    return markers


class AppendOrigin(enum.Enum):
    """Who appends as leader (Kafka's AppendOrigin): a producer, or a coordinator of this cluster, which alone
    may write control batches. A follower's appends are append_as_follower."""

    CLIENT = "client"
    COORDINATOR = "coordinator"


class TimestampAndOffset(NamedTuple):
    """A ListOffsets answer (Kafka's TimestampAndOffset): the offset found, its record's timestamp and the leader
    epoch it was written in (-1 for either where there is none)."""

    offset: int
    timestamp: int
    leader_epoch: int


class AppendInfo(NamedTuple):
    """Outcome of an append, as the Produce response and the replica manager need it.

    offset_of_max_timestamp is the last offset of the batch carrying max_timestamp (Kafka's
    "shallow" offset). For a duplicate (a retried idempotent batch) nothing was appended and
    the offsets are those the original append got.
    """

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int
    log_start_offset: int
    records_count: int
    duplicate: bool = False


class Log:
    """Segments, leader-epoch cache and producer state of one partition directory."""

    def __init__(
        self,
        directory: Path,
        topic: str,
        partition: int,
        config: LogConfig,
        segments: list[LogSegment],
        *,
        log_start_offset: int,
        recovery_point: int,
        topic_id: bytes | None,
        leader_epoch_cache: LeaderEpochCache,
        producer_state: ProducerStateManager,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ) -> None:
        self.dir = directory
        self.topic = topic
        self.partition = partition
        self.config = config
        self.topic_id = topic_id
        self.leader_epoch_cache = leader_epoch_cache
        self.producer_state = producer_state
        # The broker's producer.id.expiration.ms, for the producers a reload of the producer state leaves out.
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self._segments = segments
        self._log_start_offset = log_start_offset
        self._recovery_point = recovery_point
        self._dirs_to_flush: set[Path] = set()  # directories with entries created since the last flush
        self._unflushed_snapshots: set[int] = set()  # offsets of producer snapshots a roll wrote without fsync
        # Counts truncations, so that a cleaning done on a worker thread meanwhile is dropped, not swapped in.
        self.truncations = 0
        self.deleted = False

    # ----------------------------------------------------------------- opening

    @classmethod
    def open(
        cls,
        dir: Path,
        topic: str,
        partition: int,
        config: LogConfig,
        *,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        topic_id: bytes | None = None,
        now_ms: int,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ) -> Log:
        """Open (or create) the partition directory and bring it to a consistent state.

        Segments holding offsets at or after `recovery_point`, and those whose transaction index
        fails its sanity check, are re-validated batch by batch; a torn or corrupt tail is cut off
        (and any later segment dropped) and their indexes are rebuilt. Stray temporary files are
        removed, the leader-epoch cache is trimmed to the log, and producer state is loaded from the
        latest usable snapshot and the batches after it; producers idle for
        `producer_id_expiration_ms` (the broker's producer.id.expiration.ms) with no transaction open
        are left out.
        """
        directory = Path(dir)
        created = not directory.exists()
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise KafkaStorageError(f"Cannot create partition directory {directory}: {e}") from e
        stored_id = read_partition_metadata(directory)
        if topic_id is not None and stored_id is not None and stored_id != topic_id:
            raise InconsistentTopicIdError(
                f"Partition directory {directory} belongs to topic id {uuid_to_str(stored_id)}, "
                f"not {uuid_to_str(topic_id)}"
            )
        if topic_id is not None and stored_id is None:
            write_partition_metadata(directory, topic_id)
        cache = LeaderEpochCache.in_dir(directory)
        name = f"{topic}-{partition}"
        segments = load_segments(directory, config, now_ms, name)
        new_segment = not segments
        recovered_from = None
        if new_segment:
            segments = [LogSegment.create(directory, log_start_offset, config, now_ms)]
        else:
            recovered_from = recover_segments(segments, recovery_point, cache, name)
        log = cls(
            directory,
            topic,
            partition,
            config,
            segments,
            log_start_offset=max(log_start_offset, segments[0].base_offset),
            recovery_point=0,
            topic_id=topic_id if topic_id is not None else stored_id,
            leader_epoch_cache=cache,
            producer_state=ProducerStateManager(directory),
            producer_id_expiration_ms=producer_id_expiration_ms,
        )
        if created:
            log._dirs_to_flush.add(directory.parent)
        if new_segment:
            log._dirs_to_flush.add(directory)
        if log._log_start_offset > log.log_end_offset:
            log.truncate_fully_and_start_at(log._log_start_offset, now_ms=now_ms)
        log._recovery_point = min(recovery_point, log.log_end_offset)
        cache.truncate_from_end(log.log_end_offset)
        cache.truncate_from_start(log._log_start_offset)
        log.producer_state.remove_stray_snapshots(segment.base_offset for segment in log._segments)
        log._rebuild_producer_state(now_ms, rebuild_txn_index_from=recovered_from)
        return log

    def _rebuild_producer_state(self, now_ms: int, rebuild_txn_index_from: int | None = None) -> None:
        """Kafka's rebuildProducerState: load the latest usable producer snapshot, then replay the batch headers
        (and end markers) of every segment after it, whatever their timestamps (a transaction stays open however
        old its records' CreateTime is). Snapshots are taken on the way at the base offsets of the last two
        segments, and at the log end offset. Producers idle for producer.id.expiration.ms with no transaction open
        are left out.

        The transaction indexes of the segments from `rebuild_txn_index_from` on (those recovery re-validated)
        are rebuilt on the way, as Kafka's segment recovery does: the snapshot the replay starts from is one at
        or below that offset, so those segments are replayed whole, and the later snapshots are deleted. The
        other segments' indexes are trusted."""
        segments = self._segments
        end = segments[-1].next_offset
        reload_to = end if rebuild_txn_index_from is None else min(end, rebuild_txn_index_from)
        expiration_ms = self.producer_id_expiration_ms
        start = self.producer_state.truncate_and_reload(self._log_start_offset, reload_to, now_ms, expiration_ms)
        snapshot_at = {segment.base_offset for segment in segments[-2:]}
        first = 0 if start is None else max(bisect_right(segments, start, key=_base_offset) - 1, 0)
        for segment in segments[first:]:
            if segment.base_offset in snapshot_at:
                self._take_producer_snapshot(segment.base_offset, sync=True)
            rebuild = rebuild_txn_index_from is not None and segment.base_offset >= rebuild_txn_index_from
            if rebuild:
                segment.txn_index.reset()
            from_position = 0
            if start is not None and start > segment.base_offset:
                found = segment.translate_offset(start)
                if found is None:
                    continue
                from_position = found.position
            for position, header in segment.batches(from_position):
                if header.producer_id >= 0:
                    marker = parse_marker(segment.read_bytes(position, header.size), header) \
                        if header.is_control else None
                    self._update_producer_state(segment, header, marker, index_aborts=rebuild)
        self.producer_state.remove_expired(now_ms, expiration_ms)
        self._take_producer_snapshot(end, sync=True)

    def _take_producer_snapshot(self, offset: int, *, sync: bool) -> None:
        """A producer snapshot at `offset`, if the state moved past the last one. One taken without fsync (at a
        roll, which is on the append path) is fsynced by the first flush that reaches its offset."""
        if self.producer_state.take_snapshot(offset, sync=sync):
            self._dirs_to_flush.add(self.dir)
            if not sync:
                self._unflushed_snapshots.add(offset)

    def _update_producer_state(self, segment: LogSegment, header: BatchHeader, marker: EndTransactionMarker | None,
                               *, index_aborts: bool = True) -> None:
        """Kafka's order: a transaction an end marker closes is indexed (if aborted) before it is completed, so
        the index records the last stable offset as of the marker."""
        completed = self.producer_state.update(header, marker)
        if completed is not None:
            if completed.is_aborted and index_aborts:
                segment.txn_index.append(AbortedTxn(completed.producer_id, completed.first_offset,
                                                    completed.last_offset,
                                                    self.producer_state.last_stable_offset(completed)))
            self.producer_state.complete_txn(completed)

    # ----------------------------------------------------------------- offsets

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        """The next offset to be assigned."""
        return self._segments[-1].next_offset

    @property
    def recovery_point(self) -> int:
        """Everything below this offset is fsynced (with its indexes)."""
        return self._recovery_point

    @property
    def segments(self) -> list[LogSegment]:
        return list(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def first_unstable_offset(self) -> int | None:
        """Where the earliest transaction not yet stable starts (never below the log start offset); None when
        every record is stable. The last stable offset is this or the high watermark, whichever is lower."""
        offset = self.producer_state.first_unstable_offset()
        return None if offset is None else max(offset, self._log_start_offset)

    @property
    def size_in_bytes(self) -> int:
        return sum(segment.size for segment in self._segments)

    # ----------------------------------------------------------------- appending

    def append_as_leader(self, records: bytes | bytearray, leader_epoch: int, now_ms: int, *,
                         origin: AppendOrigin = AppendOrigin.CLIENT) -> AppendInfo:
        """Validate a produce request's records for this partition, assign offsets and append.

        A bytearray is stamped in place; other buffers are copied first. Raises the storage
        errors of the checks (corrupt/invalid batches, sizes, timestamps, idempotence). The
        transaction coordinator (origin COORDINATOR) appends end-transaction markers here too.
        """
        buf = records if isinstance(records, bytearray) else bytearray(records)
        if origin is AppendOrigin.COORDINATOR and len(buf) >= HEADER_SIZE and parse_header(buf).is_control:
            return self._append_end_txn_marker(buf, leader_epoch, now_ms)
        headers = validate_batches(buf)
        self._check_sizes(headers, len(buf))
        headers = validate_records(buf, headers, self.config, now_ms, self.name)
        if origin is AppendOrigin.COORDINATOR:
            self.producer_state.check_coordinator_batches(headers)
            duplicate = None
        else:
            duplicate = self.producer_state.check_client_batches(headers)
        if duplicate is not None:
            return AppendInfo(
                duplicate.first_offset,
                duplicate.last_offset,
                duplicate.timestamp,
                duplicate.last_offset,
                duplicate.timestamp if self.config.log_append_time else NO_TIMESTAMP,
                self._log_start_offset,
                duplicate.last_offset - duplicate.first_offset + 1,
                duplicate=True,
            )
        append_time = now_ms if self.config.log_append_time else None
        headers = assign_offsets(buf, headers, self.log_end_offset, leader_epoch, append_time)
        if leader_epoch >= 0:
            self.leader_epoch_cache.assign(leader_epoch, headers[0].base_offset)
        return self._append(buf, headers, now_ms, NO_TIMESTAMP if append_time is None else append_time)

    def _append_end_txn_marker(self, buf: bytearray, leader_epoch: int, now_ms: int) -> AppendInfo:
        """One COMMIT or ABORT marker batch (built by build_marker_batch). Raises InvalidProducerEpochError or
        TransactionCoordinatorFencedError for a marker of an older producer or coordinator epoch."""
        header = parse_header(buf)
        if not batch_crc_ok(buf, 0, header) or header.size != len(buf):
            raise CorruptRecordError(f"End transaction marker for {self.name} is not one sound batch")
        marker = parse_marker(buf, header)
        if marker is None:
            raise InvalidRecordError(f"Control batch for {self.name} is not an end transaction marker")
        self.producer_state.check_end_txn_marker(header.producer_id, header.producer_epoch, marker)
        append_time = now_ms if self.config.log_append_time else None
        headers = assign_offsets(buf, [header], self.log_end_offset, leader_epoch, append_time)
        if leader_epoch >= 0:
            self.leader_epoch_cache.assign(leader_epoch, headers[0].base_offset)
        return self._append(buf, headers, now_ms, NO_TIMESTAMP if append_time is None else append_time)

    def append_as_follower(self, records: bytes | bytearray | memoryview, *, now_ms: int | None = None) -> AppendInfo:
        """Append batches fetched from the leader, keeping their offsets and leader epochs.

        A partial batch at the end (a fetch response cut at its size limit) is dropped; the
        returned offsets are -1 if nothing complete was given.
        """
        now = _now_ms() if now_ms is None else now_ms
        with memoryview(records) as view:
            headers = []
            end = 0
            previous_last = -1
            for position, header in iter_batches(view):
                if not batch_crc_ok(view, position, header):
                    raise CorruptRecordError(f"Record is corrupt (stored crc = {header.crc}) in {self.name}")
                if header.base_offset <= previous_last or header.last_offset < header.base_offset:
                    raise CorruptRecordError(f"Out of order offsets found in append to {self.name}")
                headers.append(header)
                previous_last = header.last_offset
                end = position + header.size
            if not headers:
                return AppendInfo(-1, -1, NO_TIMESTAMP, -1, NO_TIMESTAMP, self._log_start_offset, 0)
            if headers[0].base_offset < self.log_end_offset:
                raise UnexpectedAppendOffsetError(
                    f"Unexpected offset in append to {self.name}. First offset {headers[0].base_offset} "
                    f"is less than the next offset {self.log_end_offset}",
                    headers[0].base_offset,
                    headers[-1].last_offset,
                )
            if end > self.config.segment_size:
                raise RecordBatchTooLargeError(
                    f"Message batch size is {end} bytes in append to partition {self.name}, which exceeds "
                    f"the maximum configured segment size of {self.config.segment_size}."
                )
            for header in headers:
                if header.partition_leader_epoch >= 0:
                    self.leader_epoch_cache.assign(header.partition_leader_epoch, header.base_offset)
            return self._append(view[:end], headers, now, NO_TIMESTAMP)

    def _check_sizes(self, headers: list[BatchHeader], total: int) -> None:
        limit = self.config.max_message_bytes
        for header in headers:
            if header.size > limit:
                raise RecordTooLargeError(
                    f"The record batch size in the append to {self.name} is {header.size} bytes "
                    f"which exceeds the maximum configured value of {limit}."
                )
        if total > self.config.segment_size:
            raise RecordBatchTooLargeError(
                f"Message batch size is {total} bytes in append to partition {self.name}, which exceeds "
                f"the maximum configured segment size of {self.config.segment_size}."
            )

    def _append(
        self, data: bytes | bytearray | memoryview, headers: list[BatchHeader], now_ms: int, log_append_time: int
    ) -> AppendInfo:
        max_timestamp, offset_of_max = NO_TIMESTAMP, -1
        records_count = 0
        for header in headers:
            if header.max_timestamp > max_timestamp:
                max_timestamp, offset_of_max = header.max_timestamp, header.last_offset
            records_count += header.records_count
        first_offset, last_offset = headers[0].base_offset, headers[-1].last_offset
        segment = self._maybe_roll(len(data), max_timestamp, first_offset, last_offset, now_ms)
        markers = _end_markers(data, headers)  # read before the write: a marker that cannot be read is refused
        segment.append(data, headers)
        for header, marker in zip(headers, markers, strict=True):
            if header.producer_id >= 0:
                self._update_producer_state(segment, header, marker)
        if self.log_end_offset - self._recovery_point >= self.config.flush_messages:
            self.flush()
        return AppendInfo(
            first_offset,
            last_offset,
            max_timestamp,
            offset_of_max,
            log_append_time,
            self._log_start_offset,
            records_count,
        )

    def _maybe_roll(
        self, size: int, max_timestamp: int, first_offset: int, last_offset: int, now_ms: int
    ) -> LogSegment:
        segment = self._segments[-1]
        if segment.should_roll(size, max_timestamp, last_offset, now_ms):
            return self.roll(now_ms, first_offset)
        return segment

    def roll(self, now_ms: int, expected_next_offset: int | None = None) -> LogSegment:
        """Start a new active segment at the log end offset (or `expected_next_offset` if later), and take a
        producer snapshot at its base offset, so that recovery can start there.

        Neither the old segment nor the snapshot is fsynced here (Kafka schedules that); call
        flush(new base offset) from a worker thread to make them durable and advance the recovery point.
        """
        active = self._segments[-1]
        new_offset = max(expected_next_offset or 0, self.log_end_offset)
        if new_offset == active.base_offset and active.size == 0:
            # Recreate the empty active segment; the old object's descriptors close when no
            # reader holds it any more.
            segment = LogSegment.create(self.dir, new_offset, self.config, now_ms)
            self._segments = [*self._segments[:-1], segment]
        elif new_offset <= active.base_offset:
            raise KafkaStorageError(
                f"Trying to roll a new log segment for {self.name} with start offset {new_offset} "
                f"lower than the active segment's base offset {active.base_offset}"
            )
        else:
            active.on_become_inactive()
            segment = LogSegment.create(self.dir, new_offset, self.config, now_ms)
            self._segments = [*self._segments, segment]
        self._dirs_to_flush.add(self.dir)
        self._take_producer_snapshot(new_offset, sync=False)
        return segment

    def maybe_roll_for_time(self, now_ms: int) -> bool:
        """Roll an active segment that has been open longer than segment.ms; True if it rolled."""
        active = self._segments[-1]
        waited = active.time_waited_for_roll(now_ms, now_ms)
        if active.size > 0 and waited > self.config.segment_ms - active.roll_jitter_ms:
            self.roll(now_ms)
            return True
        return False

    # ----------------------------------------------------------------- reading

    def read(
        self, offset: int, max_bytes: int, *, max_offset: int | None = None, min_one_message: bool = True
    ) -> bytes:
        """Whole batches starting with the one that holds `offset`.

        At most `max_bytes`, except that with `min_one_message` the first batch is returned even
        if larger; only batches entirely below `max_offset` (exclusive, e.g. the high watermark).
        Batches come from a single segment, as in Kafka. Empty at the log end offset; raises
        OffsetOutOfRangeError outside [log start offset, log end offset].
        """
        found = self._slice(offset, max_bytes, max_offset, min_one_message)
        return found[0].read_bytes(found[1], found[2]) if found is not None else b""

    def read_records(
        self, offset: int, max_bytes: int, *, max_offset: int | None = None, min_one_message: bool = True
    ) -> FileRecords | bytes:
        """As `read`, but the batches as a slice of their segment file (Kafka's FileRecords), which a fetch
        response sends with sendfile; b"" when there are none."""
        found = self._slice(offset, max_bytes, max_offset, min_one_message)
        return found[0].file_records(found[1], found[2]) if found is not None else b""

    def read_committed_records(
        self, offset: int, max_bytes: int, *, max_offset: int | None = None, min_one_message: bool = True
    ) -> tuple[FileRecords | bytes, list[AbortedTxn]]:
        """As `read_records`, with the aborted transactions that overlap what is read (a read_committed fetch)."""
        found = self._slice(offset, max_bytes, max_offset, min_one_message)
        if found is None:
            return b"", []
        segment, position, size = found
        upper = segment.offset_index.fetch_upper_bound_offset(position + size)
        if upper is None:
            i = bisect_right(self._segments, segment.base_offset, key=_base_offset)
            upper = self._segments[i].base_offset if i < len(self._segments) else self.log_end_offset
        return segment.file_records(position, size), self.collect_aborted_transactions(offset, upper)

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """The aborted transactions a read_committed fetch from `start_offset` needs to know of: those that end
        at or after it and start below `upper_bound_offset` (the end of what it reads), from the transaction
        indexes of the segments from the one holding `start_offset` on."""
        segments = self._segments
        start = max(bisect_right(segments, start_offset, key=_base_offset) - 1, 0)
        aborted: list[AbortedTxn] = []
        for segment in segments[start:]:
            found = segment.txn_index.collect_aborted_txns(start_offset, upper_bound_offset)
            aborted.extend(found.aborted)
            if found.is_complete:
                break
        return aborted

    def _slice(self, offset: int, max_bytes: int, max_offset: int | None,
               min_one_message: bool) -> tuple[LogSegment, int, int] | None:
        """The segment, position and size of what `read` returns; None when that is nothing."""
        segments = self._segments
        end = segments[-1].next_offset
        if offset < self._log_start_offset or offset > end:
            raise OffsetOutOfRangeError(
                f"Received request for offset {offset} for partition {self.name}, but we only have log "
                f"segments in the range {self._log_start_offset} to {end}."
            )
        if offset == end or (max_offset is not None and offset >= max_offset):
            return None
        start = max(bisect_right(segments, offset, key=_base_offset) - 1, 0)
        for segment in segments[start:]:
            found = segment.slice(offset, max_bytes, max_offset, min_one_message)
            if found is not None:
                return (segment, *found) if found[1] else None
        return None

    @property
    def log_end_offset_metadata(self) -> LogOffsetMetadata:
        """The log end offset with its place: the end of the active segment."""
        active = self._segments[-1]
        return LogOffsetMetadata(active.next_offset, active.base_offset, active.size)

    def offset_metadata(self, offset: int) -> LogOffsetMetadata:
        """Where the batch holding `offset` starts (Kafka's convertToOffsetMetadataOrThrow): free at the log end,
        elsewhere an index lookup and a scan of batch headers. Raises OffsetOutOfRangeError outside the log."""
        segments = self._segments
        end = segments[-1].next_offset
        if offset == end:
            return self.log_end_offset_metadata
        if offset < self._log_start_offset or offset > end:
            raise OffsetOutOfRangeError(
                f"Received request for offset {offset} for partition {self.name}, but we only have log "
                f"segments in the range {self._log_start_offset} to {end}."
            )
        start = max(bisect_right(segments, offset, key=_base_offset) - 1, 0)
        for segment in segments[start:]:
            found = segment.translate_offset(offset)
            if found is not None:
                return LogOffsetMetadata(offset, segment.base_offset, found.position)
        return self.log_end_offset_metadata  # no batch at or past `offset` yet: its records will come at the end

    def fetch_offset_by_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """ListOffsets: the first record with timestamp >= `timestamp`, or None if there is none.

        Also answers Kafka's special timestamps (SpecialTimestamp): latest is the log end offset, earliest and
        earliest-local the log start offset, max-timestamp the record with the largest timestamp, and the two
        tiered-storage ones offset -1, as there is no tiered storage. The timestamp is -1 where there is none.
        Only the matching batch is decoded.
        """
        if timestamp == SpecialTimestamp.LATEST_TIMESTAMP:
            latest = self.leader_epoch_cache.latest_epoch
            return TimestampAndOffset(self.log_end_offset, NO_TIMESTAMP, -1 if latest is None else latest)
        if timestamp in (SpecialTimestamp.EARLIEST_TIMESTAMP, SpecialTimestamp.EARLIEST_LOCAL_TIMESTAMP):
            earliest = self.leader_epoch_cache.earliest_entry
            epoch = earliest.epoch if earliest is not None and earliest.start_offset <= self._log_start_offset else -1
            return TimestampAndOffset(self._log_start_offset, NO_TIMESTAMP, epoch)
        if timestamp == SpecialTimestamp.MAX_TIMESTAMP:
            return self.offset_of_max_timestamp()
        if timestamp in (SpecialTimestamp.LATEST_TIERED_TIMESTAMP, SpecialTimestamp.EARLIEST_PENDING_UPLOAD_TIMESTAMP):
            return TimestampAndOffset(-1, NO_TIMESTAMP, -1)
        start_offset = self._log_start_offset
        target = next((s for s in self._segments if s.largest_timestamp >= timestamp), None)
        if target is None:
            return None
        for position, header in target.batches(target.timestamp_search_start(timestamp, start_offset)):
            if header.max_timestamp < timestamp:
                continue
            for offset, record_timestamp in self._record_timestamps(target, position, header):
                if record_timestamp >= timestamp and offset >= start_offset:
                    return TimestampAndOffset(offset, record_timestamp, max(header.partition_leader_epoch, -1))
        return None

    def offset_of_max_timestamp(self) -> TimestampAndOffset | None:
        """ListOffsets MAX_TIMESTAMP: the record with the largest timestamp (the first such record), or None for
        an empty log."""
        segments = self._segments
        best = max(segments, key=lambda s: s.max_timestamp_so_far.timestamp)
        timestamp, offset = best.max_timestamp_so_far
        if timestamp == NO_TIMESTAMP:
            return None
        for position, header in best.batches(best.offset_index.lookup(offset).position):
            if header.max_timestamp == timestamp:
                for record_offset, record_timestamp in self._record_timestamps(best, position, header):
                    if record_timestamp == timestamp:
                        return TimestampAndOffset(record_offset, timestamp, max(header.partition_leader_epoch, -1))
        return None

    def _record_timestamps(self, segment: LogSegment, position: int, header: BatchHeader) -> list[tuple[int, int]]:
        """(offset, timestamp) of each record of one batch; decompresses it if needed."""
        data = segment.read_bytes(position, header.size)
        try:
            return [(record.offset, record.timestamp) for record in DefaultRecordBatch(data)]
        except Exception as e:  # any codec or framing failure means the stored batch is unreadable
            raise CorruptRecordError(f"Cannot decode batch at offset {header.base_offset} of {self.name}: {e}") from e

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (largest epoch <= `epoch`, its end offset); (-1, -1) if unknown."""
        return self.leader_epoch_cache.end_offset_for(epoch, self.log_end_offset)

    # ----------------------------------------------------------------- truncation and retention

    def truncate_to(self, offset: int, *, now_ms: int | None = None) -> None:
        """Follower truncation: remove everything from `offset` on (the whole batch holding it).

        The leader-epoch cache is trimmed along; the producer snapshots past the new end are deleted and the
        producer state is rebuilt from the latest one left and the batches after it.
        """
        if offset < 0:
            raise ValueError(f"Cannot truncate partition {self.name} to a negative offset ({offset})")
        now = _now_ms() if now_ms is None else now_ms
        if offset >= self.log_end_offset:
            self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
            return
        if self._segments[0].base_offset > offset:
            self.truncate_fully_and_start_at(offset, now_ms=now)
            return
        logger.info("%s: truncating to offset %d (log end offset %d)", self.name, offset, self.log_end_offset)
        self.truncations += 1
        keep = [s for s in self._segments if s.base_offset <= offset]
        for segment in self._segments[len(keep) :]:
            segment.delete()
        self._segments = keep
        keep[-1].truncate_to(offset, now)
        end = self.log_end_offset
        self.leader_epoch_cache.truncate_from_end(end)
        self._log_start_offset = min(self._log_start_offset, end)
        self._recovery_point = min(self._recovery_point, end)
        self._rebuild_producer_state(now)

    def truncate_fully_and_start_at(self, offset: int, *, now_ms: int | None = None) -> None:
        """Delete all data and start empty at `offset` (a follower far behind the leader's start)."""
        now = _now_ms() if now_ms is None else now_ms
        logger.info("%s: deleting all data and starting at offset %d", self.name, offset)
        self.truncations += 1
        for segment in self._segments:
            segment.delete()
        self._segments = [LogSegment.create(self.dir, offset, self.config, now)]
        self._dirs_to_flush.add(self.dir)
        self.leader_epoch_cache.clear_and_flush()
        self.producer_state.truncate_fully_and_start_at(offset)
        self._log_start_offset = offset
        self._recovery_point = offset

    def maybe_increment_log_start_offset(self, offset: int) -> int:
        """DeleteRecords: move the log start offset up to `offset` and delete the segments wholly below it.

        The caller checks `offset` against the high watermark. Returns the new log start offset.
        """
        if offset > self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"Cannot increment the log start offset to {offset} of partition {self.name} "
                f"since it is larger than the log end offset {self.log_end_offset}"
            )
        if offset > self._log_start_offset:
            self._log_start_offset = offset
            self.leader_epoch_cache.truncate_from_start(offset)
            self.producer_state.on_log_start_offset_incremented(offset)
            self._delete_segments(
                self._deletable(lambda s, nxt: nxt is not None and nxt.base_offset <= offset, offset),
                f"below the log start offset {offset}",
            )
        return self._log_start_offset

    def delete_old_segments(self, now_ms: int, high_watermark: int) -> int:
        """Retention: delete segments below the log start offset and, with cleanup.policy=delete,
        those past retention.bytes or retention.ms. Only segments wholly below `high_watermark`
        go; if every segment goes, an empty one is rolled first. Returns the number deleted."""
        lso = self._log_start_offset
        deleted = self._delete_segments(
            self._deletable(lambda s, nxt: nxt is not None and nxt.base_offset <= lso, high_watermark),
            f"below the log start offset {lso}",
            now_ms,
        )
        if not self.config.delete_enabled:
            return deleted
        retention_bytes = self.config.retention_bytes
        if retention_bytes >= 0 and self.size_in_bytes >= retention_bytes:
            excess = self.size_in_bytes - retention_bytes

            def over_size(segment: LogSegment, _next: LogSegment | None) -> bool:
                nonlocal excess
                if excess - segment.size < 0:
                    return False
                excess -= segment.size
                return True

            deleted += self._delete_segments(
                self._deletable(over_size, high_watermark), f"retention.bytes {retention_bytes} exceeded", now_ms
            )
        retention_ms = self.config.retention_ms
        if retention_ms >= 0:
            deleted += self._delete_segments(
                self._deletable(lambda s, nxt: now_ms - s.largest_timestamp > retention_ms, high_watermark),
                f"retention.ms {retention_ms} exceeded",
                now_ms,
            )
        return deleted

    def _deletable(self, predicate: SegmentPredicate, high_watermark: int) -> list[LogSegment]:
        """Oldest segments, in order, for which `predicate(segment, next segment)` holds, stopping
        at the first that fails, that reaches `high_watermark`, or that is the empty active one."""
        segments = self._segments
        deletable = []
        for i, segment in enumerate(segments):
            following = segments[i + 1] if i + 1 < len(segments) else None
            upper = following.base_offset if following is not None else self.log_end_offset
            if high_watermark < upper or (following is None and segment.size == 0):
                break
            if not predicate(segment, following):
                break
            deletable.append(segment)
        return deletable

    def _delete_segments(self, deletable: list[LogSegment], reason: str, now_ms: int | None = None) -> int:
        if not deletable:
            return 0
        logger.info(
            "%s: deleting segments %s (%s)", self.name, ", ".join(str(s.base_offset) for s in deletable), reason
        )
        if len(deletable) == len(self._segments):
            self.roll(_now_ms() if now_ms is None else now_ms)
        remaining = self._segments[len(deletable) :]
        self._segments = remaining
        self.producer_state.delete_snapshots_before(remaining[0].base_offset)
        if remaining[0].base_offset > self._log_start_offset:
            self._log_start_offset = remaining[0].base_offset
            self.leader_epoch_cache.truncate_from_start(self._log_start_offset)
            self.producer_state.on_log_start_offset_incremented(self._log_start_offset)
        for segment in deletable:
            segment.delete()
        return len(deletable)

    def replace_segments(self, cleaned_base: int, replaced: list[LogSegment], now_ms: int,
                         on_swap_begun: Callable[[], None] | None = None) -> LogSegment:
        """Put the cleaned segment whose files a cleaning left as `.swap` (storage/log_cleaner.py) in place of
        `replaced`, consecutive segments below the active one (Kafka's replaceSegments). Readers still holding
        the old segments keep reading them. `.cleaned` files are renamed to `.swap` first: from there on a crash
        finishes the swap when the log is loaded again."""
        first = self._segments.index(replaced[0]) if replaced[0] in self._segments else -1
        if (first < 0 or self._segments[first : first + len(replaced)] != replaced
                or first + len(replaced) >= len(self._segments)):
            raise ValueError(f"{self.name}: segments {replaced} are not consecutive inactive segments of this log")
        begin_swap(self.dir, cleaned_base)
        if on_swap_begun is not None:
            on_swap_begun()
        for segment in replaced:
            segment.delete()
        complete_swap(self.dir, cleaned_base, [])
        cleaned = LogSegment.open(self.dir, cleaned_base, self.config, now_ms)
        self._segments[first : first + len(replaced)] = [cleaned]
        return cleaned

    # ----------------------------------------------------------------- durability and lifecycle

    def flush(self, up_to: int | None = None) -> None:
        """fsync segments (and indexes) holding offsets below `up_to` (default: everything), and the
        producer snapshots rolls wrote at or below it, and advance the recovery point to it."""
        segments = self._segments
        end = segments[-1].next_offset
        offset = end if up_to is None else min(up_to, end)
        snapshots = sorted(o for o in tuple(self._unflushed_snapshots) if o <= offset)
        if offset <= self._recovery_point and not self._dirs_to_flush and not snapshots:
            return
        for snapshot in snapshots:
            flush_snapshot(snapshot_file(self.dir, snapshot))
            self._unflushed_snapshots.discard(snapshot)
        for i, segment in enumerate(segments):
            if segment.base_offset >= offset:
                break
            upper = segments[i + 1].base_offset if i + 1 < len(segments) else None
            if upper is None or upper > self._recovery_point:
                segment.flush()
        while self._dirs_to_flush:
            fsync_dir(self._dirs_to_flush.pop())
        self._recovery_point = max(self._recovery_point, offset)

    def update_config(self, config: LogConfig) -> None:
        self.config = config
        for segment in self._segments:
            segment.update_config(config)

    def remove_expired_producers(self, now_ms: int, expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS) -> None:
        self.producer_state.remove_expired(now_ms, expiration_ms)

    def close(self) -> None:
        """Take a producer snapshot at the log end offset (so that the next open replays nothing), flush
        everything (the recovery point becomes the log end offset) and close the files."""
        self._take_producer_snapshot(self.log_end_offset, sync=True)
        self.flush()
        for segment in self._segments:
            segment.close()

    def abandon(self) -> None:
        """Let go of the files without flushing anything, as a killed process would (crash tests): what was
        written stays in the files as it is, for recovery to find."""
        for segment in self._segments:
            segment.abandon()

    def delete(self) -> None:
        """Remove the partition directory and everything in it (topic deletion). As with retention, a segment's
        descriptor stays open until no reader (a fetch on a worker thread) holds the segment any more."""
        self.deleted = True
        for segment in self._segments:
            segment.delete()
        shutil.rmtree(self.dir, ignore_errors=True)

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    def __repr__(self) -> str:
        return (
            f"Log({self.name}, log_start_offset={self._log_start_offset}, "
            f"log_end_offset={self.log_end_offset}, segments={len(self._segments)})"
        )

