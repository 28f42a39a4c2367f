"""Kafka's producer-state snapshot file, `<offset as 20 digits>.snapshot`: the bytes of its ProducerSnapshot message.

A snapshot at offset N holds the state of every producer after the batches below N. Its layout is version 1 of
Kafka's ProducerSnapshot schema, big-endian: version (int16), crc (uint32, the CRC32C of every byte after it),
the number of entries (int32), then per producer id: ProducerId (int64), Epoch (int16), LastSequence (int32),
LastOffset (int64), OffsetDelta (int32), Timestamp (int64), CoordinatorEpoch (int32), CurrentTxnFirstOffset
(int64). A file that is not such a message with a matching CRC is corrupt, as Kafka's readSnapshot judges it.

Snapshots are written in place, not through a temporary file, as Kafka writes them: a write torn by a crash
fails the CRC, and the reader falls back to an older snapshot.
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from crc32c import crc32c

from .errors import KafkaStorageError

SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1  # the only version of ProducerSnapshot.json, the one Kafka writes

_HEAD = struct.Struct(">hIi")  # version, crc, number of entries
_ENTRY = struct.Struct(">qhiqiqiq")
_CRC_END = 6  # the CRC covers the bytes from here to the end: the entries and their count
_SNAPSHOT_FILE = re.compile(r"(\d{20})" + re.escape(SNAPSHOT_SUFFIX))


class CorruptSnapshotError(Exception):
    """A snapshot file that cannot be trusted (Kafka's CorruptSnapshotException): it is deleted, not loaded."""


class ProducerEntry(NamedTuple):
    """One producer of a snapshot, field for field as ProducerSnapshot's ProducerEntry."""

    producer_id: int
    epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int


def snapshot_file(directory: Path, offset: int) -> Path:
    """Kafka's name of the snapshot at `offset` in a partition directory."""
    return directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"


def list_snapshot_offsets(directory: Path) -> list[int]:
    """The offsets of the snapshot files in `directory`, ascending (none if it does not exist)."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    return sorted(int(match[1]) for name in names if (match := _SNAPSHOT_FILE.fullmatch(name)))


def encode_snapshot(entries: Sequence[ProducerEntry]) -> bytes:
    """The bytes of a snapshot holding `entries`, in the order given."""
    body = bytearray(_HEAD.size + _ENTRY.size * len(entries))
    _HEAD.pack_into(body, 0, SNAPSHOT_VERSION, 0, len(entries))
    for i, entry in enumerate(entries):
        _ENTRY.pack_into(body, _HEAD.size + i * _ENTRY.size, *entry)
    struct.pack_into(">I", body, 2, crc32c(memoryview(body)[_CRC_END:]))
    return bytes(body)


def decode_snapshot(data: bytes) -> list[ProducerEntry]:
    """The entries of a snapshot; CorruptSnapshotError for an unknown version, a short file or a wrong CRC."""
    if len(data) < _HEAD.size:
        raise CorruptSnapshotError(f"Snapshot failed schema validation: {len(data)} bytes is too short")
    version, crc, count = _HEAD.unpack_from(data)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"Snapshot contained an unknown file version {version}")
    if count < 0 or len(data) < _HEAD.size + count * _ENTRY.size:
        raise CorruptSnapshotError(f"Snapshot failed schema validation: {count} entries do not fit "
                                   f"in {len(data)} bytes")
    computed = crc32c(data[_CRC_END:])
    if crc != computed:
        raise CorruptSnapshotError(f"Snapshot is corrupt (CRC is no longer valid). Stored crc: {crc}. "
                                   f"Computed crc: {computed}")
    return [ProducerEntry(*fields) for fields in
            _ENTRY.iter_unpack(data[_HEAD.size:_HEAD.size + count * _ENTRY.size])]


def write_snapshot(path: Path, entries: Sequence[ProducerEntry], *, sync: bool) -> None:
    """Write a snapshot file; `sync` fsyncs it before returning (else a later flush_snapshot does)."""
    data = memoryview(encode_snapshot(entries))
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            while data:
                data = data[os.write(fd, data):]
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as e:
        raise KafkaStorageError(f"Error while writing producer snapshot {path}: {e}") from e


def read_snapshot(path: Path) -> list[ProducerEntry]:
    """The entries of a snapshot file; CorruptSnapshotError if it cannot be trusted."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise KafkaStorageError(f"Error while reading producer snapshot {path}: {e}") from e
    return decode_snapshot(data)


def flush_snapshot(path: Path) -> None:
    """fsync a snapshot written without it (at a roll), if it still exists (Kafka's flushFileIfExists)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    except OSError as e:
        raise KafkaStorageError(f"Error while flushing producer snapshot {path}: {e}") from e
    finally:
        os.close(fd)
