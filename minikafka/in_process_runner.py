"""Runs one node inside this process: a background thread with its own trio loop, for the fastest start.

The node is the same KafkaNode `minikafka serve` runs (a broker with its controller unless process.roles says
otherwise); only the process boundary is missing: `kill` makes it stop as a killed process would (nothing flushed
or checkpointed). Its log lines (the `minikafka` loggers, from the node's thread) go to its log file.
"""
from __future__ import annotations

import importlib
import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from minikafka.protocol.schema_loading import quiet_schema_loading
from minikafka.subprocess_runner import BrokerStartError

if TYPE_CHECKING:
    from trio.lowlevel import TrioToken

    from minikafka.broker.kafka_node import KafkaNode

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
STOP_TIMEOUT_S = 30.0


class _ThreadLogHandler(logging.FileHandler):
    """Writes the records logged from one thread (one broker's trio loop) to that broker's log file."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, encoding="utf-8")
        self.thread_id: int | None = None
        self.setFormatter(logging.Formatter(LOG_FORMAT))
        self.addFilter(lambda record: record.thread == self.thread_id)


def _sole_cause(exc: BaseException) -> BaseException:
    """The one exception inside the nurseries' exception groups it is wrapped in, so the message names it."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


class InProcessRunner:
    """One KafkaNode on a daemon thread. `start` returns once it is ready (its broker accepting connections);
    `stop` shuts it down."""

    def __init__(self, properties: dict[str, str], log_path: Path, start_timeout_s: float,
                 clock: str = "system") -> None:
        self.properties = properties
        self.log_path = log_path
        self.start_timeout_s = start_timeout_s
        self.clock = clock
        self._thread: threading.Thread | None = None
        self._node: KafkaNode | None = None
        self._token: TrioToken | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._log_handler: _ThreadLogHandler | None = None
        self._raised_level = False

    @property
    def pid(self) -> int | None:
        return None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> tuple[str, int]:
        from minikafka.config import BrokerConfig

        # The node's modules, with kafka-python, are imported on this thread, where warnings can be filtered (not on
        # the node's: catch_warnings is process-wide).
        with quiet_schema_loading():
            importlib.import_module("minikafka.broker.kafka_node")
        config = BrokerConfig(dict(self.properties))
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._attach_log()
        self._ready.clear()
        self._error = None
        self._thread = threading.Thread(target=self._run, args=(config,), name="minikafka-broker", daemon=True)
        self._thread.start()
        if not self._ready.wait(self.start_timeout_s):
            self.stop()
            raise BrokerStartError(f"in-process broker did not start within {self.start_timeout_s:.0f} s; "
                                   f"log {self.log_path}")
        if self._error is not None:
            error, self._error = self._error, None
            self._join()
            raise BrokerStartError(f"in-process broker failed to start: {error!r}; log {self.log_path}") from error
        return self.address

    @property
    def address(self) -> tuple[str, int]:
        """The broker's first listener, or, for a controller-only node, its controller listener."""
        node = self._node
        if node is None:
            raise RuntimeError("the in-process node is not running")
        if node.broker is not None:
            return node.broker.bound_addresses[0]
        address = node.controller_address
        if address is None:
            raise RuntimeError("the in-process node has neither a broker nor a controller listener")
        return address

    def _run(self, config) -> None:
        import trio

        from minikafka.broker.clock.broker_clock import BrokerClock

        assert self._log_handler is not None  # attached by start() before this thread starts
        self._log_handler.thread_id = threading.get_ident()
        try:
            trio.run(self._serve, config, clock=BrokerClock(manual=self.clock == "manual"))
        except BaseException as exc:
            if not self._ready.is_set():
                self._error = _sole_cause(exc)
            else:
                logging.getLogger("minikafka").exception("in-process broker failed")
        finally:
            self._ready.set()

    async def _serve(self, config) -> None:
        import trio

        from minikafka.broker.kafka_node import KafkaNode

        self._token = trio.lowlevel.current_trio_token()
        self._node = KafkaNode(config)
        async with trio.open_nursery() as nursery:
            await nursery.start(self._node.run)
            self._ready.set()

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """Clean shutdown: the broker answers requests in flight, flushes and checkpoints."""
        if self.running and self._node is not None and self._token is not None:
            import trio

            try:
                trio.from_thread.run_sync(self._node.stop, trio_token=self._token)
            except trio.RunFinishedError:
                pass
        self._join(timeout_s)

    def kill(self) -> None:
        """A crash without the process boundary: the broker drops everything in flight and writes nothing more
        (no flush, no checkpoint); what it wrote stays in the page cache, as after kill -9."""
        if self.running and self._node is not None and self._token is not None:
            import trio

            try:
                trio.from_thread.run_sync(self._node.crash, trio_token=self._token)
            except trio.RunFinishedError:
                pass
        self._join()

    def _join(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        if self._thread is not None:
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                raise RuntimeError(f"in-process broker did not stop within {timeout_s:.0f} s; log {self.log_path}")
        self._thread = None
        self._node = None
        self._token = None
        self._detach_log()

    def _attach_log(self) -> None:
        logger = logging.getLogger("minikafka")
        self._log_handler = _ThreadLogHandler(self.log_path)
        logger.addHandler(self._log_handler)
        if logger.getEffectiveLevel() > logging.INFO:
            logger.setLevel(logging.INFO)
            self._raised_level = True

    def _detach_log(self) -> None:
        if self._log_handler is None:
            return
        logger = logging.getLogger("minikafka")
        logger.removeHandler(self._log_handler)
        self._log_handler.close()
        self._log_handler = None
        if self._raised_level and not any(isinstance(h, _ThreadLogHandler) for h in logger.handlers):
            logger.setLevel(logging.NOTSET)
        self._raised_level = False
