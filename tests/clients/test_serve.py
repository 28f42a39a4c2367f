"""`minikafka serve` as an operator runs it: properties file, flags, readiness line, clean exit, clear errors."""
from __future__ import annotations

import errno
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient, KafkaConsumer

from tests.helpers import admin_create_topic, create_topic, fetch, read_stdout_line, wait_until
from tests.raw_client import RawConnection

READY_LINE = re.compile(rb"minikafka listening on 127\.0\.0\.1:(\d+)")
START_TIMEOUT_S = 30.0
EXIT_TIMEOUT_S = 20.0
GROUP_TIMEOUT_S = 60.0
# A start and the creation of __consumer_offsets by a group's first request, or a restart, log about ten lines.
MOST_STARTUP_LOG_LINES = 20
OFFSETS_TOPIC_CREATED = "auto-created topic __consumer_offsets"
BECAME_LEADER = re.compile(r"became leader of (\d+) partition\(s\)")
# A log line about one partition of __consumer_offsets: `__consumer_offsets-7`.
OFFSETS_PARTITION = re.compile(r"__consumer_offsets-\d")


@contextmanager
def serve(*args: str) -> Iterator[subprocess.Popen]:
    """A `minikafka serve` process for the block; killed (if still running) and reaped when it ends."""
    proc = subprocess.Popen([sys.executable, "-m", "minikafka", "serve", *args], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        yield proc
    finally:
        proc.kill()
        proc.communicate(timeout=EXIT_TIMEOUT_S)


def read_line(proc: subprocess.Popen) -> bytes:
    return read_stdout_line(proc, START_TIMEOUT_S)


def ready_port(proc: subprocess.Popen) -> int:
    """The port of the process's readiness line."""
    line = read_line(proc)
    match = READY_LINE.fullmatch(line.strip())
    assert match, f"not a readiness line: {line!r}"
    return int(match.group(1))


def test_properties_file_flags_and_clean_sigterm(tmp_path):
    props = tmp_path / "server.properties"
    props.write_text(f"# a Kafka-style file\nnode.id=7\nlisteners=PLAINTEXT://127.0.0.1:0\n"
                     f"log.dirs={tmp_path / 'data'}\nnum.partitions=5\n")
    with serve("--config", str(props)) as proc:
        port = ready_port(proc)
        assert port != 0  # port 0 asks for a free port; the readiness line tells which one was bound
        assert read_line(proc) == f"minikafka data in {tmp_path / 'data'} (remove it to start afresh)\n".encode()
        md = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"}).list_topics(timeout=10)  # client gone after
        assert list(md.brokers) == [7]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(EXIT_TIMEOUT_S) == 0
    assert "node.id=7" in (tmp_path / "data" / "meta.properties").read_text()


def test_override_beats_file_and_sigint_exits_zero(tmp_path):
    props = tmp_path / "server.properties"
    props.write_text("listeners=PLAINTEXT://127.0.0.1:1\n")
    with serve("--config", str(props), "--override", "listeners=PLAINTEXT://127.0.0.1:0",
               "--log-dirs", str(tmp_path / "d")) as proc:
        assert ready_port(proc) not in (0, 1)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(EXIT_TIMEOUT_S) == 0


def join_group(bootstrap_servers: str, group_id: str, topic: str) -> None:
    """A kafka-python consumer joins the group (its FindCoordinator creates __consumer_offsets), commits its position
    in the topic (made first: a consumer that joins before its topic exists may wait for it for minutes) and leaves."""
    admin_create_topic(bootstrap_servers, topic, 1)
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap_servers, group_id=group_id)

    def assigned() -> bool:
        consumer.poll(timeout_ms=100)
        return bool(consumer.assignment())

    try:
        wait_until(assigned, GROUP_TIMEOUT_S, message=f"an assignment in group {group_id}")
        for tp in consumer.assignment():
            consumer.position(tp)  # what commit() commits
        consumer.commit()
    finally:
        consumer.close()


def served_log(proc: subprocess.Popen, while_serving: Callable[[int], object]) -> list[str]:
    """The log lines of a `minikafka serve` process that ran `while_serving(port)` then stopped on SIGTERM."""
    while_serving(ready_port(proc))
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(EXIT_TIMEOUT_S) == 0
    assert proc.stderr is not None
    return proc.stderr.read().decode().splitlines()


def leaders_became(lines: list[str]) -> int:
    return sum(int(m.group(1)) for line in lines if (m := BECAME_LEADER.search(line)))


def test_start_restart_and_a_new_offsets_topic_log_no_line_per_partition(tmp_path):
    """At the default level, a start and the creation of __consumer_offsets' 50 partitions, or a restart, are a
    handful of lines: the partitions this broker comes to lead or follow are summed up, none has a line of its own
    but one that holds a group to load."""
    args = ("--port", "0", "--log-dirs", str(tmp_path / "data"), "-o", "offsets.topic.num.partitions=50")
    with serve(*args) as proc:
        lines = served_log(proc, lambda port: join_group(f"127.0.0.1:{port}", "g", "t"))
    assert any("created topic __consumer_offsets with 50 partition(s)" in line for line in lines), lines
    assert leaders_became(lines) == 51, lines  # and t-0
    assert not [line for line in lines if OFFSETS_PARTITION.search(line)]
    created = next(i for i, line in enumerate(lines) if OFFSETS_TOPIC_CREATED in line)
    assert created < MOST_STARTUP_LOG_LINES, "\n".join(lines)

    def committed(port: int) -> None:
        """OffsetFetch: answered once the coordinator has loaded the group."""
        admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{port}", request_timeout_ms=int(GROUP_TIMEOUT_S * 1000))
        try:
            assert admin.list_group_offsets({"g": None})["g"]
        finally:
            admin.close()

    with serve(*args) as proc:
        lines = served_log(proc, committed)
    assert leaders_became(lines) == 51, lines
    assert [line for line in lines if OFFSETS_PARTITION.search(line)] == [
        line for line in lines if "loaded 1 groups from" in line], lines
    assert len(lines) < MOST_STARTUP_LOG_LINES, "\n".join(lines)


def test_bad_config_value_is_a_clear_cli_error(tmp_path):
    with serve("--log-dirs", str(tmp_path), "--override", "num.partitions=lots") as proc:
        _out, err = proc.communicate(timeout=EXIT_TIMEOUT_S)
    assert proc.returncode == 2
    assert b"num.partitions" in err and b"lots" in err
    assert b"Traceback" not in err


@pytest.mark.parametrize("listener", ["the Kafka listener PLAINTEXT", "the controller listener CONTROLLER",
                                      "the metrics endpoint (metrics.port)"])
def test_a_port_in_use_is_named_with_what_it_was_for(tmp_path, listener):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        options = {
            "the Kafka listener PLAINTEXT": ["--port", str(port)],
            "the controller listener CONTROLLER": [
                "--listeners", f"PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:{port}", "--node-id", "1",
                "-o", "process.roles=broker,controller", "-o", "controller.listener.names=CONTROLLER",
                "-o", f"controller.quorum.voters=1@127.0.0.1:{port}"],
            "the metrics endpoint (metrics.port)": ["--port", "0", "--metrics-port", str(port)],
        }[listener]
        with serve(*options, "--log-dirs", str(tmp_path / "data")) as proc:
            _out, err = proc.communicate(timeout=EXIT_TIMEOUT_S)
    assert proc.returncode == 1
    assert err.decode().splitlines()[-1] == (f"minikafka: cannot start: {listener} cannot bind 127.0.0.1:{port}: "
                                             f"{os.strerror(errno.EADDRINUSE)}")


def test_zookeeper_out_of_reach_is_one_line(tmp_path):
    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    with serve("--port", "0", "--log-dirs", str(tmp_path), "-o", f"zookeeper.connect=127.0.0.1:{port}",
               "-o", "zookeeper.connection.timeout.ms=500") as proc:
        _out, err = proc.communicate(timeout=EXIT_TIMEOUT_S)
    assert proc.returncode == 1
    last = err.decode().splitlines()[-1]
    assert last.startswith("minikafka: cannot start: Timed out waiting for connection to 127.0.0.1:"), last
    assert b"Traceback" not in err


def test_sigterm_answers_a_long_poll_in_flight_then_exits_zero(broker):
    with RawConnection(broker.bootstrap_servers) as conn:
        create_topic(conn, "waiting")
        answered = {}

        def long_poll():
            answered["partition"] = fetch(conn, "waiting", 0, 0, min_bytes=1, max_wait_ms=30_000)

        poller = threading.Thread(target=long_poll)
        poller.start()
        wait_until(lambda: broker.state.delayed_operations() == 1, message="the fetch to wait in the purgatory")
        started = time.monotonic()
        assert broker.stop() == 0
        poller.join(10)
        assert not poller.is_alive() and time.monotonic() - started < 10
        assert answered["partition"].error_code == 0
