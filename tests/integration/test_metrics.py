"""Kafka's broker metrics as an operator reads them: the Prometheus endpoint of `metrics.port` (and the control API
behind `state.metrics()`), from real broker processes: produce moves the byte and message counters, all-topics and
per topic; each partition's log gauges match its files; the process collector describes the node's process; a
follower that stops fetching makes its leaders' partitions under-replicated and shrinks their ISRs, and resuming it
expands them again; one node is the active controller; `--metrics-port` on `minikafka serve` and `minikafka
cluster`."""
from __future__ import annotations

import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest
from kafka import KafkaProducer
from prometheus_client.parser import text_string_to_metric_families

import minikafka
from minikafka.control_client import ControlClient
from minikafka.port_reservation import reserve_port
from tests.helpers import held_free_port, kill_process_group, read_stdout_line, wait_until

URP = "kafka_server_replicamanager_underreplicatedpartitions"
ISR_SHRINKS = "kafka_server_replicamanager_isrshrinks_total"
ISR_EXPANDS = "kafka_server_replicamanager_isrexpands_total"
ACTIVE_CONTROLLER = "kafka_controller_kafkacontroller_activecontrollercount"
BYTES_IN = "kafka_server_brokertopicmetrics_bytesin_total"
MESSAGES_IN = "kafka_server_brokertopicmetrics_messagesin_total"
BYTES_OUT = "kafka_server_brokertopicmetrics_bytesout_total"
# Every metric a broker serves, by its Prometheus name (a summary's samples end in _count and _sum).
BROKER_NAMES = {
    URP, "kafka_server_replicamanager_underminisrpartitioncount", ISR_SHRINKS, ISR_EXPANDS,
    "kafka_server_replicamanager_failedisrupdates_total", "kafka_server_replicamanager_leadercount",
    "kafka_server_replicamanager_partitioncount", "kafka_controller_kafkacontroller_offlinepartitionscount",
    ACTIVE_CONTROLLER, BYTES_IN, BYTES_OUT, MESSAGES_IN,
    "kafka_server_brokertopicmetrics_replicationbytesin_total",
    "kafka_server_brokertopicmetrics_replicationbytesout_total", "kafka_server_replicafetchermanager_maxlag",
    "kafka_network_requestchannel_requestqueuesize",
    "kafka_server_delayedoperationpurgatory_purgatorysize",
    "kafka_server_fetchsessioncache_numincrementalfetchsessions",
}
# prometheus_client's process collector, on every node's endpoint (it reads /proc).
PROCESS_NAMES = {"process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds",
                 "process_start_time_seconds"}
# Served once a request was answered, one sample per API and version.
REQUEST_NAMES = {"kafka_network_requestmetrics_requests_total", "kafka_network_requestmetrics_totaltimems_count",
                 "kafka_network_requestmetrics_totaltimems_sum"}
HTTP_TIMEOUT_S = 10.0
START_TIMEOUT_S = 60.0
EXIT_TIMEOUT_S = 30.0
PORT_RUN_ATTEMPTS = 50
MAX_PORT = 65535


def scrape(port: int) -> dict[str, float]:
    """The endpoint's samples by name and labels, as State.metrics() keys them."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=HTTP_TIMEOUT_S) as response:
        assert response.headers["Content-Type"].startswith("text/plain")
        text = response.read().decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
            samples[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
    return samples


def names(samples: dict[str, float]) -> set[str]:
    return {key.partition("{")[0] for key in samples}


def requests_of(samples: dict[str, float], request: str) -> float:
    """RequestsPerSec's count for one request name, over its versions."""
    prefix = f'kafka_network_requestmetrics_requests_total{{request="{request}",'
    return sum(value for key, value in samples.items() if key.startswith(prefix))


def of_topic(name: str, topic: str) -> str:
    return f'{name}{{topic="{topic}"}}'


def of_partition(name: str, topic: str, partition: int) -> str:
    return f'{name}{{partition="{partition}",topic="{topic}"}}'


def produce(bootstrap_servers: str, topic: str, count: int, size: int, partition: int | None = None) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap_servers, acks=1, linger_ms=0)
    try:
        for i in range(count):
            producer.send(topic, value=i.to_bytes(4, "big") * (size // 4), partition=partition)
        producer.flush(timeout=30)
    finally:
        producer.close()


def test_endpoint_serves_kafka_names_and_produce_moves_the_counters(tmp_path):
    with held_free_port() as metrics_port, \
            minikafka.Broker(data_dir=tmp_path / "data", config={"metrics.port": metrics_port}) as broker:
        before = scrape(metrics_port)
        assert BROKER_NAMES <= names(before)
        assert before[ACTIVE_CONTROLLER] == 1  # a lone broker is a combined node: its own controller
        broker.state.create_topic("m", partitions=1)
        produce(broker.bootstrap_servers, "m", count=20, size=100, partition=0)
        after = scrape(metrics_port)
        assert BROKER_NAMES | REQUEST_NAMES <= names(after)
        assert after[MESSAGES_IN] - before[MESSAGES_IN] == 20
        assert after[BYTES_IN] - before[BYTES_IN] >= 20 * 100
        assert requests_of(after, "Produce") >= 1
        assert after["kafka_server_replicamanager_leadercount"] == after["kafka_server_replicamanager_partitioncount"]
        assert len(broker.state.records("m", 0)) == 20  # a kafka-python consumer reads them
        read = scrape(metrics_port)
        assert read[BYTES_OUT] - after[BYTES_OUT] >= 20 * 100
        assert requests_of(read, "FetchConsumer") >= 1 and requests_of(read, "FetchFollower") == 0
        through_control = broker.state.metrics()[broker.node_id]
        assert through_control[MESSAGES_IN] == read[MESSAGES_IN]
        assert BROKER_NAMES | REQUEST_NAMES <= names(through_control)


def segment_sizes(partition_dir: Path) -> list[int]:
    """The sizes on disk of a partition's segment files."""
    return [f.stat().st_size for f in partition_dir.glob("*.log")]


def test_topic_and_partition_series_match_what_was_produced_and_the_files(tmp_path):
    started = time.time()
    data = tmp_path / "data"
    partitions = [("a", 0), ("a", 1), ("b", 0)]
    with held_free_port() as metrics_port, \
            minikafka.Broker(data_dir=data, config={"metrics.port": metrics_port}) as broker:
        # Segments that take whole producer batches (up to 16 KiB), and more than one of them in a-0.
        broker.state.create_topic("a", partitions=2, config={"internal.segment.bytes": 20_000})
        broker.state.create_topic("b", partitions=1)
        before = scrape(metrics_port)
        assert before[of_topic(MESSAGES_IN, "a")] == before[of_topic(BYTES_IN, "b")] == 0  # hosted: served at zero
        produce(broker.bootstrap_servers, "a", count=300, size=100, partition=0)
        produce(broker.bootstrap_servers, "a", count=50, size=100, partition=1)
        produce(broker.bootstrap_servers, "b", count=7, size=40, partition=0)
        assert len(broker.state.records("a")) == 350  # read by a consumer; b is not
        after = scrape(metrics_port)
        on_disk = {(topic, p): segment_sizes(data / f"{topic}-{p}") for topic, p in partitions}

    assert after[of_topic(MESSAGES_IN, "a")] == 350 and after[of_topic(MESSAGES_IN, "b")] == 7
    assert after[MESSAGES_IN] == 357
    for topic in ("a", "b"):
        # What a leader appends is what it was sent, byte for byte: the topic's logs hold its BytesIn.
        assert after[of_topic(BYTES_IN, topic)] == sum(
            after[of_partition("kafka_log_log_size", t, p)] for t, p in partitions if t == topic)
    assert after[BYTES_IN] == after[of_topic(BYTES_IN, "a")] + after[of_topic(BYTES_IN, "b")]
    assert after[of_topic(BYTES_OUT, "a")] >= after[of_topic(BYTES_IN, "a")]
    assert after[of_topic(BYTES_OUT, "b")] == 0
    assert after[of_topic("kafka_server_brokertopicmetrics_totalproducerequests_total", "b")] >= 1
    assert after[of_topic("kafka_server_brokertopicmetrics_failedproducerequests_total", "a")] == 0
    for (topic, p), sizes in on_disk.items():
        assert after[of_partition("kafka_log_log_size", topic, p)] == sum(sizes)
        assert after[of_partition("kafka_log_log_numlogsegments", topic, p)] == len(sizes)
        assert after[of_partition("kafka_log_log_logstartoffset", topic, p)] == 0
        assert after[of_partition("kafka_cluster_partition_underreplicated", topic, p)] == 0
        assert after[of_partition("kafka_cluster_partition_insyncreplicascount", topic, p)] == 1
    assert len(on_disk[("a", 0)]) > 1
    assert [after[of_partition("kafka_log_log_logendoffset", t, p)] for t, p in partitions] == [300, 50, 7]

    assert PROCESS_NAMES <= names(after)
    assert after["process_cpu_seconds_total"] > 0
    assert 1 << 20 < after["process_resident_memory_bytes"] < 1 << 40
    assert 0 < after["process_open_fds"] <= after["process_max_fds"]
    assert started - 1 <= after["process_start_time_seconds"] <= time.time()  # the broker's process, started here


@pytest.mark.minikafka(brokers=3)
def test_paused_follower_moves_under_replicated_partitions_and_isr_rates(minikafka_cluster):
    cluster = minikafka_cluster
    cluster.state.create_topic("t", partitions=2, replication_factor=3)
    leaders = [cluster.wait_for_leader("t", p).node_id for p in (0, 1)]
    for p in (0, 1):
        cluster.wait_for_isr("t", p, 3)
    follower = next(b for b in cluster.brokers if b.node_id not in leaders)  # it follows both partitions
    led = {node: leaders.count(node) for node in set(leaders)}  # under-replicated partitions each leader will have
    wait_until(lambda: all(m[URP] == 0 for m in cluster.state.metrics().values()), message="no under-replicated")
    before = cluster.state.metrics()
    with follower.faults.pause_fetching("t"):
        for p in (0, 1):
            produce(cluster.bootstrap_servers, "t", count=5, size=50, partition=p)
            cluster.wait_for_isr("t", p, 2)
        paused = cluster.state.metrics()
        for node, count in led.items():
            assert paused[node][URP] == count
            assert paused[node][ISR_SHRINKS] - before[node][ISR_SHRINKS] >= count
        assert sum(m[URP] for m in paused.values()) == 2
        for p, leader in enumerate(leaders):  # Kafka's Partition gauges: 1 on the leader, 0 on its followers
            under_replicated = of_partition("kafka_cluster_partition_underreplicated", "t", p)
            assert {node: m[under_replicated] for node, m in paused.items()} == {
                node: 1 if node == leader else 0 for node in paused}
            assert paused[leader][of_partition("kafka_cluster_partition_insyncreplicascount", "t", p)] == 2
            assert paused[leader][of_partition("kafka_cluster_partition_replicascount", "t", p)] == 3
    for p in (0, 1):
        cluster.wait_for_isr("t", p, 3)
    wait_until(lambda: all(m[URP] == 0 for m in cluster.state.metrics().values()),
               message="no under-replicated partitions once the follower fetches again")
    resumed = cluster.state.metrics()
    for node, count in led.items():
        assert resumed[node][ISR_EXPANDS] - paused[node][ISR_EXPANDS] >= count
    assert all(m[of_partition("kafka_cluster_partition_underreplicated", "t", p)] == 0
               for m in resumed.values() for p in (0, 1))
    assert resumed[follower.node_id]["kafka_server_brokertopicmetrics_replicationbytesin_total"] > 0
    assert all(resumed[node]["kafka_server_brokertopicmetrics_replicationbytesout_total"] > 0 for node in led)
    assert all(requests_of(resumed[node], "FetchFollower") > 0 for node in led)
    # KRaft: the controller process is the active controller, no broker is
    assert all(m[ACTIVE_CONTROLLER] == 0 for m in resumed.values())
    controller = ControlClient(cluster.controller.address).call("metrics")
    assert controller["metrics"][ACTIVE_CONTROLLER] == 1


# ---- the command line ----------------------------------------------------------------------------------------------

@contextmanager
def node_process(*args: str) -> Iterator[subprocess.Popen]:
    """A `minikafka` node process for the block; asked to stop with SIGTERM, killed if it does not exit in time."""
    proc = subprocess.Popen([sys.executable, "-m", "minikafka", *args], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(EXIT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            kill_process_group(proc, EXIT_TIMEOUT_S)
        assert proc.stdout is not None
        proc.stdout.close()


def read_lines(proc: subprocess.Popen, until: str, count: int) -> list[str]:
    """The process's stdout lines until `count` of them start with `until`, read within START_TIMEOUT_S."""
    lines: list[str] = []
    deadline = time.monotonic() + START_TIMEOUT_S
    while sum(1 for line in lines if line.startswith(until)) < count:
        left = deadline - time.monotonic()
        assert left > 0, f"no {count} line(s) starting {until!r} within {START_TIMEOUT_S} s: {lines!r}"
        lines.append(read_stdout_line(proc, left).decode().rstrip("\n"))
    return lines


def test_serve_metrics_port_flag(tmp_path):
    with node_process("serve", "--port", "0", "--metrics-port", "0", "--data-dir", str(tmp_path / "data")) as proc:
        lines = read_lines(proc, "minikafka listening on ", 1)
        metrics_line = next(line for line in lines if line.startswith("minikafka metrics on "))
        port = int(metrics_line.rsplit(":", 1)[1].split("/")[0])
        assert BROKER_NAMES <= names(scrape(port))


@contextmanager
def held_port_run(count: int) -> Iterator[int]:
    """`count` consecutive free ports, held for what the block starts; the first of them."""
    for _ in range(PORT_RUN_ATTEMPTS):
        with ExitStack() as stack:
            first = reserve_port("127.0.0.1")
            if first is None:
                pytest.skip("ports cannot be held on this platform")
            stack.enter_context(first)
            base = first.getsockname()[1]
            if base + count - 1 > MAX_PORT:
                continue
            held = [reserve_port("127.0.0.1", base + i) for i in range(1, count)]
            for reservation in held:
                if reservation is not None:
                    stack.enter_context(reservation)
            if all(r is not None for r in held):
                yield base
                return
    raise RuntimeError(f"no run of {count} free ports found in {PORT_RUN_ATTEMPTS} attempts")


def test_cluster_metrics_ports_count_up_from_the_first(tmp_path):
    with held_port_run(3) as first, \
            node_process("cluster", "--brokers", "2", "--metrics-port", str(first), "--data-dir",
                         str(tmp_path / "cluster")) as proc:
        read_lines(proc, "minikafka listening on ", 2)
        brokers = [scrape(first), scrape(first + 1)]
        controller = scrape(first + 2)
        assert all(BROKER_NAMES | PROCESS_NAMES <= names(b) for b in brokers)
        assert [b[ACTIVE_CONTROLLER] for b in brokers] == [0, 0]
        assert controller[ACTIVE_CONTROLLER] == 1
        assert PROCESS_NAMES <= names(controller)
