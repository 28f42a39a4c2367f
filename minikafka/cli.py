"""The `minikafka` command line: `minikafka serve` runs a node (a broker, a controller, or both, by process.roles);
other commands talk to a broker."""
from __future__ import annotations

import argparse
import gc
import logging
import resource
import signal
import sys
from pathlib import Path

from minikafka import (
    cli_acls,
    cli_clock,
    cli_cluster,
    cli_fault,
    cli_features,
    cli_format,
    cli_groups,
    cli_records,
    cli_share_consume,
    cli_topics,
    cli_transactions,
    cli_users,
)
from minikafka.config import BrokerConfig, ConfigError

# Development defaults of `serve`, under the properties file and the flags: Kafka's 3 s wait before a new group's
# first rebalance would hold up every first join of a consumer on a laptop, as the test handles already avoid.
SERVE_DEFAULTS = {"group.initial.rebalance.delay.ms": "0"}


def _serve_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="run a broker (or a controller) in the foreground",
                       description="Run a node: a broker and its controller by default, or what process.roles "
                                   "names (broker, controller, or both). Properties come from --config (a Kafka "
                                   "server.properties file), then the flags, then --override, later ones winning. "
                                   "A broker prints 'minikafka listening on HOST:PORT' once ready, a controller "
                                   "with a listener 'minikafka controller listening on HOST:PORT', and with "
                                   "--metrics-port 'minikafka metrics on http://HOST:PORT/metrics'; then "
                                   "'minikafka data in DIR (remove it to start afresh)'.")
    p.add_argument("--config", "-c", help="a Kafka-style server.properties file")
    p.add_argument("--listeners", help="listeners, e.g. PLAINTEXT://127.0.0.1:9092 (default)")
    p.add_argument("--advertised-listeners", help="advertised.listeners")
    p.add_argument("--host", help="shorthand: listen on HOST (port from --port or 9092)")
    p.add_argument("--port", type=int, help="shorthand: listen on PORT (0 picks a free port)")
    p.add_argument("--log-dirs", "--data-dir", dest="log_dirs", help="log.dirs (default ./minikafka-data)")
    p.add_argument("--node-id", type=int, help="node.id (default 1)")
    p.add_argument("--metrics-port", type=int, help="serve Kafka's metrics for Prometheus on this port, on the "
                                                    "listener's host (metrics.port; 0 picks a free port)")
    p.add_argument("--ui-port", type=int, metavar="PORT",
                   help="serve the status page on 127.0.0.1:PORT (0 picks a free port; needs the `ui` extra and a "
                   "PLAINTEXT listener, which the page reads the broker through)")
    p.add_argument("--security", type=str.upper, choices=["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"],
                   help="secure the listener for a laptop: certificates made next to the data dir (DIR-tls), "
                        "SASL/PLAIN users from --user; prints the CA and a client config (Kafka's properties)")
    p.add_argument("--user", action="append", default=[], metavar="NAME:PASSWORD",
                   help="a SASL user, with --security SASL_PLAINTEXT or SASL_SSL (repeatable)")
    p.add_argument("--override", "-o", action="append", default=[], metavar="KEY=VALUE",
                   help="any broker property, e.g. -o num.partitions=3 (repeatable)")
    p.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING, ERROR (default INFO)")
    p.add_argument("--clock", choices=["system", "manual"], default="system",
                   help="the node's clock: the system's (default), or, for a test harness (with --testing), a "
                        "manual one that `minikafka clock advance` moves (see docs/virtual-time.md)")
    p.add_argument("--testing", action="store_true",
                   help="this node serves a test harness: allows --clock manual")


def _serve_config(args: argparse.Namespace) -> BrokerConfig:
    overrides: dict[str, object] = {}
    if args.listeners:
        overrides["listeners"] = args.listeners
    if args.host is not None or args.port is not None:
        overrides["listeners"] = f"PLAINTEXT://{args.host or '127.0.0.1'}:{9092 if args.port is None else args.port}"
    if args.advertised_listeners:
        overrides["advertised.listeners"] = args.advertised_listeners
    if args.log_dirs:
        overrides["log.dirs"] = args.log_dirs
    if args.node_id is not None:
        overrides["node.id"] = args.node_id
    if args.metrics_port is not None:
        overrides["metrics.port"] = args.metrics_port
    if args.security not in (None, "PLAINTEXT"):
        overrides.update(_security_overrides(args, overrides))
    for item in args.override:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"--override expects KEY=VALUE, got {item!r}")
        overrides[key.strip()] = value.strip()
    config = BrokerConfig.from_sources(args.config, overrides)
    for key, value in SERVE_DEFAULTS.items():
        config.props.setdefault(key, value)
    return config


def _security_overrides(args: argparse.Namespace, overrides: dict[str, object]) -> dict[str, str]:
    """The listener as --security asks, its certificates (kept in DIR-tls beside the data dir, so clients go on
    trusting the same CA) and users; it is the inter-broker listener too (the node's own connections log in as
    admin). The CA and a client config for the first user are printed."""
    from minikafka.handle_security import HandleSecurity

    users = {}
    for item in args.user:
        name, sep, password = item.partition(":")
        if not sep or not name:
            raise ConfigError(f"--user expects NAME:PASSWORD, got {item!r}")
        users[name] = password
    host = args.host or "127.0.0.1"
    port = 9092 if args.port is None else args.port
    data_dir = Path(str(overrides.get("log.dirs") or "./minikafka-data").split(",")[0]).absolute()
    security = HandleSecurity(args.security, users, host, directory=data_dir.with_name(data_dir.name + "-tls"))
    protocol = args.security
    if security.ca_file is not None:
        print(f"minikafka CA certificate: {security.ca_file}", flush=True)
    config_file = data_dir.with_name(data_dir.name + "-client.properties")
    properties = security.client_config(f"{host}:{port}", next(iter(users), None), "java", "PLAIN")
    config_file.touch(mode=0o600)  # it holds a password
    config_file.write_text(properties.split("\n", 1)[1])  # all but bootstrap.servers, which the tools take apart
    print(f"minikafka client config: {config_file} (for --command-config and Kafka's tools)", flush=True)
    return {"listeners": f"{protocol}://{host}:{port}", **security.broker_properties(protocol)}


async def _serve(config: BrokerConfig, ui_port: int | None = None) -> None:
    """Run the node until it stops: on SIGINT/SIGTERM (a broker's controlled shutdown first), or by itself (a
    control-API shutdown)."""
    import trio

    from minikafka.broker.kafka_node import KafkaNode

    node = KafkaNode(config)

    async def stop_on_signal(task_status=trio.TASK_STATUS_IGNORED) -> None:
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            task_status.started()
            async for signum in signals:
                logging.getLogger("minikafka").info("received %s, shutting down", signal.Signals(signum).name)
                node.stop()
                return

    async def run_node(task_status=trio.TASK_STATUS_IGNORED) -> None:
        await node.run(task_status=task_status)
        nursery.cancel_scope.cancel()

    page = None  # the status page (--ui-port), served on a thread of its own
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(stop_on_signal)
            try:
                await nursery.start(run_node)
            except RuntimeError:  # the node returned before it was ready: a signal stopped its start-up
                if not node.stopping:
                    raise
                return
            # What start-up built (modules, configs, the logs' state) lives as long as the process: out of the
            # cyclic collector's way, a full collection scans only what came after it, and pauses a few ms instead
            # of tens.
            gc.freeze()
            address = node.controller_address
            if address is not None:
                print(f"minikafka controller listening on {address[0]}:{address[1]}", flush=True)
            if node.metrics_address is not None:
                print(f"minikafka metrics on http://{node.metrics_address[0]}:{node.metrics_address[1]}/metrics",
                      flush=True)
            if node.broker is not None:
                for host, port in node.broker.bound_addresses:
                    print(f"minikafka listening on {host}:{port}", flush=True)
            print(data_line(config), flush=True)
            if ui_port is not None and node.broker is not None:
                from minikafka.status_page import ServedBroker, StatusPage

                host, port = node.broker.bound_addresses[0]
                page = StatusPage(ServedBroker(host, port, config.node_id), ui_port)
                print(f"minikafka status page at {page.url}", flush=True)
    finally:
        if page is not None:
            page.close()


def data_line(config: BrokerConfig) -> str:
    """Where the node keeps its data, said after its ready lines: a node started again on the same dirs goes on
    from there (its topics, offsets and cluster id), so the way to a fresh start is to remove them."""
    dirs = [path.absolute() for path in config.log_dirs]
    metadata_dir = config.get("metadata.log.dir")
    if metadata_dir and Path(metadata_dir).absolute() not in dirs:
        dirs.append(Path(metadata_dir).absolute())
    them = "it" if len(dirs) == 1 else "them"
    return f"minikafka data in {', '.join(map(str, dirs))} (remove {them} to start afresh)"


def serve(args: argparse.Namespace) -> int:
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.clock == "manual" and not args.testing:
        print("minikafka: --clock manual is for test harnesses (minikafka.Broker(clock=\"manual\")): its time jumps "
              "when a test advances it; give --testing as well to run one", file=sys.stderr)
        return 2
    try:
        config = _serve_config(args)
    except (ConfigError, OSError) as exc:
        print(f"minikafka: {exc}", file=sys.stderr)
        return 2
    if args.ui_port is not None and any(config.security_protocol(e.listener) != "PLAINTEXT"
                                        for e in config.listeners):
        print("minikafka: --ui-port reads the broker through a PLAINTEXT listener; this one is secured",
              file=sys.stderr)
        return 2
    _raise_open_file_limit()
    for name in config.unknown_properties():
        logging.getLogger("minikafka").warning("The configuration '%s' was supplied but isn't a known config.", name)
    import trio

    from minikafka.broker.clock.broker_clock import BrokerClock
    from minikafka.broker.metadata.broker_lifecycle_manager import RegistrationError
    from minikafka.broker.zk.zookeeper_client import ZooKeeperClientTimeoutError
    from minikafka.storage.errors import KafkaStorageError

    # What stops a node from starting, said in one line: a port, a config, the controller, a data dir, ZooKeeper.
    start_errors = (OSError, ConfigError, RegistrationError, KafkaStorageError, ZooKeeperClientTimeoutError)
    try:
        trio.run(_serve, config, args.ui_port, clock=BrokerClock(manual=args.clock == "manual"))
    except BaseExceptionGroup as group:
        _, rest = group.split(start_errors)
        if rest is not None:
            raise
        first = _first_leaf(group)
        print(f"minikafka: cannot start: {first}", file=sys.stderr)
        return 2 if isinstance(first, ConfigError) else 1
    except start_errors as exc:
        print(f"minikafka: cannot start: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, ConfigError) else 1
    return 0


def _raise_open_file_limit() -> None:
    """Each segment holds a file descriptor, as in Kafka, whose docs ask for a high nofile limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def _first_leaf(group: BaseExceptionGroup) -> BaseException:
    leaf: BaseException = group
    while isinstance(leaf, BaseExceptionGroup):
        leaf = leaf.exceptions[0]
    return leaf


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="minikafka", description="A Kafka-protocol-compatible broker.")
    parser.add_argument("--version", action=_VersionAction, help="print the installed minikafka's version and exit")
    sub = parser.add_subparsers(dest="command", required=True)
    _serve_parser(sub)
    cli_cluster.add_parser(sub)
    cli_topics.add_parser(sub)
    cli_records.add_parsers(sub)
    cli_share_consume.add_parser(sub)
    cli_groups.add_parser(sub)
    cli_transactions.add_parser(sub)
    cli_acls.add_parser(sub)
    cli_users.add_parser(sub)
    cli_features.add_parser(sub)
    cli_fault.add_parser(sub)
    cli_clock.add_parser(sub)
    cli_format.add_parser(sub)
    return parser


class _VersionAction(argparse.Action):
    """--version: the installed distribution's version, looked up only when asked (the lookup scans the installed
    packages' metadata, which every `serve` would pay for otherwise)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, help: str | None = None) -> None:
        super().__init__(option_strings, dest=dest, default=argparse.SUPPRESS, nargs=0, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        from importlib.metadata import PackageNotFoundError, version

        try:
            installed = version("minikafka")
        except PackageNotFoundError:
            installed = "(not installed)"
        print(f"minikafka {installed}")
        parser.exit()


COMMANDS = {"serve": serve, "cluster": cli_cluster.run, "topics": cli_topics.run, "produce": cli_records.run_produce,
            "consume": cli_records.run_consume, "share-consume": cli_share_consume.run, "groups": cli_groups.run,
            "transactions": cli_transactions.run, "acls": cli_acls.run, "users": cli_users.run,
            "features": cli_features.run, "fault": cli_fault.run, "clock": cli_clock.run,
            "format": cli_format.format_storage}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return COMMANDS[args.command](args)
