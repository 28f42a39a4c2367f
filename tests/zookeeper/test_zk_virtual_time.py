"""A ZooKeeper-mode cluster on one manual clock: each broker's clock moves with `cluster.clock.advance`, the
controller's timers being those of the broker that holds the controller role; ZooKeeper's sessions stay on real
time, as broker sessions with a KRaft controller do."""
from __future__ import annotations

from tests.cluster.test_virtual_time_cluster import advance_past_the_lag_time


def test_advancing_a_zookeeper_mode_cluster_drops_only_the_lagging_follower(tmp_path):
    advance_past_the_lag_time(tmp_path, zookeeper=True)
