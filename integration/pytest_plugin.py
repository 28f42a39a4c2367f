"""pytest plugin (registered as the `minikafka` pytest11 entry point, so installing minikafka is enough).

Fixtures:
- `minikafka_broker`: a fresh broker for one test (a `minikafka.Broker`);
- `minikafka_session_broker`: one broker shared by the whole session (use unique topic names);
- `minikafka_cluster`: a fresh `minikafka.Cluster` for one test.

Options: `--minikafka-port` (the session broker's port), `--minikafka-data-dir` (keep every broker's data and
log under this dir, one subdir per test, emptied when the test starts), `--minikafka-in-process` (brokers on
threads of the test process).
A test can ask for broker properties with `@pytest.mark.minikafka(config={"num.partitions": 3})`.
When a test fails, its report names each broker's log file and shows the log's last lines.
"""
from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from minikafka.broker_handle import Broker
from minikafka.cluster_handle import Cluster

LOG_TAIL_LINES = 40


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("minikafka", "minikafka test brokers")
    group.addoption("--minikafka-port", type=int, default=None,
                    help="listener port of the session broker (default: a free port)")
    group.addoption("--minikafka-data-dir", default=None,
                    help="keep broker data dirs and logs under this directory (default: pytest's tmp dirs)")
    group.addoption("--minikafka-in-process", action="store_true", default=False,
                    help="run brokers in the test process (fastest start) instead of as child processes")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "minikafka(config=None, in_process=None): broker properties and mode for "
                                       "the minikafka_broker and minikafka_cluster fixtures of this test")


def _safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name)[:120]


def _marker_options(request: pytest.FixtureRequest) -> tuple[dict, bool]:
    config: dict = {}
    in_process = request.config.getoption("--minikafka-in-process")
    for marker in reversed(list(request.node.iter_markers("minikafka"))):
        config.update(marker.kwargs.get("config") or {})
        if marker.kwargs.get("in_process") is not None:
            in_process = bool(marker.kwargs["in_process"])
    return config, in_process


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
    config, in_process = _marker_options(request)
    base = _base_dir(request, tmp_path_factory, request.node.name)
    with Broker(data_dir=base / "data", log_path=base / "broker.log", in_process=in_process,
                config=config) as broker:
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
    """A cluster of its own for this test (one broker until replication between brokers exists)."""
    config, in_process = _marker_options(request)
    base = _base_dir(request, tmp_path_factory, request.node.name + "-cluster")
    with Cluster(brokers=1, data_dir=base, in_process=in_process, config=config) as cluster:
        yield cluster


def _brokers_of(item: pytest.Item) -> list[Broker]:
    found: list[Broker] = []
    for value in getattr(item, "funcargs", {}).values():
        if isinstance(value, Broker):
            found.append(value)
        elif isinstance(value, Cluster):
            found.extend(value.brokers)
    return found


def _log_section(broker: Broker) -> str:
    where = broker.bootstrap_servers if broker.running else "stopped"
    lines = [f"broker {broker.node_id} ({where}) log: {broker.log_path}"]
    try:
        tail = broker.log_path.read_text(errors="replace").splitlines()[-LOG_TAIL_LINES:]
    except OSError:
        tail = ["(no log file)"]
    return "\n".join(lines + ["  " + line for line in tail])


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    report = yield
    if report.failed:
        brokers = _brokers_of(item)
        if brokers:
            report.sections.append(("minikafka broker logs", "\n\n".join(_log_section(b) for b in brokers)))
    return report
