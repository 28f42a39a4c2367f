"""Benchmark: Spark reading a minikafka topic of 1 KB records, batch and streaming, local[2].

    python bench/spark_read.py            # 1 GB
    python bench/spark_read.py --mb 100   # less

Starts its own broker (unless --bootstrap-servers is given), fills a topic, then times
spark.read...count() and a streaming query (Trigger.AvailableNow into the noop sink) over it and
prints MB/s of record values, after a small warm-up read. Not a test: it only reports figures.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

READY = re.compile(r"minikafka listening on (\S+)")


@contextmanager
def broker(bootstrap: str | None) -> Iterator[str]:
    """The given cluster, or a fresh `minikafka serve` on a free port, stopped afterwards."""
    if bootstrap:
        yield bootstrap
        return
    with tempfile.TemporaryDirectory(prefix="minikafka-bench-") as data:
        proc = subprocess.Popen(
            [sys.executable, "-m", "minikafka", "serve", "--listeners", "PLAINTEXT://127.0.0.1:0",
             "--log-dirs", data, "--log-level", "WARNING"],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                line = proc.stdout.readline()
                match = READY.search(line)
                if match or not line:
                    break
            if not match:
                raise RuntimeError("the broker did not start")
            yield match.group(1)
        finally:
            proc.terminate()
            proc.wait(30)


def fill(bootstrap: str, topic: str, partitions: int, count: int, size: int) -> float:
    """Create the topic and produce `count` records of `size` bytes; returns seconds taken."""
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])
    admin.close()
    payload = os.urandom(size)
    started = time.monotonic()
    try:
        from confluent_kafka import Producer
    except ImportError:
        from kafka import KafkaProducer

        producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, batch_size=1 << 20, acks=1)
        for i in range(count):
            producer.send(topic, payload, partition=i % partitions)
        producer.flush()
        producer.close()
    else:
        producer = Producer(
            {"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20, "acks": 1,
             "queue.buffering.max.kbytes": 1 << 20}
        )  # fmt: skip
        for i in range(count):
            while True:
                try:
                    producer.produce(topic, payload, partition=i % partitions)
                    break
                except BufferError:
                    producer.poll(0.05)
            producer.poll(0)
        producer.flush(300)
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description="Spark read throughput from minikafka")
    parser.add_argument("--mb", type=int, default=1024, help="MB of record values to read (default 1024)")
    parser.add_argument("--record-bytes", type=int, default=1024)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--bootstrap-servers", help="use this cluster instead of starting a broker")
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

    count = args.mb * 1024 * 1024 // args.record_bytes
    megabytes = count * args.record_bytes / 1e6
    topic = f"bench-{uuid.uuid4().hex[:8]}"
    with broker(args.bootstrap_servers) as bootstrap:
        seconds = fill(bootstrap, topic, args.partitions, count, args.record_bytes)
        print(f"produced {count} records ({megabytes:.0f} MB) in {seconds:.1f} s: {megabytes / seconds:.1f} MB/s")

        from pyspark.sql import SparkSession

        from minikafka.spark_connector import register

        spark = (
            SparkSession.builder.master(args.master)
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.driver.memory", "2g")
            .getOrCreate()
        )
        register(spark)
        try:
            # A small read first, so Spark's one-off start-up (Python workers, code loading) is
            # not counted as reading time.
            first = json.dumps({topic: {str(p): 100 for p in range(args.partitions)}})
            spark.read.format("minikafka").option("kafka.bootstrap.servers", bootstrap).option(
                "subscribe", topic
            ).option("endingOffsets", first).load().count()
            started = time.monotonic()
            read = (
                spark.read.format("minikafka")
                .option("kafka.bootstrap.servers", bootstrap)
                .option("subscribe", topic)
                .load()
                .count()
            )
            seconds = time.monotonic() - started
            assert read == count, (read, count)
            print(f"batch read: {read} records in {seconds:.1f} s: {megabytes / seconds:.1f} MB/s")

            with tempfile.TemporaryDirectory(prefix="minikafka-bench-checkpoint-") as checkpoint:
                started = time.monotonic()
                query = (
                    spark.readStream.format("minikafka")
                    .option("kafka.bootstrap.servers", bootstrap)
                    .option("subscribe", topic)
                    .option("startingOffsets", "earliest")
                    .load()
                    .writeStream.format("noop")
                    .option("checkpointLocation", checkpoint)
                    .trigger(availableNow=True)
                    .start()
                )
                query.awaitTermination()
                seconds = time.monotonic() - started
                rows = sum(p["numInputRows"] for p in query.recentProgress)
            assert rows == count, (rows, count)
            print(f"streaming read: {rows} records in {seconds:.1f} s: {megabytes / seconds:.1f} MB/s")
        finally:
            spark.stop()


if __name__ == "__main__":
    main()
