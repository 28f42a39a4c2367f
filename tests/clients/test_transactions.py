"""Transactions with real clients on one broker: confluent-kafka, kafka-python and aiokafka transactional producers
(each client's own transaction API), consumers at both isolation levels, zombie fencing, the coordinator's abort of
a transaction past its timeout, and the coordinator's errors as Kafka answers them on the wire."""
from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import TypeVar

import pytest
from aiokafka import AIOKafkaProducer
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from kafka import KafkaAdminClient, KafkaProducer
from kafka import TopicPartition as KafkaTopicPartition
from kafka.admin import AbortTransactionSpec
from kafka.protocol.producer.transaction import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
)

from minikafka.protocol.errors import ErrorCode
from tests.clients.test_transaction_coordinator_edges import DYNAMIC_TOPIC_CONFIG, topic_configs
from tests.helpers import admin_create_topic, last_stable_offsets, producer_states, wait_until
from tests.raw_client import RawConnection

TOPIC = "tx-out"
T = TypeVar("T")
PARTITIONS = 3
CONSUME_S = 20


def consume(bootstrap: str, isolation: str, expected: int, topic: str = TOPIC) -> list[bytes]:
    """Every value of the topic's partitions from the start, read until `expected` came (or the time is up)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{isolation}",
                         "enable.auto.commit": False, "isolation.level": isolation})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        got: list[bytes] = []
        deadline = time.monotonic() + CONSUME_S
        while len(got) < expected and time.monotonic() < deadline:
            for message in consumer.consume(500, timeout=0.3):
                assert message.error() is None, message.error()
                got.append(message.value())
        # Nothing more than expected arrives either.
        got.extend(m.value() for m in consumer.consume(500, timeout=0.5) if m.error() is None)
        return sorted(got)
    finally:
        consumer.close()


def values(prefix: str, count: int) -> list[bytes]:
    return sorted(b"%s-%d" % (prefix.encode(), i) for i in range(count))


@pytest.fixture
def bootstrap(broker) -> str:
    admin_create_topic(broker.bootstrap_servers, TOPIC, PARTITIONS)
    return broker.bootstrap_servers


def confluent_producer(bootstrap: str, transactional_id: str, **config: object) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id, **config})
    producer.init_transactions(30)
    return producer


def test_confluent_commits_and_aborts_and_read_committed_sees_only_commits(bootstrap):
    producer = confluent_producer(bootstrap, "confluent-tx")
    for round_ in range(3):
        producer.begin_transaction()
        for i in range(20):
            producer.produce(TOPIC, value=b"committed-%d" % (round_ * 20 + i), partition=i % PARTITIONS)
        producer.commit_transaction(30)
        producer.begin_transaction()
        for i in range(7):
            producer.produce(TOPIC, value=b"aborted-%d" % (round_ * 7 + i), partition=i % PARTITIONS)
        producer.flush(30)
        producer.abort_transaction(30)
    producer.flush(30)
    assert consume(bootstrap, "read_committed", 60) == values("committed", 60)
    assert consume(bootstrap, "read_uncommitted", 81) == sorted(values("committed", 60) + values("aborted", 21))


def test_kafka_python_transactional_producer(bootstrap):
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="kafka-python-tx")
    try:
        producer.init_transactions()
        producer.begin_transaction()
        for i in range(10):
            producer.send(TOPIC, value=b"committed-%d" % i, partition=i % PARTITIONS)
        producer.commit_transaction()
        producer.begin_transaction()
        producer.send(TOPIC, value=b"aborted-0", partition=0)
        producer.flush()
        producer.abort_transaction()
    finally:
        producer.close(timeout=10)
    assert consume(bootstrap, "read_committed", 10) == values("committed", 10)


def test_aiokafka_transactional_producer(bootstrap):
    async def run() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id="aiokafka-tx")
        await producer.start()
        try:
            async with producer.transaction():
                for i in range(10):
                    await producer.send(TOPIC, value=b"committed-%d" % i, partition=i % PARTITIONS)
            await producer.begin_transaction()
            await (await producer.send(TOPIC, value=b"aborted-0", partition=1))
            await producer.abort_transaction()
        finally:
            await producer.stop()

    asyncio.run(run())
    assert consume(bootstrap, "read_committed", 10) == values("committed", 10)


def test_a_new_producer_fences_the_old_one_and_its_open_transaction_is_aborted(bootstrap):
    zombie = confluent_producer(bootstrap, "fenced-tx")
    zombie.begin_transaction()
    zombie.produce(TOPIC, value=b"zombie-0", partition=0)
    zombie.flush(30)
    successor = confluent_producer(bootstrap, "fenced-tx")  # aborts the zombie's transaction, bumps the epoch
    successor.begin_transaction()
    successor.produce(TOPIC, value=b"successor-0", partition=0)
    successor.commit_transaction(30)
    with pytest.raises(KafkaException) as raised:
        zombie.produce(TOPIC, value=b"zombie-1", partition=0)
        zombie.commit_transaction(30)
    assert raised.value.args[0].fatal()
    assert consume(bootstrap, "read_committed", 1) == [b"successor-0"]


def test_the_coordinator_aborts_a_transaction_past_its_timeout(broker_factory):
    broker = broker_factory(transaction_abort_timed_out_transaction_cleanup_interval_ms=100)
    admin_create_topic(broker.bootstrap_servers, TOPIC, PARTITIONS)
    stalled = confluent_producer(broker.bootstrap_servers, "slow-tx", **{"transaction.timeout.ms": 1000})
    stalled.begin_transaction()
    stalled.produce(TOPIC, value=b"stalled-0", partition=0)
    stalled.flush(30)
    # Later committed data stays invisible to read_committed readers only while the stalled transaction is open.
    other = confluent_producer(broker.bootstrap_servers, "other-tx")
    other.begin_transaction()
    other.produce(TOPIC, value=b"later-0", partition=0)
    other.commit_transaction(30)
    assert consume(broker.bootstrap_servers, "read_committed", 1) == [b"later-0"]
    with pytest.raises(KafkaException):
        stalled.commit_transaction(30)
    assert "aborting the transaction of 'slow-tx': it passed its timeout" in broker.log_path.read_text()


def _init(conn: RawConnection, transactional_id: str, timeout_ms: int = 60000, version: int = 4):
    return conn.request(InitProducerIdRequest[version](transactional_id=transactional_id,
                                                       transaction_timeout_ms=timeout_ms, producer_id=-1,
                                                       producer_epoch=-1))


def _add(conn: RawConnection, version: int, transactional_id: str, pid: int, epoch: int,
         partitions: dict[str, list[int]]) -> dict[tuple[str, int], int]:
    response = conn.request(AddPartitionsToTxnRequest[version](
        v3_and_below_transactional_id=transactional_id, v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch, v3_and_below_topics=list(partitions.items())))
    return {(t.name, p.partition_index): p.partition_error_code
            for t in response.results_by_topic_v3_and_below for p in t.results_by_partition}


def test_coordinator_errors_as_kafka_answers_them(broker, bootstrap):
    def snapshot() -> tuple[object, ...]:
        """What a refused request leaves as it was: every transactional id the coordinator knows (ListTransactions,
        DescribeTransactions), each partition's producers (DescribeProducers), high watermark and last stable
        offset."""
        return (broker.state.transactions(), producer_states(bootstrap, TOPIC, PARTITIONS),
                [(p.high_watermark, p.last_stable_offset) for p in broker.state.partitions(TOPIC)])

    def refused(request: Callable[[], T]) -> T:
        before = snapshot()
        answer = request()
        assert snapshot() == before, answer
        return answer

    def unknown(transactional_id: str) -> bool:
        try:
            broker.state.transaction(transactional_id)
        except KeyError:
            return True
        return False

    with RawConnection(bootstrap) as conn:
        conn.find_coordinator("g")  # creates __consumer_offsets
        assert refused(lambda: _init(conn, "raw-tx", timeout_ms=900001)).error_code \
            == ErrorCode.INVALID_TRANSACTION_TIMEOUT
        assert refused(lambda: _init(conn, "")).error_code == ErrorCode.INVALID_REQUEST
        assert unknown("raw-tx")
        first = _init(conn, "raw-tx")
        assert (first.error_code, first.producer_epoch) == (0, 0)
        again = _init(conn, "raw-tx")
        assert (again.error_code, again.producer_id, again.producer_epoch) == (0, first.producer_id, 1)
        pid = first.producer_id
        # The old epoch is fenced: PRODUCER_FENCED from v2, INVALID_PRODUCER_EPOCH before (KIP-588).
        assert refused(lambda: _add(conn, 3, "raw-tx", pid, 0, {TOPIC: [0]})) == {
            (TOPIC, 0): ErrorCode.PRODUCER_FENCED}
        assert refused(lambda: _add(conn, 1, "raw-tx", pid, 0, {TOPIC: [0]})) == {
            (TOPIC, 0): ErrorCode.INVALID_PRODUCER_EPOCH}
        assert refused(lambda: _add(conn, 3, "raw-tx", pid + 1, 1, {TOPIC: [0]})) == {
            (TOPIC, 0): ErrorCode.INVALID_PRODUCER_ID_MAPPING}
        # An id the coordinator does not know is refused by every API of the producer, and stays unknown.
        assert refused(lambda: _add(conn, 3, "unknown-tx", pid, 1, {TOPIC: [0]})) == {
            (TOPIC, 0): ErrorCode.INVALID_PRODUCER_ID_MAPPING}
        assert refused(lambda: conn.request(EndTxnRequest[3](transactional_id="unknown-tx", producer_id=pid,
                                                             producer_epoch=1, committed=True))).error_code \
            == ErrorCode.INVALID_PRODUCER_ID_MAPPING
        assert refused(lambda: conn.request(AddOffsetsToTxnRequest[3](
            transactional_id="unknown-tx", producer_id=pid, producer_epoch=1, group_id="g"))).error_code \
            == ErrorCode.INVALID_PRODUCER_ID_MAPPING
        assert unknown("unknown-tx")
        assert refused(lambda: _add(conn, 3, "raw-tx", pid, 1, {TOPIC: [0], "no-such-topic": [0]})) == {
            (TOPIC, 0): ErrorCode.OPERATION_NOT_ATTEMPTED, ("no-such-topic", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        assert refused(lambda: _add(conn, 3, "raw-tx", pid, 1, {"__consumer_offsets": [0]})) == {
            ("__consumer_offsets", 0): ErrorCode.TOPIC_AUTHORIZATION_FAILED}
        end = refused(lambda: conn.request(EndTxnRequest[3](transactional_id="raw-tx", producer_id=pid,
                                                            producer_epoch=1, committed=True)))
        assert end.error_code == ErrorCode.INVALID_TXN_STATE  # nothing was added: the id is Empty
        assert broker.state.transaction("raw-tx").state == "Empty"
        assert _add(conn, 3, "raw-tx", pid, 1, {TOPIC: [0, 1]}) == {(TOPIC, 0): 0, (TOPIC, 1): 0}
        offsets = conn.request(AddOffsetsToTxnRequest[3](transactional_id="raw-tx", producer_id=pid,
                                                         producer_epoch=1, group_id="g"))
        assert offsets.error_code == ErrorCode.NONE
        ongoing = broker.state.transaction("raw-tx")
        assert (ongoing.state, ongoing.producer_epoch, len(ongoing.partitions)) == ("Ongoing", 1, 3)
        # With the transaction open, the fenced and the mistaken leave it as it is.
        assert refused(lambda: _add(conn, 3, "raw-tx", pid, 0, {TOPIC: [2]})) == {
            (TOPIC, 2): ErrorCode.PRODUCER_FENCED}
        assert refused(lambda: conn.request(EndTxnRequest[3](transactional_id="raw-tx", producer_id=pid,
                                                             producer_epoch=0, committed=True))).error_code \
            == ErrorCode.PRODUCER_FENCED
        assert refused(lambda: conn.request(EndTxnRequest[3](transactional_id="raw-tx", producer_id=pid + 1,
                                                             producer_epoch=1, committed=False))).error_code \
            == ErrorCode.INVALID_PRODUCER_ID_MAPPING
        # A second producer takes the id over while the transaction is open: the coordinator aborts it first.
        assert _init(conn, "raw-tx").error_code == ErrorCode.CONCURRENT_TRANSACTIONS
        retried = None
        for _ in range(100):
            retried = _init(conn, "raw-tx")
            if retried.error_code != ErrorCode.CONCURRENT_TRANSACTIONS:
                break
            time.sleep(0.05)
        # The cluster is at transaction version 2: the abort's own bump is the fence (epoch 2, KAFKA-19367), and the
        # retry bumps once more.
        assert retried is not None and (retried.error_code, retried.producer_epoch) == (0, 3)
        late = refused(lambda: conn.request(EndTxnRequest[3](transactional_id="raw-tx", producer_id=pid,
                                                             producer_epoch=1, committed=True)))
        assert late.error_code == ErrorCode.PRODUCER_FENCED
        late_v1 = refused(lambda: conn.request(EndTxnRequest[1](transactional_id="raw-tx", producer_id=pid,
                                                                producer_epoch=1, committed=True)))
        assert late_v1.error_code == ErrorCode.INVALID_PRODUCER_EPOCH


def test_admin_lists_describes_and_aborts_a_hanging_transaction(bootstrap):
    """KIP-664's workflow, as kafka-transactions.sh runs it: find the open transaction, the producer holding a
    partition's last stable offset, and abort it at the partition leader with the producer's epochs."""
    hanging = confluent_producer(bootstrap, "hanging-tx")
    hanging.begin_transaction()
    hanging.produce(TOPIC, value=b"hanging-0", partition=0)
    hanging.flush(30)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    tp0 = KafkaTopicPartition(TOPIC, 0)
    try:
        listed = [t for ts in admin.list_transactions().values() for t in ts]
        assert [(t.transactional_id, t.state.value) for t in listed] == [("hanging-tx", "Ongoing")]
        assert [t for ts in admin.list_transactions(state_filters=["CompleteCommit"]).values() for t in ts] == []
        assert [t.transactional_id for ts in admin.list_transactions(transactional_id_pattern="hang.*").values()
                for t in ts] == ["hanging-tx"]
        assert [t for ts in admin.list_transactions(duration_filter_ms=600_000).values() for t in ts] == []
        description = admin.describe_transactions(["hanging-tx"])["hanging-tx"]
        assert (description.state.value, description.topic_partitions) == ("Ongoing", {tp0})
        [producer] = admin.describe_producers([tp0])[tp0].active_producers
        assert (producer.producer_id, producer.current_transaction_start_offset) == (description.producer_id, 0)
        admin.abort_transaction(AbortTransactionSpec(tp0, producer.producer_id,
                                                     producer.producer_epoch, producer.coordinator_epoch))
        [after] = admin.describe_producers([tp0])[tp0].active_producers
        assert after.current_transaction_start_offset == -1
    finally:
        admin.close()
    other = confluent_producer(bootstrap, "after-abort-tx")
    other.begin_transaction()
    other.produce(TOPIC, value=b"after-0", partition=0)
    other.commit_transaction(30)
    assert consume(bootstrap, "read_committed", 1) == [b"after-0"]


def test_idle_producers_expire_after_producer_id_expiration_ms(broker_factory):
    # Long enough that the first look sees both producers even on a loaded machine; short enough to wait for.
    broker = broker_factory(producer_id_expiration_ms=4000, producer_id_expiration_check_interval_ms=100)
    admin_create_topic(broker.bootstrap_servers, TOPIC, PARTITIONS)
    idempotent = Producer({"bootstrap.servers": broker.bootstrap_servers, "enable.idempotence": True})
    idempotent.produce(TOPIC, value=b"once", partition=0)
    assert idempotent.flush(30) == 0
    open_txn = confluent_producer(broker.bootstrap_servers, "kept-tx")
    open_txn.begin_transaction()
    open_txn.produce(TOPIC, value=b"open", partition=0)
    open_txn.flush(30)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    tp0 = KafkaTopicPartition(TOPIC, 0)
    try:
        def producers() -> int:
            return len(admin.describe_producers([tp0])[tp0].active_producers)

        assert producers() == 2
        wait_until(lambda: producers() == 1, timeout=30, message="the idle idempotent producer to expire")
        time.sleep(0.5)
        assert producers() == 1  # the producer with an open transaction stays
    finally:
        admin.close()


def test_held_markers_hold_the_last_stable_offset_until_the_fault_is_cleared(broker):
    admin_create_topic(broker.bootstrap_servers, TOPIC, PARTITIONS)
    producer = confluent_producer(broker.bootstrap_servers, "held-tx")
    hold = broker.faults.hold_transaction_markers()
    producer.begin_transaction()
    for i in range(6):
        producer.produce(TOPIC, value=b"committed-%d" % i, partition=i % PARTITIONS)
    producer.commit_transaction(30)  # answered once PrepareCommit is written; the markers wait
    assert consume(broker.bootstrap_servers, "read_uncommitted", 6) == values("committed", 6)
    # Each partition's last stable offset stays at the transaction's first offset while its marker is held.
    assert [(p.high_watermark, p.last_stable_offset) for p in broker.state.partitions(TOPIC)] == [(2, 0)] * PARTITIONS
    with RawConnection(broker.bootstrap_servers) as conn:
        assert _init(conn, "held-tx").error_code == ErrorCode.CONCURRENT_TRANSACTIONS
    assert [f["kind"] for f in broker.faults.list()] == ["txn-markers-hold"]
    assert hold.hits >= 1  # the markers it held back
    # A read_committed consumer waits at the last stable offset, then reads on once the markers are written.
    waiting = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "held-reader",
                        "enable.auto.commit": False, "isolation.level": "read_committed"})
    try:
        waiting.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
        got: list[bytes] = []
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            got.extend(m.value() for m in waiting.consume(500, timeout=0.3) if m.error() is None)
        assert got == []
        hold.clear()
        deadline = time.monotonic() + CONSUME_S
        while len(got) < 6 and time.monotonic() < deadline:
            for message in waiting.consume(500, timeout=0.3):
                assert message.error() is None, message.error()
                got.append(message.value())
        assert sorted(got) == values("committed", 6)
    finally:
        waiting.close()
    assert [(p.high_watermark, p.last_stable_offset) for p in broker.state.partitions(TOPIC)] == [(3, 3)] * PARTITIONS


@pytest.mark.minikafka(brokers=3)
def test_the_plugin_cluster_fixture_serves_transactions(minikafka_cluster):
    minikafka_cluster.state.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3)
    producer = confluent_producer(minikafka_cluster.bootstrap_servers, "fixture-tx")
    producer.begin_transaction()
    for i in range(6):
        producer.produce(TOPIC, value=b"committed-%d" % i, partition=i % PARTITIONS)
    producer.commit_transaction(30)
    assert consume(minikafka_cluster.bootstrap_servers, "read_committed", 6) == values("committed", 6)
    state = minikafka_cluster.state.describe(["__transaction_state"])
    assert {len(p["replicas"]) for d in state for t in d["topics"] for p in t["partitions"]} == {3}
    # transaction.state.log.min.isr, 2, as a topic override, as Kafka creates it.
    configs = topic_configs(minikafka_cluster.bootstrap_servers, "__transaction_state")
    assert configs["min.insync.replicas"] == ("2", DYNAMIC_TOPIC_CONFIG)


@pytest.mark.minikafka(in_process=True)
def test_an_in_process_broker_serves_transactions(minikafka_broker):
    admin_create_topic(minikafka_broker.bootstrap_servers, TOPIC, PARTITIONS)
    producer = confluent_producer(minikafka_broker.bootstrap_servers, "in-process-tx")
    producer.begin_transaction()
    producer.produce(TOPIC, value=b"committed-0", partition=0)
    producer.commit_transaction(30)
    assert consume(minikafka_broker.bootstrap_servers, "read_committed", 1) == [b"committed-0"]


def test_open_transactions_and_last_stable_offsets_survive_kill_9(broker):
    admin_create_topic(broker.bootstrap_servers, TOPIC, PARTITIONS)
    first = confluent_producer(broker.bootstrap_servers, "survivor-a")
    second = confluent_producer(broker.bootstrap_servers, "survivor-b")
    for round_ in range(3):
        first.begin_transaction()
        first.produce(TOPIC, value=b"a-%d" % round_, partition=round_ % PARTITIONS)
        first.flush(30)
        if round_ == 1:
            first.abort_transaction(30)
        else:
            first.commit_transaction(30)
    second.begin_transaction()
    second.produce(TOPIC, value=b"open-0", partition=0)
    second.produce(TOPIC, value=b"open-1", partition=1)
    second.flush(30)
    first.begin_transaction()
    first.produce(TOPIC, value=b"a-open", partition=1)
    first.flush(30)
    producers = producer_states(broker.bootstrap_servers, TOPIC, PARTITIONS)
    stable = last_stable_offsets(broker.bootstrap_servers, TOPIC, PARTITIONS)
    assert stable[0] < broker.state.partition(TOPIC, 0).high_watermark  # the open transactions hold it back
    broker.kill()
    broker.start()
    assert producer_states(broker.bootstrap_servers, TOPIC, PARTITIONS) == producers
    assert last_stable_offsets(broker.bootstrap_servers, TOPIC, PARTITIONS) == stable
    assert consume(broker.bootstrap_servers, "read_committed", 2) == [b"a-0", b"a-2"]


PAUSED_PRODUCER = """
import sys, time
from confluent_kafka import KafkaException, Producer
producer = Producer({"bootstrap.servers": sys.argv[1], "transactional.id": "paused-tx",
                     "transaction.timeout.ms": 1000})
producer.init_transactions(30)
producer.begin_transaction()
producer.produce(sys.argv[2], value=b"paused-0", partition=0)
producer.flush(30)
print("ready", flush=True)
sys.stdin.readline()  # the test pauses the process here, then lets it go on
try:
    producer.commit_transaction(30)
    print("committed", flush=True)
except KafkaException as exc:
    print("refused", exc.args[0].name(), flush=True)
"""


def test_a_paused_producers_transaction_is_aborted_at_its_timeout_and_its_commit_refused(broker_factory):
    broker = broker_factory(transaction_abort_timed_out_transaction_cleanup_interval_ms=100)
    admin_create_topic(broker.bootstrap_servers, TOPIC, PARTITIONS)
    process = subprocess.Popen([sys.executable, "-c", PAUSED_PRODUCER, broker.bootstrap_servers, TOPIC],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None and process.stdin is not None
        assert process.stdout.readline().strip() == "ready"
        process.send_signal(signal.SIGSTOP)
        wait_until(lambda: broker.state.transaction("paused-tx").state == "CompleteAbort", timeout=30,
                   message="the coordinator to abort the paused producer's transaction")
        assert broker.state.partition(TOPIC, 0).last_stable_offset == broker.state.partition(TOPIC, 0).high_watermark
        process.send_signal(signal.SIGCONT)
        process.stdin.write("go on\n")
        process.stdin.flush()
        answer = process.stdout.readline().split()
        assert answer[0] == "refused", answer  # its epoch was bumped by the abort: the late commit is fenced
        assert process.wait(30) == 0
    finally:
        process.kill()
        process.wait(30)
    assert consume(broker.bootstrap_servers, "read_committed", 0) == []


def test_injected_coordinator_errors_reach_the_producer(broker):
    admin_create_topic(broker.bootstrap_servers, TOPIC, PARTITIONS)
    producer = confluent_producer(broker.bootstrap_servers, "faulted-tx")
    retried = broker.faults.fail_requests("EndTxn", "CONCURRENT_TRANSACTIONS", count=2)
    producer.begin_transaction()
    producer.produce(TOPIC, value=b"committed-0", partition=0)
    producer.commit_transaction(30)  # retried by the client until the fault is used up
    assert broker.faults.list() == [] and retried.kind == "error"
    broker.faults.fail_requests("AddPartitionsToTxn", "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", count=1)
    producer.begin_transaction()
    with pytest.raises(KafkaException) as raised:
        producer.produce(TOPIC, value=b"refused-0", partition=0)
        producer.commit_transaction(30)
    assert raised.value.args[0].fatal()
    assert consume(broker.bootstrap_servers, "read_committed", 1) == [b"committed-0"]


def test_an_idle_transactional_id_expires_after_transactional_id_expiration_ms(broker_factory):
    broker = broker_factory(transactional_id_expiration_ms=1500,
                            transaction_remove_expired_transaction_cleanup_interval_ms=100)
    admin_create_topic(broker.bootstrap_servers, TOPIC, PARTITIONS)
    producer = confluent_producer(broker.bootstrap_servers, "expiring-tx")
    producer.begin_transaction()
    producer.produce(TOPIC, value=b"committed-0", partition=0)
    producer.commit_transaction(30)
    assert broker.state.transaction("expiring-tx").state in ("PrepareCommit", "CompleteCommit")

    def expired() -> bool:
        try:
            broker.state.transaction("expiring-tx")
        except KeyError:
            return True
        return False

    wait_until(expired, timeout=30, message="the idle transactional id to expire")
    broker.kill()
    broker.start()  # the tombstone in __transaction_state keeps it gone
    assert expired()
    assert consume(broker.bootstrap_servers, "read_committed", 1) == [b"committed-0"]
