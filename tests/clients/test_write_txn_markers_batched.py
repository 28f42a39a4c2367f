"""WriteTxnMarkers with the markers of several transactions in one request, as the coordinator's marker sender
batches them per leader: every marker is appended, then one acks=all wait covers them all (two markers of one
partition included), and each partition gets its own answer. On one broker with the test playing the coordinator,
and on three brokers where the wait is for real followers; then two producers committing at once through the
coordinator, their partitions on the same leaders."""
from __future__ import annotations

import threading

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka.protocol.producer.transaction import InitProducerIdRequest, WriteTxnMarkersRequest

from minikafka.protocol.errors import ErrorCode
from tests.clients.test_transaction_markers import READ_COMMITTED, batch, batches, fetch, produce
from tests.helpers import admin_create_topic
from tests.raw_client import RawConnection

TOPIC = "txn"  # the topic of test_transaction_markers' helpers
COORDINATOR_EPOCH = 5


def _producer_id(conn: RawConnection) -> int:
    return conn.request(InitProducerIdRequest[4](transactional_id=None, transaction_timeout_ms=60000,
                                                 producer_id=-1, producer_epoch=-1)).producer_id


def _write_markers(conn: RawConnection, markers: list[tuple[int, bool, list[int]]]) -> dict[int, dict[int, int]]:
    """One request, a marker per (producer id, commit, partitions); per producer id, each partition's answer."""
    response = conn.request(WriteTxnMarkersRequest[1](markers=[
        (pid, 0, commit, [(TOPIC, partitions)], COORDINATOR_EPOCH) for pid, commit, partitions in markers]))
    assert [m.producer_id for m in response.markers] == [pid for pid, _, _ in markers]
    return {m.producer_id: {p.partition_index: p.error_code for t in m.topics for p in t.partitions}
            for m in response.markers}


def _check_batched_markers(bootstrap: str) -> None:
    with RawConnection(bootstrap) as conn:
        committer, aborter = _producer_id(conn), _producer_id(conn)
        assert produce(conn, batch(committer, 0, [b"kept"])) == (0, 0)
        assert produce(conn, batch(aborter, 0, [b"dropped"])) == (0, 1)
        answers = _write_markers(conn, [(committer, True, [0, 1]), (aborter, False, [0, 9])])
        assert answers == {committer: {0: ErrorCode.NONE, 1: ErrorCode.NONE},
                           aborter: {0: ErrorCode.NONE, 9: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}}
        committed = fetch(conn, 0, READ_COMMITTED)
        # Answered only once the ISR had both markers: the high watermark is past them.
        assert committed.high_watermark == committed.last_stable_offset == 4
        assert [(offset, control, values) for offset, control, values in batches(committed.records)] == [
            (0, False, [b"kept"]), (1, False, [b"dropped"]), (2, True, []), (3, True, [])]
        assert [(a.producer_id, a.first_offset) for a in committed.aborted_transactions] == [(aborter, 1)]
        assert fetch(conn, 0, READ_COMMITTED, partition=1).high_watermark == 1


def test_markers_of_two_producers_in_one_request(broker_factory):
    # The partition side alone: no coordinator hears of these transactions, so the leader must not ask it.
    broker = broker_factory(transaction_partition_verification_enable="false")
    admin_create_topic(broker.bootstrap_servers, TOPIC, 2)
    _check_batched_markers(broker.bootstrap_servers)


@pytest.mark.minikafka(brokers=3, config={"transaction.partition.verification.enable": "false"})
def test_markers_of_two_producers_in_one_request_wait_once_for_the_isr(minikafka_cluster):
    minikafka_cluster.state.create_topic(TOPIC, partitions=2, replication_factor=3)
    for partition in (0, 1):
        minikafka_cluster.wait_for_isr(TOPIC, partition, 3)
    leader = minikafka_cluster.wait_for_leader(TOPIC, 0)
    if minikafka_cluster.leader_of(TOPIC, 1) is not leader:
        minikafka_cluster.move_leader(TOPIC, 1, to=leader)
    _check_batched_markers(leader.bootstrap_servers)


@pytest.mark.minikafka(brokers=3)
def test_concurrent_commits_whose_partitions_share_leaders_all_complete(minikafka_cluster):
    bootstrap = minikafka_cluster.bootstrap_servers
    minikafka_cluster.state.create_topic(TOPIC, partitions=3, replication_factor=3)
    producers = []
    for i in range(4):
        producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"concurrent-{i}"})
        producer.init_transactions(30)
        producers.append(producer)
    errors: list[BaseException] = []

    def commit(i: int, producer: Producer) -> None:
        try:
            for round_ in range(5):
                producer.begin_transaction()
                for partition in range(3):
                    producer.produce(TOPIC, value=b"%d-%d-%d" % (i, round_, partition), partition=partition)
                producer.commit_transaction(30)
        except BaseException as exc:  # noqa: BLE001 - reported by the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=commit, args=(i, p)) for i, p in enumerate(producers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert errors == [] and not any(t.is_alive() for t in threads)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "concurrent", "enable.auto.commit": False,
                         "isolation.level": "read_committed"})
    try:
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(3)])
        got: set[bytes] = set()
        for _ in range(100):
            if len(got) == 60:
                break
            got.update(m.value() for m in consumer.consume(100, timeout=0.5) if m.error() is None)
    finally:
        consumer.close()
    assert got == {b"%d-%d-%d" % (i, r, p) for i in range(4) for r in range(5) for p in range(3)}
