"""`minikafka groups list|describe`: kafka-consumer-groups.sh's listing and describe layouts, over Kafka's APIs.

describe shows, per group, the offsets view (GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID
HOST CLIENT-ID), or with --members the members view, or with --state the group's state, as Kafka's tool does.
"""
from __future__ import annotations

import argparse
import sys

from minikafka.cli_common import CommandError, add_bootstrap, admin_client, run_guarded

CLIENT_ID = "minikafka-groups"
MISSING = "-"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("groups", help="list and describe consumer groups (like kafka-consumer-groups.sh)")
    actions = p.add_subparsers(dest="action", required=True)

    ls = actions.add_parser("list", help="print group ids, one per line")
    add_bootstrap(ls)
    ls.add_argument("--state", action="store_true", help="print GROUP and STATE columns")

    describe = actions.add_parser("describe", help="a group's offsets, lag and members")
    add_bootstrap(describe)
    which = describe.add_mutually_exclusive_group(required=True)
    which.add_argument("--group", action="append", help="the group (repeatable)")
    which.add_argument("--all-groups", action="store_true", help="every group the cluster has")
    view = describe.add_mutually_exclusive_group()
    view.add_argument("--members", action="store_true", help="one row per member")
    view.add_argument("--state", action="store_true", help="the group's coordinator, strategy, state and size")
    describe.add_argument("--verbose", action="store_true", help="with --members: each member's assignment")


def run(args: argparse.Namespace) -> int:
    return run_guarded(ACTIONS[args.action], args)


def _list(args: argparse.Namespace) -> int:
    admin = admin_client(args, CLIENT_ID)
    try:
        groups = sorted(admin.list_groups(), key=lambda g: g["group_id"])
    finally:
        admin.close()
    if not args.state:
        for group in groups:
            print(group["group_id"])
        return 0
    width = max([15] + [len(g["group_id"]) for g in groups]) + 10
    print(f"{'GROUP':<{width}} {'STATE':<20}")
    for group in groups:
        print(f"{group['group_id']:<{width}} {group.get('group_state') or 'Unknown':<20}")
    return 0


def _assignment(member: dict) -> list[tuple[str, int]]:
    from minikafka.state import assigned_partitions  # lazy: its dataclasses would slow every command's start

    return assigned_partitions(member.get("member_assignment"))


def _describe(args: argparse.Namespace) -> int:
    admin = admin_client(args, CLIENT_ID)
    try:
        group_ids = sorted(g["group_id"] for g in admin.list_groups()) if args.all_groups else args.group
        described = admin.describe_groups(group_ids)
        failed = False
        for group_id in group_ids:
            group = described.get(group_id, {})
            state = group.get("group_state") or "Dead"
            if group.get("error") or state == "Dead":
                print(f"\nError: Consumer group '{group_id}' does not exist.", file=sys.stderr)
                failed = True
                continue
            if state == "Empty":
                print(f"\nConsumer group '{group_id}' has no active members.", file=sys.stderr)
            elif state in ("PreparingRebalance", "CompletingRebalance"):
                print(f"\nWarning: Consumer group '{group_id}' is rebalancing.", file=sys.stderr)
            if args.state:
                _print_state(admin, group_id, group, state)
            elif args.members:
                _print_members(group_id, group, args.verbose)
            else:
                _print_offsets(admin, group_id, group)
    finally:
        admin.close()
    return 1 if failed else 0


def _print_offsets(admin, group_id: str, group: dict) -> None:
    from kafka import TopicPartition
    from kafka.protocol.consumer import OffsetSpec

    committed = admin.list_group_offsets({group_id: None}).get(group_id, {})
    rows: list[tuple[str, int, dict | None]] = []
    assigned: set[tuple[str, int]] = set()
    for member in group.get("members", []):
        for topic, partition in _assignment(member):
            rows.append((topic, partition, member))
            assigned.add((topic, partition))
    for tp in sorted(committed, key=lambda t: (t.topic, t.partition)):
        if (tp.topic, tp.partition) not in assigned:
            rows.append((tp.topic, tp.partition, None))
    if not rows:
        return
    ends = admin.list_partition_offsets({TopicPartition(t, p): OffsetSpec.LATEST for t, p, _m in rows})
    table = []
    for topic, partition, member in rows:
        tp = TopicPartition(topic, partition)
        offset = committed[tp].offset if tp in committed and committed[tp].offset >= 0 else None
        end = ends[tp].offset if tp in ends else None
        lag = end - offset if end is not None and offset is not None else None
        table.append((group_id, topic, str(partition), MISSING if offset is None else str(offset),
                      MISSING if end is None else str(end), MISSING if lag is None else str(lag),
                      member["member_id"] if member else MISSING, member["client_host"] if member else MISSING,
                      member["client_id"] if member else MISSING))
    w_group = max([15] + [len(r[0]) for r in table])
    w_topic = max([15] + [len(r[1]) for r in table])
    w_member = max([15] + [len(r[6]) for r in table])
    w_host = max([15] + [len(r[7]) for r in table])

    def line(row: tuple) -> str:
        return (f"{row[0]:<{w_group}} {row[1]:<{w_topic}} {row[2]:<10} {row[3]:<15} {row[4]:<15} {row[5]:<15} "
                f"{row[6]:<{w_member}} {row[7]:<{w_host}} {row[8]}")

    print()
    print(line(("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
                "CLIENT-ID")))
    for row in table:
        print(line(row))


def _print_members(group_id: str, group: dict, verbose: bool) -> None:
    members = group.get("members", [])
    w_group = max([15, len(group_id)])
    w_member = max([15] + [len(m["member_id"]) for m in members])
    w_host = max([15] + [len(m["client_host"]) for m in members])
    w_client = max([15] + [len(m["client_id"]) for m in members])

    def line(cells: tuple) -> str:
        return (f"{cells[0]:<{w_group}} {cells[1]:<{w_member}} {cells[2]:<{w_host}} {cells[3]:<{w_client}} "
                f"{cells[4]:<15} ")

    print()
    print(line(("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS")) + ("ASSIGNMENT" if verbose else ""))
    for member in members:
        assignment = _assignment(member)
        text = line((group_id, member["member_id"], member["client_host"], member["client_id"], str(len(assignment))))
        if verbose:
            by_topic: dict[str, list[int]] = {}
            for topic, partition in assignment:
                by_topic.setdefault(topic, []).append(partition)
            text += ", ".join(sorted(f"{t}({','.join(map(str, sorted(ps)))})" for t, ps in by_topic.items())) or MISSING
        print(text)


def _print_state(admin, group_id: str, group: dict, state: str) -> None:
    coordinator = _coordinator(admin, group_id)
    width = max(25, len(coordinator))
    strategy = group.get("protocol_data") or ""
    print()
    print(f"{'GROUP':<{width}} {'COORDINATOR (ID)':<25} {'ASSIGNMENT-STRATEGY':<20} {'STATE':<15} #MEMBERS")
    print(f"{group_id:<{width}} {coordinator:<25} {strategy:<20} {state:<15} {len(group.get('members', []))}")


def _coordinator(admin, group_id: str) -> str:
    """host:port  (id) of the group's coordinator, as kafka-consumer-groups.sh prints it."""
    node_id = admin._manager.run(admin._find_coordinator_id, group_id)  # FindCoordinator; no public call exists
    for broker in admin.describe_cluster()["brokers"]:
        if broker["broker_id"] == node_id:
            return f"{broker['host']}:{broker['port']}  ({node_id})"
    raise CommandError(f"coordinator {node_id} of group {group_id!r} is not in the cluster metadata")


ACTIONS = {"list": _list, "describe": _describe}
