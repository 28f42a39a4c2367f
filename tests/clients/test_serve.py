"""`minikafka serve` as an operator runs it: properties file, flags, readiness line, clean exit, clear errors."""
from __future__ import annotations

import os
import re
import selectors
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from confluent_kafka.admin import AdminClient

from tests.helpers import create_topic, fetch, wait_until
from tests.raw_client import RawConnection

READY_LINE = re.compile(rb"minikafka listening on 127\.0\.0\.1:(\d+)")
START_TIMEOUT_S = 30.0
EXIT_TIMEOUT_S = 20.0


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


def ready_port(proc: subprocess.Popen) -> int:
    """The port of the process's readiness line, read within START_TIMEOUT_S (a plain readline could block forever)."""
    line = b""

    def line_read() -> bool:
        nonlocal line
        if selector.select(0.1):
            chunk = os.read(proc.stdout.fileno(), 1)  # byte by byte: nothing past the line is consumed
            assert chunk, f"minikafka serve exited before its readiness line: {line!r}"
            line += chunk
        return line.endswith(b"\n")

    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        wait_until(line_read, START_TIMEOUT_S, interval=0, message="the readiness line")
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


def test_bad_config_value_is_a_clear_cli_error(tmp_path):
    with serve("--log-dirs", str(tmp_path), "--override", "num.partitions=lots") as proc:
        _out, err = proc.communicate(timeout=EXIT_TIMEOUT_S)
    assert proc.returncode == 2
    assert b"num.partitions" in err and b"lots" in err
    assert b"Traceback" not in err


def test_port_in_use_is_a_clear_cli_error(tmp_path, broker):
    with serve("--listeners", f"PLAINTEXT://{broker.bootstrap_servers}", "--log-dirs", str(tmp_path / "x")) as proc:
        _out, err = proc.communicate(timeout=EXIT_TIMEOUT_S)
    assert proc.returncode == 1
    assert b"cannot start" in err and b"Traceback" not in err


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
