"""Damaged files and full disks below the broker: what each file's reader accepts and refuses (as Kafka's), and
what the log, a partition, the metadata log, the controller and the log manager do when a write fails with ENOSPC
(see tests.disk_faults)."""

from __future__ import annotations

import logging
import uuid
from pathlib import Path

import pytest
import trio
import trio.testing
from kafka.record.memory_records import MemoryRecordsBuilder

from minikafka.broker.controller.cluster_control import BrokerRegistration
from minikafka.broker.controller.configuration_control import SET, ConfigAlteration
from minikafka.broker.controller.controller_config import QuorumControllerConfig
from minikafka.broker.controller.quorum_controller import (
    COMMIT_RETRY_BACKOFF_S,
    ConfigResourceAlteration,
    NewPartitions,
    QuorumController,
)
from minikafka.broker.controller.replication_control import NewTopic
from minikafka.broker.faults.disk_quota import DiskQuota
from minikafka.broker.log.log_manager import LogManager
from minikafka.broker.metadata.metadata_image import TOPIC_RESOURCE, BrokerEndpointInfo, PartitionInfo
from minikafka.broker.replication.partition import Partition
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.protocol.metadata_records import RegisterBrokerRecord
from minikafka.storage import checkpoint, segment
from minikafka.storage.checkpoint import EpochEntry, read_leader_epoch_checkpoint, read_offset_checkpoint
from minikafka.storage.errors import KafkaStorageError
from minikafka.storage.leader_epoch_cache import LEADER_EPOCH_CHECKPOINT, LeaderEpochCache
from minikafka.storage.log import Log
from minikafka.storage.log_config import LogConfig
from minikafka.storage.log_dir import (
    META_PROPERTIES,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_CHECKPOINT,
    LogDir,
)
from minikafka.storage.metadata_log import MetadataLog
from minikafka.storage.partition_metadata import PARTITION_METADATA, read_partition_metadata
from tests.disk_faults import NO_SPACE, fill_disk

NOW = 1_700_000_000_000
CLUSTER = "q1Sh-9_ISia_zwGINzRvyQ"
TOPIC_ID = uuid.UUID("6b1d3a4e-2f0c-4c59-9a57-0e3c1f2d8a10")


def batch(*values: bytes) -> bytearray:
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 16)
    for value in values:
        builder.append(timestamp=NOW, key=None, value=value, headers=[])
    builder.close()
    return bytearray(builder.buffer())


def one_line(error: BaseException) -> str:
    message = str(error)
    assert "\n" not in message
    return message


# ---- checkpoint files ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"\xff\xfe\x00\x01garbage", "not UTF-8 text (byte 0"),
        (b"hello\nworld\n", "malformed line 1 'hello'"),
        (b"7\n0\n", "unrecognised version 7, expected version 0"),
        (b"0\n5\n0 0\n", "expected 5 entries but found 1"),
        (b"0\n1\n0 0\n3 7\n", "expected 1 entries but found 2"),
        (b"0\nmany\n", "malformed line 2 'many'"),
        (b"0\n1\n 0 0\n", "malformed line 3 ' 0 0'"),  # Kafka's split gives a leading empty field
        (b"0\n1\n0 0 0\n", "malformed line 3"),
        (b"0\n1\n0 1_000\n", "not a number: '1_000'"),  # Python's int() would take it, Java's parseLong not
        (b"0\n1\n2147483648 0\n", "out of range for a 32-bit number"),
        (b"0\n1\n\n", "malformed line 3 ''"),
    ],
)
def test_a_leader_epoch_checkpoint_kafka_refuses_names_the_file_and_the_problem(tmp_path: Path, content: bytes,
                                                                                problem: str) -> None:
    path = tmp_path / LEADER_EPOCH_CHECKPOINT
    path.write_bytes(content)
    with pytest.raises(KafkaStorageError) as refused:
        read_leader_epoch_checkpoint(path)
    assert one_line(refused.value).startswith(f"Error while reading checkpoint file {path}: ")
    assert problem in str(refused.value)
    with pytest.raises(KafkaStorageError, match="Error while reading checkpoint file"):
        LeaderEpochCache(path)


def test_checkpoints_kafka_accepts_are_read(tmp_path: Path) -> None:
    path = tmp_path / "replication-offset-checkpoint"
    path.write_bytes(b"0\r\n2\r\na 0 -1\r\nb.c 3 +9\r\n")  # CRLF lines and signs, as Java's readLine and parseLong
    assert read_offset_checkpoint(path) == {("a", 0): -1, ("b.c", 3): 9}
    path.write_bytes(b"0\n")  # a version line only: no entries
    assert read_offset_checkpoint(path) == {}


def test_a_leader_epoch_checkpoint_with_an_invalid_entry_is_refused(tmp_path: Path) -> None:
    path = tmp_path / LEADER_EPOCH_CHECKPOINT
    path.write_bytes(b"0\n1\n-3 5\n")
    with pytest.raises(KafkaStorageError, match=r"leader-epoch-checkpoint: Received invalid partition leader epoch"):
        LeaderEpochCache(path)


# ---- the leader epoch cache on a full disk -----------------------------------------------------------------------


def test_a_truncation_on_a_full_disk_is_written_later_and_an_assign_is_not(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch,
                                                                          caplog: pytest.LogCaptureFixture) -> None:
    cache = LeaderEpochCache.in_dir(tmp_path)
    for epoch, offset in [(1, 0), (2, 10), (3, 20)]:
        cache.assign(epoch, offset)
    before = (tmp_path / LEADER_EPOCH_CHECKPOINT).read_bytes()
    disk = fill_disk(monkeypatch, checkpoint)
    with caplog.at_level(logging.WARNING, logger="minikafka.storage.leader_epoch_cache"):
        cache.truncate_from_end(15)  # Kafka writes truncations in the background: the caller does not fail
        cache.truncate_from_start(5)
    assert cache.epochs == [EpochEntry(1, 5), EpochEntry(2, 10)]
    assert (tmp_path / LEADER_EPOCH_CHECKPOINT).read_bytes() == before  # stale, which loading a log repairs
    assert len(caplog.records) == 2 and NO_SPACE in caplog.records[0].getMessage()
    with pytest.raises(KafkaStorageError, match="No space left on device"):
        cache.assign(4, 30)  # a new epoch must be on disk before its records are
    disk.full = False
    cache.flush_if_dirty()
    assert read_leader_epoch_checkpoint(tmp_path / LEADER_EPOCH_CHECKPOINT) == cache.epochs == [
        EpochEntry(1, 5), EpochEntry(2, 10), EpochEntry(4, 30)]


def test_a_truncation_that_changes_nothing_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = LeaderEpochCache.in_dir(tmp_path)
    cache.assign(0, 0)
    fill_disk(monkeypatch, checkpoint)
    cache.truncate_from_start(0)  # what opening a log at its start offset does
    cache.truncate_from_end(5)
    cache.assign(0, 3)
    cache.flush_if_dirty()


def test_a_cleanly_closed_log_opens_and_reads_on_a_full_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = Log.open(tmp_path / "t-0", "t", 0, LogConfig(), topic_id=TOPIC_ID.bytes, now_ms=NOW)
    log.append_as_leader(batch(b"a", b"b"), 0, NOW)
    log.append_as_leader(batch(b"c"), 1, NOW)
    end = log.log_end_offset
    log.close()
    # A checkpoint a crash left stale (an epoch past the end of the log), as a background write would.
    checkpoint.write_leader_epoch_checkpoint(tmp_path / "t-0" / LEADER_EPOCH_CHECKPOINT,
                                             [EpochEntry(0, 0), EpochEntry(1, 2), EpochEntry(2, 9)])
    fill_disk(monkeypatch, checkpoint, segment)
    log = Log.open(tmp_path / "t-0", "t", 0, LogConfig(), recovery_point=end, now_ms=NOW)
    assert log.log_end_offset == 3 and log.leader_epoch_cache.epochs == [EpochEntry(0, 0), EpochEntry(1, 2)]
    assert len(log.read(0, 1 << 20)) > 0
    with pytest.raises(KafkaStorageError, match="No space left on device"):
        log.append_as_leader(batch(b"d"), 1, NOW)
    assert log.log_end_offset == 3
    log.abandon()


def test_a_new_leadership_on_a_full_disk_is_taken_and_its_epoch_written_before_any_record(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    the_log = Log.open(tmp_path / "t-0", "t", 0, LogConfig(), now_ms=NOW)
    partition = Partition("t", 0, TOPIC_ID, the_log, 1)
    disk = fill_disk(monkeypatch, checkpoint)
    with caplog.at_level(logging.WARNING, logger="minikafka.partition"):
        assert partition.make_leader(PartitionInfo([1], [1], 1, 3, 0), NOW) is True
    assert partition.is_leader and partition.leader_epoch == 3 and NO_SPACE in caplog.text
    assert the_log.leader_epoch_cache.latest_epoch == 3  # cached, not on disk yet
    with pytest.raises(KafkaStorageError):
        the_log.append_as_leader(batch(b"a"), 3, NOW)
    assert the_log.log_end_offset == 0
    disk.full = False
    the_log.append_as_leader(batch(b"a"), 3, NOW)
    assert read_leader_epoch_checkpoint(tmp_path / "t-0" / LEADER_EPOCH_CHECKPOINT) == [EpochEntry(3, 0)]
    the_log.close()


# ---- partition.metadata ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"\x00\xffgarbage", "not UTF-8 text"),
        (b"version: 0\ntopic_id: nonsense\n", "Invalid uuid 'nonsense'"),
        (b"version: 0\n", "malformed line 2 ''"),
        (b"version 0 x\ntopic_id: AAECAwQFBgcICQoLDA0ODw\n", "malformed line 1"),
        (b"version: -1\ntopic_id: AAECAwQFBgcICQoLDA0ODw\n", "unrecognized version -1"),
        (b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA\n", "the zero uuid"),
    ],
)
def test_a_partition_metadata_file_kafka_refuses_names_the_file_and_the_problem(tmp_path: Path, content: bytes,
                                                                                 problem: str) -> None:
    (tmp_path / PARTITION_METADATA).write_bytes(content)
    with pytest.raises(KafkaStorageError) as refused:
        read_partition_metadata(tmp_path)
    assert one_line(refused.value).startswith(
        f"Error while reading partition metadata file {tmp_path / PARTITION_METADATA}: ")
    assert problem in str(refused.value)


def test_a_later_partition_metadata_version_is_read_as_kafka_reads_it(tmp_path: Path) -> None:
    (tmp_path / PARTITION_METADATA).write_bytes(b"version: 1\ntopic_id: AAECAwQFBgcICQoLDA0ODw\n")
    assert read_partition_metadata(tmp_path) == bytes(range(16))


# ---- meta.properties -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"junk junk\nfoo=bar\n", "node ID not found (a version 0 file names it broker.id)"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00", "node ID not found"),
        (b"", "node ID not found"),
        (b"version=7\nnode.id=1\ncluster.id=x\n", "unknown version number 7"),
        (b"version=one\nnode.id=1\ncluster.id=x\n", "invalid version string 'one'"),
        (b"version=1\nnode.id=first\ncluster.id=x\n", "failed to parse node.id 'first' as an int"),
        (b"version=1\nnode.id=1\n", "cluster.id was not found"),
        (b"version=1\nnode.id=1\ncluster.id=x\ndirectory.id=zz\n", "unable to read directory.id as a Uuid"),
        (b"version=1\nnode.id=1\ncluster.id=x\ndirectory.id=AAAAAAAAAAAAAAAAAAAAAA\n", "invalid reserved directory"),
        (b"version=1\nnode.id=1\ncluster.id=x\nkey=\\u12G4\n", "Malformed \\uxxxx encoding"),
        (b"version=1\nnode.id=2\ncluster.id=x\n", "Stored node id 2"),
    ],
)
def test_meta_properties_kafka_refuses_stops_the_start_and_stays_as_it_is(tmp_path: Path, content: bytes,
                                                                          problem: str) -> None:
    path = tmp_path / META_PROPERTIES
    path.write_bytes(content)
    with pytest.raises(ValueError) as refused:
        LogDir(tmp_path).load_or_create_meta(1, None)
    assert str(path) in one_line(refused.value) and problem in str(refused.value)
    assert path.read_bytes() == content  # never replaced by a new cluster.id and directory.id


def test_a_version_0_meta_properties_is_read_and_given_a_directory_id(tmp_path: Path) -> None:
    (tmp_path / META_PROPERTIES).write_text("#\nbroker.id=1\ncluster.id=MkU3OEVBNTcwNTJENDM2Qg\n")
    cluster_id, directory_id = LogDir(tmp_path).load_or_create_meta(1, None)
    assert cluster_id == "MkU3OEVBNTcwNTJENDM2Qg" and len(directory_id) == 22
    assert LogDir(tmp_path).load_or_create_meta(1, cluster_id) == (cluster_id, directory_id)


def test_two_log_dirs_with_one_directory_id_are_refused(tmp_path: Path) -> None:
    LogDir(tmp_path / "a").load_or_create_meta(1, CLUSTER)
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / META_PROPERTIES).write_bytes((tmp_path / "a" / META_PROPERTIES).read_bytes())
    with pytest.raises(ValueError, match="Duplicate directory ID"):
        LogManager([tmp_path / "a", tmp_path / "b"], 1, CLUSTER, LogConfig(), DiskQuota([tmp_path]))


# ---- the metadata log on a full disk ---------------------------------------------------------------------------


def broker(broker_id: int) -> RegisterBrokerRecord:
    return RegisterBrokerRecord(
        broker_id=broker_id, incarnation_id=uuid.UUID(int=broker_id + 1), broker_epoch=broker_id,
        end_points=[RegisterBrokerRecord.BrokerEndpoint(name="PLAINTEXT", host="127.0.0.1", port=9092 + broker_id,
                                                        security_protocol=0)],
        features=[], rack=None)


@pytest.mark.parametrize("failing_fsyncs", [0, 1], ids=["write-fails", "fsync-fails"])
def test_a_failed_metadata_append_leaves_the_log_as_it_was(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           failing_fsyncs: int) -> None:
    log = MetadataLog.open(tmp_path, now_ms=NOW)
    log.append([broker(1)], now_ms=NOW)
    disk = fill_disk(monkeypatch, segment, failing_fsyncs=failing_fsyncs)
    with pytest.raises(KafkaStorageError, match="No space left on device"):
        log.append([broker(2), broker(3)], now_ms=NOW)
    assert log.log_end_offset == 1 and list(log.replay()) == [broker(1)]
    assert list(log.entries())[-1].offset == 0 and log.read(1, 1 << 20) == b""
    disk.full = False
    assert log.append([broker(4)], now_ms=NOW) == 1  # the offset the failed append would have had
    log.close()
    log = MetadataLog.open(tmp_path, now_ms=NOW)
    assert list(log.replay()) == [broker(1), broker(4)]
    log.close()


def test_a_failed_append_that_cannot_be_undone_stops_further_appends(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    log = MetadataLog.open(tmp_path, now_ms=NOW)
    log.append([broker(1)], now_ms=NOW)
    fill_disk(monkeypatch, segment, failing_fsyncs=-1)  # the batch is written, its fsync and the undo's fail
    with pytest.raises(KafkaStorageError):
        log.append([broker(2)], now_ms=NOW)
    monkeypatch.undo()
    with pytest.raises(KafkaStorageError, match="refuses appends: a failed append .* could not be undone"):
        log.append([broker(3)], now_ms=NOW)
    assert log.log_end_offset == 1 and list(log.replay()) == [broker(1)] and log.read(1, 1 << 20) == b""
    log.close()


# ---- the controller on a full disk ------------------------------------------------------------------------------


def registration() -> BrokerRegistration:
    return BrokerRegistration(broker_id=1, cluster_id=CLUSTER, incarnation_id=uuid.UUID(int=7),
                              endpoints=[BrokerEndpointInfo("PLAINTEXT", "127.0.0.1", 9092, 0)], rack=None)


async def test_the_controller_answers_storage_errors_and_changes_nothing(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    config = QuorumControllerConfig(node_id=3000, cluster_id=CLUSTER, auto_leader_rebalance_enable=False)
    controller = QuorumController.open(config, tmp_path)
    try:
        epoch = await controller.register_broker(registration())
        await controller.heartbeat(1, epoch, controller.log_end_offset - 1)
        (kept,) = await controller.create_topics([NewTopic("kept", 1, 1, {}, {})])
        assert not isinstance(kept, KafkaError)
        end, image_offset = controller.log_end_offset, controller.image.offset
        disk = fill_disk(monkeypatch, segment)

        created = await controller.create_topics([NewTopic("new", 1, 1, {}, {}), NewTopic("kept", 1, 1, {}, {})])
        assert [r.code for r in created if isinstance(r, KafkaError)] == [ErrorCode.KAFKA_STORAGE_ERROR,
                                                                          ErrorCode.TOPIC_ALREADY_EXISTS]
        (grown,) = await controller.create_partitions([NewPartitions("kept", 3, None)])
        (altered,) = await controller.alter_configs(
            [ConfigResourceAlteration(TOPIC_RESOURCE, "kept", [ConfigAlteration("retention.ms", SET, "1000")])],
            incremental=True)
        deleted, missing = await controller.delete_topics([("kept", None), ("missing", None)])
        assert missing.error is not None and missing.error.code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert grown is not None and grown.code is ErrorCode.KAFKA_STORAGE_ERROR
        assert altered is not None and altered.code is ErrorCode.KAFKA_STORAGE_ERROR
        assert deleted.error is not None and deleted.error.code is ErrorCode.KAFKA_STORAGE_ERROR
        with pytest.raises(KafkaError) as heartbeat:
            await controller.heartbeat(1, epoch, end - 1, want_fence=True)
        assert heartbeat.value.code is ErrorCode.KAFKA_STORAGE_ERROR
        assert (controller.log_end_offset, controller.image.offset) == (end, image_offset)
        assert set(controller.image.topics) == {"kept"} and len(controller.image.topics["kept"].partitions) == 1
        assert not controller.image.brokers[1].fenced

        disk.full = False
        (created_now,) = await controller.create_topics([NewTopic("new", 1, 1, {}, {})])
        assert not isinstance(created_now, KafkaError) and controller.log_end_offset > end
        image = controller.image
    finally:
        controller.close()
    reopened = QuorumController.open(config, tmp_path)
    try:
        assert set(reopened.image.topics) == set(image.topics) == {"kept", "new"}
    finally:
        reopened.close()


async def test_a_fencing_the_full_disk_refuses_is_tried_again_after_a_backoff(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mock_clock: trio.testing.MockClock) -> None:
    mock_clock.rate = 10  # the controller's clock runs ahead; its appends run on worker threads in real time
    config = QuorumControllerConfig(node_id=3000, cluster_id=CLUSTER, auto_leader_rebalance_enable=False)
    controller = QuorumController.open(config, tmp_path)
    try:
        epoch = await controller.register_broker(registration(), connection_id=11)
        await controller.heartbeat(1, epoch, controller.log_end_offset - 1, connection_id=11)
        disk = fill_disk(monkeypatch, segment)
        with trio.fail_after(300):
            async with trio.open_nursery() as nursery:
                await nursery.start(controller.run)
                controller.heartbeats.connection_closed(11)
                await trio.sleep(5 * COMMIT_RETRY_BACKOFF_S)  # the span over which attempts are counted
                assert 1 <= disk.refused_writes <= 6  # at most one per backoff: never a busy loop
                assert not controller.image.brokers[1].fenced
                end = controller.log_end_offset
                disk.full = False  # the next attempt fences it
                assert await controller.wait_for_records(end, trio.current_time() + 10 * COMMIT_RETRY_BACKOFF_S)
                nursery.cancel_scope.cancel()
        assert controller.image.brokers[1].fenced
    finally:
        controller.close()


# ---- the log manager ---------------------------------------------------------------------------------------------


def log_manager(data_dir: Path) -> LogManager:
    return LogManager([data_dir], 1, CLUSTER, LogConfig(), DiskQuota([data_dir]))


def test_a_shutdown_on_a_full_disk_logs_what_it_could_not_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    manager = log_manager(tmp_path)
    manager.load_logs({})
    the_log = manager.get_or_create_log("t", 0, TOPIC_ID, {})
    the_log.append_as_leader(batch(b"a"), 0, NOW)
    manager.checkpoint({("t", 0): 1})
    the_log.append_as_leader(batch(b"b"), 0, NOW)
    fill_disk(monkeypatch, checkpoint)
    with caplog.at_level(logging.ERROR, logger="minikafka.log_manager"):
        manager.checkpoint({("t", 0): 2})
        manager.shutdown({("t", 0): 2})
    written = [r.getMessage() for r in caplog.records if r.name == "minikafka.log_manager"]
    assert len(written) == 3  # each file once, not again at shutdown
    assert all(m.startswith("checkpoint failed, the previous one stays: Error while writing ") for m in written)
    assert {m.split("Error while writing ")[1].split(":")[0] for m in written} == {
        str(tmp_path / name) for name in ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint",
                                          "replication-offset-checkpoint")}
    assert read_offset_checkpoint(tmp_path / RECOVERY_POINT_CHECKPOINT) == {("t", 0): 0}
    monkeypatch.undo()
    manager = log_manager(tmp_path)
    manager.load_logs({})
    assert manager.logs[("t", 0)].log_end_offset == 2  # recovered from the older recovery point
    manager.shutdown({("t", 0): 2})


def test_the_disk_quota_refuses_checkpoints_as_a_full_disk(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    manager = log_manager(tmp_path)
    manager.load_logs({})
    manager.get_or_create_log("t", 0, TOPIC_ID, {}).append_as_leader(batch(b"a"), 0, NOW)
    manager.disk_quota.set(None)
    with caplog.at_level(logging.ERROR, logger="minikafka.log_manager"):
        manager.shutdown({("t", 0): 1})
    refused = [r.getMessage() for r in caplog.records if r.name == "minikafka.log_manager"]
    assert len(refused) == 3 and all(f"{NO_SPACE} (disk quota of" in m for m in refused)
    assert not (tmp_path / RECOVERY_POINT_CHECKPOINT).exists()


def test_unreadable_recovery_points_and_log_start_offsets_are_reset_as_kafka_does(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    manager = log_manager(tmp_path)
    manager.load_logs({})
    the_log = manager.get_or_create_log("t", 0, TOPIC_ID, {})
    for value in (b"a", b"b", b"c"):
        the_log.append_as_leader(batch(value), 0, NOW)
    the_log.maybe_increment_log_start_offset(1)
    manager.shutdown({("t", 0): 3})
    (tmp_path / RECOVERY_POINT_CHECKPOINT).write_bytes(b"\x00\x01\x02")
    (tmp_path / "log-start-offset-checkpoint").write_bytes(b"0\n9\n")
    manager = log_manager(tmp_path)
    with caplog.at_level(logging.WARNING, logger="minikafka.log_manager"):
        manager.load_logs({})
    warned = [r.getMessage() for r in caplog.records]
    assert any(str(tmp_path / RECOVERY_POINT_CHECKPOINT) in m and "resetting the recovery checkpoint to 0" in m
               for m in warned)
    assert any("log-start-offset-checkpoint" in m and "resetting to the base offset of the first segment" in m
               for m in warned)
    recovered = manager.logs[("t", 0)]
    assert (recovered.log_start_offset, recovered.log_end_offset) == (0, 3)
    manager.shutdown({("t", 0): 3})
    assert read_offset_checkpoint(tmp_path / RECOVERY_POINT_CHECKPOINT) == {("t", 0): 3}  # rebuilt


def test_an_unreadable_replication_checkpoint_stops_the_load(tmp_path: Path) -> None:
    log_manager(tmp_path).shutdown({})
    (tmp_path / REPLICATION_CHECKPOINT).write_bytes(b"0\n2\nt 0 5\n")
    with pytest.raises(KafkaStorageError, match="replication-offset-checkpoint: expected 2 entries but found 1"):
        log_manager(tmp_path).load_logs({})

