"""What every handle on one local server process shares, a broker node's or ZooKeeper's: a temporary data dir
unless one is given, a port reserved across restarts, and the lifecycle of a context manager (which a whole
cluster's handle shares too)."""
from __future__ import annotations

import shutil
import socket
import tempfile
import weakref
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import Self

from minikafka.port_reservation import reserve_port


def _emergency_stop(halt: Callable[[], object], reservation: socket.socket | None) -> None:
    """At interpreter exit (or when the handle is dropped), never leave a server process or a held port behind."""
    halt()
    if reservation is not None:
        reservation.close()


class StartedInWith(ABC):
    """Entering starts it (and closes it again if that fails); leaving closes it."""

    @abstractmethod
    def start(self) -> Self:
        """Start and return once ready."""

    @abstractmethod
    def close(self) -> None:
        """Stop and give back whatever was taken."""

    def __enter__(self) -> Self:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class LocalServer(StartedInWith):
    """Leaving, or `close()`, stops the server and gives back its port and its temporary data dir (unless
    keep_data)."""

    def __init__(self, *, host: str, port: int | None, data_dir: str | Path | None, keep_data: bool,
                 temp_prefix: str) -> None:
        self.host = host
        self.keep_data = keep_data
        self._temp_root: Path | None = None
        if data_dir is None:
            self._temp_root = Path(tempfile.mkdtemp(prefix=temp_prefix))
            self.data_dir = self._temp_root / "data"
        else:
            self.data_dir = Path(data_dir).absolute()
        self._port = port or 0
        self._reservation: socket.socket | None = None
        self._finalizer: weakref.finalize | None = None

    @abstractmethod
    def stop(self) -> int | None:
        """Clean shutdown; the process's exit status, None when it was not running."""

    @abstractmethod
    def kill(self) -> None:
        """Crash the server (SIGKILL): the next start recovers from its files."""

    def restart(self, *, kill: bool = False) -> Self:
        """Stop (or kill) and start again on the same port and data dir."""
        if kill:
            self.kill()
        else:
            self.stop()
        return self.start()

    def _guard(self, halt: Callable[[], object]) -> None:
        """Until `_unguard()`, run `halt` (which must not hold this handle) and give back the port at interpreter
        exit or when the handle is dropped, so that a forgotten server does not outlive its program."""
        self._finalizer = weakref.finalize(self, _emergency_stop, halt, self._reservation)

    def _unguard(self) -> None:
        """The server is down: nothing is left for the exit to stop."""
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None

    def _reserve_port(self) -> bool:
        """Hold the port (the given one, or a free one chosen now) until the server binds it; False when it
        cannot be held (the server then binds it without the reservation)."""
        if self._reservation is None:
            self._reservation = reserve_port(self.host, self._port)
            if self._reservation is not None:
                self._port = self._reservation.getsockname()[1]
        return self._reservation is not None

    def close(self) -> None:
        """Stop the server, release its port and delete its temporary data dir (unless keep_data)."""
        try:
            self.stop()
        finally:
            if self._reservation is not None:
                self._reservation.close()
                self._reservation = None
            if self._temp_root is not None and not self.keep_data:
                shutil.rmtree(self._temp_root, ignore_errors=True)
