"""The two controller modes a cluster fault test runs in: the embedded KRaft controller process, and ZooKeeper
mode (a ZooKeeper server, any broker controller), skipped, naming the package, where ZooKeeper is not installed.

What differs for a test: in KRaft a killed broker is fenced as soon as its controller connection closes, and a
silent one after broker.session.timeout.ms; in ZooKeeper mode a broker is dead to the controller only when its
ZooKeeper session expires (zookeeper.session.timeout.ms), killed or silent alike.
"""
from __future__ import annotations

import pytest

from minikafka.cluster_handle import zookeeper_test_defaults
from minikafka.zookeeper_server import ZooKeeperInstallation, ZooKeeperNotInstalled

ZOOKEEPER_SESSION_S = int(zookeeper_test_defaults()["zookeeper.session.timeout.ms"]) / 1000


def _zookeeper_missing() -> str | None:
    try:
        ZooKeeperInstallation.find()
    except ZooKeeperNotInstalled as exc:
        return str(exc)
    return None


_MISSING = _zookeeper_missing()
REQUIRES_ZOOKEEPER = pytest.mark.skipif(_MISSING is not None, reason=_MISSING or "")

# Parametrize `zookeeper` with these: a test that builds its own Cluster passes it to minikafka.Cluster; for one on
# the minikafka_cluster fixture, the ZooKeeper case carries the marker that selects the mode.
CLUSTER_MODES = [pytest.param(False, id="kraft"),
                 pytest.param(True, id="zookeeper", marks=[pytest.mark.minikafka(zookeeper=True), REQUIRES_ZOOKEEPER])]


def session_settings(zookeeper: bool, session_timeout_ms: int) -> dict[str, int]:
    """The property that sets how long a silent broker keeps its place in the cluster, in either mode."""
    return {"zookeeper.session.timeout.ms" if zookeeper else "broker.session.timeout.ms": session_timeout_ms}
