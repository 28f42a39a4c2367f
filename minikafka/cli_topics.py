"""`minikafka topics list|create|describe|delete`: kafka-topics.sh's commands and output, over Kafka's admin APIs.

Being plain Kafka admin requests (Metadata, CreateTopics, DeleteTopics, DescribeConfigs), these work against any
Kafka broker, not only minikafka. `--topic` accepts a regular expression for list, describe and delete.
"""
from __future__ import annotations

import argparse
import base64
import re
import sys
import uuid

from minikafka.cli_common import (
    BrokerError,
    CommandError,
    add_bootstrap,
    add_topic,
    admin_client,
    parse_key_values,
    run_guarded,
)

CLIENT_ID = "minikafka-topics"
# DescribeConfigs config_source of a value nobody set (kafka-python gives its name; the wire gives 5).
DEFAULT_CONFIG_SOURCES = ("DEFAULT_CONFIG", "5")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("topics", help="list, create, describe and delete topics (like kafka-topics.sh)")
    actions = p.add_subparsers(dest="action", required=True)

    ls = actions.add_parser("list", help="print topic names, one per line")
    add_bootstrap(ls)
    add_topic(ls, "only names matching this regular expression")
    ls.add_argument("--exclude-internal", action="store_true", help="leave out internal topics")

    create = actions.add_parser("create", help="create a topic")
    add_bootstrap(create)
    add_topic(create, "the topic's name", required=True)
    create.add_argument("--partitions", type=int, default=-1, help="default: the broker's num.partitions")
    create.add_argument("--replication-factor", type=int, default=-1,
                        help="default: the broker's default.replication.factor")
    create.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                        help="a topic config override (repeatable)")
    create.add_argument("--if-not-exists", action="store_true", help="succeed if the topic exists already")

    describe = actions.add_parser("describe", help="topics with their partitions, leaders, replicas and ISR")
    add_bootstrap(describe)
    add_topic(describe, "only topics matching this regular expression")
    describe.add_argument("--exclude-internal", action="store_true", help="leave out internal topics")
    describe.add_argument("--under-replicated-partitions", action="store_true",
                          help="only partitions whose ISR is smaller than their replica list")
    describe.add_argument("--unavailable-partitions", action="store_true", help="only partitions without a leader")

    delete = actions.add_parser("delete", help="delete topics")
    add_bootstrap(delete)
    add_topic(delete, "a name or regular expression", required=True)
    delete.add_argument("--if-exists", action="store_true", help="succeed if no topic matches")


def run(args: argparse.Namespace) -> int:
    return run_guarded(ACTIONS[args.action], args)


def _matching(names: list[str], pattern: str | None) -> list[str]:
    if pattern is None:
        return sorted(names)
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        raise CommandError(f"--topic {pattern!r} is not a regular expression: {exc}") from None
    return sorted(n for n in names if n == pattern or regex.fullmatch(n))


def _list(args: argparse.Namespace) -> int:
    admin = admin_client(args, CLIENT_ID)
    try:
        topics = admin.describe_topics()
    finally:
        admin.close()
    names = [t["name"] for t in topics if not (args.exclude_internal and t.get("is_internal"))]
    for name in _matching(names, args.topic):
        print(name)
    return 0


def _create(args: argparse.Namespace) -> int:
    from kafka.errors import TopicAlreadyExistsError

    configs = parse_key_values(args.config, "--config")
    admin = admin_client(args, CLIENT_ID)
    try:
        answer = admin.create_topics({args.topic: {"num_partitions": args.partitions,
                                                   "replication_factor": args.replication_factor,
                                                   "configs": configs}}, raise_errors=False)
    finally:
        admin.close()
    (topic,) = answer["topics"]
    if topic["error_code"] == TopicAlreadyExistsError.errno and args.if_not_exists:
        return 0
    if topic["error_code"]:
        raise BrokerError(topic["error_code"], topic["error_message"])
    print(f"Created topic {args.topic}.")
    return 0


def _delete(args: argparse.Namespace) -> int:
    admin = admin_client(args, CLIENT_ID)
    try:
        names = _matching([t["name"] for t in admin.describe_topics() if not t.get("is_internal")], args.topic)
        if not names:
            if args.if_exists:
                return 0
            raise CommandError(f"Topic '{args.topic}' does not exist as expected")
        answer = admin.delete_topics(names, raise_errors=False)
    finally:
        admin.close()
    refused = None
    for topic in sorted(answer["topics"], key=lambda t: t["name"]):
        if topic["error_code"]:
            refused = refused or BrokerError(topic["error_code"], topic.get("error_message"))
        else:
            print(f"Deleted topic {topic['name']}.")
    if refused is not None:
        raise refused
    return 0


def kafka_uuid(value: object) -> str | None:
    """A topic id as Kafka prints it (URL-safe base64 of its 16 bytes, unpadded); None for the zero id."""
    if value is None:
        return None
    try:
        raw = (value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))).bytes
    except ValueError:
        return str(value)
    if raw == bytes(16):
        return None
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _non_default_configs(admin, names: list[str]) -> dict[str, str]:
    from kafka.admin import ConfigResource, ConfigResourceType

    if not names:
        return {}
    described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, n) for n in names],
                                       config_filter="all")
    out = {}
    for name in names:
        entries = described.get("topic", {}).get(name, {})
        out[name] = ",".join(f"{key}={entry.get('value')}" for key, entry in sorted(entries.items())
                             if str(entry.get("config_source")) not in DEFAULT_CONFIG_SOURCES)
    return out


def _describe(args: argparse.Namespace) -> int:
    admin = admin_client(args, CLIENT_ID)
    try:
        topics = {t["name"]: t for t in admin.describe_topics()}
        names = _matching([n for n, t in topics.items() if not (args.exclude_internal and t.get("is_internal"))],
                          args.topic)
        if args.topic is not None and not names:
            raise CommandError(f"Topic '{args.topic}' does not exist as expected")
        configs = _non_default_configs(admin, names)
    finally:
        admin.close()
    only_some = args.under_replicated_partitions or args.unavailable_partitions
    for name in names:
        topic = topics[name]
        partitions = sorted(topic["partitions"], key=lambda p: p["partition_index"])
        if not only_some:
            topic_id = kafka_uuid(topic.get("topic_id"))
            id_part = f"\tTopicId: {topic_id}" if topic_id else ""
            replication = len(partitions[0]["replica_nodes"]) if partitions else 0
            print(f"Topic: {name}{id_part}\tPartitionCount: {len(partitions)}\tReplicationFactor: {replication}"
                  f"\tConfigs: {configs.get(name, '')}")
        for p in partitions:
            leader = p["leader_id"]
            if args.under_replicated_partitions and len(p["isr_nodes"]) >= len(p["replica_nodes"]):
                continue
            if args.unavailable_partitions and leader >= 0:
                continue
            print(f"\tTopic: {name}\tPartition: {p['partition_index']}"
                  f"\tLeader: {leader if leader >= 0 else 'none'}"
                  f"\tReplicas: {','.join(map(str, p['replica_nodes']))}"
                  f"\tIsr: {','.join(map(str, p['isr_nodes']))}\tElr: N/A\tLastKnownElr: N/A")
    sys.stdout.flush()
    return 0


ACTIONS = {"list": _list, "create": _create, "describe": _describe, "delete": _delete}
