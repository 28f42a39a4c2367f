"""Fetch sessions (KIP-227) at scale: 1,000 partitions with replication factor 3 on three brokers.

Idle: the CPU each broker process uses over a quiet window (from /proc/<pid>/stat), with incremental fetch
sessions and with them off (max.incremental.fetch.session.cache.slots=0, every follower fetch full). Traffic: acks=all
produce throughput to 10 partitions of the 1,000-partition topic, against the same traffic to a 3-partition topic
on the same cluster (with sessions). Targets: idle under 3% of a core per broker; throughput within 10%.

Run: python bench/fetch_sessions.py [--partitions 1000] [--idle-s 20] [--mb 64] [--test-defaults]
Uses confluent-kafka (librdkafka), 1 KB records; the cluster is `minikafka.Cluster(brokers=3)` with Kafka's own
replica.fetch.wait.max.ms (500), replica.lag.time.max.ms (30 s), broker.heartbeat.interval.ms (2 s) and
broker.session.timeout.ms (9 s), or, with --test-defaults, with the Cluster handle's test defaults (100 ms, 1 s,
100 ms and 1 s: five times the fetches, twenty times the heartbeats).
"""
from __future__ import annotations

import argparse
import os
import time

from confluent_kafka import Producer

import minikafka

RECORD = 1024
KAFKA_REPLICATION_DEFAULTS = {"replica.fetch.wait.max.ms": 500, "replica.lag.time.max.ms": 30_000,
                              "broker.heartbeat.interval.ms": 2000, "broker.session.timeout.ms": 9000}
SETTLE_S = 5.0  # after the replicas have caught up: the last ISR and high watermark moves die down
TRAFFIC_PARTITIONS = 10


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def idle_cpu(cluster: minikafka.Cluster, window_s: float) -> list[float]:
    """Each broker's CPU over `window_s`, as a percentage of one core."""
    pids = [b.pid for b in cluster.brokers]
    assert all(pid is not None for pid in pids)
    before = [cpu_seconds(pid) for pid in pids if pid is not None]
    started = time.perf_counter()
    time.sleep(window_s)
    elapsed = time.perf_counter() - started
    after = [cpu_seconds(pid) for pid in pids if pid is not None]
    return [100 * (a - b) / elapsed for a, b in zip(after, before, strict=True)]


def cluster_with(slots: int | None, test_defaults: bool) -> minikafka.Cluster:
    config: dict[str, object] = {} if test_defaults else dict(KAFKA_REPLICATION_DEFAULTS)
    if slots is not None:
        config["max.incremental.fetch.session.cache.slots"] = slots
    return minikafka.Cluster(brokers=3, config=config)


def create_many(cluster: minikafka.Cluster, partitions: int) -> None:
    cluster.state.create_topic("many", partitions=partitions, replication_factor=3)
    cluster.wait_for_replicas_caught_up("many", timeout=300)
    time.sleep(SETTLE_S)


def produce_to(bootstrap: str, topic: str, partitions: int, count: int) -> float:
    """Seconds to produce `count` records acks=all, spread over the first `partitions` partitions."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20, "batch.size": 1_000_000,
                         "queue.buffering.max.kbytes": 1_000_000, "enable.idempotence": True})
    value = os.urandom(RECORD)
    started = time.perf_counter()
    for i in range(count):
        while True:
            try:
                producer.produce(topic, value, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.01)
        if i % 10000 == 0:
            producer.poll(0)
    if producer.flush(300):
        raise SystemExit(f"records to {topic} not delivered")
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--idle-s", type=float, default=20.0, help="the idle measurement window")
    parser.add_argument("--mb", type=int, default=64, help="megabytes produced for each throughput figure")
    parser.add_argument("--test-defaults", action="store_true",
                        help="the Cluster handle's replication test defaults instead of Kafka's")
    args = parser.parse_args()
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    count = args.mb * 1024 * 1024 // RECORD
    mb = count * RECORD / 1e6

    with cluster_with(None, args.test_defaults) as cluster:
        create_many(cluster, args.partitions)
        with_sessions = idle_cpu(cluster, args.idle_s)
        cluster.state.create_topic("few", partitions=3, replication_factor=3)
        for p in range(3):
            cluster.wait_for_isr("few", p, 3)
        bootstrap = cluster.bootstrap_servers
        produce_to(bootstrap, "few", 3, 1000)  # warm-up: connections, metadata
        few_s = produce_to(bootstrap, "few", 3, count)
        many_s = produce_to(bootstrap, "many", TRAFFIC_PARTITIONS, count)
    with cluster_with(0, args.test_defaults) as cluster:
        create_many(cluster, args.partitions)
        without_sessions = idle_cpu(cluster, args.idle_s)

    def figures(cpu: list[float]) -> str:
        return ", ".join(f"{c:.1f}%" for c in cpu)

    settings = "the Cluster's test defaults" if args.test_defaults else "Kafka's replica fetch and heartbeat defaults"
    print(f"{args.partitions} partitions, RF 3, three brokers ({settings}), idle for {args.idle_s:.0f} s "
          "(% of one core):")
    print(f"  with fetch sessions:    {figures(with_sessions)}")
    print(f"  without fetch sessions: {figures(without_sessions)}")
    print(f"acks=all produce, {mb:.0f} MB of {RECORD} B records:")
    print(f"  to 3 partitions of a 3-partition topic:                  {mb / few_s:.1f} MB/s")
    print(f"  to {TRAFFIC_PARTITIONS} partitions of the {args.partitions}-partition topic (with sessions): "
          f"{mb / many_s:.1f} MB/s ({100 * few_s / many_s:.0f}% of the above)")


if __name__ == "__main__":
    main()
