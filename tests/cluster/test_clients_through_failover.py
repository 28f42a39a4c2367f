"""kafka-python, confluent-kafka and aiokafka, each as an idempotent acks=all producer and a consumer group, through
kill -9 of a broker that leads a partition of their topic and the group's coordinator partition.

A consumer reads while the producer writes; the broker is killed mid-stream; a second consumer joins the group
while leadership and the coordinator move, so partitions change hands; the killed broker comes back. Afterwards:
- the producer reported every record acknowledged, and no error reached the application (retriable errors are
  the client's own business, and are counted);
- the consumers together read every acknowledged record, each at its acknowledged offset;
- a record was read twice only as Kafka's at-least-once allows it: by a later assignment of its partition, which
  starts again from the group's committed offset, so within one assignment of one consumer the re-read records come
  first, before any record not read before, and no offset is read twice.
Each library runs against a KRaft cluster, and confluent-kafka and aiokafka against a ZooKeeper-mode one too. (There a
killed broker stays in the metadata until its ZooKeeper session expires, as in Kafka's ZooKeeper mode, and
kafka-python's `consumer.topics()`, which this test's kafka-python consumer needs before it joins, raises a
connection error when it asks that broker.)
"""
from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import pytest

import minikafka
from tests.cluster.cluster_modes import REQUIRES_ZOOKEEPER
from tests.cluster.replication_checks import Acknowledgements
from tests.helpers import wait_until

PARTITIONS = 3
TOTAL = 3000
RATE = 1000  # records per second each producer offers
KILL_AFTER = TOTAL // 4  # acknowledged records before the kill: the producer is mid-stream
SESSION_TIMEOUT_MS = 6000  # the broker's group.min.session.timeout.ms
HEARTBEAT_INTERVAL_MS = 500
AUTO_COMMIT_INTERVAL_MS = 500
POLL_S = 0.1
WAIT_S = 60.0
OFFSETS_TOPIC = "__consumer_offsets"

Stop = threading.Event


@dataclass(frozen=True)
class Delivery:
    """A record a consumer handed to the application, in the order of all deliveries of a run."""

    sequence: int
    consumer: str
    assignment: int  # how many times this consumer had been assigned the partition
    partition: int
    offset: int
    value: bytes


class Ledger:
    """What the clients of one run reported, from their threads."""

    def __init__(self) -> None:
        self.acks = Acknowledgements()
        self.deliveries: list[Delivery] = []
        self.failures: list[str] = []  # errors that reached the application
        self.retried: Counter[str] = Counter()  # errors a client reported and recovers from itself
        self._assignments: dict[tuple[str, int], int] = {}
        self._owned: set[tuple[str, int]] = set()
        self._lock = threading.Lock()

    def assigned(self, consumer: str, partitions: Iterable[int]) -> None:
        with self._lock:
            self._owned = {owned for owned in self._owned if owned[0] != consumer}
            for partition in partitions:
                key = (consumer, partition)
                self._assignments[key] = self._assignments.get(key, 0) + 1
                self._owned.add(key)

    def delivered(self, consumer: str, partition: int, offset: int, value: bytes) -> None:
        with self._lock:
            if (consumer, partition) not in self._owned:
                self.failures.append(f"{consumer} got offset {offset} of partition {partition}, not assigned to it")
            self.deliveries.append(Delivery(len(self.deliveries), consumer,
                                            self._assignments.get((consumer, partition), 0), partition, offset, value))

    def failed(self, what: str) -> None:
        with self._lock:
            self.failures.append(what)

    def retry(self, what: str) -> None:
        with self._lock:
            self.retried[what] += 1

    def consumed_values(self) -> set[bytes]:
        with self._lock:
            return {d.value for d in self.deliveries}


def paced(stop: Stop) -> Iterator[int]:
    """0..TOTAL-1 at RATE per second, until stopped."""
    start = time.monotonic()
    for i in range(TOTAL):
        delay = start + i / RATE - time.monotonic()
        if stop.wait(delay) if delay > 0 else stop.is_set():
            return
        yield i


def value_of(library: str, i: int) -> bytes:
    return b"%s-%06d" % (library.encode(), i)


# ---- kafka-python -------------------------------------------------------------------------------------------------

def produce_kafka_python(bootstrap: str, topic: str, ledger: Ledger, stop: Stop) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True, linger_ms=5,
                             retry_backoff_ms=50, request_timeout_ms=10000, delivery_timeout_ms=int(WAIT_S * 1000),
                             client_id="failover-producer")
    try:
        for i in paced(stop):
            value = value_of("kafka-python", i)
            future = producer.send(topic, value, partition=i % PARTITIONS)
            future.add_callback(lambda md, v=value: ledger.acks.acknowledged(md.partition, md.offset, v))
            future.add_errback(lambda exc, v=value: ledger.failed(f"produce {v!r}: {exc!r}"))
        producer.flush(timeout=WAIT_S)
    finally:
        producer.close(timeout=10)


def consume_kafka_python(bootstrap: str, topic: str, group: str, name: str, ledger: Ledger, stop: Stop) -> None:
    from kafka import ConsumerRebalanceListener, KafkaConsumer
    from kafka.errors import KafkaConnectionError

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked) -> None:
            pass

        def on_partitions_assigned(self, assigned) -> None:
            ledger.assigned(name, [tp.partition for tp in assigned])

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, client_id=name,
                             auto_offset_reset="earliest", enable_auto_commit=True,
                             auto_commit_interval_ms=AUTO_COMMIT_INTERVAL_MS, session_timeout_ms=SESSION_TIMEOUT_MS,
                             heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS, max_poll_records=200)
    try:
        consumer.subscribe([topic], listener=Listener())
        # kafka-python's join race needs the topic in its metadata first (tests/group_worker.py); its topics() raises
        # when the broker it picks is the killed one (kafka-python 3.0), where poll() would go on to another.
        deadline = time.monotonic() + WAIT_S
        while True:
            try:
                consumer.topics()
                break
            except KafkaConnectionError:
                if time.monotonic() > deadline or stop.is_set():
                    raise
                time.sleep(0.2)
        while not stop.is_set():
            for tp, records in consumer.poll(timeout_ms=int(POLL_S * 1000)).items():
                for record in records:
                    ledger.delivered(name, tp.partition, record.offset, record.value)
    finally:
        consumer.close()


# ---- confluent-kafka ------------------------------------------------------------------------------------------------

def confluent_error_callback(ledger: Ledger, client: str) -> Callable[[object], None]:
    """librdkafka reports errors it recovers from itself (a broker down, a request timed out) to error_cb; only a
    fatal one ends the client."""
    def on_error(err) -> None:
        if err.fatal():
            ledger.failed(f"{client}: fatal {err}")
        else:
            ledger.retry(f"{client}: {err.name()}")
    return on_error


def produce_confluent(bootstrap: str, topic: str, ledger: Ledger, stop: Stop) -> None:
    from confluent_kafka import Producer

    def delivered(err, msg) -> None:
        if err is None:
            ledger.acks.acknowledged(msg.partition(), msg.offset(), msg.value())
        else:
            ledger.failed(f"produce {msg.value()!r}: {err}")

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                         "linger.ms": 5, "message.timeout.ms": int(WAIT_S * 1000), "retry.backoff.ms": 50,
                         "client.id": "failover-producer", "error_cb": confluent_error_callback(ledger, "producer")})
    try:
        for i in paced(stop):
            producer.produce(topic, value=value_of("confluent-kafka", i), partition=i % PARTITIONS,
                             on_delivery=delivered)
            producer.poll(0)
        remaining = producer.flush(WAIT_S)
        if remaining:
            ledger.failed(f"{remaining} records not delivered within {WAIT_S} s")
    finally:
        del producer


def consume_confluent(bootstrap: str, topic: str, group: str, name: str, ledger: Ledger, stop: Stop) -> None:
    from confluent_kafka import Consumer, KafkaError

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
                         "auto.offset.reset": "earliest", "enable.auto.commit": True,
                         "auto.commit.interval.ms": AUTO_COMMIT_INTERVAL_MS,
                         "session.timeout.ms": SESSION_TIMEOUT_MS, "heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS,
                         "error_cb": confluent_error_callback(ledger, name)})
    try:
        consumer.subscribe([topic], on_assign=lambda _c, parts: ledger.assigned(name, [p.partition for p in parts]))
        while not stop.is_set():
            message = consumer.poll(POLL_S)
            if message is None:
                continue
            err = message.error()
            partition, offset, value = message.partition(), message.offset(), message.value()
            if err is None and partition is not None and offset is not None and value is not None:
                ledger.delivered(name, partition, offset, value)
            elif err is None:
                ledger.failed(f"{name}: a message without partition, offset or value: {message}")
            elif err.retriable() or err.code() in (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN):
                ledger.retry(f"{name}: {err.name()}")
            else:
                ledger.failed(f"{name}: {err}")
    finally:
        consumer.close()


# ---- aiokafka -------------------------------------------------------------------------------------------------------

def produce_aiokafka(bootstrap: str, topic: str, ledger: Ledger, stop: Stop) -> None:
    from aiokafka import AIOKafkaProducer

    def settled(future: asyncio.Future, value: bytes) -> None:
        if future.exception() is not None:
            ledger.failed(f"produce {value!r}: {future.exception()!r}")
        else:
            metadata = future.result()
            ledger.acks.acknowledged(metadata.partition, metadata.offset, value)

    async def main() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True, linger_ms=5,
                                    retry_backoff_ms=50, request_timeout_ms=int(WAIT_S * 1000),
                                    client_id="failover-producer")
        await producer.start()
        try:
            start = time.monotonic()
            sent = []
            for i in range(TOTAL):
                delay = start + i / RATE - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)  # the producer's pace
                if stop.is_set():
                    break
                value = value_of("aiokafka", i)
                future = await producer.send(topic, value, partition=i % PARTITIONS)
                future.add_done_callback(lambda f, v=value: settled(f, v))
                sent.append(future)
            await asyncio.wait(sent, timeout=WAIT_S)
        finally:
            await producer.stop()

    asyncio.run(main())


def consume_aiokafka(bootstrap: str, topic: str, group: str, name: str, ledger: Ledger, stop: Stop) -> None:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.abc import ConsumerRebalanceListener

    class Listener(ConsumerRebalanceListener):
        async def on_partitions_revoked(self, revoked) -> None:
            pass

        async def on_partitions_assigned(self, assigned) -> None:
            ledger.assigned(name, [tp.partition for tp in assigned])

    async def main() -> None:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, client_id=name,
                                    auto_offset_reset="earliest", enable_auto_commit=True,
                                    auto_commit_interval_ms=AUTO_COMMIT_INTERVAL_MS,
                                    session_timeout_ms=SESSION_TIMEOUT_MS,
                                    heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS)
        await consumer.start()
        try:
            consumer.subscribe([topic], listener=Listener())
            while not stop.is_set():
                polled = await consumer.getmany(timeout_ms=int(POLL_S * 1000))
                for tp, records in polled.items():
                    for record in records:
                        ledger.delivered(name, tp.partition, record.offset, record.value)
        finally:
            await consumer.stop()

    asyncio.run(main())


@dataclass(frozen=True)
class Library:
    name: str
    produce: Callable[[str, str, Ledger, Stop], None]
    consume: Callable[[str, str, str, str, Ledger, Stop], None]


LIBRARIES = [
    Library("kafka-python", produce_kafka_python, consume_kafka_python),
    Library("confluent-kafka", produce_confluent, consume_confluent),
    Library("aiokafka", produce_aiokafka, consume_aiokafka),
]


# ---- the run --------------------------------------------------------------------------------------------------------

class Worker(threading.Thread):
    """A client's loop on its own thread, told to stop by an event; what it raised is raised by finish()."""

    def __init__(self, name: str, body: Callable[[Stop], None]) -> None:
        super().__init__(name=name, daemon=True)
        self._body = body
        self._stop_requested = Stop()
        self.failure: BaseException | None = None

    def run(self) -> None:
        try:
            self._body(self._stop_requested)
        except BaseException as exc:  # noqa: BLE001 - raised by finish()
            self.failure = exc

    def finish(self, timeout: float = WAIT_S) -> None:
        self._stop_requested.set()
        self.join(timeout)
        assert not self.is_alive(), f"{self.name} did not stop within {timeout} s"
        if self.failure is not None:
            raise AssertionError(f"{self.name} failed: {self.failure!r}") from self.failure


def assert_at_least_once(ledger: Ledger) -> int:
    """Every acknowledged record consumed at its offset, re-reads only at the start of a new assignment; returns
    how many deliveries were re-reads."""
    acknowledged = {(p, offset): value for p in range(PARTITIONS) for offset, value in ledger.acks.of(p).items()}
    assert len(acknowledged) == TOTAL, f"{len(acknowledged)} of {TOTAL} records acknowledged"
    wrong = [d for d in ledger.deliveries if acknowledged.get((d.partition, d.offset)) != d.value]
    assert not wrong, f"consumed records that are not the acknowledged ones at their offsets: {wrong[:5]}"
    missing = set(acknowledged.values()) - ledger.consumed_values()
    assert not missing, f"{len(missing)} acknowledged records never consumed, e.g. {sorted(missing)[:5]}"
    read: set[tuple[int, int]] = set()
    last_offset: dict[tuple[str, int, int], int] = {}
    reading_new: set[tuple[str, int, int]] = set()
    rereads = 0
    for d in ledger.deliveries:
        assignment = (d.consumer, d.assignment, d.partition)
        assert d.offset > last_offset.get(assignment, -1), f"{d} read again within one assignment"
        last_offset[assignment] = d.offset
        if (d.partition, d.offset) in read:
            assert assignment not in reading_new, f"{d} re-read after records not read before, in one assignment"
            rereads += 1
        else:
            read.add((d.partition, d.offset))
            reading_new.add(assignment)
    return rereads


CASES = [
    *(pytest.param(False, library, id=f"kraft-{library.name}") for library in LIBRARIES),
    *(pytest.param(True, library, id=f"zookeeper-{library.name}", marks=REQUIRES_ZOOKEEPER)
      for library in LIBRARIES if library.name != "kafka-python"),
]


@pytest.fixture
def cluster(tmp_path, zookeeper):
    with minikafka.Cluster(brokers=3, data_dir=tmp_path / "cluster", zookeeper=zookeeper) as running:
        yield running


@pytest.mark.parametrize(("zookeeper", "library"), CASES)
def test_producer_and_group_consumers_run_through_a_leader_kill(cluster, library):
    topic, group = f"failover-{library.name}", f"group-{library.name}"
    cluster.state.create_topic(topic, partitions=PARTITIONS, replication_factor=3, config={"min.insync.replicas": 2})
    for partition in range(PARTITIONS):
        cluster.wait_for_isr(topic, partition, 3, timeout=WAIT_S)
    bootstrap = cluster.bootstrap_servers
    ledger = Ledger()

    def consumer(name: str) -> Worker:
        return Worker(f"{library.name} {name}",
                      lambda stop: library.consume(bootstrap, topic, group, name, ledger, stop))

    workers = [consumer("consumer-1"), Worker(f"{library.name} producer",
                                              lambda stop: library.produce(bootstrap, topic, ledger, stop))]
    for worker in workers:
        worker.start()
    try:
        wait_until(lambda: ledger.acks.count() >= KILL_AFTER and ledger.deliveries, WAIT_S,
                   message="the producer and the first consumer under way")
        victim = cluster.leader_of(OFFSETS_TOPIC, 0)
        led = [p for p in range(PARTITIONS) if cluster.state.partition(topic, p).leader == victim.node_id]
        assert led, f"broker {victim.node_id}, the group's coordinator, leads no partition of {topic}"
        killed_at = time.monotonic()
        victim.kill()
        workers.append(consumer("consumer-2"))  # joins while the coordinator moves
        workers[-1].start()
        for partition in led:
            cluster.wait_for_leader(topic, partition, not_on=victim, timeout=WAIT_S)
        cluster.wait_for_leader(OFFSETS_TOPIC, 0, not_on=victim, timeout=WAIT_S)
        elected_s = time.monotonic() - killed_at
        wait_until(lambda: ledger.acks.count() == TOTAL or ledger.failures, WAIT_S,
                   message="every record acknowledged")
        victim.start()
        wait_until(lambda: len(ledger.consumed_values()) >= TOTAL or ledger.failures, WAIT_S,
                   message="every record consumed")
    finally:
        for worker in workers:
            worker.finish()

    assert not ledger.failures and not ledger.acks.errors, (
        f"errors reached the application: {ledger.failures[:10]} {ledger.acks.errors[:10]}")
    rereads = assert_at_least_once(ledger)
    assignments = Counter(d.consumer for d in ledger.deliveries)
    print(f"{library.name}: broker {victim.node_id} (coordinator, leader of partitions {led}) killed; new leaders "
          f"in {elected_s:.3f} s; {TOTAL} records acknowledged, {len(ledger.deliveries)} deliveries "
          f"({dict(assignments)}), {rereads} re-read after a partition moved; retriable errors: "
          f"{dict(ledger.retried)}")
