"""Checkpoint files, leader-epoch cache, partition.metadata and the broker log directory."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from minikafka.storage.checkpoint import (
    EpochEntry,
    read_leader_epoch_checkpoint,
    read_offset_checkpoint,
    write_leader_epoch_checkpoint,
    write_offset_checkpoint,
)
from minikafka.storage.errors import KafkaStorageError
from minikafka.storage.leader_epoch_cache import LEADER_EPOCH_CHECKPOINT, LeaderEpochCache
from minikafka.storage.log_dir import LogDir, parse_partition_dir_name, validate_topic_name
from minikafka.storage.partition_metadata import (
    random_uuid,
    read_partition_metadata,
    uuid_from_str,
    uuid_to_str,
    write_partition_metadata,
)

# ----------------------------------------------------------------- checkpoint files


def test_offset_checkpoint_format_is_byte_exact(tmp_path: Path) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    write_offset_checkpoint(path, {("orders", 1): 42, ("my-topic.v2", 0): 7, ("orders", 0): 0})
    assert path.read_bytes() == b"0\n3\nmy-topic.v2 0 7\norders 0 0\norders 1 42\n"
    assert read_offset_checkpoint(path) == {("orders", 1): 42, ("my-topic.v2", 0): 7, ("orders", 0): 0}
    assert not (tmp_path / "recovery-point-offset-checkpoint.tmp").exists()


def test_offset_checkpoint_empty_and_missing(tmp_path: Path) -> None:
    path = tmp_path / "replication-offset-checkpoint"
    assert read_offset_checkpoint(path) == {}
    write_offset_checkpoint(path, {})
    assert path.read_bytes() == b"0\n0\n"
    assert read_offset_checkpoint(path) == {}
    path.write_bytes(b"")
    assert read_offset_checkpoint(path) == {}


def test_leader_epoch_checkpoint_format_is_byte_exact(tmp_path: Path) -> None:
    path = tmp_path / LEADER_EPOCH_CHECKPOINT
    write_leader_epoch_checkpoint(path, [EpochEntry(0, 0), EpochEntry(3, 120)])
    assert path.read_bytes() == b"0\n2\n0 0\n3 120\n"
    assert read_leader_epoch_checkpoint(path) == [EpochEntry(0, 0), EpochEntry(3, 120)]


@pytest.mark.parametrize(
    "content",
    [b"1\n0\n", b"0\n2\n0 0\n", b"0\n1\nnot numbers\n", b"zero\n", b"0\n1\n1 2 3\n"],
)
def test_malformed_checkpoints_raise_storage_error(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "cp"
    path.write_bytes(content)
    with pytest.raises(KafkaStorageError):
        read_leader_epoch_checkpoint(path)


# ----------------------------------------------------------------- leader epoch cache


def test_epoch_cache_assign_persists_and_ignores_stale(tmp_path: Path) -> None:
    cache = LeaderEpochCache.in_dir(tmp_path)
    assert cache.latest_epoch is None and cache.epochs == []
    cache.assign(0, 0)
    cache.assign(0, 5)  # same epoch, later offset: nothing new
    cache.assign(2, 10)
    cache.assign(4, 25)
    assert cache.epochs == [EpochEntry(0, 0), EpochEntry(2, 10), EpochEntry(4, 25)]
    assert (tmp_path / LEADER_EPOCH_CHECKPOINT).read_bytes() == b"0\n3\n0 0\n2 10\n4 25\n"
    assert LeaderEpochCache.in_dir(tmp_path).epochs == cache.epochs
    assert cache.latest_epoch == 4
    assert cache.earliest_entry == EpochEntry(0, 0)


def test_epoch_cache_assign_older_epoch_drops_conflicting_entries(tmp_path: Path) -> None:
    cache = LeaderEpochCache.in_dir(tmp_path)
    for epoch, offset in [(1, 0), (2, 10), (3, 20)]:
        cache.assign(epoch, offset)
    cache.assign(2, 15)  # Kafka: entries with epoch >= 2 or offset >= 15 are removed first
    assert cache.epochs == [EpochEntry(1, 0), EpochEntry(2, 15)]
    cache.assign(5, 12)
    assert cache.epochs == [EpochEntry(1, 0), EpochEntry(5, 12)]
    with pytest.raises(ValueError):
        cache.assign(-1, 3)


def test_epoch_cache_end_offset_for(tmp_path: Path) -> None:
    cache = LeaderEpochCache.in_dir(tmp_path)
    for epoch, offset in [(2, 10), (4, 30), (7, 55)]:
        cache.assign(epoch, offset)
    leo = 80
    assert cache.end_offset_for(7, leo) == (7, 80)  # latest epoch -> log end offset
    assert cache.end_offset_for(4, leo) == (4, 55)
    assert cache.end_offset_for(5, leo) == (4, 55)  # unknown epoch between: the one below, next start
    assert cache.end_offset_for(1, leo) == (1, 10)  # older than all known: first start offset
    assert cache.end_offset_for(-1, leo) == (-1, -1)
    assert cache.end_offset_for(9, leo) == (-1, -1)
    assert LeaderEpochCache(tmp_path / "empty").end_offset_for(3, leo) == (-1, -1)
    assert cache.epoch_for_offset(9) is None
    assert cache.epoch_for_offset(10) == 2 and cache.epoch_for_offset(54) == 4 and cache.epoch_for_offset(999) == 7


def test_epoch_cache_truncation(tmp_path: Path) -> None:
    cache = LeaderEpochCache.in_dir(tmp_path)
    for epoch, offset in [(1, 0), (2, 10), (3, 20), (4, 30)]:
        cache.assign(epoch, offset)
    cache.truncate_from_end(20)
    assert cache.epochs == [EpochEntry(1, 0), EpochEntry(2, 10)]
    cache.truncate_from_end(100)
    assert cache.epochs == [EpochEntry(1, 0), EpochEntry(2, 10)]
    cache.truncate_from_start(12)
    assert cache.epochs == [EpochEntry(2, 12)]
    cache.truncate_from_start(5)
    assert cache.epochs == [EpochEntry(2, 12)]
    assert read_leader_epoch_checkpoint(tmp_path / LEADER_EPOCH_CHECKPOINT) == [EpochEntry(2, 12)]
    cache.clear_and_flush()
    assert (tmp_path / LEADER_EPOCH_CHECKPOINT).read_bytes() == b"0\n0\n"


# ----------------------------------------------------------------- partition.metadata and uuids


def test_uuid_text_form_matches_kafka() -> None:
    value = bytes(range(16))
    text = uuid_to_str(value)
    assert text == "AAECAwQFBgcICQoLDA0ODw" and len(text) == 22
    assert uuid_from_str(text) == value
    for _ in range(200):
        assert not uuid_to_str(random_uuid()).startswith("-")
    with pytest.raises(ValueError):
        uuid_from_str("short")


def test_partition_metadata_round_trip(tmp_path: Path) -> None:
    topic_id = bytes(range(16, 32))
    assert read_partition_metadata(tmp_path) is None
    write_partition_metadata(tmp_path, topic_id)
    assert (tmp_path / "partition.metadata").read_text() == f"version: 0\ntopic_id: {uuid_to_str(topic_id)}"
    assert read_partition_metadata(tmp_path) == topic_id
    (tmp_path / "partition.metadata").write_text("version: 3\ntopic_id: x\n")
    with pytest.raises(KafkaStorageError):
        read_partition_metadata(tmp_path)


# ----------------------------------------------------------------- log dir


def test_meta_properties_created_then_reused(tmp_path: Path) -> None:
    log_dir = LogDir(tmp_path / "data")
    cluster_id, directory_id = log_dir.load_or_create_meta(3, None)
    text = (tmp_path / "data" / "meta.properties").read_text()
    assert text.startswith("#\n#")
    assert f"cluster.id={cluster_id}\n" in text and f"directory.id={directory_id}\n" in text
    assert "node.id=3\n" in text and "version=1\n" in text
    assert len(cluster_id) == 22 and len(directory_id) == 22
    assert LogDir(tmp_path / "data").load_or_create_meta(3, cluster_id) == (cluster_id, directory_id)
    assert LogDir(tmp_path / "data").load_or_create_meta(3, None) == (cluster_id, directory_id)
    with pytest.raises(ValueError, match="node id"):
        log_dir.load_or_create_meta(4, None)
    with pytest.raises(ValueError, match="Cluster ID"):
        log_dir.load_or_create_meta(3, "AAAAAAAAAAAAAAAAAAAAAA")


def test_meta_properties_uses_given_cluster_id_and_reads_kafka_files(tmp_path: Path) -> None:
    kafka_written = "#\n#Thu Jan 01 00:00:00 UTC 2025\nnode.id=1\nversion=1\ncluster.id=MkU3OEVBNTcwNTJENDM2Qg\n"
    (tmp_path / "meta.properties").write_text(kafka_written)
    cluster_id, directory_id = LogDir(tmp_path).load_or_create_meta(1, None)
    assert cluster_id == "MkU3OEVBNTcwNTJENDM2Qg"
    assert f"directory.id={directory_id}" in (tmp_path / "meta.properties").read_text()
    fresh = LogDir(tmp_path / "other")
    assert fresh.load_or_create_meta(0, "q1Sh-9_ISia_zwGINzRvyQ")[0] == "q1Sh-9_ISia_zwGINzRvyQ"


def test_broker_checkpoints(tmp_path: Path) -> None:
    log_dir = LogDir(tmp_path)
    assert log_dir.read_recovery_points() == {}
    log_dir.write_recovery_points({("a", 0): 5})
    log_dir.write_high_watermarks({("a", 0): 4})
    log_dir.write_log_start_offsets({("a", 0): 1})
    assert (tmp_path / "recovery-point-offset-checkpoint").read_text() == "0\n1\na 0 5\n"
    assert (tmp_path / "replication-offset-checkpoint").read_text() == "0\n1\na 0 4\n"
    assert (tmp_path / "log-start-offset-checkpoint").read_text() == "0\n1\na 0 1\n"
    assert log_dir.read_recovery_points() == {("a", 0): 5}
    assert log_dir.read_high_watermarks() == {("a", 0): 4}
    assert log_dir.read_log_start_offsets() == {("a", 0): 1}


def test_partition_dirs(tmp_path: Path) -> None:
    log_dir = LogDir(tmp_path)
    for name in ["orders-0", "orders-12", "my-topic-with-dashes-3", "weird-topic.abc-delete", "x-1.0123-future"]:
        (tmp_path / name).mkdir()
    for name in ["noPartition", "bad-part-x"]:
        (tmp_path / name).mkdir()
    (tmp_path / "file-0").write_text("not a dir")
    assert log_dir.partition_dirs() == [
        ("my-topic-with-dashes", 3, tmp_path / "my-topic-with-dashes-3"),
        ("orders", 0, tmp_path / "orders-0"),
        ("orders", 12, tmp_path / "orders-12"),
    ]
    assert log_dir.partition_dir("orders", 4) == tmp_path / "orders-4"
    assert parse_partition_dir_name("a-b-7") == ("a-b", 7)
    assert parse_partition_dir_name("-7") is None


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("", "can't be empty"),
        (".", '"." or ".."'),
        ("..", '"." or ".."'),
        ("a" * 250, "longer than 249"),
        ("has space", "ASCII alphanumerics"),
        ("ümlaut", "ASCII alphanumerics"),
        ("a/b", "ASCII alphanumerics"),
    ],
)
def test_validate_topic_name_rejects(name: str, problem: str) -> None:
    message = validate_topic_name(name)
    assert message is not None and problem in message


def test_validate_topic_name_accepts() -> None:
    for name in ["orders", "a.b_c-d", "A" * 249, "__consumer_offsets", "..."]:
        assert validate_topic_name(name) is None
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", uuid_to_str(random_uuid()))
