"""`minikafka share-consume`: print a topic's records as a member of a share group (KIP-932), acknowledging each
once printed, as kafka-console-share-consumer.sh does.

    minikafka share-consume -t orders -G workers -c 10
    minikafka share-consume -t orders -G workers --timeout-ms 5000 --release

The group's members share the partitions' records: each record goes to one member at a time. A printed record is
acknowledged as ACCEPT (done), or with --release as RELEASE (delivered again, to any member) or with --reject as
REJECT (never delivered again). The command stops after --count records, or once none came for --timeout-ms, or on
SIGINT/SIGTERM; it then leaves the group, and records it acquired but did not print are released. Where a new
share-partition starts is the group's share.auto.offset.reset (latest by default). A record delivered
group.share.delivery.count.limit times (5) is archived instead of delivered again.

The output options are `minikafka consume`'s (-K, -D, -f, -J); -f also takes %d, the record's delivery count (1 the
first time), as print.delivery shows it in kafka-console-share-consumer.sh.
"""
from __future__ import annotations

import argparse
import time

from minikafka.cli_common import (
    BOOTSTRAP_TIMEOUT_MS,
    CommandError,
    Stopped,
    StopSignals,
    add_bootstrap,
    add_topic,
    client_settings,
    run_guarded,
)
from minikafka.cli_records import RecordPrinter


def add_parser(sub: argparse._SubParsersAction) -> None:
    c = sub.add_parser("share-consume", help="print records as a member of a share group, acknowledging them",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_bootstrap(c)
    add_topic(c, "the topic to consume from", required=True)
    c.add_argument("--group", "-G", required=True, help="the share group to consume as a member of")
    c.add_argument("--count", "-c", type=int, help="exit after this many records")
    c.add_argument("--timeout-ms", type=int, help="exit once no record came for this long (default: never)")
    how = c.add_mutually_exclusive_group()
    how.add_argument("--release", action="store_true",
                     help="acknowledge printed records as RELEASE: they are delivered again")
    how.add_argument("--reject", action="store_true",
                     help="acknowledge printed records as REJECT: they are never delivered again")
    c.add_argument("--key-delimiter", "-K", help="print KEY<delim>VALUE")
    c.add_argument("--delimiter", "-D", default="\\n", help="printed after each record (default newline)")
    c.add_argument("--format", "-f", help="output format as `minikafka consume -f`, and %%d the record's "
                                          "delivery count, e.g. '%%s (delivery %%d)\\n'")
    c.add_argument("--json", "-J", action="store_true", help="one JSON object per record, as kcat -J")
    c.add_argument("--progress", action="store_true", help="report progress on stderr even when not a terminal")
    c.add_argument("--quiet", "-q", action="store_true", help="no progress or summary on stderr")


def _share_consume(args: argparse.Namespace) -> int:
    from kafka import KafkaConsumer

    from minikafka.share_consumer import ACCEPT, REJECT, RELEASE, ShareGroupConsumer

    if args.count is not None and args.count < 0:
        raise CommandError("--count must not be negative")
    acknowledge_type = RELEASE if args.release else REJECT if args.reject else ACCEPT
    printer = RecordPrinter(args)
    settings = dict(bootstrap_servers=args.bootstrap_server, client_id="minikafka-share-consume",
                    bootstrap_timeout_ms=BOOTSTRAP_TIMEOUT_MS, **client_settings(args))
    with StopSignals(interrupt=True) as stop:
        try:
            probe = KafkaConsumer(**settings)
            try:
                if not probe.partitions_for_topic(args.topic):
                    raise CommandError(f"Topic '{args.topic}' does not exist")
            finally:
                probe.close()
            consumer = ShareGroupConsumer(args.group, [args.topic], **settings)
        except Stopped:
            return stop.exit_code
        try:
            last_record = time.monotonic()
            while not printer.full:
                records = consumer.poll()
                for record in records:
                    if printer.full:
                        break  # left unacknowledged: released when the session closes
                    printer.write({None: [record]})
                    consumer.acknowledge(record, acknowledge_type)
                now = time.monotonic()
                if records:
                    last_record = now
                elif args.timeout_ms is not None and now - last_record >= args.timeout_ms / 1000:
                    break
        except Stopped:
            pass
        finally:
            consumer.close()
    if not args.quiet and (printer.progress.enabled or stop.requested):
        how = f" (stopped by {stop.name})" if stop.requested else ""
        printer.progress.done(f" from {args.topic}{how}")
    if stop.requested:
        return stop.exit_code
    return 0


def run(args: argparse.Namespace) -> int:
    return run_guarded(_share_consume, args)
