"""A broker process started on a data dir with one damaged file: it starts and the data is still readable where
Kafka recovers from the damage (recovery-point-offset-checkpoint, log-start-offset-checkpoint, a torn metadata log),
and elsewhere it stops with one line naming the file and what is wrong, no traceback, and a non-zero exit code.

Every test copies one data dir, written once per module by a broker that stored three records in `t` and stopped
cleanly, and damages one file of the copy.
"""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from kafka.record.memory_records import MemoryRecordsBuilder

import minikafka
from minikafka.protocol.internal_topics import METADATA_TOPIC
from minikafka.protocol.record_batch import iter_batches
from minikafka.storage.checkpoint import read_offset_checkpoint
from minikafka.storage.log import Log
from minikafka.storage.metadata_log import METADATA_LOG_CONFIG
from minikafka.subprocess_runner import BrokerStartError
from tests.helpers import produce
from tests.raw_client import RawConnection, record_batch

VALUES = [b"v0", b"v1", b"v2"]
METADATA_DIR = f"{METADATA_TOPIC}-0"
SEGMENT = "00000000000000000000.log"
EXIT_CODE = re.compile(r"exited with code (-?\d+) before it was ready")


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data dir holding topic `t` with VALUES, left by a clean stop."""
    data_dir = tmp_path_factory.mktemp("written") / "data"
    with minikafka.Broker(data_dir=data_dir) as broker, RawConnection(broker.bootstrap_servers) as conn:
        broker.state.create_topic("t")
        for value in VALUES:
            assert produce(conn, "t", 0, record_batch([value])).error_code == 0
    return data_dir


@pytest.fixture
def data_dir(written: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "data"
    shutil.copytree(written, copy)
    return copy


def damage(path: Path, content: bytes) -> None:
    path.write_bytes(content)


def start_refused(data_dir: Path) -> tuple[str, int]:
    """The one line the refused start printed last, and its exit code; its log holds no traceback."""
    log_path = data_dir.with_name("broker.log")
    broker = minikafka.Broker(data_dir=data_dir, log_path=log_path)
    try:
        with pytest.raises(BrokerStartError) as refused:
            broker.start()
    finally:
        broker.close()
    code = EXIT_CODE.search(str(refused.value))
    assert code is not None, refused.value
    text = log_path.read_text()
    assert "Traceback" not in text, text
    last = text.strip().splitlines()[-1]
    assert last.startswith("minikafka: cannot start: "), text
    return last, int(code[1])


def assert_readable(broker: minikafka.Broker) -> None:
    assert [r.value for r in broker.state.records("t", 0, timeout_s=30)] == VALUES
    with RawConnection(broker.bootstrap_servers) as conn:  # and writable, after the records it had
        assert produce(conn, "t", 0, record_batch([b"v3"])).base_offset == len(VALUES)


def logged(broker: minikafka.Broker, level: str) -> list[str]:
    return [line for line in broker.log_path.read_text().splitlines() if f" {level} " in line]


# ---- damage Kafka recovers from ------------------------------------------------------------------------------------

BROKEN_CHECKPOINTS = {
    "binary": b"\xff\xfe\x00\x01\x02garbage",
    "junk-text": b"hello\nworld\n",
    "truncated": b"0\n3\nt 0 3\n",
    "wrong-version": b"1\n1\nt 0 3\n",
}


@pytest.mark.parametrize("content", BROKEN_CHECKPOINTS.values(), ids=BROKEN_CHECKPOINTS.keys())
def test_a_damaged_recovery_point_checkpoint_is_reset_and_every_log_recovered(data_dir: Path, content: bytes) -> None:
    path = data_dir / "recovery-point-offset-checkpoint"
    damage(path, content)
    with minikafka.Broker(data_dir=data_dir, log_path=data_dir.with_name("broker.log")) as broker:
        assert_readable(broker)
        (warning,) = [line for line in logged(broker, "WARNING") if str(path) in line]
        assert warning.endswith("; resetting the recovery checkpoint to 0")
        assert "recovering segment 00000000000000000000.log (recovery point 0)" in broker.log_path.read_text()
    assert read_offset_checkpoint(path)[("t", 0)] == len(VALUES) + 1  # written anew at the stop


@pytest.mark.parametrize("content", [BROKEN_CHECKPOINTS["binary"], BROKEN_CHECKPOINTS["truncated"]],
                         ids=["binary", "truncated"])
def test_a_damaged_log_start_offset_checkpoint_is_reset(data_dir: Path, content: bytes) -> None:
    path = data_dir / "log-start-offset-checkpoint"
    damage(path, content)
    with minikafka.Broker(data_dir=data_dir, log_path=data_dir.with_name("broker.log")) as broker:
        assert_readable(broker)
        (warning,) = [line for line in logged(broker, "WARNING") if str(path) in line]
        assert warning.endswith("; resetting to the base offset of the first segment")
    assert read_offset_checkpoint(path) == {("t", 0): 0}


def test_a_torn_metadata_log_tail_is_cut_off_and_the_cluster_metadata_kept(data_dir: Path) -> None:
    with minikafka.Broker(data_dir=data_dir) as broker:
        broker.state.create_topic("late")  # its records are the metadata log's last batch
    segment = data_dir / METADATA_DIR / SEGMENT
    starts = [position for position, _ in iter_batches(segment.read_bytes())]
    last_start = starts[-1]
    with open(segment, "r+b") as f:  # the last batch loses its second half, as in a crash while it was written
        f.truncate((last_start + segment.stat().st_size) // 2)
    with minikafka.Broker(data_dir=data_dir, log_path=data_dir.with_name("broker.log")) as broker:
        assert_readable(broker)
        warnings = logged(broker, "WARNING")
        assert any("truncated" in line and SEGMENT in line and METADATA_DIR in line for line in warnings)
        # The topic whose creation was torn off does not exist; its log is put aside as a stray, not deleted.
        assert "late" not in broker.state.topics()
        assert [p.name.endswith("-stray") for p in data_dir.iterdir() if p.name.startswith("late-0")] == [True]


# ---- damage Kafka refuses to start with ----------------------------------------------------------------------------

BROKEN_EPOCH_CHECKPOINTS = {
    "binary": (b"\x00\xff\xfe", "not UTF-8 text"),
    "junk-text": (b"some words\n", "malformed line 1 'some words'"),
    "truncated": (b"0\n2\n0 0\n", "expected 2 entries but found 1"),
    "wrong-version": (b"3\n1\n0 0\n", "unrecognised version 3"),
    "wrong-fields": (b"0\n1\n0 0 7\n", "malformed line 3 '0 0 7'"),
    "negative-epoch": (b"0\n1\n-1 0\n", "Received invalid partition leader epoch entry"),
}


@pytest.mark.parametrize(("content", "problem"), BROKEN_EPOCH_CHECKPOINTS.values(),
                         ids=BROKEN_EPOCH_CHECKPOINTS.keys())
def test_a_damaged_leader_epoch_checkpoint_stops_the_start_naming_it(data_dir: Path, content: bytes,
                                                                     problem: str) -> None:
    path = data_dir / "t-0" / "leader-epoch-checkpoint"
    damage(path, content)
    line, code = start_refused(data_dir)
    assert line.startswith(f"minikafka: cannot start: Error while reading checkpoint file {path}: ")
    assert problem in line and code == 1


@pytest.mark.parametrize(("content", "problem"), [(b"\x80\x81", "not UTF-8 text"),
                                                  (b"0\n2\nt 0 3\n", "expected 2 entries but found 1")],
                         ids=["binary", "truncated"])
def test_a_damaged_replication_checkpoint_stops_the_start_naming_it(data_dir: Path, content: bytes,
                                                                    problem: str) -> None:
    path = data_dir / "replication-offset-checkpoint"
    damage(path, content)
    line, code = start_refused(data_dir)
    assert line.startswith(f"minikafka: cannot start: Error while reading checkpoint file {path}: ")
    assert problem in line and code == 1


@pytest.mark.parametrize(("content", "problem"), [(b"\xc3\x28 binary", "not UTF-8 text"),
                                                  (b"version: 0\ntopic_id: not-a-uuid\n", "Invalid uuid")],
                         ids=["binary", "bad-topic-id"])
def test_a_damaged_partition_metadata_stops_the_start_naming_it(data_dir: Path, content: bytes,
                                                                problem: str) -> None:
    path = data_dir / "t-0" / "partition.metadata"
    damage(path, content)
    line, code = start_refused(data_dir)
    assert line.startswith(f"minikafka: cannot start: Error while reading partition metadata file {path}: ")
    assert problem in line and code == 1


BROKEN_META_PROPERTIES = {
    "readable-junk": (b"junk junk\nfoo=bar\n", "node ID not found"),
    "binary": (b"\x00\x01\x02\xff\xfe", "node ID not found"),
    "unknown-version": (b"version=9\nnode.id=1\ncluster.id=abc\n", "unknown version number 9"),
    "no-cluster-id": (b"version=1\nnode.id=1\n", "cluster.id was not found"),
    "another-node": (b"version=1\nnode.id=7\ncluster.id=abc\n", "Stored node id 7"),
}


@pytest.mark.parametrize(("content", "problem"), BROKEN_META_PROPERTIES.values(), ids=BROKEN_META_PROPERTIES.keys())
def test_a_damaged_meta_properties_stops_the_start_and_is_kept(data_dir: Path, content: bytes, problem: str) -> None:
    path = data_dir / "meta.properties"
    damage(path, content)
    line, code = start_refused(data_dir)
    assert str(path) in line and problem in line and code == 2
    assert path.read_bytes() == content  # never replaced by a new cluster.id and directory.id


def test_a_damaged_metadata_log_epoch_checkpoint_stops_the_start_naming_it(data_dir: Path) -> None:
    path = data_dir / METADATA_DIR / "leader-epoch-checkpoint"
    damage(path, b"\xfe\xff")
    line, code = start_refused(data_dir)
    assert line == f"minikafka: cannot start: Error while reading checkpoint file {path}: not UTF-8 text " \
                   "(byte 0: b'\\xfe')"
    assert code == 1


def test_a_metadata_record_that_does_not_decode_stops_the_start_naming_the_log(data_dir: Path) -> None:
    """A batch whose CRC is right but whose record is no metadata record: Kafka's controller stops there too."""
    raw = Log.open(data_dir / METADATA_DIR, METADATA_TOPIC, 0, METADATA_LOG_CONFIG, now_ms=0)
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1024)
    builder.append(timestamp=0, key=None, value=b"\x01\x06\x00", headers=[])
    builder.close()
    epoch = raw.leader_epoch_cache.latest_epoch
    assert epoch is not None
    offset = raw.append_as_leader(bytearray(builder.buffer()), epoch, 0).first_offset
    raw.close()
    line, code = start_refused(data_dir)
    assert line.startswith(f"minikafka: cannot start: Error while replaying the metadata log "
                           f"{data_dir / METADATA_DIR}: record at offset {offset} ")
    assert code == 1
