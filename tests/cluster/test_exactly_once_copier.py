"""An exactly-once copier (consume-transform-produce with send_offsets_to_transaction) over three input partitions on
a three-broker cluster in both controller modes, while the test kills -9 a partition leader, the broker that
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


def roles(cluster: minikafka.Cluster) -> tuple[int, int, str]:
    """The partition of SINK whose leader the test kills, and a transactional id coordinated by the third broker.

    Neither victim is the group's coordinator: librdkafka (2.16, confluentinc/librdkafka#5511, with #5456) caches
    the group coordinator for TxnOffsetCommit, and when that broker leaves the metadata (a killed broker once it
    is fenced, in either controller mode, as with Apache Kafka) its handle is decommissioned while still cached:
    send_offsets_to_transaction then waits for it past its own timeout, until some other broker changes state.
    """
    group_coordinator = coordinator_of(cluster, GROUP, key_type=0)
    partition = next((p for p in range(PARTITIONS) if cluster.leader_of(SINK, p).node_id != group_coordinator),
                     None)
    assert partition is not None, f"broker {group_coordinator} leads every partition of {SINK}"
    third = ({b.node_id for b in cluster.brokers} - {group_coordinator, cluster.leader_of(SINK, partition).node_id})
    candidates = (f"{TRANSACTIONAL_ID}-{i}" for i in range(200))
    transactional_id = next(t for t in candidates if coordinator_of(cluster, t) in third)
    return partition, coordinator_of(cluster, transactional_id), transactional_id


@pytest.mark.parametrize("zookeeper", CLUSTER_MODES)
def test_copier_copies_exactly_once_through_leader_coordinator_and_copier_kills(tmp_path, zookeeper):
    with minikafka.Cluster(brokers=3, data_dir=tmp_path / "cluster", zookeeper=zookeeper) as cluster:
        for topic in (SOURCE, SINK):
            cluster.state.create_topic(topic, partitions=PARTITIONS, replication_factor=3,
                                       config={"min.insync.replicas": 2})
        values = fill(cluster.bootstrap_servers)
        partition, coordinator_id, transactional_id = roles(cluster)
        progress = tmp_path / "progress"
        copier = start(cluster.bootstrap_servers, SOURCE, SINK, GROUP, transactional_id, progress)
        try:
            wait_until(lambda: copied(progress) >= RECORDS // 5, timeout=WAIT_S, message="the copier to start copying")
            leader = cluster.leader_of(SINK, partition)
            leader.kill()
            wait_until(lambda: copied(progress) >= 2 * RECORDS // 5, timeout=WAIT_S,
                       message="copying on after the leader kill")
            leader.start()
            assert coordinator_of(cluster, transactional_id) == coordinator_id
            coordinator = cluster.broker(coordinator_id)
            coordinator.kill()
            wait_until(lambda: copied(progress) >= 3 * RECORDS // 5, timeout=WAIT_S,
                       message="copying on after the coordinator kill")
            coordinator.start()
            copier.kill()
            copier.wait(30)
            copier = start(cluster.bootstrap_servers, SOURCE, SINK, GROUP, transactional_id, progress)
            output = read_committed(cluster.bootstrap_servers, RECORDS, SINK)
        finally:
            copier.kill()
            copier.wait(30)
        duplicates = [v for v, n in Counter(output).items() if n > 1]
        assert duplicates == [], f"{len(duplicates)} records copied twice, e.g. {duplicates[:5]}"
        assert sorted(output) == sorted(values), f"{len(output)} of {RECORDS} records copied"
        assert committed_offsets(cluster.bootstrap_servers) == dict.fromkeys(range(PARTITIONS), RECORDS // PARTITIONS)
