"""Runs one node (a broker or a controller) as a `python -m minikafka serve` child process, as an operator would run
Kafka: started until it prints its readiness line, stopped by SIGTERM, crashed by SIGKILL, frozen by SIGSTOP.

Each child is the leader of its own process group, so a Ctrl-C at the terminal reaches only the program that
started it, which stops its nodes in order (brokers before their controller).
"""
from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

from minikafka.control_client import parse_address

READY_PREFIX = b"minikafka listening on "
STOP_TIMEOUT_S = 30.0
PAUSE_TIMEOUT_S = 5.0


class BrokerStartError(RuntimeError):
    """The node's process exited or stayed silent instead of announcing its listener; the message has its log."""


def _log_tail(path: Path, limit: int = 4000) -> str:
    try:
        return path.read_text(errors="replace")[-limit:]
    except OSError:
        return ""


def _process_state(pid: int) -> str | None:
    """The kernel's one-letter state of a process (T: stopped), where /proc shows it."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0].decode()
    except (OSError, IndexError):
        return None


class SubprocessRunner:
    """One node process. `start` returns once it printed `ready_prefix` (a broker: it accepts connections);
    `stop` is SIGTERM, `kill` SIGKILL, `pause`/`resume` SIGSTOP/SIGCONT."""

    def __init__(self, properties: dict[str, str], log_path: Path, start_timeout_s: float,
                 ready_prefix: bytes = READY_PREFIX, clock: str = "system") -> None:
        self.properties = properties
        self.log_path = log_path
        self.start_timeout_s = start_timeout_s
        self.ready_prefix = ready_prefix
        self.clock = clock
        self.proc: subprocess.Popen | None = None
        self.paused = False

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> tuple[str, int]:
        """Start the process and wait for its readiness line; returns the bound (host, port)."""
        cmd = [sys.executable, "-m", "minikafka", "serve"]
        if self.clock != "system":
            cmd += ["--clock", self.clock, "--testing"]  # a handle is a test's: its node may have a manual clock
        for key, value in self.properties.items():
            cmd += ["--override", f"{key}={value}"]
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log_file:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log_file,
                                         process_group=0)
        try:
            line = self._read_ready_line(self.proc)
        except BaseException:
            self.kill()
            raise
        return parse_address(line[len(self.ready_prefix):].decode().strip())

    def _read_ready_line(self, proc: subprocess.Popen) -> bytes:
        deadline = time.monotonic() + self.start_timeout_s
        buffer = b""
        assert proc.stdout is not None  # started with stdout=PIPE
        fd = proc.stdout.fileno()
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while True:
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if line.startswith(self.ready_prefix):
                        return line
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise BrokerStartError(f"{self._what()} did not start within {self.start_timeout_s:.0f} s; "
                                           f"log {self.log_path}:\n{_log_tail(self.log_path)}")
                if selector.select(remaining):
                    chunk = os.read(fd, 4096)
                    if not chunk:
                        code = proc.wait(10)
                        raise BrokerStartError(f"{self._what()} exited with code {code} before it was ready; "
                                               f"log {self.log_path}:\n{_log_tail(self.log_path)}")
                    buffer += chunk

    def _what(self) -> str:
        return f"{self.properties.get('process.roles') or 'broker'} {self.properties.get('node.id', '')}".strip()

    def pause(self) -> None:
        """SIGSTOP; returns once the kernel shows the process stopped (where /proc shows it)."""
        if self.proc is None or self.proc.poll() is not None:
            raise RuntimeError(f"{self._what()} is not running")
        self.proc.send_signal(signal.SIGSTOP)
        self.paused = True
        deadline = time.monotonic() + PAUSE_TIMEOUT_S
        while _process_state(self.proc.pid) not in ("T", "t", "Z", "X", None):  # stopped, or gone
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self._what()} (pid {self.proc.pid}) did not stop within {PAUSE_TIMEOUT_S} s "
                                   "of SIGSTOP")
            time.sleep(0.001)

    def resume(self) -> None:
        """SIGCONT: the process runs on from where it was frozen."""
        if self.proc is None or self.proc.poll() is not None:
            raise RuntimeError(f"{self._what()} is not running")
        self.proc.send_signal(signal.SIGCONT)
        self.paused = False

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> int | None:
        """Clean shutdown (SIGTERM): a broker flushes and checkpoints. Killed if it takes over `timeout_s`."""
        if self.proc is None:
            return None
        try:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                if self.paused:  # a stopped process handles the SIGTERM once it runs again
                    self.proc.send_signal(signal.SIGCONT)
            try:
                return self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                return self.proc.wait(10)
        finally:
            self._reap()

    def kill(self) -> None:
        """kill -9: nothing of the node's shutdown runs, as in a crash (also of a paused process)."""
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
        self.paused = False
