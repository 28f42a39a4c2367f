"""Transactions (issue 20): a transactional producer committing every 100 ms against the same producer idempotent
only, 1 KB records, on one broker and on three brokers (replication factor 3, acks=all); how long a commit takes
until its markers are written; and an exactly-once copier's throughput (consume from one topic, produce to another
and commit the consumer's offsets in the same transaction). The producer writing at full speed flushes what it took
in 100 ms before each commit: where the brokers take records slower than it, commits come less often, and the run
prints how often they came.

A commit is timed from sending EndTxn (commit_transaction() once the transaction's records are flushed) to:
- EndTxn answered: the coordinator answers once its PrepareCommit is replicated;
- the markers written on all the transaction's partitions: every partition's last stable offset has passed the
  offset its COMMIT marker takes, the high watermark when EndTxn was sent, so the marker is replicated (the LSO never
  passes the HW) and the transaction no longer open there. Timed as a read_committed consumer sees it: a Fetch per
  leader at read_committed from the partitions' LSOs, sent before EndTxn, long-polls until they move (no polling
  load on the brokers while the markers are written);
- CompleteCommit (DescribeTransactions), which the coordinator writes once every marker is acknowledged, polled
  every --poll-ms from the time the markers are seen, on a connection of the bench's own to the coordinator (no
  client library in between), so it is late by at most the polling interval plus one round trip.
They are timed on a quiet cluster (a commit every 100 ms of 10 records per partition) and with the producer writing
at full speed between commits (it sends nothing during the commit, its records being flushed before it, but the
brokers have just taken them). The producer waits while its commit is
polled, which holds nothing back: its next transaction cannot add its partitions (CONCURRENT_TRANSACTIONS) before
CompleteCommit. p99 over a run's 100-200 commits is about their maximum: one GC pause or scheduling hiccup decides it.

`--measure shared` (with `--producers 8`): that many producers whose transactional ids have the same coordinator,
each committing a record per partition back to back, as many transactions ending at once as the coordinator's
marker sender gets: commits/s and EndTxn to CompleteCommit (one thread polls DescribeTransactions for the commits in
flight).

Run: python bench/transactions.py [--seconds 10] [--rounds 4] [--partitions 3] [--latency-seconds 20]
     [--poll-ms 0.5] [--measure throughput markers copier shared] [--loads quiet full-speed]
     [--producers 8] [--skip-cluster | --skip-single]
Targets: transactional throughput >= 90% of the idempotent one; a commit (EndTxn to the markers written on all
partitions) p99 < 20 ms on a quiet 3-broker cluster. A warm-up as long as a run, then four rounds by default, idempotent
first in even rounds and transactional first in odd ones: the ratio over two swings by several points on three
brokers. The producers and the copier are confluent-kafka (librdkafka); brokers run as
minikafka.Broker / minikafka.Cluster processes on free loopback ports with temporary data dirs.
"""
from __future__ import annotations

import argparse
import os
import socket
import statistics
import struct
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field

from confluent_kafka import Consumer, Producer, TopicPartition
from kafka.protocol.admin.transactions import DescribeTransactionsRequest, DescribeTransactionsResponse
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.consumer import FetchRequest, FetchResponse, ListOffsetsRequest, ListOffsetsResponse
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from kafka.protocol.metadata.metadata import MetadataRequest, MetadataResponse

import minikafka

RECORD = 1024
# Every run rolls segments (a run writes GBs): a run that happens to start on an empty log would otherwise go without
# the rolls and their flushes that every later run pays for.
SEGMENT_BYTES = 128 * 1024 * 1024
COMMIT_INTERVAL_S = 0.1
QUIET_RECORDS = 10  # per partition and transaction on the quiet cluster
PRODUCER = {"linger.ms": 5, "batch.size": 1_000_000, "queue.buffering.max.kbytes": 1_000_000, "acks": "all"}
WAIT_S = 30.0  # a budget for a commit's markers or completion, not an expectation
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
LATEST = -1  # ListOffsets' timestamp for the end: the HW at read_uncommitted, the LSO at read_committed
FETCH_VERSION = 11  # by topic name, without a fetch session
FETCH = FetchRequest[FETCH_VERSION]
TRANSACTION_KEY = 1  # FindCoordinator's key type of a transactional id
MEASURES = ("throughput", "markers", "copier", "shared")


@dataclass
class Run:
    mb_per_s: float
    commits: list[float]  # seconds each commit_transaction() took


def start_transactions(producer: Producer, topic: str, partitions: int) -> None:
    """init_transactions() and a first transaction outside the clock: the coordinator is found and loaded."""
    producer.init_transactions(30)
    producer.begin_transaction()
    for partition in range(partitions):
        producer.produce(topic, b"warm-up", partition=partition)
    producer.commit_transaction(30)


def produce_for(bootstrap: str, topic: str, seconds: float, transactional: bool, partitions: int) -> Run:
    """Produce 1 KB records as fast as the producer takes them for `seconds`; transactional: commit every 100 ms."""
    config = {"bootstrap.servers": bootstrap, "enable.idempotence": True, **PRODUCER}
    if transactional:
        config["transactional.id"] = f"bench-{topic}"
    producer = Producer(config)
    value = os.urandom(RECORD)
    commits: list[float] = []
    sent = 0
    if transactional:
        start_transactions(producer, topic, 1)
        producer.begin_transaction()
    started = last_commit = time.perf_counter()
    while time.perf_counter() - started < seconds:
        for _ in range(1000):
            try:
                producer.produce(topic, value, partition=sent % partitions)
                sent += 1
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
        now = time.perf_counter()
        if transactional and now - last_commit >= COMMIT_INTERVAL_S:
            producer.flush(60)  # the commit is timed from EndTxn: the transaction's records are written first
            before = time.perf_counter()
            producer.commit_transaction(30)
            commits.append(time.perf_counter() - before)
            producer.begin_transaction()
            last_commit = time.perf_counter()
    if transactional:
        producer.commit_transaction(30)
    else:
        producer.flush(60)
    elapsed = time.perf_counter() - started
    # What this run left dirty in the page cache is written back before the next run starts: otherwise the kernel's
    # writeback throttles whichever run comes next (the first run of a series, with none before it, ran fastest).
    os.sync()
    return Run(sent * RECORD / elapsed / 1e6, commits)


def copier(bootstrap: str, source: str, sink: str, count: int, partitions: int) -> float:
    """Copy `count` records from `source` to `sink` exactly once; MB/s of records copied."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-copier", "enable.auto.commit": False,
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "bench-copier", **PRODUCER})
    producer.init_transactions(30)
    consumer.assign([TopicPartition(source, p, 0) for p in range(partitions)])
    copied = 0
    started = time.perf_counter()
    deadline = started + 300
    while copied < count and time.perf_counter() < deadline:
        messages = [m for m in consumer.consume(5000, timeout=0.5) if m.error() is None]
        if not messages:
            continue
        producer.begin_transaction()
        for m in messages:
            producer.produce(sink, m.value(), partition=m.partition())
        positions = consumer.position(consumer.assignment())
        producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 30)
        producer.commit_transaction(30)
        copied += len(messages)
    elapsed = time.perf_counter() - started
    consumer.close()
    return copied * RECORD / elapsed / 1e6


# ---- a commit's markers and completion, polled on the wire --------------------------------------------------------

class Wire:
    """A blocking connection to one broker for the requests the bench polls with. Nothing sits between the bench and
    the broker (no client library's queues, threads or timers), so a poll costs one round trip."""

    def __init__(self, address: str) -> None:
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=WAIT_S)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._correlation = 0

    def send(self, request: ApiMessage) -> None:
        self._correlation += 1
        request.with_header(correlation_id=self._correlation, client_id="bench-transactions")
        self.sock.sendall(request.encode(header=True, framed=True))

    def receive(self, response: type[ApiMessage], version: int) -> ApiMessage:
        """The answer to the oldest request sent and not yet answered (a broker answers a connection in order)."""
        (size,) = struct.unpack(">i", self._exactly(4))
        return response.decode(self._exactly(size), version=version, header=True)

    def request(self, request: ApiMessage, response: type[ApiMessage]) -> ApiMessage:
        self.send(request)
        return self.receive(response, request.API_VERSION)

    def _exactly(self, size: int) -> bytes:
        buffer = bytearray(size)
        view = memoryview(buffer)
        got = 0
        while got < size:
            count = self.sock.recv_into(view[got:])
            if not count:
                raise SystemExit("a broker closed the bench's connection")
            got += count
        return bytes(buffer)

    def close(self) -> None:
        self.sock.close()


def leaders(bootstrap: str, topic: str) -> dict[int, str]:
    """Each partition of `topic` and its leader's address (Metadata), asked again while one has none."""
    wire = Wire(bootstrap.split(",")[0])
    try:
        for _ in range(int(WAIT_S / 0.1)):
            response = wire.request(MetadataRequest[12](topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                                                        allow_auto_topic_creation=False), MetadataResponse)
            addresses = {b.node_id: f"{b.host}:{b.port}" for b in response.brokers}
            found = {p.partition_index: addresses.get(p.leader_id) for p in response.topics[0].partitions}
            if found and None not in found.values():
                return found
            time.sleep(0.1)
    finally:
        wire.close()
    raise SystemExit(f"{topic}: no leader for every partition within {WAIT_S:.0f} s")


def coordinator(bootstrap: str, transactional_id: str) -> str:
    """The address of `transactional_id`'s coordinator (FindCoordinator), asked again while none is ready."""
    wire = Wire(bootstrap.split(",")[0])
    try:
        for _ in range(int(WAIT_S / 0.1)):
            response = wire.request(FindCoordinatorRequest[3](key=transactional_id, key_type=TRANSACTION_KEY),
                                    FindCoordinatorResponse)
            if response.error_code == 0:
                return f"{response.host}:{response.port}"
            time.sleep(0.1)
    finally:
        wire.close()
    raise SystemExit(f"no coordinator for {transactional_id!r} within {WAIT_S:.0f} s")


def describe_transactions(wire: Wire, transactional_ids: list[str]) -> dict[str, str]:
    """Each transactional id's state as its coordinator names it (DescribeTransactions), e.g. CompleteCommit."""
    response = wire.request(DescribeTransactionsRequest[0](transactional_ids=transactional_ids),
                            DescribeTransactionsResponse)
    states = {}
    for state in response.transaction_states:
        if state.error_code:
            raise SystemExit(f"DescribeTransactions {state.transactional_id!r}: error {state.error_code}")
        states[state.transactional_id] = state.transaction_state
    return states


def sleep_until(when: float) -> None:
    time.sleep(max(0.0, when - time.perf_counter()))


class CommitWatch:
    """Polls one transactional id's commit until its markers are written on every partition of `topic`, then until
    its coordinator has written CompleteCommit: a connection to each leader and one to the coordinator."""

    def __init__(self, bootstrap: str, topic: str, transactional_id: str, poll_s: float) -> None:
        self.topic = topic
        self.transactional_id = transactional_id
        self.poll_s = poll_s
        self.round_trips: list[float] = []  # of every poll
        self._partitions_by_leader: dict[str, list[int]] = defaultdict(list)
        for partition, address in sorted(leaders(bootstrap, topic).items()):
            self._partitions_by_leader[address].append(partition)
        self._leaders = {address: Wire(address) for address in self._partitions_by_leader}
        self._coordinator = Wire(coordinator(bootstrap, transactional_id))

    def _end_offsets(self, isolation_level: int, partitions_by_leader: dict[str, list[int]]) -> dict[int, int]:
        """ListOffsets for the end of the partitions, asked of all their leaders at once."""
        for address, partitions in partitions_by_leader.items():
            self._leaders[address].send(ListOffsetsRequest[5](replica_id=-1, isolation_level=isolation_level, topics=[
                (self.topic, [(p, -1, LATEST) for p in partitions])]))
        offsets = {}
        for address in partitions_by_leader:
            for p in self._leaders[address].receive(ListOffsetsResponse, 5).topics[0].partitions:
                if p.error_code:
                    raise SystemExit(f"ListOffsets {self.topic}-{p.partition_index}: error {p.error_code}")
                offsets[p.partition_index] = p.offset
        return offsets

    def marker_offsets(self) -> dict[int, int]:
        """Where the next COMMIT marker goes in each partition, asked once the transaction's records are flushed:
        the high watermark, which acks=all has brought to the log end."""
        return self._end_offsets(READ_UNCOMMITTED, self._partitions_by_leader)

    def watch_markers(self, marker_offsets: dict[int, int]) -> threading.Thread:
        """Long-poll each leader as a read_committed consumer waits for the transaction: one Fetch per leader from
        the partitions' last stable offsets, answered once they move (a fetch past the LSO is answered at once, as
        Kafka's). Sent before EndTxn, the answers read by a thread of its own so each is timed when it comes;
        `markers_at` and `fetches` are set when the thread ends."""
        self.markers_at, self.fetches = 0.0, 0
        waiting = dict(marker_offsets)
        stable = self._end_offsets(READ_COMMITTED, self._partitions_by_leader)
        for address, partitions in self._partitions_by_leader.items():
            self._fetch_stable(address, {p: stable[p] for p in partitions})
        thread = threading.Thread(target=self._await_markers, args=(waiting, stable), daemon=True)
        thread.start()
        return thread

    def _fetch_stable(self, address: str, offsets: dict[int, int]) -> None:
        self.fetches += 1
        self._leaders[address].send(FETCH(
            replica_id=-1, max_wait_ms=int(WAIT_S * 1000), min_bytes=1, max_bytes=1 << 20,
            isolation_level=READ_COMMITTED, session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="",
            topics=[FETCH.FetchTopic(topic=self.topic, partitions=[FETCH.FetchTopic.FetchPartition(
                partition=p, current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1,
                log_start_offset=-1, partition_max_bytes=1 << 16) for p, offset in sorted(offsets.items())])]))

    def _await_markers(self, waiting: dict[int, int], stable: dict[int, int]) -> None:
        """Each leader's answer in turn (the last to come decides); a leader answering before all its partitions'
        markers are stable is asked again for those still open."""
        deadline = time.perf_counter() + WAIT_S
        for address, partitions in self._partitions_by_leader.items():
            while any(p in waiting for p in partitions):
                if time.perf_counter() > deadline:
                    raise SystemExit(f"{self.topic}: markers not stable within {WAIT_S:.0f} s at {waiting}")
                for p in self._leaders[address].receive(FetchResponse, FETCH_VERSION).responses[0].partitions:
                    if p.error_code:
                        raise SystemExit(f"Fetch {self.topic}-{p.partition_index}: error {p.error_code}")
                    if p.last_stable_offset > waiting[p.partition_index]:
                        del waiting[p.partition_index]
                    elif p.last_stable_offset >= 0:
                        stable[p.partition_index] = p.last_stable_offset
                still = {p: stable[p] for p in partitions if p in waiting}
                if still:
                    self._fetch_stable(address, still)
        self.markers_at = time.perf_counter()

    def completed(self) -> float:
        """When the coordinator answers CompleteCommit (it stays so: the next transaction begins after this)."""
        deadline = time.perf_counter() + WAIT_S
        while True:
            asked = time.perf_counter()
            state = describe_transactions(self._coordinator, [self.transactional_id])[self.transactional_id]
            now = time.perf_counter()
            self.round_trips.append(now - asked)
            if state == "CompleteCommit":
                return now
            if now > deadline:
                raise SystemExit(f"{self.transactional_id!r} still {state} {WAIT_S:.0f} s after its EndTxn")
            sleep_until(asked + self.poll_s)

    def close(self) -> None:
        for wire in (*self._leaders.values(), self._coordinator):
            wire.close()


@dataclass
class Latencies:
    """Seconds from sending EndTxn to each observation, one entry per commit."""

    end_txn: list[float] = field(default_factory=list)
    markers: list[float] = field(default_factory=list)
    complete: list[float] = field(default_factory=list)
    marker_fetches: int = 0  # long polls of the leaders: one per leader and commit unless one came back early
    round_trips: list[float] = field(default_factory=list)


def commit_latency(bootstrap: str, topic: str, partitions: int, seconds: float, full_speed: bool,
                   poll_s: float) -> Latencies:
    """Commit every 100 ms for `seconds` (quiet: 10 records per partition; full speed: as many as the producer
    takes), each commit timed to its markers on every partition and to CompleteCommit."""
    transactional_id = f"bench-{topic}"
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "transactional.id": transactional_id, **PRODUCER})
    start_transactions(producer, topic, partitions)
    watch = CommitWatch(bootstrap, topic, transactional_id, poll_s)
    watch.completed()  # the warm-up transaction: the next one adds its partitions at once
    value = os.urandom(RECORD)
    result = Latencies(round_trips=watch.round_trips)
    sent = 0
    started = time.perf_counter()
    next_commit = started + COMMIT_INTERVAL_S
    while next_commit - started < seconds:
        producer.begin_transaction()
        if full_speed:
            while time.perf_counter() < next_commit:
                for _ in range(1000):
                    try:
                        producer.produce(topic, value, partition=sent % partitions)
                        sent += 1
                    except BufferError:
                        producer.poll(0.01)
                producer.poll(0)
        else:
            for partition in range(partitions):
                for _ in range(QUIET_RECORDS):
                    producer.produce(topic, value, partition=partition)
        producer.flush(60)
        sleep_until(next_commit)
        markers = watch.watch_markers(watch.marker_offsets())
        end_txn_sent = time.perf_counter()
        producer.commit_transaction(30)
        answered = time.perf_counter()
        markers.join(WAIT_S)
        if markers.is_alive() or not watch.markers_at:
            raise SystemExit(f"{topic}: no answer to the marker fetches within {WAIT_S:.0f} s")
        complete_at = watch.completed()
        result.end_txn.append(answered - end_txn_sent)
        result.markers.append(watch.markers_at - end_txn_sent)
        result.complete.append(complete_at - end_txn_sent)
        result.marker_fetches += watch.fetches
        now = time.perf_counter()
        next_commit = now + COMMIT_INTERVAL_S if full_speed else max(next_commit + COMMIT_INTERVAL_S, now)
    watch.close()
    return result


@dataclass
class Shared:
    commits_per_s: float
    end_txn: list[float]
    complete: list[float]  # EndTxn sent to CompleteCommit seen
    complete_seen_late: int  # of those, seen only once the producer's next transaction was written (an upper bound)
    round_trips: list[float]


def transactional_ids_sharing_a_coordinator(bootstrap: str, count: int) -> tuple[list[str], str]:
    """`count` transactional ids whose coordinator is the same broker, and its address."""
    chosen: list[str] = []
    first = None
    for i in range(100 * count):
        transactional_id = f"bench-shared-{i}"
        address = coordinator(bootstrap, transactional_id)
        first = first or address
        if address == first:
            chosen.append(transactional_id)
            if len(chosen) == count:
                return chosen, first
    raise SystemExit(f"found no {count} transactional ids with the same coordinator")


def shared_coordinator(bootstrap: str, topic: str, partitions: int, producers: int, seconds: float,
                       poll_s: float) -> Shared:
    """`producers` producers of one coordinator, each committing a transaction of one record per partition back to
    back for `seconds`; one thread polls DescribeTransactions for every commit answered and not yet complete."""
    ids, address = transactional_ids_sharing_a_coordinator(bootstrap, producers)
    clients = []
    for transactional_id in ids:
        producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                             "transactional.id": transactional_id, **PRODUCER})
        start_transactions(producer, topic, partitions)
        clients.append(producer)
    lock = threading.Lock()
    pending: dict[str, float] = {}  # transactional id -> when its EndTxn was sent, once answered
    answered_at: list[float] = []
    result = Shared(0.0, [], [], 0, [])
    errors: list[BaseException] = []
    stop = threading.Event()

    def poll() -> None:
        wire = Wire(address)
        try:
            while not stop.is_set():
                asked = time.perf_counter()
                with lock:
                    waiting = list(pending)
                if waiting:
                    states = describe_transactions(wire, waiting)
                    now = time.perf_counter()
                    result.round_trips.append(now - asked)
                    with lock:
                        for transactional_id, state in states.items():
                            if state != "PrepareCommit" and transactional_id in pending:
                                result.complete.append(now - pending.pop(transactional_id))
                sleep_until(asked + poll_s)
        except BaseException as exc:  # noqa: BLE001 - reported once the run ends
            errors.append(exc)
        finally:
            wire.close()

    def commit(transactional_id: str, producer: Producer) -> None:
        value = os.urandom(RECORD)
        try:
            while not stop.is_set():
                producer.begin_transaction()
                for partition in range(partitions):
                    producer.produce(topic, value, partition=partition)
                producer.flush(60)  # written, so its partitions were added: the previous transaction is complete
                end_txn_sent = time.perf_counter()
                with lock:
                    previous = pending.pop(transactional_id, None)
                    if previous is not None:
                        result.complete.append(end_txn_sent - previous)
                        result.complete_seen_late += 1
                producer.commit_transaction(30)
                answered = time.perf_counter()
                with lock:
                    result.end_txn.append(answered - end_txn_sent)
                    answered_at.append(answered)
                    pending[transactional_id] = end_txn_sent
        except BaseException as exc:  # noqa: BLE001 - reported once the run ends
            errors.append(exc)

    threads = [threading.Thread(target=poll)]
    threads += [threading.Thread(target=commit, args=(i, p)) for i, p in zip(ids, clients, strict=True)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join(120)
    if errors or any(thread.is_alive() for thread in threads):
        raise SystemExit(f"shared coordinator run failed: {errors or 'threads still running'}")
    result.commits_per_s = sum(1 for t in answered_at if t - started <= seconds) / seconds
    return result


# ---- figures ------------------------------------------------------------------------------------------------------

def percentile_ms(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return 1000 * ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def spread(values: list[float]) -> str:
    return (f"p50 {percentile_ms(values, 0.5):.1f} / p99 {percentile_ms(values, 0.99):.1f} / "
            f"max {1000 * max(values):.1f} ms")


def polling(poll_s: float, round_trips: list[float]) -> str:
    return (f"polled every {1000 * poll_s:.1f} ms, a poll's round trip p50 {percentile_ms(round_trips, 0.5):.2f} / "
            f"p99 {percentile_ms(round_trips, 0.99):.2f} ms ({len(round_trips)} polls)")


def measure(bootstrap: str, state: minikafka.state.State, label: str, args: argparse.Namespace,
            replication: int) -> None:
    prefix = f"rf{replication}"
    for topic in ("warm-up", "idempotent", "transactional", "copy-out", "quiet", "full-speed", "shared"):
        state.create_topic(f"{prefix}-{topic}", partitions=args.partitions, replication_factor=replication,
                           config={"min.insync.replicas": min(2, replication), "segment.bytes": SEGMENT_BYTES})
    source_mb_per_s = None
    if "throughput" in args.measure:
        commits: list[float] = []
        rates = []
        # Fresh brokers take the first seconds of writes faster (empty page cache, nothing to clean up yet): a
        # warm-up that counts for neither side, then rounds in alternating order, so neither side always runs first.
        produce_for(bootstrap, f"{prefix}-warm-up", args.seconds, False, args.partitions)
        for round_index in range(args.rounds):
            if round_index % 2 == 0:
                idempotent = produce_for(bootstrap, f"{prefix}-idempotent", args.seconds, False, args.partitions)
            transactional = produce_for(bootstrap, f"{prefix}-transactional", args.seconds, True, args.partitions)
            if round_index % 2 == 1:
                idempotent = produce_for(bootstrap, f"{prefix}-idempotent", args.seconds, False, args.partitions)
            commits += transactional.commits
            rates.append((idempotent.mb_per_s, transactional.mb_per_s))
            print(f"{label}: idempotent {idempotent.mb_per_s:.1f} MB/s, transactional "
                  f"{transactional.mb_per_s:.1f} MB/s ({100 * transactional.mb_per_s / idempotent.mb_per_s:.0f}% of "
                  f"idempotent; target >= 90%)", flush=True)
        total_idempotent, total_transactional = (sum(r[0] for r in rates), sum(r[1] for r in rates))
        print(f"{label}: over {args.rounds} rounds, transactional {100 * total_transactional / total_idempotent:.0f}% "
              f"of idempotent (target >= 90%)")
        # The records taken in 100 ms are flushed before each commit: where the brokers take them slower than the
        # producer, a commit comes less often than every 100 ms.
        print(f"{label}: {len(commits)} commits at full speed (one every "
              f"{1000 * args.rounds * args.seconds / len(commits):.0f} ms), EndTxn answered {spread(commits)}, mean "
              f"{1000 * statistics.fmean(commits):.1f} ms", flush=True)
        source_mb_per_s = rates[-1][1]
    if "markers" in args.measure:
        for full_speed, topic, what in (
                (False, "quiet", f"quiet, a commit every 100 ms of {QUIET_RECORDS} records per partition"),
                (True, "full-speed", "writing at full speed, what the producer took in 100 ms flushed, then a commit")):
            if topic not in args.loads:
                continue
            latencies = commit_latency(bootstrap, f"{prefix}-{topic}", args.partitions, args.latency_seconds,
                                       full_speed, args.poll_ms / 1000)
            print(f"{label}, {what}: {len(latencies.end_txn)} commits of {args.partitions} partitions in "
                  f"{args.latency_seconds:.0f} s, from sending EndTxn to\n"
                  f"  EndTxn answered           {spread(latencies.end_txn)}\n"
                  f"  markers on all partitions {spread(latencies.markers)} (target p99 < 20 ms, quiet, 3 brokers)\n"
                  f"  CompleteCommit            {spread(latencies.complete)}\n"
                  f"  markers: {latencies.marker_fetches} long-poll fetches of the leaders; CompleteCommit "
                  f"{polling(args.poll_ms / 1000, latencies.round_trips)}", flush=True)
    if "copier" in args.measure:
        if source_mb_per_s is None:  # the copier's source is the transactional producer's topic
            source_mb_per_s = produce_for(bootstrap, f"{prefix}-transactional", args.seconds, True,
                                          args.partitions).mb_per_s
        copied = int(min(200_000, source_mb_per_s * 1e6 * args.seconds / RECORD))
        rate = copier(bootstrap, f"{prefix}-transactional", f"{prefix}-copy-out", copied, args.partitions)
        print(f"{label}: exactly-once copier {rate:.1f} MB/s ({copied} records)", flush=True)
    if "shared" in args.measure:
        shared = shared_coordinator(bootstrap, f"{prefix}-shared", args.partitions, args.producers,
                                    args.latency_seconds, args.poll_ms / 1000)
        print(f"{label}, {args.producers} producers sharing a coordinator, back to back commits of a record per "
              f"partition: {shared.commits_per_s:.0f} commits/s; from sending EndTxn to\n"
              f"  EndTxn answered {spread(shared.end_txn)}\n"
              f"  CompleteCommit  {spread(shared.complete)} ({len(shared.complete)} commits, "
              f"{shared.complete_seen_late} seen only when the next transaction was written)\n"
              f"  {polling(args.poll_ms / 1000, shared.round_trips)}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="how long each throughput producer runs")
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=4, help="idempotent and transactional runs, alternating")
    parser.add_argument("--latency-seconds", type=float, default=20.0,
                        help="how long each commit latency run (quiet, full speed, shared coordinator) lasts")
    parser.add_argument("--poll-ms", type=float, default=0.5, help="how often a commit's markers are polled")
    parser.add_argument("--measure", nargs="+", choices=MEASURES, default=["throughput", "markers", "copier"])
    parser.add_argument("--loads", nargs="+", choices=("quiet", "full-speed"), default=["quiet", "full-speed"],
                        help="the commit latency runs (--measure markers) to make")
    parser.add_argument("--producers", type=int, default=8, help="producers sharing a coordinator (--measure shared)")
    only = parser.add_mutually_exclusive_group()
    only.add_argument("--skip-cluster", action="store_true", help="only the single broker")
    only.add_argument("--skip-single", action="store_true", help="only the 3-broker cluster")
    args = parser.parse_args()
    if not args.skip_single:
        with minikafka.Broker() as broker:
            measure(broker.bootstrap_servers, broker.state, "one broker", args, 1)
    if not args.skip_cluster:
        with minikafka.Cluster(brokers=3) as cluster:
            measure(cluster.bootstrap_servers, cluster.state, "3 brokers RF=3", args, 3)


if __name__ == "__main__":
    main()
