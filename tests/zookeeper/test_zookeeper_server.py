"""`minikafka.zookeeper_server.ZooKeeperServer` against the machine's real ZooKeeper: serving, restarts on the same
port and data, crash recovery from the transaction log, and the error when ZooKeeper is not installed."""
from __future__ import annotations

import gc
import os
import socket
import sys
import time

import pytest
from kazoo.client import KazooClient

from minikafka.zookeeper_server import TICK_TIME_MS, ZooKeeperNotInstalled, ZooKeeperServer

CONNECT_TIMEOUT_S = 30.0


def _kazoo(server: ZooKeeperServer, session_timeout_s: float = 10.0) -> KazooClient:
    client = KazooClient(server.connect_string, timeout=session_timeout_s)
    client.start(timeout=CONNECT_TIMEOUT_S)
    return client


def _close(client: KazooClient) -> None:
    client.stop()
    client.close()


def _process_gone(pid: int, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == pid:  # a child not reaped yet
                return True
        except ChildProcessError:
            pass
        time.sleep(0.05)
    return False


def test_serves_clients_on_loopback(zookeeper):
    assert zookeeper.running
    host, port = zookeeper.connect_string.rsplit(":", 1)
    assert host == "127.0.0.1" and int(port) == zookeeper.port > 0
    assert "Mode: standalone" in zookeeper.command("srvr")
    assert zookeeper.command("ruok") == "imok"
    client = _kazoo(zookeeper)
    try:
        client.create("/greeting", b"hello")
        data, stat = client.get("/greeting")
        assert data == b"hello" and stat.version == 0
    finally:
        _close(client)
    assert "binding to port" in zookeeper.log_path.read_text()  # the server logs to its own file


def test_sessions_as_short_as_two_ticks_are_granted(zookeeper):
    client = _kazoo(zookeeper, session_timeout_s=2 * TICK_TIME_MS / 1000)
    try:
        assert f"to={2 * TICK_TIME_MS}," in zookeeper.command("cons")
    finally:
        _close(client)


def test_restart_keeps_port_and_data(zookeeper):
    client = _kazoo(zookeeper)
    try:
        client.create("/kept", b"before restart")
    finally:
        _close(client)
    port = zookeeper.port
    assert zookeeper.stop() is not None
    assert not zookeeper.running
    zookeeper.start()
    assert zookeeper.port == port
    client = _kazoo(zookeeper)
    try:
        assert client.get("/kept")[0] == b"before restart"
    finally:
        _close(client)
    zookeeper.restart()
    assert zookeeper.port == port and zookeeper.running


def test_kill_then_start_recovers_acknowledged_writes(zookeeper):
    client = _kazoo(zookeeper)
    try:
        for i in range(20):
            client.create(f"/node-{i}", str(i).encode())
        client.set("/node-0", b"updated")
    finally:
        _close(client)
    pid = zookeeper.pid
    zookeeper.kill()
    assert pid is not None and _process_gone(pid)
    zookeeper.start()
    client = _kazoo(zookeeper)
    try:
        assert sorted(c for c in client.get_children("/") if c.startswith("node-")) == sorted(
            f"node-{i}" for i in range(20))
        assert client.get("/node-0")[0] == b"updated"
        assert client.get("/node-19")[0] == b"19"
    finally:
        _close(client)


def test_restart_after_kill_in_one_call(zookeeper):
    client = _kazoo(zookeeper)
    try:
        client.create("/survivor", b"x")
    finally:
        _close(client)
    zookeeper.restart(kill=True)
    client = _kazoo(zookeeper)
    try:
        assert client.exists("/survivor") is not None
    finally:
        _close(client)


@pytest.mark.skipif(sys.platform != "linux", reason="ports are held across restarts only on Linux")
def test_port_is_held_while_stopped(zookeeper):
    zookeeper.stop()
    with socket.socket() as intruder:
        with pytest.raises(OSError):
            intruder.bind(("127.0.0.1", zookeeper.port))
    with pytest.raises(OSError):
        zookeeper.command("ruok")  # nothing listens while it is down


def test_close_removes_a_temporary_data_dir():
    try:
        server = ZooKeeperServer()
    except ZooKeeperNotInstalled as e:
        pytest.skip(str(e))
    with server:
        data_dir = server.data_dir
        assert (data_dir / "version-2").is_dir()
        assert (data_dir / "conf" / "zoo.cfg").is_file()
    assert not server.running
    assert not data_dir.exists()


def test_keep_data_leaves_the_data_dir(tmp_path):
    try:
        server = ZooKeeperServer(data_dir=tmp_path / "zk", keep_data=True)
    except ZooKeeperNotInstalled as e:
        pytest.skip(str(e))
    with server:
        pass
    assert (tmp_path / "zk" / "version-2").is_dir()
    assert (tmp_path / "zk" / "zookeeper.log").is_file()


def test_a_dropped_handle_leaves_no_process(tmp_path):
    try:
        server = ZooKeeperServer(data_dir=tmp_path / "zk")
    except ZooKeeperNotInstalled as e:
        pytest.skip(str(e))
    server.start()
    pid = server.pid
    assert pid is not None
    del server
    gc.collect()
    assert _process_gone(pid)


def test_missing_installation_names_the_package(tmp_path):
    missing = tmp_path / "no-such-dir"
    with pytest.raises(ZooKeeperNotInstalled, match="Debian/Ubuntu package `zookeeper`"):
        ZooKeeperServer(jar_dir=missing, data_dir=tmp_path / "zk")
    assert not (tmp_path / "zk").exists()  # nothing was created, nothing started


def test_missing_java_names_the_package(tmp_path, monkeypatch):
    jars = tmp_path / "jars"
    jars.mkdir()
    (jars / "zookeeper.jar").write_bytes(b"")
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty-path"))
    with pytest.raises(ZooKeeperNotInstalled, match="needs Java.*package `zookeeper`"):
        ZooKeeperServer(jar_dir=jars, data_dir=tmp_path / "zk")
