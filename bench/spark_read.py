"""Benchmark: Spark reading and writing a minikafka topic of 1 KB records, local[2].

    python bench/spark_read.py                  # 400 MB: batch read, streaming reads, write
    python bench/spark_read.py --mb 200
    python bench/spark_read.py --compare-jvm a.jar,b.jar,...   # also Spark's own Kafka source and sink

Starts its own broker (unless --bootstrap-servers is given), fills a topic, runs every step once per format to
warm up (Spark compiles and loads classes, Python workers start), then times:
- a batch read that sums the value lengths of every record (what the connector must beat Spark's JVM source at);
- a streaming query with Trigger.AvailableNow into the noop sink, in one micro-batch and in eight
  (maxOffsetsPerTrigger), timed from start() to the end, and also by the micro-batches alone (the sum of Spark's
  triggerExecution durations: the rate of a running query, without the query's start and stop);
- a batch write of the same number of 1 KB records to a new topic.
With --compare-jvm (the comma-separated jars of Spark's Kafka connector: spark-sql-kafka-0-10,
spark-token-provider-kafka-0-10, kafka-clients, commons-pool2) each step also runs with format("kafka") on the same
broker and data, one after the other, and the ratios are printed. Figures are MB/s of record values; not a test.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
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


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])
    admin.close()


def fill(bootstrap: str, topic: str, partitions: int, count: int, size: int) -> float:
    """Create the topic and produce `count` records of `size` bytes; returns seconds taken."""
    from confluent_kafka import Producer

    create_topic(bootstrap, topic, partitions)
    payload = os.urandom(size)
    started = time.monotonic()
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


def timed(step: Callable[[], int], expected: int) -> float:
    started = time.monotonic()
    got = step()
    seconds = time.monotonic() - started
    assert got == expected, (got, expected)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description="Spark read and write throughput against minikafka")
    parser.add_argument("--mb", type=int, default=400, help="MB of record values (default 400)")
    parser.add_argument("--record-bytes", type=int, default=1024)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--bootstrap-servers", help="use this cluster instead of starting a broker")
    parser.add_argument("--compare-jvm", metavar="JARS", help="Spark's Kafka connector jars, comma-separated")
    parser.add_argument("--fetcher", default="auto", choices=["auto", "librdkafka"],
                        help="the connector's `fetcher` option")
    parser.add_argument("--skip", default="", help="comma-separated steps to leave out: read,stream,write")
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    skip = set(filter(None, args.skip.split(",")))

    count = args.mb * 1024 * 1024 // args.record_bytes
    megabytes = count * args.record_bytes / 1e6
    topic = f"bench-{uuid.uuid4().hex[:8]}"
    with broker(args.bootstrap_servers) as bootstrap:
        seconds = fill(bootstrap, topic, args.partitions, count, args.record_bytes)
        print(f"produced {count} records ({megabytes:.0f} MB) in {seconds:.1f} s: {megabytes / seconds:.1f} MB/s")

        from pyspark.sql import SparkSession
        from pyspark.sql import functions as F

        from minikafka.spark_connector import jvm_kafka_options, register

        builder = (
            SparkSession.builder.master(args.master)
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.driver.memory", "2g")
        )
        formats = {"minikafka": {"kafka.bootstrap.servers": bootstrap, "fetcher": args.fetcher}}
        if args.compare_jvm:
            settings = jvm_kafka_options(bootstrap, args.compare_jvm)
            builder = builder.config("spark.jars", settings.spark_jars)
            formats["kafka"] = settings.options
        spark = builder.getOrCreate()
        register(spark)

        def reader(fmt: str, streaming: bool = False):
            source = spark.readStream if streaming else spark.read
            return source.format(fmt).options(**formats[fmt]).option("subscribe", topic)

        def batch_read(fmt: str) -> int:
            row = reader(fmt).load().select(F.count("*").alias("n"), F.sum(F.length("value")).alias("b")).first()
            assert row.b == count * args.record_bytes, row
            return row.n

        batch_ms: dict[str, int] = {}

        def streaming_read(fmt: str, triggers: int) -> int:
            stream = reader(fmt, streaming=True).option("startingOffsets", "earliest")
            if triggers > 1:
                stream = stream.option("maxOffsetsPerTrigger", str(-(-count // triggers)))
            with tempfile.TemporaryDirectory(prefix="minikafka-bench-checkpoint-") as checkpoint:
                query = (stream.load().writeStream.format("noop").option("checkpointLocation", checkpoint)
                         .trigger(availableNow=True).start())
                query.awaitTermination()
                batch_ms[fmt] = sum(p["durationMs"]["triggerExecution"] for p in query.recentProgress)
                return sum(p["numInputRows"] for p in query.recentProgress)

        def write(fmt: str) -> int:
            out = f"{topic}-{fmt}-out-{uuid.uuid4().hex[:6]}"
            create_topic(bootstrap, out, args.partitions)
            payload = bytearray(os.urandom(args.record_bytes))
            df = spark.range(count, numPartitions=args.partitions).select(F.lit(payload).alias("value"))
            df.write.format(fmt).options(**formats[fmt]).option("topic", out).mode("append").save()
            return count

        steps: list[tuple[str, str, Callable[[str], int]]] = [
            ("read", "batch read (sum of value lengths)", batch_read),
            ("stream", "streaming, Trigger.AvailableNow", lambda fmt: streaming_read(fmt, 1)),
            ("stream", "streaming, 8 micro-batches (maxOffsetsPerTrigger)", lambda fmt: streaming_read(fmt, 8)),
            ("write", "batch write", write),
        ]
        try:
            # Every step once per format before anything is timed, so Spark's one-off start-up (Python workers,
            # JVM classes and their compilation, streaming's first query) is not counted as reading time.
            for group, name, step in steps:
                for fmt in formats:
                    if group not in skip:
                        seconds = timed(lambda step=step, fmt=fmt: step(fmt), count)
                        print(f"warm-up {name}, {fmt}: {seconds:.1f} s", flush=True)
            for group, name, step in steps:
                if group in skip:
                    continue
                rates, batch_rates = {}, {}
                for fmt in formats:
                    batch_ms.pop(fmt, None)
                    seconds = timed(lambda step=step, fmt=fmt: step(fmt), count)
                    rates[fmt] = megabytes / seconds
                    print(f"{name}, {fmt}: {count} records in {seconds:.1f} s: {rates[fmt]:.1f} MB/s", flush=True)
                    if fmt in batch_ms:
                        batch_rates[fmt] = megabytes / (batch_ms[fmt] / 1000)
                        print(f"{name}, {fmt}, micro-batches alone: {batch_ms[fmt] / 1000:.1f} s: "
                              f"{batch_rates[fmt]:.1f} MB/s", flush=True)
                if "kafka" in rates:
                    print(f"{name}: minikafka connector / Spark's Kafka source = "
                          f"{rates['minikafka'] / rates['kafka']:.2f}x", flush=True)
                if "kafka" in batch_rates:
                    print(f"{name}, micro-batches alone: minikafka connector / Spark's Kafka source = "
                          f"{batch_rates['minikafka'] / batch_rates['kafka']:.2f}x", flush=True)
        finally:
            spark.stop()


if __name__ == "__main__":
    main()
