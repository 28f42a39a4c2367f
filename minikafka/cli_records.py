"""`minikafka produce` and `minikafka consume`: records between stdin/stdout and a topic, with kcat's options.

    printf 'k1:v1\\nk2:v2\\n' | minikafka produce -t orders -K: -H source=cli
    minikafka consume -t orders -o beginning -e -f 'p%p o%o %k=%s [%h]\\n'
    minikafka consume -t orders -o s@1700000000000 -c 10 -J
    minikafka produce -t orders --transactional-id loader --transaction-size 100 < orders.txt
    minikafka consume -t orders --isolation-level read_committed -e
    minikafka consume -t orders -G billing --group-protocol consumer -e

Offsets (-o) as in kcat: beginning, end, stored (with -G), an absolute offset, -N (N before the end), s@MS (the
first record at or after a timestamp in ms). Formats (-f): %t topic, %p partition, %o offset, %k key, %s value,
%K key length, %S value length (-1 for null), %T timestamp, %h headers (name=value,...), %%, and \\n \\t \\r.
"""
from __future__ import annotations

import argparse
import io
import json
import logging
import select
import sys
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, cast

from minikafka.cli_common import (
    BOOTSTRAP_TIMEOUT_MS,
    CommandError,
    Progress,
    Stopped,
    StopSignals,
    add_bootstrap,
    add_topic,
    client_settings,
    error_line,
    kafka_error_name,
    parse_key_values,
    run_guarded,
)

if TYPE_CHECKING:
    from kafka import KafkaConsumer, KafkaProducer

    from minikafka.consumer_membership import ConsumerMembershipManager

FLUSH_EVERY = 10000
# How long a command stopped by a signal may take to hand over what it holds: a producer's records in flight, a
# consumer's offsets and its place in its group.
STOP_TIMEOUT_S = 5.0
# How long a consumer at its end keeps trying to commit its offsets through rebalances (Kafka's
# default.api.timeout.ms).
COMMIT_TIMEOUT_S = 60.0
POLL_TIMEOUT_MS = 200


def _unescape(text: str) -> bytes:
    return text.encode().decode("unicode_escape").encode("latin-1")


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("produce", help="produce records read from stdin (like kcat -P)", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    add_bootstrap(p)
    add_topic(p, "the topic to produce to", required=True)
    p.add_argument("--partition", "-p", type=int, help="partition (default: by key, or spread)")
    p.add_argument("--key-delimiter", "-K", help="split each message into KEY<delim>VALUE at the first delimiter")
    p.add_argument("--key", "-k", help="one key for every message")
    p.add_argument("--header", "-H", action="append", default=[], metavar="NAME=VALUE",
                   help="a header added to every message (repeatable)")
    p.add_argument("--delimiter", "-D", default="\\n", help="message delimiter (default: newline)")
    p.add_argument("--file", help="read messages from this file instead of stdin")
    p.add_argument("--acks", default="all", choices=["0", "1", "all", "-1"],
                   help="acknowledgements a record needs: 0 none, 1 the leader's, all (or -1) the ISR's (default all)")
    p.add_argument("--compression", "-z", choices=["none", "gzip", "snappy", "lz4", "zstd"], default="none",
                   help="compression codec of the batches (default none)")
    p.add_argument("--delivery-timeout-ms", type=int, default=30000,
                   help="give up on a message not acknowledged in this time, retries included (default 30000)")
    p.add_argument("--transactional-id", help="produce in transactions of this transactional id (needs --acks all)")
    p.add_argument("--transaction-size", type=int, metavar="N",
                   help="with --transactional-id: at most N messages per transaction (a transaction is committed "
                        "whenever the input has no more ready, and after N messages)")
    p.add_argument("--transaction-timeout-ms", type=int, default=60000,
                   help="with --transactional-id: the coordinator aborts a transaction open longer than this "
                        "(default 60000, Kafka's transaction.timeout.ms)")
    p.add_argument("--progress", action="store_true", help="report progress on stderr even when not a terminal")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress or summary on stderr")

    c = sub.add_parser("consume", help="print records to stdout (like kcat -C)", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    add_bootstrap(c)
    add_topic(c, "the topic to consume from", required=True)
    c.add_argument("--partition", "-p", type=int, action="append", help="only this partition (repeatable)")
    c.add_argument("--offset", "-o", default="beginning",
                   help="beginning | end | stored | OFFSET | -N | s@TIMESTAMP_MS (default beginning)")
    c.add_argument("--count", "-c", type=int, help="exit after this many records")
    c.add_argument("--exit", "-e", action="store_true",
                   help="exit once the end of every partition is reached (its last stable offset with "
                        "read_committed, else its high watermark)")
    c.add_argument("--key-delimiter", "-K", help="print KEY<delim>VALUE")
    c.add_argument("--delimiter", "-D", default="\\n", help="printed after each record (default newline)")
    c.add_argument("--format", "-f", help="output format, e.g. '%%k=%%s\\n' (tokens above)")
    c.add_argument("--json", "-J", action="store_true", help="one JSON object per record, as kcat -J")
    c.add_argument("--group", "-G", help="consume as a member of this group (offsets are committed)")
    c.add_argument("--group-protocol", choices=["classic", "consumer"],
                   help="with -G, the group protocol, as Kafka's group.protocol: classic (JoinGroup/SyncGroup, "
                        "the default) or consumer (KIP-848: the coordinator assigns the partitions)")
    c.add_argument("--isolation-level", choices=["read_uncommitted", "read_committed"], default="read_uncommitted",
                   help="read_committed: only records of committed transactions, up to the last stable offset "
                        "(default read_uncommitted: every record up to the high watermark)")
    c.add_argument("--progress", action="store_true", help="report progress on stderr even when not a terminal")
    c.add_argument("--quiet", "-q", action="store_true", help="no progress or summary on stderr")


# ---- produce -------------------------------------------------------------------------------------------------------

def _input_ready(stream: io.BufferedReader) -> bool:
    """Whether more of the input can be read without waiting: always for a regular file; for a pipe or a terminal,
    only once its writer has written more (a stream select cannot watch counts as not ready)."""
    try:
        readable, _, _ = select.select([stream], [], [], 0)
    except (OSError, ValueError):
        return False
    return bool(readable)


def _message_chunks(stream: io.BufferedReader, delimiter: bytes) -> Iterator[tuple[list[bytes], bool]]:
    """The messages of a stream as they arrive, a chunk at a time: what a terminal or a pipe has given so far is
    taken, not waited on until 64 KiB or the end, so that each line typed is produced at once. With each chunk's
    messages comes whether the input is idle after them: nothing more ready to read and no message cut in the
    middle (its writer is still writing it), or the input's end."""
    pending = b""
    while True:
        chunk = stream.read1(65536)
        if not chunk:
            break
        pending += chunk
        parts = pending.split(delimiter)
        pending = parts.pop()
        yield parts, not pending and not _input_ready(stream)
    yield ([pending] if pending else []), True


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
    """Kafka's name of a broker error code ("KAFKA_STORAGE_ERROR") if `arg` is the class name of one of
    kafka-python's errors for broker error codes ("KafkaStorageError")."""
    from kafka.errors import kafka_errors

    if not isinstance(arg, str):
        return None
    return next((kafka_error_name(code) for code, cls in kafka_errors.items() if cls.__name__ == arg), None)


def _produce(args: argparse.Namespace) -> int:
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    if args.key is not None and args.key_delimiter is not None:
        raise CommandError("use either --key or --key-delimiter")
    acks = "all" if args.acks in ("all", "-1") else int(args.acks)
    _check_transaction_options(args, acks)
    headers = [(k, v.encode()) for k, v in parse_key_values(args.header, "--header").items()]
    progress = Progress("Produced", enabled=(args.progress or None) if not args.quiet else False)
    failures: list[Exception] = []
    sent = 0
    transactions: _Transactions | None = None
    with StopSignals(interrupt=True) as stop, BrokerErrors(announce=not args.quiet) as broker_errors:
        try:
            producer = KafkaProducer(bootstrap_servers=args.bootstrap_server, acks=acks, linger_ms=5,
                                     compression_type=None if args.compression == "none" else args.compression,
                                     delivery_timeout_ms=args.delivery_timeout_ms,
                                     request_timeout_ms=min(30000, max(1000, args.delivery_timeout_ms - 10)),
                                     transactional_id=args.transactional_id,
                                     transaction_timeout_ms=args.transaction_timeout_ms,
                                     client_id="minikafka-produce", bootstrap_timeout_ms=BOOTSTRAP_TIMEOUT_MS,
                                     **client_settings(args))
        except Stopped:
            return stop.exit_code
        try:
            if args.transactional_id is not None:
                producer.init_transactions()
                transactions = _Transactions(producer, args.transaction_size, progress)
            for records, idle in _record_chunks(args):
                for key, value in records:
                    if transactions is not None:
                        transactions.begin()
                    future = producer.send(args.topic, value=value, key=key, headers=headers or None,
                                           partition=args.partition)
                    sent += 1
                    if transactions is None:
                        future.add_callback(lambda _meta: progress.add())
                        future.add_errback(failures.append)
                    else:
                        transactions.sent()
                    if sent % FLUSH_EVERY == 0:
                        producer.flush()
                if transactions is not None and idle:  # nothing more to add now: readers see it at once
                    transactions.commit()
            producer.flush()
        except Stopped:
            if transactions is not None:  # what the open transaction holds is aborted, not left to its timeout
                transactions.abort(STOP_TIMEOUT_S)
            # else what was sent is delivered, or fails, within the bounded close below
        except KafkaError:
            if transactions is not None:
                transactions.abort(STOP_TIMEOUT_S)
            raise
        finally:
            _close_producer(producer, stop)
    if transactions is not None:
        return _transactions_summary(args, transactions, stop)
    if stop.requested:
        if not args.quiet:
            unacknowledged = sent - progress.count - len(failures)
            progress.done(f" to {args.topic}, {len(failures)} failed"
                          + (f", {unacknowledged} unacknowledged" if unacknowledged > 0 else "")
                          + f" (stopped by {stop.name})")
        return stop.exit_code
    if not args.quiet and (progress.enabled or failures):
        progress.done(f" to {args.topic}" + (f", {len(failures)} failed" if failures else ""))
    if failures and _timed_out(failures[0]) and broker_errors.last is not None:
        raise CommandError(f"{len(failures)} message(s) not delivered within --delivery-timeout-ms "
                           f"({args.delivery_timeout_ms} ms); the broker last answered {broker_errors.last}")
    if failures:
        raise CommandError(f"{len(failures)} message(s) not delivered, first: {error_line(failures[0])}")
    return 0


def _check_transaction_options(args: argparse.Namespace, acks: int | str) -> None:
    """Refuse, before connecting, what a transactional producer cannot do (kafka-python would say it in its own
    terms, or not at all)."""
    if args.transactional_id is None:
        if args.transaction_size is not None:
            raise CommandError("--transaction-size needs --transactional-id")
        return
    if acks != "all":
        raise CommandError("--transactional-id needs --acks all: a transaction's records go to every in-sync "
                           "replica, as Kafka's transactional producers require")
    if args.transaction_size is not None and args.transaction_size < 1:
        raise CommandError(f"--transaction-size must be 1 or more, got {args.transaction_size}")


class _Transactions:
    """The transactions of `produce --transactional-id`: one begins with the first message after the last commit
    and is committed once the input has no more ready (one transaction per batch of input, so that a pipe that
    stays open, `tail -f | minikafka produce ...`, commits as it goes), or after --transaction-size messages; an
    empty input (or one ending just after a commit) leaves no empty transaction. Progress counts committed
    messages only."""

    def __init__(self, producer: KafkaProducer, size: int | None, progress: Progress) -> None:
        self.producer = producer
        self.size = size
        self.progress = progress
        self.open = False
        self.committing = False
        self.pending = 0  # messages sent in the open transaction
        self.committed = 0  # transactions committed
        self.aborted = 0  # messages of a transaction aborted

    def begin(self) -> None:
        if not self.open:
            self.producer.begin_transaction()
            self.open = True

    def sent(self) -> None:
        self.pending += 1
        if self.size is not None and self.pending >= self.size:
            self.commit()

    def commit(self) -> None:
        """Commit the open transaction. One that cannot be committed is aborted (if the producer still can), and
        the command fails."""
        from kafka.errors import KafkaError

        if not self.open:
            return
        self.committing = True
        try:
            self.producer.commit_transaction()
        except KafkaError as exc:
            self.committing = False
            count = self.pending
            raise CommandError(self._not_committed(exc, count, aborted=self.abort(STOP_TIMEOUT_S))) from None
        self.committing = False
        self.open = False
        self.committed += 1
        self.progress.add(self.pending)
        self.pending = 0

    def _not_committed(self, exc: Exception, count: int, aborted: bool) -> str:
        """Why a transaction was not committed, what became of it, and what was committed before it."""
        from kafka.errors import InvalidProducerEpochError, ProducerFencedError

        text = f"a transaction of {count} message(s) was not committed{' and is aborted' if aborted else ''}: "
        text += error_line(exc)
        if isinstance(exc, (ProducerFencedError, InvalidProducerEpochError)):
            text += (" (a newer producer took over this transactional id, or its coordinator aborted the "
                     "transaction, open longer than --transaction-timeout-ms)")
        elif not aborted:
            text += "; its coordinator aborts it after --transaction-timeout-ms"
        if self.committed:
            text += (f"; {self.committed} transaction(s) of {self.progress.count} message(s) were committed "
                     "before it")
        return text

    def abort(self, timeout_s: float) -> bool:
        """Abort the open transaction (nothing is done during a commit), giving up after `timeout_s`: the
        coordinator aborts a transaction past its timeout anyway. kafka-python's abort waits without a bound (for
        the batches in flight, then EndTxn), so it runs in a thread of its own. True once aborted."""
        from kafka.errors import KafkaError

        if not self.open or self.committing:
            return False
        errors: list[KafkaError] = []

        def abort() -> None:
            try:
                self.producer.abort_transaction()
            except KafkaError as exc:
                errors.append(exc)

        worker = threading.Thread(target=abort, name="minikafka-produce-abort", daemon=True)
        worker.start()
        worker.join(timeout_s)
        if worker.is_alive() or errors:
            return False
        self.open = False
        self.aborted += self.pending
        self.pending = 0
        return True


def _transactions_summary(args: argparse.Namespace, transactions: _Transactions, stop: StopSignals) -> int:
    """The summary of a transactional produce: committed messages and transactions, and what a stop did to the
    open transaction."""
    progress = transactions.progress
    detail = f" to {args.topic} in {transactions.committed} transaction(s)"
    if stop.requested:
        if transactions.committing:
            detail += f", a transaction of {transactions.pending} message(s) stopped while committing"
        elif transactions.open:
            detail += (f", a transaction of {transactions.pending} message(s) not aborted in {STOP_TIMEOUT_S:.0f} s "
                       "(its coordinator aborts it after --transaction-timeout-ms)")
        elif transactions.aborted:
            detail += f", {transactions.aborted} aborted"
        if not args.quiet:
            progress.done(f"{detail} (stopped by {stop.name})")
        return stop.exit_code
    if not args.quiet and progress.enabled:
        progress.done(detail)
    return 0


def _record_chunks(args: argparse.Namespace) -> Iterator[tuple[list[tuple[bytes | None, bytes | None]], bool]]:
    """(key, value) of each message read from stdin or --file, a chunk of input at a time, each chunk with whether
    the input is idle after it."""
    delimiter = _unescape(args.delimiter)
    key_delimiter = _unescape(args.key_delimiter) if args.key_delimiter is not None else None
    fixed_key = args.key.encode() if args.key is not None else None
    # sys.stdin.buffer is a BufferedReader, as typeshed does not say
    source = open(args.file, "rb") if args.file else cast(io.BufferedReader, sys.stdin.buffer)
    def record(message: bytes) -> tuple[bytes | None, bytes | None]:
        if key_delimiter is None:
            return fixed_key, message
        key, sep, value = message.partition(key_delimiter)
        return (key, value) if sep else (None, message)

    try:
        for messages, idle in _message_chunks(source, delimiter):
            yield [record(message) for message in messages], idle
    finally:
        if args.file:
            source.close()


def _timed_out(failure: Exception) -> bool:
    from kafka.errors import KafkaTimeoutError

    return isinstance(failure, KafkaTimeoutError)


def _close_producer(producer: KafkaProducer, stop: StopSignals) -> None:
    """Close once what was sent is delivered or failed; stopped by a signal, within STOP_TIMEOUT_S, what is still
    unacknowledged then is left so."""
    from kafka.errors import KafkaTimeoutError

    try:
        producer.close(timeout=STOP_TIMEOUT_S if stop.requested else None)
    except Stopped:  # a signal during an unbounded close: bound it
        _close_producer(producer, stop)
    except KafkaTimeoutError:
        pass


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
            elif token == b"d" and hasattr(record, "delivery_count"):  # a share group's record
                out += str(record.delivery_count).encode()
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


class RecordPrinter:
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

    @property
    def room(self) -> int | None:
        """How many more records --count lets through (None: no limit)."""
        return None if self.limit is None else max(0, self.limit - self.progress.count)

    def write(self, batches: dict) -> dict:
        """Print the records --count lets through; returns, by partition, the offset of the first one left out."""
        left_out = {}
        for tp, records in batches.items():
            for record in records:
                if self.full:
                    left_out[tp] = record.offset
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
        return left_out


def _poll(consumer: KafkaConsumer, printer: RecordPrinter) -> None:
    """One poll, its records printed. Records past --count are given back (the consumer seeks to the first of
    them), so that the consumer's positions, which its group commits, are what was printed."""
    records = consumer.poll(timeout_ms=POLL_TIMEOUT_MS, max_records=printer.room or None)
    for tp, offset in printer.write(records).items():
        consumer.seek(tp, offset)


def _consume(args: argparse.Namespace) -> int:
    from kafka import KafkaConsumer

    if args.group_protocol is not None and args.group is None:
        raise CommandError("--group-protocol needs a group (-G)")
    if args.group_protocol is None:
        args.group_protocol = "classic"
    if args.group is not None:
        if args.partition:
            raise CommandError("-p cannot be combined with -G: the group assigns the partitions")
        if args.offset not in ("beginning", "end", "stored"):
            raise CommandError("with -G, -o is beginning or end: where to start without a committed offset")
    reset = "latest" if args.offset == "end" else "earliest"
    printer = RecordPrinter(args)
    with StopSignals(interrupt=True) as stop:
        try:
            # The consumer protocol's member assigns the partitions to a consumer without a group.
            classic_group = args.group if args.group_protocol == "classic" else None
            consumer = KafkaConsumer(bootstrap_servers=args.bootstrap_server, group_id=classic_group,
                                     enable_auto_commit=classic_group is not None, auto_offset_reset=reset,
                                     isolation_level=args.isolation_level, client_id="minikafka-consume",
                                     bootstrap_timeout_ms=BOOTSTRAP_TIMEOUT_MS, **client_settings(args))
        except Stopped:
            return stop.exit_code
        try:
            available = consumer.partitions_for_topic(args.topic)
            if not available:
                raise CommandError(f"Topic '{args.topic}' does not exist")
            if args.group is not None and args.group_protocol == "consumer":
                _consume_as_member(consumer, args, printer, stop)
            elif args.group is not None:
                _consume_in_group(consumer, args, printer, stop)
            else:
                _consume_assigned(consumer, args, printer, sorted(available))
        except Stopped:
            pass
        finally:
            if args.group is not None and args.group_protocol == "classic":
                _leave_group(consumer, args, commit=stop.requested)
            else:
                consumer.close()
    if stop.requested:
        if not args.quiet:
            printer.progress.done(f" from {args.topic} (stopped by {stop.name})")
        return stop.exit_code
    if not args.quiet and printer.progress.enabled:
        printer.progress.done(f" from {args.topic}")
    return 0


def _consume_assigned(consumer: KafkaConsumer, args: argparse.Namespace, printer: RecordPrinter,
                      available: list[int]) -> None:
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
    # ListOffsets at the consumer's isolation level: the high watermark, or under read_committed the last stable
    # offset, where the reader stops until the open transaction there ends.
    ends = consumer.end_offsets(tps) if args.exit else {}
    pending = {tp for tp in tps if not args.exit or positions[tp] < ends[tp]}
    while pending and not printer.full:
        _poll(consumer, printer)
        if args.exit:
            pending = {tp for tp in pending if consumer.position(tp) < ends[tp]}


def _consume_in_group(consumer: KafkaConsumer, args: argparse.Namespace, printer: RecordPrinter,
                      stop: StopSignals) -> None:
    """Consume as a member of the group until the end (-e), --count or a signal; at the end, commit.

    A signal only sets a flag here, seen between polls: raised inside a poll, it could leave the member's
    JoinGroup to be sent again after the member has left."""
    from kafka import ConsumerRebalanceListener

    stop.interrupt = False
    ConsumerRebalanceListener.register(_RebalanceReport)
    consumer.subscribe([args.topic], listener=_RebalanceReport(args.group, announce=not args.quiet))
    ends: dict = {}
    while not printer.full and not stop.requested:
        _poll(consumer, printer)
        if args.exit:
            assigned = consumer.assignment()
            new = [tp for tp in assigned if tp not in ends]
            if new:
                ends.update(consumer.end_offsets(new))
            if assigned and all(consumer.position(tp) >= ends[tp] for tp in assigned):
                break
    if not stop.requested:
        _commit_through_rebalances(consumer, printer, stop)


def _commit_through_rebalances(consumer: KafkaConsumer, printer: RecordPrinter, stop: StopSignals) -> None:
    """Commit the positions of the partitions the member owns. A commit fails while the group rebalances
    (REBALANCE_IN_PROGRESS, or CommitFailedError once a new generation began): as Kafka's consumers' own poll
    loops do, poll until the member is in the group again and commit what it owns then."""
    from kafka.errors import CommitFailedError, RebalanceInProgressError

    deadline = time.monotonic() + COMMIT_TIMEOUT_S
    while True:
        try:
            consumer.commit()
            return
        except (CommitFailedError, RebalanceInProgressError) as exc:
            if stop.requested:
                return
            if time.monotonic() >= deadline:
                raise CommandError(f"offsets not committed: the group rebalanced for {COMMIT_TIMEOUT_S:.0f} s; "
                                   f"last {error_line(exc)}") from None
        if printer.full:  # the rejoin only: nothing more is to be printed
            consumer.pause(*consumer.assignment())
        _poll(consumer, printer)


def _consume_as_member(consumer: KafkaConsumer, args: argparse.Namespace, printer: RecordPrinter,
                       stop: StopSignals) -> None:
    """Consume as a member of a KIP-848 consumer group (--group-protocol consumer) until the end (-e), --count or
    a signal, reading the partitions the coordinator assigns; at the end commit, and leave the group (committing
    first when a signal stopped it), so that its partitions go to the other members at once."""
    from kafka.errors import KafkaError

    from minikafka.consumer_membership import ConsumerMembershipManager

    stop.interrupt = False
    member = ConsumerMembershipManager(consumer, args.group, [args.topic],
                                       listener=_RebalanceReport(args.group, announce=not args.quiet),
                                       auto_offset_reset="latest" if args.offset == "end" else "earliest",
                                       bootstrap_servers=args.bootstrap_server, client_id="minikafka-consume",
                                       bootstrap_timeout_ms=BOOTSTRAP_TIMEOUT_MS, **client_settings(args))
    finished = False
    try:
        ends: dict = {}
        while not printer.full and not stop.requested:
            member.poll()
            if not member.owned:
                time.sleep(POLL_TIMEOUT_MS / 1000)
                continue
            _poll(consumer, printer)
            if args.exit:
                new = [tp for tp in member.owned if tp not in ends]
                if new:
                    ends.update(consumer.end_offsets(new))
                if all(consumer.position(tp) >= ends[tp] for tp in member.owned):
                    break
        if not stop.requested:
            _commit_as_member(member, stop)
        finished = True
    finally:
        deadline = time.monotonic() + STOP_TIMEOUT_S
        try:
            if stop.requested and member.owned:
                try:
                    member.commit(deadline=time.monotonic() + STOP_TIMEOUT_S / 2)
                except (KafkaError, OSError) as exc:  # the member leaves all the same
                    print(f"% {error_line(exc)}", file=sys.stderr, flush=True)
            member.leave(deadline=deadline)
        except (KafkaError, OSError) as exc:
            print(f"% {error_line(exc)}", file=sys.stderr, flush=True)
            if finished and not stop.requested:
                raise CommandError(f"leaving group {args.group}: {error_line(exc)}") from None
        finally:
            member.close()


def _commit_as_member(member: ConsumerMembershipManager, stop: StopSignals) -> None:
    """Commit the owned partitions' positions. A member behind its group's epoch (STALE_MEMBER_EPOCH), or fenced
    and joining again, heartbeats and commits what it owns then, as Kafka's consumer retries its commits."""
    from kafka.errors import FencedMemberEpochError, KafkaError, StaleMemberEpochError, UnknownMemberIdError

    deadline = time.monotonic() + COMMIT_TIMEOUT_S
    while True:
        try:
            member.commit()
            return
        except KafkaError as exc:
            behind = (StaleMemberEpochError, FencedMemberEpochError, UnknownMemberIdError)
            if not exc.retriable and not isinstance(exc, behind):
                raise
            if stop.requested:
                return
            if time.monotonic() >= deadline:
                raise CommandError(f"offsets not committed for {COMMIT_TIMEOUT_S:.0f} s; last {error_line(exc)}") \
                    from None
        time.sleep(POLL_TIMEOUT_MS / 1000)
        member.poll()


def _leave_group(consumer: KafkaConsumer, args: argparse.Namespace, commit: bool) -> None:
    """Close the consumer, leaving its group within STOP_TIMEOUT_S, so that its partitions go to the other members
    at once rather than after its session times out; with `commit` (a signal stopped it) commit its positions
    first if the group is stable.

    A member in a rebalance has a JoinGroup (or SyncGroup) waiting at the coordinator for the other members, and
    a connection's requests are answered in order, so the consumer's own LeaveGroup would wait behind it (up to
    the rebalance timeout). Such a member is removed over a connection of its own first (LeaveGroup with its
    member id, as an admin removes members), which also ends the waiting JoinGroup."""
    from kafka.errors import KafkaError
    from kafka.structs import MemberState

    deadline = time.monotonic() + STOP_TIMEOUT_S
    member = consumer.group_metadata()
    try:
        if commit and member.state == MemberState.STABLE:
            consumer.commit(timeout_ms=_remaining_ms(deadline))
        elif member.state == MemberState.REBALANCING and member.member_id:
            _remove_member(args, member.member_id, deadline)
    except (KafkaError, OSError) as exc:
        print(f"% {error_line(exc)}", file=sys.stderr, flush=True)
    consumer.close(autocommit=False, timeout_ms=_remaining_ms(deadline))


def _remove_member(args: argparse.Namespace, member_id: str, deadline: float) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import MemberToRemove

    timeout_ms = _remaining_ms(deadline)
    admin = KafkaAdminClient(bootstrap_servers=args.bootstrap_server, client_id="minikafka-consume",
                             request_timeout_ms=timeout_ms, bootstrap_timeout_ms=timeout_ms, **client_settings(args))
    try:
        admin.remove_group_members(args.group, [MemberToRemove(member_id=member_id, reason="the consumer stopped")])
    finally:
        admin.close()


def _remaining_ms(deadline: float) -> int:
    return max(1, int(1000 * (deadline - time.monotonic())))


class _RebalanceReport:
    """kcat's lines on stderr as the group rebalances, `% Group G rebalanced: assigned: t [0], t [1]`, and for
    the partitions the member gives up: revoked before a rejoin or on closing, lost when it was no longer in the
    group (kafka-python calls these on its network thread; partitions revoked already are not told again)."""

    def __init__(self, group: str, announce: bool) -> None:
        self.group = group
        self.announce = announce
        self.owned: set = set()

    def on_partitions_assigned(self, assigned: set) -> None:
        self.owned = set(assigned)
        self._say("assigned", self.owned)

    def on_partitions_revoked(self, revoked: set) -> None:
        self._give_up("revoked", revoked)

    def on_partitions_lost(self, lost: set) -> None:
        self._give_up("lost", lost)

    def _give_up(self, how: str, partitions: set) -> None:
        gone = self.owned & set(partitions)
        self.owned -= gone
        if gone:
            self._say(how, gone)

    def _say(self, what: str, partitions: set) -> None:
        if self.announce:
            listed = ", ".join(f"{tp.topic} [{tp.partition}]" for tp in sorted(partitions)) or "nothing"
            sys.stderr.write(f"% Group {self.group} rebalanced: {what}: {listed}\n")  # one write: one line
            sys.stderr.flush()


def run_produce(args: argparse.Namespace) -> int:
    return run_guarded(_produce, args)


def run_consume(args: argparse.Namespace) -> int:
    return run_guarded(_consume, args)
