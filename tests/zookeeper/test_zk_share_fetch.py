"""Share groups' data path in ZooKeeper mode: on three brokers whose controller is elected through ZooKeeper, a kill
-9 of a partition's leader keeps what a share group acknowledged done and what it released available."""
from __future__ import annotations

import minikafka
from tests.clients.test_share_fetch import FAILOVER_CONFIG, assert_a_leader_kill_keeps_share_state


def test_share_state_survives_a_leader_kill_9_in_zookeeper_mode(zookeeper_installed, tmp_path) -> None:
    with minikafka.Cluster(brokers=3, zookeeper=True, data_dir=tmp_path / "cluster",
                           config=FAILOVER_CONFIG) as cluster:
        assert_a_leader_kill_keeps_share_state(cluster)
