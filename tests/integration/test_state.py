"""State inspection as a test uses it: what producers wrote, where offsets stand, what groups and transactions
hold."""
from __future__ import annotations

import asyncio
import time

import pytest
from aiokafka import AIOKafkaConsumer
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import Producer as ConfluentProducer
from kafka import KafkaProducer
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest

from minikafka.state import GroupState, PartitionState, Record, TransactionState
from tests.helpers import wait_until
from tests.raw_client import RawConnection


def confluent_produce(bootstrap: str, topic: str, messages: list[dict]) -> None:
    producer = ConfluentProducer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    errors = []
    try:
        for m in messages:
            producer.produce(topic, on_delivery=lambda err, _msg: errors.append(err) if err else None, **m)
        assert producer.flush(30) == 0
    finally:
        del producer  # librdkafka's threads and connections go now, also when a failure keeps this frame
    assert errors == []


def test_topics_and_partition_state(minikafka_broker):
    broker = minikafka_broker
    broker.state.create_topic("orders", partitions=2, config={"retention.ms": 60000})
    confluent_produce(broker.bootstrap_servers, "orders",
                      [{"value": b"a", "partition": 0}, {"value": b"b", "partition": 0},
                       {"value": b"c", "partition": 1}])
    assert broker.state.topics(include_internal=True) == ["orders"]
    # As in Kafka, __consumer_offsets is created when a client first looks up a group coordinator.
    with RawConnection(broker.bootstrap_servers) as conn:
        assert conn.request(FindCoordinatorRequest[3](key="g", key_type=0)).error_code == 0
    assert broker.state.topics() == ["orders"]
    assert broker.state.topics(include_internal=True) == ["__consumer_offsets", "orders"]
    p0, p1 = broker.state.partitions("orders")
    assert p0 == PartitionState("orders", 0, leader=1, leader_epoch=p0.leader_epoch, replicas=[1], isr=[1],
                                high_watermark=2, log_start_offset=0, log_end_offsets={1: 2}, last_stable_offset=2,
                                sizes=p0.sizes, cleaner_checkpoints={1: None}, dirty_ratios={1: None})  # not compacted
    assert p0.log_end_offset == 2
    assert p0.sizes == {1: p0.size_bytes} and p0.size_bytes > 61  # the leader's log: a batch header and records
    assert (p1.partition, p1.high_watermark, p1.log_end_offsets) == (1, 1, {1: 1})
    assert broker.state.partition("orders", 1) == p1
    with pytest.raises(KeyError):
        broker.state.partitions("nope")
    with pytest.raises(KeyError):
        broker.state.partition("orders", 7)


def test_records_with_keys_headers_and_timestamps(minikafka_broker):
    broker = minikafka_broker
    broker.state.create_topic("events", partitions=2)
    base = int(time.time() * 1000) - 10_000
    confluent_produce(broker.bootstrap_servers, "events", [
        {"key": b"k0", "value": b"v0", "partition": 0, "timestamp": base, "headers": [("h", b"1")]},
        {"key": None, "value": b"v1", "partition": 0, "timestamp": base + 1},
        {"key": b"k2", "value": None, "partition": 1, "timestamp": base + 2, "headers": [("a", b"x"), ("b", b"")]},
    ])
    records = broker.state.records("events")
    assert records == [
        Record("events", 0, 0, base, b"k0", b"v0", [("h", b"1")], 0),
        Record("events", 0, 1, base + 1, None, b"v1", [], 0),
        Record("events", 1, 0, base + 2, b"k2", None, [("a", b"x"), ("b", b"")], 0),
    ]
    assert broker.state.records("events", 0, start_offset=1) == records[1:2]
    assert broker.state.records("events", 0, from_timestamp=base + 1) == records[1:2]
    assert broker.state.records("events", 0, max_records=1) == records[:1]
    assert broker.state.records("events", 1, start_offset=5) == []


def test_records_of_an_empty_or_unknown_topic(minikafka_broker):
    broker = minikafka_broker
    broker.state.create_topic("empty")
    assert broker.state.records("empty") == []
    with pytest.raises(KeyError):
        broker.state.records("never-created-topic-x")


def test_transactions_the_last_stable_offset_and_read_committed_records(minikafka_broker):
    broker = minikafka_broker
    broker.state.create_topic("txn", partitions=2)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, transactional_id="state-committer")
    try:
        producer.init_transactions()
        producer.begin_transaction()
        for value in (b"c0", b"c1"):
            producer.send("txn", value, partition=0)
        producer.commit_transaction()
        producer.begin_transaction()
        producer.send("txn", b"x0", partition=0).get(timeout=20)
        producer.abort_transaction()
    finally:
        producer.close(timeout=10)
    # EndTxn is answered before the markers are written, as in Kafka; CompleteAbort is logged after them.
    wait_until(lambda: broker.state.transaction("state-committer").state == "CompleteAbort",
               message="the coordinator to finish the abort")
    # The partition ends with an abort marker: a read stops there, at either isolation level.
    assert [(r.offset, r.value) for r in broker.state.records("txn", 0, isolation_level="read_committed")] == [
        (0, b"c0"), (1, b"c1")]
    assert [(r.offset, r.value) for r in broker.state.records("txn", 0)] == [(0, b"c0"), (1, b"c1"), (3, b"x0")]
    ended = broker.state.partition("txn", 0)
    assert ended.last_stable_offset == ended.high_watermark == 5

    held = ConfluentProducer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": "state-holder",
                              "transaction.timeout.ms": 300_000})
    try:
        held.init_transactions(30)
        held.begin_transaction()
        held.produce("txn", value=b"o0", partition=0)
        held.produce("txn", value=b"o1", partition=1)
        assert held.flush(30) == 0
        confluent_produce(broker.bootstrap_servers, "txn", [{"value": b"plain", "partition": 0}])
        p0, p1 = broker.state.partitions("txn")
        assert (p0.last_stable_offset, p0.high_watermark) == (5, 7)  # held at the open transaction's first offset
        assert (p1.last_stable_offset, p1.high_watermark) == (0, 1)
        assert [r.value for r in broker.state.records("txn", isolation_level="read_committed")] == [b"c0", b"c1"]
        assert [r.value for r in broker.state.records("txn")] == [b"c0", b"c1", b"x0", b"o0", b"plain", b"o1"]

        committer, holder = broker.state.transactions()
        assert holder == broker.state.transaction("state-holder")
        assert isinstance(holder, TransactionState) and holder.start_time_ms is not None
        assert (holder.transactional_id, holder.state, holder.partitions, holder.timeout_ms) == (
            "state-holder", "Ongoing", [("txn", 0), ("txn", 1)], 300_000)
        assert (committer.transactional_id, committer.state, committer.partitions) == (
            "state-committer", "CompleteAbort", [])
        assert holder.producer_id != committer.producer_id
        with pytest.raises(KeyError):
            broker.state.transaction("state-no-such-id")

        held.abort_transaction(30)
        wait_until(lambda: broker.state.transaction("state-holder").state == "CompleteAbort",
                   message="the coordinator to finish the abort")
        assert [r.value for r in broker.state.records("txn", isolation_level="read_committed")] == [b"c0", b"c1",
                                                                                                     b"plain"]
        assert broker.state.transaction("state-holder").state == "CompleteAbort"
    finally:
        del held  # librdkafka's threads and connections go now, also when a failure keeps this frame


def test_group_members_assignment_and_committed_offsets(minikafka_broker):
    broker = minikafka_broker
    broker.state.create_topic("work", partitions=2)
    confluent_produce(broker.bootstrap_servers, "work", [{"value": b"x", "partition": p} for p in (0, 0, 1)])
    consumer = ConfluentConsumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "workers",
                                  "client.id": "worker-1", "auto.offset.reset": "earliest",
                                  "enable.auto.commit": False})
    try:
        consumer.subscribe(["work"])
        got = 0

        def consumed_three() -> bool:
            nonlocal got
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                got += 1
            return got >= 3

        wait_until(consumed_three, interval=0, message="3 records through the group")
        assert got == 3
        consumer.commit(asynchronous=False)
        assert broker.state.groups() == ["workers"]
        group = broker.state.group("workers")
        assert isinstance(group, GroupState)
        assert (group.group_id, group.state, group.protocol_type) == ("workers", "Stable", "consumer")
        assert len(group.members) == 1
        member = group.members[0]
        assert member.client_id == "worker-1"
        assert member.assignment == [("work", 0), ("work", 1)]
        assert group.offsets == {("work", 0): 2, ("work", 1): 1}
        assert broker.state.committed_offsets("workers") == {("work", 0): 2, ("work", 1): 1}
    finally:
        consumer.close()
    assert broker.state.group("workers").state == "Empty"


def test_aiokafka_group_commit_is_visible(minikafka_broker):
    broker = minikafka_broker
    confluent_produce(broker.bootstrap_servers, "ai", [{"value": b"1"}, {"value": b"2"}])

    async def consume_and_commit() -> None:
        consumer = AIOKafkaConsumer("ai", bootstrap_servers=broker.bootstrap_servers, group_id="ai-group",
                                    auto_offset_reset="earliest", enable_auto_commit=False)
        await consumer.start()
        try:
            for _ in range(2):
                await asyncio.wait_for(consumer.getone(), 20)
            await consumer.commit()
        finally:
            await consumer.stop()

    asyncio.run(consume_and_commit())
    assert broker.state.committed_offsets("ai-group") == {("ai", 0): 2}


def test_cluster_state_reports_each_replica(minikafka_cluster):
    cluster = minikafka_cluster
    confluent_produce(cluster.bootstrap_servers, "c", [{"value": b"1"}])
    state = cluster.state.partition("c", 0)
    assert state.leader == 1 and state.isr == [1]
    assert state.log_end_offsets == {1: 1} and state.high_watermark == state.last_stable_offset == 1


@pytest.mark.minikafka(config={"num.partitions": 3})
def test_create_topic_without_counts_takes_the_broker_defaults(minikafka_broker):
    minikafka_broker.state.create_topic("defaults")
    assert [p.partition for p in minikafka_broker.state.partitions("defaults")] == [0, 1, 2]


@pytest.mark.minikafka(brokers=3)
def test_create_topic_without_counts_takes_the_cluster_replication_factor(minikafka_cluster):
    minikafka_cluster.state.create_topic("replicated")
    (partition,) = minikafka_cluster.state.partitions("replicated")
    assert sorted(partition.replicas) == [1, 2, 3]
