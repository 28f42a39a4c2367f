"""Single-broker figures: start to ready, idle RSS, produce and consume MB/s, one-record requests/s.

Run: python bench/broker_throughput.py [--mb 512] [--partitions 4]
Uses confluent-kafka (librdkafka) as the client, 1 KB records, large batches; the broker is a real
`minikafka serve` process on a free loopback port with its data in a temporary directory.
"""
from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

RECORD = 1024


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def start_broker(data_dir: str) -> tuple[subprocess.Popen, str, float]:
    port = free_port()
    started = time.perf_counter()
    # Bytecode caching on, as in any installed package, even where the shell disables it.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    proc = subprocess.Popen([sys.executable, "-m", "minikafka", "serve", "--listeners",
                             f"PLAINTEXT://127.0.0.1:{port}", "--log-dirs", data_dir, "--log-level", "WARNING"],
                            stdout=subprocess.PIPE, text=True, env=env)
    line = proc.stdout.readline()
    ready = time.perf_counter() - started
    if not line.startswith("minikafka listening on"):
        proc.kill()
        raise SystemExit(f"broker did not start: {line!r}")
    return proc, f"127.0.0.1:{port}", ready


def produce(bootstrap: str, topic: str, count: int, **conf) -> float:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 20, "batch.size": 1_000_000,
                         "queue.buffering.max.kbytes": 1_000_000, "message.max.bytes": 10_000_000, **conf})
    value = os.urandom(RECORD)
    started = time.perf_counter()
    for i in range(count):
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:
                producer.poll(0.01)
        if i % 10000 == 0:
            producer.poll(0)
    left = producer.flush(120)
    if left:
        raise SystemExit(f"{left} records not delivered")
    return time.perf_counter() - started


def consume(bootstrap: str, topic: str, partitions: int, count: int) -> float:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
                         "fetch.max.bytes": 52_428_800, "max.partition.fetch.bytes": 10_485_760,
                         "fetch.wait.max.ms": 100, "queued.max.messages.kbytes": 1_000_000})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen = 0
    started = time.perf_counter()
    deadline = started + 300
    while seen < count and time.perf_counter() < deadline:
        for message in consumer.consume(10000, 1.0):
            if message.error() is None:
                seen += 1
    elapsed = time.perf_counter() - started
    consumer.close()
    if seen < count:
        raise SystemExit(f"consumed only {seen} of {count}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mb", type=int, default=512, help="megabytes to produce and consume")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--single", type=int, default=20000, help="one-record requests to send")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as data_dir:
        readies = []
        for _ in range(4):
            proc, bootstrap, ready = start_broker(os.path.join(data_dir, f"startup-{len(readies)}"))
            readies.append(ready)
            proc.terminate()
            proc.wait(10)
        proc, bootstrap, _ = start_broker(os.path.join(data_dir, "bench"))
        try:
            time.sleep(1.0)
            idle = rss_mb(proc.pid)
            admin = AdminClient({"bootstrap.servers": bootstrap})
            for future in admin.create_topics([NewTopic("bench", args.partitions, 1),
                                               NewTopic("single", 1, 1)]).values():
                future.result(30)
            count = args.mb * 1024 * 1024 // RECORD
            produce_s = produce(bootstrap, "bench", count)
            consume_s = consume(bootstrap, "bench", args.partitions, count)
            single_s = produce(bootstrap, "single", args.single, **{"linger.ms": 0, "batch.num.messages": 1})
            busy = rss_mb(proc.pid)
        finally:
            proc.terminate()
            proc.wait(30)
    mb = count * RECORD / 1e6
    readies = readies[1:]  # the first start writes the bytecode cache
    print(f"start to ready:      {min(readies):.3f} s (best of 3; {', '.join(f'{r:.3f}' for r in readies)})")
    print(f"idle RSS:            {idle:.1f} MB")
    print(f"produce:             {mb / produce_s:.1f} MB/s ({count} x {RECORD} B records, {produce_s:.2f} s)")
    print(f"consume:             {mb / consume_s:.1f} MB/s ({consume_s:.2f} s)")
    print(f"one-record requests: {args.single / single_s:.0f} requests/s (acks=1, linger.ms=0)")
    print(f"RSS after the run:   {busy:.1f} MB")


if __name__ == "__main__":
    main()
