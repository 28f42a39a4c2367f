"""A three-broker cluster with no plaintext listener anywhere, in both controller modes: clients reach the brokers
over SASL_SSL (SCRAM-SHA-512 over TLS), the brokers reach each other (replication, controller requests, transaction
markers) and the KRaft controller over SASL_SSL as the admin (PLAIN). An idempotent acks=all producer keeps writing
while the leader of its partition is killed with SIGKILL, and afterwards every acknowledged record is stored exactly
once at its acknowledged offset, on replicas whose logs are identical byte for byte. A broker whose own login has a
wrong password cannot join: it says so in its log, and never gets a place in the cluster."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

import minikafka
from tests.cluster.cluster_modes import CLUSTER_MODES
from tests.cluster.replication_checks import Acknowledgements, assert_every_acknowledged_record_kept

TOPIC = "payments"
TOTAL = 600
WAIT_S = 60.0
REFUSED = "SASL/PLAIN: Authentication failed: Invalid username or password"


def assert_no_plaintext_listener(cluster: minikafka.Cluster, config: dict) -> None:
    """Every node's listeners and their security protocols, as the nodes are configured and as the brokers report
    their own configuration (DescribeConfigs): SASL_SSL only, the inter-broker listener among them."""
    for node in cluster.nodes:
        props = node.properties()
        protocols = {item.split(":")[1] for item in props["listener.security.protocol.map"].split(",")}
        assert protocols == {"SASL_SSL"}, (node, props["listener.security.protocol.map"])
        assert "PLAINTEXT" not in props["listeners"] and props["listeners"].count("://") == 1, props["listeners"]
    admin = AdminClient(config)
    for broker in cluster.brokers:  # librdkafka asks for one broker's configs at a time
        resource = ConfigResource(ConfigResource.Type.BROKER, str(broker.node_id))
        entries = admin.describe_configs([resource])[resource].result(timeout=WAIT_S)
        described = {name: entry.value for name, entry in entries.items()}
        assert described["listeners"] == f"SASL_SSL://{broker.bootstrap_servers}"
        assert described["inter.broker.listener.name"] == "SASL_SSL"
        assert "PLAINTEXT" not in described["listener.security.protocol.map"].replace("SASL_", "")


@pytest.mark.parametrize("zookeeper", CLUSTER_MODES)
def test_sasl_ssl_cluster_keeps_every_acknowledged_record_through_a_leader_kill(zookeeper, tmp_path):
    with minikafka.Cluster(brokers=3, zookeeper=zookeeper, data_dir=tmp_path, security="SASL_SSL",
                           users={"alice": "alice-secret"}) as cluster:
        cluster.state.create_topic(TOPIC, partitions=1, replication_factor=3, config={"min.insync.replicas": 2})
        cluster.wait_for_isr(TOPIC, 0, 3)
        assert_no_plaintext_listener(cluster, cluster.client_config())
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
        # The handle's own cluster-wide requests go over the secured listeners too.
        assert cluster.elect_preferred_leaders(TOPIC, timeout=WAIT_S) in ([(TOPIC, 0)], [])  # [] if it leads
        state = cluster.state.partition(TOPIC, 0)
        assert state.leader == state.replicas[0]
        if zookeeper:
            assert set(cluster.controller_ids().values()) == {cluster.wait_for_controller(timeout=WAIT_S).node_id}


@pytest.mark.parametrize("zookeeper", CLUSTER_MODES)
def test_link_faults_reach_both_ends_over_the_secured_listeners(zookeeper, tmp_path):
    """A link cut both ways is set at its far end through that node's control API, which a secured node serves
    only after TLS and SASL: between brokers, and (KRaft) from the controller's end to a broker."""
    with minikafka.Cluster(brokers=3, zookeeper=zookeeper, data_dir=tmp_path, security="SASL_SSL") as cluster:
        cluster.state.create_topic(TOPIC, partitions=1, replication_factor=3)
        cluster.wait_for_isr(TOPIC, 0, 3)
        leader = cluster.leader_of(TOPIC, 0)
        # Not ZooKeeper mode's controller: the leader's ISR change must reach it.
        follower = next(b for b in cluster.brokers if b is not leader and b is not cluster.controller)
        producer = Producer({**cluster.client_config(), "acks": "1"})
        with cluster.cut_link(follower, leader):
            assert [f["to"] for f in leader.faults.list() if f["kind"] == "link"] == [follower.node_id]
            producer.produce(TOPIC, b"while-cut", partition=0)
            assert producer.flush(WAIT_S) == 0
            cluster.wait_for_isr(TOPIC, 0, 2, timeout=WAIT_S)  # the follower cannot fetch it
        assert [f for f in leader.faults.list() if f["kind"] == "link"] == []
        cluster.wait_for_isr(TOPIC, 0, 3, timeout=WAIT_S)
        if not zookeeper:
            with cluster.cut_link(cluster.controller, follower):
                assert [f["to"] for f in follower.faults.list() if f["kind"] == "link"] == [cluster.controller.node_id]
            assert [f for f in follower.faults.list() if f["kind"] == "link"] == []


def start_with_wrong_password(cluster: minikafka.Cluster, directory: Path) -> tuple[subprocess.Popen, Path]:
    """Broker 4: a running broker's configuration with its own node id, port and data dir, and the password of
    its own login (to the other brokers and the controller) changed; its listener's users are the cluster's."""
    props = cluster.brokers[0].properties()
    password = cluster.security.users["admin"]
    for key in [k for k in props if k.endswith("plain.sasl.jaas.config")]:
        assert f'password="{password}"' in props[key]
        props[key] = props[key].replace(f'password="{password}"', 'password="wrong-password"')
    directory.mkdir()
    props.update({"node.id": "4", "listeners": "SASL_SSL://127.0.0.1:0", "log.dirs": str(directory / "data"),
                  "initial.broker.registration.timeout.ms": "5000"})
    log = directory / "broker-4.log"
    with log.open("wb") as output:
        process = subprocess.Popen([sys.executable, "-m", "minikafka", "serve",
                                    *[f"--override={key}={value}" for key, value in props.items()]],
                                   stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT)
    return process, log


def wait_for_line(log: Path, text: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while text not in log.read_text(errors="replace"):
        assert time.monotonic() < deadline, f"no {text!r} in {log} within {timeout} s:\n{log.read_text()}"
        time.sleep(0.1)


@pytest.mark.parametrize("zookeeper", CLUSTER_MODES)
def test_a_broker_with_a_wrong_inter_broker_password_cannot_join(zookeeper, tmp_path):
    with minikafka.Cluster(brokers=2, zookeeper=zookeeper, data_dir=tmp_path / "cluster",
                           security="SASL_SSL") as cluster:
        config = cluster.client_config()
        process, log = start_with_wrong_password(cluster, tmp_path / "broker-4")
        try:
            if zookeeper:
                # Registered in ZooKeeper and told the metadata by the controller, whose login is right; but as a
                # follower it cannot fetch: it never enters the ISR.
                wait_for_line(log, "minikafka listening on", WAIT_S)
                admin = AdminClient(config)
                admin.create_topics([NewTopic(TOPIC, 1, replica_assignment=[[1, 4]])])[TOPIC].result(timeout=WAIT_S)
                wait_for_line(log, f"failed: {REFUSED}", WAIT_S)
                time.sleep(2)  # several fetch attempts, with their backoff
                assert cluster.state.partition(TOPIC, 0).isr == [1]
            else:
                # The controller refuses its registration: the broker gives up when
                # initial.broker.registration.timeout.ms has passed.
                assert process.wait(timeout=WAIT_S) != 0
                assert f"authentication to node -1 at {cluster.controller.address} failed: {REFUSED}" in \
                    log.read_text()
                assert sorted(AdminClient(config).list_topics(timeout=WAIT_S).brokers) == [1, 2]
        finally:
            process.kill()
            process.wait(timeout=WAIT_S)
        text = log.read_text()
        assert text.count(f"failed: {REFUSED}") == 1, text  # one line for the run of failures, not one per retry
