"""A broker on a full disk: clients get the error codes Kafka sends and keep their connections, reads go on, a stop
exits cleanly, and nothing acknowledged is lost once the disk frees and the broker starts again.

The broker process's disk is made full by its disk-full fault (a disk quota, which refuses appends and checkpoints
and is forgotten on restart). Where the fault does not reach, the controller's metadata log and a start on a full
disk, the broker runs in this process with a real ENOSPC from tests.disk_faults.
"""
from __future__ import annotations

from pathlib import Path

import pytest

import minikafka
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.codec import SCHEMAS
from minikafka.protocol.errors import ErrorCode
from minikafka.storage import checkpoint, segment
from minikafka.subprocess_runner import BrokerStartError
from tests.disk_faults import NO_SPACE, fill_disk
from tests.helpers import create_topic, fetch, produce
from tests.raw_client import RawConnection, record_batch

CHECKPOINTS = ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint", "replication-offset-checkpoint")


def topics_of(conn: RawConnection) -> dict[str, int]:
    """Each topic the broker's Metadata lists, with its partition count (the connection must still be served)."""
    R = SCHEMAS[ApiKey.METADATA].request[12]
    response = conn.request(R(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False))
    return {t.name: len(t.partitions) for t in response.topics}


def create_topics(conn: RawConnection, name: str) -> tuple[int, str | None]:
    R = SCHEMAS[ApiKey.CREATE_TOPICS].request[7]
    response = conn.request(R(topics=[R.CreatableTopic(name=name, num_partitions=1, replication_factor=1,
                                                       assignments=[], configs=[])], timeout_ms=10000))
    return response.topics[0].error_code, response.topics[0].error_message


def delete_topics(conn: RawConnection, name: str) -> int:
    R = SCHEMAS[ApiKey.DELETE_TOPICS].request[6]
    response = conn.request(R(topics=[R.DeleteTopicState(name=name, topic_id=None)], timeout_ms=10000))
    return response.responses[0].error_code


def create_partitions(conn: RawConnection, name: str, count: int) -> int:
    R = SCHEMAS[ApiKey.CREATE_PARTITIONS].request[3]
    response = conn.request(R(topics=[R.CreatePartitionsTopic(name=name, count=count, assignments=None)],
                              timeout_ms=10000, validate_only=False))
    return response.results[0].error_code


def values_of(broker: minikafka.Broker, topic: str) -> list[bytes]:
    return [r.value for r in broker.state.records(topic, 0, timeout_s=30)]


def test_a_full_disk_refuses_produce_serves_reads_and_a_stop_exits_cleanly(tmp_path: Path) -> None:
    acked = [b"a0", b"a1", b"a2"]
    with minikafka.Broker(data_dir=tmp_path / "data", log_path=tmp_path / "broker.log") as broker:
        broker.state.create_topic("t")
        with RawConnection(broker.bootstrap_servers) as conn:
            assert [produce(conn, "t", 0, record_batch([v])).error_code for v in acked] == [0, 0, 0]
            broker.faults.fill_disk()
            refused = produce(conn, "t", 0, record_batch([b"refused"]))
            assert refused.error_code == ErrorCode.KAFKA_STORAGE_ERROR and NO_SPACE in refused.error_message
            read = fetch(conn, "t", 0, 0)  # the same connection, still served
            assert read.error_code == 0 and read.high_watermark == len(acked)
            assert topics_of(conn) == {"t": 1}
        assert values_of(broker, "t") == acked

        assert broker.stop() == 0
        log = broker.log_path.read_text()
        assert "Traceback" not in log
        for name in CHECKPOINTS:  # each refused checkpoint named once, as an error
            assert log.count(f"ERROR minikafka.log_manager: checkpoint failed, the previous one stays: Error "
                             f"while writing {broker.data_dir / name}: {NO_SPACE}") == 1

        broker.start()  # the disk is free again (a restart forgets the fault)
        assert values_of(broker, "t") == acked
        with RawConnection(broker.bootstrap_servers) as conn:
            assert produce(conn, "t", 0, record_batch([b"after"])).base_offset == len(acked)


def test_metadata_changes_on_a_full_disk_are_answered_storage_error_and_change_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with minikafka.Broker(data_dir=tmp_path / "data", log_path=tmp_path / "broker.log", in_process=True) as broker:
        with RawConnection(broker.bootstrap_servers) as conn:
            create_topic(conn, "kept")
            assert produce(conn, "kept", 0, record_batch([b"k"])).error_code == 0
            disk = fill_disk(monkeypatch, segment)  # the metadata log's segment and every partition's

            code, message = create_topics(conn, "new")
            assert code == ErrorCode.KAFKA_STORAGE_ERROR and message is not None and NO_SPACE in message
            assert delete_topics(conn, "kept") == ErrorCode.KAFKA_STORAGE_ERROR
            assert create_partitions(conn, "kept", 2) == ErrorCode.KAFKA_STORAGE_ERROR
            assert produce(conn, "kept", 0, record_batch([b"refused"])).error_code == ErrorCode.KAFKA_STORAGE_ERROR
            assert topics_of(conn) == {"kept": 1}  # nothing of the refused changes, and the connection served
            assert fetch(conn, "kept", 0, 0).high_watermark == 1

            disk.full = False
            assert create_topics(conn, "new") == (ErrorCode.NONE, None)
            assert topics_of(conn) == {"kept": 1, "new": 1}
        broker.restart()  # the metadata log replays to what clients were told
        assert broker.state.topics() == ["kept", "new"]
        assert values_of(broker, "kept") == [b"k"]
    assert "Traceback" not in (tmp_path / "broker.log").read_text()


def test_a_start_on_a_full_disk_stops_naming_the_metadata_log_and_succeeds_once_freed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    broker = minikafka.Broker(data_dir=tmp_path / "data", log_path=tmp_path / "broker.log", in_process=True)
    try:
        broker.start()
        with RawConnection(broker.bootstrap_servers) as conn:
            create_topic(conn, "t")
            assert produce(conn, "t", 0, record_batch([b"kept"])).error_code == 0
        broker.stop()
        disk = fill_disk(monkeypatch, segment, checkpoint)
        with pytest.raises(BrokerStartError) as refused:
            broker.start()
        assert f"{broker.data_dir / '__cluster_metadata-0'}" in str(refused.value)
        assert NO_SPACE in str(refused.value)
        disk.full = False
        broker.start()
        assert values_of(broker, "t") == [b"kept"]
    finally:
        broker.close()
