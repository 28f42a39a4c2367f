"""`minikafka cluster`: a controller and N brokers on this machine, each a `minikafka serve` process, in the
foreground until SIGINT/SIGTERM.

    minikafka cluster --brokers 3
    minikafka cluster --brokers 3 --ports 9092,9093,9094 --data-dir ./cluster -o num.partitions=3
    minikafka cluster --brokers 3 --zookeeper
    minikafka cluster --brokers 3 --metrics-port 9404

The controller announces itself first with `minikafka controller listening on HOST:PORT`; then each broker prints
`minikafka listening on HOST:PORT` as it becomes ready, so a script that waits for N broker lines works as with N
`minikafka serve` runs. The nodes get `minikafka.Cluster`'s defaults (quick failure detection, topics replicated
min(3, N) times); --override changes them. A signal stops the brokers one by one (each moves its leaderships away
first), then the controller.

--zookeeper runs ZooKeeper mode instead: a ZooKeeper server from the machine's installation (the Debian/Ubuntu
package `zookeeper`), announced with `minikafka zookeeper listening on HOST:PORT`, and brokers that elect their
controller through it, with no controller process; --zookeeper-connect uses an existing ensemble instead.
"""
from __future__ import annotations

import argparse
import signal
import sys
import threading
from types import FrameType
from typing import TYPE_CHECKING

from minikafka.cli_common import CommandError, parse_key_values

if TYPE_CHECKING:
    from minikafka.cluster_handle import Cluster

# How often the foreground loop looks for a node that exited by itself.
WATCH_INTERVAL_S = 0.5


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


def _number_metrics_ports(cluster: Cluster, first: int) -> None:
    """Broker i serves its metrics on first + i - 1, the controller (if any) on the port after the brokers'; 0
    gives every node a free port."""
    nodes = [*cluster.brokers, *(n for n in cluster.nodes if n.kind == "controller")]
    for offset, node in enumerate(nodes):
        node.config["metrics.port"] = str(first + offset if first else 0)


def run(args: argparse.Namespace) -> int:
    from minikafka.cluster_handle import Cluster
    from minikafka.integration.subprocess_runner import BrokerStartError
    from minikafka.node_handle import NodeHandle
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
                          zookeeper_connect=args.zookeeper_connect, zookeeper_port=args.zookeeper_port)
    except (CommandError, ValueError) as exc:
        print(f"minikafka: {exc}", file=sys.stderr)
        return 2
    except ZooKeeperNotInstalled as exc:
        print(f"minikafka: {exc}", file=sys.stderr)
        return 1

    if args.metrics_port is not None:
        _number_metrics_ports(cluster, args.metrics_port)
    stop_requested = threading.Event()

    def request_stop(signum: int, _frame: FrameType | None) -> None:
        stop_requested.set()

    # Set before any node starts: a signal during start-up stops the cluster once it is up, and no node is left.
    previous = {s: signal.signal(s, request_stop) for s in (signal.SIGINT, signal.SIGTERM)}

    def announce(node: NodeHandle) -> None:
        label = "minikafka controller listening on" if node.kind == "controller" else "minikafka listening on"
        print(f"{label} {node.address}", flush=True)

    try:
        kept = "" if args.data_dir else " (removed on exit; --data-dir keeps them)"
        print(f"minikafka: data and logs in {cluster.data_dir}{kept}", file=sys.stderr, flush=True)
        try:
            if cluster.zookeeper is not None:  # first, so that its line comes before the brokers'
                cluster.zookeeper.start()
                print(f"minikafka zookeeper listening on {cluster.zookeeper.connect_string}", flush=True)
            cluster.start(on_ready=announce)
        except (BrokerStartError, ZooKeeperStartError) as exc:
            print(f"minikafka: cannot start the cluster: {exc}", file=sys.stderr)
            return 1
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
                    print(f"minikafka: {node.kind} {node.node_id} exited by itself; log {node.log_path}",
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
            for signum, handler in previous.items():
                signal.signal(signum, handler)
