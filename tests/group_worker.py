"""Shared machinery of the consumer group tests (no tests here): real consumer processes and their accounting.

A worker is a separate process running one consumer of one client library in a group, so a test can stop it
cleanly (SIGTERM: the consumer closes and leaves the group) or kill it (SIGKILL: the coordinator only learns
from the session timeout). A worker counts a record as consumed only after committing it synchronously, and
writes it to its output file right after; when a commit fails (a rebalance took the partition, or the
generation moved on) it seeks back and reads the batch again if it still owns the partition. So across all
workers of a group every record is written exactly once, provided a worker is killed only while idle.

Library `confluent-kafka-consumer` is confluent-kafka with `group.protocol=consumer` (KIP-848: the broker assigns
and the session timeout and heartbeat interval are the broker's). Each line a worker writes carries the wall-clock
time it was committed, and a confluent-kafka worker logs each assignment change (`assigned P,..` / `revoked P,..`),
so a test can tell which partitions moved in a rebalance and whether the others kept being consumed.

Run as `python -m tests.group_worker LIBRARY BOOTSTRAP TOPIC GROUP OUTFILE [INSTANCE_ID]`.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from contextlib import suppress
from pathlib import Path

from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic

from tests.helpers import wait_until

REPO = Path(__file__).resolve().parents[1]
LIBRARIES = ["kafka-python", "confluent-kafka", "aiokafka"]
SESSION_TIMEOUT_MS = 6000
HEARTBEAT_INTERVAL_MS = 500
# A broker for group tests: no initial rebalance delay, so joins complete as soon as every member is in.
GROUP_BROKER = {"group_initial_rebalance_delay_ms": 0}


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        admin.close()


def produce(bootstrap: str, topic: str, prefix: str, count: int, partitions: int) -> set[str]:
    """`count` records with distinct values, spread round-robin over the partitions; returns the values."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    values = [f"{prefix}-{i}" for i in range(count)]
    try:
        futures = [producer.send(topic, value=v.encode(), partition=i % partitions) for i, v in enumerate(values)]
        for f in futures:
            f.get(timeout=20)
    finally:
        producer.close(timeout=10)
    return set(values)


def describe_group(bootstrap: str, group: str) -> dict:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
    try:
        return admin.describe_groups([group])[group]
    finally:
        admin.close()


def committed_offsets(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
    try:
        found = admin.list_group_offsets({group: None})[group]
        return {(tp.topic, tp.partition): om.offset for tp, om in found.items()}
    finally:
        admin.close()


class GroupWorker:
    """One consumer process in a group; `records()` are what it consumed and committed, in order."""

    def __init__(self, library: str, bootstrap: str, topic: str, group: str, out: Path,
                 instance_id: str | None = None) -> None:
        self.library = library
        self.out = out
        self.log = out.with_suffix(".log")
        out.touch()
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tests.group_worker", library, bootstrap, topic, group,
                 str(out), *([instance_id] if instance_id else [])], cwd=REPO, stdout=log, stderr=subprocess.STDOUT)

    def records(self) -> list[tuple[int, int, str]]:
        return [(partition, offset, value) for partition, offset, value, _ in self.timed_records()]

    def timed_records(self) -> list[tuple[int, int, str, float]]:
        """Each record with the wall-clock time its commit returned."""
        found = []
        for line in self.out.read_text().splitlines():
            partition, offset, value, at = line.split("\t")
            found.append((int(partition), int(offset), value, float(at)))
        return found

    def assignment_changes(self) -> list[tuple[str, set[int]]]:
        """("assigned" | "revoked", partitions) in the order the client reported them (confluent-kafka workers)."""
        changes = []
        for line in self.log_text().splitlines():
            kind, _, partitions = line.partition(" ")
            if kind in ("assigned", "revoked"):
                changes.append((kind, {int(p) for p in partitions.split(",") if p}))
        return changes

    def partitions(self) -> set[int]:
        return {p for p, _, _ in self.records()}

    def stop(self, timeout: float = 30) -> int:
        """SIGTERM: the consumer closes and leaves the group; returns the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


def consumed_values(workers: list[GroupWorker]) -> list[str]:
    return [value for w in workers for _, _, value in w.records()]


def wait_consumed(workers: list[GroupWorker], expected: set[str], timeout: float = 40) -> list[str]:
    """Wait (bounded) until the workers together consumed every expected value; returns all values consumed."""
    with suppress(TimeoutError):  # the assertion below names what is missing, with the workers' logs
        wait_until(lambda: expected <= set(consumed_values(workers)), timeout, interval=0.2)
    values = consumed_values(workers)
    missing = expected - set(values)
    assert not missing, (f"{len(missing)} records never consumed, e.g. {sorted(missing)[:5]}; worker logs:\n"
                         + "\n".join(w.log_text()[-2000:] for w in workers))
    return values


def assert_exactly_once(workers: list[GroupWorker], expected: set[str]) -> None:
    values = consumed_values(workers)
    duplicates = sorted({v for v in values if values.count(v) > 1})
    assert not duplicates, f"consumed more than once: {duplicates[:10]}"
    assert set(values) == expected


def wait_members(broker, group: str, count: int, workers: list[GroupWorker], timeout: float = 40) -> dict:
    """Wait until the group is Stable with `count` members; returns the DescribeGroups description."""
    found: dict = {}

    def stable() -> bool:
        nonlocal found
        found = describe_group(broker.bootstrap_servers, group)
        return found.get("group_state") == "Stable" and len(found.get("members", [])) == count

    with suppress(TimeoutError):  # the error below tells the group's last state, with the logs
        wait_until(stable, timeout, interval=0.2)
        return found
    coordinator_log = "\n".join(line for line in broker.log_path.read_text().splitlines() if "group" in line)
    raise AssertionError(f"group {group} did not become Stable with {count} members: {found}\n"
                         f"coordinator log:\n{coordinator_log[-6000:]}\nworker logs:\n"
                         + "\n".join(f"-- {w.log}:\n{w.log_text()[-4000:]}" for w in workers))


def stop_all(workers: list[GroupWorker]) -> None:
    for w in workers:
        w.kill()


# ---- the worker process -----------------------------------------------------------------------------------------

_stop = False


def _on_sigterm(_signum, _frame) -> None:
    global _stop
    _stop = True


def _write(out, batch: list[tuple[int, int, bytes]]) -> None:
    at = time.time()
    out.write("".join(f"{p}\t{o}\t{v.decode()}\t{at:.6f}\n" for p, o, v in batch))
    out.flush()
    os.fsync(out.fileno())


def run_kafka_python(bootstrap: str, topic: str, group: str, out, instance_id: str | None) -> None:
    from kafka import KafkaConsumer, OffsetAndMetadata
    from kafka.errors import CommitFailedError, KafkaError

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                             auto_offset_reset="earliest", session_timeout_ms=SESSION_TIMEOUT_MS,
                             heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS, client_id=f"kp-{os.getpid()}",
                             group_instance_id=instance_id)
    # kafka-python 3.0.12 loses a member when a rebalance it started only because of a metadata change ends
    # while poll() is not waiting for it: the leader's join task (on the client's IO thread) runs the assignment,
    # which makes need_rejoin() False before the finished join is collected, so no later poll() collects it; the
    # heartbeat stays disabled, the coordinator expires the member after its session timeout, and the client,
    # which thinks it is still rebalancing, never joins again. Such a rebalance follows a first assignment made
    # before the coordinator's metadata snapshot has the topic: that snapshot changes only on a metadata update
    # received after subscribe(), and with group.initial.rebalance.delay.ms=0 the first join completes before
    # that update (retry_backoff_ms after the last one) arrives. topics() waits for a metadata update after
    # subscribe(), so the first assignment already sees the topic and no such rebalance follows.
    consumer.subscribe([topic])
    consumer.topics()
    while not _stop:
        polled = consumer.poll(timeout_ms=200)
        if not polled:
            continue
        batch = [(tp.partition, r.offset, r.value) for tp, records in polled.items() for r in records]
        try:
            consumer.commit({tp: OffsetAndMetadata(records[-1].offset + 1, "", -1) for tp, records in polled.items()})
        except (CommitFailedError, KafkaError) as exc:
            print("commit failed:", exc, flush=True)
            owned = consumer.assignment()
            for tp, records in polled.items():
                if tp in owned:
                    consumer.seek(tp, records[0].offset)
            continue
        _write(out, batch)
    consumer.close(autocommit=False)


def run_confluent(bootstrap: str, topic: str, group: str, out, instance_id: str | None,
                  group_protocol: str = "classic") -> None:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    config = {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
              "auto.offset.reset": "earliest", "client.id": f"ck-{os.getpid()}", "group.protocol": group_protocol,
              "debug": "cgrp"}  # librdkafka's group state changes go to the worker's log, for diagnosis
    if group_protocol == "classic":  # the consumer protocol takes both from the broker
        config |= {"session.timeout.ms": SESSION_TIMEOUT_MS, "heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS}
    if instance_id:
        config["group.instance.id"] = instance_id
    consumer = Consumer(config)

    def changed(kind: str, partitions: list) -> None:
        print(kind, ",".join(str(tp.partition) for tp in sorted(partitions, key=lambda tp: tp.partition)),
              flush=True)

    consumer.subscribe([topic], on_assign=lambda _c, ps: changed("assigned", ps),
                       on_revoke=lambda _c, ps: changed("revoked", ps), on_lost=lambda _c, ps: changed("revoked", ps))
    while not _stop:
        messages = [m for m in consumer.consume(num_messages=500, timeout=0.2) if m.error() is None]
        if not messages:
            continue
        first: dict[int, int] = {}
        last: dict[int, int] = {}
        for m in messages:
            first.setdefault(m.partition(), m.offset())
            last[m.partition()] = m.offset()
        try:
            consumer.commit(offsets=[TopicPartition(topic, p, o + 1) for p, o in last.items()], asynchronous=False)
        except KafkaException as exc:
            print("commit failed:", exc, flush=True)
            owned = {tp.partition for tp in consumer.assignment()}
            for p, o in first.items():
                if p in owned:
                    consumer.seek(TopicPartition(topic, p, o))
            continue
        _write(out, [(m.partition(), m.offset(), m.value()) for m in messages])
    consumer.close()


def run_aiokafka(bootstrap: str, topic: str, group: str, out, instance_id: str | None) -> None:
    import asyncio

    from aiokafka import AIOKafkaConsumer
    from aiokafka.errors import CommitFailedError, KafkaError

    async def main() -> None:
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                                    auto_offset_reset="earliest", session_timeout_ms=SESSION_TIMEOUT_MS,
                                    heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS, client_id=f"aio-{os.getpid()}",
                                    group_instance_id=instance_id)
        await consumer.start()
        try:
            while not _stop:
                polled = await consumer.getmany(timeout_ms=200)
                if not polled:
                    continue
                batch = [(tp.partition, r.offset, r.value) for tp, records in polled.items() for r in records]
                try:
                    await consumer.commit({tp: records[-1].offset + 1 for tp, records in polled.items()})
                except (CommitFailedError, KafkaError) as exc:
                    print("commit failed:", exc, flush=True)
                    owned = consumer.assignment()
                    for tp, records in polled.items():
                        if tp in owned:
                            consumer.seek(tp, records[0].offset)
                    continue
                _write(out, batch)
        finally:
            await consumer.stop()

    asyncio.run(main())


def run_confluent_consumer_protocol(bootstrap: str, topic: str, group: str, out, instance_id: str | None) -> None:
    run_confluent(bootstrap, topic, group, out, instance_id, group_protocol="consumer")


RUNNERS = {"kafka-python": run_kafka_python, "confluent-kafka": run_confluent, "aiokafka": run_aiokafka,
           "confluent-kafka-consumer": run_confluent_consumer_protocol}


if __name__ == "__main__":
    library, bootstrap_servers, topic_name, group_id, out_path = sys.argv[1:6]
    instance = sys.argv[6] if len(sys.argv) > 6 else None
    signal.signal(signal.SIGTERM, _on_sigterm)
    with open(out_path, "a") as out_file:
        RUNNERS[library](bootstrap_servers, topic_name, group_id, out_file, instance)
    print("closed", flush=True)
