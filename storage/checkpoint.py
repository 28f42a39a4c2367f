"""Kafka's text checkpoint files, written atomically.

Format (Kafka's CheckpointFile): a version line, an entry-count line, then one entry per line.
Offset checkpoints (recovery points, high watermarks, log start offsets) hold
`topic partition offset` lines; leader-epoch-checkpoint holds `epoch startOffset` lines. Both
are version 0.

A checkpoint is replaced by writing `<file>.tmp`, fsyncing it, renaming it over the file and
fsyncing the directory, so a crash leaves either the old or the new content, never a mix.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import NamedTuple, TypeVar

from .errors import KafkaStorageError

CHECKPOINT_VERSION = 0
TMP_SUFFIX = ".tmp"

T = TypeVar("T")


class EpochEntry(NamedTuple):
    """The first offset written under a leader epoch."""

    epoch: int
    start_offset: int


def atomic_write(path: Path, data: bytes) -> None:
    """Replace `path` with `data` durably: write a temp file, fsync, rename, fsync the directory."""
    tmp = path.with_name(path.name + TMP_SUFFIX)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        fsync_dir(path.parent)
    except OSError as e:
        raise KafkaStorageError(f"Error while writing {path}: {e}") from e


def fsync_dir(directory: Path) -> None:
    """Make renames and creations inside `directory` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _encode(lines: list[str]) -> bytes:
    return "".join(f"{line}\n" for line in [str(CHECKPOINT_VERSION), str(len(lines)), *lines]).encode()


def _read(path: Path, parse_line: Callable[[list[str]], T]) -> list[T]:
    """Entries of a checkpoint file; a missing or empty file has none."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except OSError as e:
        raise KafkaStorageError(f"Error while reading checkpoint file {path}: {e}") from e
    lines = text.splitlines()
    if not lines:
        return []
    try:
        version = int(lines[0])
        if version != CHECKPOINT_VERSION:
            raise KafkaStorageError(
                f"Unrecognised version:{version}, expected version: {CHECKPOINT_VERSION} in checkpoint file at: {path}"
            )
        if len(lines) == 1:
            return []
        expected = int(lines[1])
        entries = [parse_line(line.split()) for line in lines[2:]]
    except (ValueError, IndexError, TypeError) as e:
        raise KafkaStorageError(f"Malformed line in checkpoint file [{path}]: {e}") from e
    if len(entries) != expected:
        raise KafkaStorageError(
            f"Expected [{expected}] entries in checkpoint file [{path}], but found only [{len(entries)}]")
    return entries


def _parse_offset_line(fields: list[str]) -> tuple[tuple[str, int], int]:
    topic, partition, offset = fields  # ValueError when the line has another shape
    return (topic, int(partition)), int(offset)


def _parse_epoch_line(fields: list[str]) -> EpochEntry:
    epoch, start_offset = fields
    return EpochEntry(int(epoch), int(start_offset))


def read_offset_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    """`{(topic, partition): offset}` from an offset checkpoint file (empty if absent)."""
    return dict(_read(path, _parse_offset_line))


def write_offset_checkpoint(path: Path, offsets: dict[tuple[str, int], int]) -> None:
    lines = [f"{topic} {partition} {offset}" for (topic, partition), offset in sorted(offsets.items())]
    atomic_write(path, _encode(lines))


def read_leader_epoch_checkpoint(path: Path) -> list[EpochEntry]:
    return _read(path, _parse_epoch_line)


def write_leader_epoch_checkpoint(path: Path, entries: Iterable[EpochEntry]) -> None:
    atomic_write(path, _encode([f"{e.epoch} {e.start_offset}" for e in entries]))
