"""`minikafka serve` as an operator runs it: properties file, flags, readiness line, clean exit, clear errors."""
from __future__ import annotations

import signal
import subprocess
import sys

from confluent_kafka.admin import AdminClient

from tests.conftest import READY_PREFIX, free_port
from tests.raw_client import RawConnection


def run_serve(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "minikafka", "serve", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_properties_file_flags_and_clean_sigterm(tmp_path):
    port = free_port()
    props = tmp_path / "server.properties"
    props.write_text(f"# a Kafka-style file\nnode.id=7\nlisteners=PLAINTEXT://127.0.0.1:{port}\n"
                     f"log.dirs={tmp_path / 'data'}\nnum.partitions=5\n")
    proc = run_serve("--config", str(props))
    try:
        assert proc.stdout.readline().strip() == f"{READY_PREFIX}127.0.0.1:{port}"
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
        md = admin.list_topics(timeout=10)
        assert list(md.brokers) == [7]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
    finally:
        proc.kill()
        proc.communicate(timeout=10)
    assert "node.id=7" in (tmp_path / "data" / "meta.properties").read_text()


def test_override_beats_file_and_sigint_exits_zero(tmp_path):
    port = free_port()
    props = tmp_path / "server.properties"
    props.write_text("listeners=PLAINTEXT://127.0.0.1:1\n")
    proc = run_serve("--config", str(props), "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
                     "--log-dirs", str(tmp_path / "d"))
    try:
        assert proc.stdout.readline().strip() == f"{READY_PREFIX}127.0.0.1:{port}"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(20) == 0
    finally:
        proc.kill()
        proc.communicate(timeout=10)


def test_bad_config_value_is_a_clear_cli_error(tmp_path):
    proc = run_serve("--log-dirs", str(tmp_path), "--override", "num.partitions=lots")
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 2
    assert "num.partitions" in err and "lots" in err
    assert "Traceback" not in err


def test_port_in_use_is_a_clear_cli_error(tmp_path, broker):
    proc = run_serve("--listeners", f"PLAINTEXT://{broker.bootstrap_servers}", "--log-dirs", str(tmp_path / "x"))
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 1
    assert "cannot start" in err and "Traceback" not in err


def test_sigterm_answers_a_long_poll_in_flight_then_exits_zero(broker):
    import threading
    import time

    from tests.clients.test_bad_input import create_topic
    from tests.clients.test_fetch import fetch

    with RawConnection(broker.bootstrap_servers) as conn:
        create_topic(conn, "waiting")
        answered = {}

        def long_poll():
            answered["response"] = fetch(conn, [("waiting", 0, 0, 1 << 20)], min_bytes=1, max_wait_ms=30_000)

        poller = threading.Thread(target=long_poll)
        poller.start()
        time.sleep(0.5)  # the fetch is now parked in the purgatory
        started = time.monotonic()
        assert broker.stop() == 0
        poller.join(10)
        assert not poller.is_alive() and time.monotonic() - started < 10
        assert answered["response"].responses[0].partitions[0].error_code == 0
