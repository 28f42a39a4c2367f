"""Loading a log after a crash in the middle of a cleaning: `.cleaned` files dropped, `.swap` files swapped in."""
from __future__ import annotations

from pathlib import Path

from minikafka.storage.log import Log
from minikafka.storage.log_cleaner import CleanedTransactionMetadata, OffsetMap, build_offset_map, filter_batches
from minikafka.storage.log_config import LogConfig

from .test_log_cleaner_core import NOW, RETENTION, batch, contents


def three_segments(tmp_path: Path) -> tuple[Path, bytes]:
    """A closed log with segments at 0 and 2 (a and b written twice) and an active one at 4; the cleaned bytes of
    the first two."""
    directory = tmp_path / "topic-0"
    log = Log.open(directory, "topic", 0, LogConfig(), now_ms=NOW)
    log.append_as_leader(bytearray(batch(0, [(b"a", b"1"), (b"b", b"1")])), leader_epoch=0, now_ms=NOW)
    log.roll(NOW)
    log.append_as_leader(bytearray(batch(0, [(b"a", b"2"), (b"c", b"1")])), leader_epoch=0, now_ms=NOW)
    log.roll(NOW)
    log.append_as_leader(bytearray(batch(0, [(b"d", b"1")])), leader_epoch=0, now_ms=NOW)
    log.close()
    dirty = b"".join((directory / f"{base:020d}.log").read_bytes() for base in (0, 2))
    offset_map = OffsetMap(1 << 20)
    build_offset_map(dirty, offset_map, 0, [])
    cleaned = filter_batches(dirty, offset_map, CleanedTransactionMetadata([]), {}, NOW, RETENTION).output
    assert contents(cleaned) == [(1, b"b", b"1"), (2, b"a", b"2"), (3, b"c", b"1")]
    return directory, cleaned


def reopen(directory: Path) -> Log:
    return Log.open(directory, "topic", 0, LogConfig(), now_ms=NOW, recovery_point=0)


def test_swap_file_replaces_the_segments_within_its_offsets(tmp_path: Path) -> None:
    directory, cleaned = three_segments(tmp_path)
    (directory / "00000000000000000000.log.swap").write_bytes(cleaned)
    (directory / "00000000000000000000.index.swap").write_bytes(b"")
    log = reopen(directory)
    try:
        assert [s.base_offset for s in log.segments] == [0, 4]
        assert (directory / "00000000000000000000.log").read_bytes() == cleaned
        assert log.log_end_offset == 5
        assert not [p.name for p in directory.iterdir() if p.name.endswith((".swap", ".cleaned"))]
        assert not (directory / "00000000000000000002.log").exists()
    finally:
        log.close()


def test_cleaned_file_means_the_swap_never_began(tmp_path: Path) -> None:
    directory, cleaned = three_segments(tmp_path)
    before = (directory / "00000000000000000000.log").read_bytes()
    (directory / "00000000000000000000.log.cleaned").write_bytes(cleaned)
    (directory / "00000000000000000002.log.swap").write_bytes(cleaned[:0])
    log = reopen(directory)
    try:
        assert [s.base_offset for s in log.segments] == [0, 2, 4]
        assert (directory / "00000000000000000000.log").read_bytes() == before
        assert not [p.name for p in directory.iterdir() if p.name.endswith((".swap", ".cleaned"))]
    finally:
        log.close()
