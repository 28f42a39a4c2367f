"""The windowed-counts example end to end: in local mode and on a Spark standalone cluster."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

from spark_helpers import consume_all, create_topic, free_port, produce, wait_until

pytestmark = pytest.mark.spark

BASE_TS = 1_700_000_000_000
WINDOW_S = 10
RUN_TIMEOUT_S = 240


def _produce_clicks(bootstrap: str, topic: str) -> Counter:
    """Records over four 10-second windows and three keys; returns the expected counts."""
    create_topic(bootstrap, topic, partitions=2)
    records = []
    for i in range(120):
        timestamp = BASE_TS + i * 333
        records.append({"key": f"user{i % 3}".encode(), "value": b"click", "timestamp_ms": timestamp})
    produce(bootstrap, topic, records)
    return Counter((r["key"].decode(), r["timestamp_ms"] // 1000 // WINDOW_S * WINDOW_S) for r in records)


def _final_counts(bootstrap: str, topic: str) -> Counter:
    """The last count emitted for each (key, window): complete mode re-emits every window."""
    latest: dict = {}
    for record in consume_all(bootstrap, topic):
        value = json.loads(record.value)
        assert record.key.decode() == f"{value['key']}@{value['window_start']}"
        assert value["window_end"] - value["window_start"] == WINDOW_S
        latest[(value["key"], value["window_start"])] = value["count"]
    return Counter(latest)


def _run_pipeline(bootstrap: str, topic: str, tmp_path: Path, master: str, env: dict) -> str:
    args = [
        sys.executable, "-m", "minikafka.spark_connector.examples.windowed_counts",
        "--bootstrap-servers", bootstrap,
        "--input-topic", topic,
        "--output-topic", topic + "-counts",
        "--checkpoint", str(tmp_path / "checkpoint"),
        "--window", f"{WINDOW_S} seconds",
        "--master", master,
    ]  # fmt: skip
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-5000:]
    return done.stdout


def _env() -> dict:
    return {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}


def test_windowed_counts_local(broker, unique_topic, tmp_path):
    expected = _produce_clicks(broker.bootstrap_servers, unique_topic)
    out = _run_pipeline(broker.bootstrap_servers, unique_topic, tmp_path, "local[2]", _env())
    assert "done on local[2]" in out
    assert _final_counts(broker.bootstrap_servers, unique_topic + "-counts") == expected


class SparkDaemon:
    """One standalone master or worker JVM, started through PySpark's spark-class."""

    def __init__(self, name: str, args: list[str], log: Path, env: dict) -> None:
        import pyspark

        spark_class = Path(pyspark.__file__).parent / "bin" / "spark-class"
        self.name, self.log = name, log
        with open(log, "wb") as out:
            self.proc = subprocess.Popen([str(spark_class), *args], stdout=out, stderr=subprocess.STDOUT, env=env)

    def wait_for(self, line: str, timeout: float = 60) -> None:
        def ready() -> bool:
            assert self.proc.poll() is None, f"{self.name} exited:\n{self.log.read_text()[-3000:]}"
            return line in self.log.read_text(errors="replace")

        wait_until(ready, timeout, interval=0.5, message=f"{self.name}: {line!r}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


@pytest.fixture
def standalone_cluster(tmp_path):
    """A master and two single-core workers on 127.0.0.1, each its own JVM.

    Yields the master URL and the workers' work directories; every JVM is stopped afterwards.
    """
    env = {
        **_env(),
        "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
    }
    port = free_port()
    master_url = f"spark://127.0.0.1:{port}"
    daemons = []
    try:
        master = SparkDaemon(
            "master",
            ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
             "--webui-port", str(free_port())],
            tmp_path / "master.log",
            env,
        )  # fmt: skip
        daemons.append(master)
        master.wait_for("I have been elected leader")
        work_dirs = []
        for n in (1, 2):
            work_dir = tmp_path / f"worker{n}"
            work_dir.mkdir()
            work_dirs.append(work_dir)
            worker = SparkDaemon(
                f"worker{n}",
                ["org.apache.spark.deploy.worker.Worker", master_url, "--host", "127.0.0.1",
                 "--port", str(free_port()), "--webui-port", str(free_port()), "--cores", "1",
                 "--memory", "1g", "--work-dir", str(work_dir)],
                tmp_path / f"worker{n}.log",
                env,
            )  # fmt: skip
            daemons.append(worker)
        for worker in daemons[1:]:
            worker.wait_for("Successfully registered with master")
        yield master_url, work_dirs
    finally:
        for daemon in reversed(daemons):
            daemon.stop()


def test_windowed_counts_on_standalone_cluster(broker, unique_topic, tmp_path, standalone_cluster):
    master_url, work_dirs = standalone_cluster
    expected = _produce_clicks(broker.bootstrap_servers, unique_topic)
    out = _run_pipeline(broker.bootstrap_servers, unique_topic, tmp_path, master_url, _env())
    assert f"done on {master_url}" in out
    assert _final_counts(broker.bootstrap_servers, unique_topic + "-counts") == expected
    for work_dir in work_dirs:
        assert list(work_dir.glob("app-*/*/stderr")), f"no executor ran in {work_dir}"
