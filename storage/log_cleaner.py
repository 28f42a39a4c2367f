"""The sans-IO core of log compaction: Kafka's offset map, cleaned transaction metadata and batch filter.

A cleaning pass first reads the dirty section of a log into an `OffsetMap` (the hash of each record key to the last
offset that key was written at, bounded as Kafka's SkimpyOffsetMap is by log.cleaner.dedupe.buffer.size), then
rewrites the segments up to that section with `filter_batches`, which applies Kafka's MemoryRecords.filterTo with the
retention rules of Kafka's Cleaner: the last record of each key stays at its original offset; a tombstone stays until
its batch's delete horizon (set by the first cleaning that sees it to now + delete.retention.ms); records of aborted
transactions go in the first pass; transaction markers go as CleanedTransactionMetadata allows; a producer's last
batch stays (emptied if need be) so its sequence numbers survive.

Cost: a cleaning reads and hashes every record's key twice (once to map it, once to look it up), and re-encodes the
records a batch keeps when it loses others (a batch whose records all stay is copied as it is). That work is compiled
(protocol/_record_codec.c's put_records, retained and rewrite, built at install) and makes no Python object per
record but the map's entries; `_python_put_records`, `_python_retained` and `_python_rewrite` here are its reference,
and the walk where it is not built or MINIKAFKA_PURE_PYTHON=1 asks for it (each batch's records decoded once).
docs/performance.md has the figures.
"""

from __future__ import annotations

import hashlib
import heapq
import os
import struct
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

from crc32c import crc32c
from kafka import codec as kafka_codec
from kafka.record.util import encode_varint

from minikafka.protocol.compression import decompress, gzip_compress
from minikafka.protocol.end_transaction_marker import ControlRecordType, parse_marker
from minikafka.protocol.record_batch import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    HEADER_SIZE,
    LOG_APPEND_TIME,
    LOG_OVERHEAD,
    BatchHeader,
    iter_batches,
)
from minikafka.protocol.record_columns import PURE_PYTHON_ENV, Record, _decode

from .checkpoint import fsync_dir, write_synced
from .segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, LogSegment, file_prefix
from .transaction_index import AbortedTxn, TransactionIndex

# Kafka's DefaultRecordBatch attribute bit saying the base timestamp is the batch's delete horizon.
DELETE_HORIZON_MASK = 0x40
# SkimpyOffsetMap's entry: an MD5 digest of the key and an 8-byte offset.
HASH_SIZE = 16
BYTES_PER_ENTRY = HASH_SIZE + 8
# A rewritten batch keeps its codec (Kafka's buildRetainedRecordsInto): codec id -> (available?, compress).
_COMPRESSORS: dict[int, tuple[Callable[[], bool], Callable[[bytes], bytes]]] = {
    1: (lambda: True, gzip_compress),
    2: (kafka_codec.has_snappy, kafka_codec.snappy_encode),
    3: (kafka_codec.has_lz4, kafka_codec.lz4_encode),
    4: (kafka_codec.has_zstd, kafka_codec.zstd_encode),
}

_HEADER = struct.Struct(">qiibIhiqqqhii")
_CRC = struct.Struct(">I")


class UncleanableBatchError(ValueError):
    """A batch this cleaner cannot rewrite; the partition is marked uncleanable, as Kafka does on a cleaning error."""


class OffsetMap:
    """Key hash to the last offset written with that key, with Kafka's SkimpyOffsetMap capacity: memory // 24
    slots, filled to at most log.cleaner.io.buffer.load.factor of them (Cleaner's maxDesiredMapSize)."""

    def __init__(self, memory: int, load_factor: float = 0.9) -> None:
        self.slots = memory // BYTES_PER_ENTRY
        if self.slots <= 0:
            raise ValueError(f"Offset map memory of {memory} bytes holds no entry")
        self.max_desired_size = int(self.slots * load_factor)
        self._offsets: dict[bytes, int] = {}
        self.latest_offset = -1

    def __len__(self) -> int:
        return len(self._offsets)

    def put_records(self, buf: bytes | bytearray | memoryview, pos: int, end: int, count: int, base_offset: int,
                    start_offset: int) -> bool:
        """Put each keyed record of buf[pos:end] (a batch's `count` records) at or past `start_offset`, in order;
        True when the map filled up before the last of them."""
        full, last = _put_records(buf, pos, end, count, base_offset, start_offset, self._offsets,
                                  self.max_desired_size)
        if last is not None:
            self.latest_offset = last
        return full

    def retained(self, buf: bytes | bytearray | memoryview, pos: int, end: int, count: int, base_offset: int,
                 keep_tombstones: bool) -> tuple[int, bytes, bool, list[Record] | None]:
        """Which records of buf[pos:end] (a batch's `count` records) a cleaning keeps: those past the map's last
        offset, and each keyed one at or past its key's last offset (a tombstone only if `keep_tombstones`).
        Returns how many, a byte per record (1: kept), whether a kept one is a tombstone, and the records where
        the Python walk decoded them (a rewrite then takes them rather than decoding them again)."""
        if _retained is _python_retained:
            records = _decode(buf, pos, end, count)
            return *_retained_of(records, base_offset, self._offsets, self.latest_offset, keep_tombstones), records
        return *_retained(buf, pos, end, count, base_offset, self._offsets, self.latest_offset, keep_tombstones), None

    def get(self, key: bytes) -> int:
        """The last offset of `key`, -1 if the map has none."""
        return self._offsets.get(hashlib.md5(key).digest(), -1)

    def clear(self) -> None:
        self._offsets.clear()
        self.latest_offset = -1


class CleanedTransactionMetadata:
    """Which transactions a pass over a log has seen, to tell the records of aborted transactions and the markers
    that may go (Kafka's CleanedTransactionMetadata). Batches must be shown in offset order."""

    def __init__(self, aborted: Iterable[AbortedTxn]) -> None:
        self._aborted = [(txn.first_offset, txn.producer_id, txn) for txn in aborted]
        heapq.heapify(self._aborted)
        self._ongoing_committed: set[int] = set()
        # producer id -> (its aborted transaction, whether a batch of it was seen)
        self._ongoing_aborted: dict[int, tuple[AbortedTxn, bool]] = {}
        self.cleaned_aborted: list[AbortedTxn] = []

    def _consume_aborted_up_to(self, offset: int) -> None:
        while self._aborted and self._aborted[0][0] <= offset:
            _, producer_id, txn = heapq.heappop(self._aborted)
            self._ongoing_aborted[producer_id] = (txn, False)

    def on_control_batch_read(self, buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader) -> bool:
        """True when this marker may be removed: its transaction left no batch behind."""
        self._consume_aborted_up_to(header.last_offset)
        marker = parse_marker(memoryview(buf)[pos : pos + header.size], header)
        if marker is None:
            return False
        producer_id = header.producer_id
        if marker.control_type == ControlRecordType.ABORT:
            ongoing = self._ongoing_aborted.pop(producer_id, None)
            if ongoing is not None and ongoing[1]:
                # Records of the aborted transaction remain in this pass: keep the marker and its index entry.
                self.cleaned_aborted.append(ongoing[0])
                return False
            return True
        if marker.control_type == ControlRecordType.COMMIT:
            if producer_id in self._ongoing_committed:
                self._ongoing_committed.discard(producer_id)
                return False
            return True
        return False

    def on_batch_read(self, header: BatchHeader) -> bool:
        """True when the batch belongs to an aborted transaction (its records may all go)."""
        self._consume_aborted_up_to(header.last_offset)
        if not header.is_transactional:
            return False
        ongoing = self._ongoing_aborted.get(header.producer_id)
        if ongoing is not None:
            self._ongoing_aborted[header.producer_id] = (ongoing[0], True)
            return True
        self._ongoing_committed.add(header.producer_id)
        return False


def delete_horizon_ms(header: BatchHeader) -> int | None:
    """The batch's delete horizon, if a cleaning has set one."""
    return header.base_timestamp if header.attributes & DELETE_HORIZON_MASK else None


def batch_records(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader) -> list[Record]:
    """The batch's records as (offset delta, timestamp delta, key, value, headers), decompressed if need be."""
    data, start, end = _records_of(buf, pos, header)
    return _decode(data, start, end, header.records_count)


def _records_of(buf: bytes | bytearray | memoryview, pos: int,
                header: BatchHeader) -> tuple[bytes | bytearray | memoryview, int, int]:
    """Where the batch's records are: (buffer, start, end), decompressed if need be."""
    if header.compression:
        data = decompress(header.compression, memoryview(buf)[pos + HEADER_SIZE : pos + header.size], 1 << 31)
        return data, 0, len(data)
    return buf, pos + HEADER_SIZE, pos + header.size


def _python_put_records(buf: bytes | bytearray | memoryview, pos: int, end: int, count: int, base_offset: int,
                        start_offset: int, offsets: dict[bytes, int], max_size: int) -> tuple[bool, int | None]:
    """OffsetMap.put_records over the map's dict: (whether it filled up, the last offset put). The reference for
    protocol/_record_codec.c's put_records, and the one where that is not built."""
    last = None
    for offset_delta, _ts, key, _value, _headers in _decode(buf, pos, end, count):
        offset = base_offset + offset_delta
        if key is None or offset < start_offset:
            continue
        if len(offsets) >= max_size:
            return True, last
        offsets[hashlib.md5(key).digest()] = offset
        last = offset
    return False, last


def _python_retained(buf: bytes | bytearray | memoryview, pos: int, end: int, count: int, base_offset: int,
                     offsets: dict[bytes, int], latest_offset: int, keep_tombstones: bool) -> tuple[int, bytes, bool]:
    """OffsetMap.retained over the map's dict. The reference for protocol/_record_codec.c's retained, and the one
    where that is not built."""
    return _retained_of(_decode(buf, pos, end, count), base_offset, offsets, latest_offset, keep_tombstones)


def _retained_of(records: list[Record], base_offset: int, offsets: dict[bytes, int], latest_offset: int,
                 keep_tombstones: bool) -> tuple[int, bytes, bool]:
    flags = bytearray(len(records))
    kept = 0
    tombstones = False
    for index, (offset_delta, _ts, key, value, _headers) in enumerate(records):
        offset = base_offset + offset_delta
        if offset > latest_offset:
            keep = True
        elif key is None:
            keep = False
        else:
            keep = offset >= offsets.get(hashlib.md5(key).digest(), -1) and (value is not None or keep_tombstones)
        if keep:
            flags[index] = 1
            kept += 1
            tombstones = tombstones or value is None
    return kept, bytes(flags), tombstones


def _load_compiled() -> tuple[Callable[..., tuple[bool, int | None]], Callable[..., tuple[int, bytes, bool]],
                              Callable[..., tuple[bytes, int, int] | None]] | None:
    """protocol/_record_codec.c's put_records, retained and rewrite; None where it is not built or not wanted (the
    switch the log validator's record walk follows)."""
    if os.environ.get(PURE_PYTHON_ENV) == "1":
        return None
    try:
        from minikafka.protocol import _record_codec
    except ImportError:
        return None
    return _record_codec.put_records, _record_codec.retained, _record_codec.rewrite


def build_offset_map(buf: bytes | bytearray | memoryview, offset_map: OffsetMap, start_offset: int,
                     aborted: Iterable[AbortedTxn]) -> bool:
    """Add the keys of the batches in `buf` at or past `start_offset` to the map, leaving out control batches and
    aborted transactions as Kafka's buildOffsetMapForSegment does; True when the map filled up before the end."""
    pending = sorted(aborted, key=lambda txn: txn.first_offset)
    aborted_producers: set[int] = set()
    for pos, header in iter_batches(buf):
        while pending and pending[0].first_offset <= header.base_offset:
            aborted_producers.add(pending.pop(0).producer_id)
        if header.is_control:
            marker = parse_marker(memoryview(buf)[pos : pos + header.size], header)
            if marker is not None and marker.control_type == ControlRecordType.ABORT:
                aborted_producers.discard(header.producer_id)
            continue
        if header.is_transactional and header.producer_id in aborted_producers:
            continue
        data, start, end = _records_of(buf, pos, header)
        if offset_map.put_records(data, start, end, header.records_count, header.base_offset, start_offset):
            return True
    return False


class FilterResult(NamedTuple):
    """The rewritten bytes, and what a cleaning log line and the segment's indexes need."""

    output: bytes
    bytes_read: int
    messages_read: int
    messages_retained: int


def _varint(value: int) -> bytes:
    out = bytearray()
    encode_varint(value, out.append)
    return bytes(out)


def _encode_record(offset_delta: int, timestamp_delta: int, key: bytes | None, value: bytes | None,
                   headers: list[tuple[bytes, bytes | None]]) -> bytes:
    parts = [b"\x00", _varint(timestamp_delta), _varint(offset_delta)]
    for field in (key, value):
        parts.append(_varint(-1) if field is None else _varint(len(field)) + field)
    parts.append(_varint(len(headers)))
    for header_key, header_value in headers:
        parts.append(_varint(len(header_key)) + header_key)
        parts.append(_varint(-1) if header_value is None else _varint(len(header_value)) + header_value)
    body = b"".join(parts)
    return _varint(len(body)) + body


def _write_batch(header: BatchHeader, attributes: int, base_timestamp: int, max_timestamp: int,
                 records_count: int, payload: bytes) -> bytes:
    size = HEADER_SIZE + len(payload)
    batch = bytearray(size)
    _HEADER.pack_into(batch, 0, header.base_offset, size - LOG_OVERHEAD, header.partition_leader_epoch, 2, 0,
                      attributes, header.last_offset_delta, base_timestamp, max_timestamp, header.producer_id,
                      header.producer_epoch, header.base_sequence, records_count)
    batch[HEADER_SIZE:] = payload
    _CRC.pack_into(batch, CRC_OFFSET, crc32c(memoryview(batch)[ATTRIBUTES_OFFSET:]))
    return bytes(batch)


def _rebuild(header: BatchHeader, records: list[tuple[int, int, bytes | None, bytes | None,
                                                      list[tuple[bytes, bytes | None]]]],
             horizon: int | None) -> bytes:
    """The batch with only `records` (absolute offset, absolute timestamp, ...), its last offset kept so the
    producer's last sequence survives (Kafka's buildRetainedRecordsInto)."""
    log_append = header.timestamp_type == LOG_APPEND_TIME
    payload, base_timestamp, max_timestamp = _encoded_records(
        [(offset - header.base_offset, header.max_timestamp if log_append else ts, key, value, hdrs)
         for offset, ts, key, value, hdrs in records], horizon)
    return _rebuilt_batch(header, payload, len(records), base_timestamp, max_timestamp, horizon)


def _encoded_records(records: list[Record], horizon: int | None) -> tuple[bytes, int, int]:
    """Records (offset delta, absolute timestamp, key, value, headers) encoded against the batch's base timestamp
    (the delete horizon if set, else the first record's), with that base and the greatest timestamp."""
    base = horizon if horizon is not None else records[0][1]
    max_timestamp = max(ts for _o, ts, _k, _v, _h in records)
    payload = b"".join(_encode_record(offset_delta, ts - base, key, value, hdrs)
                       for offset_delta, ts, key, value, hdrs in records)
    return payload, base, max_timestamp


def _python_rewrite(buf: bytes | bytearray | memoryview, pos: int, end: int, count: int, flags: bytes,
                    base_timestamp: int, log_append_time: int | None,
                    horizon: int | None) -> tuple[bytes, int, int] | None:
    """The records of buf[pos:end] (a batch's `count`) whose flag is 1, re-encoded as _rebuild encodes them, with
    the batch's base and max timestamps: those of the records (all `log_append_time` if set), the base one the
    delete horizon if set. The reference for protocol/_record_codec.c's rewrite, and the one where that is not
    built (which answers None, leaving it to this one, where a timestamp leaves Java's long)."""
    return _rewrite_of(_decode(buf, pos, end, count), flags, base_timestamp, log_append_time, horizon)


def _rewrite_of(decoded: list[Record], flags: bytes, base_timestamp: int, log_append_time: int | None,
                horizon: int | None) -> tuple[bytes, int, int]:
    records = [(offset_delta, base_timestamp + ts_delta if log_append_time is None else log_append_time, key, value,
                hdrs)
               for (offset_delta, ts_delta, key, value, hdrs), keep in zip(decoded, flags, strict=True) if keep]
    return _encoded_records(records, horizon)


_put_records, _retained, _rewrite = _load_compiled() or (_python_put_records, _python_retained, _python_rewrite)


def _rewritten(header: BatchHeader, data: bytes | bytearray | memoryview, start: int, end: int, flags: bytes,
               kept: int, horizon: int | None, decoded: list[Record] | None) -> bytes:
    """The batch with only its records flagged 1 in `flags`: _rebuild, its records re-encoded without decoding
    them into Python objects where the compiled rewrite is built, from `decoded` where the Python walk has them."""
    log_append_time = header.max_timestamp if header.timestamp_type == LOG_APPEND_TIME else None
    rewritten: tuple[bytes, int, int] | None
    if decoded is not None:
        rewritten = _rewrite_of(decoded, flags, header.base_timestamp, log_append_time, horizon)
    else:
        args = (data, start, end, header.records_count, flags, header.base_timestamp, log_append_time, horizon)
        rewritten = _rewrite(*args) or _python_rewrite(*args)
    assert rewritten is not None
    payload, base_timestamp, max_timestamp = rewritten
    return _rebuilt_batch(header, payload, kept, base_timestamp, max_timestamp, horizon)


def _rebuilt_batch(header: BatchHeader, payload: bytes, records_count: int, base_timestamp: int, max_timestamp: int,
                   horizon: int | None) -> bytes:
    """The batch holding the re-encoded records `payload`, compressed with the batch's codec."""
    attributes = header.attributes & ~DELETE_HORIZON_MASK
    if horizon is not None:
        attributes |= DELETE_HORIZON_MASK
    if header.compression:
        codec = _COMPRESSORS.get(header.compression)
        if codec is None or not codec[0]():
            raise UncleanableBatchError(
                f"Batch at offset {header.base_offset} uses compression codec {header.compression}, "
                "which this broker cannot write")
        payload = codec[1](payload)
    return _write_batch(header, attributes, base_timestamp, max_timestamp, records_count, payload)


def _empty_batch(header: BatchHeader) -> bytes:
    """Kafka's writeEmptyHeader: the batch's offsets, producer and sequence kept, no records."""
    attributes = header.attributes & ~(DELETE_HORIZON_MASK | 0x07)
    return _write_batch(header, attributes, header.max_timestamp, header.max_timestamp, 0, b"")


def filter_batches(buf: bytes | bytearray | memoryview, offset_map: OffsetMap,
                   txn: CleanedTransactionMetadata, last_batch_offset_of_producer: dict[int, int],
                   now_ms: int, delete_retention_ms: int) -> FilterResult:
    """Kafka's MemoryRecords.filterTo with the Cleaner's retention rules over the batches of `buf`."""
    out: list[bytes] = []
    bytes_read = messages_read = messages_retained = 0
    for pos, header in iter_batches(buf):
        bytes_read += header.size
        if header.is_control:
            can_discard = txn.on_control_batch_read(buf, pos, header)
            horizon = delete_horizon_ms(header)
            discard = can_discard and horizon is not None and horizon <= now_ms
        else:
            can_discard = discard = txn.on_batch_read(header)
        last_of_producer = (header.has_producer_id
                            and last_batch_offset_of_producer.get(header.producer_id) == header.last_offset)
        retain_empty = last_of_producer
        if discard and not retain_empty:
            continue
        horizon = delete_horizon_ms(header)
        if not (discard or header.is_control):
            # A data batch: its records' keys looked up without decoding them into objects; the batch copied as it
            # is when every record stays, rewritten when some go.
            data, start, end = _records_of(buf, pos, header)
            kept, flags, tombstones, decoded = offset_map.retained(data, start, end, header.records_count,
                                                                   header.base_offset,
                                                                   horizon is None or now_ms < horizon)
            messages_read += header.records_count
            if kept:
                messages_retained += kept
                set_horizon = tombstones and horizon is None
                if kept == header.records_count and not set_horizon:
                    out.append(bytes(memoryview(buf)[pos : pos + header.size]))
                else:
                    out.append(_rewritten(header, data, start, end, flags, kept,
                                          now_ms + delete_retention_ms if set_horizon else horizon, decoded))
            elif retain_empty:
                out.append(_empty_batch(header))
            continue
        marker_for_empty_txn = can_discard and header.is_control
        records = batch_records(buf, pos, header)
        messages_read += len(records)
        retained = []
        tombstones = False
        for offset_delta, ts_delta, key, value, hdrs in records:
            offset = header.base_offset + offset_delta
            timestamp = header.base_timestamp + ts_delta
            if discard:
                keep = False
            elif header.is_control or offset > offset_map.latest_offset:
                keep = True
            elif key is None:
                keep = False
            else:
                keep = offset >= offset_map.get(key) and (value is not None or horizon is None or now_ms < horizon)
            if keep:
                tombstones = tombstones or value is None
                retained.append((offset, timestamp, key, value, hdrs))
        if retained:
            messages_retained += len(retained)
            set_horizon = (tombstones or marker_for_empty_txn) and horizon is None
            if len(retained) == len(records) and not set_horizon:
                out.append(bytes(memoryview(buf)[pos : pos + header.size]))
            else:
                out.append(_rebuild(header, retained, now_ms + delete_retention_ms if set_horizon else horizon))
        elif retain_empty:
            out.append(_empty_batch(header))
    return FilterResult(b"".join(out), bytes_read, messages_read, messages_retained)


INT_MAX = (1 << 31) - 1


class SegmentSizes(NamedTuple):
    """What grouping needs of a segment: its base offset and the bytes of its log, offset index and time index."""

    base_offset: int
    log_bytes: int
    offset_index_bytes: int
    time_index_bytes: int


def group_segments_by_size(segments: list[SegmentSizes], max_size: int, max_index_size: int,
                           first_uncleanable_offset: int) -> list[list[SegmentSizes]]:
    """Consecutive segments cleaned into one, as Kafka's groupSegmentsBySize: a group's log stays within
    segment.bytes, its indexes within segment.index.bytes, and its offsets within an int of its base offset."""
    groups: list[list[SegmentSizes]] = []
    i = 0
    while i < len(segments):
        group = [segments[i]]
        log_bytes, index_bytes, time_bytes = (segments[i].log_bytes, segments[i].offset_index_bytes,
                                              segments[i].time_index_bytes)
        i += 1
        while i < len(segments):
            seg = segments[i]
            last_offset = segments[i + 1].base_offset - 1 if i + 1 < len(segments) else first_uncleanable_offset - 1
            if not (log_bytes + seg.log_bytes <= max_size and index_bytes + seg.offset_index_bytes <= max_index_size
                    and time_bytes + seg.time_index_bytes <= max_index_size
                    and (seg.log_bytes == 0 or last_offset - group[0].base_offset <= INT_MAX)):
                break
            group.append(seg)
            log_bytes += seg.log_bytes
            index_bytes += seg.offset_index_bytes
            time_bytes += seg.time_index_bytes
            i += 1
        groups.append(group)
    return groups


CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
_SWAPPED_SUFFIXES = (LOG_SUFFIX, TXN_INDEX_SUFFIX)
_SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)


def write_cleaned(directory: Path, base_offset: int, data: bytes, aborted: Iterable[AbortedTxn]) -> None:
    """Write a cleaned segment's log and transaction index as `.cleaned` files, durably. A crash from here until
    begin_swap has renamed them leaves the old segments in force (the loader deletes `.cleaned` files)."""
    stem = directory / file_prefix(base_offset)
    write_synced(stem.with_name(stem.name + LOG_SUFFIX + CLEANED_SUFFIX), data)
    write_cleaned_txn_index(directory, base_offset, aborted)


def write_cleaned_txn_index(directory: Path, base_offset: int, aborted: Iterable[AbortedTxn]) -> None:
    stem = directory / file_prefix(base_offset)
    txn_index = TransactionIndex(stem.with_name(stem.name + TXN_INDEX_SUFFIX + CLEANED_SUFFIX))
    txn_index.reset()
    for txn in aborted:
        txn_index.append(txn)
    txn_index.flush()


def begin_swap(directory: Path, base_offset: int) -> None:
    """Rename the `.cleaned` files to `.swap`: from here a crash completes the swap on load."""
    stem = file_prefix(base_offset)
    for suffix in _SWAPPED_SUFFIXES:
        cleaned = directory / (stem + suffix + CLEANED_SUFFIX)
        if cleaned.exists():
            os.replace(cleaned, directory / (stem + suffix + SWAP_SUFFIX))
    fsync_dir(directory)


def discard_cleaned(directory: Path, base_offsets: Iterable[int]) -> None:
    """Remove the `.cleaned` files of cleanings that are not swapped in (the log changed meanwhile)."""
    for base in base_offsets:
        for suffix in _SWAPPED_SUFFIXES:
            (directory / (file_prefix(base) + suffix + CLEANED_SUFFIX)).unlink(missing_ok=True)


def complete_swap(directory: Path, base_offset: int, replaced_bases: Iterable[int]) -> None:
    """Delete the files of the replaced segments and rename the `.swap` files into place (Kafka's
    replaceSegments); the segment's offset and time indexes are rebuilt when it is opened."""
    for base in replaced_bases:
        for suffix in _SEGMENT_SUFFIXES:
            (directory / (file_prefix(base) + suffix)).unlink(missing_ok=True)
    stem = file_prefix(base_offset)
    for suffix in _SWAPPED_SUFFIXES:
        swap = directory / (stem + suffix + SWAP_SUFFIX)
        if swap.exists():
            os.replace(swap, directory / (stem + suffix))
    fsync_dir(directory)


class SegmentSnapshot(NamedTuple):
    """What a cleaning reads of a segment, taken by the log's owner: its file, its size then, its aborted
    transactions and the sizes of its indexes. Picklable, so a cleaner process can read the segment on its own."""

    base_offset: int
    size: int
    log_path: Path
    aborted: list[AbortedTxn]
    offset_index_bytes: int
    time_index_bytes: int

    @classmethod
    def of(cls, segment: LogSegment, aborted: list[AbortedTxn] | None = None) -> SegmentSnapshot:
        """`aborted`: the aborted transactions overlapping the segment's offsets (Log.collect_aborted_transactions,
        as Kafka's cleaner asks for them: one may begin in an earlier segment); default: those its own transaction
        index holds (the transactions that end in it)."""
        return cls(segment.base_offset, segment.size, segment.log_path,
                   segment.txn_index.entries if aborted is None else aborted,
                   segment.offset_index.entries * segment.offset_index.entry_size,
                   segment.time_index.entries * segment.time_index.entry_size)

    def chunks(self, buffer_size: int) -> Iterator[memoryview]:
        """The segment's batches as they were when the snapshot was taken, whole batches read about `buffer_size`
        bytes at a time (more where one batch is larger, as Kafka's cleaner grows its buffers). FileNotFoundError
        once retention or a truncation has deleted or shortened the file. Each chunk is read into a buffer of its
        own, behind the bytes of a batch the previous read cut (the only bytes copied), and may be kept."""
        with open(self.log_path, "rb") as f:
            left, want = self.size, buffer_size
            carry: bytes | bytearray = b""
            while left > 0:
                size = min(want, left)
                buf = bytearray(len(carry) + size)
                buf[: len(carry)] = carry
                with memoryview(buf) as view:
                    got = f.readinto(view[len(carry) :])
                if not got:
                    raise FileNotFoundError(f"{self.log_path} is shorter than the {self.size} bytes it had")
                if got < size:
                    del buf[len(carry) + got :]
                left -= got
                end = 0
                for position, header in iter_batches(buf):
                    end = position + header.size
                if end == 0 and left > 0:
                    want *= 2
                    carry = buf
                    continue
                want = buffer_size
                chunk = memoryview(buf)
                if end:
                    yield chunk[:end]
                carry = bytes(chunk[end:])
            if carry:
                yield memoryview(carry)  # a torn tail, which the batch walks stop at as a whole-file read would


class CleanedGroup(NamedTuple):
    """A cleaned segment left as `.cleaned` files, to be put in place of the segments at `replaced` (base offsets;
    Log.replace_segments)."""

    base_offset: int
    replaced: list[int]
    bytes_read: int
    bytes_written: int
    messages_read: int
    messages_retained: int


def clean_segments(directory: Path, segments: list[SegmentSnapshot], first_dirty_offset: int,
                   first_uncleanable_offset: int, last_batch_offset_of_producer: dict[int, int], now_ms: int,
                   delete_retention_ms: int, dedupe_buffer_size: int, max_segment_bytes: int,
                   max_index_bytes: int, on_read: Callable[[int], None] | None = None,
                   load_factor: float = 0.9, io_buffer_size: int = 1 << 20) -> tuple[list[CleanedGroup], int]:
    """One cleaning of a log (Kafka's Cleaner.doClean) over a snapshot of its inactive segments below
    `first_uncleanable_offset`: maps the dirty section, rewrites every segment up to the end of what the map
    covers, group by group, as `.cleaned` files. Returns the groups and the offset the cleaner checkpoint moves to.
    Touches no live state: the owning thread swaps the groups in (Log.replace_segments), or drops them
    (discard_cleaned). `on_read(bytes)` is called after each read: the I/O throttle, and the place to stop a
    cleaning that is no longer wanted by raising. Segments are read `io_buffer_size` bytes at a time."""
    read = on_read or (lambda _n: None)
    offset_map = OffsetMap(dedupe_buffer_size, load_factor)
    end_offset = first_dirty_offset
    for i, segment in enumerate(segments):
        upper = segments[i + 1].base_offset if i + 1 < len(segments) else first_uncleanable_offset
        if upper <= first_dirty_offset or segment.base_offset >= first_uncleanable_offset:
            continue
        full = False
        for chunk in segment.chunks(io_buffer_size):
            read(len(chunk))
            first = next(iter_batches(chunk), None)
            if first is None:
                continue
            # The transactions still open where the chunk begins: a chunk knows nothing of the markers before it.
            aborted = [t for t in segment.aborted if t.last_offset >= first[1].base_offset]
            full = build_offset_map(chunk, offset_map, first_dirty_offset, aborted)
            if full:
                break
        end_offset = offset_map.latest_offset + 1 if full else upper
        if full:
            break
    cleanable = [s for s in segments if s.base_offset < end_offset]
    sizes = [SegmentSizes(s.base_offset, s.size, s.offset_index_bytes, s.time_index_bytes) for s in cleanable]
    by_base = {s.base_offset: s for s in cleanable}
    txn = CleanedTransactionMetadata(sorted({t for s in cleanable for t in s.aborted}))
    grouped = group_segments_by_size(sizes, max_segment_bytes, max_index_bytes, end_offset)
    groups: list[CleanedGroup] = []
    try:
        for group in grouped:
            replaced = [by_base[g.base_offset] for g in group]
            base = replaced[0].base_offset
            bytes_read = bytes_written = messages_read = messages_retained = 0
            with open(directory / (file_prefix(base) + LOG_SUFFIX + CLEANED_SUFFIX), "wb") as out:
                for segment in replaced:
                    for chunk in segment.chunks(io_buffer_size):
                        read(len(chunk))
                        result = filter_batches(chunk, offset_map, txn, last_batch_offset_of_producer, now_ms,
                                                delete_retention_ms)
                        out.write(result.output)
                        read(len(result.output))
                        bytes_read += result.bytes_read
                        bytes_written += len(result.output)
                        messages_read += result.messages_read
                        messages_retained += result.messages_retained
                out.flush()
                os.fsync(out.fileno())
            # The aborted transactions whose markers this group kept, as Kafka indexes them in the cleaned segment.
            write_cleaned_txn_index(directory, base, list(txn.cleaned_aborted))
            txn.cleaned_aborted.clear()
            groups.append(CleanedGroup(base, [s.base_offset for s in replaced], bytes_read, bytes_written,
                                       messages_read, messages_retained))
    except BaseException:
        discard_cleaned(directory, [g[0].base_offset for g in grouped])
        raise
    return groups, end_offset

