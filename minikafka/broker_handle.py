"""`minikafka.Broker`: one real broker for a test or a script, started and cleaned up by a `with` block.

    with minikafka.Broker() as broker:
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
        ...
        broker.faults.fail_requests("Produce", "NOT_LEADER_OR_FOLLOWER", count=2)
        broker.restart()
        assert [r.value for r in broker.state.records("t", 0)] == [b"a", b"b"]

By default the broker is a `python -m minikafka serve` child process on a free loopback port with a temporary
data dir, removed on exit (also when the block raises) unless `keep_data=True` or the dir was given. The handle
holds its port from the first start until `close()` (on Linux), so a restart never finds it taken.
`in_process=True` runs it on a thread of this process instead, for the fastest start.
"""
from __future__ import annotations

import shutil
import socket
import tempfile
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from minikafka.port_reservation import reserve_port

if TYPE_CHECKING:
    from minikafka.integration.faults import Faults
    from minikafka.integration.in_process_runner import InProcessRunner
    from minikafka.integration.state import State
    from minikafka.integration.subprocess_runner import SubprocessRunner

# Test-friendly defaults, as Kafka's own test harness sets them; `config` overrides them.
TEST_DEFAULTS = {
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "1",
}
# Set through the handle's own arguments, so the handle knows where the broker listens and stores.
OWNED_PROPERTIES = ("listeners", "advertised.listeners", "log.dirs", "log.dir", "node.id")
DEFAULT_START_TIMEOUT_S = 30.0


def _property_value(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _emergency_stop(runner: InProcessRunner | SubprocessRunner) -> None:
    """At interpreter exit, never leave a broker process behind."""
    if runner.running:
        if runner.pid is not None:
            runner.kill()
        else:
            runner.stop(5)


class Broker:
    """A handle on one broker. Not started until `start()` or `with`; restartable on the same port and data."""

    def __init__(self, *, port: int | None = None, host: str = "127.0.0.1", data_dir: str | Path | None = None,
                 keep_data: bool = False, in_process: bool = False, config: Mapping[str, object] | None = None,
                 node_id: int = 1, log_path: str | Path | None = None,
                 start_timeout_s: float = DEFAULT_START_TIMEOUT_S) -> None:
        """
        port: the listener's port (default: a free one, kept across restarts).
        data_dir: log.dirs (default: a temporary dir, removed on close unless keep_data).
        config: broker properties by Kafka's names, e.g. {"num.partitions": 3, "log.segment.bytes": 1048576}.
        log_path: the broker's log file (default: next to the data dir).
        """
        owned = [name for name in (config or {}) if name in OWNED_PROPERTIES]
        if owned:
            raise ValueError(f"set {', '.join(owned)} through Broker(port=, host=, data_dir=, node_id=), "
                             "not config")
        self.host = host
        self.node_id = node_id
        self.in_process = in_process
        self.keep_data = keep_data
        self.start_timeout_s = start_timeout_s
        self.config = {k: _property_value(v) for k, v in {**TEST_DEFAULTS, **(config or {})}.items()}
        self._temp_root: Path | None = None
        if data_dir is None:
            self._temp_root = Path(tempfile.mkdtemp(prefix="minikafka-"))
            self.data_dir = self._temp_root / "data"
        else:
            self.data_dir = Path(data_dir).absolute()
        if log_path is not None:
            self.log_path = Path(log_path).absolute()
        elif self._temp_root is not None:
            self.log_path = self._temp_root / "broker.log"
        else:
            self.log_path = self.data_dir.with_name(self.data_dir.name + ".log")
        self._port = port or 0
        self._reservation: socket.socket | None = None
        self._bound: tuple[str, int] | None = None
        self._runner: InProcessRunner | SubprocessRunner | None = None
        self._faults: Faults | None = None
        self._state: State | None = None
        self._finalizer: weakref.finalize | None = None

    # ---- lifecycle ----------------------------------------------------------------------------------------------

    def properties(self) -> dict[str, str]:
        """The broker's properties as `minikafka serve` gets them."""
        return {**self.config, "node.id": str(self.node_id), "listeners": f"PLAINTEXT://{self.host}:{self._port}",
                "log.dirs": str(self.data_dir)}

    def start(self) -> Broker:
        """Start the broker and return once it accepts connections (BrokerStartError, naming its log, if not)."""
        if self.running:
            return self
        from minikafka.integration.in_process_runner import InProcessRunner
        from minikafka.integration.subprocess_runner import SubprocessRunner

        if self._runner is not None:  # it ended by itself (a signal, a control-API shutdown): reap what is left
            self.kill()
        if self._reservation is None:
            self._reservation = reserve_port(self.host, self._port)
            if self._reservation is not None:
                self._port = self._reservation.getsockname()[1]
        runner_class = InProcessRunner if self.in_process else SubprocessRunner
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._runner = runner_class(self.properties(), self.log_path, self.start_timeout_s)
        self._bound = self._runner.start()
        self._port = self._bound[1]  # a restart comes back on the same port
        self._finalizer = weakref.finalize(self, _emergency_stop, self._runner)
        return self

    def stop(self) -> int | None:
        """Clean shutdown, as on SIGTERM: requests in flight are answered, logs flushed and checkpointed.

        Returns the broker process's exit status (0 for a clean stop; None in-process or when not started).
        """
        if self._runner is None:
            return None
        status = self._runner.stop()
        self._forget_runner()
        return status

    def kill(self) -> None:
        """Crash the broker (SIGKILL): no flush, no checkpoint; the next start recovers from the log files."""
        if self._runner is not None:
            self._runner.kill()
            self._forget_runner()

    def restart(self, *, kill: bool = False) -> Broker:
        """Stop (or kill) and start again on the same port and data dir. Faults are forgotten, as in Kafka."""
        if kill:
            self.kill()
        else:
            self.stop()
        return self.start()

    def close(self) -> None:
        """Stop the broker, release its port and delete its temporary data dir (unless keep_data)."""
        try:
            if self._state is not None:
                self._state.close()
                self._state = None
            self.stop()
        finally:
            if self._reservation is not None:
                self._reservation.close()
                self._reservation = None
            if self._temp_root is not None and not self.keep_data:
                shutil.rmtree(self._temp_root, ignore_errors=True)

    def _forget_runner(self) -> None:
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        self._runner = None
        self._bound = None

    def __enter__(self) -> Broker:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ---- where it is ----------------------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._runner is not None and self._runner.running

    @property
    def port(self) -> int:
        """The listener's port (0 before the first start when none was given)."""
        return self._port

    @property
    def bootstrap_servers(self) -> str:
        if self._bound is None:
            raise RuntimeError("the broker is not running: start() it first")
        return f"{self._bound[0]}:{self._bound[1]}"

    @property
    def pid(self) -> int | None:
        """The broker process id (None in-process or when stopped)."""
        return self._runner.pid if self._runner is not None else None

    # ---- faults and state -----------------------------------------------------------------------------------------

    def _control(self):
        from minikafka.integration.control_client import ControlClient

        return ControlClient(self.bootstrap_servers)

    @property
    def faults(self) -> Faults:
        """Fault injection: failed requests, latency, closed connections, a full disk (see integration.faults)."""
        from minikafka.integration.faults import Faults

        if self._faults is None:
            self._faults = Faults(self._control())
        return self._faults

    @property
    def state(self) -> State:
        """Topics, partitions (leader, ISR, HW, LEO), records and groups, read over the network."""
        from minikafka.integration.state import State

        if self._state is None:
            self._state = State(self.bootstrap_servers, [self._control()])
        return self._state

    def __repr__(self) -> str:
        where = self.bootstrap_servers if self._bound else "stopped"
        mode = "in-process" if self.in_process else f"pid {self.pid}"
        return f"<minikafka.Broker node {self.node_id} {where} ({mode}) data {self.data_dir}>"
