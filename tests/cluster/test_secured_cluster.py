"""A three-broker cluster whose client listeners are SASL_SSL (SCRAM-SHA-512 over TLS), in both controller modes:
an idempotent acks=all producer keeps writing while the leader of its partition is killed with SIGKILL, and
afterwards every acknowledged record is stored exactly once at its acknowledged offset, on replicas whose logs
are identical byte for byte. The clients only ever reach the brokers over SASL_SSL (Metadata names no other
listener); the brokers' own replication runs on their plaintext INTERNAL listener."""
from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

import minikafka
from tests.cluster.cluster_modes import CLUSTER_MODES
from tests.cluster.replication_checks import Acknowledgements, assert_every_acknowledged_record_kept

TOPIC = "payments"
TOTAL = 600
WAIT_S = 60.0


@pytest.mark.parametrize("zookeeper", CLUSTER_MODES)
def test_sasl_ssl_cluster_keeps_every_acknowledged_record_through_a_leader_kill(zookeeper, tmp_path):
    with minikafka.Cluster(brokers=3, zookeeper=zookeeper, data_dir=tmp_path, security="SASL_SSL",
                           users={"alice": "alice-secret"}) as cluster:
        cluster.state.create_topic(TOPIC, partitions=1, replication_factor=3, config={"min.insync.replicas": 2})
        cluster.wait_for_isr(TOPIC, 0, 3)
        config = cluster.client_config(user="alice", mechanism="SCRAM-SHA-512")
        metadata = AdminClient(config).list_topics(timeout=WAIT_S)
        assert sorted(f"{b.host}:{b.port}" for b in metadata.brokers.values()) == \
            sorted(b.bootstrap_servers for b in cluster.brokers)

        acks = Acknowledgements()

        def delivered(err, msg) -> None:
            if err is not None:
                acks.failed(str(err))
            else:
                acks.acknowledged(msg.partition(), msg.offset(), msg.value())

        producer = Producer({**config, "acks": "all", "enable.idempotence": True, "linger.ms": 5,
                             "message.timeout.ms": int(WAIT_S * 1000)})
        leader = cluster.leader_of(TOPIC, 0)
        for i in range(TOTAL):
            producer.produce(TOPIC, f"record-{i}".encode(), partition=0, on_delivery=delivered)
            producer.poll(0)
            if i == TOTAL // 3:
                producer.flush(WAIT_S)
                leader.kill()
                cluster.wait_for_leader(TOPIC, 0, not_on=leader, timeout=WAIT_S)
            time.sleep(0.002)
        assert producer.flush(WAIT_S) == 0
        assert acks.errors == []
        assert acks.count() == TOTAL
        leader.start()
        cluster.wait_for_isr(TOPIC, 0, 3, timeout=WAIT_S)
        assert_every_acknowledged_record_kept(cluster, TOPIC, 1, acks, WAIT_S)
