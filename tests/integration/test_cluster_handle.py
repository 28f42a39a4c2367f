"""`minikafka.Cluster` as a test writes it: a controller and three broker processes, replication, a leader killed
and a follower frozen, the cluster command line and the fixture's marker."""
from __future__ import annotations

import os
import re
import selectors
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO

import pytest
from kafka import KafkaProducer
from kafka.protocol.metadata import MetadataRequest

import minikafka
from minikafka.cluster_handle import cluster_test_defaults
from tests.helpers import consume_values, kill_process_group, wait_until
from tests.raw_client import RawConnection

READY_TARGET_S = 1.5  # the target for a three-broker cluster from start to ready
FAILOVER_TARGET_S = 2.0  # kill -9 of a leader to a new leader accepting acks=all writes
LAG_TIME_S = int(cluster_test_defaults(3)["replica.lag.time.max.ms"]) / 1000
CLI_TIMEOUT_S = 60.0


def produce(bootstrap: str, topic: str, values: list[bytes], idempotent: bool = True) -> list[int]:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0, retry_backoff_ms=50,
                             request_timeout_ms=10000, enable_idempotence=idempotent)
    try:
        return [producer.send(topic, v, partition=0).get(timeout=20).offset for v in values]
    finally:
        producer.close()


def consume(bootstrap: str, topic: str, count: int) -> list[bytes]:
    return consume_values(bootstrap, topic, count)


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def metadata_broker_ids(bootstrap: str) -> list[int]:
    with RawConnection(bootstrap) as conn:
        response = conn.request(MetadataRequest[12](topics=[], allow_auto_topic_creation=False))
    return sorted(b.node_id for b in response.brokers)


@pytest.fixture
def cluster(tmp_path):
    with minikafka.Cluster(brokers=3, data_dir=tmp_path / "cluster") as running:
        yield running


def test_three_brokers_start_and_each_knows_the_others(tmp_path):
    started = time.monotonic()
    with minikafka.Cluster(brokers=3, data_dir=tmp_path / "cluster") as cluster:
        ready_s = time.monotonic() - started
        print(f"three-broker cluster ready in {ready_s:.3f} s (target {READY_TARGET_S} s)")
        assert [b.node_id for b in cluster.brokers] == [1, 2, 3]
        assert all(node.running and node.pid is not None for node in cluster.nodes)
        assert cluster.controller.node_id == 3000
        assert len({node.pid for node in cluster.nodes}) == len({node.port for node in cluster.nodes}) == 4
        assert cluster.bootstrap_servers == ",".join(b.bootstrap_servers for b in cluster.brokers)
        for broker in cluster.brokers:
            assert metadata_broker_ids(broker.bootstrap_servers) == [1, 2, 3]
        assert (cluster.data_dir / "controller-3000").is_dir() and cluster.controller.log_path.exists()
        pids = [node.pid for node in cluster.nodes if node.pid is not None]
    assert not any(process_alive(pid) for pid in pids)
    assert (tmp_path / "cluster" / "broker-2" / "meta.properties").exists()  # a given data dir is kept


def test_replicated_topic_state_and_leader(cluster):
    cluster.state.create_topic("orders", partitions=1, replication_factor=3)
    assert produce(cluster.bootstrap_servers, "orders", [b"a", b"b", b"c"]) == [0, 1, 2]
    assert consume(cluster.bootstrap_servers, "orders", 3) == [b"a", b"b", b"c"]
    (state,) = cluster.wait_for_replicas_caught_up("orders", timeout=10)
    assert sorted(state.replicas) == [1, 2, 3] and sorted(state.isr) == [1, 2, 3]
    assert state.high_watermark == 3 and state.log_end_offsets == {1: 3, 2: 3, 3: 3}
    assert state.leader in state.replicas and state.leader_epoch >= 0
    leader = cluster.leader_of("orders", 0)
    assert leader is cluster.broker(state.leader)
    assert cluster.state.partition("orders", 0) == state


def test_leader_killed_another_elected_fast_and_the_old_one_rejoins(cluster):
    cluster.state.create_topic("failover", partitions=1, replication_factor=3)
    assert produce(cluster.bootstrap_servers, "failover", [b"1", b"2"]) == [0, 1]
    cluster.wait_for_isr("failover", 0, 3, timeout=10)
    old = cluster.leader_of("failover", 0)
    old_epoch = cluster.state.partition("failover", 0).leader_epoch

    killed_at = time.monotonic()
    old.kill()
    new = cluster.wait_for_leader("failover", 0, not_on=old, timeout=10)
    elected_s = time.monotonic() - killed_at
    assert produce(cluster.bootstrap_servers, "failover", [b"3"]) == [2]
    accepting_s = time.monotonic() - killed_at
    print(f"leader {old.node_id} killed: broker {new.node_id} elected in {elected_s:.3f} s, "
          f"acks=all write acknowledged {accepting_s:.3f} s after the kill (target {FAILOVER_TARGET_S} s)")
    assert accepting_s < FAILOVER_TARGET_S
    after = cluster.state.partition("failover", 0)
    assert after.leader == new.node_id and after.leader_epoch > old_epoch
    assert old.node_id not in after.isr and after.log_end_offsets[old.node_id] is None
    assert not any(a.endswith(f":{old.port}") for a in cluster.bootstrap_servers.split(","))

    port = old.port
    old.start()
    assert old.port == port
    rejoined = cluster.wait_for_isr("failover", 0, 3, timeout=15)
    assert old.node_id in rejoined.isr
    (caught_up,) = cluster.wait_for_replicas_caught_up("failover", timeout=10)
    assert caught_up.log_end_offsets == {1: 3, 2: 3, 3: 3}
    assert consume(old.bootstrap_servers, "failover", 3) == [b"1", b"2", b"3"]


def test_paused_follower_leaves_the_isr_and_rejoins_after_resume(cluster):
    cluster.state.create_topic("frozen", partitions=1, replication_factor=3)
    produce(cluster.bootstrap_servers, "frozen", [b"before"])
    cluster.wait_for_isr("frozen", 0, 3, timeout=10)
    leader = cluster.leader_of("frozen", 0)
    follower = next(b for b in cluster.brokers if b is not leader)

    paused_at = time.monotonic()
    follower.pause()
    assert follower.paused and follower.running
    assert follower.bootstrap_servers not in cluster.bootstrap_servers.split(",")
    shrunk = cluster.wait_for_isr("frozen", 0, 2, timeout=10)
    left_s = time.monotonic() - paused_at
    print(f"paused follower {follower.node_id} left the ISR after {left_s:.3f} s "
          f"(replica.lag.time.max.ms {LAG_TIME_S * 1000:.0f})")
    assert follower.node_id not in shrunk.isr
    assert left_s < 1.5 * LAG_TIME_S + 0.5  # the ISR check runs every half lag time; polling and the controller
    assert produce(cluster.bootstrap_servers, "frozen", [b"while paused"]) == [1]

    follower.resume()
    assert not follower.paused
    rejoined = cluster.wait_for_isr("frozen", 0, 3, timeout=15)
    assert follower.node_id in rejoined.isr
    (state,) = cluster.wait_for_replicas_caught_up("frozen", timeout=10)
    assert state.log_end_offsets[follower.node_id] == 2


def test_controller_killed_brokers_serve_and_elections_resume_after_its_restart(cluster):
    cluster.state.create_topic("steady", partitions=1, replication_factor=3)
    cluster.wait_for_isr("steady", 0, 3, timeout=10)
    controller_port = cluster.controller.port
    cluster.controller.kill()
    # Not idempotent: a new producer id is a block from the controller (AllocateProducerIds), as in Kafka.
    assert produce(cluster.bootstrap_servers, "steady", [b"no controller"], idempotent=False) == [0]
    cluster.controller.start()
    assert cluster.controller.port == controller_port
    leader = cluster.leader_of("steady", 0)
    leader.kill()
    assert cluster.wait_for_leader("steady", 0, not_on=leader, timeout=10) is not leader
    assert produce(cluster.bootstrap_servers, "steady", [b"elected again"]) == [1]


def test_in_process_cluster_works_and_refuses_pause(tmp_path):
    with minikafka.Cluster(brokers=2, in_process=True, data_dir=tmp_path / "c") as cluster:
        assert cluster.controller.pid is None and all(b.pid is None for b in cluster.brokers)
        assert produce(cluster.bootstrap_servers, "t", [b"x"]) == [0]
        state = cluster.wait_for_isr("t", 0, 2, timeout=10)  # default.replication.factor is min(3, brokers)
        assert sorted(state.replicas) == [1, 2]
        with pytest.raises(RuntimeError, match="in-process"):
            cluster.broker(1).pause()
        with pytest.raises(RuntimeError, match="in-process"):
            cluster.controller.pause()


def test_config_reaches_every_node_and_cluster_properties_are_refused(tmp_path):
    with pytest.raises(ValueError, match="controller.quorum.bootstrap.servers"):
        minikafka.Cluster(brokers=2, config={"controller.quorum.bootstrap.servers": "127.0.0.1:1"})
    with pytest.raises(ValueError, match="process.roles"):
        minikafka.Cluster(brokers=2, controller_config={"process.roles": "broker"})
    cluster = minikafka.Cluster(brokers=2, data_dir=tmp_path, controller_port=19093, config={"num.partitions": 4},
                                controller_config={"broker.session.timeout.ms": 3000})
    try:
        assert cluster.controller.properties()["num.partitions"] == "4"
        assert cluster.controller.properties()["broker.session.timeout.ms"] == "3000"
        assert cluster.controller.properties()["process.roles"] == "controller"
        broker = cluster.broker(2).properties()
        assert broker["num.partitions"] == "4" and broker["broker.session.timeout.ms"] == "1000"
        assert broker["process.roles"] == "broker" and broker["default.replication.factor"] == "2"
    finally:
        cluster.close()


@pytest.mark.minikafka(brokers=3, config={"num.partitions": 2})
def test_fixture_takes_the_broker_count_from_the_marker(minikafka_cluster):
    assert [b.node_id for b in minikafka_cluster.brokers] == [1, 2, 3]
    assert metadata_broker_ids(minikafka_cluster.bootstrap_servers.split(",")[0]) == [1, 2, 3]
    produce(minikafka_cluster.bootstrap_servers, "marked", [b"x"])
    assert [p.partition for p in minikafka_cluster.state.partitions("marked")] == [0, 1]


def read_lines(proc: subprocess.Popen, count: int, timeout_s: float) -> list[str]:
    """The first `count` lines the process prints, waiting at most `timeout_s`."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout_s
    buffer = b""
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        while buffer.count(b"\n") < count:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"printed only {buffer!r} in {timeout_s} s"
            if selector.select(remaining):
                chunk = os.read(proc.stdout.fileno(), 4096)
                assert chunk, f"exited with {proc.wait(10)} after printing {buffer!r}"
                buffer += chunk
    return buffer.decode().splitlines()[:count]


READY_LINE = re.compile(r"minikafka listening on (127\.0\.0\.1:\d+) \(broker (\d+), pid (\d+)\)")
CONTROLLER_LINE = re.compile(r"minikafka controller listening on (127\.0\.0\.1:\d+) \(controller 3000, pid (\d+)\)")
METRICS_LINE = re.compile(r"minikafka metrics on (http://127\.0\.0\.1:\d+/metrics) \((broker \d+|controller 3000)\)")


@contextmanager
def cluster_command(*args: str, env: dict[str, str] | None = None) -> Iterator[tuple[subprocess.Popen, list[int]]]:
    """`minikafka cluster ARGS` for the block, with a list for the pids of the nodes it prints; asked to stop
    (SIGTERM) if still running at the block's end, then killed with every node listed (its nodes lead process
    groups of their own)."""
    proc = subprocess.Popen([sys.executable, "-m", "minikafka", "cluster", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True, env=env)
    node_pids: list[int] = []
    try:
        yield proc, node_pids
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.communicate(timeout=CLI_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                kill_process_group(proc, CLI_TIMEOUT_S)
        for pid in node_pids:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def read_until(pipe: IO[bytes], text: bytes, timeout_s: float) -> bytes:
    """What a process writes to `pipe` until `text` appears, read within `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    buffer = b""
    with selectors.DefaultSelector() as selector:
        selector.register(pipe, selectors.EVENT_READ)
        while text not in buffer:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"no {text!r} in {timeout_s} s: {buffer!r}"
            if selector.select(remaining):
                chunk = os.read(pipe.fileno(), 4096)
                assert chunk, f"closed without {text!r}: {buffer!r}"
                buffer += chunk
    return buffer


def test_cluster_command_prints_each_node_and_stops_on_sigterm(tmp_path):
    args = ("--brokers", "3", "--data-dir", str(tmp_path / "data"), "-o", "num.partitions=2")
    with cluster_command(*args) as (proc, node_pids):
        lines = read_lines(proc, 4, CLI_TIMEOUT_S)
        controller = CONTROLLER_LINE.fullmatch(lines[0])
        ready = [m for m in map(READY_LINE.fullmatch, lines[1:]) if m]
        assert controller and len(ready) == 3, lines
        node_pids += [int(controller.group(2)), *(int(m.group(3)) for m in ready)]
        assert sorted(int(m.group(2)) for m in ready) == [1, 2, 3]
        assert all(process_alive(pid) for pid in node_pids)
        brokers = [m.group(1) for m in ready]  # as a script reads them: the address after the prefix
        # Each broker prints its line once it is ready; the first may learn of the others' unfencing a moment later.
        wait_until(lambda: metadata_broker_ids(brokers[0]) == [1, 2, 3], timeout=20,
                   message="the first broker's Metadata to list all three brokers")
        assert produce(",".join(brokers), "cli", [b"x"]) == [0]
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=CLI_TIMEOUT_S)
        assert proc.returncode == 0, err
        progress = err.decode().splitlines()
        assert "minikafka: controller 3000 ready (1 of 4); waiting for broker 1, broker 2, broker 3" in progress
        assert sum(line.endswith("ready (4 of 4); all nodes ready") for line in progress) == 1
        assert progress[-1] == "minikafka: stopping the cluster"
        assert (tmp_path / "data" / "broker-1" / "meta.properties").exists()  # a given data dir is kept
        assert "shutting down" in (tmp_path / "data" / "broker-3.log").read_text()


def test_cluster_command_prints_metrics_urls_and_tells_a_kill_by_its_signal(tmp_path):
    args = ("--brokers", "2", "--metrics-port", "0", "--data-dir", str(tmp_path / "data"))
    with cluster_command(*args) as (proc, node_pids):
        lines = read_lines(proc, 6, CLI_TIMEOUT_S)  # each node's ready line, then its metrics URL
        ready = {m.group(2): int(m.group(3)) for m in map(READY_LINE.fullmatch, lines) if m}
        controller = next(m for m in map(CONTROLLER_LINE.fullmatch, lines) if m)
        node_pids += [int(controller.group(2)), *ready.values()]
        urls = {m.group(2): m.group(1) for m in map(METRICS_LINE.fullmatch, lines) if m}
        assert sorted(urls) == ["broker 1", "broker 2", "controller 3000"]
        for url in urls.values():
            with urllib.request.urlopen(url, timeout=CLI_TIMEOUT_S) as scraped:
                assert b"kafka_controller_kafkacontroller_activecontrollercount" in scraped.read()

        os.kill(ready["2"], signal.SIGKILL)
        assert proc.stderr is not None
        told = read_until(proc.stderr, b"was killed by SIGKILL", CLI_TIMEOUT_S).decode().splitlines()
        log = tmp_path / "data" / "broker-2.log"
        assert f"minikafka: broker 2 (pid {ready['2']}) was killed by SIGKILL; log {log}" in told
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=CLI_TIMEOUT_S)
        assert proc.returncode == 0


@pytest.mark.parametrize("option, node, listener", [
    ("--ports", "broker 2", "the Kafka listener PLAINTEXT"),
    ("--controller-port", "controller 3000", "the controller listener CONTROLLER"),
    ("--metrics-port", "controller 3000", "the metrics endpoint (metrics.port)"),
])
def test_cluster_command_names_a_port_in_use_and_keeps_the_log(tmp_path, option, node, listener):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        # Metrics ports are numbered from the first broker's, the controller's after the brokers': the taken port is
        # the controller's, which starts first, so no other node's port (which anything may hold) is tried before.
        value = {"--ports": f"0,{port}", "--controller-port": str(port), "--metrics-port": str(port - 2)}[option]
        env = {**os.environ, "TMPDIR": str(tmp_path)}  # the cluster's temporary dir, kept on failure
        with cluster_command("--brokers", "2", option, value, env=env) as (proc, _node_pids):
            _, err = proc.communicate(timeout=CLI_TIMEOUT_S)
    assert proc.returncode == 1, err
    failed = [line for line in err.decode().splitlines() if "cannot start the cluster" in line]
    assert len(failed) == 1, err
    prefix = f"minikafka: cannot start the cluster: {node}: {listener} cannot bind 127.0.0.1:{port}: "
    assert failed[0].startswith(prefix), failed[0]
    log = Path(failed[0].rsplit("(log ", 1)[1].removesuffix(")"))
    assert log.is_file() and log.is_relative_to(tmp_path)  # kept for a look, with the data dir
    assert f"kept {log.parent} with every node's data and log" in err.decode()


def test_cluster_command_reports_nodes_still_waiting(tmp_path):
    with socket.socket() as silent:  # bound, never listening: a ZooKeeper that refuses every connection
        silent.bind(("127.0.0.1", 0))
        connect = f"127.0.0.1:{silent.getsockname()[1]}/minikafka-waiting"
        args = ("--brokers", "1", "--zookeeper-connect", connect, "--start-timeout", "6",
                "-o", "zookeeper.connection.timeout.ms=60000", "--data-dir", str(tmp_path))
        with cluster_command(*args) as (proc, _node_pids):
            _, err = proc.communicate(timeout=CLI_TIMEOUT_S)
    assert proc.returncode == 1
    text = err.decode()
    waiting = r"^minikafka: broker 1 \(pid \d+\) not ready after \d+ s; its log says: "
    assert re.search(waiting, text, re.MULTILINE), text
    assert "cannot start the cluster: broker 1 did not start within 6 s" in text
    assert (tmp_path / "broker-1.log").is_file()


def test_cluster_command_fails_clearly_when_a_node_cannot_start(tmp_path):
    result = subprocess.run([sys.executable, "-m", "minikafka", "cluster", "--brokers", "2",
                             "--data-dir", str(tmp_path), "-o", "num.partitions=lots"],
                            capture_output=True, text=True, timeout=CLI_TIMEOUT_S)
    assert result.returncode == 1
    assert "cannot start the cluster" in result.stderr and "num.partitions" in result.stderr
    assert "listening" not in result.stdout
