"""Incremental fetch sessions (KIP-227) on real broker processes, asserted on the wire: a full fetch opens a
session, fetches within it carry and are answered only what changed, the session errors come where Kafka sends
them, an evicted session and a broker restart fall back to a full fetch with nothing lost, and consumers that keep
sessions (kafka-python 3, librdkafka) read everything."""
from __future__ import annotations

import struct
import time
import uuid
from collections.abc import Callable, Iterable, Iterator

import pytest
from kafka import KafkaConsumer, TopicPartition
from kafka.protocol.admin.topics import CreateTopicsRequest
from kafka.protocol.consumer.fetch import FetchRequest
from kafka.protocol.metadata.metadata import MetadataRequest
from kafka.record.memory_records import MemoryRecords

import minikafka
from minikafka.protocol.codec import SCHEMAS
from minikafka.protocol.errors import ErrorCode
from tests.helpers import create_topic, produce
from tests.raw_client import RawConnection, record_batch

TOPIC = "sessions"
WAIT_MS = 50  # the long poll of a fetch that finds nothing new
WAIT_S = 20.0
ROUNDS = 200  # bound of the loops that wait for something to happen on the brokers

# A partition to fetch: index, fetch offset.
Wanted = list[tuple[int, int]]


def fetch(conn: RawConnection, session_id: int, epoch: int, wanted: Wanted, *, topic: str = TOPIC,
          topic_id: uuid.UUID | None = None, forgotten: list[int] | None = None, version: int = 12):
    R = FetchRequest[version]
    by_id = version >= 13
    topics = [R.FetchTopic(topic=None if by_id else topic, topic_id=topic_id if by_id else None, partitions=[
        R.FetchTopic.FetchPartition(partition=index, current_leader_epoch=-1, fetch_offset=offset,
                                    last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1 << 20)
        for index, offset in wanted])] if wanted else []
    forgotten_topics = [R.ForgottenTopic(topic=None if by_id else topic, topic_id=topic_id if by_id else None,
                                         partitions=forgotten)] if forgotten else []
    return conn.request(R(replica_id=-1, max_wait_ms=WAIT_MS, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                          session_id=session_id, session_epoch=epoch, topics=topics,
                          forgotten_topics_data=forgotten_topics, rack_id=""))


def answered(response) -> dict[int, object]:
    return {p.partition_index: p for t in response.responses for p in t.partitions}


def values(partition) -> list[bytes]:
    records = MemoryRecords(bytes(partition.records or b""))
    out = []
    while (batch := records.next_batch()) is not None:
        out.extend(record.value for record in batch)
    return out


def topic_id_of(conn: RawConnection, topic: str) -> uuid.UUID:
    R = MetadataRequest[12]
    response = conn.request(R(topics=[R.MetadataRequestTopic(topic_id=None, name=topic)],
                              allow_auto_topic_creation=False, include_topic_authorized_operations=False))
    return response.topics[0].topic_id


@pytest.fixture
def conn(broker) -> Iterator[RawConnection]:
    with RawConnection(broker.bootstrap_servers, timeout=WAIT_S) as c:
        create_topic(c, TOPIC, partitions=3)
        for index in range(3):
            assert produce(c, TOPIC, index, record_batch([b"%d-0" % index])).error_code == 0
        yield c


def test_a_full_fetch_then_incremental_ones_that_carry_only_changes(conn):
    full = fetch(conn, 0, 0, [(0, 0), (1, 0), (2, 0)])
    assert full.error_code == 0 and full.session_id != 0
    session = full.session_id
    assert {i: values(p) for i, p in answered(full).items()} == {0: [b"0-0"], 1: [b"1-0"], 2: [b"2-0"]}
    # The positions moved past the records: the session learns so; nothing else changed, so nothing is answered.
    moved = fetch(conn, session, 1, [(0, 1), (1, 1), (2, 1)])
    assert (moved.error_code, moved.session_id, answered(moved)) == (0, session, {})
    idle = fetch(conn, session, 2, [])
    assert (idle.error_code, idle.session_id, answered(idle)) == (0, session, {})
    # A record on partition 1: only partition 1 is answered, with the record and its new high watermark.
    assert produce(conn, TOPIC, 1, record_batch([b"1-1"])).error_code == 0
    changed = fetch(conn, session, 3, [])
    assert set(answered(changed)) == {1}
    p1 = answered(changed)[1]
    assert values(p1) == [b"1-1"] and p1.high_watermark == 2
    # The client moves partition 1 on and forgets partition 2; new records on 2 are no longer answered.
    assert produce(conn, TOPIC, 2, record_batch([b"2-1"])).error_code == 0
    after = fetch(conn, session, 4, [(1, 2)], forgotten=[2])
    assert (after.error_code, answered(after)) == (0, {})
    # Forgetting the partitions left closes the session: an answer without a session id.
    closing = fetch(conn, session, 5, [], forgotten=[0, 1])
    assert (closing.error_code, closing.session_id) == (0, 0)
    assert fetch(conn, session, 6, []).error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def test_a_parked_incremental_fetch_wakes_for_a_partition_it_did_not_send(broker, conn):
    """Partitions with nothing new are watched, not read: an append to one still ends the long poll."""
    full = fetch(conn, 0, 0, [(0, 1), (1, 1), (2, 1)])
    session = full.session_id
    assert session != 0 and fetch(conn, session, 1, []).responses == []
    R = FetchRequest[12]
    correlation = conn.send(R(replica_id=-1, max_wait_ms=60_000, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                              session_id=session, session_epoch=2, topics=[], forgotten_topics_data=[], rack_id=""))
    with RawConnection(broker.bootstrap_servers, timeout=WAIT_S) as producer:
        assert produce(producer, TOPIC, 2, record_batch([b"2-1"])).error_code == 0
    frame = conn.read_frame()  # within the connection's timeout, long before the fetch's max wait
    assert frame is not None and struct.unpack_from(">i", frame)[0] == correlation
    schema = SCHEMAS[R.API_KEY]
    response = schema.response.decode(frame[4 + schema.response_header_version(12):], version=12)
    assert set(answered(response)) == {2} and values(answered(response)[2]) == [b"2-1"]


def test_session_errors_where_kafka_answers_them(conn):
    topic_id = topic_id_of(conn, TOPIC)
    full = fetch(conn, 0, 0, [(0, 1)], topic_id=topic_id, version=13)
    assert full.error_code == 0 and full.session_id != 0
    session = full.session_id
    wrong_epoch = fetch(conn, session, 7, [], version=13)
    assert (wrong_epoch.error_code, wrong_epoch.session_id, wrong_epoch.responses) == (
        ErrorCode.INVALID_FETCH_SESSION_EPOCH, 0, [])
    by_name = fetch(conn, session, 1, [], version=12)  # a session opened by topic id, used by name
    assert by_name.error_code == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
    assert fetch(conn, session, 1, [], version=13).error_code == 0  # the errors left the session as it was
    # Epoch -1 closes the session: a sessionless full fetch, answered in full.
    final = fetch(conn, session, -1, [(0, 0)], topic_id=topic_id, version=13)
    assert (final.error_code, final.session_id, values(answered(final)[0])) == (0, 0, [b"0-0"])
    assert fetch(conn, session, 2, [], version=13).error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def test_a_broker_restart_invalidates_sessions_cleanly(broker, conn):
    full = fetch(conn, 0, 0, [(0, 1), (1, 1), (2, 1)])
    session = full.session_id
    assert session != 0
    assert produce(conn, TOPIC, 0, record_batch([b"0-1"])).error_code == 0
    conn.close()
    broker.restart()
    with RawConnection(broker.bootstrap_servers, timeout=WAIT_S) as again:
        lost = fetch(again, session, 1, [])
        assert (lost.error_code, lost.session_id, lost.responses) == (ErrorCode.FETCH_SESSION_ID_NOT_FOUND, 0, [])
        # The client's next fetch is full, from where it was: everything written before the restart is there.
        full = fetch(again, 0, 0, [(0, 1), (1, 1), (2, 1)])
        assert full.error_code == 0 and full.session_id not in (0, session)
        got = answered(full)
        assert set(got) == {0, 1, 2} and values(got[0]) == [b"0-1"]
        assert [got[i].high_watermark for i in range(3)] == [2, 1, 1]


def create_topic_on(conn: RawConnection, name: str, replicas: list[int]) -> None:
    R = CreateTopicsRequest[7]
    response = conn.request(R(topics=[R.CreatableTopic(
        name=name, num_partitions=-1, replication_factor=-1, configs=[],
        assignments=[R.CreatableTopic.CreatableReplicaAssignment(partition_index=0, broker_ids=replicas)])],
        timeout_ms=10_000))
    assert response.topics[0].error_code == 0, response


def test_a_session_evicted_from_a_full_cache_falls_back_to_a_full_fetch(tmp_path):
    """One slot: a second consumer finds no room (a young session is safe from consumers); a follower's session,
    privileged, evicts the consumer's; the consumer's next fetch is answered FETCH_SESSION_ID_NOT_FOUND, and its
    full fetch after it, sessionless, has everything."""
    config = {"max.incremental.fetch.session.cache.slots": 1}
    with minikafka.Cluster(brokers=2, data_dir=tmp_path / "cluster", config=config) as cluster:
        leader, other = cluster.brokers
        with RawConnection(leader.bootstrap_servers, timeout=WAIT_S) as a, \
                RawConnection(leader.bootstrap_servers, timeout=WAIT_S) as b:
            create_topic_on(a, TOPIC, [leader.node_id])
            cluster.wait_for_leader(TOPIC, 0, timeout=WAIT_S)
            first = fetch(a, 0, 0, [(0, 0)])
            assert first.error_code == 0 and answered(first)[0].error_code == 0
            session = first.session_id
            assert session != 0
            assert produce(a, TOPIC, 0, record_batch([b"x"])).error_code == 0
            second = fetch(b, 0, 0, [(0, 0)])
            assert second.error_code == 0 and second.session_id == 0 and values(answered(second)[0]) == [b"x"]

            create_topic_on(a, "replicated", [leader.node_id, other.node_id])
            epoch = 1
            deadline = time.monotonic() + WAIT_S
            for _ in range(ROUNDS):  # each a long poll: the consumer past the record, nothing new
                incremental = fetch(a, session, epoch, [(0, 1)] if epoch == 1 else [])
                if incremental.error_code != 0 or time.monotonic() > deadline:
                    break
                epoch += 1
            assert incremental.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
            fallback = fetch(a, 0, 0, [(0, 0)])
            assert fallback.error_code == 0 and fallback.session_id == 0  # the follower keeps the slot
            assert values(answered(fallback)[0]) == [b"x"]


def read_three_rounds(conn, poll: Callable[[], Iterable[tuple[int, bytes]]]) -> None:
    """Produce a record to each of the three partitions, three rounds, and read each round with `poll` (bounded by
    ROUNDS polls): every record comes back, through the consumer's session."""
    expected = {(i, b"%d-0" % i) for i in range(3)}
    got: set[tuple[int, bytes]] = set()
    for round_ in range(1, 4):
        for i in range(3):
            assert produce(conn, TOPIC, i, record_batch([b"%d-%d" % (i, round_)])).error_code == 0
            expected.add((i, b"%d-%d" % (i, round_)))
        for _ in range(ROUNDS):
            if got >= expected:
                break
            got.update(poll())
        assert got == expected


def test_kafka_python_consumer_reads_everything_through_its_session(broker, conn):
    """kafka-python 3 keeps a FetchSessionHandler per broker: its fetches after the first are incremental."""
    tps = [TopicPartition(TOPIC, i) for i in range(3)]
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="earliest", fetch_max_wait_ms=100)
    try:
        consumer.assign(tps)
        read_three_rounds(conn, lambda: [(tp.partition, r.value)
                                         for tp, records in consumer.poll(timeout_ms=200).items() for r in records])
    finally:
        consumer.close()


def test_confluent_kafka_consumer_reads_everything_through_its_session(broker, conn):
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as CTopicPartition

    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "sessions",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    try:
        consumer.assign([CTopicPartition(TOPIC, i, 0) for i in range(3)])

        def poll() -> list[tuple[int, bytes]]:
            message = consumer.poll(0.2)
            return [(message.partition(), message.value())] if message is not None and message.error() is None else []

        read_three_rounds(conn, poll)
    finally:
        consumer.close()
