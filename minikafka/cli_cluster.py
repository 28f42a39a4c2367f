"""`minikafka cluster`: a controller and N brokers on this machine, each a `minikafka serve` process, in the
foreground until SIGINT/SIGTERM.

    minikafka cluster --brokers 3
    minikafka cluster --brokers 3 --ports 9092,9093,9094 --data-dir ./cluster -o num.partitions=3
    minikafka cluster --brokers 3 --zookeeper
    minikafka cluster --brokers 3 --metrics-port 9404

The controller announces itself first with `minikafka controller listening on HOST:PORT (controller 3000, pid N)`;
then each broker prints `minikafka listening on HOST:PORT (broker ID, pid N)` as it becomes ready, so a script that
waits for N broker lines works as with N `minikafka serve` runs (and with --metrics-port each node's
`minikafka metrics on http://HOST:PORT/metrics (broker ID)`). Progress goes to stderr meanwhile: each node as it
becomes ready, and every few seconds which nodes are still waiting and for what. The nodes get
`minikafka.Cluster`'s defaults (quick failure detection, topics replicated min(3, N) times); --override changes
them. A signal stops the brokers one by one (each moves its leaderships away first), then the controller.

A node that cannot start stops the others: the command says why in one line, names the node's log, and keeps the
data dir (a temporary one too) for a look.

--zookeeper runs ZooKeeper mode instead: a ZooKeeper server from the machine's installation (the Debian/Ubuntu
package `zookeeper`), announced with `minikafka zookeeper listening on HOST:PORT`, and brokers that elect their
controller through it, with no controller process; --zookeeper-connect uses an existing ensemble instead.
"""
from __future__ import annotations

import argparse
import queue
import re
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from minikafka.cli_common import CommandError, parse_key_values
from minikafka.port_reservation import reserve_port
from minikafka.subprocess_runner import BrokerStartError

if TYPE_CHECKING:
    from minikafka.cluster_handle import Cluster
    from minikafka.node_handle import NodeHandle

# How often the foreground loop looks for a node that exited by itself.
WATCH_INTERVAL_S = 0.5
# How often, while nodes start, the ones still waiting are reported.
PROGRESS_INTERVAL_S = 2.0
# What `minikafka serve` prints when it cannot start, and the start of each of its log lines (its logging format).
REFUSAL_PREFIX = "minikafka: "
LOG_LINE_PREFIX = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ [A-Z]+ [\w.]+: ")
LOG_TAIL_BYTES = 8192
MAX_QUOTED_CHARS = 200


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cluster", help="run a controller and several brokers in the foreground",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--brokers", type=int, default=3, help="how many brokers, node ids 1..N (default 3)")
    p.add_argument("--host", default="127.0.0.1", help="the address every node listens on (default 127.0.0.1)")
    p.add_argument("--ports", help="the brokers' ports, comma-separated, one per broker (default: free ports)")
    p.add_argument("--controller-port", type=int, help="the controller's port (default: a free port)")
    p.add_argument("--data-dir", help="keep every node's data and log here, as broker-<id>/, broker-<id>.log, "
                                      "controller-3000/ (default: a temporary dir, removed on exit)")
    p.add_argument("--override", "-o", action="append", default=[], metavar="KEY=VALUE",
                   help="a property for every node, e.g. -o num.partitions=3 (repeatable)")
    p.add_argument("--controller-override", action="append", default=[], metavar="KEY=VALUE",
                   help="a property for the controller only (repeatable)")
    p.add_argument("--start-timeout", type=float, default=30.0, help="seconds each node has to start (default 30)")
    p.add_argument("--metrics-port", type=int, metavar="PORT",
                   help="serve each node's metrics for Prometheus: broker 1 on PORT, the others counting up from it, "
                        "then the controller")
    zookeeper = p.add_mutually_exclusive_group()
    zookeeper.add_argument("--zookeeper", action="store_true",
                           help="ZooKeeper mode: start a ZooKeeper server (zookeeper/ in the data dir) and brokers "
                                "that elect their controller through it, no controller process")
    zookeeper.add_argument("--zookeeper-connect", metavar="HOST:PORT[/CHROOT]",
                           help="ZooKeeper mode on an existing ensemble (give each cluster a chroot of its own)")
    p.add_argument("--ui-port", type=int, metavar="PORT",
                   help="serve the status page on 127.0.0.1:PORT (0 picks a free port; needs the `ui` extra)")
    p.add_argument("--zookeeper-port", type=int, help="with --zookeeper: the server's port (default: a free port)")


def _ports(value: str | None, brokers: int) -> list[int] | None:
    if value is None:
        return None
    try:
        ports = [int(p) for p in value.split(",") if p.strip()]
    except ValueError:
        raise CommandError(f"--ports expects comma-separated port numbers, got {value!r}") from None
    if len(ports) != brokers:
        raise CommandError(f"--ports names {len(ports)} port(s) for {brokers} broker(s)")
    return ports


def _number_metrics_ports(cluster: Cluster, first: int, host: str) -> list[socket.socket]:
    """Broker i serves its metrics on first + i - 1, the controller (if any) on the port after the brokers'. With
    0 each node gets a free port, chosen here so that its URL can be printed, and held (where the platform can hold
    ports) until the cluster stops; the reservations are returned."""
    nodes = [*cluster.brokers, *(n for n in cluster.nodes if n.kind == "controller")]
    held: list[socket.socket] = []
    for offset, node in enumerate(nodes):
        if first:
            port = first + offset
        else:
            reservation = reserve_port(host)
            if reservation is None:
                with socket.socket() as probe:
                    probe.bind((host, 0))
                    port = probe.getsockname()[1]
            else:
                held.append(reservation)
                port = reservation.getsockname()[1]
        node.config["metrics.port"] = str(port)
    return held


def _name(node: NodeHandle) -> str:
    return f"{node.kind} {node.node_id}"


def _ready_lines(node: NodeHandle, metrics_host: str | None) -> list[str]:
    """What a node prints on stdout once ready: `serve`'s line, naming the node, then its metrics URL."""
    label = "minikafka controller listening on" if node.kind == "controller" else "minikafka listening on"
    lines = [f"{label} {node.address} ({_name(node)}, pid {node.pid})"]
    if metrics_host is not None:
        lines.append(f"minikafka metrics on http://{metrics_host}:{node.config['metrics.port']}/metrics "
                     f"({_name(node)})")
    return lines


def _log_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _log_since(path: Path, offset: int) -> list[str]:
    """The lines a node logged since `offset` (its log's size when this run began), at most the last
    LOG_TAIL_BYTES of them."""
    try:
        with open(path, "rb") as log:
            log.seek(max(offset, _log_size(path) - LOG_TAIL_BYTES))
            return [line for line in log.read().decode(errors="replace").splitlines() if line.strip()]
    except OSError:
        return []


def _stated_reason(node: NodeHandle, log_offset: int) -> str | None:
    """Why the node's `serve` said it cannot start, in this run (its last `minikafka: ...` line), if it said."""
    said = [line.removeprefix(REFUSAL_PREFIX) for line in _log_since(node.log_path, log_offset)
            if line.startswith(REFUSAL_PREFIX)]
    return said[-1].removeprefix("cannot start: ") if said else None


def _waiting_lines(cluster: Cluster, ready: list[NodeHandle], elapsed_s: float,
                   log_offsets: dict[NodeHandle, int]) -> list[str]:
    """Each node not ready yet, and what it waits for: the controller (brokers start once it is ready), or what the
    node's log last says."""
    controller_ready = not any(n.kind == "controller" and n not in ready for n in cluster.nodes)
    lines = []
    for node in cluster.nodes:
        if node in ready:
            continue
        if node.pid is not None:
            logged = _log_since(node.log_path, log_offsets[node])
            last = "nothing yet (its process is starting)"
            if logged:
                last = LOG_LINE_PREFIX.sub("", logged[-1], count=1)[:MAX_QUOTED_CHARS]
            lines.append(f"{_name(node)} (pid {node.pid}) not ready after {elapsed_s:.0f} s; its log says: {last}")
        elif not controller_ready:
            lines.append(f"{_name(node)} waits for the controller to be ready")
        else:
            lines.append(f"{_name(node)} is not running: it could not start (the others are still starting)")
    return lines


def _start(cluster: Cluster, on_ready: Callable[[NodeHandle], None], log_offsets: dict[NodeHandle, int]
           ) -> BaseException | None:
    """Start the cluster on a thread of its own while this one reports progress on stderr: each node as it becomes
    ready (after `on_ready`), and every PROGRESS_INTERVAL_S the nodes still waiting. Returns the start's error."""
    events: queue.Queue[NodeHandle | None] = queue.Queue()
    errors: list[BaseException] = []

    def start() -> None:
        try:
            cluster.start(on_ready=events.put)
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread, which reports it
            errors.append(exc)
        finally:
            events.put(None)

    began = time.monotonic()
    thread = threading.Thread(target=start, name="minikafka-cluster-start", daemon=True)
    thread.start()
    ready: list[NodeHandle] = []
    while True:
        try:
            node = events.get(timeout=PROGRESS_INTERVAL_S)
        except queue.Empty:
            for line in _waiting_lines(cluster, ready, time.monotonic() - began, log_offsets):
                print(f"minikafka: {line}", file=sys.stderr, flush=True)
            continue
        if node is None:
            break
        ready.append(node)
        on_ready(node)
        waiting = [_name(n) for n in cluster.nodes if n not in ready]
        progress = f"waiting for {', '.join(waiting)}" if waiting else "all nodes ready"
        print(f"minikafka: {_name(node)} ready ({len(ready)} of {len(cluster.nodes)}); {progress}", file=sys.stderr,
              flush=True)
    thread.join()
    return errors[0] if errors else None


def _report_start_failure(cluster: Cluster, error: BaseException, log_offsets: dict[NodeHandle, int]) -> None:
    """One line per node that said why it could not start (naming its log); the start's own error otherwise."""
    reasons = [(node, _stated_reason(node, log_offsets[node])) for node in cluster.nodes]
    stated = [(node, reason) for node, reason in reasons if reason is not None]
    for node, reason in stated:
        print(f"minikafka: cannot start the cluster: {_name(node)}: {reason} (log {node.log_path})", file=sys.stderr)
    if not stated:
        print(f"minikafka: cannot start the cluster: {error}", file=sys.stderr)


def _how_it_ended(node: NodeHandle) -> str:
    code = node.returncode
    if code is not None and code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited by itself with status {code}"


def run(args: argparse.Namespace) -> int:
    from minikafka.cluster_handle import Cluster
    from minikafka.zookeeper_server import ZooKeeperNotInstalled, ZooKeeperStartError

    if args.zookeeper_port is not None and not args.zookeeper:
        print("minikafka: --zookeeper-port is the port of the server --zookeeper starts", file=sys.stderr)
        return 2
    try:
        cluster = Cluster(args.brokers, ports=_ports(args.ports, args.brokers), controller_port=args.controller_port,
                          host=args.host, data_dir=args.data_dir,
                          config=parse_key_values(args.override, "--override"),
                          controller_config=parse_key_values(args.controller_override, "--controller-override"),
                          start_timeout_s=args.start_timeout, zookeeper=args.zookeeper,
                          zookeeper_connect=args.zookeeper_connect, zookeeper_port=args.zookeeper_port,
                          ui_port=args.ui_port)
    except (CommandError, ValueError) as exc:
        print(f"minikafka: {exc}", file=sys.stderr)
        return 2
    except ZooKeeperNotInstalled as exc:
        print(f"minikafka: {exc}", file=sys.stderr)
        return 1

    held_ports = _number_metrics_ports(cluster, args.metrics_port, args.host) if args.metrics_port is not None else []
    metrics_host = args.host if args.metrics_port is not None else None
    stop_requested = threading.Event()

    def request_stop(signum: int, _frame: FrameType | None) -> None:
        stop_requested.set()

    # Set before any node starts: a signal during start-up stops the cluster once it is up, and no node is left.
    previous = {s: signal.signal(s, request_stop) for s in (signal.SIGINT, signal.SIGTERM)}

    def announce(node: NodeHandle) -> None:
        for line in _ready_lines(node, metrics_host):
            print(line, flush=True)

    try:
        kept = "" if args.data_dir else " (removed on exit; --data-dir keeps them)"
        print(f"minikafka: data and logs in {cluster.data_dir}{kept}", file=sys.stderr, flush=True)
        log_offsets = {node: _log_size(node.log_path) for node in cluster.nodes}
        try:
            if cluster.zookeeper is not None:  # first, so that its line comes before the brokers'
                cluster.zookeeper.start()
                print(f"minikafka zookeeper listening on {cluster.zookeeper.connect_string}", flush=True)
            failure = _start(cluster, announce, log_offsets)
        except ZooKeeperStartError as exc:
            failure = exc
        if failure is not None:
            if not isinstance(failure, (BrokerStartError, ZooKeeperStartError)):
                raise failure
            _report_start_failure(cluster, failure, log_offsets)
            if not args.data_dir:
                cluster.keep_data = True
                print(f"minikafka: kept {cluster.data_dir} with every node's data and log; remove it when done",
                      file=sys.stderr)
            return 1
        if args.ui_port is not None:
            print(f"minikafka status page at {cluster.ui_url}", flush=True)
        exited: set[int] = set()
        zookeeper_exited = False
        while not stop_requested.wait(WATCH_INTERVAL_S):
            if cluster.zookeeper is not None and not zookeeper_exited and not cluster.zookeeper.running:
                zookeeper_exited = True
                print(f"minikafka: ZooKeeper exited by itself; log {cluster.zookeeper.log_path}", file=sys.stderr,
                      flush=True)
            for node in cluster.nodes:
                if node.node_id not in exited and not node.running:
                    exited.add(node.node_id)
                    print(f"minikafka: {_name(node)} (pid {node.pid}) {_how_it_ended(node)}; log {node.log_path}",
                          file=sys.stderr, flush=True)
            if len(exited) == len(cluster.nodes):
                print("minikafka: every node has exited", file=sys.stderr)
                return 1
        print("minikafka: stopping the cluster", file=sys.stderr, flush=True)
        return 0
    finally:
        try:
            cluster.close()
        finally:
            for reservation in held_ports:
                reservation.close()
            for signum, handler in previous.items():
                signal.signal(signum, handler)
