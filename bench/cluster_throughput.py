"""Three-broker figures: cluster start to ready, acks=all produce and consume MB/s with replication factor 3,
one-record synchronous requests/s with p50/p99, failover time, replication lag after the producer stops, RSS per
broker.

Run: python bench/cluster_throughput.py [--mb 256] [--partitions 3] [--single 5000] [--zookeeper]
Uses confluent-kafka (librdkafka), 1 KB records; the cluster is `minikafka.Cluster(brokers=3)`: a controller
process and three broker processes on free loopback ports, data in a temporary directory.

--zookeeper measures a ZooKeeper-mode cluster too (`minikafka.Cluster(brokers=3, zookeeper=True)`: a local ZooKeeper
server and three brokers, any of which may be controller), in the same run and on the same figures, side by side
with the embedded controller, and adds its controller failover: kill -9 of the broker that is controller to the
next successful election (another broker's /controller), and to every live broker naming it.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time
from dataclasses import dataclass, field

from broker_throughput import consume, rss_mb  # the single-broker bench, beside this file
from confluent_kafka import KafkaException, Producer

import minikafka

RECORD = 1024


def produce(bootstrap: str, topic: str, count: int) -> float:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20, "batch.size": 1_000_000,
                         "queue.buffering.max.kbytes": 1_000_000, "message.max.bytes": 10_000_000,
                         "enable.idempotence": True})
    value = os.urandom(RECORD)
    failed: list[object] = []
    started = time.perf_counter()
    for i in range(count):
        while True:
            try:
                producer.produce(topic, value, on_delivery=lambda err, _msg: err and failed.append(err))
                break
            except BufferError:
                producer.poll(0.01)
        if i % 10000 == 0:
            producer.poll(0)
    left = producer.flush(300)
    if left or failed:
        raise SystemExit(f"{left} records not delivered, {len(failed)} failed ({failed[:3]})")
    return time.perf_counter() - started


def single_requests(bootstrap: str, topic: str, count: int) -> list[float]:
    """Latency of each one-record acks=all request, sent one at a time."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                         "batch.num.messages": 1, "enable.idempotence": True})
    latencies = []
    try:
        for i in range(count):
            started = time.perf_counter()
            producer.produce(topic, b"%d" % i)
            if producer.flush(10):
                raise SystemExit("a one-record request was not acknowledged within 10 s")
            latencies.append(time.perf_counter() - started)
    finally:
        producer.flush(10)
    return latencies


def failover(cluster: minikafka.Cluster, topic: str) -> float:
    """Seconds from kill -9 of a partition's leader to the first acks=all write acknowledged by the new one."""
    old = cluster.leader_of(topic, 0)
    survivors = ",".join(b.bootstrap_servers for b in cluster.brokers if b is not old)
    producer = Producer({"bootstrap.servers": survivors, "acks": "all", "linger.ms": 0,
                         "enable.idempotence": True, "retry.backoff.ms": 10, "retry.backoff.max.ms": 50,
                         "topic.metadata.refresh.interval.ms": 100})
    try:
        producer.produce(topic, b"warm-up", partition=0)
        producer.flush(10)
        old.kill()
        killed = time.perf_counter()
        result: list[object] = []
        producer.produce(topic, b"after", partition=0, on_delivery=lambda err, msg: result.append(err))
        while not result and time.perf_counter() - killed < 30:
            producer.poll(0.005)
        if not result or result[0] is not None:
            raise KafkaException(f"no write acknowledged after the kill: {result}")
        return time.perf_counter() - killed
    finally:
        producer.flush(10)
        old.restart()


def controller_failover(cluster: minikafka.Cluster) -> tuple[float, float]:
    """ZooKeeper mode: seconds from kill -9 of the controller broker to another broker's election (its /controller),
    and to every live broker naming it in Metadata."""
    old = cluster.wait_for_controller(timeout=60)
    try:
        old.kill()
        killed = time.perf_counter()
        deadline = killed + 60
        while cluster.zookeeper_state.controller_id() in (None, old.node_id):
            if time.perf_counter() > deadline:
                raise SystemExit("no new controller within 60 s of the kill")
            time.sleep(0.005)
        elected_s = time.perf_counter() - killed
        cluster.wait_for_controller(not_on=old, timeout=60)
        return elected_s, time.perf_counter() - killed
    finally:
        old.start()


@dataclass
class Figures:
    readies: list[float] = field(default_factory=list)
    mb: float = 0.0
    count: int = 0
    produce_s: float = 0.0
    lag_s: float = 0.0
    consume_s: float = 0.0
    latencies: list[float] = field(default_factory=list)
    failovers: list[float] = field(default_factory=list)
    controller_failovers: list[tuple[float, float]] = field(default_factory=list)
    rss: list[float] = field(default_factory=list)


def measure(args: argparse.Namespace, zookeeper: bool) -> Figures:
    figures = Figures()
    for _ in range(3):
        started = time.perf_counter()
        with minikafka.Cluster(brokers=3, zookeeper=zookeeper):
            figures.readies.append(time.perf_counter() - started)
    with minikafka.Cluster(brokers=3, zookeeper=zookeeper) as cluster:
        state = cluster.state
        state.create_topic("bench", partitions=args.partitions, replication_factor=3)
        state.create_topic("single", partitions=1, replication_factor=3)
        state.create_topic("failover", partitions=1, replication_factor=3)
        for topic in ("bench", "single", "failover"):
            for p in range(args.partitions if topic == "bench" else 1):
                cluster.wait_for_isr(topic, p, 3)
        bootstrap = cluster.bootstrap_servers
        figures.count = args.mb * 1024 * 1024 // RECORD
        figures.produce_s = produce(bootstrap, "bench", figures.count)
        stopped = time.perf_counter()
        cluster.wait_for_replicas_caught_up("bench", timeout=60)
        figures.lag_s = time.perf_counter() - stopped
        figures.consume_s = consume(bootstrap, "bench", args.partitions, figures.count)
        figures.latencies = single_requests(bootstrap, "single", args.single)
        figures.failovers = [failover(cluster, "failover") for _ in range(3)]
        cluster.wait_for_isr("failover", 0, 3, timeout=60)
        if zookeeper:
            figures.controller_failovers = [controller_failover(cluster) for _ in range(3)]
        figures.rss = [rss_mb(b.pid) for b in cluster.brokers]
    figures.mb = figures.count * RECORD / 1e6
    return figures


def report(figures: Figures, mode: str) -> None:
    f = figures
    ordered = sorted(f.latencies)
    print(f"{mode}:")
    print(f"  cluster start to ready:  {min(f.readies):.3f} s (best of 3; {', '.join(f'{r:.3f}' for r in f.readies)})")
    print(f"  produce, acks=all, RF 3: {f.mb / f.produce_s:.1f} MB/s ({f.count} x {RECORD} B records, "
          f"{f.produce_s:.2f} s)")
    print(f"  replication lag to zero: {f.lag_s:.3f} s after the producer's last acknowledgement")
    print(f"  consume:                 {f.mb / f.consume_s:.1f} MB/s ({f.consume_s:.2f} s)")
    print(f"  one-record requests:     {len(f.latencies) / sum(f.latencies):.0f} requests/s, "
          f"p50 {1000 * statistics.median(ordered):.1f} ms, p99 {1000 * ordered[int(0.99 * len(ordered))]:.1f} ms")
    print(f"  failover (kill -9):      {', '.join(f'{s:.3f}' for s in f.failovers)} s")
    if f.controller_failovers:
        print(f"  controller failover:     {', '.join(f'{e:.3f}' for e, _ in f.controller_failovers)} s to the "
              f"election; {', '.join(f'{a:.3f}' for _, a in f.controller_failovers)} s to every broker told")
    print(f"  RSS per broker:          {', '.join(f'{r:.0f}' for r in f.rss)} MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=int, default=256, help="megabytes to produce and consume")
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--single", type=int, default=5000, help="one-record requests to send")
    parser.add_argument("--zookeeper", action="store_true",
                        help="measure a ZooKeeper-mode cluster too, beside the embedded controller")
    args = parser.parse_args()
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # bytecode caching on, as in an installed package
    embedded = measure(args, zookeeper=False)
    report(embedded, "embedded controller")
    if args.zookeeper:
        zookeeper = measure(args, zookeeper=True)
        report(zookeeper, "ZooKeeper mode")
        ratio = (zookeeper.mb / zookeeper.produce_s) / (embedded.mb / embedded.produce_s)
        print(f"ZooKeeper mode produces at {100 * ratio:.0f}% of the embedded controller's rate")


if __name__ == "__main__":
    main()
