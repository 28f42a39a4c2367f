"""Helpers the test modules share, so no test module imports another.

- waiting: one bounded poll for an observable state, instead of a sleep or a hand-written deadline loop;
- ports: a free loopback port held for a block, for the tests that must name a port themselves;
- the wire: CreateTopics, Produce and Fetch as a raw client sends them, and the stored batches of a partition;
- confluent-kafka: a topic and acknowledged records, for the durability and retention tests;
- transactions: each client's transactional producer and its consumer at either isolation level, and what a
  partition's leader says of its producers and last stable offset;
- the client-compatibility corpus: the records every client produces and the byte-for-byte check of what comes
  back.
"""
from __future__ import annotations

import asyncio
import os
import random
import selectors
import signal
import socket
import subprocess
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from typing import NamedTuple

import trio
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition as AIOTopicPartition
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.protocol.admin.topics import CreateTopicsRequest
from kafka.protocol.consumer import ListOffsetsRequest
from kafka.protocol.consumer.fetch import FetchRequest
from kafka.protocol.producer.produce import ProduceRequest
from kafka.record.default_records import DefaultRecordBatch
from kafka.record.memory_records import MemoryRecords

from minikafka.port_reservation import reserve_port
from tests.raw_client import RawConnection

# ---- waiting -------------------------------------------------------------------------------------------------------

DEFAULT_WAIT_S = 30.0  # a budget, not an expectation: a healthy run takes a fraction of it
IN_LOOP_WAIT_S = 20.0  # the budget for state on the test's own trio loop, which changes within well under a second
IN_LOOP_POLL_S = 0.01  # looking is cheap there, and often enough not to miss a passing state


class _Poll:
    """The deadline and the failure message of one bounded poll, shared by `wait_until` and `wait_until_async`.

    The predicate is always called once more at the deadline, so a slow last interval cannot fail a test whose
    condition did come true.
    """

    def __init__(self, clock: Callable[[], float], timeout: float, interval: float, message: str) -> None:
        self.clock = clock
        self.timeout = timeout
        self.interval = interval
        self.message = message
        self.deadline = clock() + timeout

    def holds(self, predicate: Callable[[], object]) -> bool:
        """One call of `predicate`: whether it held; TimeoutError naming the message if not by the deadline."""
        last_chance = self.clock() >= self.deadline
        if predicate():
            return True
        if last_chance:
            raise TimeoutError(f"waited {self.timeout:g} s for {self.message}")
        return False

    def pause(self) -> float:
        """How long to sleep before the next call: the interval, or what is left of the timeout."""
        return max(0.0, min(self.interval, self.deadline - self.clock()))


def wait_until(predicate: Callable[[], object], timeout: float = DEFAULT_WAIT_S, *, interval: float = 0.05,
               message: str = "the condition") -> None:
    """Call `predicate` until it returns something true; TimeoutError naming `message` once `timeout` s passed."""
    poll = _Poll(time.monotonic, timeout, interval, message)
    while not poll.holds(predicate):
        time.sleep(poll.pause())


async def wait_until_async(predicate: Callable[[], object], timeout: float = IN_LOOP_WAIT_S, *,  # noqa: ASYNC109
                           interval: float = IN_LOOP_POLL_S, message: str = "the condition") -> None:
    """`wait_until` inside a trio run, on trio's clock, for the state of brokers running on the test's own loop,
    which has no event for a test to wait on (a timeout, not trio.fail_after, to name what did not happen)."""
    poll = _Poll(trio.current_time, timeout, interval, message)
    while not poll.holds(predicate):  # noqa: ASYNC110 - a bounded poll of an observable state
        await trio.sleep(poll.pause())


# ---- ports ---------------------------------------------------------------------------------------------------------

@contextmanager
def held_free_port(host: str = "127.0.0.1") -> Iterator[int]:
    """A free port that stays free for what the block starts (a broker told to listen on it) until the block ends.

    Where ports cannot be held (not Linux) it is a probed free port, with the race a probe has.
    """
    held = reserve_port(host)
    if held is None:
        with socket.socket() as probe:
            probe.bind((host, 0))
            port = probe.getsockname()[1]
        yield port
        return
    with held:
        yield held.getsockname()[1]


# ---- the wire ------------------------------------------------------------------------------------------------------

def create_topic(conn: RawConnection, name: str, partitions: int = 1, **configs: str) -> None:
    R = CreateTopicsRequest[7]
    entries = [R.CreatableTopic.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()]
    resp = conn.request(R(topics=[R.CreatableTopic(name=name, num_partitions=partitions, replication_factor=1,
                                                   assignments=[], configs=entries)], timeout_ms=10000))
    assert resp.topics[0].error_code == 0, resp


def produce(conn: RawConnection, topic: str, partition: int, records: bytes, version: int = 9):
    """One acks=1 Produce of `records` (a record batch); returns the partition's response."""
    R = ProduceRequest[version]
    resp = conn.request(R(transactional_id=None, acks=1, timeout_ms=10000, topic_data=[
        R.TopicProduceData(name=topic, partition_data=[R.TopicProduceData.PartitionProduceData(
            index=partition, records=records)])]))
    return resp.responses[0].partition_responses[0]


def fetch(conn: RawConnection, topic: str, partition: int, offset: int, *, min_bytes: int = 0,
          max_wait_ms: int = 0):
    """One Fetch of a partition from `offset`; returns the partition's response (a long poll with min_bytes)."""
    R = FetchRequest[12]
    resp = conn.request(R(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=1 << 20,
                          isolation_level=0, session_id=0, session_epoch=-1, topics=[R.FetchTopic(
                              topic=topic, partitions=[R.FetchTopic.FetchPartition(
                                  partition=partition, current_leader_epoch=-1, fetch_offset=offset,
                                  last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1 << 20)])],
                          forgotten_topics_data=[], rack_id=""))
    return resp.responses[0].partitions[0]


def fetch_batches(conn: RawConnection, topic: str, partition: int, end_offset: int) -> list[DefaultRecordBatch]:
    """Every record batch of a partition from offset 0 up to `end_offset`, as the broker serves them."""
    F = FetchRequest[12]
    batches: list[DefaultRecordBatch] = []
    offset = 0
    for _ in range(10_000):
        if offset >= end_offset:
            break
        request = F(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=8 << 20, isolation_level=0, session_id=0,
                    session_epoch=-1, forgotten_topics_data=[], rack_id="",
                    topics=[F.FetchTopic(topic=topic, partitions=[F.FetchTopic.FetchPartition(
                        partition=partition, current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1,
                        log_start_offset=-1, partition_max_bytes=4 << 20)])])
        data = conn.request(request).responses[0].partitions[0]
        assert data.error_code == 0, f"fetch {topic}-{partition}@{offset}: error {data.error_code}"
        records = MemoryRecords(bytes(data.records or b""))
        fetched = 0
        while (batch := records.next_batch()) is not None:
            if batch.next_offset > offset:
                batches.append(batch)
                offset = batch.next_offset
                fetched += 1
        assert fetched, f"fetch {topic}-{partition}@{offset} returned no batch before {end_offset}"
    return batches


# ---- confluent-kafka -----------------------------------------------------------------------------------------------

SMALL_BATCHES = {"batch.size": 16384}  # so no batch outgrows a test's small segment.bytes


def read_committed_values(bootstrap: str, topic: str, partitions: int, expected: int, timeout_s: float) -> list[bytes]:
    """The values of the topic's partitions as a confluent-kafka read_committed consumer reads them from the start:
    until `expected` came (or `timeout_s` passed), and whatever else comes at once after them."""
    return read_values("confluent-kafka", bootstrap, topic, partitions, "read_committed", expected, timeout_s)


def admin_create_topic(bootstrap: str, topic: str, partitions: int, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1, config=configs)])[topic].result(20)


def produce_acked(bootstrap: str, topic: str, count: int, *, partitions: int, start: int = 0,
                  **conf) -> dict[tuple[int, int], bytes]:
    """Produce with acks=1, round robin over the partitions; returns {(partition, offset): value} of every
    acknowledged record."""
    acked: dict[tuple[int, int], bytes] = {}

    def on_delivery(err, msg):
        if err is None:
            acked[(msg.partition(), msg.offset())] = msg.value()

    producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5, **conf})
    try:
        for i in range(start, start + count):
            producer.produce(topic, value=b"value-%06d" % i, key=b"k%d" % i, partition=i % partitions,
                             on_delivery=on_delivery)
            if i % 500 == 0:
                producer.poll(0)
        assert producer.flush(30) == 0
    finally:
        del producer  # librdkafka's threads and sockets go now, not whenever a collector finds the handle
    return acked


# ---- transactions with each client -------------------------------------------------------------------------------

TRANSACTIONAL_CLIENTS = ("confluent-kafka", "kafka-python", "aiokafka")
TRANSACTION_TIMEOUT_S = 60.0  # a budget for one call of a producer's transaction API, not an expectation
Poll = Callable[[float], list[bytes]]  # the values one poll of a consumer brought, waiting at most that many seconds


def run_transactions(client: str, bootstrap: str, transactional_id: str, topic: str, partitions: int,
                     transactions: Iterable[tuple[list[bytes], bool]]) -> None:
    """One transactional producer of `client` (a name in TRANSACTIONAL_CLIENTS), through its own transaction API:
    per (values, commit) a transaction of the values, round robin over the partitions, then committed or aborted.

    Each transaction's records are acknowledged before it ends, an aborted one's too (an abort would drop unsent
    records), so read_uncommitted readers see them. The producer is closed at the end."""
    {"confluent-kafka": _confluent_transactions, "kafka-python": _kafka_python_transactions,
     "aiokafka": _aiokafka_transactions}[client](bootstrap, transactional_id, topic, partitions, list(transactions))


def _confluent_transactions(bootstrap: str, transactional_id: str, topic: str, partitions: int,
                            transactions: list[tuple[list[bytes], bool]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
    try:
        producer.init_transactions(TRANSACTION_TIMEOUT_S)
        for values, commit in transactions:
            producer.begin_transaction()
            for i, value in enumerate(values):
                producer.produce(topic, value=value, partition=i % partitions)
            assert producer.flush(TRANSACTION_TIMEOUT_S) == 0
            if commit:
                producer.commit_transaction(TRANSACTION_TIMEOUT_S)
            else:
                producer.abort_transaction(TRANSACTION_TIMEOUT_S)
    finally:
        del producer  # librdkafka's threads and sockets go now


def _kafka_python_transactions(bootstrap: str, transactional_id: str, topic: str, partitions: int,
                               transactions: list[tuple[list[bytes], bool]]) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=transactional_id)
    try:
        producer.init_transactions()
        for values, commit in transactions:
            producer.begin_transaction()
            sent = [producer.send(topic, value=value, partition=i % partitions) for i, value in enumerate(values)]
            for future in sent:
                future.get(timeout=TRANSACTION_TIMEOUT_S)
            if commit:
                producer.commit_transaction()
            else:
                producer.abort_transaction()
    finally:
        producer.close(timeout=10)


def _aiokafka_transactions(bootstrap: str, transactional_id: str, topic: str, partitions: int,
                           transactions: list[tuple[list[bytes], bool]]) -> None:
    async def run() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=transactional_id)
        await producer.start()
        try:
            for values, commit in transactions:
                await producer.begin_transaction()
                sent = [await producer.send(topic, value=value, partition=i % partitions)
                        for i, value in enumerate(values)]
                await asyncio.gather(*sent)
                await (producer.commit_transaction() if commit else producer.abort_transaction())
        finally:
            await producer.stop()

    asyncio.run(asyncio.wait_for(run(), TRANSACTION_TIMEOUT_S * 2))


def read_values(client: str, bootstrap: str, topic: str, partitions: int, isolation: str, expected: int,
                timeout_s: float) -> list[bytes]:
    """The values of the topic's partitions as `client`'s consumer at `isolation` (read_committed or
    read_uncommitted) reads them from the start, with no group: until `expected` came (or `timeout_s` passed), and
    whatever else comes at once after them (a value that should not be there comes along with the others)."""
    readers = {"confluent-kafka": _confluent_reader, "kafka-python": _kafka_python_reader,
               "aiokafka": _aiokafka_reader}
    with readers[client](bootstrap, topic, partitions, isolation) as poll:
        got: list[bytes] = []
        deadline = time.monotonic() + timeout_s
        while len(got) < expected and time.monotonic() < deadline:
            got.extend(poll(0.3))
        got.extend(poll(1.0))
        return got


@contextmanager
def _confluent_reader(bootstrap: str, topic: str, partitions: int, isolation: str) -> Iterator[Poll]:
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as AssignedPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{isolation}-checker",
                         "enable.auto.commit": False, "isolation.level": isolation})
    try:
        consumer.assign([AssignedPartition(topic, p, 0) for p in range(partitions)])
        yield lambda wait_s: [m.value() for m in consumer.consume(500, timeout=wait_s) if m.error() is None]
    finally:
        consumer.close()


@contextmanager
def _kafka_python_reader(bootstrap: str, topic: str, partitions: int, isolation: str) -> Iterator[Poll]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="earliest", isolation_level=isolation)
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        yield lambda wait_s: [record.value for records in consumer.poll(timeout_ms=int(wait_s * 1000)).values()
                              for record in records]
    finally:
        consumer.close()


@contextmanager
def _aiokafka_reader(bootstrap: str, topic: str, partitions: int, isolation: str) -> Iterator[Poll]:
    """aiokafka's consumer on an event loop of its own, each poll one run of that loop."""
    loop = asyncio.new_event_loop()

    async def started() -> AIOKafkaConsumer:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                    auto_offset_reset="earliest", isolation_level=isolation)
        await asyncio.wait_for(consumer.start(), TRANSACTION_TIMEOUT_S)
        consumer.assign([AIOTopicPartition(topic, p) for p in range(partitions)])
        return consumer

    def poll(wait_s: float) -> list[bytes]:
        fetched = loop.run_until_complete(consumer.getmany(timeout_ms=int(wait_s * 1000)))
        return [record.value for records in fetched.values() for record in records]

    try:
        consumer = loop.run_until_complete(started())
        try:
            yield poll
        finally:
            loop.run_until_complete(consumer.stop())
    finally:
        loop.close()


def assert_read_at_both_isolation_levels(bootstrap: str, topic: str, partitions: int, committed: list[bytes],
                                         aborted: list[bytes], timeout_s: float) -> None:
    """Each client's consumer reads every committed value once and no aborted one at read_committed, and both,
    each once, at read_uncommitted."""
    for client in TRANSACTIONAL_CLIENTS:
        for isolation, expected in (("read_committed", committed), ("read_uncommitted", committed + aborted)):
            got = read_values(client, bootstrap, topic, partitions, isolation, len(expected), timeout_s)
            missing, extra = Counter(expected) - Counter(got), Counter(got) - Counter(expected)
            assert not missing and not extra, (
                f"{client} at {isolation}: {len(got)} values read, {len(expected)} expected; missing "
                f"{sorted(missing.elements())[:5]}, extra or repeated {sorted(extra.elements())[:5]}")


def producer_states(bootstrap: str, topic: str, partitions: int) -> dict[int, list[tuple[int, int, int, int]]]:
    """Per partition, what its leader says of each active producer (DescribeProducers): (producer id, epoch,
    coordinator epoch, first offset of its open transaction or -1), sorted."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        described = admin.describe_producers(tps)
        return {tp.partition: sorted((p.producer_id, p.producer_epoch, p.coordinator_epoch,
                                      p.current_transaction_start_offset)
                                     for p in described[tp].active_producers) for tp in tps}
    finally:
        admin.close()


def last_stable_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    """Per partition, the end offset a read_committed reader is told (ListOffsets at read_committed): the LSO."""
    with RawConnection(bootstrap) as conn:
        response = conn.request(ListOffsetsRequest[5](replica_id=-1, isolation_level=1, topics=[
            (topic, [(p, -1, -1) for p in range(partitions)])]))
    return {p.partition_index: p.offset for t in response.topics for p in t.partitions}


# ---- the client-compatibility corpus -------------------------------------------------------------------------------

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")  # in the order of their batch attribute codes 0-4
RECORD_COUNT = 10_000
PARTITIONS = 4
# Time budgets, not expectations: a healthy run takes a fraction of these.
PRODUCE_TIMEOUT_S = 30.0
CONSUME_TIMEOUT_S = 30.0

Headers = tuple[tuple[str, bytes], ...]


class Record(NamedTuple):
    """What a user hands to a producer and expects back from a consumer, byte for byte."""

    partition: int
    key: bytes | None
    value: bytes | None
    headers: Headers
    timestamp: int


class Consumed(NamedTuple):
    offset: int
    record: Record


def make_records(count: int = RECORD_COUNT, partitions: int = PARTITIONS, seed: int = 2) -> list[Record]:
    """Records (deterministic for a seed, timestamps relative to now) that exercise the record format's corners.

    Null and empty keys, null values (tombstones) and empty values, incompressible and highly compressible
    values of 0 B to 4 KiB, up to six headers (repeated and non-ASCII header keys, empty header values), and
    timestamps that are explicit, within the last hour (the broker's default message.timestamp limits accept
    them) and deliberately not monotonic within a partition.
    """
    rng = random.Random(seed)
    base_timestamp = int(time.time() * 1000) - 3_600_000
    sizes = (0, 1, 7, 64, 200, 1000, 4096)
    records = []
    for i in range(count):
        key: bytes | None = f"key-{i}".encode()
        if i % 13 == 0:
            key = None
        elif i % 29 == 0:
            key = b""
        size = sizes[rng.randrange(len(sizes))]
        value: bytes | None
        if i % 3 == 0:
            value = rng.randbytes(size)
        else:
            value = (f"value {i} " * (size // 8 + 1)).encode()[:size]
        if key is not None and i % 97 == 0:
            value = None
        headers: list[tuple[str, bytes]] = []
        for h in range(i % 4):
            headers.append((f"h{h}", rng.randbytes(h * 5)))
        if i % 11 == 0:
            headers += [("dup", b"first"), ("dup", b"second")]
        if i % 17 == 0:
            headers.append(("ключ-é", "значение".encode()))
        timestamp = base_timestamp + (i * 7919) % count
        records.append(Record(i % partitions, key, value, tuple(headers), timestamp))
    return records


def normalize_headers(headers: Iterable[tuple[str, bytes | None]] | None) -> Headers:
    """Clients hand headers back as None, lists or tuples; compare them as a tuple of (str, bytes) pairs."""
    return tuple((k if isinstance(k, str) else k.decode(), bytes(v) if v is not None else None)
                 for k, v in (headers or ()))


def by_partition(records: Iterable[Record]) -> dict[int, list[Record]]:
    out: dict[int, list[Record]] = defaultdict(list)
    for r in records:
        out[r.partition].append(r)
    return dict(out)


def assert_consumed_equal(produced: list[Record], consumed: list[Consumed]) -> None:
    """Every produced record came back once, in order, at offsets dense from 0 in its partition, unchanged."""
    want = by_partition(produced)
    got: dict[int, list[Consumed]] = defaultdict(list)
    for c in consumed:
        got[c.record.partition].append(c)
    assert sorted(got) == sorted(want), f"partitions consumed {sorted(got)} != produced {sorted(want)}"
    for partition, records in want.items():
        entries = got[partition]
        offsets = [c.offset for c in entries]
        assert offsets == list(range(len(records))), (
            f"partition {partition}: offsets not dense from 0: first bad at index "
            f"{next((i for i, o in enumerate(offsets) if o != i), len(offsets))} of {len(offsets)} "
            f"(expected {len(records)} records)")
        for i, (expected, c) in enumerate(zip(records, entries, strict=True)):
            assert c.record == expected, f"partition {partition} offset {i}: consumed {c.record!r} != {expected!r}"


def assert_produce_offsets(produced: list[Record], offsets: list[tuple[int, int]]) -> None:
    """The offsets a producer was acknowledged with, per record in send order, are dense per partition."""
    assert len(offsets) == len(produced)
    per_partition: dict[int, list[int]] = defaultdict(list)
    for record, (partition, offset) in zip(produced, offsets, strict=True):
        assert partition == record.partition
        per_partition[partition].append(offset)
    for partition, got in per_partition.items():
        assert got == list(range(len(got))), f"partition {partition}: acknowledged offsets are not 0..{len(got) - 1}"


def collect(poll: Callable[[], list[Consumed]], count: int, timeout_s: float = CONSUME_TIMEOUT_S) -> list[Consumed]:
    """Poll until `count` records arrived or the time budget is spent; returns what arrived, for the caller's
    assertion to say what is missing."""
    out: list[Consumed] = []

    def enough() -> bool:
        out.extend(poll())
        return len(out) >= count

    with suppress(TimeoutError):
        wait_until(enough, timeout_s, interval=0, message=f"{count} records")
    return out


def assert_stored_codec(bootstrap_servers: str, topic: str, produced: list[Record], codec: str) -> None:
    """The batches the broker serves are the producer's, compressed with `codec` (never recompressed).

    Clients send a batch uncompressed when compressing it would not save space (a lone incompressible record),
    so uncompressed batches may appear next to compressed ones.
    """
    expected = CODECS.index(codec)
    with RawConnection(bootstrap_servers) as conn:
        for partition, records in by_partition(produced).items():
            batches = fetch_batches(conn, topic, partition, len(records))
            codecs = {b.compression_type for b in batches}
            assert expected in codecs and codecs <= {0, expected}, f"partition {partition}: batch codecs {codecs}"
            assert sum(b.records_count for b in batches) == len(records)


def kill_process_group(proc: subprocess.Popen, timeout_s: float) -> None:
    """SIGKILL a command started with `start_new_session=True` and every process it started (a `minikafka cluster`
    killed alone would leave its nodes running), then reap it."""
    with suppress(ProcessLookupError):  # the group outlives its leader while a node it started still runs
        os.killpg(proc.pid, signal.SIGKILL)
    if proc.poll() is None:
        proc.communicate(timeout=timeout_s)


def read_stdout_line(proc: subprocess.Popen, timeout_s: float) -> bytes:
    """The process's next stdout line, read within `timeout_s` (a plain readline could block forever); byte by byte,
    so nothing past the line is consumed."""
    assert proc.stdout is not None
    line = b""

    def line_read() -> bool:
        nonlocal line
        if selector.select(0.1):
            chunk = os.read(proc.stdout.fileno(), 1)
            assert chunk, f"the process exited in the middle of a line: {line!r}"
            line += chunk
        return line.endswith(b"\n")

    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        wait_until(line_read, timeout_s, interval=0, message="a line on the process's stdout")
    return line


def consume_values(bootstrap: str, topic: str, count: int, *, partition: int = 0,
                   timeout_s: float = 10.0) -> list[bytes]:
    """The values of a partition from its start, until `count` of them or `timeout_s` without a record."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, auto_offset_reset="earliest",
                             enable_auto_commit=False, consumer_timeout_ms=int(timeout_s * 1000))
    try:
        consumer.assign([TopicPartition(topic, partition)])
        values: list[bytes] = []
        for message in consumer:
            values.append(message.value)
            if len(values) >= count:
                break
        return values
    finally:
        consumer.close()
