"""Transactions on a three-broker cluster (replication factor 3, acks=all), in both controller modes: confluent-kafka's,
kafka-python's and aiokafka's transactional producers, and confluent-kafka's while the test kills -9 the transaction
coordinator of the producer's transactional id and, later, a partition leader.

The producer commits transactions of records over three partitions and aborts every third one; a transaction whose
commit failed is aborted and written again, as an application does. Afterwards each client's consumer sees exactly
the committed records at read_committed, once each and no aborted one, and every stored record at
read_uncommitted; every replica holds identical batches, the same aborted transactions in its indexes
(`.txnindex`), and, in segments small enough to roll, the same producer-state snapshots (`.snapshot`) wherever
replicas have one at the same offset, as Kafka's replicas do.
"""
from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import KafkaException, Producer
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest

import minikafka
from tests.cluster.cluster_modes import CLUSTER_MODES
from tests.cluster.replication_checks import (
    aborted_transactions,
    assert_replicas_identical,
    assert_transaction_files_identical,
    partition_dir,
)
from tests.helpers import (
    TRANSACTIONAL_CLIENTS,
    assert_read_at_both_isolation_levels,
    read_committed_values,
    read_values,
    run_transactions,
    wait_until,
)
from tests.raw_client import RawConnection

TOPIC = "eos"
PARTITIONS = 3
TRANSACTIONS = 30
PER_TRANSACTION = 6
TRANSACTIONAL_ID = "failover-tx"
WAIT_S = 60.0
CONSUME_S = 60.0
# Small enough that each partition's 30-odd transactions (a batch of two records and a marker each, some 170 bytes)
# fill several segments, so that replicas roll and write producer snapshots at segment starts.
SEGMENT_BYTES = 1024  # internal.segment.bytes: a roll every few batches


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


@pytest.mark.parametrize("zookeeper", CLUSTER_MODES)
def test_exactly_the_committed_records_through_coordinator_and_leader_kills(tmp_path, zookeeper):
    with minikafka.Cluster(brokers=3, data_dir=tmp_path / "cluster", zookeeper=zookeeper) as cluster:
        cluster.state.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3,
                                   config={"min.insync.replicas": 2, "internal.segment.bytes": SEGMENT_BYTES})
        for p in range(PARTITIONS):
            cluster.wait_for_isr(TOPIC, p, 3, timeout=WAIT_S)
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": TRANSACTIONAL_ID,
                             "transaction.timeout.ms": 60000})
        producer.init_transactions(WAIT_S)
        committed: list[bytes] = []
        aborted: list[bytes] = []  # aborted on purpose, once acknowledged (a failed commit's records may be lost)
        written: set[bytes] = set()
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
            written.update(batch)
            while True:
                producer.begin_transaction()
                for i, value in enumerate(batch):
                    producer.produce(TOPIC, value=value, partition=i % PARTITIONS)
                wanted = n % 3 != 2
                if not wanted:
                    # The aborted records reach the log (abort would purge unsent ones).
                    assert producer.flush(WAIT_S) == 0
                if end(producer, wanted):
                    committed.extend(batch)
                    break
                if not wanted:
                    aborted.extend(batch)
                    break
        producer.flush(30)
        cluster.broker(killed[-1]).start()
        stored = [r.value for r in cluster.state.records(TOPIC, timeout_s=CONSUME_S)]
        assert set(committed) | set(aborted) <= set(stored) <= written
        for client in TRANSACTIONAL_CLIENTS:
            for isolation, expected in (("read_committed", committed), ("read_uncommitted", stored)):
                read = read_values(client, cluster.bootstrap_servers, TOPIC, PARTITIONS, isolation, len(expected),
                                   CONSUME_S)
                # Each committed record once and no other at read_committed; every stored record at read_uncommitted.
                assert Counter(read) == Counter(expected), f"{client} at {isolation}: {len(read)} of {len(expected)}"
        cluster.wait_for_replicas_caught_up(TOPIC, timeout=WAIT_S)
        directories: dict[int, dict[int, Path]] = {}
        for p in range(PARTITIONS):
            assert_replicas_identical(cluster, TOPIC, p)
            directories[p] = {r: partition_dir(cluster.broker(r), TOPIC, p)
                              for r in cluster.state.partition(TOPIC, p).replicas}
        cluster.stop()  # a clean shutdown: every replica writes a producer snapshot at its (common) log end offset
        for p in range(PARTITIONS):
            rolled = [len(list(d.glob("*.log"))) for d in directories[p].values()]
            assert min(rolled) > 2, f"{TOPIC}-{p}: segments per replica {rolled}: the test wants several rolls"
            assert aborted_transactions(next(iter(directories[p].values()))), f"{TOPIC}-{p} indexes its aborts"
            shared = assert_transaction_files_identical(directories[p], f"{TOPIC}-{p}")
            assert len(shared) > 1, f"{TOPIC}-{p}: only the snapshots at {shared} are on every replica"


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


@pytest.mark.parametrize("zookeeper", CLUSTER_MODES)
def test_each_clients_transactions_on_a_cluster(tmp_path, zookeeper):
    with minikafka.Cluster(brokers=3, data_dir=tmp_path / "cluster", zookeeper=zookeeper) as cluster:
        cluster.state.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3,
                                   config={"min.insync.replicas": 2})
        committed: list[bytes] = []
        aborted: list[bytes] = []
        for client in TRANSACTIONAL_CLIENTS:
            kept = [b"%s-committed-%d" % (client.encode(), i) for i in range(6)]
            dropped = [b"%s-aborted-%d" % (client.encode(), i) for i in range(3)]
            run_transactions(client, cluster.bootstrap_servers, f"{client}-tx", TOPIC, PARTITIONS,
                             [(kept, True), (dropped, False)])
            committed += kept
            aborted += dropped
        assert_read_at_both_isolation_levels(cluster.bootstrap_servers, TOPIC, PARTITIONS, committed, aborted,
                                             CONSUME_S)
