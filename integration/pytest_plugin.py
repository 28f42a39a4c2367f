"""pytest plugin (registered as the `minikafka` pytest11 entry point, so installing minikafka is enough).

Fixtures:
- `minikafka_broker`: a fresh broker for one test (a `minikafka.Broker`);
- `minikafka_session_broker`: one broker shared by the whole session (use unique topic names);
- `minikafka_cluster`: a fresh `minikafka.Cluster` for one test (one broker unless the marker says `brokers=`).

Options: `--minikafka-port` (the session broker's port), `--minikafka-data-dir` (keep every broker's data and
log under this dir, one subdir per test, emptied when the test starts), `--minikafka-in-process` (brokers on
threads of the test process).
A test can ask for broker properties with `@pytest.mark.minikafka(config={"num.partitions": 3})`, for a
cluster's size and controller properties with `@pytest.mark.minikafka(brokers=3, controller_config={...})`, and
for a ZooKeeper-mode cluster (a ZooKeeper server of its own, any broker controller) with
`@pytest.mark.minikafka(brokers=3, zookeeper=True)`; such a test is skipped, naming the Debian/Ubuntu package
`zookeeper`, where ZooKeeper is not installed. To run one test in both modes, parametrize it with
`pytest.param(..., marks=pytest.mark.minikafka(zookeeper=True))`. `@pytest.mark.minikafka(clock="manual")` starts
the fixture's broker (or cluster) on a manual clock the test advances (`minikafka_broker.clock.advance(ms)`; see
docs/virtual-time.md).
When a test fails, its report names each node's log file (brokers, a cluster's controller or ZooKeeper server) and
shows the log's last lines, and shows the last requests the fixture's brokers answered (the `minikafka_broker` and
`minikafka_cluster` fixtures record the last REPORTED_REQUESTS of them while the test runs; see
minikafka.request_recording).
"""
from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from minikafka.broker_handle import Broker
from minikafka.cluster_handle import Cluster
from minikafka.node_handle import NodeHandle
from minikafka.request_recording import Recording
from minikafka.zookeeper_server import ZooKeeperNotInstalled, ZooKeeperServer

LOG_TAIL_LINES = 40
REPORTED_REQUESTS = 30
_RECORDINGS = pytest.StashKey[list[Recording]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("minikafka", "minikafka test brokers")
    group.addoption("--minikafka-port", type=int, default=None,
                    help="listener port of the session broker (default: a free port)")
    group.addoption("--minikafka-data-dir", default=None,
                    help="keep broker data dirs and logs under this directory (default: pytest's tmp dirs)")
    group.addoption("--minikafka-in-process", action="store_true", default=False,
                    help="run brokers in the test process (fastest start) instead of as child processes")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "minikafka(config=None, in_process=None, brokers=1, controller_config=None, "
                                       "zookeeper=False, clock='system'): broker properties and mode for the "
                                       "minikafka_broker and minikafka_cluster fixtures of this test, the cluster's "
                                       "size, controller properties and controller kind (ZooKeeper mode with "
                                       "zookeeper=True), and a manual clock the test advances (clock='manual')")


def _safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name)[:120]


@dataclass
class MarkerOptions:
    """What `@pytest.mark.minikafka(...)` asks for; the markers nearest the test win (function over class)."""

    in_process: bool
    config: dict = field(default_factory=dict)
    controller_config: dict = field(default_factory=dict)
    brokers: int = 1
    zookeeper: bool = False
    clock: str = "system"


def _marker_options(request: pytest.FixtureRequest) -> MarkerOptions:
    options = MarkerOptions(in_process=request.config.getoption("--minikafka-in-process"))
    for marker in reversed(list(request.node.iter_markers("minikafka"))):
        options.config.update(marker.kwargs.get("config") or {})
        options.controller_config.update(marker.kwargs.get("controller_config") or {})
        if marker.kwargs.get("in_process") is not None:
            options.in_process = bool(marker.kwargs["in_process"])
        if marker.kwargs.get("brokers") is not None:
            options.brokers = int(marker.kwargs["brokers"])
        if marker.kwargs.get("zookeeper") is not None:
            options.zookeeper = bool(marker.kwargs["zookeeper"])
        if marker.kwargs.get("clock") is not None:
            options.clock = str(marker.kwargs["clock"])
    return options


def _base_dir(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    given = request.config.getoption("--minikafka-data-dir")
    if given:
        worker = os.environ.get("PYTEST_XDIST_WORKER")
        path = Path(given).absolute() / _safe_name(f"{name}-{worker}" if worker else name)
        shutil.rmtree(path, ignore_errors=True)  # a rerun starts from an empty broker, like a fresh tmp dir
        path.mkdir(parents=True)
        return path
    return tmp_path_factory.mktemp(_safe_name(name)[:30], numbered=True)


@pytest.fixture
def minikafka_broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """A broker of its own for this test, stopped (and its data kept in pytest's tmp dir) afterwards."""
    options = _marker_options(request)
    base = _base_dir(request, tmp_path_factory, request.node.name)
    with Broker(data_dir=base / "data", log_path=base / "broker.log", in_process=options.in_process,
                config=options.config, clock=options.clock) as broker, \
            _recorded(request, broker.recording(REPORTED_REQUESTS)):
        yield broker


@pytest.fixture(scope="session")
def minikafka_session_broker(request: pytest.FixtureRequest,
                             tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """One broker for the whole session: fast, but tests share it (use unique topic and group names)."""
    base = _base_dir(request, tmp_path_factory, "session-broker")
    with Broker(port=request.config.getoption("--minikafka-port"), data_dir=base / "data",
                log_path=base / "broker.log", in_process=request.config.getoption("--minikafka-in-process")) as broker:
        yield broker


@pytest.fixture
def minikafka_cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A cluster of its own for this test: a controller and the marker's number of brokers (default one), or in
    ZooKeeper mode a ZooKeeper server and the brokers."""
    options = _marker_options(request)
    base = _base_dir(request, tmp_path_factory, request.node.name + "-cluster")
    try:
        cluster = Cluster(brokers=options.brokers, data_dir=base, in_process=options.in_process,
                          config=options.config, controller_config=options.controller_config,
                          zookeeper=options.zookeeper, clock=options.clock)
    except ZooKeeperNotInstalled as exc:
        pytest.skip(str(exc))
    with cluster, _recorded(request, cluster.recording(REPORTED_REQUESTS)):
        yield cluster


def _recorded(request: pytest.FixtureRequest, recording: Recording) -> Recording:
    """The recording a failed test's report shows the last requests of."""
    request.node.stash.setdefault(_RECORDINGS, []).append(recording)
    return recording


def _request_line(entry: dict[str, Any]) -> str:
    software = f" ({entry['client_software_name']} {entry['client_software_version']})" \
        if entry.get("client_software_name") else ""
    partitions = sorted({f"{p[0]}-{p[1]}" if p[1] is not None else str(p[0]) for p in entry["partitions"]})
    fields = "".join(f" {name}={entry[name]}" for name in ("acks", "group_id", "member_id", "transactional_id")
                     if name in entry)
    when = time.strftime("%H:%M:%S", time.localtime(entry["time"])) + f".{int(entry['time'] % 1 * 1000):03d}"
    return (f"{when} {entry['node']} {entry['api']} v{entry['version']} from {entry['client_id']}{software}"
            f"{' ' + ','.join(partitions) if partitions else ''}{fields} -> "
            f"{','.join(entry['errors']) or 'NONE'} in {entry['latency_ms']:.1f} ms")


def _nodes_of(item: pytest.Item) -> list[NodeHandle]:
    found: list[NodeHandle] = []
    for value in getattr(item, "funcargs", {}).values():
        if isinstance(value, NodeHandle):
            found.append(value)
        elif isinstance(value, Cluster):
            found.extend(value.nodes)
    return found


def _zookeepers_of(item: pytest.Item) -> list[ZooKeeperServer]:
    return [value.zookeeper for value in getattr(item, "funcargs", {}).values()
            if isinstance(value, Cluster) and value.zookeeper is not None]


def _log_section(node: NodeHandle | ZooKeeperServer) -> str:
    if isinstance(node, ZooKeeperServer):
        title = f"ZooKeeper ({node.connect_string if node.running else 'stopped'}) log: {node.log_path}"
    else:
        title = f"{node.kind} {node.node_id} ({node.address if node.running else 'stopped'}) log: {node.log_path}"
    try:
        tail = node.log_path.read_text(errors="replace").splitlines()[-LOG_TAIL_LINES:]
    except OSError:
        tail = ["(no log file)"]
    return "\n".join([title] + ["  " + line for line in tail])


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item,
                              call: pytest.CallInfo) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.failed:
        nodes: list[NodeHandle | ZooKeeperServer] = [*_nodes_of(item), *_zookeepers_of(item)]
        if nodes:
            report.sections.append(("minikafka broker logs", "\n\n".join(_log_section(n) for n in nodes)))
        entries = [entry for recording in item.stash.get(_RECORDINGS, []) for entry in recording.entries]
        if entries:
            entries.sort(key=lambda entry: entry["time"])
            report.sections.append(("minikafka last requests",
                                     "\n".join(_request_line(e) for e in entries[-REPORTED_REQUESTS:])))
    return report
