"""Nodes by role: a controller-only node, and broker-only nodes that find it by controller.quorum.voters.

In process (one trio loop, each node with its own data dir): brokers on port 0 register with the controller, every
broker's Metadata and DescribeCluster list every broker, topics created through either broker appear on both, and
config changes are forwarded to the controller. As processes (`python -m minikafka serve`): the controller's and
brokers' readiness lines, a real client creating a topic through one broker and seeing it through the other, and a
broker that finds no controller failing to start with a clear message within its registration timeout.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.protocol.admin.cluster import DescribeClusterRequest
from kafka.protocol.admin.configs import DescribeConfigsRequest, IncrementalAlterConfigsRequest
from kafka.protocol.admin.topics import CreateTopicsRequest
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.metadata.metadata import MetadataRequest

from minikafka.broker.kafka_node import KafkaNode
from minikafka.broker.network.network_client import NetworkClient, NetworkClientConfig
from minikafka.config import BrokerConfig, ConfigError
from tests.helpers import held_free_port, wait_until

CONTROLLER_ID = 3000
TEST_TIMEOUT_S = 60
FAST = NetworkClientConfig(request_timeout_ms=10_000)
TOPIC_RESOURCE = 2
SET = 0


# ---- configuration ---------------------------------------------------------------------------------------------

def _config(tmp_path: Path, **props: object) -> BrokerConfig:
    return BrokerConfig({"log.dirs": str(tmp_path), **{k.replace("_", "."): str(v) for k, v in props.items()}})


def test_roles_are_checked_as_kafka_checks_them(tmp_path: Path) -> None:
    voters = f"{CONTROLLER_ID}@127.0.0.1:9093"
    with pytest.raises(ConfigError, match="node.id"):
        _config(tmp_path, process_roles="broker", controller_quorum_voters=voters)
    with pytest.raises(ConfigError, match="controller.listener.names"):
        _config(tmp_path, process_roles="controller", node_id=CONTROLLER_ID, listeners="PLAINTEXT://127.0.0.1:0")
    with pytest.raises(ConfigError, match="controller.quorum.voters or controller.quorum.bootstrap.servers"):
        _config(tmp_path, process_roles="broker", node_id=1, listeners="PLAINTEXT://127.0.0.1:0")
    with pytest.raises(ConfigError, match="must not hold a controller listener"):
        _config(tmp_path, process_roles="broker", node_id=1, controller_quorum_voters=voters,
                listeners="PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0")
    with pytest.raises(ConfigError, match="may only hold the controller listeners"):
        _config(tmp_path, process_roles="controller", node_id=CONTROLLER_ID,
                listeners="PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0")
    with pytest.raises(ConfigError, match="must be one of the voters"):
        _config(tmp_path, process_roles="controller", node_id=7, controller_quorum_voters=voters,
                listeners="CONTROLLER://127.0.0.1:0")
    with pytest.raises(ConfigError, match="Unknown process role"):
        _config(tmp_path, process_roles="broker,zookeeper", node_id=1, controller_quorum_voters=voters)
    with pytest.raises(ConfigError, match="controller.quorum.voters"):
        _config(tmp_path, process_roles="broker", node_id=1, controller_quorum_voters="127.0.0.1:9093")
    with pytest.raises(ConfigError, match="inter.broker.listener.name"):
        _config(tmp_path, process_roles="broker", node_id=1, controller_quorum_voters=voters,
                listeners="CLIENTS://127.0.0.1:0")
    broker = _config(tmp_path, process_roles="broker", node_id=1,
                     controller_quorum_bootstrap_servers="127.0.0.1:9093")
    assert broker.process_roles == {"broker"} and [(a.host, a.port) for a in broker.controller_addresses] == [
        ("127.0.0.1", 9093)]
    assert _config(tmp_path).process_roles == {"broker", "controller"}


# ---- in process ------------------------------------------------------------------------------------------------

def _controller_config(tmp_path: Path) -> BrokerConfig:
    return _config(tmp_path / "controller", process_roles="controller", node_id=CONTROLLER_ID,
                   listeners="CONTROLLER://127.0.0.1:0")


def _broker_config(tmp_path: Path, node_id: int, controller: KafkaNode, **props: object) -> BrokerConfig:
    address = controller.controller_address
    assert address is not None
    return _config(tmp_path / f"broker-{node_id}", process_roles="broker", node_id=node_id,
                   listeners="PLAINTEXT://127.0.0.1:0",
                   controller_quorum_voters=f"{CONTROLLER_ID}@{address[0]}:{address[1]}", **props)


async def _ask(node: KafkaNode, request: ApiMessage, version: int) -> ApiMessage:
    assert node.broker is not None
    host, port = node.broker.bound_addresses[0]
    async with NetworkClient.open(node.config.node_id, host, port, "test-node-roles", FAST) as client:
        return await client.send(request, version)


async def _metadata(node: KafkaNode, topics: list[str] | None = None) -> ApiMessage:
    wanted = None if topics is None else [MetadataRequest[12].MetadataRequestTopic(name=t) for t in topics]
    return await _ask(node, MetadataRequest[12](topics=wanted, allow_auto_topic_creation=False), 12)


async def _caught_up(*nodes: KafkaNode) -> None:
    """Until each broker has replayed what the controller has committed now."""
    for node in nodes:
        assert node.broker is not None and await node.broker.forwarding.catch_up()


async def _create_topic(node: KafkaNode, name: str, partitions: int, replication_factor: int) -> ApiMessage:
    R = CreateTopicsRequest[7]
    topic = R.CreatableTopic(name=name, num_partitions=partitions, replication_factor=replication_factor,
                             assignments=[], configs=[])
    return await _ask(node, R(topics=[topic], timeout_ms=10_000, validate_only=False), 7)


async def test_brokers_register_with_a_controller_only_node_and_share_the_metadata(tmp_path: Path) -> None:
    with trio.fail_after(TEST_TIMEOUT_S):
        async with trio.open_nursery() as nursery:
            controller: KafkaNode = await nursery.start(KafkaNode(_controller_config(tmp_path)).run)
            assert controller.broker is None and controller.controller_address is not None

            first: KafkaNode = await nursery.start(KafkaNode(_broker_config(tmp_path, 1, controller)).run)
            assert first.controller is None
            alone = await _metadata(first)
            assert [b.node_id for b in alone.brokers] == [1]
            assert alone.controller_id == 1  # clients are given a live broker, never the controller itself
            assert alone.brokers[0].port == first.broker.bound_addresses[0][1] != 0

            second: KafkaNode = await nursery.start(KafkaNode(_broker_config(tmp_path, 2, controller)).run)
            await _caught_up(first, second)
            for node in (first, second):
                metadata = await _metadata(node)
                assert sorted((b.node_id, b.port) for b in metadata.brokers) == sorted(
                    (n.config.node_id, n.broker.bound_addresses[0][1]) for n in (first, second))
                assert metadata.controller_id in (1, 2)
                assert len({b.cluster_id for b in [metadata]} | {alone.cluster_id}) == 1
                cluster = await _ask(node, DescribeClusterRequest[1](include_cluster_authorized_operations=False,
                                                                     endpoint_type=1), 1)
                assert cluster.error_code == 0 and sorted(b.broker_id for b in cluster.brokers) == [1, 2]

            created = await _create_topic(first, "through-first", 2, 2)
            assert [t.error_code for t in created.topics] == [0]
            created = await _create_topic(second, "through-second", 3, 1)
            assert [t.error_code for t in created.topics] == [0]
            await _caught_up(first, second)
            for node in (first, second):
                metadata = await _metadata(node, ["through-first", "through-second"])
                by_name = {t.name: t for t in metadata.topics}
                assert [t.error_code for t in metadata.topics] == [0, 0]
                assert len(by_name["through-first"].partitions) == 2
                assert all(sorted(p.replica_nodes) == [1, 2] for p in by_name["through-first"].partitions)
                assert len(by_name["through-second"].partitions) == 3
                assert {p.leader_id for t in metadata.topics for p in t.partitions} <= {1, 2}

            duplicate = await _create_topic(second, "through-first", 1, 1)
            assert [t.error_code for t in duplicate.topics] == [36]  # TOPIC_ALREADY_EXISTS, from the controller

            IR = IncrementalAlterConfigsRequest[1]
            alter = IR(resources=[IR.AlterConfigsResource(
                resource_type=TOPIC_RESOURCE, resource_name="through-first",
                configs=[IR.AlterConfigsResource.AlterableConfig(name="retention.ms", config_operation=SET,
                                                                 value="3600000")])], validate_only=False)
            altered = await _ask(second, alter, 1)
            assert [r.error_code for r in altered.responses] == [0]
            await _caught_up(first)
            DR = DescribeConfigsRequest[4]
            described = await _ask(first, DR(resources=[DR.DescribeConfigsResource(
                resource_type=TOPIC_RESOURCE, resource_name="through-first", configuration_keys=["retention.ms"])],
                include_synonyms=False, include_documentation=False), 4)
            assert [(c.name, c.value) for c in described.results[0].configs] == [("retention.ms", "3600000")]

            for node in (second, first, controller):
                node.stop()


async def test_a_broker_that_stops_leaves_the_live_brokers(tmp_path: Path) -> None:
    with trio.fail_after(TEST_TIMEOUT_S):
        async with trio.open_nursery() as nursery:
            controller: KafkaNode = await nursery.start(KafkaNode(_controller_config(tmp_path)).run)
            first: KafkaNode = await nursery.start(KafkaNode(_broker_config(tmp_path, 1, controller)).run)
            second: KafkaNode = await nursery.start(KafkaNode(_broker_config(tmp_path, 2, controller)).run)
            await _caught_up(first)
            assert sorted(b.node_id for b in (await _metadata(first)).brokers) == [1, 2]
            second.stop()
            with trio.fail_after(10):  # the controller fences it when its connection closes
                while 2 in {b.broker_id for b in first.broker.loader.image.live_brokers()}:
                    await first.broker.loader.wait_for(first.broker.loader.next_offset + 1)
            assert [b.node_id for b in (await _metadata(first)).brokers] == [1]
            first.stop()
            controller.stop()


# ---- as processes ----------------------------------------------------------------------------------------------

def _serve(tmp_path: Path, name: str, **props: object) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "minikafka", "serve"]
    for key, value in props.items():
        cmd += ["--override", f"{key.replace('_', '.')}={value}"]
    log = open(tmp_path / f"{name}.log", "wb")
    try:
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
    finally:
        log.close()


def _ready_line(proc: subprocess.Popen, prefix: str, timeout_s: float = 30) -> str:
    """The child's first stdout line starting with `prefix`, read with a deadline."""
    assert proc.stdout is not None
    os.set_blocking(proc.stdout.fileno(), False)
    buffer = b""
    found: list[str] = []

    def have_line() -> bool:
        nonlocal buffer
        chunk = proc.stdout.read() if proc.stdout is not None else None
        buffer += chunk or b""
        for line in buffer.decode(errors="replace").splitlines():
            if line.startswith(prefix):
                found.append(line[len(prefix):].strip())
                return True
        if proc.poll() is not None:
            raise AssertionError(f"the node exited with {proc.returncode} before printing {prefix!r}")
        return False

    wait_until(have_line, timeout_s, message=f"a line starting {prefix!r}")
    return found[0]


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen]]:
    started: list[subprocess.Popen] = []
    yield started
    for proc in reversed(started):
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in reversed(started):
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()


def test_a_controller_and_two_broker_processes_serve_a_real_client(tmp_path: Path, processes) -> None:
    controller = _serve(tmp_path, "controller", process_roles="controller", node_id=CONTROLLER_ID,
                        listeners="CONTROLLER://127.0.0.1:0", log_dirs=tmp_path / "controller")
    processes.append(controller)
    address = _ready_line(controller, "minikafka controller listening on ")
    voters = f"{CONTROLLER_ID}@{address}"
    bootstraps = []
    for node_id in (1, 2):
        broker = _serve(tmp_path, f"broker-{node_id}", process_roles="broker", node_id=node_id,
                        listeners="PLAINTEXT://127.0.0.1:0", controller_quorum_voters=voters,
                        log_dirs=tmp_path / f"broker-{node_id}")
        processes.append(broker)
        bootstraps.append(_ready_line(broker, "minikafka listening on "))
    admins = [KafkaAdminClient(bootstrap_servers=b, request_timeout_ms=10_000) for b in bootstraps]
    try:
        admins[0].create_topics([NewTopic("from-a-client", 2, 2)])
        wait_until(lambda: "from-a-client" in admins[1].list_topics(), 10, message="the topic on the other broker")
        described = admins[1].describe_topics(["from-a-client"])[0]
        assert described["error_code"] == 0 and len(described["partitions"]) == 2
        cluster = admins[1].describe_cluster()
        assert sorted(b["broker_id"] for b in cluster["brokers"]) == [1, 2]
        assert cluster["controller_id"] in (1, 2)
    finally:
        for admin in admins:
            admin.close()
    for proc in reversed(processes):
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0


def test_a_broker_without_a_reachable_controller_fails_to_start_clearly(tmp_path: Path) -> None:
    with held_free_port() as port:  # nothing listens there: a controller that is not up
        started = time.monotonic()
        result = subprocess.run(
            [sys.executable, "-m", "minikafka", "serve", "--override", "process.roles=broker",
             "--override", "node.id=1", "--override", "listeners=PLAINTEXT://127.0.0.1:0",
             "--override", f"controller.quorum.voters={CONTROLLER_ID}@127.0.0.1:{port}",
             "--override", "initial.broker.registration.timeout.ms=1500",
             "--override", f"log.dirs={tmp_path / 'data'}"],
            capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert result.returncode == 1, result.stderr[-2000:]
    assert "minikafka: cannot start: broker 1 could not" in result.stderr
    assert "controller" in result.stderr.splitlines()[-1]
    assert "minikafka listening on" not in result.stdout
    assert time.monotonic() - started < 30
