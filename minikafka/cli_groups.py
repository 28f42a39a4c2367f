"""`minikafka groups list|describe`: kafka-consumer-groups.sh's (and kafka-groups.sh's) listing and describe
layouts, over Kafka's APIs, for groups of either protocol.

list asks every broker (ListGroups v5, which types each group: Classic, Consumer or Share, as Kafka's tools print
them). describe shows, per group, the offsets view (GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG
CONSUMER-ID HOST CLIENT-ID), or with --members the members view, or with --state the group's state, as Kafka's
tool does. A KIP-848 consumer group is described by ConsumerGroupDescribe (member and group epochs, current and
target assignments), a classic one by DescribeGroups. A KIP-932 share group is described by ShareGroupDescribe, and
its offsets view is kafka-share-groups.sh's (GROUP TOPIC PARTITION START-OFFSET, from DescribeShareGroupOffsets).
"""
from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from minikafka.cli_common import CommandError, add_bootstrap, admin_client, run_guarded

if TYPE_CHECKING:
    from minikafka.state import GroupMember, GroupState

CLIENT_ID = "minikafka-groups"
MISSING = "-"
# Kafka's names (GroupState, GroupType), as its tools print them and take them in --state / --type filters.
GROUP_STATES = ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty", "Assigning", "Reconciling")
GROUP_TYPES = ("Classic", "Consumer", "Share", "Streams")
REBALANCING = ("PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("groups", help="list and describe consumer groups (like kafka-consumer-groups.sh)")
    actions = p.add_subparsers(dest="action", required=True)

    ls = actions.add_parser("list", help="print group ids, one per line")
    add_bootstrap(ls)
    ls.add_argument("--state", nargs="?", const="", metavar="STATES",
                    help="print a STATE column; with a comma-separated list of states (e.g. Stable,Empty) only "
                         "groups in those")
    ls.add_argument("--type", nargs="?", const="", metavar="TYPES",
                    help="print a TYPE column (Classic, Consumer, Share); with a comma-separated list of types only "
                         "groups of those")

    describe = actions.add_parser("describe", help="a group's offsets, lag and members")
    add_bootstrap(describe)
    which = describe.add_mutually_exclusive_group(required=True)
    which.add_argument("--group", action="append", help="the group (repeatable)")
    which.add_argument("--all-groups", action="store_true", help="every group the cluster has")
    view = describe.add_mutually_exclusive_group()
    view.add_argument("--members", action="store_true", help="one row per member")
    view.add_argument("--state", action="store_true", help="the group's coordinator, strategy, state and size")
    describe.add_argument("--verbose", action="store_true",
                          help="with --members: each member's assignment (and a consumer group's member epochs and "
                               "target assignment); with --state: the group epoch and target assignment epoch")


def run(args: argparse.Namespace) -> int:
    return run_guarded(ACTIONS[args.action], args)


def _filter(given: str | None, names: tuple[str, ...], what: str) -> list[str]:
    """Kafka's names in a comma-separated, case-insensitive --state / --type list; CommandError for others."""
    if not given:
        return []
    by_lower = {name.lower(): name for name in names}
    chosen = []
    for word in (w.strip() for w in given.split(",")):
        if word.lower() not in by_lower:
            raise CommandError(f"Invalid {what} list '{given}'. Valid {what}s are: {', '.join(names)}")
        chosen.append(by_lower[word.lower()])
    return chosen


def _list(args: argparse.Namespace) -> int:
    states = _filter(args.state, GROUP_STATES, "state")
    types = _filter(args.type, GROUP_TYPES, "type")
    admin = admin_client(args, CLIENT_ID)
    try:
        groups = sorted(admin.list_groups(states_filter=states or None,
                                          types_filter=[t.lower() for t in types] or None),
                        key=lambda g: g["group_id"])
    finally:
        admin.close()
    if args.state is None and args.type is None:
        for group in groups:
            print(group["group_id"])
        return 0
    width = max([15] + [len(g["group_id"]) for g in groups]) + 10
    columns = [("GROUP", lambda g: g["group_id"], width)]
    if args.type is not None:
        columns.append(("TYPE", lambda g: (g.get("group_type") or "unknown").capitalize(), 20))
    if args.state is not None:
        columns.append(("STATE", lambda g: g.get("group_state") or "Unknown", 20))
    print(" ".join(f"{name:<{w}}" for name, _cell, w in columns))
    for group in groups:
        print(" ".join(f"{cell(group):<{w}}" for _name, cell, w in columns))
    return 0


def _describe(args: argparse.Namespace) -> int:
    from minikafka.state import (
        classic_group_state,
        consumer_group_state,
        describe_consumer_groups,
        describe_share_groups,
        share_group_state,
    )

    admin = admin_client(args, CLIENT_ID)
    try:
        group_ids = sorted(g["group_id"] for g in admin.list_groups()) if args.all_groups else args.group
        consumer_groups = describe_consumer_groups(admin, group_ids)
        other_ids = [g for g in group_ids if g not in consumer_groups]
        share_groups = describe_share_groups(admin, other_ids) if other_ids else {}
        classic_ids = [g for g in other_ids if g not in share_groups]
        described = admin.describe_groups(classic_ids) if classic_ids else {}
        failed = False
        for group_id in group_ids:
            if group_id in share_groups:
                group = share_group_state(share_groups[group_id])
                if group.state == "Empty":
                    print(f"\nShare group '{group_id}' has no active members.", file=sys.stderr)
                if args.state:
                    _print_state(admin, group, args.verbose)
                elif args.members:
                    _print_members(group, args.verbose)
                else:
                    _print_share_offsets(admin, group_id, args.verbose)
                continue
            if group_id in consumer_groups:
                group = consumer_group_state(consumer_groups[group_id], {})
            else:
                classic = described.get(group_id, {})
                if classic.get("error") or (classic.get("group_state") or "Dead") == "Dead":
                    print(f"\nError: Consumer group '{group_id}' does not exist.", file=sys.stderr)
                    failed = True
                    continue
                group = classic_group_state(group_id, classic, {})
            if group.state == "Empty":
                print(f"\nConsumer group '{group_id}' has no active members.", file=sys.stderr)
            elif group.state in REBALANCING:
                print(f"\nWarning: Consumer group '{group_id}' is rebalancing.", file=sys.stderr)
            if args.state:
                _print_state(admin, group, args.verbose)
            elif args.members:
                _print_members(group, args.verbose)
            else:
                _print_offsets(admin, group)
    finally:
        admin.close()
    return 1 if failed else 0


def _print_offsets(admin, group: GroupState) -> None:
    from kafka import TopicPartition
    from kafka.protocol.consumer import OffsetSpec

    group_id = group.group_id
    committed = admin.list_group_offsets({group_id: None}).get(group_id, {})
    rows: list[tuple[str, int, GroupMember | None]] = []
    assigned: set[tuple[str, int]] = set()
    for member in group.members:
        for topic, partition in member.assignment:
            rows.append((topic, partition, member))
            assigned.add((topic, partition))
    for tp in sorted(committed, key=lambda t: (t.topic, t.partition)):
        if (tp.topic, tp.partition) not in assigned:
            rows.append((tp.topic, tp.partition, None))
    if not rows:
        return
    ends = admin.list_partition_offsets({TopicPartition(t, p): OffsetSpec.LATEST for t, p, _m in rows})
    table = []
    for topic, partition, owner in rows:
        tp = TopicPartition(topic, partition)
        offset = committed[tp].offset if tp in committed and committed[tp].offset >= 0 else None
        end = ends[tp].offset if tp in ends else None
        lag = end - offset if end is not None and offset is not None else None
        table.append((group_id, topic, str(partition), MISSING if offset is None else str(offset),
                      MISSING if end is None else str(end), MISSING if lag is None else str(lag),
                      owner.member_id if owner else MISSING, owner.host if owner else MISSING,
                      owner.client_id if owner else MISSING))
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


def _print_share_offsets(admin, group_id: str, verbose: bool) -> None:
    """kafka-share-groups.sh --describe's offsets view: each share-partition's start offset (DescribeShareGroupOffsets
    of every share-partition the group initialized), `-` where it has none; --verbose adds the leader epoch."""
    rows = sorted(share_group_start_offsets(admin, group_id).items())
    w_group = max(15, len(group_id))
    w_topic = max([15] + [len(topic) for (topic, _p), _o in rows])

    def line(cells: tuple) -> str:
        head = f"{cells[0]:<{w_group}} {cells[1]:<{w_topic}} {cells[2]:<10} "
        return head + (f"{cells[3]:<13} {cells[4]}" if verbose else f"{cells[4]}")

    print()
    print(line(("GROUP", "TOPIC", "PARTITION", "LEADER-EPOCH", "START-OFFSET")))
    for (topic, partition), (offset, leader_epoch) in rows:
        print(line((group_id, topic, str(partition), MISSING if offset < 0 else str(leader_epoch),
                    MISSING if offset < 0 else str(offset))))


def share_group_start_offsets(admin, group_id: str) -> dict[tuple[str, int], tuple[int, int]]:
    """(topic, partition) -> (start offset, leader epoch) of a share group's share-partitions, asked of its
    coordinator with DescribeShareGroupOffsets v0 (kafka-python has no call for it)."""
    from minikafka.protocol.client_apis.messages import DescribeShareGroupOffsetsRequest
    from minikafka.protocol.schema_loading import quiet_schema_loading

    with quiet_schema_loading():
        import kafka.errors as errors
    R = DescribeShareGroupOffsetsRequest

    async def describe() -> dict[tuple[str, int], tuple[int, int]]:
        node_id = (await admin._find_coordinator_ids([group_id]))[group_id]  # no public call for it either
        response = await admin._manager.send(R(version=0, groups=[R.DescribeShareGroupOffsetsRequestGroup(
            group_id=group_id, topics=None)]), node_id=node_id)
        (group,) = response.groups
        error = errors.for_code(group.error_code)
        if error is not errors.NoError:
            raise CommandError(f"describing the offsets of share group {group_id!r} failed: {error.__name__}"
                               + (f" ({group.error_message})" if group.error_message else ""))
        return {(t.topic_name, p.partition_index): (p.start_offset, p.leader_epoch)
                for t in group.topics for p in t.partitions}

    result: dict[tuple[str, int], tuple[int, int]] = admin._manager.run(describe)
    return result


def assignment_text(partitions: list[tuple[str, int]]) -> str:
    """Kafka's tool's assignment cell: `topic:0,1;other:2`, topics sorted, or `-` for none."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    return ";".join(sorted(f"{t}:{','.join(map(str, sorted(ps)))}" for t, ps in by_topic.items())) or MISSING


def _print_members(group: GroupState, verbose: bool) -> None:
    """A group's members as kafka-consumer-groups.sh --describe --members [--verbose] prints them for either
    protocol: a GROUP-INSTANCE-ID column when a member is static, and with `verbose` each member's epoch and
    assignment and the target assignment (epoch and partitions) it is reconciling to, `-` where a classic group has
    none, and, for a consumer group with members of both protocols, Kafka's UPGRADED column (true for a consumer
    protocol member, false for a classic one)."""
    members = group.members
    current = [assignment_text(m.assignment) for m in members]
    target = [assignment_text(m.target_assignment or []) for m in members]
    w_group = max([15, len(group.group_id)])
    w_member = max([15] + [len(m.member_id) for m in members])
    w_instance = max([17] + [len(m.group_instance_id or "") for m in members])
    w_host = max([15] + [len(m.host) for m in members])
    w_client = max([15] + [len(m.client_id) for m in members])
    w_current = max([20] + [len(c) for c in current])
    w_target = max([20] + [len(t) for t in target])
    with_instance = any(m.group_instance_id for m in members)
    # Kafka's UPGRADED column: only for a group in migration, with members of both protocols.
    with_upgrade = any(m.upgraded is True for m in members) and any(m.upgraded is False for m in members)

    def line(cells: tuple) -> str:
        instance = f"{cells[2]:<{w_instance}} " if with_instance else ""
        return (f"{cells[0]:<{w_group}} {cells[1]:<{w_member}} {instance}{cells[3]:<{w_host}} "
                f"{cells[4]:<{w_client}} {cells[5]:<15} ")

    def epochs(cells: tuple) -> str:
        if not verbose:
            return ""
        text = f"{cells[0]:<15} {cells[1]:<{w_current}} {cells[2]:<15} {cells[3]:<{w_target}}"
        return f"{text} {cells[4]}" if with_upgrade else text

    print()
    print(line(("GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS"))
          + epochs(("CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT", "UPGRADED")))
    for member, now, then in zip(members, current, target, strict=True):
        upgraded = MISSING if member.upgraded is None else str(member.upgraded).lower()
        print(line((group.group_id, member.member_id, member.group_instance_id or "", member.host,
                    member.client_id, str(len(member.assignment))))
              + epochs((_or_missing(member.member_epoch), now, _or_missing(group.assignment_epoch), then, upgraded)))


def _or_missing(epoch: int | None) -> str:
    return MISSING if epoch is None else str(epoch)


def _print_state(admin, group: GroupState, verbose: bool) -> None:
    """Coordinator, assignment strategy (a consumer group's server assignor), state and size; with `verbose` the
    group epoch and target assignment epoch too (`-` for a classic group), as Kafka's tool prints them."""
    coordinator = _coordinator(admin, group.group_id)
    w_group = max(15, len(group.group_id))
    w_coordinator = max(25, len(coordinator))
    strategy = group.assignor or MISSING
    cells = [(group.group_id, "GROUP", w_group), (coordinator, "COORDINATOR (ID)", w_coordinator),
             (strategy, "ASSIGNMENT-STRATEGY", 20), (group.state, "STATE", 20)]
    if verbose:
        cells += [(MISSING if group.group_epoch is None else str(group.group_epoch), "GROUP-EPOCH", 15),
                  (MISSING if group.assignment_epoch is None else str(group.assignment_epoch),
                   "TARGET-ASSIGNMENT-EPOCH", 25)]
    print()
    print(" ".join(f"{name:<{w}}" for _v, name, w in cells) + " #MEMBERS")
    print(" ".join(f"{value:<{w}}" for value, _n, w in cells) + f" {len(group.members)}")


def _coordinator(admin, group_id: str) -> str:
    """host:port  (id) of the group's coordinator, as kafka-consumer-groups.sh prints it."""
    node_id = admin._manager.run(admin._find_coordinator_id, group_id)  # FindCoordinator; no public call exists
    for broker in admin.describe_cluster()["brokers"]:
        if broker["broker_id"] == node_id:
            return f"{broker['host']}:{broker['port']}  ({node_id})"
    raise CommandError(f"coordinator {node_id} of group {group_id!r} is not in the cluster metadata")


ACTIONS = {"list": _list, "describe": _describe}
