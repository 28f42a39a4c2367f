"""`minikafka fault ...`: inject and clear faults on a running broker (or controller) through its control API.

    minikafka fault error --api Produce --error NOT_LEADER_OR_FOLLOWER --count 3 [--topic T [--partition P]]
    minikafka fault error --api Fetch --error NOT_LEADER_OR_FOLLOWER --forever --source replica
    minikafka fault error --api Produce --error NOT_ENOUGH_REPLICAS --topic orders --partition 0 --skip 2
                          --when acks=all,client_id=billing
    minikafka fault latency --ms 2000 [--api Fetch] [--count N] [--source client]
    minikafka fault drop-response --api Produce [--count N | --forever] [--source client]
    minikafka fault disk-full [--quota-bytes N]
    minikafka fault cut-link --to N [--one-way]
    minikafka fault pause-fetching [--topic T [--partition P]]
    minikafka fault fail-log-dir --path DIR
    minikafka fault hold-txn-markers [--to N]
    minikafka fault crash-cleaner --at before-swap|mid-swap|after-swap [--topic T]
    minikafka fault close-connections
    minikafka fault list
    minikafka fault clear [--kind error|latency|drop-response|disk|link|fetch-pause|txn-markers-hold|cleaner-crash]
                          [--id N]
    minikafka fault shutdown

error, latency and drop-response take --when NAME=VALUE[,NAME=VALUE...] (request fields that must be as given:
client_id, version, acks (a number or all), group, transactional_id, producer_id, isolation_level; topic, and
partition with it, for requests with entries for them: an error then fails those entries only; min_offset and
max_offset, for requests with an entry carrying such an offset: fetch, committed or DeleteRecords offsets) and
--skip N (let N matching requests through first: --skip 2 applies to the third). `fault list` shows how often each
has hit.

drop-response carries out the next requests of an API, then closes the connection instead of answering: the
client does not learn that its request was done, as when a response is lost. cut-link partitions the network
between the node at --bootstrap-server and node N (a broker id, or the controller's node id): requests between
them fail, client connections do not. Both ways unless --one-way, in which case only this node's end is cut.
pause-fetching stops this broker's replica fetchers, so its leaders take it out of their ISRs; clearing either
fault undoes it (a cut made both ways heals at both ends). fail-log-dir fails one of the broker's log dirs as an
I/O error would: its replicas go offline and their leaderships move; only a restart of the broker brings the dir
back. hold-txn-markers keeps the broker, as transaction coordinator, from writing commit and abort markers to
broker N (default: to any): EndTxn is answered, the partitions' last stable offsets stay put until the fault is
cleared. crash-cleaner kills the broker (as kill -9) when its log cleaner reaches that point of a cleaned segment's
swap (of topic T, or any): the next start recovers the log as Kafka's LogLoader does.
"""
from __future__ import annotations

import argparse
from typing import Any

from minikafka.cli_common import add_bootstrap, add_topic, control_client, run_guarded


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("fault", help="inject, list and clear faults on a running minikafka broker",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    actions = p.add_subparsers(dest="action", required=True)

    error = actions.add_parser("error", help="answer requests of one API with an error code")
    add_bootstrap(error)
    error.add_argument("--api", required=True, help="Kafka API name or key, e.g. Produce, Fetch, OffsetCommit, 0")
    error.add_argument("--error", required=True, help="Kafka error name or code, e.g. NOT_LEADER_OR_FOLLOWER, 6")
    count = error.add_mutually_exclusive_group()
    count.add_argument("--count", type=int, default=1, help="how many requests fail (default 1)")
    count.add_argument("--forever", action="store_true", help="every matching request, until cleared")
    add_topic(error, "only this topic's entries of a request fail")
    error.add_argument("--partition", type=int, help="only this partition of --topic fails")
    _add_source(error)

    latency = actions.add_parser("latency", help="hold back responses")
    add_bootstrap(latency)
    latency.add_argument("--ms", type=int, required=True, help="delay in milliseconds")
    latency.add_argument("--api", help="only responses of this API (default: all)")
    latency.add_argument("--count", type=int, help="only the next N responses (default: until cleared)")
    _add_source(latency)

    drop = actions.add_parser("drop-response", help="carry out requests of one API, then close the connection "
                                                    "instead of answering")
    add_bootstrap(drop)
    drop.add_argument("--api", required=True, help="Kafka API name or key, e.g. Produce, OffsetCommit")
    drop_count = drop.add_mutually_exclusive_group()
    drop_count.add_argument("--count", type=int, default=1, help="how many responses are dropped (default 1)")
    drop_count.add_argument("--forever", action="store_true", help="every matching request, until cleared")
    _add_source(drop)

    disk = actions.add_parser("disk-full", help="cap the data dir: appends beyond it fail with KAFKA_STORAGE_ERROR")
    add_bootstrap(disk)
    disk.add_argument("--quota-bytes", type=int, help="the cap (default: what the data dir holds now)")

    cut = actions.add_parser("cut-link", help="cut the link to another node: a network partition")
    add_bootstrap(cut)
    cut.add_argument("--to", type=int, required=True, help="the other node's id (a broker, or the controller)")
    cut.add_argument("--one-way", action="store_true", help="cut only this node's end of the link")

    pause = actions.add_parser("pause-fetching", help="stop this broker's replica fetchers (it leaves ISRs)")
    add_bootstrap(pause)
    add_topic(pause, "only this topic's partitions (default: every partition)")
    pause.add_argument("--partition", type=int, help="only this partition of --topic")

    failed = actions.add_parser("fail-log-dir", help="fail one log dir of the broker, as an I/O error would")
    add_bootstrap(failed)
    failed.add_argument("--path", required=True, help="the log dir, as log.dirs names it")

    held = actions.add_parser("hold-txn-markers", help="hold back this transaction coordinator's markers")
    add_bootstrap(held)
    held.add_argument("--to", type=int, help="only the markers to this broker (default: to every broker)")

    crash = actions.add_parser("crash-cleaner", help="kill the broker when its log cleaner reaches a point of a swap")
    add_bootstrap(crash)
    crash.add_argument("--at", required=True, choices=["before-swap", "mid-swap", "after-swap"],
                       help="before the cleaned segment is renamed to .swap, once it is, or once it is swapped in")
    crash.add_argument("--topic", help="only while cleaning a log of this topic (default: any)")

    for name, text in (("close-connections", "close every client connection (clients reconnect)"),
                       ("list", "print the active faults"),
                       ("shutdown", "stop the broker cleanly, as SIGTERM does")):
        add_bootstrap(actions.add_parser(name, help=text))

    clear = actions.add_parser("clear", help="undo faults (all by default)")
    add_bootstrap(clear)
    clear.add_argument("--kind", choices=["error", "latency", "drop-response", "disk", "link", "fetch-pause",
                                          "txn-markers-hold", "cleaner-crash"], help="only the faults of this kind")
    clear.add_argument("--id", type=int, help="only the fault with this id")


def _add_source(parser: argparse.ArgumentParser) -> None:
    """The request selectors of the rule faults: --source, --when and --skip."""
    parser.add_argument("--source", choices=["replica", "client"],
                        help="only requests from follower brokers (Fetch, OffsetForLeaderEpoch with a replica id) "
                             "or only those from clients (default: both)")
    parser.add_argument("--when", type=_when, metavar="NAME=VALUE[,NAME=VALUE...]",
                        help="only requests whose fields are as given (client_id, version, acks, group, "
                             "transactional_id, producer_id, isolation_level; topic and partition: requests "
                             "with entries for them; min_offset, max_offset: an entry's offset in that range)")
    parser.add_argument("--skip", type=int, default=0, help="let this many matching requests through first")


def _when(text: str) -> dict[str, str]:
    fields = {}
    for pair in text.split(","):
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {pair!r}")
        fields[name.strip()] = value.strip()
    return fields


def run(args: argparse.Namespace) -> int:
    return run_guarded(_run, args)


def _hits(fault: dict[str, Any]) -> str:
    """The request selectors beyond api and source, and how often the rule has applied."""
    when = fault.get("when") or {}
    selected = f" when {', '.join(f'{name}={value}' for name, value in when.items())}" if when else ""
    skip = fault.get("skip") or 0
    skipping = f", after letting {skip} through ({fault.get('skipped', 0)} so far)" if skip else ""
    hits = f" (hit {fault['hits']} so far)" if fault.get("hits") else ""
    return f"{selected}{skipping}{hits}"


def describe_fault(fault: dict[str, Any]) -> str:
    """One line for a fault as the broker describes it."""
    source = {"replica": " from replicas", "client": " from clients"}.get(fault.get("source") or "", "")
    if fault["kind"] == "error":
        scope = ""
        if fault.get("topic") is not None:
            scope = f" for {fault['topic']}" + (f"-{fault['partition']}" if fault.get("partition") is not None else "")
        times = "until cleared" if fault["remaining"] is None else f"for the next {fault['remaining']} request(s)"
        return f"{fault['api']}{source} fails with {fault['error']}{scope} {times}{_hits(fault)}"
    if fault["kind"] == "latency":
        times = "until cleared" if fault["remaining"] is None else f"for the next {fault['remaining']} response(s)"
        return f"{fault['api'] or 'every'} response{source} delayed {fault['delay_ms']} ms {times}{_hits(fault)}"
    if fault["kind"] == "drop-response":
        times = "until cleared" if fault["remaining"] is None else f"for the next {fault['remaining']} request(s)"
        return f"{fault['api']}{source} carried out but left unanswered (connection closed) {times}{_hits(fault)}"
    if fault["kind"] == "link":
        ways = "both ways" if fault["both_ways"] else "one way (this end)"
        return f"link to node {fault['to']} cut, {ways}"
    if fault["kind"] == "fetch-pause":
        if fault["topic"] is None:
            return "replica fetching paused for every partition"
        scope = fault["topic"] if fault["partition"] is None else f"{fault['topic']}-{fault['partition']}"
        return f"replica fetching paused for {scope}"
    if fault["kind"] == "log-dir":
        return f"log dir {fault['path']} failed (offline until the broker restarts)"
    if fault["kind"] == "txn-markers-hold":
        to = "every broker" if fault["to"] is None else f"broker {fault['to']}"
        return f"transaction markers to {to} held"
    if fault["kind"] == "cleaner-crash":
        scope = "any topic" if fault["topic"] is None else f"topic {fault['topic']}"
        return f"the broker dies at the log cleaner's {fault['at']} of {scope}"
    quota, used = fault["quota_bytes"], fault["used_bytes"]
    room = f"{quota - used} free" if used <= quota else f"{used - quota} over the quota"
    return f"disk quota {quota} bytes: {used} in use, {room}"


def _run(args: argparse.Namespace) -> int:
    control = control_client(args)
    action = args.action
    if action == "error":
        answer = control.call("fault.add", kind="error", api=args.api, error=args.error,
                              count=None if args.forever else args.count, topic=args.topic, partition=args.partition,
                              source=args.source, when=args.when, skip=args.skip)
    elif action == "latency":
        answer = control.call("fault.add", kind="latency", delay_ms=args.ms, api=args.api, count=args.count,
                              source=args.source, when=args.when, skip=args.skip)
    elif action == "drop-response":
        answer = control.call("fault.add", kind="drop-response", api=args.api,
                              count=None if args.forever else args.count, source=args.source, when=args.when,
                              skip=args.skip)
    elif action == "disk-full":
        answer = control.call("fault.add", kind="disk", quota_bytes=args.quota_bytes)
    elif action == "cut-link":
        answer = control.call("fault.add", kind="link", to=args.to, both_ways=not args.one_way)
    elif action == "pause-fetching":
        answer = control.call("fault.add", kind="fetch-pause", topic=args.topic, partition=args.partition)
    elif action == "fail-log-dir":
        answer = control.call("fault.add", kind="log-dir", path=args.path)
    elif action == "hold-txn-markers":
        answer = control.call("fault.add", kind="txn-markers-hold", to=args.to)
    elif action == "crash-cleaner":
        answer = control.call("fault.add", kind="cleaner-crash", at=args.at, topic=args.topic)
    elif action == "close-connections":
        print(f"Closed {control.call('connections.close')['closed']} connection(s).")
        return 0
    elif action == "list":
        for fault in control.call("fault.list")["faults"]:
            print(f"{fault.get('id', '-')}\t{fault['kind']}\t{describe_fault(fault)}")
        return 0
    elif action == "clear":
        print(f"Cleared {control.call('fault.clear', kind=args.kind, id=args.id)['cleared']} fault(s).")
        return 0
    else:
        control.call("shutdown")
        print("Broker shutting down.")
        return 0
    fault = answer["fault"]
    label = f"fault {fault['id']}" if "id" in fault else "fault"
    print(f"Added {label}: {describe_fault(fault)}")
    return 0
