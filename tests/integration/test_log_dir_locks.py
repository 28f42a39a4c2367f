"""One node per data dir, as Kafka: a second broker or controller on a dir that a running one holds refuses to start
with Kafka's message, and the first goes on untouched; a killed holder's lock goes with its process."""
from __future__ import annotations

import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from kafka import KafkaProducer

import minikafka
from minikafka.storage.log_dir import LOCK_FILE_NAME
from minikafka.subprocess_runner import BrokerStartError
from tests.helpers import consume_values, read_stdout_line

KAFKA_SENTENCE = "A Kafka instance in another process or thread is using this directory."
READY_LINE = re.compile(rb"minikafka listening on 127\.0\.0\.1:(\d+)")
# Budgets, not expectations: a loaded two-core machine may be slow to start Python processes.
START_TIMEOUT_S = 60.0
EXIT_TIMEOUT_S = 60.0
CLIENT_TIMEOUT_S = 30.0


def lock_refusal(directory: Path) -> str:
    return f"Failed to acquire lock on file .lock in {directory}. {KAFKA_SENTENCE}"


@contextmanager
def serve(data_dir: Path, stderr_path: Path) -> Iterator[subprocess.Popen]:
    """A `minikafka serve` on `data_dir` and a free port, its log in `stderr_path`; killed if still running."""
    with open(stderr_path, "ab") as stderr:
        proc = subprocess.Popen([sys.executable, "-m", "minikafka", "serve", "--port", "0", "--data-dir",
                                 str(data_dir)], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(EXIT_TIMEOUT_S)
        assert proc.stdout is not None
        proc.stdout.close()


def ready_address(proc: subprocess.Popen) -> str:
    """HOST:PORT of the process's readiness line, read within START_TIMEOUT_S."""
    line = read_stdout_line(proc, START_TIMEOUT_S)
    match = READY_LINE.fullmatch(line.strip())
    assert match, f"not a readiness line: {line!r}"
    return f"127.0.0.1:{int(match.group(1))}"


def produce(bootstrap: str, topic: str, values: list[bytes]) -> list[int]:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
    try:
        return [producer.send(topic, v, partition=0).get(timeout=CLIENT_TIMEOUT_S).offset for v in values]
    finally:
        producer.close()


def consume(bootstrap: str, topic: str, expected: int) -> list[bytes]:
    return consume_values(bootstrap, topic, expected, timeout_s=CLIENT_TIMEOUT_S)


def test_a_second_serve_on_a_data_dir_exits_1_and_the_first_serves_on_with_its_data_intact(tmp_path):
    data = tmp_path / "data"
    with serve(data, tmp_path / "first.log") as first:
        bootstrap = ready_address(first)
        assert produce(bootstrap, "t", [b"before"]) == [0]
        second = subprocess.run([sys.executable, "-m", "minikafka", "serve", "--port", "0", "--data-dir", str(data)],
                                stdin=subprocess.DEVNULL, capture_output=True, timeout=EXIT_TIMEOUT_S, check=False)
        assert second.returncode == 1, second.stderr
        assert second.stdout == b""  # never ready
        stderr = second.stderr.decode()
        assert stderr.splitlines()[-1] == f"minikafka: cannot start: {lock_refusal(data)}"
        assert "Traceback" not in stderr
        assert produce(bootstrap, "t", [b"after"]) == [1]
        assert first.poll() is None
        first.send_signal(signal.SIGTERM)
        assert first.wait(EXIT_TIMEOUT_S) == 0
    restart_log = tmp_path / "restart.log"
    with serve(data, restart_log) as restarted:
        bootstrap = ready_address(restarted)
        assert consume(bootstrap, "t", expected=2) == [b"before", b"after"]
        assert produce(bootstrap, "t", [b"restarted"]) == [2]
    troubles = [line for line in restart_log.read_text().splitlines()
                if re.search(r" (WARNING|ERROR) minikafka\.storage", line)]
    assert troubles == []  # a clean stop: no recovery, no rebuilt index


@pytest.mark.parametrize("first_in_process, second_in_process", [(False, True), (True, False), (True, True)],
                         ids=["process-then-thread", "thread-then-process", "thread-then-thread"])
def test_a_second_broker_on_a_data_dir_fails_to_start(tmp_path, first_in_process, second_in_process):
    data = tmp_path / "data"
    with minikafka.Broker(data_dir=data, in_process=first_in_process) as first:
        produce(first.bootstrap_servers, "t", [b"kept"])
        second = minikafka.Broker(data_dir=data, in_process=second_in_process, log_path=tmp_path / "second.log")
        try:
            with pytest.raises(BrokerStartError) as refused:
                second.start()
            assert KAFKA_SENTENCE in str(refused.value)
            assert not second.running
        finally:
            second.close()
        assert first.running
        assert produce(first.bootstrap_servers, "t", [b"still served"]) == [1]
    with minikafka.Broker(data_dir=data, in_process=second_in_process) as again:  # the first released its lock
        assert consume(again.bootstrap_servers, "t", expected=2) == [b"kept", b"still served"]


def test_after_kill_9_of_the_holder_a_new_broker_starts_on_its_dir(tmp_path):
    data = tmp_path / "data"
    with minikafka.Broker(data_dir=data) as first:
        produce(first.bootstrap_servers, "t", [b"acked"])
        first.kill()
        with minikafka.Broker(data_dir=data, log_path=tmp_path / "second.log") as second:
            assert consume(second.bootstrap_servers, "t", expected=1) == [b"acked"]


def test_a_stale_lock_file_at_the_first_start_is_no_obstacle(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / LOCK_FILE_NAME).write_bytes(b"")
    with minikafka.Broker(data_dir=data, in_process=True) as broker:
        assert produce(broker.bootstrap_servers, "t", [b"v"]) == [0]
        broker.restart()
        assert consume(broker.bootstrap_servers, "t", expected=1) == [b"v"]
        assert broker.state.topics() == ["t"]  # the .lock file is no partition


def test_a_second_cluster_on_a_data_dir_is_refused_by_its_controller(tmp_path):
    with minikafka.Cluster(brokers=1, data_dir=tmp_path) as first:
        second = minikafka.Cluster(brokers=1, data_dir=tmp_path)
        try:
            with pytest.raises(BrokerStartError) as refused:
                second.start()
            assert lock_refusal(tmp_path / "controller-3000") in str(refused.value)
        finally:
            second.close()
        first.state.create_topic("t", partitions=1, replication_factor=1)
        assert produce(first.bootstrap_servers, "t", [b"v"]) == [0]


def test_the_metadata_log_dir_of_a_combined_node_is_locked_apart_from_its_log_dirs(tmp_path):
    metadata = tmp_path / "metadata"
    config = {"metadata.log.dir": str(metadata)}
    with minikafka.Broker(data_dir=tmp_path / "one", config=config, in_process=True) as first:
        second = minikafka.Broker(data_dir=tmp_path / "two", config=config, in_process=True)
        try:
            with pytest.raises(BrokerStartError, match=re.escape(lock_refusal(metadata))):
                second.start()
        finally:
            second.close()
        assert first.running
    assert (metadata / LOCK_FILE_NAME).is_file() and (tmp_path / "one" / LOCK_FILE_NAME).is_file()
