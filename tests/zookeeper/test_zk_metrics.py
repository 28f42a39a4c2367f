"""Kafka's metrics in ZooKeeper mode: the elected broker, and only it, counts as the active controller
(ActiveControllerCount 1), and a controller move carries the count to the new one; the Partition and Log gauges
of each replica come from the LeaderAndIsr states the controller sends."""
from __future__ import annotations

import minikafka
from tests.helpers import wait_until

ACTIVE_CONTROLLER = "kafka_controller_kafkacontroller_activecontrollercount"
OFFLINE_PARTITIONS = "kafka_controller_kafkacontroller_offlinepartitionscount"
REPLICAS_COUNT = 'kafka_cluster_partition_replicascount{partition="0",topic="z"}'
IN_SYNC_REPLICAS_COUNT = 'kafka_cluster_partition_insyncreplicascount{partition="0",topic="z"}'
LOG_END_OFFSET = 'kafka_log_log_logendoffset{partition="0",topic="z"}'


def active_controllers(cluster: minikafka.Cluster) -> dict[int, float]:
    return {node: m[ACTIVE_CONTROLLER] for node, m in cluster.state.metrics().items()}


def test_active_controller_count_is_one_on_the_elected_broker_only(zookeeper_installed, tmp_path):
    with minikafka.Cluster(brokers=2, zookeeper=True, data_dir=tmp_path / "cluster") as cluster:
        elected = cluster.wait_for_controller()
        expected = {b.node_id: (1 if b is elected else 0) for b in cluster.brokers}
        wait_until(lambda: active_controllers(cluster) == expected, message=f"the counts {expected}")
        assert cluster.state.metrics()[elected.node_id][OFFLINE_PARTITIONS] == 0
        cluster.state.create_topic("z", partitions=1, replication_factor=2)
        leader = cluster.wait_for_leader("z", 0).node_id
        cluster.wait_for_isr("z", 0, 2)
        metrics = cluster.state.metrics()
        assert {node: (m[REPLICAS_COUNT], m[IN_SYNC_REPLICAS_COUNT]) for node, m in metrics.items()} == {
            node: (2, 2) if node == leader else (0, 0) for node in metrics}  # as Kafka: non-zero where led
        assert all(m[LOG_END_OFFSET] == 0 for m in metrics.values())
        elected.stop()
        successor = cluster.wait_for_controller(not_on=elected)
        wait_until(lambda: active_controllers(cluster) == {successor.node_id: 1},
                   message=f"broker {successor.node_id} alone to count as the active controller")
