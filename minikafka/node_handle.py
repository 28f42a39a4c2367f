"""What `minikafka.Broker` and a cluster's controller handle share: one node's lifecycle.

A node is a `python -m minikafka serve` child process (or, with `in_process=True`, a thread of this process) with
a data dir, a log file and a listener port held from its first start until `close()`, so it can be stopped,
killed, restarted on the same port and data, and, as a process, paused (SIGSTOP) and resumed (SIGCONT) the way
an operator or a chaos test handles Kafka's own processes.
"""
from __future__ import annotations

import functools
from abc import abstractmethod
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Self

from minikafka.local_server import LocalServer
from minikafka.subprocess_runner import SubprocessRunner

if TYPE_CHECKING:
    from minikafka.in_process_runner import InProcessRunner

DEFAULT_START_TIMEOUT_S = 30.0
# How long a handle's wait_for_* waits by default: a budget, not an expectation.
DEFAULT_WAIT_S = 30.0
# How long an in-process node gets to stop at interpreter exit (a process is killed instead).
EXIT_STOP_TIMEOUT_S = 5.0
# A node's clock: the system's, or a manual one a test advances (see minikafka.clock).
CLOCKS = ("system", "manual")


def property_value(value: object) -> str:
    """A Python value as Kafka writes the property (`true`, not `True`)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


class NodeHandle(LocalServer):
    """One node, not started until `start()` or `with`; restartable on the same port and data."""

    ready_prefix: bytes  # the line `minikafka serve` prints once this kind of node is ready
    kind: str  # "broker" or "controller", for messages

    def __init__(self, *, port: int | None, host: str, data_dir: str | Path | None, keep_data: bool,
                 in_process: bool, config: Mapping[str, object], node_id: int, log_path: str | Path | None,
                 start_timeout_s: float, clock: str = "system") -> None:
        if clock not in CLOCKS:
            raise ValueError(f"clock {clock!r}: expected one of {', '.join(CLOCKS)}")
        super().__init__(host=host, port=port, data_dir=data_dir, keep_data=keep_data, temp_prefix="minikafka-")
        self.node_id = node_id
        self.in_process = in_process
        self.start_timeout_s = start_timeout_s
        self.clock_mode = clock
        self.config = {k: property_value(v) for k, v in config.items()}
        if log_path is not None:
            self.log_path = Path(log_path).absolute()
        elif self._temp_root is not None:
            self.log_path = self._temp_root / f"{self.kind}.log"
        else:
            self.log_path = self.data_dir.with_name(self.data_dir.name + ".log")
        self._bound: tuple[str, int] | None = None
        self._runner: InProcessRunner | SubprocessRunner | None = None

    @abstractmethod
    def properties(self) -> dict[str, str]:
        """The node's properties as `minikafka serve` gets them."""

    # ---- lifecycle ----------------------------------------------------------------------------------------------

    def start(self) -> Self:
        """Start the node and return once it is ready (BrokerStartError, naming its log, if it is not)."""
        if self.running:
            return self
        if self._runner is not None:  # it ended by itself (a signal, a control-API shutdown): reap what is left
            self.kill()
        self._reserve_port()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        runner: InProcessRunner | SubprocessRunner
        if self.in_process:
            # lazy: it brings in logging, a fifth of `import minikafka`, for in-process nodes only
            from minikafka.in_process_runner import InProcessRunner

            runner = InProcessRunner(self.properties(), self.log_path, self.start_timeout_s, self.clock_mode)
        else:
            runner = SubprocessRunner(self.properties(), self.log_path, self.start_timeout_s, self.ready_prefix,
                                      self.clock_mode)
        self._runner = runner
        self._bound = runner.start()
        self._port = self._bound[1]  # a restart comes back on the same port
        self._guard(runner.kill if runner.pid is not None else functools.partial(runner.stop, EXIT_STOP_TIMEOUT_S))
        return self

    def stop(self) -> int | None:
        """Clean shutdown, as on SIGTERM (a paused process is resumed to run it).

        Returns the process's exit status (0 for a clean stop; None in-process or when not started).
        """
        if self._runner is None:
            return None
        status = self._runner.stop()
        self._forget_runner()
        return status

    def kill(self) -> None:
        """Crash the node (SIGKILL): no flush, no checkpoint; the next start recovers from its files."""
        if self._runner is not None:
            self._runner.kill()
            self._forget_runner()

    def pause(self) -> None:
        """Freeze the process (SIGSTOP), as a long GC pause or a hung host: it answers nobody, its connections
        stay open, and the controller fences it only when its session times out. Undo with `resume()`."""
        self._process_runner("pause").pause()

    def resume(self) -> None:
        """Let a paused process run again (SIGCONT)."""
        self._process_runner("resume").resume()

    def _process_runner(self, action: str) -> SubprocessRunner:
        if self.in_process:
            raise RuntimeError(f"{action}() stops and continues a {self.kind} process by signal; this {self.kind} "
                               "runs in-process (in_process=True), on a thread that cannot be frozen alone")
        if not self.running or not isinstance(self._runner, SubprocessRunner):
            raise RuntimeError(f"{action}(): {self.kind} {self.node_id} is not running")
        return self._runner

    def _forget_runner(self) -> None:
        self._unguard()
        self._runner = None
        self._bound = None

    # ---- where it is ----------------------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        """Started and not exited (a paused process is running)."""
        return self._runner is not None and self._runner.running

    @property
    def paused(self) -> bool:
        return isinstance(self._runner, SubprocessRunner) and self._runner.paused and self._runner.running

    @property
    def returncode(self) -> int | None:
        """How the node's process ended, as subprocess tells it (-N: killed by signal N); None while it runs, before
        a start, after stop() or kill(), and in-process."""
        if isinstance(self._runner, SubprocessRunner) and self._runner.proc is not None:
            return self._runner.proc.poll()
        return None

    @property
    def port(self) -> int:
        """The listener's port (0 before the first start when none was given)."""
        return self._port

    @property
    def address(self) -> str:
        """HOST:PORT of the running node's listener."""
        if self._bound is None:
            raise RuntimeError(f"{self.kind} {self.node_id} is not running: start() it first")
        return f"{self._bound[0]}:{self._bound[1]}"

    @property
    def pid(self) -> int | None:
        """The process id (None in-process or when stopped)."""
        return self._runner.pid if self._runner is not None else None

    def _mode(self) -> str:
        if self.in_process:
            return "in-process"
        return f"pid {self.pid}, paused" if self.paused else f"pid {self.pid}"
