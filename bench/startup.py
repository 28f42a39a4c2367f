"""Start-up benchmark: from `import minikafka` to a produced-and-consumed record on a fresh broker.

Each run is a fresh Python process (so imports are cold for that process, warm on disk), in two modes:
in-process (the broker on a thread) and subprocess (`python -m minikafka serve`). The client library
(kafka-python) is imported before the clock starts, as a test suite would have it already; its import time is
reported separately. Targets: under 0.3 s in-process, under 0.8 s subprocess.

    python bench/startup.py [--runs 5]
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

CHILD = r'''
import json, sys, time
t_client = time.perf_counter()
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
t0 = time.perf_counter()
client_import = t0 - t_client
import minikafka
t_import = time.perf_counter()
in_process = sys.argv[1] == "in-process"
if in_process:
    import minikafka.broker.broker_server  # what start() would import; timed apart to show where time goes
t_broker_import = time.perf_counter()
broker = minikafka.Broker(in_process=in_process)
broker.start()
t_ready = time.perf_counter()
producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, linger_ms=0)
producer.send("bench", b"hello").get(timeout=30)
t_produced = time.perf_counter()
consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=None, auto_offset_reset="earliest")
consumer.assign([TopicPartition("bench", 0)])
value = None
while value is None and time.perf_counter() - t0 < 30:
    for records in consumer.poll(timeout_ms=100).values():
        value = records[0].value
t_consumed = time.perf_counter()
assert value == b"hello", value
producer.close(); consumer.close(); broker.close()
print(json.dumps({"client_import": client_import, "import": t_import - t0,
                  "broker_import": t_broker_import - t_import, "start": t_ready - t_broker_import,
                  "produce": t_produced - t_ready, "consume": t_consumed - t_produced, "total": t_consumed - t0}))
'''

TARGETS = {"in-process": 0.3, "subprocess": 0.8}
# import: `import minikafka`; broker_import: the broker's modules (in-process; a subprocess imports its own);
# start: until the broker accepts connections; produce/consume: kafka-python's first record each way.
PHASES = ("import", "broker_import", "start", "produce", "consume", "total")


def run_once(mode: str) -> dict[str, float]:
    proc = subprocess.run([sys.executable, "-c", CHILD, mode], capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise RuntimeError(f"{mode} run failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    print(f"{'mode':<11} {'phase':<14} {'median':>8} {'min':>8} {'max':>8}   (seconds, {args.runs} runs)")
    for mode, target in TARGETS.items():
        runs = [run_once(mode) for _ in range(args.runs)]
        for phase in PHASES:
            values = [r[phase] for r in runs]
            print(f"{mode:<11} {phase:<14} {statistics.median(values):8.3f} {min(values):8.3f} {max(values):8.3f}")
        total = statistics.median(r["total"] for r in runs)
        verdict = "meets" if total < target else "misses"
        print(f"{mode:<11} total median {total:.3f} s {verdict} the {target} s target "
              f"(kafka-python import, not counted: {statistics.median(r['client_import'] for r in runs):.3f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
