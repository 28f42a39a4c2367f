"""Hundreds of parked fetches on a real broker: each asks for everything (max_wait_ms, min_bytes and max_bytes at
2^31-1), none reads records while it waits, and a producer writing one record at a time is answered as usual.
Parked fetches complete with the records once min_bytes are there, or at max_wait_ms with what there is, and
fetch.max.bytes caps what a fetch asks for, as in Kafka.
"""
from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.consumer.fetch import FetchRequest
from kafka.record.memory_records import MemoryRecords

import minikafka
from minikafka.protocol.codec import SCHEMAS
from tests.helpers import create_topic, produce, wait_until
from tests.raw_client import RawConnection, record_batch

BIG = (1 << 31) - 1
TOPIC = "parked"
PARKED = 500
RECORDS = 2000
RSS_LIMIT_MB = 300
ANSWER_TIMEOUT_S = 60.0  # a budget for an answer that should come at once


def _rss_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status")
    for line in status.read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS in {status}")


def _fetch(offset: int, *, max_wait_ms: int = BIG, min_bytes: int = BIG, max_bytes: int = BIG) -> ApiMessage:
    R = FetchRequest[12]
    partition = R.FetchTopic.FetchPartition(partition=0, current_leader_epoch=-1, fetch_offset=offset,
                                            last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=max_bytes)
    return R(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes, isolation_level=0,
             session_id=0, session_epoch=-1, topics=[R.FetchTopic(topic=TOPIC, partitions=[partition])],
             forgotten_topics_data=[], rack_id="")


def _answer(conn: RawConnection) -> bytes:
    """The records of the answer to a Fetch sent on `conn` (one partition, version 12)."""
    frame = conn.read_frame()
    assert frame is not None, "the broker closed the connection"
    schema = SCHEMAS[FetchRequest.API_KEY]
    response = schema.response.decode(frame[4 + schema.response_header_version(12):], version=12)
    part = response.responses[0].partitions[0]
    assert part.error_code == 0, part
    return bytes(part.records or b"")


def _offsets_and_values(records: bytes) -> list[tuple[int, bytes]]:
    batches = MemoryRecords(records)
    out = []
    while (batch := batches.next_batch()) is not None:
        out.extend((record.offset, record.value) for record in batch)
    return out


def _has_answer(conn: RawConnection) -> bool:
    conn.sock.setblocking(False)
    try:
        return bool(conn.sock.recv(1, socket.MSG_PEEK))
    except BlockingIOError:
        return False
    finally:
        conn.sock.setblocking(True)


@contextlib.contextmanager
def _connections(broker: minikafka.Broker, count: int) -> Iterator[list[RawConnection]]:
    conns: list[RawConnection] = []
    try:
        for _ in range(count):
            conns.append(RawConnection(broker.bootstrap_servers, timeout=ANSWER_TIMEOUT_S))
        yield conns
    finally:
        for conn in conns:
            conn.close()


@contextlib.contextmanager
def _broker_with_topic(where: Path, **config: object) -> Iterator[minikafka.Broker]:
    with minikafka.Broker(data_dir=where / "data", log_path=where / "broker.log", config=config) as started:
        with RawConnection(started.bootstrap_servers) as admin:
            create_topic(admin, TOPIC)
        yield started


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[minikafka.Broker]:
    with _broker_with_topic(tmp_path) as started:
        yield started


def test_parked_fetches_asking_for_everything_cost_little_and_leave_the_producer_alone(
        broker: minikafka.Broker) -> None:
    with _connections(broker, PARKED) as parked, RawConnection(broker.bootstrap_servers) as producer:
        for conn in parked:
            conn.send(_fetch(0))
        wait_until(lambda: broker.state.delayed_operations() == PARKED, message=f"{PARKED} fetches to park")

        offsets = [produce(producer, TOPIC, 0, record_batch([b"r%d" % i])).base_offset for i in range(RECORDS)]

        assert offsets == list(range(RECORDS))
        assert broker.state.delayed_operations() == PARKED  # none has its min_bytes (fetch.max.bytes, 55 MiB)
        assert not any(_has_answer(conn) for conn in parked)
        assert broker.pid is not None and _rss_mb(broker.pid) < RSS_LIMIT_MB
    wait_until(lambda: broker.state.delayed_operations() == 0, message="fetches of closed connections to be dropped")


def test_parked_fetches_complete_with_the_records_once_min_bytes_are_there(broker: minikafka.Broker) -> None:
    batch_size = len(record_batch([b"r0"]))
    with _connections(broker, 100) as parked, RawConnection(broker.bootstrap_servers) as producer:
        produce(producer, TOPIC, 0, record_batch([b"before"]))
        for conn in parked:
            conn.send(_fetch(1, min_bytes=10 * batch_size))
        wait_until(lambda: broker.state.delayed_operations() == len(parked), message="the fetches to park")

        for i in range(9):
            produce(producer, TOPIC, 0, record_batch([b"r%d" % i]))
        assert broker.state.delayed_operations() == len(parked)  # appends check them before the producer is answered
        produce(producer, TOPIC, 0, record_batch([b"r9"]))

        expected = [(offset, b"r%d" % i) for i, offset in enumerate(range(1, 11))]
        for conn in parked:
            assert _offsets_and_values(_answer(conn)) == expected
    assert broker.state.delayed_operations() == 0


def test_parked_fetches_answer_at_max_wait_with_what_there_is(broker: minikafka.Broker) -> None:
    with _connections(broker, 50) as parked, RawConnection(broker.bootstrap_servers) as producer:
        for i in range(3):
            produce(producer, TOPIC, 0, record_batch([b"r%d" % i]))
        for conn in parked:
            conn.send(_fetch(0, max_wait_ms=500))
        for conn in parked:
            assert [value for _, value in _offsets_and_values(_answer(conn))] == [b"r0", b"r1", b"r2"]


def test_fetch_max_bytes_caps_max_bytes_and_min_bytes(tmp_path: Path) -> None:
    value = b"x" * 1000
    with _broker_with_topic(tmp_path, **{"fetch.max.bytes": 64 * 1024}) as broker, \
            RawConnection(broker.bootstrap_servers, timeout=ANSWER_TIMEOUT_S) as conn:
        for _ in range(200):  # about 200 kB, over fetch.max.bytes
            produce(conn, TOPIC, 0, record_batch([value]))
        conn.send(_fetch(0))  # answered at once: min_bytes asks for no more than fetch.max.bytes, which are there
        records = _answer(conn)
    fetched = _offsets_and_values(records)
    assert len(records) <= 64 * 1024
    assert [offset for offset, _ in fetched] == list(range(len(fetched))) and len(fetched) > 1
    assert all(v == value for _, v in fetched)
