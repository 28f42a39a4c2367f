"""Log compaction figures: the cleaner's throughput in MB/s of dirty log cleaned on one core, and a producer's p99
latency on a broker whose cleaner is idle versus busy.

Run: python bench/compaction.py [--mb 64] [--record-size 1024] [--keys 10000] [--codec none|gzip|lz4|zstd|snappy]
  [--no-produce]
The throughput phase cleans a log of `--mb` MB of keyed records (every key written about mb*1024/record-size/keys
times, batches of 100 records) with the cleaner's core (storage/log_cleaner.py's clean_segments: the offset map,
then every segment rewritten), in this process on one thread. The produce phase runs a real `minikafka serve`
broker: a confluent-kafka producer writes one record at a time (acks=1) to a plain topic and its delivery latencies
are measured while the cleaner is idle, then while it cleans a compacted topic filled with `--mb` MB beforehand.
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from pathlib import Path

from kafka.record.memory_records import MemoryRecordsBuilder

import minikafka
from minikafka.storage.log import Log
from minikafka.storage.log_cleaner import SegmentSnapshot, clean_segments
from minikafka.storage.log_config import LogConfig

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
BATCH_RECORDS = 100
MB = 1024 * 1024


def keyed_batch(start: int, record_size: int, keys: int, codec: int) -> bytearray:
    builder = MemoryRecordsBuilder(magic=2, compression_type=codec, batch_size=1 << 30)
    now = int(time.time() * 1000)
    for i in range(start, start + BATCH_RECORDS):
        key = b"key-%08d" % (i % keys)
        builder.append(timestamp=now, key=key, value=(b"%012d" % i) * (record_size // 12), headers=[])
    builder.close()
    return bytearray(builder.buffer())


def cleaner_throughput(mb: int, record_size: int, keys: int, codec: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        config = LogConfig(cleanup_policy="compact", segment_bytes=64 * MB)
        log = Log.open(Path(tmp) / "table-0", "table", 0, config, now_ms=int(time.time() * 1000))
        written = 0
        start = 0
        while written < mb * MB:
            batch = keyed_batch(start, record_size, keys, codec)
            log.append_as_leader(batch, leader_epoch=0, now_ms=int(time.time() * 1000))
            written += len(batch)
            start += BATCH_RECORDS
        log.roll(int(time.time() * 1000))
        segments = log.segments
        dirty = sum(s.size for s in segments)
        began = time.perf_counter()
        cpu_began = time.process_time()
        groups, end = clean_segments(log.dir, [SegmentSnapshot.of(s) for s in segments[:-1]], 0,
                                     segments[-1].base_offset, {}, int(time.time() * 1000),
                                     86400000, 128 * MB, config.segment_bytes, config.segment_index_bytes)
        elapsed = time.perf_counter() - began
        cpu = time.process_time() - cpu_began
        out = sum(g.bytes_written for g in groups)
        retained = sum(g.messages_retained for g in groups)
        print(f"cleaner: {dirty / MB:.1f} MB of dirty log ({start} records, {keys} keys, {record_size} B, codec "
              f"{codec}) cleaned to {out / MB:.2f} MB ({retained} records) up to offset {end} in {elapsed:.2f} s: "
              f"{dirty / MB / elapsed:.1f} MB/s ({dirty / MB / cpu:.1f} MB per CPU second)")
        log.close()


def produce_latencies(broker: minikafka.Broker, topic: str, seconds: float) -> list[float]:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "acks": 1, "linger.ms": 0})
    latencies: list[float] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        sent = time.perf_counter()
        producer.produce(topic, key=b"k", value=b"v" * 100,
                         on_delivery=lambda err, _msg, t=sent: latencies.append(time.perf_counter() - t))
        producer.flush(10)
    return latencies


def p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[98] * 1000


def produce_while_cleaning(mb: int, record_size: int, keys: int) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    with tempfile.TemporaryDirectory() as tmp, minikafka.Broker(data_dir=tmp, config={
            "log.cleaner.enable": "false"}) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        for future in admin.create_topics([
                NewTopic("probe", 1, 1),
                NewTopic("table", 1, 1, config={"cleanup.policy": "compact", "segment.bytes": str(16 * MB)})
        ]).values():
            future.result(30)
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 20,
                             "batch.size": 1 << 20})
        value = b"x" * record_size
        for i in range(mb * MB // record_size):
            while True:
                try:
                    producer.produce("table", key=b"key-%08d" % (i % keys), value=value)
                    break
                except BufferError:
                    producer.poll(0.1)
        producer.flush(120)
        produce_latencies(broker, "probe", 2)  # warm up
        idle = produce_latencies(broker, "probe", 10)
        results: list[list[dict]] = []
        cleaning = threading.Thread(target=lambda: results.append(broker.clean_logs("table", timeout=600)))
        began = time.monotonic()
        cleaning.start()
        busy: list[float] = []
        while cleaning.is_alive():
            busy += produce_latencies(broker, "probe", 1)
        cleaning.join()
        took = time.monotonic() - began
        [cleaned] = results[0]
        print(f"produce p99 (acks=1, one 100 B record at a time): idle cleaner {p99(idle):.2f} ms "
              f"({len(idle)} records); while the cleaner cleaned {cleaned['bytes_read'] / MB:.0f} MB in {took:.1f} s "
              f"{p99(busy):.2f} ms ({len(busy)} records): {100 * (p99(busy) / p99(idle) - 1):+.0f}%")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=int, default=64)
    parser.add_argument("--record-size", type=int, default=1024)
    parser.add_argument("--keys", type=int, default=10000)
    parser.add_argument("--codec", choices=sorted(CODECS), default="none")
    parser.add_argument("--no-produce", action="store_true", help="only the cleaner's throughput")
    args = parser.parse_args()
    cleaner_throughput(args.mb, args.record_size, args.keys, CODECS[args.codec])
    if not args.no_produce:
        produce_while_cleaning(args.mb, args.record_size, args.keys)


if __name__ == "__main__":
    main()
