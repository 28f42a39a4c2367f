"""KIP-848 consumer groups on a 3-broker cluster through the faults an application meets: a member killed -9 while
records are being written, members joining and leaving while records are being written, and the group's
coordinator killed -9. Every member is its own process (tests/group_worker.py, confluent-kafka with
`group.protocol=consumer`), committing synchronously before it writes down what it consumed, so the account is exact:
- no record is written down twice: a partition moves only once its member has let it go (or was fenced, after which
  its commits are refused as STALE_MEMBER_EPOCH / UNKNOWN_MEMBER_ID), and the next owner starts at the committed
  offset;
- every acknowledged record is written down, except where a member was killed between its commit and its write:
  those records (committed, never written) lie between what the killed member wrote last of a partition and where
  the partition's next owner began, and nowhere else.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from confluent_kafka import Producer
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest

import minikafka
from minikafka.protocol.errors import ErrorCode
from tests.cluster.cluster_modes import CLUSTER_MODES
from tests.group_worker import GroupWorker, committed_offsets, consumed_values, stop_all
from tests.helpers import wait_until
from tests.raw_client import RawConnection

PARTITIONS = 6
LIBRARY = "confluent-kafka-consumer"
# Kafka's bounds allow a session this short once the minimum is lowered with it; members heartbeat every 500 ms.
FAST_GROUPS = {
    "group.consumer.session.timeout.ms": 4000,
    "group.consumer.min.session.timeout.ms": 1000,
    "group.consumer.heartbeat.interval.ms": 500,
    "group.consumer.min.heartbeat.interval.ms": 100,
}
RATE = 120  # records per second the background producer offers, over all partitions
WAIT_S = 60.0


class BackgroundProducer:
    """An idempotent acks=all producer writing numbered records round-robin over the partitions from a thread of its
    own until stopped; `acknowledged` holds the values the brokers acknowledged."""

    def __init__(self, bootstrap: str, topic: str, prefix: str) -> None:
        self._producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                                   "linger.ms": 5})
        self._topic, self._prefix = topic, prefix
        self.acknowledged: set[str] = set()
        self.failed: list[str] = []
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _delivered(self, error, message) -> None:
        if error is None:
            self.acknowledged.add(message.value().decode())
        else:
            self.failed.append(str(error))

    def _run(self) -> None:
        while not self._stop.wait(1 / RATE):
            self._producer.produce(self._topic, f"{self._prefix}-{self.sent}".encode(),
                                   partition=self.sent % PARTITIONS, on_delivery=self._delivered)
            self.sent += 1
            self._producer.poll(0)

    def wait_for(self, count: int) -> None:
        """Until at least `count` more records are acknowledged than now."""
        target = len(self.acknowledged) + count
        wait_until(lambda: len(self.acknowledged) >= target, WAIT_S, message=f"{count} more acknowledgements")

    def stop(self) -> set[str]:
        """Stop writing; every record sent is acknowledged or failed once this returns. Returns the acknowledged."""
        self._stop.set()
        self._thread.join(10)
        assert self._producer.flush(WAIT_S) == 0, "records left undelivered"
        assert not self.failed, f"the application saw delivery errors: {self.failed[:5]}"
        return set(self.acknowledged)


@contextmanager
def fast_group_cluster(tmp_path, zookeeper: bool) -> Iterator[minikafka.Cluster]:
    with minikafka.Cluster(brokers=3, data_dir=tmp_path / "cluster", config=FAST_GROUPS,
                           zookeeper=zookeeper) as cluster:
        yield cluster


@pytest.fixture
def workers() -> Iterator[list[GroupWorker]]:
    started: list[GroupWorker] = []
    yield started
    stop_all(started)


def start(workers: list[GroupWorker], tmp_path, bootstrap: str, topic: str, group: str, name: str) -> GroupWorker:
    worker = GroupWorker(LIBRARY, bootstrap, topic, group, tmp_path / f"{name}.out")
    workers.append(worker)
    return worker


def three_members(cluster: minikafka.Cluster, tmp_path, workers: list[GroupWorker], topic: str, group: str
                  ) -> list[GroupWorker]:
    """The topic (replication factor 3) and three members of the group on it, once the group is Stable."""
    cluster.state.create_topic(topic, partitions=PARTITIONS, replication_factor=3)
    members = [start(workers, tmp_path, cluster.bootstrap_servers, topic, group, f"w{i}") for i in range(3)]
    cluster.wait_for_group(group, state="Stable", members=3)
    return members


def wait_committed_at_ends(bootstrap: str, group: str, acknowledged: set[str], topic: str) -> None:
    """Until each partition's committed offset is its end: every record consumed was committed."""
    wait_until(lambda: committed_offsets(bootstrap, group) == committed_ends(acknowledged, topic), WAIT_S,
               message="the committed offsets at the partitions' ends")


def position(value: str) -> tuple[int, int]:
    """Where the background producer's record went: record n to partition n % PARTITIONS at offset n // PARTITIONS
    (one idempotent producer writing round-robin, every record acknowledged, nothing else in the topic)."""
    n = int(value.rsplit("-", 1)[1])
    return n % PARTITIONS, n // PARTITIONS


def wait_all_written(workers: list[GroupWorker], expected: set[str],
                     excused: Callable[[], set[str]] = set) -> None:
    """Until every expected record but the excused is written down by some member (bounded), naming what is missing
    with the members' logs otherwise."""
    def missing() -> set[str]:
        return expected - excused() - set(consumed_values(workers))

    try:
        wait_until(lambda: not missing(), WAIT_S, interval=0.2, message="every record consumed")
    except TimeoutError:
        gone = missing()
        raise AssertionError(f"{len(gone)} acknowledged records never consumed, e.g. {sorted(gone)[:5]}; logs:\n"
                             + "\n".join(f"-- {w.out.name}:\n{w.log_text()[-3000:]}" for w in workers)) from None


def assert_no_duplicates(workers: list[GroupWorker]) -> None:
    values = consumed_values(workers)
    twice = sorted({v for v in values if values.count(v) > 1})
    assert not twice, f"written down twice: {twice[:10]}"


def committed_unwritten(victim: GroupWorker, others: list[GroupWorker], acknowledged: set[str]) -> set[str]:
    """The records a member killed between its commit and its write committed but never wrote down: of a partition
    it wrote, after the last offset it wrote and before the first offset the partition's next owner wrote."""
    last: dict[int, int] = {}
    for partition, offset, _value in victim.records():
        last[partition] = max(offset, last.get(partition, -1))
    first_after: dict[int, int] = {}
    for worker in others:
        for partition, offset, _value in worker.records():
            if partition in last and offset > last[partition]:
                first_after[partition] = min(offset, first_after.get(partition, offset))
    excused = set()
    for value in acknowledged:
        partition, offset = position(value)
        if partition in last and last[partition] < offset < first_after.get(partition, last[partition] + 1):
            excused.add(value)
    return excused


def committed_ends(acknowledged: set[str], topic: str) -> dict[tuple[str, int], int]:
    """Each partition's end once every acknowledged record is in: its committed offset once all are consumed."""
    ends = {(topic, p): 0 for p in range(PARTITIONS)}
    for value in acknowledged:
        partition, offset = position(value)
        ends[(topic, partition)] = max(ends[(topic, partition)], offset + 1)
    return ends


@pytest.mark.parametrize("zookeeper", CLUSTER_MODES)
def test_a_member_killed_while_records_are_written_hands_its_partitions_over(tmp_path, unique_topic, zookeeper,
                                                                              workers):
    with fast_group_cluster(tmp_path, zookeeper) as cluster:
        bootstrap, group = cluster.bootstrap_servers, "kill-a-member"
        members = three_members(cluster, tmp_path, workers, unique_topic, group)
        producer = BackgroundProducer(bootstrap, unique_topic, "v")
        try:
            producer.wait_for(200)
            wait_until(lambda: all(w.records() for w in members), WAIT_S, message="every member consuming")
            victim, survivors = members[0], members[1:]
            owned = victim.partitions()
            victim.kill()
            # Its partitions go to the survivors once its session times out.
            described = cluster.wait_for_group(group, state="Stable", members=2)
            producer.wait_for(200)
        finally:
            acknowledged = producer.stop()
        assert sorted(p for m in described.members for _t, p in m.assignment) == list(range(PARTITIONS))
        wait_all_written(members, acknowledged, lambda: committed_unwritten(victim, survivors, acknowledged))
        assert_no_duplicates(members)
        assert owned <= {p for w in survivors for p in w.partitions()}
        wait_committed_at_ends(bootstrap, group, acknowledged, unique_topic)


def test_members_join_and_leave_while_records_are_written_and_the_others_keep_consuming(tmp_path, unique_topic,
                                                                                       workers):
    with fast_group_cluster(tmp_path, zookeeper=False) as cluster:
        bootstrap, group = cluster.bootstrap_servers, "join-and-leave"
        members = three_members(cluster, tmp_path, workers, unique_topic, group)
        producer = BackgroundProducer(bootstrap, unique_topic, "v")
        try:
            wait_until(lambda: all(w.records() for w in members), WAIT_S, message="every member consuming")
            joined_at = time.time()
            fourth = start(workers, tmp_path, bootstrap, unique_topic, group, "w3")
            wait_until(lambda: fourth.records(), WAIT_S, message="the fourth member consuming")
            fourth_began = min(at for *_, at in fourth.timed_records())
            cluster.wait_for_group(group, state="Stable", members=4)
            leaving = members[0]
            assert leaving.stop() == 0
            cluster.wait_for_group(group, state="Stable", members=3)
            producer.wait_for(200)
        finally:
            acknowledged = producer.stop()
        wait_all_written(workers, acknowledged)
        assert_no_duplicates(workers)
        wait_committed_at_ends(bootstrap, group, acknowledged, unique_topic)
        # No stop-the-world: a member gives up only the partitions that move, never all it owns at once, and keeps
        # the others through the rebalance.
        stayed = members[1:]
        for member in stayed:
            owned: set[int] = set()
            for kind, partitions in member.assignment_changes():
                if kind == "assigned":
                    owned |= partitions
                else:
                    assert partitions < owned, f"{member.out.name} gave up {partitions} of {owned} at once"
                    owned -= partitions
        # ... and went on consuming those while the fourth member's partitions were being handed over to it.
        def consumed(when: Callable[[float], bool]) -> set[tuple[str, int]]:
            return {(w.out.name, p) for w in stayed for p, _o, _v, at in w.timed_records() if when(at)}

        kept = consumed(lambda at: at < joined_at) & consumed(lambda at: at > fourth_began)
        during = consumed(lambda at: joined_at < at < fourth_began)
        assert during & kept, (f"no member consumed a partition it kept while the fourth joined "
                               f"({fourth_began - joined_at:.2f} s)")


def find_coordinator(bootstrap: str, group: str) -> int | None:
    """The node id of the group's coordinator, asked of the first broker of `bootstrap`; None while there is none
    (COORDINATOR_NOT_AVAILABLE: its partition of __consumer_offsets is electing a leader)."""
    with RawConnection(bootstrap.split(",")[0]) as raw:
        response = raw.request(FindCoordinatorRequest[3](key=group, key_type=0))
    if response.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE:
        return None
    assert response.error_code == 0, response
    return response.node_id


@pytest.mark.parametrize("zookeeper", CLUSTER_MODES)
def test_the_coordinator_killed_while_records_are_written_keeps_the_members_and_their_epochs(
        tmp_path, unique_topic, zookeeper, workers):
    with fast_group_cluster(tmp_path, zookeeper) as cluster:
        bootstrap, group = cluster.bootstrap_servers, "kill-the-coordinator"
        members = three_members(cluster, tmp_path, workers, unique_topic, group)
        before = cluster.state.group(group)
        producer = BackgroundProducer(bootstrap, unique_topic, "v")
        try:
            wait_until(lambda: all(w.records() for w in members), WAIT_S, message="every member consuming")
            old = find_coordinator(bootstrap, group)
            assert old is not None
            cluster.broker(old).kill()
            survivors = ",".join(b.bootstrap_servers for b in cluster.brokers if b.node_id != old)
            wait_until(lambda: find_coordinator(survivors, group) not in (None, old), WAIT_S,
                       message="a new coordinator")
            producer.wait_for(200)
        finally:
            acknowledged = producer.stop()
        wait_all_written(members, acknowledged)
        assert_no_duplicates(members)
        # The new coordinator loaded the group from its records: the same members at the same epochs, nobody joined
        # again from scratch, and every partition still owned.
        after = cluster.wait_for_group(group, state="Stable", members=3)
        assert {m.member_id: m.member_epoch for m in after.members} == \
            {m.member_id: m.member_epoch for m in before.members}
        assert after.group_epoch == before.group_epoch
        assert sorted(p for m in after.members for _t, p in m.assignment) == list(range(PARTITIONS))
        wait_committed_at_ends(survivors, group, acknowledged, unique_topic)
