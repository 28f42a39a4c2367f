"""`minikafka produce` and `minikafka consume`: records between stdin/stdout and a topic, with kcat's options.

    printf 'k1:v1\\nk2:v2\\n' | minikafka produce -t orders -K: -H source=cli
    minikafka consume -t orders -o beginning -e -f 'p%p o%o %k=%s [%h]\\n'
    minikafka consume -t orders -o s@1700000000000 -c 10 -J

Offsets (-o) as in kcat: beginning, end, stored (with -G), an absolute offset, -N (N before the end), s@MS (the
first record at or after a timestamp in ms). Formats (-f): %t topic, %p partition, %o offset, %k key, %s value,
%K key length, %S value length (-1 for null), %T timestamp, %h headers (name=value,...), %%, and \\n \\t \\r.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Iterator
from typing import BinaryIO

from minikafka.cli_common import (
    BOOTSTRAP_TIMEOUT_MS,
    CommandError,
    Progress,
    add_bootstrap,
    parse_key_values,
    run_guarded,
)

FLUSH_EVERY = 10000


def _unescape(text: str) -> bytes:
    return text.encode().decode("unicode_escape").encode("latin-1")


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("produce", help="produce records read from stdin (like kcat -P)", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    add_bootstrap(p)
    p.add_argument("--topic", "-t", required=True)
    p.add_argument("--partition", "-p", type=int, help="partition (default: by key, or spread)")
    p.add_argument("--key-delimiter", "-K", help="split each message into KEY<delim>VALUE at the first delimiter")
    p.add_argument("--key", "-k", help="one key for every message")
    p.add_argument("--header", "-H", action="append", default=[], metavar="NAME=VALUE",
                   help="a header added to every message (repeatable)")
    p.add_argument("--delimiter", "-D", default="\\n", help="message delimiter (default: newline)")
    p.add_argument("--file", help="read messages from this file instead of stdin")
    p.add_argument("--acks", default="all", choices=["0", "1", "all", "-1"])
    p.add_argument("--compression", "-z", choices=["none", "gzip", "snappy", "lz4", "zstd"], default="none")
    p.add_argument("--delivery-timeout-ms", type=int, default=30000,
                   help="give up on a message not acknowledged in this time, retries included (default 30000)")
    p.add_argument("--progress", action="store_true", help="report progress on stderr even when not a terminal")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress or summary on stderr")

    c = sub.add_parser("consume", help="print records to stdout (like kcat -C)", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    add_bootstrap(c)
    c.add_argument("--topic", "-t", required=True)
    c.add_argument("--partition", "-p", type=int, action="append", help="only this partition (repeatable)")
    c.add_argument("--offset", "-o", default="beginning",
                   help="beginning | end | stored | OFFSET | -N | s@TIMESTAMP_MS (default beginning)")
    c.add_argument("--count", "-c", type=int, help="exit after this many records")
    c.add_argument("--exit", "-e", action="store_true", help="exit once the end of every partition is reached")
    c.add_argument("--key-delimiter", "-K", help="print KEY<delim>VALUE")
    c.add_argument("--delimiter", "-D", default="\\n", help="printed after each record (default newline)")
    c.add_argument("--format", "-f", help="output format, e.g. '%%k=%%s\\n' (tokens above)")
    c.add_argument("--json", "-J", action="store_true", help="one JSON object per record, as kcat -J")
    c.add_argument("--group", "-G", help="consume as a member of this group (offsets are committed)")
    c.add_argument("--progress", action="store_true", help="report progress on stderr even when not a terminal")
    c.add_argument("--quiet", "-q", action="store_true", help="no progress or summary on stderr")


# ---- produce -------------------------------------------------------------------------------------------------------

def _messages(stream: BinaryIO, delimiter: bytes) -> Iterator[bytes]:
    pending = b""
    while True:
        chunk = stream.read(65536)
        if not chunk:
            break
        pending += chunk
        parts = pending.split(delimiter)
        pending = parts.pop()
        yield from parts
    if pending:
        yield pending


class BrokerErrors(logging.Handler):
    """The errors the broker answers produce requests with, as kafka-python's sender logs them before it retries.

    A producer retries a retriable error (KAFKA_STORAGE_ERROR, NOT_LEADER_OR_FOLLOWER) until its delivery timeout
    and then reports only that it timed out; this keeps the broker's own answer, to say it at once and at the end.
    """

    SENDER_LOGGER = "kafka.producer.sender"
    MESSAGE_PREFIX = ". Error Message: "  # how the sender appends the broker's error message

    def __init__(self, announce: bool) -> None:
        super().__init__(logging.WARNING)
        self.last: str | None = None
        self._announce = announce
        self._announced: set[tuple[str, str]] = set()

    def __enter__(self) -> BrokerErrors:
        logging.getLogger(self.SENDER_LOGGER).addHandler(self)
        return self

    def __exit__(self, *exc_info: object) -> None:
        logging.getLogger(self.SENDER_LOGGER).removeHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        from kafka import TopicPartition

        args = record.args if isinstance(record.args, tuple) else ()
        tp = next((a for a in args if isinstance(a, TopicPartition)), None)
        code = next((name for name in map(_broker_error_name, args) if name is not None), None)
        if tp is None or code is None:
            return
        detail = next((a.removeprefix(self.MESSAGE_PREFIX) for a in args
                       if isinstance(a, str) and a.startswith(self.MESSAGE_PREFIX)), None)
        where = f"{tp.topic}-{tp.partition}"
        answer = code + (f" ({detail})" if detail else "")
        self.last = f"{where} with {answer}"
        if self._announce and (where, code) not in self._announced:
            self._announced.add((where, code))
            print(f"% {where}: the broker answered {answer}; retrying until the delivery timeout",
                  file=sys.stderr, flush=True)


def _broker_error_name(arg: object) -> str | None:
    """The Kafka error name ("KAFKA_STORAGE_ERROR") if `arg` is the class name of one of kafka-python's errors for
    broker error codes ("KafkaStorageError")."""
    from kafka.errors import kafka_errors

    if not isinstance(arg, str):
        return None
    return next((str(cls.message) for cls in kafka_errors.values() if cls.__name__ == arg), None)


def _produce(args: argparse.Namespace) -> int:
    from kafka import KafkaProducer
    from kafka.errors import KafkaTimeoutError

    if args.key is not None and args.key_delimiter is not None:
        raise CommandError("use either --key or --key-delimiter")
    headers = [(k, v.encode()) for k, v in parse_key_values(args.header, "--header").items()]
    delimiter = _unescape(args.delimiter)
    key_delimiter = _unescape(args.key_delimiter) if args.key_delimiter is not None else None
    fixed_key = args.key.encode() if args.key is not None else None
    acks = "all" if args.acks in ("all", "-1") else int(args.acks)
    progress = Progress("Produced", enabled=(args.progress or None) if not args.quiet else False)
    failures: list[Exception] = []
    with BrokerErrors(announce=not args.quiet) as broker_errors:
        producer = KafkaProducer(bootstrap_servers=args.bootstrap_server, acks=acks, linger_ms=5,
                                 compression_type=None if args.compression == "none" else args.compression,
                                 delivery_timeout_ms=args.delivery_timeout_ms,
                                 request_timeout_ms=min(30000, max(1000, args.delivery_timeout_ms - 10)),
                                 client_id="minikafka-produce", bootstrap_timeout_ms=BOOTSTRAP_TIMEOUT_MS)
        source = open(args.file, "rb") if args.file else sys.stdin.buffer
        try:
            for n, message in enumerate(_messages(source, delimiter), 1):
                key: bytes | None = fixed_key
                value: bytes | None = message
                if key_delimiter is not None:
                    key, sep, rest = message.partition(key_delimiter)
                    value = rest if sep else None
                    if not sep:
                        key, value = None, message
                future = producer.send(args.topic, value=value, key=key, headers=headers or None,
                                       partition=args.partition)
                future.add_callback(lambda _meta: progress.add())
                future.add_errback(failures.append)
                if n % FLUSH_EVERY == 0:
                    producer.flush()
            producer.flush()
        finally:
            if args.file:
                source.close()
            producer.close()
    if not args.quiet and (progress.enabled or failures):
        progress.done(f" to {args.topic}" + (f", {len(failures)} failed" if failures else ""))
    if failures and isinstance(failures[0], KafkaTimeoutError) and broker_errors.last is not None:
        raise CommandError(f"{len(failures)} message(s) not delivered within --delivery-timeout-ms "
                           f"({args.delivery_timeout_ms} ms); the broker last answered {broker_errors.last}")
    if failures:
        raise CommandError(f"{len(failures)} message(s) not delivered, first: {failures[0]!r}")
    return 0


# ---- consume -------------------------------------------------------------------------------------------------------

def _headers_text(headers: list[tuple[str, bytes]]) -> bytes:
    return b",".join(k.encode() + b"=" + (v or b"") for k, v in headers)


def render(record, fmt: bytes) -> bytes:
    """A record in a kcat -f format."""
    out = bytearray()
    i = 0
    while i < len(fmt):
        ch = fmt[i:i + 1]
        if ch == b"%" and i + 1 < len(fmt):
            token = fmt[i + 1:i + 2]
            i += 2
            if token == b"t":
                out += record.topic.encode()
            elif token == b"p":
                out += str(record.partition).encode()
            elif token == b"o":
                out += str(record.offset).encode()
            elif token == b"k":
                out += record.key or b""
            elif token == b"s":
                out += record.value or b""
            elif token == b"K":
                out += str(-1 if record.key is None else len(record.key)).encode()
            elif token == b"S":
                out += str(-1 if record.value is None else len(record.value)).encode()
            elif token == b"T":
                out += str(record.timestamp).encode()
            elif token == b"h":
                out += _headers_text(record.headers or [])
            elif token == b"%":
                out += b"%"
            else:
                out += b"%" + token
        else:
            out += ch
            i += 1
    return bytes(out)


def _as_text(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", "replace")


def render_json(record) -> bytes:
    """A record as kcat -J prints it."""
    headers: list[str | None] = []
    for k, v in record.headers or []:
        headers += [k, _as_text(v)]
    envelope = {"topic": record.topic, "partition": record.partition, "offset": record.offset,
                "tstype": "logappend" if record.timestamp_type == 1 else "create", "ts": record.timestamp,
                "headers": headers, "key": _as_text(record.key), "payload": _as_text(record.value)}
    return json.dumps(envelope).encode() + b"\n"


def _start_positions(consumer, tps: list, spec: str) -> dict:
    ends = consumer.end_offsets(tps)
    starts = consumer.beginning_offsets(tps)
    if spec == "beginning":
        return dict(starts)
    if spec == "end":
        return dict(ends)
    if spec == "stored":
        raise CommandError("-o stored needs a group (-G)")
    if spec.startswith("s@"):
        try:
            timestamp = int(spec[2:])
        except ValueError:
            raise CommandError(f"bad timestamp in -o {spec!r}") from None
        found = consumer.offsets_for_times({tp: timestamp for tp in tps})
        return {tp: ends[tp] if found[tp] is None else found[tp].offset for tp in tps}
    try:
        offset = int(spec)
    except ValueError:
        raise CommandError(f"bad offset {spec!r}: expected beginning, end, stored, N, -N or s@MS") from None
    if offset < 0:
        return {tp: max(starts[tp], ends[tp] + offset) for tp in tps}
    return {tp: min(max(offset, starts[tp]), ends[tp]) for tp in tps}


class _Printer:
    """Writes records to stdout in the chosen layout and counts them."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.out = sys.stdout.buffer
        self.json = args.json
        self.delimiter = _unescape(args.delimiter)
        self.key_delimiter = _unescape(args.key_delimiter) if args.key_delimiter is not None else None
        self.fmt = _unescape(args.format) if args.format else None
        self.limit = args.count
        self.progress = Progress("Consumed", enabled=(args.progress or None) if not args.quiet else False)

    @property
    def full(self) -> bool:
        return self.limit is not None and self.progress.count >= self.limit

    def write(self, batches: dict) -> None:
        for records in batches.values():
            for record in records:
                if self.full:
                    break
                if self.json:
                    self.out.write(render_json(record))
                elif self.fmt is not None:
                    self.out.write(render(record, self.fmt))
                else:
                    if self.key_delimiter is not None:
                        self.out.write((record.key or b"") + self.key_delimiter)
                    self.out.write((record.value or b"") + self.delimiter)
                self.progress.add()
        self.out.flush()


def _consume(args: argparse.Namespace) -> int:
    from kafka import KafkaConsumer

    if args.group is not None:
        if args.partition:
            raise CommandError("-p cannot be combined with -G: the group assigns the partitions")
        if args.offset not in ("beginning", "end", "stored"):
            raise CommandError("with -G, -o is beginning or end: where to start without a committed offset")
    reset = "latest" if args.offset == "end" else "earliest"
    consumer = KafkaConsumer(bootstrap_servers=args.bootstrap_server, group_id=args.group,
                             enable_auto_commit=args.group is not None, auto_offset_reset=reset,
                             client_id="minikafka-consume", bootstrap_timeout_ms=BOOTSTRAP_TIMEOUT_MS)
    printer = _Printer(args)
    try:
        available = consumer.partitions_for_topic(args.topic)
        if not available:
            raise CommandError(f"Topic '{args.topic}' does not exist")
        if args.group is not None:
            _consume_in_group(consumer, args, printer)
        else:
            _consume_assigned(consumer, args, printer, sorted(available))
    finally:
        consumer.close()
    if not args.quiet and printer.progress.enabled:
        printer.progress.done(f" from {args.topic}")
    return 0


def _consume_assigned(consumer, args: argparse.Namespace, printer: _Printer, available: list[int]) -> None:
    from kafka import TopicPartition

    indexes = sorted(args.partition) if args.partition else available
    missing = [i for i in indexes if i not in available]
    if missing:
        raise CommandError(f"topic {args.topic} has no partition {missing[0]}")
    tps = [TopicPartition(args.topic, i) for i in indexes]
    consumer.assign(tps)
    positions = _start_positions(consumer, tps, args.offset)
    for tp in tps:
        consumer.seek(tp, positions[tp])
    ends = consumer.end_offsets(tps) if args.exit else {}
    pending = {tp for tp in tps if not args.exit or positions[tp] < ends[tp]}
    while pending and not printer.full:
        printer.write(consumer.poll(timeout_ms=200))
        if args.exit:
            pending = {tp for tp in pending if consumer.position(tp) < ends[tp]}


def _consume_in_group(consumer, args: argparse.Namespace, printer: _Printer) -> None:
    consumer.subscribe([args.topic])
    ends: dict = {}
    while not printer.full:
        printer.write(consumer.poll(timeout_ms=200))
        if args.exit:
            assigned = consumer.assignment()
            new = [tp for tp in assigned if tp not in ends]
            if new:
                ends.update(consumer.end_offsets(new))
            if assigned and all(consumer.position(tp) >= ends[tp] for tp in assigned):
                break
    consumer.commit()


def run_produce(args: argparse.Namespace) -> int:
    return run_guarded(_produce, args)


def run_consume(args: argparse.Namespace) -> int:
    return run_guarded(_consume, args)
