"""`minikafka transactions list|describe|describe-producers|find-hanging|abort`: kafka-transactions.sh's commands
and tables, over Kafka's transaction admin APIs (KIP-664: ListTransactions, DescribeTransactions,
DescribeProducers, and WriteTxnMarkers for an abort). As with Kafka's tool, --bootstrap-server and
--command-config may come before the command (`minikafka transactions --bootstrap-server HOST:PORT list`).

A hanging transaction is one a partition holds open (its producer's transaction start offset holds the last stable
offset, so read_committed readers wait) that no transaction coordinator will end: its producer id has no
transactional id, or its transactional id's transaction no longer includes that partition. find-hanging finds them
as Kafka's tool does, and abort writes the abort marker at the partition's leader. As plain Kafka requests, these
work against any Kafka broker, not only minikafka.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from minikafka.cli_common import (
    BOOTSTRAP_ENV,
    DEFAULT_BOOTSTRAP,
    BrokerError,
    CommandError,
    add_bootstrap,
    add_topic,
    admin_client,
    error_line,
    run_guarded,
)

if TYPE_CHECKING:
    from kafka import KafkaAdminClient, TopicPartition

CLIENT_ID = "minikafka-transactions"
# Kafka's names of a transaction's states, as ListTransactions filters on them and DescribeTransactions reports them.
STATES = ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "PrepareEpochFence",
          "Dead")
# find-hanging's default: Kafka's transaction.max.timeout.ms (15 minutes), past which no coordinator lets a
# transaction stay open, so an older one still open in a partition is a candidate.
DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN = 15
# Partitions per DescribeProducers request of find-hanging, as Kafka's tool batches them.
BATCH_SIZE = 500
NONE = "None"  # what Kafka's tool prints for a value the broker does not have
_KAFKA_PYTHON_WORDS = "DescribeProducersRequest failed for "


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("transactions", help="list, describe, find hanging and abort transactions "
                                            "(like kafka-transactions.sh)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    # Where kafka-transactions.sh takes them; after the command, add_bootstrap's options win.
    p.add_argument("--bootstrap-server", "-b", dest="transactions_bootstrap_server", default=argparse.SUPPRESS,
                   help=f"HOST:PORT of a broker (default ${BOOTSTRAP_ENV} or {DEFAULT_BOOTSTRAP})")
    p.add_argument("--command-config", dest="transactions_command_config", default=argparse.SUPPRESS,
                   help="a file of Kafka client properties (security.protocol, sasl.mechanism, ...)")
    actions = p.add_subparsers(dest="action", required=True)

    ls = actions.add_parser("list", help="every transactional id the coordinators know, with its producer and state")
    add_bootstrap(ls)
    ls.add_argument("--duration-filter", type=int, metavar="MS",
                    help="only transactions running longer than MS milliseconds (negative: all)")
    ls.add_argument("--state-filter", action="append", choices=STATES, metavar="STATE",
                    help=f"only transactions in this state (repeatable): {', '.join(STATES)}")
    ls.add_argument("--producer-id-filter", type=int, action="append", metavar="ID",
                    help="only the transactional id of this producer id (repeatable)")
    ls.add_argument("--transactional-id-pattern", metavar="REGEX",
                    help="only transactional ids matching this regular expression")

    describe = actions.add_parser("describe", help="the state of one transactional id's transaction")
    add_bootstrap(describe)
    describe.add_argument("--transactional-id", required=True, help="the transactional id")

    producers = actions.add_parser("describe-producers",
                                   help="the producers a partition's leader (or a replica) holds state of")
    add_bootstrap(producers)
    add_topic(producers, "the partition's topic", required=True)
    producers.add_argument("--partition", "-p", type=int, required=True, help="the partition")
    producers.add_argument("--broker-id", type=int,
                           help="ask this broker's replica of the partition instead of its leader")

    hanging = actions.add_parser("find-hanging", help="transactions open in partitions that no coordinator will end")
    add_bootstrap(hanging)
    hanging.add_argument("--broker-id", type=int, help="search the partitions this broker has a replica of")
    add_topic(hanging, "search this topic's partitions (required with --partition)")
    hanging.add_argument("--partition", "-p", type=int, help="search only this partition of --topic")
    hanging.add_argument("--max-transaction-timeout", type=int, default=DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN,
                         metavar="MINUTES",
                         help="only transactions whose producer last wrote longer ago than this many minutes "
                              f"(default {DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN}, Kafka's transaction.max.timeout.ms)")

    abort = actions.add_parser("abort", help="abort a hanging transaction in one partition (writes its abort marker)")
    add_bootstrap(abort)
    add_topic(abort, "the partition's topic", required=True)
    abort.add_argument("--partition", "-p", type=int, required=True, help="the partition")
    abort.add_argument("--start-offset", type=int,
                       help="the first offset of the transaction to abort (its producer is looked up)")
    abort.add_argument("--producer-id", type=int, help="instead of --start-offset: the transaction's producer id")
    abort.add_argument("--producer-epoch", type=int, help="with --producer-id: the producer's epoch")
    abort.add_argument("--coordinator-epoch", type=int,
                       help="with --producer-id: the coordinator epoch of the producer's last marker (negative: 0)")
    for action in actions.choices.values():
        action.set_defaults(bootstrap_server=None, command_config=None)


def run(args: argparse.Namespace) -> int:
    _resolve_connection(args)
    return run_guarded(ACTIONS[args.action], args)


def _resolve_connection(args: argparse.Namespace) -> None:
    """--bootstrap-server and --command-config given after the command, else before it, else the defaults."""
    if args.bootstrap_server is None:
        args.bootstrap_server = getattr(args, "transactions_bootstrap_server", None) or os.environ.get(
            BOOTSTRAP_ENV, DEFAULT_BOOTSTRAP)
    if args.command_config is None:
        args.command_config = getattr(args, "transactions_command_config", None)


def print_table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> None:
    """Kafka's tools' table: each column as wide as its widest cell, each cell followed by a tab."""
    lines = [list(headers), *map(list, rows)]
    widths = [max(len(line[i]) for line in lines) for i in range(len(headers))]
    for line in lines:
        print("".join(f"{cell:<{width}}\t" for cell, width in zip(line, widths, strict=True)))
    sys.stdout.flush()


def _now_ms() -> int:
    return int(time.time() * 1000)


def _partition_name(tp: TopicPartition) -> str:
    return f"{tp.topic}-{tp.partition}"


def _producers_error(exc: Exception) -> str:
    """A DescribeProducers error as one line: kafka-python wraps a partition's error code in words of its own
    ("DescribeProducersRequest failed for TopicPartition(...): <the broker's message>"), so the code is told by
    Kafka's name and the broker's message, or what the code means when the broker sent none."""
    from kafka.errors import BrokerResponseError

    text = str(exc.args[0]) if exc.args else ""
    if isinstance(exc, BrokerResponseError) and exc.errno is not None and text.startswith(_KAFKA_PYTHON_WORDS):
        message = text.partition("): ")[2]
        return str(BrokerError(exc.errno, message if message and message != "None" else None))
    return error_line(exc)


# ---- list ------------------------------------------------------------------------------------------------------------

def _list(args: argparse.Namespace) -> int:
    from kafka.errors import KafkaError

    duration = args.duration_filter if args.duration_filter is not None and args.duration_filter >= 0 else None
    admin = admin_client(args, CLIENT_ID)
    try:
        by_coordinator = admin.list_transactions(producer_id_filters=args.producer_id_filter,
                                                 state_filters=args.state_filter, duration_filter_ms=duration,
                                                 transactional_id_pattern=args.transactional_id_pattern)
    except KafkaError as exc:
        raise CommandError(f"Failed to list transactions: {error_line(exc)}") from None
    finally:
        admin.close()
    rows = [(listing.transactional_id, str(coordinator), str(listing.producer_id), listing.state.value)
            for coordinator, listings in sorted(by_coordinator.items())
            for listing in sorted(listings, key=lambda t: t.transactional_id)]
    print_table(("TransactionalId", "Coordinator", "ProducerId", "TransactionState"), rows)
    return 0


# ---- describe --------------------------------------------------------------------------------------------------------

def _describe(args: argparse.Namespace) -> int:
    from kafka.errors import KafkaError

    admin = admin_client(args, CLIENT_ID)
    try:
        description = admin.describe_transactions([args.transactional_id])[args.transactional_id]
    except KafkaError as exc:
        raise CommandError(f"Failed to describe transaction state of transactional-id `{args.transactional_id}`: "
                           f"{error_line(exc)}") from None
    finally:
        admin.close()
    start = description.transaction_start_time_ms
    print_table(("CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
                 "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs", "TopicPartitions"),
                [(str(description.coordinator_id), args.transactional_id, str(description.producer_id),
                  str(description.producer_epoch), description.state.value, str(description.transaction_timeout_ms),
                  str(start) if start >= 0 else NONE, str(_now_ms() - start) if start >= 0 else NONE,
                  ",".join(map(_partition_name, sorted(description.topic_partitions))))])
    return 0


# ---- describe-producers ----------------------------------------------------------------------------------------------

def _describe_producers(args: argparse.Namespace) -> int:
    """Kafka's DescribeProducers of one partition, sent to its leader or to --broker-id, as Kafka's tool prints it:
    a coordinator epoch of none is -1, a producer with no transaction open has None as its start offset."""
    from kafka import TopicPartition
    from kafka.errors import KafkaError

    tp = TopicPartition(args.topic, args.partition)
    where = "leader" if args.broker_id is None else f"broker {args.broker_id}"
    admin = admin_client(args, CLIENT_ID)
    try:
        described = admin.describe_producers([tp], broker_id=args.broker_id)
    except KafkaError as exc:
        raise CommandError(f"Failed to describe producers for partition {_partition_name(tp)} on {where}: "
                           f"{_producers_error(exc)}") from None
    finally:
        admin.close()
    print_table(("ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
                 "CurrentTransactionStartOffset"),
                [(str(p.producer_id), str(p.producer_epoch), str(max(p.coordinator_epoch, -1)), str(p.last_sequence),
                  str(p.last_timestamp),
                  str(p.current_transaction_start_offset) if p.current_transaction_start_offset >= 0 else NONE)
                 for p in described[tp].active_producers])
    return 0


# ---- find-hanging ----------------------------------------------------------------------------------------------------

def _find_hanging(args: argparse.Namespace) -> int:
    """Kafka's search: the open transactions (a current transaction start offset) of producers that last wrote
    longer ago than the maximum transaction timeout, less those their coordinator still counts on ending (the
    transactional id of the producer id is in a transaction that includes the partition)."""
    if args.topic is None and args.broker_id is None:
        raise CommandError("find-hanging needs --topic or --broker-id to limit the search")
    if args.partition is not None and args.topic is None:
        raise CommandError("--partition needs --topic")
    admin = admin_client(args, CLIENT_ID)
    try:
        partitions = _partitions_to_search(admin, args.topic, args.partition, args.broker_id)
        now = _now_ms()
        open_transactions = [(tp, producer) for tp, producer in _open_transactions(admin, partitions, args.broker_id)
                             if now - producer.last_timestamp > args.max_transaction_timeout * 60_000]
        hanging = _hanging(admin, open_transactions)
    finally:
        admin.close()
    print_table(("Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
                 "LastTimestamp", "Duration(min)"),
                [(tp.topic, str(tp.partition), str(p.producer_id), str(p.producer_epoch), str(p.coordinator_epoch),
                  str(p.current_transaction_start_offset), str(p.last_timestamp),
                  str((now - p.last_timestamp) // 60_000)) for tp, p in hanging])
    return 0


def _partitions_to_search(admin: KafkaAdminClient, topic: str | None, partition: int | None,
                          broker_id: int | None) -> list[TopicPartition]:
    """The partition named, or those of the topic (every topic, internal ones too, without one), on the broker
    if one is named."""
    from kafka import TopicPartition
    from kafka.errors import KafkaError

    if topic is not None and partition is not None:
        return [TopicPartition(topic, partition)]
    try:
        described = admin.describe_topics([topic] if topic is not None else None)
    except KafkaError as exc:
        raise CommandError(f"Failed to describe topics: {error_line(exc)}") from None
    found = []
    for entry in described:
        if entry.get("error_code"):
            raise CommandError(f"Failed to describe topic '{entry['name']}': "
                               f"{BrokerError(entry['error_code'], entry.get('error_message'))}")
        found += [TopicPartition(entry["name"], p["partition_index"]) for p in entry["partitions"]
                  if broker_id is None or broker_id in p["replica_nodes"]]
    return sorted(found)


def _open_transactions(admin: KafkaAdminClient, partitions: list[TopicPartition],
                       broker_id: int | None) -> Iterator[tuple[TopicPartition, Any]]:
    """(partition, kafka-python's ProducerState) of each producer with a transaction open in a partition, as the
    broker (or each partition's leader) describes its producers."""
    from kafka.errors import KafkaError

    for first in range(0, len(partitions), BATCH_SIZE):
        batch = partitions[first:first + BATCH_SIZE]
        where = f"broker {broker_id}" if broker_id is not None else "their leaders"
        try:
            described = admin.describe_producers(batch, broker_id=broker_id)
        except KafkaError as exc:
            raise CommandError(f"Failed to describe producers for {len(batch)} partition(s) on {where}: "
                               f"{_producers_error(exc)}") from None
        for tp in sorted(described):
            for producer in described[tp].active_producers:
                if producer.current_transaction_start_offset >= 0:
                    yield tp, producer


def _hanging(admin: KafkaAdminClient, candidates: list[tuple[TopicPartition, Any]]) -> list[tuple[TopicPartition, Any]]:
    """The candidates no coordinator will end: their producer id has no transactional id, its transactional id is
    gone, or its transaction does not include the partition (DescribeTransactions lists the partitions an ongoing
    transaction wrote to, and those a completing one still has markers to write in)."""
    from kafka.errors import KafkaError, TransactionalIdNotFoundError

    if not candidates:
        return []
    producer_ids = sorted({producer.producer_id for _tp, producer in candidates})
    try:
        listed = admin.list_transactions(producer_id_filters=producer_ids)
    except KafkaError as exc:
        raise CommandError(f"Failed to list transactions for {len(producer_ids)} producer(s): "
                           f"{error_line(exc)}") from None
    transactional_ids = {t.producer_id: t.transactional_id for ts in listed.values() for t in ts
                         if t.producer_id in producer_ids}
    # The partitions of each transactional id's transaction; a transactional id no longer known has none.
    transaction_partitions: dict[str, set[TopicPartition]] = {}
    for transactional_id in sorted(set(transactional_ids.values())):
        try:  # one at a time: kafka-python fails a whole request for one id not found
            described = admin.describe_transactions([transactional_id])[transactional_id]
            transaction_partitions[transactional_id] = set(described.topic_partitions)
        except TransactionalIdNotFoundError:
            transaction_partitions[transactional_id] = set()
        except KafkaError as exc:
            raise CommandError(f"Failed to describe transaction state of transactional-id `{transactional_id}`: "
                               f"{error_line(exc)}") from None

    def coordinator_ends_it(tp: TopicPartition, producer_id: int) -> bool:
        transactional_id = transactional_ids.get(producer_id)
        return transactional_id is not None and tp in transaction_partitions[transactional_id]

    return [(tp, producer) for tp, producer in candidates if not coordinator_ends_it(tp, producer.producer_id)]


# ---- abort -----------------------------------------------------------------------------------------------------------

def _abort(args: argparse.Namespace) -> int:
    from kafka import TopicPartition
    from kafka.admin import AbortTransactionSpec
    from kafka.errors import KafkaError

    if args.start_offset is None and args.producer_id is None:
        raise CommandError("name the transaction to abort with --start-offset, or with --producer-id, "
                           "--producer-epoch and --coordinator-epoch")
    if args.start_offset is not None and args.producer_id is not None:
        raise CommandError("use either --start-offset or --producer-id")
    if args.start_offset is None and (args.producer_epoch is None or args.coordinator_epoch is None):
        raise CommandError(f"--producer-id needs --{'producer' if args.producer_epoch is None else 'coordinator'}"
                           "-epoch")
    tp = TopicPartition(args.topic, args.partition)
    admin = admin_client(args, CLIENT_ID)
    try:
        if args.start_offset is not None:
            spec = _spec_of_transaction_at(admin, tp, args.start_offset)
        else:
            # A producer whose first transaction never ended has no coordinator epoch (-1); 0 is at most any.
            spec = AbortTransactionSpec(tp, args.producer_id, args.producer_epoch, max(0, args.coordinator_epoch))
        try:
            admin.abort_transaction(spec)
        except KafkaError as exc:
            raise CommandError(f"Failed to abort the transaction of producer id {spec.producer_id} (epoch "
                               f"{spec.producer_epoch}, coordinator epoch {spec.coordinator_epoch}) in "
                               f"{_partition_name(tp)}: {error_line(exc)}") from None
    finally:
        admin.close()
    return 0


def _spec_of_transaction_at(admin: KafkaAdminClient, tp: TopicPartition, start_offset: int) -> Any:
    """The abort of the open transaction that starts at `start_offset`, by its producer as the partition's leader
    describes it."""
    from kafka.admin import AbortTransactionSpec
    from kafka.errors import KafkaError

    try:
        producers = admin.describe_producers([tp])[tp].active_producers
    except KafkaError as exc:
        raise CommandError(f"Failed to validate producer state for partition {_partition_name(tp)}: "
                           f"{_producers_error(exc)}") from None
    producer = next((p for p in producers if p.current_transaction_start_offset == start_offset), None)
    if producer is None:
        raise CommandError(f"Could not find any open transactions starting at offset {start_offset} on partition "
                           f"{_partition_name(tp)}")
    return AbortTransactionSpec(tp, producer.producer_id, producer.producer_epoch, max(0, producer.coordinator_epoch))


ACTIONS = {"list": _list, "describe": _describe, "describe-producers": _describe_producers,
           "find-hanging": _find_hanging, "abort": _abort}
