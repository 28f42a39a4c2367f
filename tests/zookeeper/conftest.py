"""Real ZooKeeper servers for the ZooKeeper-mode tests, from the machine's installation (Debian/Ubuntu package
`zookeeper`; the tests are skipped, naming it, where it is missing), each stopped by the test or module that
started it."""
from __future__ import annotations

from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient

from minikafka.broker.zk.zookeeper_client import ZkClientConfig
from minikafka.zookeeper_server import ZooKeeperInstallation, ZooKeeperNotInstalled, ZooKeeperServer

RAW_CONNECT_TIMEOUT_S = 30.0


@pytest.fixture(scope="session")
def zookeeper_installed() -> None:
    """Skips the test, naming the package to install, where the machine has no ZooKeeper (or no Java)."""
    try:
        ZooKeeperInstallation.find()
    except ZooKeeperNotInstalled as e:
        pytest.skip(str(e))


@pytest.fixture
def zookeeper(zookeeper_installed, tmp_path) -> Iterator[ZooKeeperServer]:
    """A server of this test's own (to stop, kill and restart), its data and log in the test's tmp dir."""
    with ZooKeeperServer(data_dir=tmp_path / "zookeeper") as server:
        yield server


@pytest.fixture(scope="module")
def shared_zookeeper(zookeeper_installed, tmp_path_factory) -> Iterator[ZooKeeperServer]:
    """One server for a module's tests that leave it running; each test works under a chroot of its own."""
    with ZooKeeperServer(data_dir=tmp_path_factory.mktemp("zookeeper")) as server:
        yield server


@pytest.fixture
def zk_connect(shared_zookeeper, request) -> str:
    """A `zookeeper.connect` with a chroot unique to this test on the shared server."""
    name = request.node.name.replace("[", "-").replace("]", "").replace("/", "-")[:100]
    return f"{shared_zookeeper.connect_string}/{name}"


@pytest.fixture
def raw(zk_connect) -> Iterator[KazooClient]:
    """A plain kazoo client under `zk_connect`'s chroot (created first), to read and write znodes directly."""
    config = ZkClientConfig(zk_connect)
    root = KazooClient(config.hosts)
    root.start(timeout=RAW_CONNECT_TIMEOUT_S)
    root.ensure_path(config.chroot)
    root.stop()
    root.close()
    kazoo = KazooClient(zk_connect)
    kazoo.start(timeout=RAW_CONNECT_TIMEOUT_S)
    yield kazoo
    kazoo.stop()
    kazoo.close()
