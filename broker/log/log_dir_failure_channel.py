"""Failed log dirs (Kafka's LogDirFailureChannel).

Whatever meets an I/O error in a log dir reports the dir here; the first report of a dir queues it, later ones are
ignored. The channel's owner (the replica manager, whose handleLogDirFailure takes each queued dir offline) runs it
with its handler. A dir stays offline until the broker restarts, as in Kafka.
"""
from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable
from pathlib import Path

import trio

log = logging.getLogger("minikafka.log_dir_failure")


class LogDirFailureChannel:
    def __init__(self) -> None:
        self.offline: set[Path] = set()
        self._send, self._receive = trio.open_memory_channel[Path](math.inf)

    def maybe_add_offline_log_dir(self, path: Path, message: str, exc: BaseException | None = None) -> None:
        """Report a failed dir; safe to call from the event loop any number of times."""
        if path in self.offline:
            return
        self.offline.add(path)
        log.error("%s: log dir %s failed%s", message, path, f": {exc}" if exc is not None else "")
        self._send.send_nowait(path)

    async def run(self, handle: Callable[[Path], Awaitable[object]], *,
                  task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Hand each failed dir, in the order reported, to `handle` until cancelled."""
        task_status.started()
        async for path in self._receive:
            await handle(path)
