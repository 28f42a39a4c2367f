"""ZooKeeper mode as a user starts it: `minikafka.Cluster(zookeeper=True)` and `zookeeper_connect=`, the pytest
marker, and `minikafka cluster --zookeeper` (its lines, its stop on SIGTERM, its error where ZooKeeper is
missing)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

import minikafka
from minikafka.metadata_client import cluster_view
from minikafka.zookeeper_state import ZooKeeperState
from tests.helpers import kill_process_group
from tests.integration.test_cluster_handle import CLI_TIMEOUT_S, READY_LINE, produce, read_lines

WAIT_S = 30.0


def test_zookeeper_mode_arguments_are_checked(tmp_path):
    with pytest.raises(ValueError, match="zookeeper.connect"):
        minikafka.Cluster(brokers=2, config={"zookeeper.connect": "127.0.0.1:2181"})
    with pytest.raises(ValueError, match="give one of them"):
        minikafka.Cluster(brokers=2, zookeeper=True, zookeeper_connect="127.0.0.1:2181")
    with pytest.raises(ValueError, match="no controller process"):
        minikafka.Cluster(brokers=2, zookeeper_connect="127.0.0.1:2181",
                          controller_config={"broker.session.timeout.ms": 3000})
    cluster = minikafka.Cluster(brokers=2, zookeeper_connect="127.0.0.1:2181/kafka", data_dir=tmp_path,
                                config={"num.partitions": 4})
    try:
        assert cluster.zookeeper is None and cluster.nodes == cluster.brokers
        assert cluster.zookeeper_connect == "127.0.0.1:2181/kafka"
        broker = cluster.broker(2).properties()
        assert "process.roles" not in broker and "controller.quorum.bootstrap.servers" not in broker
        assert broker["num.partitions"] == "4" and broker["zookeeper.session.timeout.ms"] == "2000"
    finally:
        cluster.close()


def test_cluster_on_an_existing_ensemble_under_a_chroot(tmp_path, zk_connect):
    with minikafka.Cluster(brokers=2, zookeeper_connect=zk_connect, data_dir=tmp_path / "cluster") as cluster:
        controller = cluster.wait_for_controller(timeout=WAIT_S)
        assert cluster.controller == controller
        assert cluster.zookeeper_state.broker_ids() == [1, 2]
        assert produce(cluster.bootstrap_servers, "chrooted", [b"a", b"b"]) == [0, 1]
        assert [p.partition for p in cluster.state.partitions("chrooted")] == [0]
    # Everything the cluster wrote is under its chroot; the root of the shared server holds no broker.
    root = ZooKeeperState(zk_connect.split("/", 1)[0])
    try:
        assert root.broker_ids() == [] and root.controller_id() is None
    finally:
        root.close()


@pytest.mark.minikafka(brokers=3, zookeeper=True)
def test_fixture_marker_starts_a_zookeeper_mode_cluster(minikafka_cluster):
    assert minikafka_cluster.zookeeper is not None and minikafka_cluster.zookeeper.running
    controller = minikafka_cluster.wait_for_controller(timeout=WAIT_S)
    assert cluster_view(minikafka_cluster.brokers[0].bootstrap_servers).controller_id == controller.node_id


@pytest.mark.minikafka(brokers=3, zookeeper=True)
def test_cut_links_and_preferred_elections_in_zookeeper_mode(minikafka_cluster):
    cluster = minikafka_cluster
    cluster.state.create_topic("t", partitions=1, replication_factor=3)
    state = cluster.wait_for_isr("t", 0, 3, timeout=WAIT_S)
    preferred = cluster.broker(state.replicas[0])
    assert state.leader == preferred.node_id
    # A follower cut off from its leader leaves the ISR (the leader's lag check), and returns once healed. Not the
    # controller: cut off from it, the leader could not have the ISR change written.
    controller = cluster.wait_for_controller(timeout=WAIT_S)
    follower = next(cluster.broker(r) for r in state.replicas[1:] if r != controller.node_id)
    with cluster.cut_link(follower, preferred):
        # Not idempotent: the leader may be the controller, and a producer id asked of the follower would wait
        # for a controller it cannot reach; this is about the ISR.
        produce(cluster.bootstrap_servers, "t", [b"while-cut"], idempotent=False)
        assert follower.node_id not in cluster.wait_for_isr("t", 0, 2, timeout=WAIT_S).isr
    cluster.wait_for_isr("t", 0, 3, timeout=WAIT_S)
    # Leadership away from the preferred replica, then back by a preferred-leader election.
    preferred.kill()
    cluster.wait_for_leader("t", 0, not_on=preferred, timeout=WAIT_S)
    preferred.start()
    cluster.wait_for_isr("t", 0, 3, timeout=WAIT_S)
    assert cluster.elect_preferred_leaders("t", 0, timeout=WAIT_S) == [("t", 0)]
    assert cluster.leader_of("t", 0) == preferred


def test_cluster_command_with_zookeeper_prints_each_server_and_stops_on_sigterm(zookeeper_installed, tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "minikafka", "cluster", "--brokers", "3", "--zookeeper",
                             "--data-dir", str(tmp_path / "data")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        lines = read_lines(proc, 4, CLI_TIMEOUT_S)
        assert lines[0].startswith("minikafka zookeeper listening on 127.0.0.1:")
        ready = [READY_LINE.fullmatch(line) for line in lines[1:]]
        assert all(ready), lines
        brokers = [m.group(1) for m in ready if m]
        view = cluster_view(brokers[0])
        assert view.broker_ids == [1, 2, 3] and view.controller_id in (1, 2, 3)
        assert produce(",".join(brokers), "cli", [b"x"]) == [0]
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=CLI_TIMEOUT_S)
        assert proc.returncode == 0, err
        assert b"stopping the cluster" in err
        assert (tmp_path / "data" / "zookeeper" / "zookeeper.log").exists()
        assert "shutting down" in (tmp_path / "data" / "broker-3.log").read_text()
    finally:
        kill_process_group(proc, CLI_TIMEOUT_S)


def test_cluster_command_names_the_package_when_zookeeper_cannot_run(tmp_path):
    # No Java to be found: the same answer as a machine without the package, which brings one.
    env = {k: v for k, v in os.environ.items() if k not in ("JAVA_HOME", "PATH")}
    env["PATH"] = str(tmp_path)
    result = subprocess.run([sys.executable, "-m", "minikafka", "cluster", "--brokers", "3", "--zookeeper",
                             "--data-dir", str(tmp_path / "data")],
                            capture_output=True, text=True, timeout=CLI_TIMEOUT_S, env=env)
    assert result.returncode == 1
    assert result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "Debian/Ubuntu package `zookeeper`" in result.stderr
