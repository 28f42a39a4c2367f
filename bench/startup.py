"""Start-up benchmark: from `import minikafka` to a produced-and-consumed record on a fresh broker.

Each run is a fresh Python process (so imports are cold for that process, warm on disk, with bytecode caching on
as in any installed package; one untimed run first writes the cache), in two modes:
in-process (the broker on a thread) and subprocess (`python -m minikafka serve`), with two clients:
confluent-kafka (librdkafka) and kafka-python. The client library is imported before the clock starts, as a
test suite would have it already; its import time is reported separately. Targets: under 0.3 s in-process,
under 0.8 s subprocess.

    python bench/startup.py [--runs 5] [--client confluent-kafka|kafka-python]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

# Each client's part of a run: `roundtrip(bootstrap)` produces b"hello" to topic "bench" and consumes it back.
CLIENTS = {
    "confluent-kafka": r'''
from confluent_kafka import Consumer, Producer, TopicPartition
def produce(bootstrap):
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    producer.produce("bench", b"hello")
    assert producer.flush(30) == 0
def consume(bootstrap):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "fetch.wait.max.ms": 10})
    consumer.assign([TopicPartition("bench", 0, 0)])
    deadline = time.perf_counter() + 30
    while time.perf_counter() < deadline:
        message = consumer.poll(1.0)  # returns as soon as the record arrives
        if message is not None and message.error() is None:
            consumer.close()
            return message.value()
''',
    "kafka-python": r'''
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
def produce(bootstrap):
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=0)
    producer.send("bench", b"hello").get(timeout=30)
    producer.close()
def consume(bootstrap):
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, auto_offset_reset="earliest",
                             fetch_max_wait_ms=10)
    consumer.assign([TopicPartition("bench", 0)])
    deadline = time.perf_counter() + 30
    while time.perf_counter() < deadline:
        for records in consumer.poll(timeout_ms=20).values():
            consumer.close()
            return records[0].value
''',
}

RUN = r'''
t0 = time.perf_counter()
import minikafka
t_import = time.perf_counter()
in_process = sys.argv[1] == "in-process"
if in_process:
    import minikafka.broker.server.broker_server  # what start() would import; timed apart to show where time goes
t_broker_import = time.perf_counter()
broker = minikafka.Broker(in_process=in_process)
broker.start()
t_ready = time.perf_counter()
produce(broker.bootstrap_servers)
t_produced = time.perf_counter()
value = consume(broker.bootstrap_servers)
t_consumed = time.perf_counter()
assert value == b"hello", value
broker.close()
print(json.dumps({"client_import": client_import, "import": t_import - t0,
                  "broker_import": t_broker_import - t_import, "start": t_ready - t_broker_import,
                  "produce": t_produced - t_ready, "consume": t_consumed - t_produced, "total": t_consumed - t0}))
'''

TARGETS = {"in-process": 0.3, "subprocess": 0.8}
# Measure what an installed package gets: its modules' bytecode cached, even where the shell disables it.
CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
# import: `import minikafka`; broker_import: the broker's modules (in-process; a subprocess imports its own);
# start: until the broker accepts connections; produce/consume: the client's first record each way.
PHASES = ("import", "broker_import", "start", "produce", "consume", "total")


def run_once(client: str, mode: str) -> dict[str, float]:
    child = ("import json, sys, time\nt_client = time.perf_counter()\n" + CLIENTS[client]
             + "client_import = time.perf_counter() - t_client\n" + RUN)
    proc = subprocess.run([sys.executable, "-c", child, mode], capture_output=True, text=True, timeout=120,
                          env=CHILD_ENV)
    if proc.returncode != 0:
        raise RuntimeError(f"{client} {mode} run failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--client", choices=sorted(CLIENTS), action="append",
                        help="client(s) to measure with (default: both)")
    args = parser.parse_args()
    print(f"{'client':<16} {'mode':<11} {'phase':<14} {'median':>8} {'min':>8} {'max':>8}   "
          f"(seconds, {args.runs} runs)")
    for client in args.client or list(CLIENTS):
        for mode, target in TARGETS.items():
            run_once(client, mode)  # warm-up: the bytecode cache and the disk cache
            runs = [run_once(client, mode) for _ in range(args.runs)]
            for phase in PHASES:
                values = [r[phase] for r in runs]
                print(f"{client:<16} {mode:<11} {phase:<14} {statistics.median(values):8.3f} "
                      f"{min(values):8.3f} {max(values):8.3f}")
            total = statistics.median(r["total"] for r in runs)
            verdict = "meets" if total < target else "misses"
            print(f"{client:<16} {mode:<11} total median {total:.3f} s {verdict} the {target} s target "
                  f"(client import, not counted: {statistics.median(r['client_import'] for r in runs):.3f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
