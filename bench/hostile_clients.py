"""Figures under hostile clients: a normal producer's p50/p99 and a fresh client's Metadata latency while clients
pipeline Metadata requests and never read their responses, and the broker's RSS; optionally with fetches parked
at max_wait_ms, min_bytes and max_bytes 2^31-1 and a CreateTopics of many partitions at the same time.

Run: python bench/hostile_clients.py [--flooders 20] [--topics 200] [--seconds 10] [--parked-fetches 500]
                                     [--create-partitions 5000]
Targets (issue 10): producer p99 < 50 ms, fresh Metadata < 100 ms, RSS < 300 MB.
The broker is a real `minikafka serve` process on a free loopback port, data in a temporary directory; the
producer is confluent-kafka (librdkafka), one record per request (acks=1, linger.ms=0), each acknowledged before
the next; the other clients are raw sockets.
"""
from __future__ import annotations

import argparse
import os
import socket
import statistics
import struct
import tempfile
import threading
import time
from collections.abc import Callable

from broker_throughput import rss_mb, start_broker  # the single-broker bench, beside this file
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.consumer.fetch import FetchRequest
from kafka.protocol.metadata.metadata import MetadataRequest

INT32_MAX = (1 << 31) - 1
FLOOD_BYTES = 1 << 18  # what one flooder sends at a time: 256 KiB of pipelined requests


def framed(request, correlation_id: int) -> bytes:
    request.with_header(correlation_id=correlation_id, client_id="bench")
    return request.encode(header=True, framed=True)


def connect(bootstrap: str) -> socket.socket:
    host, port = bootstrap.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=30)


def read_frame(sock: socket.socket) -> bytes:
    def exactly(n: int) -> bytes:
        data = bytearray()
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            data += chunk
        return bytes(data)

    (size,) = struct.unpack(">i", exactly(4))
    return exactly(size)


class Flooder:
    """Pipelines Metadata requests for every topic, 256 KiB at a time, and never reads a response."""

    def __init__(self, bootstrap: str) -> None:
        self.sock = connect(bootstrap)
        self.sock.settimeout(None)
        one = framed(MetadataRequest[1](topics=None), 1)
        self._blob = one * (FLOOD_BYTES // len(one))
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while True:
                self.sock.sendall(self._blob)  # blocks for good once the broker stops reading this connection
        except OSError:
            pass

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        self._thread.join(10)


def park_fetches(bootstrap: str, topic: str, count: int) -> list[socket.socket]:
    """Connections each holding one Fetch that waits as long as the protocol allows, for as much as it allows."""
    F = FetchRequest[12]
    request = F(replica_id=-1, max_wait_ms=INT32_MAX, min_bytes=INT32_MAX, max_bytes=INT32_MAX, isolation_level=0,
                session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="",
                topics=[F.FetchTopic(topic=topic, partitions=[F.FetchTopic.FetchPartition(
                    partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1, log_start_offset=-1,
                    partition_max_bytes=INT32_MAX)])])
    data = framed(request, 1)
    sockets = []
    for _ in range(count):
        sock = connect(bootstrap)
        sock.sendall(data)
        sockets.append(sock)
    return sockets


def metadata_latency(bootstrap: str) -> float:
    """Seconds from connecting to a whole Metadata answer for every topic, as a client starting up sees it."""
    started = time.perf_counter()
    with connect(bootstrap) as sock:
        sock.sendall(framed(MetadataRequest[1](topics=None), 1))
        read_frame(sock)
    return time.perf_counter() - started


def produce_latencies(bootstrap: str, topic: str, seconds: float) -> list[float]:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 0, "batch.num.messages": 1})
    latencies = []
    try:
        producer.produce(topic, b"warm-up")
        producer.flush(30)
        deadline = time.perf_counter() + seconds
        i = 0
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            producer.produce(topic, b"%d" % i)
            if producer.flush(60):
                raise SystemExit("a one-record request was not acknowledged within 60 s")
            latencies.append(time.perf_counter() - started)
            i += 1
    finally:
        producer.flush(10)
    return latencies


def sample_every(interval: float, stop: threading.Event, sample: Callable[[], float]) -> list[float]:
    """Start sampling on a thread; the list fills until `stop` is set."""
    samples: list[float] = []

    def run() -> None:
        while not stop.wait(interval):
            samples.append(sample())

    threading.Thread(target=run, daemon=True).start()
    return samples


def percentiles(latencies: list[float]) -> str:
    ordered = sorted(latencies)
    if not ordered:
        return "no samples"
    return (f"p50 {1000 * statistics.median(ordered):.1f} ms, p99 {1000 * ordered[int(0.99 * (len(ordered) - 1))]:.1f}"
            f" ms, max {1000 * ordered[-1]:.1f} ms ({len(ordered)} samples)")


def measure(label: str, bootstrap: str, pid: int, seconds: float) -> None:
    stop = threading.Event()
    metadata = sample_every(0.5, stop, lambda: metadata_latency(bootstrap))
    rss = sample_every(0.25, stop, lambda: rss_mb(pid))
    produced = produce_latencies(bootstrap, "bench", seconds)
    stop.set()
    print(f"{label}:")
    print(f"  producer (one record, acks=1): {percentiles(produced)}")
    print(f"  fresh client's Metadata:       {percentiles(metadata)}")
    print(f"  broker RSS:                    max {max(rss, default=rss_mb(pid)):.0f} MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--flooders", type=int, default=20, help="clients pipelining Metadata, never reading")
    parser.add_argument("--topics", type=int, default=200, help="topics every Metadata answer lists")
    parser.add_argument("--seconds", type=float, default=10.0, help="how long each measurement runs")
    parser.add_argument("--parked-fetches", type=int, default=0, help="connections parking a 2^31-1 fetch")
    parser.add_argument("--create-partitions", type=int, default=0,
                        help="partitions of a topic created while the clients flood (0: none)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as data_dir:
        proc, bootstrap, _ = start_broker(os.path.join(data_dir, "broker"))
        try:
            admin = AdminClient({"bootstrap.servers": bootstrap})
            topics = [NewTopic(f"topic-{i:04d}", 1, 1) for i in range(args.topics)] + [NewTopic("bench", 1, 1)]
            for future in admin.create_topics(topics).values():
                future.result(60)
            print(f"broker idle RSS: {rss_mb(proc.pid):.0f} MB; {args.topics} topics of 1 partition, and 'bench'")
            measure("quiet", bootstrap, proc.pid, args.seconds)

            flooders = [Flooder(bootstrap) for _ in range(args.flooders)]
            parked = park_fetches(bootstrap, "bench", args.parked_fetches)
            creation: list[str] = []
            if args.create_partitions:
                def create() -> None:
                    started = time.perf_counter()
                    future = admin.create_topics([NewTopic("many-partitions", args.create_partitions, 1)],
                                                 request_timeout=300)["many-partitions"]
                    try:
                        future.result(300)
                        creation.append(f"took {time.perf_counter() - started:.1f} s")
                    except Exception as exc:  # noqa: BLE001 - reported, not fatal to the figures
                        creation.append(f"failed after {time.perf_counter() - started:.1f} s: {exc}")

                creator = threading.Thread(target=create, daemon=True)
                creator.start()
            load = [f"{args.flooders} never-reading clients pipelining Metadata"]
            if args.parked_fetches:
                load.append(f"{args.parked_fetches} parked 2^31-1 fetches")
            if args.create_partitions:
                load.append(f"a CreateTopics of {args.create_partitions} partitions")
            measure("under " + ", ".join(load), bootstrap, proc.pid, args.seconds)
            if args.create_partitions:
                creator.join(300)
                outcome = creation[0] if creation else "no answer"
                print(f"  CreateTopics of {args.create_partitions} partitions: {outcome}")

            for flooder in flooders:
                flooder.close()
            for sock in parked:
                sock.close()
            measure("after those clients closed", bootstrap, proc.pid, min(args.seconds, 5.0))
        finally:
            proc.terminate()
            proc.wait(30)


if __name__ == "__main__":
    main()
