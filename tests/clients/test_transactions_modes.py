"""Transactions on one broker in both controller modes: a KRaft broker with its controller process beside it, and a
ZooKeeper-mode broker (which is its own controller). confluent-kafka's, kafka-python's and aiokafka's transactional
producers each commit and abort through their own transaction API, and each client's consumer reads the topic at
both isolation levels: the committed records once each at read_committed, the aborted ones too at read_uncommitted.
"""
from __future__ import annotations

import pytest

from tests.cluster.cluster_modes import CLUSTER_MODES
from tests.helpers import TRANSACTIONAL_CLIENTS, assert_read_at_both_isolation_levels, run_transactions

TOPIC = "tx-modes"
PARTITIONS = 3
CONSUME_S = 30.0


@pytest.mark.parametrize("zookeeper", CLUSTER_MODES)
def test_each_clients_transactions_on_one_broker_in_either_controller_mode(minikafka_cluster, zookeeper):
    assert minikafka_cluster.zookeeper_mode == zookeeper and len(minikafka_cluster.brokers) == 1
    minikafka_cluster.state.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=1)
    committed: list[bytes] = []
    aborted: list[bytes] = []
    for client in TRANSACTIONAL_CLIENTS:
        first = [b"%s-committed-%d" % (client.encode(), i) for i in range(6)]
        dropped = [b"%s-aborted-%d" % (client.encode(), i) for i in range(4)]
        second = [b"%s-committed-after-abort-%d" % (client.encode(), i) for i in range(3)]
        run_transactions(client, minikafka_cluster.bootstrap_servers, f"{client}-tx", TOPIC, PARTITIONS,
                         [(first, True), (dropped, False), (second, True)])
        committed += first + second
        aborted += dropped
    assert_read_at_both_isolation_levels(minikafka_cluster.bootstrap_servers, TOPIC, PARTITIONS, committed, aborted,
                                         CONSUME_S)
