"""Transactions on a three-broker cluster (replication factor 3, acks=all), in both controller modes: kafka-python's
and aiokafka's transactional producers, and confluent-kafka's while the test kills -9 the transaction coordinator of
the producer's transactional id and, later, a partition leader.

The producer commits transactions of records over three partitions and aborts every third one; a transaction whose
commit failed is aborted and written again, as an application does. Afterwards a read_committed consumer sees
exactly the committed records, once each, and no aborted one; every replica holds identical batches, and identical
aborted-transaction indexes (`.txnindex`), as Kafka's replicas do.
"""
from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer
from confluent_kafka import KafkaException, Producer
from kafka import KafkaProducer
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest

import minikafka
from tests.cluster.cluster_modes import CLUSTER_MODES
from tests.cluster.replication_checks import assert_replicas_identical, partition_dir
from tests.helpers import read_committed_values, wait_until
from tests.raw_client import RawConnection

TOPIC = "eos"
PARTITIONS = 3
TRANSACTIONS = 30
PER_TRANSACTION = 6
TRANSACTIONAL_ID = "failover-tx"
WAIT_S = 60.0
CONSUME_S = 60.0


def coordinator_of(cluster: minikafka.Cluster, key: str, key_type: int = 1) -> int:
    """The broker coordinating a transactional id (key type 1) or a group (0), once its topic is ready."""
    live = next(b for b in cluster.brokers if b.running)
    answers = []

    def found() -> bool:
        with RawConnection(live.bootstrap_servers) as conn:
            answers.append(conn.request(FindCoordinatorRequest[3](key=key, key_type=key_type)))
        return answers[-1].error_code == 0

    wait_until(found, timeout=WAIT_S, message=f"a coordinator for {key!r}")
    return answers[-1].node_id


def end(producer: Producer, commit: bool) -> bool:
    """Commit or abort; False when the transaction could not be committed and was aborted instead."""
    deadline = time.monotonic() + WAIT_S
    while True:
        try:
            if commit:
                producer.commit_transaction(30)
            else:
                producer.abort_transaction(30)
            return commit
        except KafkaException as exc:
            error = exc.args[0]
            if error.fatal() or time.monotonic() > deadline:
                raise
            if error.txn_requires_abort():
                producer.abort_transaction(30)
                return False
            time.sleep(0.1)  # retriable: call again to resume


def read_committed(bootstrap: str, expected: int, topic: str = TOPIC) -> list[bytes]:
    """The values of the topic's partitions at read_committed, read until `expected` came (or a minute passed)."""
    return read_committed_values(bootstrap, topic, PARTITIONS, expected, CONSUME_S)


def txn_indexes(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.glob("*.txnindex"))}


@pytest.mark.parametrize("zookeeper", CLUSTER_MODES)
def test_exactly_the_committed_records_through_coordinator_and_leader_kills(tmp_path, zookeeper):
    with minikafka.Cluster(brokers=3, data_dir=tmp_path / "cluster", zookeeper=zookeeper) as cluster:
        cluster.state.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3,
                                   config={"min.insync.replicas": 2})
        for p in range(PARTITIONS):
            cluster.wait_for_isr(TOPIC, p, 3, timeout=WAIT_S)
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": TRANSACTIONAL_ID,
                             "transaction.timeout.ms": 60000})
        producer.init_transactions(WAIT_S)
        committed: list[bytes] = []
        killed: list[int] = []
        for n in range(TRANSACTIONS):
            if n == TRANSACTIONS // 3:
                victim = coordinator_of(cluster, TRANSACTIONAL_ID)
                cluster.broker(victim).kill()
                killed.append(victim)
            if n == 2 * TRANSACTIONS // 3:
                cluster.broker(killed[0]).start()
                victim = cluster.leader_of(TOPIC, 0).node_id
                cluster.broker(victim).kill()
                killed.append(victim)
            batch = [b"t%d-r%d" % (n, i) for i in range(PER_TRANSACTION)]
            while True:
                producer.begin_transaction()
                for i, value in enumerate(batch):
                    producer.produce(TOPIC, value=value, partition=i % PARTITIONS)
                wanted = n % 3 != 2
                if not wanted:
                    producer.flush(30)  # the aborted records reach the log (abort would purge unsent ones)
                if end(producer, wanted):
                    committed.extend(batch)
                    break
                if not wanted:
                    break
        producer.flush(30)
        cluster.broker(killed[-1]).start()
        got = read_committed(cluster.bootstrap_servers, len(committed))
        assert sorted(got) == sorted(committed), "read_committed must see each committed record once, no other"
        assert len(set(got)) == len(got)
        cluster.wait_for_replicas_caught_up(TOPIC, timeout=WAIT_S)
        for p in range(PARTITIONS):
            assert_replicas_identical(cluster, TOPIC, p)
            replicas = cluster.state.partition(TOPIC, p).replicas
            indexes = [txn_indexes(partition_dir(cluster.broker(r), TOPIC, p)) for r in replicas]
            assert indexes[0], f"{TOPIC}-{p} has aborted transactions, so an index"
            assert all(index == indexes[0] for index in indexes), f"{TOPIC}-{p}: .txnindex differs between replicas"


@pytest.mark.parametrize("zookeeper", CLUSTER_MODES)
def test_a_new_coordinator_completes_a_commit_its_killed_predecessor_prepared(tmp_path, zookeeper):
    """kill -9 of the coordinator between PrepareCommit (written, replicated, answered) and the markers: the broker
    elected leader of the id's `__transaction_state` partition loads the PrepareCommit and writes the markers."""
    with minikafka.Cluster(brokers=3, data_dir=tmp_path / "cluster", zookeeper=zookeeper) as cluster:
        cluster.state.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3,
                                   config={"min.insync.replicas": 2})
        for p in range(PARTITIONS):
            cluster.wait_for_isr(TOPIC, p, 3, timeout=WAIT_S)
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": TRANSACTIONAL_ID})
        producer.init_transactions(WAIT_S)
        coordinator = cluster.broker(coordinator_of(cluster, TRANSACTIONAL_ID))
        coordinator.faults.hold_transaction_markers()
        producer.begin_transaction()
        batch = [b"prepared-%d" % i for i in range(9)]
        for i, value in enumerate(batch):
            producer.produce(TOPIC, value=value, partition=i % PARTITIONS)
        producer.commit_transaction(WAIT_S)
        assert read_committed(cluster.bootstrap_servers, 0) == []  # no marker yet
        coordinator.kill()
        assert sorted(read_committed(cluster.bootstrap_servers, len(batch))) == sorted(batch)
        successor = coordinator_of(cluster, TRANSACTIONAL_ID)
        assert successor != coordinator.node_id
        coordinator.start()


def _kafka_python_transaction(bootstrap: str, values: list[bytes], commit: bool) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"kafka-python-{commit}")
    try:
        producer.init_transactions()
        producer.begin_transaction()
        for i, value in enumerate(values):
            producer.send(TOPIC, value=value, partition=i % PARTITIONS)
        producer.flush()
        producer.commit_transaction() if commit else producer.abort_transaction()
    finally:
        producer.close(timeout=10)


def _aiokafka_transaction(bootstrap: str, values: list[bytes], commit: bool) -> None:
    async def run() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"aiokafka-{commit}")
        await producer.start()
        try:
            await producer.begin_transaction()
            for i, value in enumerate(values):
                await (await producer.send(TOPIC, value=value, partition=i % PARTITIONS))
            await (producer.commit_transaction() if commit else producer.abort_transaction())
        finally:
            await producer.stop()

    asyncio.run(run())


@pytest.mark.parametrize("zookeeper", CLUSTER_MODES)
def test_each_clients_transactions_on_a_cluster(tmp_path, zookeeper):
    with minikafka.Cluster(brokers=3, data_dir=tmp_path / "cluster", zookeeper=zookeeper) as cluster:
        cluster.state.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3,
                                   config={"min.insync.replicas": 2})
        committed: list[bytes] = []
        for name, transaction in (("kafka-python", _kafka_python_transaction), ("aiokafka", _aiokafka_transaction)):
            kept = [b"%s-committed-%d" % (name.encode(), i) for i in range(6)]
            transaction(cluster.bootstrap_servers, kept, True)
            transaction(cluster.bootstrap_servers, [b"%s-aborted-%d" % (name.encode(), i) for i in range(3)], False)
            committed.extend(kept)
        assert sorted(read_committed(cluster.bootstrap_servers, len(committed))) == sorted(committed)
