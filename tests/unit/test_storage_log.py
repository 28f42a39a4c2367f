"""The partition Log: appends, reads, rolling, retention, DeleteRecords, truncation, idempotence."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

from minikafka.protocol.record_batch import iter_batches, parse_header
from minikafka.storage.checkpoint import EpochEntry
from minikafka.storage.errors import (
    CorruptRecordError,
    InconsistentTopicIdError,
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTimestampError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    UnexpectedAppendOffsetError,
)
from minikafka.storage.log import Log
from minikafka.storage.log_config import LogConfig
from minikafka.storage.partition_metadata import read_partition_metadata

NOW = 1_700_000_000_000
TOPIC_ID = bytes(range(16))


def make_batch(
    count: int = 3,
    *,
    timestamp: int = NOW,
    compression: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    value_size: int = 50,
    step_ms: int = 1,
) -> bytearray:
    builder = MemoryRecordsBuilder(
        magic=2,
        compression_type=compression,
        batch_size=1 << 30,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
    )
    for i in range(count):
        builder.append(timestamp=timestamp + i * step_ms, key=b"k%d" % i, value=b"v" * value_size, headers=[])
    builder.close()
    return bytearray(builder.buffer())


def records(data: bytes) -> list[tuple[int, int, bytes]]:
    """(offset, timestamp, value) of every record in fetched bytes, decoded by kafka-python."""
    out = []
    memory = MemoryRecords(bytes(data))
    while (batch := memory.next_batch()) is not None:
        out.extend((r.offset, r.timestamp, r.value) for r in batch)
    return out


def open_log(tmp_path: Path, now_ms: int = NOW, **props: str) -> Log:
    config = LogConfig.from_props(props)
    return Log.open(tmp_path / "topic-0", "topic", 0, config, topic_id=TOPIC_ID, now_ms=now_ms)


# ----------------------------------------------------------------- append and read


def test_append_assigns_offsets_and_reads_back(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    first = log.append_as_leader(make_batch(3), leader_epoch=4, now_ms=NOW)
    second = log.append_as_leader(bytes(make_batch(2, timestamp=NOW + 100)), leader_epoch=4, now_ms=NOW)
    assert (first.first_offset, first.last_offset, first.records_count) == (0, 2, 3)
    assert (second.first_offset, second.last_offset) == (3, 4)
    assert second.max_timestamp == NOW + 101 and second.offset_of_max_timestamp == 4
    assert first.log_append_time == -1 and first.log_start_offset == 0 and not first.duplicate
    assert log.log_end_offset == 5
    got = records(log.read(0, 1 << 20))
    assert [o for o, _, _ in got] == [0, 1, 2, 3, 4]
    assert parse_header(log.read(3, 1 << 20)).partition_leader_epoch == 4
    assert log.leader_epoch_cache.epochs == [EpochEntry(4, 0)]
    assert read_partition_metadata(tmp_path / "topic-0") == TOPIC_ID
    log.close()


def test_read_semantics(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    sizes = []
    for _ in range(4):
        batch = make_batch(5)
        sizes.append(len(batch))
        log.append_as_leader(batch, 0, NOW)
    assert log.read(20, 100) == b""
    with pytest.raises(OffsetOutOfRangeError):
        log.read(21, 100)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 100)
    assert [o for o, _, _ in records(log.read(7, 1 << 20))][:1] == [5]  # from the batch holding offset 7
    assert len(log.read(7, sizes[1] + 10)) == sizes[1]  # whole batches only
    assert len(log.read(7, 10)) == sizes[1]  # min_one_message
    assert log.read(7, 10, min_one_message=False) == b""
    assert [o for o, _, _ in records(log.read(0, 1 << 20, max_offset=15))][-1] == 14  # up to the high watermark
    assert log.read(0, 1 << 20, max_offset=3) == b""  # the first batch is not wholly below it
    assert log.read(15, 1 << 20, max_offset=15) == b""
    log.close()


def test_compressed_batches_round_trip_untouched(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for codec in (1, 2, 3, 4):
        log.append_as_leader(make_batch(20, compression=codec, value_size=300), 0, NOW)
    got = records(log.read(0, 1 << 20))
    assert [o for o, _, _ in got] == list(range(80))
    assert {v for _, _, v in got} == {b"v" * 300}
    assert [h.compression for _, h in iter_batches(log.read(0, 1 << 20))] == [1, 2, 3, 4]
    log.close()


# ----------------------------------------------------------------- rolling


def test_roll_by_size_and_reads_across_segments(tmp_path: Path) -> None:
    log = open_log(tmp_path, **{"internal.segment.bytes": "1000"})
    for _ in range(20):
        log.append_as_leader(make_batch(3), 0, NOW)
    segments = log.segments
    assert len(segments) == 5
    assert all(s.size <= 1000 for s in segments)
    assert [s.base_offset for s in segments] == sorted(s.base_offset for s in segments)
    offsets = []
    next_offset = 0
    while next_offset < log.log_end_offset:
        got = records(log.read(next_offset, 1 << 20))
        offsets.extend(o for o, _, _ in got)
        next_offset = got[-1][0] + 1
    assert offsets == list(range(60))
    names = sorted(os.listdir(tmp_path / "topic-0"))
    assert "00000000000000000000.log" in names and f"{segments[1].base_offset:020d}.index" in names
    log.close()


def test_roll_by_time_uses_first_batch_timestamp(tmp_path: Path) -> None:
    log = open_log(tmp_path, **{"segment.ms": "1000"})
    log.append_as_leader(make_batch(1, timestamp=NOW), 0, NOW)
    log.append_as_leader(make_batch(1, timestamp=NOW + 1000), 0, NOW)
    assert len(log.segments) == 1
    log.append_as_leader(make_batch(1, timestamp=NOW + 1001), 0, NOW)
    assert [s.base_offset for s in log.segments] == [0, 2]
    assert not log.maybe_roll_for_time(NOW + 1500)
    assert log.maybe_roll_for_time(NOW + 2002)
    assert [s.base_offset for s in log.segments] == [0, 2, 3]
    assert not log.maybe_roll_for_time(NOW + 99999)  # the new active segment is empty
    log.close()


def test_roll_when_index_full_and_explicit_roll(tmp_path: Path) -> None:
    log = open_log(tmp_path, **{"segment.index.bytes": "24", "index.interval.bytes": "1"})
    for _ in range(8):
        log.append_as_leader(make_batch(1), 0, NOW)
    assert len(log.segments) >= 2
    assert all(s.offset_index.entries <= 3 for s in log.segments)
    many = b"".join(bytes(make_batch(1)) for _ in range(10))  # fills the indexes within one append
    assert log.append_as_leader(many, 0, NOW).records_count == 10
    assert [o for o, _, _ in records(log.read(log.log_end_offset - 10, 1 << 20))] == list(range(8, 18))
    leo = log.log_end_offset
    assert log.roll(NOW).base_offset == leo
    assert log.roll(NOW).base_offset == leo  # rolling an empty active segment recreates it
    log.close()


# ----------------------------------------------------------------- retention and DeleteRecords


def test_retention_by_time(tmp_path: Path) -> None:
    log = open_log(tmp_path, **{"internal.segment.bytes": "1000", "retention.ms": "10000"})
    for i in range(12):
        log.append_as_leader(make_batch(3, timestamp=NOW + i * 1000), 0, NOW + 20000)
    old_count = len(log.segments)
    assert log.delete_old_segments(NOW + 5000, high_watermark=log.log_end_offset) == 0
    deleted = log.delete_old_segments(NOW + 15500, high_watermark=log.log_end_offset)
    assert 0 < deleted < old_count
    assert log.log_start_offset == log.segments[0].base_offset > 0
    assert all(s.largest_timestamp >= NOW + 5500 for s in log.segments[:-1])
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)
    assert not (tmp_path / "topic-0" / "00000000000000000000.log").exists()
    log.close()


def test_retention_respects_high_watermark_and_deletes_everything_by_rolling(tmp_path: Path) -> None:
    log = open_log(tmp_path, **{"internal.segment.bytes": "1000", "retention.ms": "1000"})
    for _ in range(6):
        log.append_as_leader(make_batch(3), 0, NOW)
    leo = log.log_end_offset
    assert log.delete_old_segments(NOW + 10_000, high_watermark=0) == 0
    deleted = log.delete_old_segments(NOW + 10_000, high_watermark=leo)
    assert deleted >= 2
    assert len(log.segments) == 1 and log.segments[0].size == 0
    assert log.log_start_offset == log.log_end_offset == leo
    assert log.read(leo, 100) == b""
    assert log.append_as_leader(make_batch(1), 0, NOW).first_offset == leo
    log.close()


def test_retention_by_size(tmp_path: Path) -> None:
    log = open_log(tmp_path, **{"internal.segment.bytes": "1000", "retention.bytes": "2500"})
    for _ in range(20):
        log.append_as_leader(make_batch(3), 0, NOW)
    total = log.size_in_bytes
    deleted = log.delete_old_segments(NOW, high_watermark=log.log_end_offset)
    assert deleted > 0
    assert log.size_in_bytes >= 2500 - 1000 and log.size_in_bytes < total
    assert log.log_start_offset == log.segments[0].base_offset
    log.close()


def test_compact_policy_keeps_segments(tmp_path: Path) -> None:
    log = open_log(tmp_path, **{"internal.segment.bytes": "1000", "retention.ms": "1", "cleanup.policy": "compact"})
    for _ in range(6):
        log.append_as_leader(make_batch(3), 0, NOW)
    assert log.delete_old_segments(NOW + 10_000, log.log_end_offset) == 0
    log.close()


def test_delete_records_moves_log_start_offset(tmp_path: Path) -> None:
    log = open_log(tmp_path, **{"internal.segment.bytes": "1000"})
    for _ in range(10):
        log.append_as_leader(make_batch(3), 0, NOW)
    third_base = log.segments[2].base_offset
    assert log.maybe_increment_log_start_offset(third_base + 1) == third_base + 1
    assert log.segments[0].base_offset == third_base  # segments wholly below are gone
    assert log.maybe_increment_log_start_offset(2) == third_base + 1  # never goes back
    with pytest.raises(OffsetOutOfRangeError):
        log.read(third_base, 100)
    assert records(log.read(third_base + 1, 1 << 20))[0][0] <= third_base + 1  # whole batch from its start
    with pytest.raises(OffsetOutOfRangeError):
        log.maybe_increment_log_start_offset(log.log_end_offset + 1)
    assert log.maybe_increment_log_start_offset(log.log_end_offset) == log.log_end_offset
    assert log.fetch_offset_by_timestamp(-2)[0] == log.log_end_offset  # type: ignore[index]
    log.close()


# ----------------------------------------------------------------- timestamps


def test_fetch_offset_by_timestamp(tmp_path: Path) -> None:
    log = open_log(tmp_path, **{"internal.segment.bytes": "1500", "index.interval.bytes": "100"})
    for i in range(10):
        log.append_as_leader(make_batch(4, timestamp=NOW + i * 100, step_ms=10), i // 5, NOW)
    assert log.fetch_offset_by_timestamp(NOW) == (0, NOW, 0)
    assert log.fetch_offset_by_timestamp(NOW + 15) == (2, NOW + 20, 0)
    assert log.fetch_offset_by_timestamp(NOW + 625) == (27, NOW + 630, 1)
    assert log.fetch_offset_by_timestamp(NOW + 631) == (28, NOW + 700, 1)
    assert log.fetch_offset_by_timestamp(NOW + 930) == (39, NOW + 930, 1)
    assert log.fetch_offset_by_timestamp(NOW + 931) is None
    assert log.fetch_offset_by_timestamp(-1) == (40, -1, 1)
    assert log.fetch_offset_by_timestamp(-2) == (0, -1, 0)
    assert log.fetch_offset_by_timestamp(-3) == (39, NOW + 930, 1)
    assert log.offset_of_max_timestamp() == (39, NOW + 930, 1)
    log.close()


def test_fetch_offset_by_timestamp_in_compressed_batch_and_unsorted_timestamps(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    builder = MemoryRecordsBuilder(magic=2, compression_type=4, batch_size=1 << 20)
    for ts in (NOW + 50, NOW + 10, NOW + 90, NOW + 20):
        builder.append(timestamp=ts, key=None, value=b"x" * 100)
    builder.close()
    log.append_as_leader(bytearray(builder.buffer()), 0, NOW)
    assert log.fetch_offset_by_timestamp(NOW + 60) == (2, NOW + 90, 0)
    assert log.fetch_offset_by_timestamp(NOW + 15) == (0, NOW + 50, 0)
    assert log.offset_of_max_timestamp() == (2, NOW + 90, 0)
    log.close()


def test_empty_log_timestamp_queries(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    assert log.fetch_offset_by_timestamp(NOW) is None
    assert log.offset_of_max_timestamp() is None
    assert log.fetch_offset_by_timestamp(-1) == (0, -1, -1)
    log.close()


def test_log_append_time(tmp_path: Path) -> None:
    log = open_log(tmp_path, **{"message.timestamp.type": "LogAppendTime"})
    info = log.append_as_leader(make_batch(3, timestamp=5), 0, NOW + 7)
    assert info.log_append_time == NOW + 7 and info.max_timestamp == NOW + 7
    assert {ts for _, ts, _ in records(log.read(0, 1 << 20))} == {NOW + 7}
    assert log.fetch_offset_by_timestamp(NOW) == (0, NOW + 7, 0)
    log.close()


def test_timestamp_validation(tmp_path: Path) -> None:
    log = open_log(tmp_path, **{"message.timestamp.before.max.ms": "1000"})
    with pytest.raises(InvalidTimestampError):
        log.append_as_leader(make_batch(1, timestamp=NOW + 3_600_001), 0, NOW)
    with pytest.raises(InvalidTimestampError):
        log.append_as_leader(make_batch(1, timestamp=NOW - 1001), 0, NOW)
    log.append_as_leader(make_batch(1, timestamp=NOW + 3_600_000), 0, NOW)
    log.append_as_leader(make_batch(1, timestamp=-1), 0, NOW)
    assert log.log_end_offset == 2
    log.close()


# ----------------------------------------------------------------- size limits and bad input


def test_size_limits(tmp_path: Path) -> None:
    log = open_log(tmp_path, **{"max.message.bytes": "500", "internal.segment.bytes": "5000"})
    with pytest.raises(RecordTooLargeError) as too_large:
        log.append_as_leader(make_batch(10, value_size=100), 0, NOW)
    assert too_large.value.code == 10
    with pytest.raises(RecordBatchTooLargeError):
        log.append_as_leader(b"".join(bytes(make_batch(1)) for _ in range(60)), 0, NOW)
    with pytest.raises(CorruptRecordError) as corrupt:
        log.append_as_leader(make_batch(1)[:-3], 0, NOW)
    assert corrupt.value.code == 2
    with pytest.raises(InvalidRecordError) as invalid:
        log.append_as_leader(b"\x00" * 16 + b"\x01" + b"\x00" * 60, 0, NOW)
    assert invalid.value.code == 87
    assert log.log_end_offset == 0 and log.size_in_bytes == 0
    log.close()


# ----------------------------------------------------------------- idempotence


def test_idempotent_retry_returns_original_offsets(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(make_batch(2), 0, NOW)
    first = log.append_as_leader(make_batch(3, producer_id=9, producer_epoch=0, base_sequence=0), 0, NOW)
    log.append_as_leader(make_batch(4, producer_id=9, producer_epoch=0, base_sequence=3), 0, NOW)
    leo = log.log_end_offset
    retry = log.append_as_leader(make_batch(3, producer_id=9, producer_epoch=0, base_sequence=0), 0, NOW)
    assert retry.duplicate
    assert (retry.first_offset, retry.last_offset) == (first.first_offset, first.last_offset) == (2, 4)
    assert log.log_end_offset == leo
    with pytest.raises(OutOfOrderSequenceError) as gap:
        log.append_as_leader(make_batch(1, producer_id=9, producer_epoch=0, base_sequence=9), 0, NOW)
    assert gap.value.code == 45
    log.append_as_leader(make_batch(1, producer_id=9, producer_epoch=1, base_sequence=0), 0, NOW)
    with pytest.raises(InvalidProducerEpochError) as fenced:
        log.append_as_leader(make_batch(1, producer_id=9, producer_epoch=0, base_sequence=7), 0, NOW)
    assert fenced.value.code == 47
    log.close()
    reopened = Log.open(tmp_path / "topic-0", "topic", 0, LogConfig(), now_ms=NOW, recovery_point=0)
    entry = reopened.producer_state.last_entries()[9]
    assert entry.producer_epoch == 1 and entry.last_seq == 0
    again = reopened.append_as_leader(make_batch(1, producer_id=9, producer_epoch=1, base_sequence=0), 0, NOW)
    assert again.duplicate and again.first_offset == leo
    reopened.close()


# ----------------------------------------------------------------- follower side


def test_append_as_follower_keeps_offsets_and_epochs(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "leader")
    leader.append_as_leader(make_batch(3), 1, NOW)
    leader.append_as_leader(make_batch(2), 3, NOW)
    fetched = leader.read(0, 1 << 20)
    follower = Log.open(tmp_path / "follower" / "topic-0", "topic", 0, LogConfig(), now_ms=NOW)
    info = follower.append_as_follower(fetched + fetched[:20])  # a partial trailing batch is dropped
    assert (info.first_offset, info.last_offset) == (0, 4)
    assert follower.log_end_offset == 5
    assert follower.read(0, 1 << 20) == fetched
    assert follower.leader_epoch_cache.epochs == [EpochEntry(1, 0), EpochEntry(3, 3)]
    assert follower.end_offset_for_epoch(1) == (1, 3)
    assert follower.end_offset_for_epoch(2) == (1, 3)
    assert follower.end_offset_for_epoch(3) == (3, 5)
    assert follower.end_offset_for_epoch(0) == (0, 0)
    with pytest.raises(UnexpectedAppendOffsetError):
        follower.append_as_follower(fetched)
    assert follower.append_as_follower(fetched[:30]).first_offset == -1
    corrupt = bytearray(fetched)
    corrupt[-1] ^= 1
    with pytest.raises(CorruptRecordError):
        Log.open(tmp_path / "f2" / "topic-0", "topic", 0, LogConfig(), now_ms=NOW).append_as_follower(corrupt)
    leader.close()
    follower.close()


def test_truncate_to(tmp_path: Path) -> None:
    log = open_log(tmp_path, **{"internal.segment.bytes": "500"})
    for epoch in range(8):
        log.append_as_leader(make_batch(3, producer_id=5, producer_epoch=0, base_sequence=epoch * 3), epoch, NOW)
    assert [s.base_offset for s in log.segments] == [0, 6, 12, 18]
    log.truncate_to(12, now_ms=NOW)
    assert log.log_end_offset == 12
    assert [s.base_offset for s in log.segments] == [0, 6, 12] and log.segments[-1].size == 0
    assert [o for o, _, _ in records(log.read(9, 1 << 20))] == [9, 10, 11]
    assert log.leader_epoch_cache.latest_epoch == 3
    assert log.producer_state.last_entry(5).last_seq == 11  # type: ignore[union-attr]
    log.truncate_to(100)  # past the end: nothing happens
    assert log.log_end_offset == 12
    log.truncate_to(8, now_ms=NOW)  # inside batch 6..8: the whole batch goes
    assert log.log_end_offset == 6 and [s.base_offset for s in log.segments] == [0, 6]
    assert log.leader_epoch_cache.latest_epoch == 1
    info = log.append_as_leader(make_batch(3, producer_id=5, producer_epoch=0, base_sequence=6), 9, NOW)
    assert info.first_offset == 6
    log.truncate_to(0)
    assert log.log_end_offset == 0 and log.size_in_bytes == 0
    log.close()


def test_truncate_fully_and_start_at(tmp_path: Path) -> None:
    log = open_log(tmp_path, **{"internal.segment.bytes": "1000"})
    for _ in range(5):
        log.append_as_leader(make_batch(3), 2, NOW)
    log.truncate_fully_and_start_at(1000)
    assert log.log_start_offset == log.log_end_offset == 1000
    assert [s.base_offset for s in log.segments] == [1000]
    assert log.leader_epoch_cache.epochs == []
    assert sorted(f for f in os.listdir(tmp_path / "topic-0") if f.endswith(".log")) == ["00000000000000001000.log"]
    assert log.append_as_leader(make_batch(1), 3, NOW).first_offset == 1000
    log.close()


# ----------------------------------------------------------------- lifecycle


def test_flush_recovery_point_and_flush_messages(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(make_batch(3), 0, NOW)
    assert log.recovery_point == 0
    log.flush()
    assert log.recovery_point == 3
    log.update_config(LogConfig.from_props({"flush.messages": "5"}))
    log.append_as_leader(make_batch(3), 0, NOW)
    assert log.recovery_point == 3
    log.append_as_leader(make_batch(3), 0, NOW)
    assert log.recovery_point == 9
    log.append_as_leader(make_batch(1), 0, NOW)
    log.flush(up_to=9)
    assert log.recovery_point == 9
    log.close()
    assert log.recovery_point == 10


def test_open_existing_log_and_topic_id_check(tmp_path: Path) -> None:
    log = open_log(tmp_path, **{"internal.segment.bytes": "1000"})
    for _ in range(10):
        log.append_as_leader(make_batch(3), 1, NOW)
    leo = log.log_end_offset
    log.close()
    directory = tmp_path / "topic-0"
    for stray in ("leader-epoch-checkpoint.tmp", "00000000000000000000.log.deleted", "00000000000000000042.index.swap"):
        (directory / stray).write_bytes(b"junk")
    (directory / "00000000000000099999.index").write_bytes(b"")
    reopened = Log.open(directory, "topic", 0, LogConfig(), recovery_point=leo, log_start_offset=4, now_ms=NOW)
    assert reopened.topic_id == TOPIC_ID
    assert reopened.log_end_offset == leo and reopened.log_start_offset == 4 and reopened.recovery_point == leo
    assert reopened.leader_epoch_cache.epochs == [EpochEntry(1, 4)]
    leftovers = [n for n in os.listdir(directory)
                 if n.endswith((".tmp", ".deleted", ".swap")) or n.startswith("000000000000000999")]
    assert leftovers == []
    reopened.close()
    with pytest.raises(InconsistentTopicIdError):
        Log.open(directory, "topic", 0, LogConfig(), topic_id=bytes(16), now_ms=NOW)


def test_open_with_log_start_offset_past_the_data(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(make_batch(3), 0, NOW)
    log.close()
    reopened = Log.open(tmp_path / "topic-0", "topic", 0, LogConfig(), log_start_offset=50, now_ms=NOW)
    assert reopened.log_start_offset == reopened.log_end_offset == 50
    reopened.close()


def test_delete_removes_directory(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(make_batch(3), 0, NOW)
    log.close()
    log.delete()
    assert not (tmp_path / "topic-0").exists()


def test_deleted_segment_stays_readable_by_a_holder(tmp_path: Path) -> None:
    log = open_log(tmp_path, **{"internal.segment.bytes": "1000"})
    for _ in range(10):
        log.append_as_leader(make_batch(3), 0, NOW)
    held = log.segments[0]  # e.g. a fetch running in a worker thread
    log.maybe_increment_log_start_offset(log.segments[2].base_offset)
    assert held not in log.segments and not held.log_path.exists()
    assert [o for o, _, _ in records(held.read(0, 1 << 20, None, True) or b"")][:3] == [0, 1, 2]
    log.close()


def test_expired_producers_are_not_rebuilt(tmp_path: Path) -> None:
    log = open_log(tmp_path, **{"internal.segment.bytes": "1000"})
    for i in range(6):
        log.append_as_leader(make_batch(3, producer_id=1, producer_epoch=0, base_sequence=i * 3), 0, NOW)
    later = NOW + 86_400_000
    log.append_as_leader(make_batch(3, producer_id=2, producer_epoch=0, base_sequence=0, timestamp=later), 0, later)
    log.close()
    later = Log.open(tmp_path / "topic-0", "topic", 0, LogConfig(), now_ms=NOW + 86_400_500)
    assert set(later.producer_state.last_entries()) == {2}
    later.close()


def test_flush_up_to_rolled_segment(tmp_path: Path) -> None:
    log = open_log(tmp_path, **{"internal.segment.bytes": "1000"})
    for _ in range(10):
        log.append_as_leader(make_batch(3), 0, NOW)
    active_base = log.active_segment.base_offset
    log.flush(log.active_segment.base_offset)
    assert log.recovery_point == active_base
    log.flush(10**9)
    assert log.recovery_point == log.log_end_offset
    log.close()
