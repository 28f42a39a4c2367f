"""Produce and consume throughput over SASL_SSL against PLAINTEXT, on one broker (`minikafka.Broker`).

Run: python bench/security.py [--records 300000] [--record-bytes 1024] [--rounds 2] [--mechanism SCRAM-SHA-512]
       [--replication-factor 3]

confluent-kafka (librdkafka) produces the records to a 3-partition topic (acks=all, linger.ms=5,
batch.size=262144) and a consumer reads them all back, once on a PLAINTEXT broker and once on a SASL_SSL one
(TLS, SASL/PLAIN or SCRAM), in alternating rounds; figures are MB/s of record values and the ratio of SASL_SSL to
PLAINTEXT. With --replication-factor 3, on two three-broker clusters instead (`minikafka.Cluster`), whose
brokers replicate over the same protocol as their clients use. Not a test.
"""
from __future__ import annotations

import argparse
import os
import time
import uuid

from broker_throughput import cpu_s
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

import minikafka

PARTITIONS = 3


def produce(config: dict, topic: str, records: int, payload: bytes) -> float:
    producer = Producer({**config, "acks": "all", "linger.ms": 5, "batch.size": 262144,
                         "queue.buffering.max.kbytes": 1 << 20})
    started = time.monotonic()
    for i in range(records):
        while True:
            try:
                producer.produce(topic, payload, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.01)
    if producer.flush(120) != 0:
        raise RuntimeError("records left undelivered")
    return time.monotonic() - started


def consume(config: dict, topic: str, records: int) -> float:
    # librdkafka stops fetching for fetch.queue.backoff.ms (1 s) whenever its local queue holds
    # queued.max.messages.kbytes: a fetch faster than the loop below would be timed by that pause instead.
    consumer = Consumer({**config, "group.id": f"bench-{uuid.uuid4().hex[:6]}", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "fetch.max.bytes": 52428800, "fetch.queue.backoff.ms": 10})
    consumer.subscribe([topic])
    got = 0
    started = None
    deadline = time.monotonic() + 300
    try:
        while got < records and time.monotonic() < deadline:
            batch = consumer.consume(10000, 1.0)
            if batch and started is None:
                started = time.monotonic()
            got += sum(1 for m in batch if m.error() is None)
    finally:
        consumer.close()
    if got < records or started is None:
        raise RuntimeError(f"consumed {got} of {records}")
    return time.monotonic() - started


def run(target: minikafka.Broker | minikafka.Cluster, mechanism: str, records: int, payload: bytes,
        replication_factor: int) -> tuple[float, float, float, float]:
    """MB/s produced and consumed, and the brokers' CPU ms per MB for each."""
    config = target.client_config(user="bench", mechanism=mechanism)
    topic = f"bench-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(config)
    admin.create_topics([NewTopic(topic, PARTITIONS, replication_factor)])[topic].result(30)
    megabytes = records * len(payload) / 1e6
    brokers = target.brokers if isinstance(target, minikafka.Cluster) else [target]

    def brokers_cpu_s() -> float:
        return sum(cpu_s(b.pid) for b in brokers if b.pid is not None)

    before = brokers_cpu_s()
    produced = megabytes / produce(config, topic, records, payload)
    middle = brokers_cpu_s()
    consumed = megabytes / consume(config, topic, records)
    after = brokers_cpu_s()
    return produced, consumed, 1000 * (middle - before) / megabytes, 1000 * (after - middle) / megabytes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--record-bytes", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--mechanism", default="PLAIN", choices=["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
    parser.add_argument("--replication-factor", type=int, default=1, choices=[1, 3])
    args = parser.parse_args()
    payload = os.urandom(args.record_bytes)
    figures: dict[str, list[tuple[float, float, float, float]]] = {"PLAINTEXT": [], "SASL_SSL": []}
    users = {"bench": "bench-secret"}
    if args.replication_factor == 3:
        plaintext, secured = minikafka.Cluster(3), minikafka.Cluster(3, security="SASL_SSL", users=users)
    else:
        plaintext, secured = minikafka.Broker(), minikafka.Broker(security="SASL_SSL", users=users)
    with plaintext, secured:
        targets = {"PLAINTEXT": plaintext, "SASL_SSL": secured}
        for round_number in range(1, args.rounds + 1):
            for protocol, target in targets.items():
                produced, consumed, produce_cpu, consume_cpu = run(target, args.mechanism, args.records, payload,
                                                                   args.replication_factor)
                figures[protocol].append((produced, consumed, produce_cpu, consume_cpu))
                print(f"round {round_number} {protocol}: produce {produced:.1f} MB/s (brokers' CPU "
                      f"{produce_cpu:.2f} ms/MB), consume {consumed:.1f} MB/s (brokers' CPU {consume_cpu:.2f} ms/MB)",
                      flush=True)
    best = {protocol: (max(r[0] for r in runs), max(r[1] for r in runs)) for protocol, runs in figures.items()}
    print(f"SASL_SSL ({args.mechanism}) / PLAINTEXT: produce {best['SASL_SSL'][0] / best['PLAINTEXT'][0]:.2f}, "
          f"consume {best['SASL_SSL'][1] / best['PLAINTEXT'][1]:.2f} (best of {args.rounds} rounds each)")


if __name__ == "__main__":
    main()
