"""Runs one broker as a `python -m minikafka serve` child process, as an operator would run Kafka."""
from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

from minikafka.integration.control_client import parse_address

READY_PREFIX = b"minikafka listening on "
STOP_TIMEOUT_S = 30.0


class BrokerStartError(RuntimeError):
    """The broker process exited or stayed silent instead of announcing its listener; the message has its log."""


def _log_tail(path: Path, limit: int = 4000) -> str:
    try:
        return path.read_text(errors="replace")[-limit:]
    except OSError:
        return ""


class SubprocessRunner:
    """One broker process. `start` returns once it accepts connections; `stop` is SIGTERM, `kill` SIGKILL."""

    def __init__(self, properties: dict[str, str], log_path: Path, start_timeout_s: float) -> None:
        self.properties = properties
        self.log_path = log_path
        self.start_timeout_s = start_timeout_s
        self.proc: subprocess.Popen | None = None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> tuple[str, int]:
        """Start the process and wait for its readiness line; returns the bound (host, port)."""
        cmd = [sys.executable, "-m", "minikafka", "serve"]
        for key, value in self.properties.items():
            cmd += ["--override", f"{key}={value}"]
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log_file:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log_file)
        try:
            line = self._read_ready_line()
        except BaseException:
            self.kill()
            raise
        return parse_address(line[len(READY_PREFIX):].decode().strip())

    def _read_ready_line(self) -> bytes:
        deadline = time.monotonic() + self.start_timeout_s
        buffer = b""
        fd = self.proc.stdout.fileno()
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while True:
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if line.startswith(READY_PREFIX):
                        return line
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise BrokerStartError(f"broker did not start within {self.start_timeout_s:.0f} s; "
                                           f"log {self.log_path}:\n{_log_tail(self.log_path)}")
                if selector.select(remaining):
                    chunk = os.read(fd, 4096)
                    if not chunk:
                        code = self.proc.wait(10)
                        raise BrokerStartError(f"broker exited with code {code} before it was ready; "
                                               f"log {self.log_path}:\n{_log_tail(self.log_path)}")
                    buffer += chunk

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> int | None:
        """Clean shutdown (SIGTERM): the broker flushes and checkpoints. Killed if it takes over `timeout_s`."""
        if self.proc is None:
            return None
        try:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                return self.proc.wait(10)
        finally:
            self._reap()

    def kill(self) -> None:
        """kill -9: nothing of the broker's shutdown runs, as in a crash."""
        if self.proc is None:
            return
        try:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait(10)
        finally:
            self._reap()

    def _reap(self) -> None:
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()
        self.proc = None
