"""`minikafka serve` in ZooKeeper mode at the default log level: the broker says how its ZooKeeper session goes,
and kazoo's own connection lines ("Connecting to ...", "Zookeeper connection established") stay out of the log."""
from __future__ import annotations

from tests.clients.test_serve import serve, served_log


def test_zookeeper_mode_start_logs_no_kazoo_lines(tmp_path, zk_connect):
    with serve("--port", "0", "--log-dirs", str(tmp_path / "data"), "-o", f"zookeeper.connect={zk_connect}") as proc:
        lines = served_log(proc, lambda _port: None)
    assert any("minikafka.zk_client: Connected to ZooKeeper" in line for line in lines), lines
    assert not [line for line in lines if " kazoo" in line], lines
