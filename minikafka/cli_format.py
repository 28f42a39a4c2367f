"""`minikafka format`: a node's storage made before its first start, as `kafka-storage.sh format` makes it.

    minikafka format --config server.properties --cluster-id 4L6g3nShT-eMCtK--X86sw \
        --add-scram 'SCRAM-SHA-512=[name=admin,password=admin-secret]'

Each log dir gets its meta.properties (node id, cluster id); the metadata dir (`metadata.log.dir`, else the first
log dir) also gets the `--add-scram` credentials as bootstrap records, so a cluster whose listeners take only SCRAM
has a user to log in with from the start. minikafka needs no format otherwise: a node formats fresh dirs itself.
"""
from __future__ import annotations

import argparse
import sys

from minikafka.config import BrokerConfig, ConfigError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("format", help="format a node's storage, with bootstrap SCRAM users (kafka-storage.sh format)",
                       description="Write meta.properties to every log dir and, with --add-scram, SCRAM credentials "
                                   "to the metadata log, before the node's first start (KRaft mode).")
    p.add_argument("--config", "-c", required=True, help="the node's server.properties")
    p.add_argument("--override", "-o", action="append", default=[], metavar="KEY=VALUE",
                   help="a property over the file's (repeatable)")
    p.add_argument("--cluster-id", "-t", help="the cluster id (default: a new random one)")
    p.add_argument("--add-scram", "-S", action="append", default=[], metavar="SCRAM",
                   help="a SCRAM credential, e.g. 'SCRAM-SHA-256=[name=alice,password=alice-secret]' (repeatable)")
    p.add_argument("--ignore-formatted", "-g", action="store_true",
                   help="leave formatted dirs as they are instead of failing")


def format_storage(args: argparse.Namespace) -> int:
    from minikafka.broker.controller.bootstrap_metadata import format_metadata_dir, parse_add_scram

    try:
        overrides = {}
        for item in args.override:
            key, sep, value = item.partition("=")
            if not sep:
                raise ConfigError(f"--override expects KEY=VALUE, got {item!r}")
            overrides[key.strip()] = value.strip()
        config = BrokerConfig.from_sources(args.config, overrides)
        if config.zookeeper_mode:
            raise ConfigError("format is for KRaft mode: a ZooKeeper-mode cluster keeps its metadata in ZooKeeper")
        records = [parse_add_scram(argument) for argument in args.add_scram]
        metadata_dir = config.metadata_log_dir
        cluster_id = format_metadata_dir(metadata_dir, config.node_id, args.cluster_id, records,
                                         ignore_formatted=args.ignore_formatted)
        if cluster_id is None:
            print(f"All of the log directories are already formatted: {metadata_dir}")
            return 0
        for log_dir in config.log_dirs:
            if log_dir != metadata_dir:
                format_metadata_dir(log_dir, config.node_id, cluster_id, [], ignore_formatted=True)
    except (ConfigError, OSError) as exc:
        print(f"minikafka: {exc}", file=sys.stderr)
        return 2
    print(f"Formatting metadata directory {metadata_dir} with metadata.version 4.1-IV1.")
    return 0
