"""Transactions (issue 20): a transactional producer committing every 100 ms against the same producer idempotent
only, 1 KB records, on one broker and on three brokers (replication factor 3, acks=all); the commit latency
(commit_transaction() once the transaction's records are flushed: EndTxn, which the coordinator answers once its
PrepareCommit is replicated; the markers and CompleteCommit follow, and hold back only the next transaction's
AddPartitionsToTxn, so they show in the throughput); and an exactly-once copier's throughput (consume from one
topic, produce to another and commit the consumer's offsets in the same transaction). p99 over the few dozen
commits of a run is about their maximum: one GC pause or scheduling hiccup decides it.

Run: python bench/transactions.py [--seconds 10] [--rounds 2] [--partitions 3] [--skip-cluster | --skip-single]
Targets: transactional throughput >= 90% of the idempotent one; commit p99 < 20 ms on a quiet 3-broker cluster.
The producer and the copier are confluent-kafka (librdkafka); brokers run as minikafka.Broker / minikafka.Cluster
processes on free loopback ports with temporary data dirs.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time
from dataclasses import dataclass

from confluent_kafka import Consumer, Producer, TopicPartition

import minikafka

RECORD = 1024
COMMIT_INTERVAL_S = 0.1
PRODUCER = {"linger.ms": 5, "batch.size": 1_000_000, "queue.buffering.max.kbytes": 1_000_000, "acks": "all"}


@dataclass
class Run:
    mb_per_s: float
    commits: list[float]  # seconds each commit_transaction() took


def produce_for(bootstrap: str, topic: str, seconds: float, transactional: bool, partitions: int) -> Run:
    """Produce 1 KB records as fast as the producer takes them for `seconds`; transactional: commit every 100 ms."""
    config = {"bootstrap.servers": bootstrap, "enable.idempotence": True, **PRODUCER}
    if transactional:
        config["transactional.id"] = f"bench-{topic}"
    producer = Producer(config)
    value = os.urandom(RECORD)
    commits: list[float] = []
    sent = 0
    if transactional:
        producer.init_transactions(30)
        producer.begin_transaction()  # a first transaction outside the clock: the coordinator is found and loaded
        producer.produce(topic, value, partition=0)
        producer.commit_transaction(30)
        producer.begin_transaction()
    started = last_commit = time.perf_counter()
    while time.perf_counter() - started < seconds:
        for _ in range(1000):
            try:
                producer.produce(topic, value, partition=sent % partitions)
                sent += 1
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
        now = time.perf_counter()
        if transactional and now - last_commit >= COMMIT_INTERVAL_S:
            producer.flush(60)  # the commit is timed from EndTxn: the transaction's records are written first
            before = time.perf_counter()
            producer.commit_transaction(30)
            commits.append(time.perf_counter() - before)
            producer.begin_transaction()
            last_commit = time.perf_counter()
    if transactional:
        producer.commit_transaction(30)
    else:
        producer.flush(60)
    elapsed = time.perf_counter() - started
    return Run(sent * RECORD / elapsed / 1e6, commits)


def copier(bootstrap: str, source: str, sink: str, count: int, partitions: int) -> float:
    """Copy `count` records from `source` to `sink` exactly once; MB/s of records copied."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-copier", "enable.auto.commit": False,
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "bench-copier", **PRODUCER})
    producer.init_transactions(30)
    consumer.assign([TopicPartition(source, p, 0) for p in range(partitions)])
    copied = 0
    started = time.perf_counter()
    deadline = started + 300
    while copied < count and time.perf_counter() < deadline:
        messages = [m for m in consumer.consume(5000, timeout=0.5) if m.error() is None]
        if not messages:
            continue
        producer.begin_transaction()
        for m in messages:
            producer.produce(sink, m.value(), partition=m.partition())
        positions = consumer.position(consumer.assignment())
        producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 30)
        producer.commit_transaction(30)
        copied += len(messages)
    elapsed = time.perf_counter() - started
    consumer.close()
    return copied * RECORD / elapsed / 1e6


def percentile_ms(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return 1000 * ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def measure(bootstrap: str, state: minikafka.state.State, label: str, args: argparse.Namespace,
            replication: int) -> None:
    prefix = f"rf{replication}"
    for topic in ("idempotent", "transactional", "copy-out"):
        state.create_topic(f"{prefix}-{topic}", partitions=args.partitions, replication_factor=replication,
                           config={"min.insync.replicas": min(2, replication)})
    commits: list[float] = []
    rates = []
    for _ in range(args.rounds):  # alternating, so neither side always runs on the warmer cluster
        idempotent = produce_for(bootstrap, f"{prefix}-idempotent", args.seconds, False, args.partitions)
        transactional = produce_for(bootstrap, f"{prefix}-transactional", args.seconds, True, args.partitions)
        commits += transactional.commits
        rates.append((idempotent.mb_per_s, transactional.mb_per_s))
        print(f"{label}: idempotent {idempotent.mb_per_s:.1f} MB/s, transactional {transactional.mb_per_s:.1f} MB/s "
              f"({100 * transactional.mb_per_s / idempotent.mb_per_s:.0f}% of idempotent; target >= 90%)")
    total_idempotent, total_transactional = (sum(r[0] for r in rates), sum(r[1] for r in rates))
    print(f"{label}: over {args.rounds} rounds, transactional {100 * total_transactional / total_idempotent:.0f}% "
          f"of idempotent (target >= 90%)")
    print(f"{label}: {len(commits)} commits, p50 {percentile_ms(commits, 0.5):.1f} ms, "
          f"p99 {percentile_ms(commits, 0.99):.1f} ms, mean {1000 * statistics.fmean(commits):.1f} ms "
          f"(target p99 < 20 ms on 3 brokers)")
    copied = int(min(200_000, rates[-1][1] * 1e6 * args.seconds / RECORD))
    rate = copier(bootstrap, f"{prefix}-transactional", f"{prefix}-copy-out", copied, args.partitions)
    print(f"{label}: exactly-once copier {rate:.1f} MB/s ({copied} records)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="how long each producer runs")
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2, help="idempotent and transactional runs, alternating")
    only = parser.add_mutually_exclusive_group()
    only.add_argument("--skip-cluster", action="store_true", help="only the single broker")
    only.add_argument("--skip-single", action="store_true", help="only the 3-broker cluster")
    args = parser.parse_args()
    if not args.skip_single:
        with minikafka.Broker() as broker:
            measure(broker.bootstrap_servers, broker.state, "one broker", args, 1)
    if not args.skip_cluster:
        with minikafka.Cluster(brokers=3) as cluster:
            measure(cluster.bootstrap_servers, cluster.state, "3 brokers RF=3", args, 3)


if __name__ == "__main__":
    main()
