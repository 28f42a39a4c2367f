"""Single-broker figures: start to ready, idle RSS, produce and consume MB/s, the broker's CPU time per consumed
MB (with confluent-kafka's consumer; with kcat, librdkafka's C consumer without Python in the way, when `kcat` is on
the PATH; and with bare Fetch requests whose records are counted, not decoded, so the client's own cost does not
hide the broker's), one-record requests/s.

Run: python bench/broker_throughput.py [--mb 512] [--partitions 3] [--record-sizes 1024,100]
Uses confluent-kafka (librdkafka) as the client, large batches, one topic per record size; the broker is a real
`minikafka serve` process on a free loopback port with its data in a temporary directory. The broker's CPU time
(user + system, from /proc) is read before and after each consume phase.
"""
from __future__ import annotations

import argparse
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.consumer.fetch import FetchRequest, FetchResponse

from minikafka.protocol.record_batch import iter_batches


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


def cpu_s(pid: int) -> float:
    """User plus system CPU time of the process so far."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


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


def produce_all(producer: Producer, topic: str, count: int, value: bytes) -> None:
    """`count` records of `value`, as fast as the producer's queue takes them (a full queue waits for deliveries)."""
    for i in range(count):
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:
                producer.poll(0.01)
        if i % 10000 == 0:
            producer.poll(0)


def produce(bootstrap: str, topic: str, count: int, record: int, **conf) -> float:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 20, "batch.size": 1_000_000,
                         "queue.buffering.max.kbytes": 1_000_000, "message.max.bytes": 10_000_000, **conf})
    started = time.perf_counter()
    produce_all(producer, topic, count, os.urandom(record))
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


def consume_with_kcat(bootstrap: str, topic: str, count: int) -> float | None:
    """Seconds kcat takes to read `count` records from the start of every partition; None without kcat."""
    kcat = shutil.which("kcat")
    if kcat is None:
        return None
    started = time.perf_counter()
    subprocess.run([kcat, "-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-c", str(count), "-q", "-f", "",
                    "-X", "fetch.wait.max.ms=100", "-X", "fetch.max.bytes=52428800",
                    "-X", "max.partition.fetch.bytes=10485760", "-X", "queued.max.messages.kbytes=1000000"],
                   check=True, timeout=300, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def _receive_exactly(sock: socket.socket, size: int) -> memoryview:
    buffer = memoryview(bytearray(size))
    got = 0
    while got < size:
        count = sock.recv_into(buffer[got:])
        if not count:
            raise SystemExit("the broker closed the connection")
        got += count
    return buffer


def fetch_raw(bootstrap: str, topic: str, partitions: int, count: int) -> tuple[float, int]:
    """Fetch (v12) every partition from offset 0 until `count` records came back; the records are walked by batch
    header only, for the next offsets. Returns the time taken and the record bytes fetched."""
    host, port = bootstrap.rsplit(":", 1)
    offsets = [0] * partitions
    got = 0
    started = time.perf_counter()
    with socket.create_connection((host, int(port))) as sock:
        for correlation in range(1, 100_000):
            if sum(offsets) >= count:
                break
            topic_request = FetchRequest[12].FetchTopic(topic=topic, partitions=[
                FetchRequest[12].FetchTopic.FetchPartition(partition=p, current_leader_epoch=-1, fetch_offset=offset,
                                                           last_fetched_epoch=-1, log_start_offset=-1,
                                                           partition_max_bytes=10_485_760)
                for p, offset in enumerate(offsets)])
            request = FetchRequest[12](replica_id=-1, max_wait_ms=100, min_bytes=1, max_bytes=52_428_800,
                                       isolation_level=0, session_id=0, session_epoch=-1, topics=[topic_request],
                                       forgotten_topics_data=[], rack_id="")
            request.with_header(correlation_id=correlation, client_id="bench")
            sock.sendall(request.encode(header=True, framed=True))
            (size,) = struct.unpack(">i", _receive_exactly(sock, 4))
            frame = _receive_exactly(sock, size)
            response = FetchResponse[12].decode(frame[5:], version=12)
            for partition in response.responses[0].partitions:
                records = partition.records or b""
                got += len(records)
                for _, header in iter_batches(records):
                    offsets[partition.partition_index] = header.last_offset + 1
    if sum(offsets) < count:
        raise SystemExit(f"fetched only {sum(offsets)} of {count} records")
    return time.perf_counter() - started, got


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mb", type=int, default=512, help="megabytes to produce and consume per record size")
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--record-sizes", default="1024,100", help="record sizes in bytes, comma-separated")
    parser.add_argument("--single", type=int, default=20000, help="one-record requests to send")
    args = parser.parse_args()
    sizes = [int(size) for size in args.record_sizes.split(",")]
    phases = []
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
            topics = [NewTopic(f"bench-{size}", args.partitions, 1) for size in sizes] + [NewTopic("single", 1, 1)]
            for future in admin.create_topics(topics).values():
                future.result(30)
            for size in sizes:
                count = args.mb * 1024 * 1024 // size
                produce_s = produce(bootstrap, f"bench-{size}", count, size)
                cpu_before = cpu_s(proc.pid)
                consume_s = consume(bootstrap, f"bench-{size}", args.partitions, count)
                consume_cpu = cpu_s(proc.pid) - cpu_before
                cpu_before = cpu_s(proc.pid)
                kcat_s = consume_with_kcat(bootstrap, f"bench-{size}", count)
                kcat_cpu = cpu_s(proc.pid) - cpu_before
                cpu_before = cpu_s(proc.pid)
                fetch_s, fetched = fetch_raw(bootstrap, f"bench-{size}", args.partitions, count)
                phases.append((size, count, produce_s, consume_s, consume_cpu, kcat_s, kcat_cpu, fetch_s, fetched,
                               cpu_s(proc.pid) - cpu_before))
            single_s = produce(bootstrap, "single", args.single, 1024, **{"linger.ms": 0, "batch.num.messages": 1})
            busy = rss_mb(proc.pid)
        finally:
            proc.terminate()
            proc.wait(30)
    readies = readies[1:]  # the first start writes the bytecode cache
    print(f"start to ready:      {min(readies):.3f} s (best of 3; {', '.join(f'{r:.3f}' for r in readies)})")
    print(f"idle RSS:            {idle:.1f} MB")
    for size, count, produce_s, consume_s, consume_cpu_s, kcat_s, kcat_cpu_s, fetch_s, fetched, fetch_cpu_s in phases:
        mb = count * size / 1e6
        print(f"{size} B records, {args.partitions} partitions:")
        print(f"  produce:           {mb / produce_s:.1f} MB/s ({count} records, {produce_s:.2f} s)")
        print(f"  consume:           {mb / consume_s:.1f} MB/s ({consume_s:.2f} s)")
        print(f"  broker CPU:        {1000 * consume_cpu_s / mb:.2f} ms per consumed MB ({consume_cpu_s:.2f} s)")
        if kcat_s is None:
            print("  kcat consume:      (kcat is not on the PATH)")
        else:
            print(f"  kcat consume:      {mb / kcat_s:.1f} MB/s ({kcat_s:.2f} s)")
            print(f"  broker CPU:        {1000 * kcat_cpu_s / mb:.2f} ms per consumed MB ({kcat_cpu_s:.2f} s)")
        print(f"  bare Fetch:        {fetched / 1e6 / fetch_s:.1f} MB/s of record batches ({fetched / 1e6:.0f} MB, "
              f"{fetch_s:.2f} s)")
        print(f"  broker CPU:        {1e9 * fetch_cpu_s / fetched:.2f} ms per fetched MB ({fetch_cpu_s:.2f} s)")
    print(f"one-record requests: {args.single / single_s:.0f} requests/s (acks=1, linger.ms=0)")
    print(f"RSS after the run:   {busy:.1f} MB")


if __name__ == "__main__":
    main()
