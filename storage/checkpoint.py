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
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import NamedTuple, TypeVar

from .errors import KafkaStorageError

CHECKPOINT_VERSION = 0
TMP_SUFFIX = ".tmp"

T = TypeVar("T")

_JAVA_INT = re.compile(r"[+-]?[0-9]+")
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_BLANKS = re.compile(r"[ \t\n\x0b\f\r]+")  # Java's \s


class EpochEntry(NamedTuple):
    """The first offset written under a leader epoch."""

    epoch: int
    start_offset: int


def write_synced(path: Path, data: bytes) -> None:
    """Create or truncate `path` and write `data` to it, fsynced before returning."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    """Replace `path` with `data` durably: write a temp file, fsync, rename, fsync the directory."""
    tmp = path.with_name(path.name + TMP_SUFFIX)
    try:
        write_synced(tmp, data)
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


class MalformedCheckpointError(ValueError):
    """Content of a checkpoint file that Kafka's CheckpointReadBuffer refuses."""


def parse_java_int(text: str, bits: int) -> int:
    """`text` as Java's Integer.parseInt (bits=32) or Long.parseLong (bits=64) reads it: ASCII digits with an
    optional sign, nothing around them, within range; MalformedCheckpointError otherwise."""
    if not _JAVA_INT.fullmatch(text):
        raise MalformedCheckpointError(f"not a number: {text!r}")
    value = int(text)
    if not -(1 << (bits - 1)) <= value < 1 << (bits - 1):
        raise MalformedCheckpointError(f"out of range for a {bits}-bit number: {text}")
    return value


def text_lines(data: bytes) -> list[str]:
    """The lines of `data` as Java's BufferedReader.readLine gives them (UTF-8 that does not decode is an error)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise MalformedCheckpointError(f"not UTF-8 text (byte {e.start}: {data[e.start:e.start + 1]!r})") from None
    lines = _LINE_BREAK.split(text)
    if lines[-1] == "":
        lines.pop()  # the line break that ends the last line
    return lines


def split_fields(line: str) -> list[str]:
    """Java's line.split("\\s+"): a leading blank gives an empty first field, trailing blanks give none."""
    fields = _BLANKS.split(line)
    while len(fields) > 1 and fields[-1] == "":
        fields.pop()
    return fields


def _read(path: Path, parse_line: Callable[[list[str]], T]) -> list[T]:
    """Entries of a checkpoint file; a missing or empty file has none. KafkaStorageError, naming the file and what
    is wrong with it, when it cannot be read or Kafka would not accept its content."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    except OSError as e:
        raise KafkaStorageError(f"Error while reading checkpoint file {path}: {e}") from e
    try:
        return _parse(data, parse_line)
    except MalformedCheckpointError as e:
        raise KafkaStorageError(f"Error while reading checkpoint file {path}: {e}") from None


def _parse(data: bytes, parse_line: Callable[[list[str]], T]) -> list[T]:
    lines = text_lines(data)
    if not lines:
        return []
    version = _numbered_line(1, lines[0], lambda line: parse_java_int(line, 32))
    if version != CHECKPOINT_VERSION:
        raise MalformedCheckpointError(f"unrecognised version {version}, expected version {CHECKPOINT_VERSION}")
    if len(lines) == 1:
        return []
    expected = _numbered_line(2, lines[1], lambda line: parse_java_int(line, 32))
    entries = [_numbered_line(number, line, lambda line: parse_line(split_fields(line)))
               for number, line in enumerate(lines[2:], start=3)]
    if len(entries) != expected:
        raise MalformedCheckpointError(f"expected {expected} entries but found {len(entries)}")
    return entries


def _numbered_line(number: int, line: str, parse: Callable[[str], T]) -> T:
    try:
        return parse(line)
    except MalformedCheckpointError as e:
        raise MalformedCheckpointError(f"malformed line {number} {line[:80]!r}: {e}") from None


def _parse_offset_line(fields: list[str]) -> tuple[tuple[str, int], int]:
    if len(fields) != 3:
        raise MalformedCheckpointError("expected 'topic partition offset'")
    topic, partition, offset = fields
    return (topic, parse_java_int(partition, 32)), parse_java_int(offset, 64)


def _parse_epoch_line(fields: list[str]) -> EpochEntry:
    if len(fields) != 2:
        raise MalformedCheckpointError("expected 'epoch startOffset'")
    epoch, start_offset = fields
    return EpochEntry(parse_java_int(epoch, 32), parse_java_int(start_offset, 64))


def read_offset_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    """`{(topic, partition): offset}` from an offset checkpoint file (empty if absent)."""
    return dict(_read(path, _parse_offset_line))


def offset_checkpoint_bytes(offsets: dict[tuple[str, int], int]) -> bytes:
    """The content of an offset checkpoint file holding `offsets`."""
    return _encode([f"{topic} {partition} {offset}" for (topic, partition), offset in sorted(offsets.items())])


def write_offset_checkpoint(path: Path, offsets: dict[tuple[str, int], int]) -> None:
    atomic_write(path, offset_checkpoint_bytes(offsets))


def read_leader_epoch_checkpoint(path: Path) -> list[EpochEntry]:
    return _read(path, _parse_epoch_line)


def write_leader_epoch_checkpoint(path: Path, entries: Iterable[EpochEntry]) -> None:
    atomic_write(path, _encode([f"{e.epoch} {e.start_offset}" for e in entries]))
