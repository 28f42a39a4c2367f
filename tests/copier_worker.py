"""An exactly-once copier process for the transaction tests (no tests here): consume-transform-produce as applications
write it with confluent-kafka (KIP-98 / KIP-447).

It reads the input topic as a member of a group at read_committed, writes each record to the same partition of the
output topic and commits the group's offsets in the same transaction (send_offsets_to_transaction), a few records
per transaction. A transaction that must be aborted is aborted and the consumer goes back to the group's committed
offsets, so nothing is copied twice; a fenced producer (a newer copier with the same transactional id took over)
exits. After each commit it writes the total it has committed to its progress file, so a test can time its kills.

Run as `python -m tests.copier_worker BOOTSTRAP INPUT OUTPUT GROUP TRANSACTIONAL_ID PROGRESS_FILE`.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

REPO = Path(__file__).resolve().parents[1]
PER_TRANSACTION = 20
FENCED_EXIT = 3
CALL_TIMEOUT_S = 60
ABORT_ATTEMPTS = 6


def start(bootstrap: str, source: str, sink: str, group: str, transactional_id: str,
          progress: Path) -> subprocess.Popen:
    """A copier process; the caller stops it (kill, or terminate and wait)."""
    return subprocess.Popen([sys.executable, "-m", "tests.copier_worker", bootstrap, source, sink, group,
                             transactional_id, str(progress)], cwd=REPO)


def copied(progress: Path) -> int:
    """What the copier reported committed so far (0 before its first commit)."""
    try:
        return int(progress.read_text() or 0)
    except (FileNotFoundError, ValueError):
        return 0


def _rewind(consumer: Consumer) -> None:
    """Back to the group's committed offsets: what an aborted transaction read is read again."""
    assignment = consumer.assignment()
    if not assignment:
        return
    for tp in consumer.committed(assignment, timeout=30):
        consumer.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else 0))


def main(bootstrap: str, source: str, sink: str, group: str, transactional_id: str, progress_file: str) -> int:
    progress = Path(progress_file)
    stopping = False

    def stop(_signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    # COPIER_DEBUG=1: librdkafka's transaction, protocol and group debug lines on stderr, to see a stall's cause.
    debug = {"debug": "eos,protocol,broker,cgrp"} if os.environ.get("COPIER_DEBUG") else {}
    consumer = Consumer({**debug, "bootstrap.servers": bootstrap, "group.id": group,
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
    # Kafka's default transaction timeout: a transaction that outlives it (a failover on a loaded machine) would be
    # aborted by the coordinator and this producer fenced, which ends the copier.
    producer = Producer({**debug, "bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                         "transaction.timeout.ms": 60000, "linger.ms": 5})
    producer.init_transactions(60)
    consumer.subscribe([source])
    total = copied(progress)
    while not stopping:
        messages = [m for m in consumer.consume(PER_TRANSACTION, timeout=0.2) if m.error() is None]
        if not messages:
            continue
        try:
            producer.begin_transaction()
            for m in messages:
                producer.produce(sink, m.value(), key=m.key(), partition=m.partition())
            producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                                 consumer.consumer_group_metadata(), CALL_TIMEOUT_S)
        except KafkaException as exc:
            if exc.args[0].fatal():
                return _fenced(transactional_id, exc)
            # Nothing is committed yet: abort, and read the batch again.
            if not _abort(producer):
                return _fenced(transactional_id, exc)
            _rewind(consumer)
            continue
        try:
            _commit(producer)
        except KafkaException as exc:
            if exc.args[0].fatal() or not _abort(producer):
                return _fenced(transactional_id, exc)
            _rewind(consumer)
            continue
        total += len(messages)
        progress.write_text(str(total))
        time.sleep(0.01)
    consumer.close()
    return 0


def _commit(producer: Producer) -> None:
    """Commit; a commit whose outcome is unknown (retriable) is resumed once, as librdkafka asks."""
    try:
        producer.commit_transaction(CALL_TIMEOUT_S)
    except KafkaException as exc:
        if not exc.args[0].retriable() or exc.args[0].txn_requires_abort():
            raise
        producer.commit_transaction(CALL_TIMEOUT_S)


def _abort(producer: Producer) -> bool:
    """Abort the open transaction; False if the producer was fenced meanwhile."""
    for _ in range(ABORT_ATTEMPTS):
        try:
            producer.abort_transaction(CALL_TIMEOUT_S)
            return True
        except KafkaException as exc:
            if exc.args[0].fatal():
                return False
    return False


def _fenced(transactional_id: str, exc: KafkaException) -> int:
    print(f"copier {transactional_id}: fatal {exc.args[0]}", file=sys.stderr)
    return FENCED_EXIT


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:7]))
