"""Shared test fixtures: real broker processes on free loopback ports, stopped by the test that started them."""
from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

READY_PREFIX = "minikafka listening on "
START_TIMEOUT_S = 20


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class BrokerProcess:
    """A `minikafka serve` subprocess; `bootstrap_servers` once started."""

    def __init__(self, data_dir: Path, port: int | None = None, overrides: dict[str, object] | None = None) -> None:
        self.data_dir = data_dir
        self.port = port or free_port()
        self.overrides = dict(overrides or {})
        self.log_path = data_dir.parent / f"{data_dir.name}-broker.log"
        self.proc: subprocess.Popen | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> BrokerProcess:
        cmd = [sys.executable, "-m", "minikafka", "serve", "--listeners", f"PLAINTEXT://127.0.0.1:{self.port}",
               "--log-dirs", str(self.data_dir)]
        for key, value in self.overrides.items():
            cmd += ["--override", f"{key}={value}"]
        log_file = open(self.log_path, "ab")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log_file, text=True)
        log_file.close()
        deadline = time.monotonic() + START_TIMEOUT_S
        line = ""
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if line.startswith(READY_PREFIX) or not line:
                break
        if not line.startswith(READY_PREFIX):
            self.kill()
            raise RuntimeError(f"broker did not start; its log:\n{self.log_path.read_text()[-4000:]}")
        return self

    def stop(self, timeout: float = 20) -> int:
        """Clean shutdown (SIGTERM), as an operator would."""
        if self.proc is None:
            return 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        finally:
            self._reap()

    def kill(self) -> None:
        """kill -9: no shutdown code runs."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
        self._reap()

    def _reap(self) -> None:
        if self.proc is not None:
            try:
                self.proc.wait(10)
            finally:
                if self.proc.stdout:
                    self.proc.stdout.close()
                self.proc = None

    def log_text(self) -> str:
        return self.log_path.read_text() if self.log_path.exists() else ""


@pytest.fixture
def broker_factory(tmp_path):
    started: list[BrokerProcess] = []

    def make(name: str = "broker", port: int | None = None, **overrides) -> BrokerProcess:
        proc = BrokerProcess(tmp_path / name, port, {k.replace("_", "."): v for k, v in overrides.items()})
        started.append(proc)
        return proc.start()

    yield make
    for proc in started:
        proc.kill()


@pytest.fixture
def broker(broker_factory) -> BrokerProcess:
    return broker_factory()


@pytest.fixture
def unique_topic(request) -> str:
    return "t-" + request.node.name.replace("[", "-").replace("]", "").replace("/", "-")[:150]
