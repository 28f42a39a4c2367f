"""The pytest plugin as a user meets it: installed, fixtures available, options honoured, failures name the log."""
from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.helpers import held_free_port

INNER_TIMEOUT_S = 180

USER_TESTS = '''
import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

import minikafka


def roundtrip(bootstrap, topic):
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    producer.send(topic, b"hello", partition=0).get(timeout=20)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, auto_offset_reset="earliest",
                             consumer_timeout_ms=10000)
    consumer.assign([TopicPartition(topic, 0)])
    value = next(iter(consumer)).value
    consumer.close()
    return value


def test_function_broker(minikafka_broker):
    assert isinstance(minikafka_broker, minikafka.Broker)
    assert roundtrip(minikafka_broker.bootstrap_servers, "t") == b"hello"
    print("FUNCTION", minikafka_broker.bootstrap_servers, minikafka_broker.pid, minikafka_broker.data_dir)


def test_session_broker_once(minikafka_session_broker):
    print("SESSION", minikafka_session_broker.bootstrap_servers, minikafka_session_broker.data_dir)


def test_session_broker_twice(minikafka_session_broker):
    print("SESSION", minikafka_session_broker.bootstrap_servers, minikafka_session_broker.data_dir)


def test_cluster(minikafka_cluster):
    assert isinstance(minikafka_cluster, minikafka.Cluster)
    assert roundtrip(minikafka_cluster.bootstrap_servers, "c") == b"hello"


@pytest.mark.minikafka(config={"num.partitions": 4})
def test_marker_config(minikafka_broker):
    roundtrip(minikafka_broker.bootstrap_servers, "auto")
    assert len(minikafka_broker.state.partitions("auto")) == 4


def test_fails_and_names_the_log(minikafka_broker):
    from kafka import KafkaAdminClient
    admin = KafkaAdminClient(bootstrap_servers=minikafka_broker.bootstrap_servers, client_id="failing")
    admin.list_topics()
    admin.close()
    assert False, "deliberate failure"
'''


# A suite that uses only the plugin: its fixtures, and the state API's kafka-python clients (consumer and admin), a
# cluster's Metadata view and an in-process broker (kafka-python imported into the test process).
PLUGIN_ONLY_TESTS = '''
import pytest


def test_state_api(minikafka_broker):
    state = minikafka_broker.state
    state.create_topic("t", partitions=2)
    assert state.records("t") == []
    assert [p.partition for p in state.partitions("t")] == [0, 1]
    assert state.groups() == [] and state.committed_offsets("g") == {}
    assert state.metrics()
    state.delete_topic("t")


def test_cluster(minikafka_cluster):
    minikafka_cluster.state.create_topic("c", partitions=1)
    assert minikafka_cluster.state.records("c") == []
    assert set(minikafka_cluster.controller_ids()) == {1}


@pytest.mark.minikafka(in_process=True)
def test_in_process_broker(minikafka_broker):
    minikafka_broker.state.create_topic("i", partitions=1)
    assert minikafka_broker.state.records("i") == []


@pytest.mark.minikafka(clock="manual")
def test_manual_clock(minikafka_broker):
    start = minikafka_broker.clock.now()
    assert minikafka_broker.clock.advance(3_600_000) >= start + 3_600_000
'''


def run_inner(tmp_path: Path, *options: str) -> subprocess.CompletedProcess:
    test_file = tmp_path / "test_user_suite.py"
    test_file.write_text(textwrap.dedent(USER_TESTS))
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    return subprocess.run([sys.executable, "-m", "pytest", "-s", "-p", "no:cacheprovider", "-W",
                           "ignore::DeprecationWarning", str(test_file), f"--basetemp={tmp_path / 'base'}", *options],
                          cwd=tmp_path, capture_output=True, text=True, timeout=INNER_TIMEOUT_S)


def printed(output: str, tag: str) -> list[list[str]]:
    """What the inner tests printed after `tag` (pytest -s puts it on the progress line)."""
    return [line.split(tag + " ", 1)[1].split()[:3] for line in output.splitlines() if tag + " " in line]


def test_fixtures_options_and_failure_report(tmp_path):
    result = run_inner(tmp_path, "--minikafka-data-dir", str(tmp_path / "kept"))
    out = result.stdout
    assert "1 failed, 5 passed" in out, out + result.stderr
    # The failed test's report names its broker's log file and shows its last lines.
    assert "minikafka broker logs" in out
    log_line = next(line for line in out.splitlines() if " log: " in line and "broker 1" in line)
    log_path = Path(log_line.split(" log: ", 1)[1])
    assert log_path.exists() and "test_fails_and_names_the_log" in str(log_path)
    assert "started" in out.split("minikafka broker logs", 1)[1]
    # ...and the last requests its broker answered: the inner test's Metadata, from kafka-python.
    requests = out.split("minikafka last requests", 1)[1]
    assert re.search(r" Metadata v\d+ from failing \(kafka-python [\d.]+\) -> NONE in ", requests), requests
    # Two tests shared one session broker; the function broker was a subprocess.
    sessions = printed(out, "SESSION")
    assert len(sessions) == 2 and sessions[0] == sessions[1]
    (function_broker,) = printed(out, "FUNCTION")
    assert function_broker[1] != "None"
    # --minikafka-data-dir keeps every broker's data under the given dir, one subdir per test.
    assert Path(function_broker[2]).is_relative_to(tmp_path / "kept")
    assert (tmp_path / "kept" / "test_function_broker" / "data" / "t-0").is_dir()


def test_in_process_option_and_fixed_session_port(tmp_path):
    with held_free_port() as port:
        result = run_inner(tmp_path, "--minikafka-in-process", "--minikafka-port", str(port), "-k",
                           "function_broker or session")
    out = result.stdout
    assert "3 passed" in out, out + result.stderr
    (function_broker,) = printed(out, "FUNCTION")
    assert function_broker[1] == "None"  # no pid: the broker ran on a thread of the test process
    assert printed(out, "SESSION")[0][0] == f"127.0.0.1:{port}"


def test_the_plugin_causes_no_deprecation_warnings(tmp_path):
    """kafka-python loads its message specs with importlib.resources.read_text, deprecated on Python 3.11-3.12:
    hundreds of warnings at its first import, which the plugin's clients and in-process brokers must not show a
    user's run (whose pytest has none of this project's warning filters)."""
    test_file = tmp_path / "test_plugin_only.py"
    test_file.write_text(textwrap.dedent(PLUGIN_ONLY_TESTS))
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-W", "default", str(test_file),
                             f"--basetemp={tmp_path / 'base'}"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=INNER_TIMEOUT_S)
    output = result.stdout + result.stderr
    assert "4 passed" in result.stdout, output
    assert "DeprecationWarning" not in output, output
