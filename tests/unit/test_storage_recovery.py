"""Crash recovery: torn and corrupt tails are cut off, indexes rebuilt, the valid prefix kept.

A "kill -9" is simulated by never closing the first Log (nothing flushed, no final index
entries) and damaging its files before a second Log opens the same directory.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from hypothesis import example, given, settings
from hypothesis import strategies as st
from kafka.record.memory_records import MemoryRecordsBuilder

from minikafka.protocol.record_batch import iter_batches
from minikafka.storage.checkpoint import EpochEntry
from minikafka.storage.log import Log
from minikafka.storage.log_config import LogConfig

NOW = 1_700_000_000_000
CONFIG = LogConfig.from_props({"index.interval.bytes": "200", "internal.segment.bytes": "1200"})
ONE_SEGMENT = LogConfig.from_props({"index.interval.bytes": "200"})


def make_batch(count: int, timestamp: int, producer_id: int = -1, sequence: int = -1) -> bytearray:
    builder = MemoryRecordsBuilder(
        magic=2,
        compression_type=0,
        batch_size=1 << 20,
        producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1,
        base_sequence=sequence,
    )
    for i in range(count):
        builder.append(timestamp=timestamp + i, key=None, value=b"%d" % i * 20)
    builder.close()
    return bytearray(builder.buffer())


def fill(directory: Path, config: LogConfig, batches: int) -> tuple[Log, list[tuple[int, int]]]:
    """A log with `batches` batches (epochs 0, 1, 2, ...); returns it and each batch's (first, last) offset."""
    log = Log.open(directory, "t", 0, config, now_ms=NOW)
    spans = []
    for i in range(batches):
        batch = make_batch(1 + i % 3, NOW + i * 10, producer_id=7, sequence=log.log_end_offset)
        info = log.append_as_leader(batch, i // 4, NOW)
        spans.append((info.first_offset, info.last_offset))
    return log, spans


def segment_file(directory: Path, base: int, suffix: str) -> Path:
    return directory / f"{base:020d}{suffix}"


def reopen(directory: Path, config: LogConfig, recovery_point: int = 0) -> Log:
    return Log.open(directory, "t", 0, config, recovery_point=recovery_point, now_ms=NOW)


def test_torn_tail_is_truncated(tmp_path: Path) -> None:
    log, spans = fill(tmp_path, ONE_SEGMENT, 10)
    data = log.read(0, 1 << 20)
    path = segment_file(tmp_path, 0, ".log")
    with open(path, "r+b") as f:
        f.truncate(path.stat().st_size - 7)  # the last batch loses its end
    recovered = reopen(tmp_path, ONE_SEGMENT)
    assert recovered.log_end_offset == spans[-2][1] + 1
    last_start = [pos for pos, _ in iter_batches(data)][-1]
    assert recovered.read(0, 1 << 20) == data[:last_start]
    assert path.stat().st_size == last_start
    assert recovered.producer_state.last_entry(7).last_seq == spans[-2][1]  # type: ignore[union-attr]
    assert recovered.append_as_leader(make_batch(1, NOW), 5, NOW).first_offset == spans[-2][1] + 1
    recovered.close()


def test_corrupt_last_batch_is_dropped_and_epochs_trimmed(tmp_path: Path) -> None:
    log, spans = fill(tmp_path, ONE_SEGMENT, 9)  # the last batch is the only one of epoch 2
    path = segment_file(tmp_path, 0, ".log")
    with open(path, "r+b") as f:
        f.seek(path.stat().st_size - 3)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0x40]))
    recovered = reopen(tmp_path, ONE_SEGMENT)
    assert recovered.log_end_offset == spans[-2][1] + 1
    assert recovered.leader_epoch_cache.epochs == [EpochEntry(0, 0), EpochEntry(1, spans[4][0])]
    recovered.close()


def test_garbage_index_is_rebuilt(tmp_path: Path) -> None:
    log, spans = fill(tmp_path, ONE_SEGMENT, 30)
    log.close()
    index = segment_file(tmp_path, 0, ".index")
    time_index = segment_file(tmp_path, 0, ".timeindex")
    good_index, good_time_index = index.read_bytes(), time_index.read_bytes()
    assert len(good_index) > 16
    index.write_bytes(good_index[:-8] + os.urandom(8) + b"\x00" * 5)
    time_index.write_bytes(b"\xff" * 24)
    recovered = reopen(tmp_path, ONE_SEGMENT)
    assert recovered.log_end_offset == spans[-1][1] + 1
    assert index.read_bytes() == good_index
    recovered.close()
    assert time_index.read_bytes() == good_time_index
    trusted = reopen(tmp_path, ONE_SEGMENT, recovery_point=10**9)
    for offset in range(0, spans[-1][1] + 1, 5):
        first = next(iter_batches(trusted.read(offset, 1)))[1]
        assert first.base_offset <= offset <= first.last_offset
    trusted.close()


def test_clean_reopen_past_recovery_point_skips_nothing_it_needs(tmp_path: Path) -> None:
    log, spans = fill(tmp_path, CONFIG, 20)
    log.close()
    recovered = reopen(tmp_path, CONFIG, recovery_point=log.recovery_point)
    assert recovered.log_end_offset == spans[-1][1] + 1 and recovered.recovery_point == log.recovery_point
    assert recovered.producer_state.last_entry(7).last_seq == spans[-1][1]  # type: ignore[union-attr]
    recovered.close()


def test_torn_tail_is_cut_even_when_recovery_point_claims_it(tmp_path: Path) -> None:
    log, spans = fill(tmp_path, ONE_SEGMENT, 6)
    leo = log.log_end_offset
    path = segment_file(tmp_path, 0, ".log")
    with open(path, "ab") as f:
        f.write(make_batch(2, NOW)[:40])
    recovered = reopen(tmp_path, ONE_SEGMENT, recovery_point=leo)
    assert recovered.log_end_offset == leo
    assert path.stat().st_size == len(log.read(0, 1 << 20))
    recovered.close()


def test_corrupt_middle_segment_drops_later_segments(tmp_path: Path) -> None:
    log, spans = fill(tmp_path, CONFIG, 30)
    bases = [s.base_offset for s in log.segments]
    assert len(bases) >= 3
    path = segment_file(tmp_path, bases[1], ".log")
    with open(path, "r+b") as f:
        f.seek(70)  # inside the first batch's records
        f.write(b"\x00\x01\x02")
    recovered = reopen(tmp_path, CONFIG)
    assert recovered.log_end_offset == bases[1]
    assert [s.base_offset for s in recovered.segments] == [bases[0], bases[1]]
    assert not segment_file(tmp_path, bases[2], ".log").exists()
    assert recovered.append_as_leader(make_batch(1, NOW), 9, NOW).first_offset == bases[1]
    recovered.close()


def test_segments_below_recovery_point_are_trusted(tmp_path: Path) -> None:
    log, spans = fill(tmp_path, CONFIG, 30)
    log.close()
    bases = [s.base_offset for s in log.segments]
    path = segment_file(tmp_path, bases[0], ".log")
    with open(path, "r+b") as f:
        f.seek(70)
        f.write(b"\x00\x01\x02")  # only a CRC scan would notice
    trusted = reopen(tmp_path, CONFIG, recovery_point=bases[2])
    assert trusted.log_end_offset == spans[-1][1] + 1
    trusted.close()


# ----------------------------------------------------------------- property-based


def batch_bounds(data: bytes) -> list[tuple[int, int, int]]:
    """(start, end, next offset) of each batch."""
    return [(pos, pos + h.size, h.last_offset + 1) for pos, h in iter_batches(data)]


@settings(max_examples=120, deadline=None)
@given(st.integers(min_value=0, max_value=10**6), st.sampled_from(["truncate", "flip"]), st.integers(1, 255))
@example(where=41879, damage="flip", xor=128)  # the last batch's lastOffsetDelta made negative: its end below 0
def test_recovery_keeps_exactly_the_valid_prefix(where: int, damage: str, xor: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "t-0"
        log, _ = fill(directory, ONE_SEGMENT, 8)
        data = log.read(0, 1 << 20)
        bounds = batch_bounds(data)
        path = segment_file(directory, 0, ".log")
        if damage == "truncate":
            cut = where % len(data)
            with open(path, "r+b") as f:
                f.truncate(cut)
            kept = [b for b in bounds if b[1] <= cut]
        else:
            # Kafka's CRC covers everything but baseOffset [0, 8) and partitionLeaderEpoch [12, 16).
            position = where % len(data)
            start = max(b[0] for b in bounds if b[0] <= position)
            if position - start < 8 or 12 <= position - start < 16:
                position = start + 20
            with open(path, "r+b") as f:
                f.seek(position)
                original = f.read(1)[0]
                f.seek(position)
                f.write(bytes([original ^ xor]))
            kept = [b for b in bounds if b[1] <= start]
        recovered = reopen(directory, ONE_SEGMENT)
        expected_end = kept[-1][2] if kept else 0
        expected_bytes = data[: kept[-1][1]] if kept else b""
        assert recovered.log_end_offset == expected_end
        assert path.stat().st_size == len(expected_bytes)
        assert (recovered.read(0, 1 << 20) if expected_end else b"") == expected_bytes
        for start, _, next_offset in kept:
            assert recovered.read(next_offset - 1, 1)[:8] == data[start : start + 8]
        recovered.close()
