"""The `.lock` of a log dir (Kafka's FileLock and LogManager.lockLogDirs): one holder, released with its file or
its process, a stale file no obstacle, and never taken for a partition of the dir."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from minikafka.storage.errors import KafkaStorageError
from minikafka.storage.file_lock import FileLock
from minikafka.storage.log_dir import LOCK_FILE_NAME, LogDir, lock_log_dir, lock_log_dirs, parse_partition_dir_name

KAFKA_SENTENCE = "A Kafka instance in another process or thread is using this directory."
HOLDER_TIMEOUT_S = 30.0
# A process that holds the lock of a dir until it is killed; it says so once it holds it.
HOLDER = textwrap.dedent("""
    import sys, time
    from minikafka.storage.log_dir import lock_log_dir
    lock = lock_log_dir(sys.argv[1])
    print("locked", flush=True)
    time.sleep(600)
""")


def test_a_second_lock_in_the_same_process_is_refused_until_the_first_is_released(tmp_path: Path) -> None:
    first = FileLock(tmp_path / LOCK_FILE_NAME)
    second = FileLock(tmp_path / LOCK_FILE_NAME)
    assert first.try_lock() and first.held
    assert not second.try_lock() and not second.held
    first.release()
    assert second.try_lock()
    second.release()
    assert (tmp_path / LOCK_FILE_NAME).exists()  # the file stays, as Kafka leaves its .lock


def test_lock_log_dir_creates_the_dir_and_refuses_a_second_holder_with_kafkas_message(tmp_path: Path) -> None:
    directory = tmp_path / "new" / "dir"
    with lock_log_dir(directory):
        assert (directory / LOCK_FILE_NAME).is_file()
        with pytest.raises(KafkaStorageError) as refused:
            lock_log_dir(directory)
        assert str(refused.value) == f"Failed to acquire lock on file .lock in {directory}. {KAFKA_SENTENCE}"
    lock_log_dir(directory).release()  # released on leaving the block


def test_a_stale_lock_file_with_no_holder_is_no_obstacle(tmp_path: Path) -> None:
    (tmp_path / LOCK_FILE_NAME).write_bytes(b"left by a killed broker")
    with lock_log_dir(tmp_path):
        pass
    assert (tmp_path / LOCK_FILE_NAME).read_bytes() == b"left by a killed broker"  # never truncated


def test_lock_log_dirs_takes_all_or_none(tmp_path: Path) -> None:
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    with lock_log_dir(b), pytest.raises(KafkaStorageError, match="lock on file .lock in .*/b"):
        lock_log_dirs([a, b, c])
    with lock_log_dirs([a, b, c]):  # the lock of `a` was released when `b` failed
        with pytest.raises(KafkaStorageError):
            lock_log_dir(c)
    lock_log_dirs([a, b, c]).close()


def test_a_dir_that_cannot_be_locked_is_a_storage_error(tmp_path: Path) -> None:
    (tmp_path / LOCK_FILE_NAME).mkdir()  # not a file: it cannot be opened to lock
    with pytest.raises(KafkaStorageError, match="Disk error while locking directory"):
        lock_log_dir(tmp_path)


def test_another_process_holds_the_lock_until_it_is_killed(tmp_path: Path) -> None:
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path)], stdout=subprocess.PIPE,
                              stdin=subprocess.DEVNULL)
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == b"locked\n"
        with pytest.raises(KafkaStorageError, match=KAFKA_SENTENCE):
            lock_log_dir(tmp_path)
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(HOLDER_TIMEOUT_S)
        holder.stdout.close()
    with lock_log_dir(tmp_path):  # the kernel dropped the killed holder's lock
        pass


def test_the_lock_file_is_not_a_partition_of_the_dir(tmp_path: Path) -> None:
    log_dir = LogDir(tmp_path)
    (tmp_path / "t-0").mkdir()
    with lock_log_dir(tmp_path):
        assert parse_partition_dir_name(LOCK_FILE_NAME) is None
        assert [(topic, index) for topic, index, _path in log_dir.partition_dirs()] == [("t", 0)]
