"""An exclusive lock on a file, as Kafka's FileLock: what keeps two brokers or controllers out of one directory.

The lock is flock(2) on a file object held open for as long as the lock is held. flock, not fcntl's record locks
(lockf): a record lock is the process's, so a second lock of the same file from the same process would succeed,
while a flock belongs to one open file description and refuses a second open even from the same process (as
Java's OverlappingFileLockException does), so two in-process nodes cannot share a directory either. The kernel
drops the lock with the last descriptor, so a killed holder leaves no lock behind: a `.lock` file left on disk
is no obstacle to the next holder.
"""
from __future__ import annotations

import fcntl
from pathlib import Path
from types import TracebackType
from typing import BinaryIO


class FileLock:
    """An exclusive lock on `path` (created if missing, never truncated or deleted), not held until `try_lock()`."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._file: BinaryIO | None = None

    @property
    def held(self) -> bool:
        return self._file is not None

    def try_lock(self) -> bool:
        """Take the lock without waiting; False if another open of the file holds it. OSError when the file
        cannot be opened."""
        if self._file is not None:
            return True
        file = open(self.path, "ab")  # held open for as long as the lock is held
        try:
            fcntl.flock(file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            file.close()
            return False
        except BaseException:
            file.close()
            raise
        self._file = file
        return True

    def release(self) -> None:
        """Let go of the lock (closing the file releases it); the file stays."""
        if self._file is not None:
            file, self._file = self._file, None
            file.close()

    def __enter__(self) -> FileLock:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.release()
