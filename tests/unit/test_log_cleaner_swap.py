"""Loading a log after a crash in the middle of a cleaning: `.cleaned` files dropped, `.swap` files swapped in."""
from __future__ import annotations

from pathlib import Path

import pytest

from minikafka.protocol.record_batch import iter_batches
from minikafka.storage.log import Log
from minikafka.storage.log_cleaner import (
    DELETE_HORIZON_MASK,
    CleanedTransactionMetadata,
    OffsetMap,
    SegmentSnapshot,
    begin_swap,
    build_offset_map,
    clean_segments,
    complete_swap,
    filter_batches,
    write_cleaned,
)
from minikafka.storage.log_config import LogConfig
from minikafka.storage.transaction_index import AbortedTxn

from .test_log_cleaner_core import NOW, RETENTION, batch, contents
from .test_log_transactions import COMMIT, end_txn, fill, open_log

# Each test with the compiled record walks and with the Python ones.
pytestmark = pytest.mark.usefixtures("record_walk")


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


def latest_values(directory: Path, log: Log) -> dict[bytes | None, tuple[int, bytes | None]]:
    data = b"".join((directory / f"{s.base_offset:020d}.log").read_bytes() for s in log.segments)
    return {key: (offset, value) for offset, key, value in contents(data)}


@pytest.mark.parametrize("crash_after", ["write_cleaned", "begin_swap", "old_segment_deleted", "complete_swap"])
def test_a_crash_at_any_step_of_a_cleaning_loads_a_valid_log(tmp_path: Path, crash_after: str) -> None:
    directory, cleaned = three_segments(tmp_path)
    write_cleaned(directory, 0, cleaned, [])
    if crash_after != "write_cleaned":
        begin_swap(directory, 0)
    if crash_after == "old_segment_deleted":
        (directory / "00000000000000000000.log").unlink()
    if crash_after == "complete_swap":
        complete_swap(directory, 0, [0, 2])
    log = reopen(directory)
    try:
        swapped = crash_after != "write_cleaned"
        assert [s.base_offset for s in log.segments] == ([0, 4] if swapped else [0, 2, 4])
        assert log.log_end_offset == 5
        assert latest_values(directory, log) == {b"a": (2, b"2"), b"b": (1, b"1"), b"c": (3, b"1"),
                                                 b"d": (4, b"1")}
        if swapped:
            assert (directory / "00000000000000000000.log").read_bytes() == cleaned
        assert not [p.name for p in directory.iterdir() if p.name.endswith((".swap", ".cleaned"))]
    finally:
        log.close()


def test_an_open_log_swaps_a_cleaned_segment_in_and_keeps_appending(tmp_path: Path) -> None:
    directory, cleaned = three_segments(tmp_path)
    log = reopen(directory)
    try:
        write_cleaned(directory, 0, cleaned, [])
        begin_swap(directory, 0)
        segment = log.replace_segments(0, log.segments[:2], NOW)
        assert (segment.base_offset, segment.next_offset) == (0, 4)
        assert [s.base_offset for s in log.segments] == [0, 4]
        log.append_as_leader(bytearray(batch(0, [(b"a", b"3")])), leader_epoch=0, now_ms=NOW)
        assert log.log_end_offset == 6
        assert latest_values(directory, log)[b"a"] == (5, b"3")
        with pytest.raises(ValueError):
            log.replace_segments(4, log.segments[1:], NOW)
    finally:
        log.close()
    log = reopen(directory)
    try:
        assert [s.base_offset for s in log.segments] == [0, 4]
        assert latest_values(directory, log) == {b"a": (5, b"3"), b"b": (1, b"1"), b"c": (3, b"1"), b"d": (4, b"1")}
    finally:
        log.close()


def test_clean_segments_cleans_an_open_log_up_to_its_active_segment(tmp_path: Path) -> None:
    directory, cleaned = three_segments(tmp_path)
    log = reopen(directory)
    try:
        segments = log.segments
        groups, end = clean_segments(directory, [SegmentSnapshot.of(s) for s in segments[:-1]], 0,
                                     segments[-1].base_offset, {}, NOW, RETENTION, 1 << 20, 1 << 30, 10 << 20)
        assert end == 4
        [group] = groups
        assert (group.base_offset, group.replaced, group.messages_read, group.messages_retained) == \
            (0, [0, 2], 4, 3)
        assert (group.bytes_read, group.bytes_written) == (segments[0].size + segments[1].size, len(cleaned))
        log.replace_segments(group.base_offset, segments[:2], NOW)
        assert (directory / "00000000000000000000.log").read_bytes() == cleaned
        assert [s.base_offset for s in log.segments] == [0, 4]
    finally:
        log.close()


def test_cleaning_a_transactional_log_drops_aborted_records_and_keeps_their_index(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    try:
        fill(log)  # pid 1 aborts [0, 1] at 4; pid 2's [2, 3] committed at 5; pid 1 writes [6, 7] again
        end_txn(log, 1, 0, COMMIT)  # at 8
        log.producer_state.on_high_watermark_updated(9)
        log.roll(NOW)
        last_of_producer = {1: 7, 2: 3}

        def clean_once(first_dirty: int) -> list[tuple[int, bool, int, bool]]:
            segments = log.segments
            [group], end = clean_segments(log.dir, [SegmentSnapshot.of(s) for s in segments[:-1]], first_dirty,
                                          segments[-1].base_offset, last_of_producer, NOW, RETENTION, 1 << 20,
                                          1 << 30, 10 << 20)
            assert end == 9
            log.replace_segments(group.base_offset, [s for s in segments if s.base_offset in group.replaced], NOW)
            data = (log.dir / "00000000000000000000.log").read_bytes()
            return [(h.base_offset, h.is_control, h.records_count, bool(h.attributes & DELETE_HORIZON_MASK))
                    for _, h in iter_batches(data)]

        # The aborted records go; pid 2's batch, superseded by pid 1's keys, stays empty as its last batch.
        assert clean_once(0) == [(2, False, 0, False), (4, True, 1, False), (5, True, 1, False),
                                 (6, False, 2, False), (8, True, 1, False)]
        assert log.collect_aborted_transactions(0, 9) == [AbortedTxn(1, 0, 4, 2)]
        # The next pass finds no record of the aborted transaction: its marker gets a delete horizon.
        assert clean_once(9) == [(2, False, 0, False), (4, True, 1, True), (5, True, 1, False),
                                 (6, False, 2, False), (8, True, 1, False)]
    finally:
        log.close()


@pytest.mark.parametrize("io_buffer_size", [1, 100, 250])
def test_small_read_buffers_clean_as_a_whole_read_does(tmp_path: Path, io_buffer_size: int) -> None:
    """Segments read a few batches at a time (or one, when a batch outgrows the buffer) give the same cleaning:
    a transaction's records in one chunk, its abort marker in a later one."""
    log = open_log(tmp_path)
    try:
        fill(log)  # pid 1 aborts [0, 1] at 4; pid 2's [2, 3] committed at 5; pid 1 writes [6, 7] again
        end_txn(log, 1, 0, COMMIT)  # at 8
        log.producer_state.on_high_watermark_updated(9)
        log.roll(NOW)
        segments = log.segments
        snapshots = [SegmentSnapshot.of(s) for s in segments[:-1]]
        cleaned = log.dir / "00000000000000000000.log.cleaned"

        def clean(buffer_size: int) -> tuple[bytes, tuple[int, ...]]:
            [group], end = clean_segments(log.dir, snapshots, 0, 9, {1: 7, 2: 3}, NOW, RETENTION, 1 << 20, 1 << 30,
                                          10 << 20, io_buffer_size=buffer_size)
            assert end == 9
            return cleaned.read_bytes(), tuple(group[2:])  # the bytes, and bytes and records read and kept

        whole = clean(1 << 20)
        assert whole[1][1] == len(whole[0]) > 0
        assert clean(io_buffer_size) == whole
    finally:
        log.close()


@pytest.mark.parametrize("buffer_size", [1, 70, 200, 1 << 20])
def test_a_segment_is_read_in_whole_batches_and_its_torn_tail_last(tmp_path: Path, buffer_size: int) -> None:
    batches = [batch(0, [(b"k%d" % i, b"v" * (i * 37 % 300))] * (1 + i % 3)) for i in range(12)]
    data = b"".join(batches)
    path = tmp_path / "segment.log"
    path.write_bytes(data + batches[0][:30])  # a batch cut short by a crash
    snapshot = SegmentSnapshot(0, len(data) + 30, path, [], 0, 0)
    chunks = [bytes(chunk) for chunk in snapshot.chunks(buffer_size)]
    assert b"".join(chunks) == data + batches[0][:30]
    assert chunks[-1] == batches[0][:30]
    for chunk in chunks[:-1]:  # each chunk holds whole batches, at least one
        assert sum(header.size for _, header in iter_batches(chunk)) == len(chunk) > 0
    path.write_bytes(data[:100])  # shortened since the snapshot: the cleaning stops
    with pytest.raises(FileNotFoundError):
        list(snapshot.chunks(buffer_size))
