"""`minikafka fault ...`: inject and clear faults on a running broker (or controller) through its control API.

    minikafka fault error --api Produce --error NOT_LEADER_OR_FOLLOWER --count 3 [--topic T [--partition P]]
    minikafka fault error --api Fetch --error NOT_LEADER_OR_FOLLOWER --forever --source replica
    minikafka fault error --api Produce --error NOT_ENOUGH_REPLICAS --topic orders --partition 0 --skip 2
                          --when acks=all,client_id=billing
    minikafka fault latency --ms 2000 [--api Fetch] [--count N] [--source client]
    minikafka fault drop-response --api Produce [--count N | --forever] [--source client]
    minikafka fault connection-delay --ms 500 [--api A] [--count N] --when client_id=billing
    minikafka fault reorder [--api A] [--count N]
    minikafka fault bandwidth --bytes-per-s 10000 [--api Fetch] [--count N]
    minikafka fault close-after-bytes --bytes 1000 [--count N | --forever]
    minikafka fault partial-fetch [--count N | --forever]
    minikafka fault disk-full [--quota-bytes N]
    minikafka fault cut-link --to N [--one-way]
    minikafka fault pause-fetching [--topic T [--partition P]]
    minikafka fault fail-log-dir --path DIR
    minikafka fault hold-txn-markers [--to N]
    minikafka fault jump-clock --ms -3600000
    minikafka fault crash-cleaner --at before-swap|mid-swap|after-swap [--topic T]
    minikafka fault close-connections
    minikafka fault list
    minikafka fault clear [--kind KIND] [--id N]
    minikafka fault shutdown

error, latency, drop-response and the network faults (connection-delay, reorder, bandwidth, close-after-bytes,
partial-fetch) take --source, --when NAME=VALUE[,NAME=VALUE...] (request fields that must be as given:
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
cleared. jump-clock steps the broker's wall clock by --ms (negative: back), its timers untouched, as a clock step on
its host would; clearing it steps the clock back. crash-cleaner kills the broker (as kill -9) when its log cleaner
reaches that point of a cleaned segment's swap (of topic T, or any): the next start recovers the log as Kafka's
LogLoader does.

The network faults shape how responses travel. connection-delay holds back the responses of one connection (the
first whose request matches; others, even of the same client id, are answered at once); reorder, on one
connection, answers a pipelined request N+1 before request N; bandwidth writes responses at that many bytes per
second; close-after-bytes closes a connection once that many response bytes were written to it, the response
under way cut off; partial-fetch answers a Fetch with each partition's last record batch cut short (the first
batch stays whole, as a broker at its size limits answers).
"""
from __future__ import annotations

import argparse
from typing import Any

from minikafka.cli_common import add_bootstrap, add_topic, control_client, run_guarded

# The network fault kinds (the broker's broker/faults/network_rules.KINDS), each the name of its subcommand.
NETWORK_KINDS = ("connection-delay", "reorder", "bandwidth", "close-after-bytes", "partial-fetch")


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

    delayed = actions.add_parser("connection-delay", help="hold back the responses of one connection")
    add_bootstrap(delayed)
    delayed.add_argument("--ms", type=int, required=True, help="delay in milliseconds")
    _add_network(delayed, default_count=None)

    reorder = actions.add_parser("reorder", help="answer a pipelined request before the one sent ahead of it, on "
                                                 "one connection")
    add_bootstrap(reorder)
    _add_network(reorder, default_count=None)

    paced = actions.add_parser("bandwidth", help="write responses at a bandwidth")
    add_bootstrap(paced)
    paced.add_argument("--bytes-per-s", type=int, required=True, help="bytes per second")
    _add_network(paced, default_count=None)

    closing = actions.add_parser("close-after-bytes", help="close a connection after N response bytes")
    add_bootstrap(closing)
    closing.add_argument("--bytes", type=int, required=True, help="response bytes written before the close")
    _add_network(closing, default_count=1)

    partial = actions.add_parser("partial-fetch", help="answer Fetch requests with the last batch cut short")
    add_bootstrap(partial)
    _add_network(partial, default_count=1, api=False)

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
    crash.add_argument("--topic", "-t", help="only while cleaning a log of this topic (default: any)")
    jump = actions.add_parser("jump-clock", help="step the broker's wall clock forwards or back")
    add_bootstrap(jump)
    jump.add_argument("--ms", type=int, required=True, help="how far, in ms (negative: back)")

    for name, text in (("close-connections", "close every client connection (clients reconnect)"),
                       ("list", "print the active faults"),
                       ("shutdown", "stop the broker cleanly, as SIGTERM does")):
        add_bootstrap(actions.add_parser(name, help=text))

    clear = actions.add_parser("clear", help="undo faults (all by default)")
    add_bootstrap(clear)
    clear.add_argument("--kind", choices=["error", "latency", "drop-response", *NETWORK_KINDS, "disk", "link",
                                          "fetch-pause", "txn-markers-hold", "auth-failure", "clock-jump",
                                          "cleaner-crash"],
                       help="only the faults of this kind")
    clear.add_argument("--id", type=int, help="only the fault with this id")


def _add_network(parser: argparse.ArgumentParser, default_count: int | None, api: bool = True) -> None:
    """The options of a network fault: --api, --count or --forever, and the request selectors."""
    if api:
        parser.add_argument("--api", help="only responses to this API (default: all)")
    count = parser.add_mutually_exclusive_group()
    times = "until cleared" if default_count is None else str(default_count)
    count.add_argument("--count", type=int, default=default_count, help=f"how many times it applies (default {times})")
    count.add_argument("--forever", action="store_true", help="until cleared")
    _add_source(parser)


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
    if fault["kind"] in NETWORK_KINDS:
        return _describe_network(fault, source)
    if fault["kind"] == "link":
        ways = "both ways" if fault["both_ways"] else "one way (this end)"
        return f"link to node {fault['to']} cut, {ways}{_hits(fault)}"
    if fault["kind"] == "fetch-pause":
        if fault["topic"] is None:
            return f"replica fetching paused for every partition{_hits(fault)}"
        scope = fault["topic"] if fault["partition"] is None else f"{fault['topic']}-{fault['partition']}"
        return f"replica fetching paused for {scope}{_hits(fault)}"
    if fault["kind"] == "log-dir":
        return f"log dir {fault['path']} failed (offline until the broker restarts)"
    if fault["kind"] == "clock-jump":
        return f"wall clock stepped {'forwards' if fault['ms'] >= 0 else 'back'} by {abs(fault['ms'])} ms"
    if fault["kind"] == "txn-markers-hold":
        to = "every broker" if fault["to"] is None else f"broker {fault['to']}"
        return f"transaction markers to {to} held{_hits(fault)}"
    if fault["kind"] == "auth-failure":
        who = "everyone" if fault["user"] is None else fault["user"]
        return f"SASL authentications of {who} refused{_hits(fault)}"
    if fault["kind"] == "cleaner-crash":
        scope = "any topic" if fault["topic"] is None else f"topic {fault['topic']}"
        return f"the broker dies at the log cleaner's {fault['at']} of {scope}"
    quota, used = fault["quota_bytes"], fault["used_bytes"]
    room = f"{quota - used} free" if used <= quota else f"{used - quota} over the quota"
    return f"disk quota {quota} bytes: {used} in use, {room}{_hits(fault)}"


def _describe_network(fault: dict[str, Any], source: str) -> str:
    times = "until cleared" if fault["remaining"] is None else f"{fault['remaining']} more time(s)"
    responses = f"{fault['api'] or 'every'} response{source}"
    one = f"connection {fault['connection_id']} ({fault['peer']})" if fault.get("connection_id") else \
        "the first connection to match"
    what = {"connection-delay": f"{responses} on {one} delayed {fault['delay_ms']} ms",
            "reorder": f"{responses} on {one} written after the next pipelined response",
            "bandwidth": f"{responses} written at {fault['bytes_per_s']} bytes/s",
            "close-after-bytes": f"connection closed after {fault['close_after_bytes']} bytes of {responses}",
            "partial-fetch": f"Fetch response{source} with the last record batch cut short"}[fault["kind"]]
    return f"{what}, {times}{_hits(fault)}"


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
    elif action in NETWORK_KINDS:
        parameter = {name: getattr(args, option) for name, option in (("delay_ms", "ms"),
                     ("bytes_per_s", "bytes_per_s"), ("close_after_bytes", "bytes")) if hasattr(args, option)}
        answer = control.call("fault.add", kind=action, api=getattr(args, "api", None),
                              count=None if args.forever else args.count, source=args.source, when=args.when,
                              skip=args.skip, **parameter)
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
    elif action == "jump-clock":
        answer = control.call("fault.add", kind="clock-jump", ms=args.ms)
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
