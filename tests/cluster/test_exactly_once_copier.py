"""An exactly-once copier (consume-transform-produce with send_offsets_to_transaction) over three input partitions on
a three-broker cluster (KRaft), while the test kills -9 a partition leader, the broker that
coordinates the copier's transactional id, and the copier itself (a new copier with the same transactional id fences
the old one and resumes from the group's committed offsets).

Afterwards the output, read at read_committed, is exactly the input: every record once, none lost, none twice; and
the group's committed offsets are the input's end offsets.
"""
from __future__ import annotations

from collections import Counter

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

import minikafka
from tests.cluster.cluster_modes import CLUSTER_MODES
from tests.cluster.test_transactions_failover import coordinator_of, read_committed
from tests.copier_worker import copied, start
from tests.helpers import wait_until

SOURCE, SINK, GROUP, TRANSACTIONAL_ID = "copier-in", "copier-out", "copier", "copier-tx"
PARTITIONS = 3
RECORDS = 3000
WAIT_S = 90.0


def fill(bootstrap: str) -> list[bytes]:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    values = [b"record-%d" % i for i in range(RECORDS)]
    for i, value in enumerate(values):
        producer.produce(SOURCE, value, partition=i % PARTITIONS)
    assert producer.flush(60) == 0
    return values


def committed_offsets(bootstrap: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    try:
        return {tp.partition: tp.offset
                for tp in consumer.committed([TopicPartition(SOURCE, p) for p in range(PARTITIONS)], timeout=30)}
    finally:
        consumer.close()


# KRaft only: in ZooKeeper mode a killed broker stays in the metadata until its ZooKeeper session expires, and when it
# was the group's coordinator, librdkafka (2.10+) keeps that coordinator cached after the broker leaves the metadata
# and is decommissioned: send_offsets_to_transaction then waits on a broker handle that never comes up, past its own
# timeout (seen 2 times in 18 runs with COPIER_DEBUG=1: "Received CONNECT op" to the decommissioned broker, then
# nothing), until the coordinator aborts the transaction. Apache Kafka's ZooKeeper mode would meet the same client.
# The transaction failover tests of test_transactions_failover cover ZooKeeper mode.
@pytest.mark.parametrize("zookeeper", [CLUSTER_MODES[0]])
def test_copier_copies_exactly_once_through_leader_coordinator_and_copier_kills(tmp_path, zookeeper):
    with minikafka.Cluster(brokers=3, data_dir=tmp_path / "cluster", zookeeper=zookeeper) as cluster:
        for topic in (SOURCE, SINK):
            cluster.state.create_topic(topic, partitions=PARTITIONS, replication_factor=3,
                                       config={"min.insync.replicas": 2})
        values = fill(cluster.bootstrap_servers)
        progress = tmp_path / "progress"
        copier = start(cluster.bootstrap_servers, SOURCE, SINK, GROUP, TRANSACTIONAL_ID, progress)
        try:
            wait_until(lambda: copied(progress) >= RECORDS // 5, timeout=WAIT_S, message="the copier to start copying")
            leader = cluster.leader_of(SINK, 0)
            leader.kill()
            wait_until(lambda: copied(progress) >= 2 * RECORDS // 5, timeout=WAIT_S,
                       message="copying on after the leader kill")
            leader.start()
            coordinator = cluster.broker(coordinator_of(cluster, TRANSACTIONAL_ID))
            coordinator.kill()
            wait_until(lambda: copied(progress) >= 3 * RECORDS // 5, timeout=WAIT_S,
                       message="copying on after the coordinator kill")
            coordinator.start()
            copier.kill()
            copier.wait(30)
            copier = start(cluster.bootstrap_servers, SOURCE, SINK, GROUP, TRANSACTIONAL_ID, progress)
            output = read_committed(cluster.bootstrap_servers, RECORDS, SINK)
        finally:
            copier.kill()
            copier.wait(30)
        duplicates = [v for v, n in Counter(output).items() if n > 1]
        assert duplicates == [], f"{len(duplicates)} records copied twice, e.g. {duplicates[:5]}"
        assert sorted(output) == sorted(values), f"{len(output)} of {RECORDS} records copied"
        assert committed_offsets(cluster.bootstrap_servers) == dict.fromkeys(range(PARTITIONS), RECORDS // PARTITIONS)
