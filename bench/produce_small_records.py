"""Produce throughput at small records (issue 19): MB/s, records/s and p50/p99 produce latency at 100 B and 1 KB
records, and the broker's CPU time per MB, for a 3-partition topic on one `minikafka serve`.

Run: python bench/produce_small_records.py [--records 1000000] [--record-sizes 100,1024] [--pure-python]
                                           [--kafka-home PATH]
The producer is confluent-kafka (librdkafka) with acks=1, linger.ms=5, batch.size=262144; a record's latency is
librdkafka's, from produce() to its acknowledgement. With --kafka-home, Kafka's own bin/kafka-producer-perf-test.sh
(the Java producer, same settings) produces instead, as Kafka's throughput is usually measured. --pure-python starts
the broker with the record walk in Python (MINIKAFKA_PURE_PYTHON=1) instead of the compiled one, for comparison.
The broker starts as bench/broker_throughput.py starts it, on a free loopback port with a temporary data dir.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import tempfile
import time
from array import array
from pathlib import Path
from typing import NamedTuple

from broker_throughput import cpu_s, produce_all, start_broker
from confluent_kafka import KafkaError, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from minikafka.storage.log_validator import PURE_PYTHON_ENV, compiled_walk

PARTITIONS = 3
PRODUCER_CONFIG = {"acks": 1, "linger.ms": 5, "batch.size": 262144}
# kafka-producer-perf-test's summary line: "... records/sec (... MB/sec), ... ms 50th, ... ms 99th, ..."
PERF_TEST_SUMMARY = re.compile(r"([\d.]+) records/sec \(([\d.]+) MB/sec\).*?([\d.]+) ms 50th.*?([\d.]+) ms 99th")


class Figures(NamedTuple):
    records_per_s: float
    mb_per_s: float  # 10^6 bytes of record values
    p50_ms: float
    p99_ms: float


def percentile(latencies: array, fraction: float) -> float:
    ordered = sorted(latencies)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def produce_with_librdkafka(bootstrap: str, topic: str, count: int, size: int) -> Figures:
    """`count` records of `size` random bytes as fast as the producer takes them; latencies from librdkafka."""
    latencies = array("d")
    failures: list[KafkaError] = []

    def delivered(error: KafkaError | None, message: Message) -> None:
        if error is not None:
            failures.append(error)
        else:
            latencies.append(message.latency())

    producer = Producer({"bootstrap.servers": bootstrap, "queue.buffering.max.kbytes": 1_000_000,
                         "on_delivery": delivered, **PRODUCER_CONFIG})
    started = time.perf_counter()
    produce_all(producer, topic, count, os.urandom(size))
    left = producer.flush(300)
    elapsed = time.perf_counter() - started
    if left or failures:
        raise SystemExit(f"{left} records not delivered, {len(failures)} failed (first: {failures[:1]})")
    return Figures(count / elapsed, count * size / 1e6 / elapsed, 1000 * percentile(latencies, 0.5),
                   1000 * percentile(latencies, 0.99))


def produce_with_perf_test(kafka_home: Path, bootstrap: str, topic: str, count: int, size: int) -> Figures:
    """Kafka's kafka-producer-perf-test.sh; its MB/sec (MiB) is turned into 10^6 bytes as above."""
    props = [f"bootstrap.servers={bootstrap}"] + [f"{k}={v}" for k, v in PRODUCER_CONFIG.items()]
    result = subprocess.run([str(kafka_home / "bin" / "kafka-producer-perf-test.sh"), "--topic", topic,
                             "--num-records", str(count), "--record-size", str(size), "--throughput", "-1",
                             "--producer-props", *props], capture_output=True, text=True, timeout=900, check=True)
    summary = PERF_TEST_SUMMARY.search(result.stdout.strip().splitlines()[-1])
    if summary is None:
        raise SystemExit(f"no summary line in kafka-producer-perf-test's output:\n{result.stdout}")
    records_per_s, mib_per_s, p50, p99 = (float(group) for group in summary.groups())
    return Figures(records_per_s, mib_per_s * 1024 * 1024 / 1e6, p50, p99)


def create_topics(bootstrap: str, names: list[str]) -> None:
    """The topics, with an admin client gone before the broker stops (it would log its reconnects)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, PARTITIONS, 1) for name in names]).values():
        future.result(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000, help="records to produce per record size")
    parser.add_argument("--record-sizes", default="100,1024", help="record sizes in bytes, comma-separated")
    parser.add_argument("--kafka-home", type=Path, help="a Kafka distribution: produce with its perf test instead")
    parser.add_argument("--pure-python", action="store_true", help="the broker walks records in Python")
    args = parser.parse_args()
    sizes = [int(size) for size in args.record_sizes.split(",")]
    if args.pure_python:
        os.environ[PURE_PYTHON_ENV] = "1"  # start_broker passes the environment on
    elif compiled_walk is None:  # the broker runs from this same install
        raise SystemExit(f"the compiled record walk is not built or {PURE_PYTHON_ENV}=1 is set: `pip install -e .`")
    with tempfile.TemporaryDirectory() as data_dir:
        proc, bootstrap, _ = start_broker(data_dir)
        try:
            create_topics(bootstrap, [f"small-{size}" for size in sizes])
            results = []
            for size in sizes:
                cpu_before = cpu_s(proc.pid)
                if args.kafka_home is None:
                    figures = produce_with_librdkafka(bootstrap, f"small-{size}", args.records, size)
                else:
                    figures = produce_with_perf_test(args.kafka_home, bootstrap, f"small-{size}", args.records, size)
                results.append((size, figures, cpu_s(proc.pid) - cpu_before))
        finally:
            proc.terminate()
            proc.wait(30)
    walk = "Python" if args.pure_python else "compiled"
    client = "kafka-producer-perf-test" if args.kafka_home else "confluent-kafka"
    print(f"{args.records} records per size, {PARTITIONS} partitions, {client}, record walk: {walk}")
    for size, figures, broker_cpu_s in results:
        mb = args.records * size / 1e6
        print(f"{size:>5} B: {figures.mb_per_s:7.1f} MB/s {figures.records_per_s:10.0f} records/s  "
              f"p50 {figures.p50_ms:6.1f} ms  p99 {figures.p99_ms:6.1f} ms  "
              f"broker CPU {1000 * broker_cpu_s / mb:6.1f} ms/MB ({broker_cpu_s:.1f} s)")


if __name__ == "__main__":
    main()
