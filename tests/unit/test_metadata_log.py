"""The controller's metadata log: durable appends of metadata record batches, replay across restarts and crashes,
and Kafka's partition layout on disk."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest
from crc32c import crc32c
from kafka.record.memory_records import MemoryRecordsBuilder

from minikafka.protocol.metadata_records import (
    FenceBrokerRecord,
    MetadataRecordError,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
    UnfenceBrokerRecord,
)
from minikafka.protocol.record_batch import ATTRIBUTES_OFFSET, CONTROL_MASK, CRC_OFFSET, iter_batches
from minikafka.storage.checkpoint import EpochEntry, read_leader_epoch_checkpoint
from minikafka.storage.log import Log
from minikafka.storage.metadata_log import (
    METADATA_LOG_CONFIG,
    MetadataLog,
    StaleControllerEpochError,
)

NOW = 1_700_000_000_000
TOPIC_ID = uuid.UUID("6b1d3a4e-2f0c-4c59-9a57-0e3c1f2d8a10")
PARTITION_DIR = "__cluster_metadata-0"
SEGMENT = "00000000000000000000"


def broker(broker_id: int) -> RegisterBrokerRecord:
    return RegisterBrokerRecord(
        broker_id=broker_id, incarnation_id=uuid.UUID(int=broker_id + 1), broker_epoch=broker_id * 10,
        end_points=[RegisterBrokerRecord.BrokerEndpoint(name="PLAINTEXT", host="127.0.0.1", port=9092 + broker_id,
                                                        security_protocol=0)],
        features=[], rack=None)


def topic_with_partition() -> list[PartitionRecord | TopicRecord]:
    return [TopicRecord(name="orders", topic_id=TOPIC_ID),
            PartitionRecord(partition_id=0, topic_id=TOPIC_ID, replicas=[1, 2], isr=[1, 2], leader=1, leader_epoch=0,
                            partition_epoch=0)]


def test_append_and_replay_across_reopen(tmp_path: Path) -> None:
    first = [broker(1), broker(2), UnfenceBrokerRecord(id=1, epoch=10)]
    log = MetadataLog.open(tmp_path, now_ms=NOW)
    assert log.controller_epoch == 0
    assert log.dir == tmp_path / PARTITION_DIR
    assert log.append(first[:2], now_ms=NOW) == 1
    assert log.append(first[2:], now_ms=NOW) == 2
    assert list(log.replay()) == first
    log.close()

    log = MetadataLog.open(tmp_path, now_ms=NOW)
    assert log.controller_epoch == 1  # a restarted quorum of one starts a new epoch
    replayed = list(log.replay())
    assert replayed == first
    assert [type(r) for r in replayed] == [RegisterBrokerRecord, RegisterBrokerRecord, UnfenceBrokerRecord]
    assert log.log_end_offset == 3
    change = PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, isr=[1], leader=1)
    assert log.append([*topic_with_partition(), change], now_ms=NOW) == 5
    log.close()

    log = MetadataLog.open(tmp_path, now_ms=NOW)
    assert list(log.replay()) == [*first, *topic_with_partition(), change]
    log.close()


def test_kafka_layout_on_disk(tmp_path: Path) -> None:
    log = MetadataLog.open(tmp_path, controller_epoch=4, now_ms=NOW)
    log.append([broker(1)], now_ms=NOW)
    log.close()
    log = MetadataLog.open(tmp_path, now_ms=NOW)
    log.append([FenceBrokerRecord(id=1, epoch=10)], now_ms=NOW)
    log.close()
    directory = tmp_path / PARTITION_DIR
    names = set(os.listdir(directory))
    assert {f"{SEGMENT}.log", f"{SEGMENT}.index", f"{SEGMENT}.timeindex", "leader-epoch-checkpoint"} <= names
    assert read_leader_epoch_checkpoint(directory / "leader-epoch-checkpoint") == [EpochEntry(4, 0), EpochEntry(5, 1)]
    data = (directory / f"{SEGMENT}.log").read_bytes()
    headers = [header for _, header in iter_batches(data)]
    assert [(h.base_offset, h.partition_leader_epoch, h.records_count) for h in headers] == [(0, 4, 1), (1, 5, 1)]
    assert all(h.producer_id == -1 and not h.is_control and h.compression == 0 for h in headers)


def test_a_stale_controller_epoch_is_refused(tmp_path: Path) -> None:
    log = MetadataLog.open(tmp_path, controller_epoch=3, now_ms=NOW)
    log.append([broker(1)], now_ms=NOW)
    log.close()
    with pytest.raises(StaleControllerEpochError):
        MetadataLog.open(tmp_path, controller_epoch=2, now_ms=NOW)
    log = MetadataLog.open(tmp_path, controller_epoch=3, now_ms=NOW)  # the same controller, reopening
    assert log.append([broker(2)], now_ms=NOW) == 1
    log.close()


def test_an_empty_append_is_refused(tmp_path: Path) -> None:
    log = MetadataLog.open(tmp_path, now_ms=NOW)
    with pytest.raises(ValueError):
        log.append([], now_ms=NOW)
    log.close()


def test_every_append_is_fsynced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = MetadataLog.open(tmp_path, now_ms=NOW)
    segment = os.stat(tmp_path / PARTITION_DIR / f"{SEGMENT}.log")
    synced: list[tuple[int, int]] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        st = os.fstat(fd)
        synced.append((st.st_dev, st.st_ino))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    for i in range(3):
        synced.clear()
        log.append([broker(i)], now_ms=NOW)
        assert (segment.st_dev, segment.st_ino) in synced, f"append {i} returned before the segment was fsynced"
    monkeypatch.undo()
    log.close()


def _segment(tmp_path: Path) -> Path:
    return tmp_path / PARTITION_DIR / f"{SEGMENT}.log"


def _three_batches(tmp_path: Path) -> list[int]:
    """Three appends; the byte position where each batch starts in the segment."""
    log = MetadataLog.open(tmp_path, now_ms=NOW)
    log.append([broker(1)], now_ms=NOW)
    log.append(topic_with_partition(), now_ms=NOW)
    log.append([broker(2)], now_ms=NOW)
    log.close()
    return [position for position, _ in iter_batches(_segment(tmp_path).read_bytes())]


def test_a_batch_torn_in_the_middle_is_dropped(tmp_path: Path) -> None:
    starts = _three_batches(tmp_path)
    size = _segment(tmp_path).stat().st_size
    with open(_segment(tmp_path), "r+b") as f:
        f.truncate((starts[2] + size) // 2)  # the last batch loses its second half
    log = MetadataLog.open(tmp_path, now_ms=NOW)
    assert list(log.replay()) == [broker(1), *topic_with_partition()]
    assert _segment(tmp_path).stat().st_size == starts[2]
    assert log.append([broker(3)], now_ms=NOW) == 3
    log.close()
    log = MetadataLog.open(tmp_path, now_ms=NOW)
    assert list(log.replay()) == [broker(1), *topic_with_partition(), broker(3)]
    log.close()


def test_garbage_after_the_last_batch_is_dropped(tmp_path: Path) -> None:
    _three_batches(tmp_path)
    size = _segment(tmp_path).stat().st_size
    with open(_segment(tmp_path), "ab") as f:
        f.write(os.urandom(100))
    log = MetadataLog.open(tmp_path, now_ms=NOW)
    assert list(log.replay()) == [broker(1), *topic_with_partition(), broker(2)]
    assert _segment(tmp_path).stat().st_size == size
    log.close()


def test_a_corrupt_batch_and_everything_after_it_are_dropped(tmp_path: Path) -> None:
    starts = _three_batches(tmp_path)
    with open(_segment(tmp_path), "r+b") as f:
        f.seek(starts[1] + 70)  # inside the records of the second batch: its CRC no longer matches
        byte = f.read(1)
        f.seek(starts[1] + 70)
        f.write(bytes([byte[0] ^ 0xFF]))
    log = MetadataLog.open(tmp_path, now_ms=NOW)
    assert list(log.replay()) == [broker(1)]
    assert log.log_end_offset == 1
    log.close()


def test_an_undecodable_record_names_its_offset(tmp_path: Path) -> None:
    log = MetadataLog.open(tmp_path, now_ms=NOW)
    log.append([broker(1)], now_ms=NOW)
    log.close()
    raw = Log.open(tmp_path / PARTITION_DIR, "__cluster_metadata", 0, METADATA_LOG_CONFIG, now_ms=NOW)
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1024)
    builder.append(timestamp=NOW, key=None, value=b"\x01\x06\x00", headers=[])
    builder.close()
    raw.append_as_leader(bytearray(builder.buffer()), 1, NOW)
    raw.close()
    log = MetadataLog.open(tmp_path, now_ms=NOW)
    with pytest.raises(MetadataRecordError, match="offset 1 .*record type 6"):
        list(log.replay())
    log.close()


def test_control_batches_are_skipped(tmp_path: Path) -> None:
    """A log written by Kafka holds control batches (KRaft's leader changes) between the metadata batches."""
    log = MetadataLog.open(tmp_path, now_ms=NOW)
    log.append([broker(1)], now_ms=NOW)
    log.close()
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1024)
    builder.append(timestamp=NOW, key=b"\x00\x00\x00\x03", value=b"\x00\x00", headers=[])
    builder.close()
    batch = bytearray(builder.buffer())
    batch[0:8] = (1).to_bytes(8, "big")  # base offset 1
    batch[ATTRIBUTES_OFFSET + 1] |= CONTROL_MASK
    batch[CRC_OFFSET : CRC_OFFSET + 4] = crc32c(bytes(batch[ATTRIBUTES_OFFSET:])).to_bytes(4, "big")
    raw = Log.open(tmp_path / PARTITION_DIR, "__cluster_metadata", 0, METADATA_LOG_CONFIG, now_ms=NOW)
    raw.append_as_follower(batch, now_ms=NOW)
    raw.close()
    log = MetadataLog.open(tmp_path, now_ms=NOW)
    assert log.append([broker(2)], now_ms=NOW) == 2
    assert list(log.replay()) == [broker(1), broker(2)]
    log.close()


_WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path

    from minikafka.protocol.metadata_records import FenceBrokerRecord
    from minikafka.storage.metadata_log import MetadataLog

    log = MetadataLog.open(Path(sys.argv[1]))
    for i in range(100_000):
        offset = log.append([FenceBrokerRecord(id=i, epoch=i)])
        print(offset, flush=True)
    """
)


def test_replay_after_kill_9(tmp_path: Path) -> None:
    """Every append acknowledged before a kill -9 is replayed; whatever was being written then is whole or gone."""
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(tmp_path)], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    acknowledged = -1
    try:
        fd = proc.stdout.fileno()
        pending = b""
        deadline = time.monotonic() + 60
        for _ in range(100_000):
            remaining = deadline - time.monotonic()
            if acknowledged >= 50 or remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                break
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            *lines, pending = (pending + chunk).split(b"\n")
            if lines:
                acknowledged = int(lines[-1])
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        proc.stdout.close()
    assert acknowledged >= 50, "the writer did not get going"
    log = MetadataLog.open(tmp_path)
    replayed = list(log.replay())
    log.close()
    assert len(replayed) > acknowledged
    assert replayed == [FenceBrokerRecord(id=i, epoch=i) for i in range(len(replayed))]
