"""Fault injection as a test writes it, with what each client library visibly does about the fault."""
from __future__ import annotations

import asyncio
import os
import re
import shlex
import subprocess
import sys
import time
import uuid

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.errors import KafkaTimeoutError as AIOKafkaTimeoutError
from aiokafka.errors import RequestTimedOutError as AIORequestTimedOutError
from confluent_kafka import KafkaError as ConfluentKafkaError
from confluent_kafka import Producer as ConfluentProducer
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import (
    GroupAuthorizationFailedError,
    KafkaError,
    KafkaStorageError,
    KafkaTimeoutError,
    NotLeaderForPartitionError,
    OffsetMetadataTooLargeError,
    OffsetOutOfRangeError,
    PolicyViolationError,
    RequestTimedOutError,
    TopicDeletionDisabledError,
    UnknownTopicOrPartitionError,
)
from kafka.structs import OffsetAndMetadata

from minikafka.control_client import ControlError
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.codec import SCHEMAS
from minikafka.protocol.errors import ErrorCode
from tests.helpers import admin_create_topic, wait_until
from tests.raw_client import RawConnection, record_batch


def kp_producer(broker, **overrides) -> KafkaProducer:
    config = dict(bootstrap_servers=broker.bootstrap_servers, acks="all", linger_ms=0, retry_backoff_ms=20)
    config.update(overrides)
    return KafkaProducer(**config)


def values_of(broker, topic: str, partition: int | None = None) -> list[bytes]:
    return [r.value for r in broker.state.records(topic, partition)]


# ---- injected errors -------------------------------------------------------------------------------------------------

def test_kafka_python_producer_retries_through_injected_not_leader(minikafka_broker):
    broker = minikafka_broker
    broker.state.create_topic("t")
    broker.faults.fail_requests("Produce", "NOT_LEADER_OR_FOLLOWER", count=3)
    producer = kp_producer(broker, retries=10)
    try:
        assert producer.send("t", b"v").get(timeout=30).offset == 0
    finally:
        producer.close()
    assert broker.faults.list() == []  # exactly the 3 injected failures were spent by the retries
    assert values_of(broker, "t") == [b"v"]  # failed attempts appended nothing: no duplicates


def test_a_fault_counts_its_hits_and_can_be_waited_for(minikafka_broker):
    broker = minikafka_broker
    broker.state.create_topic("t")
    fault = broker.faults.fail_requests("Produce", "NOT_ENOUGH_REPLICAS", count=3)
    late = broker.faults.add_latency(50, api="Produce", count=None)
    assert (fault.hits, fault.active, late.hits) == (0, True, 0)
    with pytest.raises(TimeoutError, match=rf"fault {fault.id} \(error, active\) hit 0 request\(s\) of the 1 "):
        fault.wait(timeout=0.2)
    producer = kp_producer(broker, retries=10)
    try:
        assert producer.send("t", b"v").get(timeout=30).offset == 0
    finally:
        producer.close()
    # Used up, it is gone from the active faults but still tells how often it fired.
    assert fault.wait(hits=3, timeout=10).hits == 3 and not fault.active
    assert [f["id"] for f in broker.faults.list()] == [late.id]
    assert late.hits == 4  # every Produce was held back, the three refused ones too
    listed = subprocess.run([sys.executable, "-m", "minikafka", "fault", "list", "--bootstrap-server",
                             broker.bootstrap_servers], capture_output=True, text=True, check=True).stdout
    assert "(hit 4 so far)" in listed
    late.clear()
    assert late.hits == 4 and not late.active
    with pytest.raises(TimeoutError, match=r"no longer active\) hit 3 request\(s\) of the 4 waited for"):
        fault.wait(hits=4, timeout=0.1)


def test_a_dropped_response_makes_a_retry_write_twice_unless_the_producer_is_idempotent(minikafka_broker):
    broker = minikafka_broker
    broker.state.create_topic("lost-answers")
    dropped = broker.faults.drop_responses("Produce", count=1)
    # Not idempotent: the write happened, the client never heard, its retry writes the record again.
    producer = kp_producer(broker, retries=5, enable_idempotence=False, max_in_flight_requests_per_connection=1)
    try:
        producer.send("lost-answers", b"once").get(timeout=30)
    finally:
        producer.close()
    assert dropped.wait(hits=1).hits == 1 and not dropped.active
    assert values_of(broker, "lost-answers") == [b"once", b"once"]
    # Idempotent: the retry is recognized as a duplicate and written once.
    broker.faults.drop_responses("Produce", count=1)
    producer = ConfluentProducer({"bootstrap.servers": broker.bootstrap_servers, "enable.idempotence": True})
    producer.produce("lost-answers", b"exactly-once")
    assert producer.flush(30) == 0
    assert values_of(broker, "lost-answers") == [b"once", b"once", b"exactly-once"]


def test_when_selects_the_requests_a_fault_applies_to(minikafka_broker):
    broker = minikafka_broker
    broker.state.create_topic("selected")
    # Only acks=all produces from client id "billing": another client and acks=1 from billing go through.
    fault = broker.faults.fail_requests("Produce", "NOT_ENOUGH_REPLICAS", count=None,
                                        when={"client_id": "billing", "acks": "all"})
    assert fault.description["when"] == {"client_id": "billing", "acks": -1}
    for client_id, acks in (("reports", "all"), ("billing", 1)):
        producer = kp_producer(broker, client_id=client_id, acks=acks, retries=0)
        try:
            producer.send("selected", f"{client_id}-{acks}".encode()).get(timeout=30)
        finally:
            producer.close()
    producer = kp_producer(broker, client_id="billing", retries=0)
    try:
        with pytest.raises(KafkaError, match="NotEnoughReplicas"):
            producer.send("selected", b"refused").get(timeout=30)
    finally:
        producer.close()
    assert fault.hits == 1
    assert values_of(broker, "selected") == [b"reports-all", b"billing-1"]
    with pytest.raises(ControlError, match="unknown request field 'colour' in when"):
        broker.faults.fail_requests("Produce", "NOT_ENOUGH_REPLICAS", when={"colour": "red"})
    with pytest.raises(ControlError, match="when acks must be a number"):
        broker.faults.fail_requests("Produce", "NOT_ENOUGH_REPLICAS", when={"acks": "some"})


def test_the_third_acks_all_produce_to_a_partition_from_one_client_fails(minikafka_broker):
    """skip=2 with topic, partition and when: the requests that do not match (another client, acks=1, the other
    partition) neither count nor fail; the two matching ones before go through, the third fails, the fourth passes."""
    broker = minikafka_broker
    broker.state.create_topic("orders", partitions=2)
    fault = broker.faults.fail_requests("Produce", "NOT_ENOUGH_REPLICAS", topic="orders", partition=0, skip=2,
                                        when={"client_id": "billing", "acks": "all"})
    assert (fault.description["skip"], fault.skipped, fault.hits) == (2, 0, 0)
    billing = kp_producer(broker, client_id="billing", retries=0, enable_idempotence=False)
    others = [kp_producer(broker, client_id="reports", retries=0),
              kp_producer(broker, client_id="billing", acks=1, retries=0)]
    try:
        for producer in others:  # not selected by when: never counted
            producer.send("orders", b"other", partition=0).get(timeout=30)
        billing.send("orders", b"p1", partition=1).get(timeout=30)  # not orders-0
        assert (fault.skipped, fault.hits) == (0, 0)
        assert billing.send("orders", b"first", partition=0).get(timeout=30).offset == 2
        assert billing.send("orders", b"second", partition=0).get(timeout=30).offset == 3
        assert (fault.skipped, fault.hits, fault.active) == (2, 0, True)
        with pytest.raises(KafkaError, match="NotEnoughReplicas"):
            billing.send("orders", b"third", partition=0).get(timeout=30)
        assert (fault.skipped, fault.hits, fault.active) == (2, 1, False)
        assert billing.send("orders", b"fourth", partition=0).get(timeout=30).offset == 4
    finally:
        for producer in (billing, *others):
            producer.close()
    assert values_of(broker, "orders", 0) == [b"other", b"other", b"first", b"second", b"fourth"]
    with pytest.raises(ControlError, match="skip must not be negative"):
        broker.faults.fail_requests("Produce", "NOT_ENOUGH_REPLICAS", skip=-1)


def test_skip_lets_requests_through_before_a_drop_or_a_latency_applies(minikafka_broker):
    broker = minikafka_broker
    broker.state.create_topic("later")
    dropped = broker.faults.drop_responses("Produce", skip=1, when={"client_id": "dropper"})
    held = broker.faults.add_latency(100, api="Produce", count=1, skip=1, when={"client_id": "slowed"})
    producer = kp_producer(broker, client_id="dropper", retries=5, enable_idempotence=False,
                           max_in_flight_requests_per_connection=1)
    try:
        producer.send("later", b"a").get(timeout=30)  # let through
        producer.send("later", b"b").get(timeout=30)  # written, its answer dropped, the retry writes it again
    finally:
        producer.close()
    assert (dropped.skipped, dropped.hits) == (1, 1)
    assert values_of(broker, "later") == [b"a", b"b", b"b"]
    producer = kp_producer(broker, client_id="slowed")
    try:
        producer.send("later", b"c").get(timeout=30)  # let through
        assert (held.skipped, held.hits) == (1, 0)
        producer.send("later", b"d").get(timeout=30)  # held back 100 ms
    finally:
        producer.close()
    assert (held.skipped, held.hits, held.active) == (1, 1, False)
    listed = subprocess.run([sys.executable, "-m", "minikafka", "fault", "error", "--api", "Produce", "--error",
                             "NOT_ENOUGH_REPLICAS", "--topic", "later", "--skip", "2", "--when",
                             "acks=all,client_id=billing", "--bootstrap-server", broker.bootstrap_servers],
                            capture_output=True, text=True, check=True).stdout
    assert listed.endswith("Produce fails with NOT_ENOUGH_REPLICAS for later for the next 1 request(s) when "
                           "acks=-1, client_id=billing, after letting 2 through (0 so far)\n"), listed


def test_kafka_python_producer_without_retries_sees_the_error(minikafka_broker):
    broker = minikafka_broker
    broker.state.create_topic("t")
    broker.faults.fail_requests("Produce", "NOT_LEADER_OR_FOLLOWER", count=1)
    producer = kp_producer(broker, retries=0, enable_idempotence=False)
    try:
        with pytest.raises(NotLeaderForPartitionError):
            producer.send("t", b"lost").get(timeout=30)
        assert producer.send("t", b"kept").get(timeout=30).offset == 0
    finally:
        producer.close()
    assert values_of(broker, "t") == [b"kept"]


def test_confluent_producer_retries_through_injected_not_leader(minikafka_broker):
    broker = minikafka_broker
    broker.state.create_topic("t")
    broker.faults.fail_requests("Produce", "NOT_LEADER_OR_FOLLOWER", count=2)
    reports = []
    producer = ConfluentProducer({"bootstrap.servers": broker.bootstrap_servers, "retry.backoff.ms": 20,
                                  "linger.ms": 0})
    producer.produce("t", b"v", on_delivery=lambda err, msg: reports.append((err, msg.offset())))
    assert producer.flush(30) == 0
    assert reports == [(None, 0)]
    assert broker.faults.list() == []
    assert values_of(broker, "t") == [b"v"]


def test_aiokafka_producer_retries_through_injected_not_leader(minikafka_broker):
    broker = minikafka_broker
    broker.state.create_topic("t")
    broker.faults.fail_requests("Produce", "NOT_LEADER_OR_FOLLOWER", count=2)

    async def run() -> int:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers, retry_backoff_ms=20)
        await producer.start()
        try:
            return (await producer.send_and_wait("t", b"v")).offset
        finally:
            await producer.stop()

    assert asyncio.run(run()) == 0
    assert broker.faults.list() == []
    assert values_of(broker, "t") == [b"v"]


def test_error_for_one_partition_leaves_the_others_of_the_request_alone(minikafka_broker):
    broker = minikafka_broker
    broker.state.create_topic("t", partitions=2)
    broker.faults.fail_requests("Produce", "NOT_LEADER_OR_FOLLOWER", count=1, topic="t", partition=1)
    producer = kp_producer(broker, retries=0, enable_idempotence=False, linger_ms=200)
    try:
        ok = producer.send("t", b"p0", partition=0)
        bad = producer.send("t", b"p1", partition=1)
        producer.flush(timeout=30)
        assert ok.get(timeout=1).offset == 0
        with pytest.raises(NotLeaderForPartitionError):
            bad.get(timeout=1)
    finally:
        producer.close()
    assert values_of(broker, "t", 0) == [b"p0"]
    assert values_of(broker, "t", 1) == []


def test_fetch_error_for_a_partition_is_retried_by_the_consumer(minikafka_broker):
    broker = minikafka_broker
    broker.state.create_topic("t")
    producer = kp_producer(broker)
    producer.send("t", b"v").get(timeout=30)
    producer.close()
    broker.faults.fail_requests("Fetch", "NOT_LEADER_OR_FOLLOWER", count=2, topic="t", partition=0)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="earliest", retry_backoff_ms=20)
    try:
        consumer.assign([TopicPartition("t", 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while not got and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                got += [r.value for r in records]
    finally:
        consumer.close()
    assert got == [b"v"]
    assert broker.faults.list() == []


def test_metadata_error_for_a_topic_is_visible_then_spent(minikafka_broker):
    broker = minikafka_broker
    broker.state.create_topic("t")
    broker.faults.fail_requests("Metadata", "UNKNOWN_TOPIC_OR_PARTITION", count=None, topic="t")
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=None)
    try:
        # kafka-python raises when every topic in the answer is in error, and returns None otherwise.
        try:
            visible = consumer.partitions_for_topic("t")
        except UnknownTopicOrPartitionError:
            visible = None
        assert not visible
        broker.faults.clear("error")
        consumer._client.cluster.request_update()
        assert consumer.partitions_for_topic("t") == {0}
    finally:
        consumer.close()


def test_errors_for_one_topic_skip_requests_that_do_not_name_it(minikafka_broker):
    broker = minikafka_broker
    broker.state.create_topic("other")
    fault = broker.faults.fail_requests("Produce", "NOT_LEADER_OR_FOLLOWER", count=1, topic="t")
    producer = kp_producer(broker, retries=0, enable_idempotence=False)
    try:
        assert producer.send("other", b"x").get(timeout=30).offset == 0
    finally:
        producer.close()
    assert [f["id"] for f in broker.faults.list()] == [fault.id]  # not spent by a request for another topic


def test_whole_request_error_on_a_group_api(minikafka_broker):
    broker = minikafka_broker
    admin_create_topic(broker.bootstrap_servers, "t", 1)
    broker.faults.fail_requests("FindCoordinator", "COORDINATOR_NOT_AVAILABLE", count=2)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id="g",
                             auto_offset_reset="earliest", retry_backoff_ms=20)
    try:
        # The topic's metadata before the first join, so kafka-python 3.0.12 does not lose the member in the
        # rebalance a later metadata change would start (see tests/group_worker.py).
        consumer.subscribe(["t"])
        consumer.topics()

        def assigned() -> bool:
            consumer.poll(timeout_ms=200)
            return bool(consumer.assignment())

        wait_until(assigned, timeout=30, interval=0, message="the consumer's partition assignment")
        assert consumer.assignment() == {TopicPartition("t", 0)}
    finally:
        consumer.close()
    assert broker.faults.list() == []


def test_bad_faults_are_refused_with_a_reason(minikafka_broker):
    faults = minikafka_broker.faults
    with pytest.raises(ControlError, match="unknown API"):
        faults.fail_requests("NoSuchApi", "NOT_LEADER_OR_FOLLOWER")
    with pytest.raises(ControlError, match="unknown error code"):
        faults.fail_requests("Produce", "NOT_A_CODE")
    with pytest.raises(ControlError, match="do not name topics"):
        faults.fail_requests("Heartbeat", "REBALANCE_IN_PROGRESS", topic="t")
    with pytest.raises(ControlError, match="per topic, not per partition"):
        faults.fail_requests("Metadata", "LEADER_NOT_AVAILABLE", topic="t", partition=0)
    assert faults.list() == []


def test_fault_as_context_manager_is_undone_on_exit(minikafka_broker):
    broker = minikafka_broker
    with broker.faults.fail_requests("Produce", "NOT_LEADER_OR_FOLLOWER", count=None) as fault:
        assert broker.faults.list()[0]["id"] == fault.id
    assert broker.faults.list() == []


# ---- latency -------------------------------------------------------------------------------------------------------

def test_latency_beyond_request_timeout_surfaces_as_a_timeout_in_kafka_python(minikafka_broker):
    broker = minikafka_broker
    broker.state.create_topic("t")
    producer = kp_producer(broker, retries=0, enable_idempotence=False, request_timeout_ms=1000,
                           delivery_timeout_ms=1500)
    try:
        producer.send("t", b"warm").get(timeout=30)
        fault = broker.faults.add_latency(3000, api="Produce")
        started = time.monotonic()
        with pytest.raises((KafkaTimeoutError, RequestTimedOutError)):
            producer.send("t", b"slow").get(timeout=30)
        assert time.monotonic() - started < 3.0  # the client gave up; it did not wait for the response
        fault.clear()
    finally:
        producer.close()
    fresh = kp_producer(broker)
    try:
        assert fresh.send("t", b"fast").get(timeout=30).offset >= 1
    finally:
        fresh.close()


def test_latency_beyond_message_timeout_fails_confluent_delivery(minikafka_broker):
    broker = minikafka_broker
    broker.state.create_topic("t")
    broker.faults.add_latency(5000, api="Produce")
    reports = []
    producer = ConfluentProducer({"bootstrap.servers": broker.bootstrap_servers, "message.timeout.ms": 1500,
                                  "request.timeout.ms": 1000, "linger.ms": 0})
    producer.produce("t", b"slow", on_delivery=lambda err, msg: reports.append(err))
    producer.flush(20)
    assert len(reports) == 1 and reports[0] is not None
    assert reports[0].code() in (ConfluentKafkaError._MSG_TIMED_OUT, ConfluentKafkaError._TIMED_OUT,
                                 ConfluentKafkaError.REQUEST_TIMED_OUT)
    assert broker.faults.clear("latency") == 1


def test_latency_times_out_aiokafka_request(minikafka_broker):
    broker = minikafka_broker
    broker.state.create_topic("t")

    async def run() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=1000,
                                    enable_idempotence=False)
        await producer.start()
        try:
            await producer.send_and_wait("t", b"warm")
            broker.faults.add_latency(4000, api="Produce", count=1)
            with pytest.raises((AIOKafkaTimeoutError, AIORequestTimedOutError)):
                await producer.send_and_wait("t", b"slow")
        finally:
            await producer.stop()

    asyncio.run(run())


def test_latency_delays_but_does_not_fail_when_within_timeout(minikafka_broker):
    broker = minikafka_broker
    broker.state.create_topic("t")
    producer = kp_producer(broker)
    try:
        producer.send("t", b"warm").get(timeout=30)
        broker.faults.add_latency(400, api="Produce", count=1)
        started = time.monotonic()
        assert producer.send("t", b"late").get(timeout=30).offset == 1
        assert time.monotonic() - started >= 0.4
    finally:
        producer.close()
    assert broker.faults.list() == []


# ---- connections ---------------------------------------------------------------------------------------------------

def test_closed_connections_are_reopened_by_kafka_python_and_aiokafka(minikafka_broker):
    broker = minikafka_broker
    broker.state.create_topic("t")
    producer = kp_producer(broker, retries=5)
    try:
        producer.send("t", b"1").get(timeout=30)
        assert broker.faults.close_connections() >= 1
        assert producer.send("t", b"2").get(timeout=30).offset == 1
    finally:
        producer.close()

    async def consume() -> list[bytes]:
        consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest",
                                    enable_auto_commit=False, retry_backoff_ms=20)
        await consumer.start()
        try:
            consumer.assign([TopicPartition("t", 0)])
            first = await asyncio.wait_for(consumer.getone(), 20)
            assert broker.faults.close_connections() >= 1
            second = await asyncio.wait_for(consumer.getone(), 20)
            return [first.value, second.value]
        finally:
            await consumer.stop()

    assert asyncio.run(consume()) == [b"1", b"2"]


def test_closed_connections_are_reopened_by_confluent(minikafka_broker):
    broker = minikafka_broker
    broker.state.create_topic("t")
    reports = []
    producer = ConfluentProducer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    producer.produce("t", b"1", on_delivery=lambda err, msg: reports.append(err))
    assert producer.flush(20) == 0
    assert broker.faults.close_connections() >= 1
    producer.produce("t", b"2", on_delivery=lambda err, msg: reports.append(err))
    assert producer.flush(20) == 0
    assert reports == [None, None]
    assert values_of(broker, "t") == [b"1", b"2"]


# ---- a full disk ---------------------------------------------------------------------------------------------------

def test_full_disk_fails_appends_with_storage_error_until_undone(minikafka_broker):
    broker = minikafka_broker
    broker.state.create_topic("t")
    producer = kp_producer(broker, retries=0, enable_idempotence=False)
    try:
        producer.send("t", b"before").get(timeout=30)
        disk = broker.faults.fill_disk()
        with pytest.raises(KafkaStorageError):
            producer.send("t", b"refused").get(timeout=30)
        assert broker.state.partition("t", 0).log_end_offset == 1
        disk.clear()
        assert producer.send("t", b"after").get(timeout=30).offset == 1
    finally:
        producer.close()
    assert values_of(broker, "t") == [b"before", b"after"]


def test_disk_quota_admits_appends_that_fit(minikafka_broker):
    broker = minikafka_broker
    broker.state.create_topic("t")
    used = broker.state.describe()[0]["disk_usage_bytes"]
    broker.faults.fill_disk(quota_bytes=used + 5000)
    producer = kp_producer(broker, retries=0, enable_idempotence=False)
    try:
        assert producer.send("t", b"small").get(timeout=30).offset == 0
        with pytest.raises(KafkaStorageError):
            producer.send("t", b"x" * 20000).get(timeout=30)
    finally:
        producer.close()
    assert values_of(broker, "t") == [b"small"]


def test_full_disk_also_refuses_offset_commits_until_undone(minikafka_broker):
    broker = minikafka_broker
    broker.state.create_topic("t")
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id="g", enable_auto_commit=False,
                             retry_backoff_ms=50)
    offsets = {TopicPartition("t", 0): OffsetAndMetadata(1, "", -1)}
    try:
        with broker.faults.fill_disk():
            with pytest.raises(KafkaTimeoutError):  # the coordinator answers NOT_COORDINATOR; retries run out
                consumer.commit(offsets, timeout_ms=2000)
            assert broker.state.committed_offsets("g") == {}
        consumer.commit(offsets)
    finally:
        consumer.close()
    assert broker.state.committed_offsets("g") == {("t", 0): 1}


def test_restart_forgets_faults_and_keeps_data(minikafka_broker):
    broker = minikafka_broker
    producer = kp_producer(broker)
    producer.send("t", b"kept").get(timeout=30)
    producer.close()
    broker.faults.fill_disk()
    broker.faults.add_latency(100)
    broker.restart()
    assert broker.faults.list() == []
    assert values_of(broker, "t") == [b"kept"]


def test_unknown_topic_error_can_be_injected_into_list_offsets(minikafka_broker):
    broker = minikafka_broker
    broker.state.create_topic("t")
    broker.faults.fail_requests("ListOffsets", "UNKNOWN_TOPIC_OR_PARTITION", count=None, topic="t")
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=None, request_timeout_ms=3000)
    try:
        with pytest.raises((UnknownTopicOrPartitionError, KafkaTimeoutError)):
            consumer.end_offsets([TopicPartition("t", 0)], timeout_ms=2000)
        broker.faults.clear()
        assert consumer.end_offsets([TopicPartition("t", 0)]) == {TopicPartition("t", 0): 0}
    finally:
        consumer.close()


# ---- errors in admin and group APIs: the request is not carried out, the client sees the code ----------------------

def test_refused_create_and_delete_topics_change_nothing(minikafka_broker):
    broker = minikafka_broker
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        broker.faults.fail_requests("CreateTopics", "POLICY_VIOLATION")
        with pytest.raises(PolicyViolationError):
            admin.create_topics({"x": {"num_partitions": 1}})
        assert broker.state.topics() == []
        admin.create_topics({"x": {"num_partitions": 1}})
        broker.faults.fail_requests("DeleteTopics", "TOPIC_DELETION_DISABLED")
        with pytest.raises(TopicDeletionDisabledError):
            admin.delete_topics(["x"])
        assert broker.state.topics() == ["x"]
    finally:
        admin.close()


def test_group_api_errors_reach_the_consumer_and_admin(minikafka_broker):
    broker = minikafka_broker
    broker.state.create_topic("x", partitions=2)
    broker.faults.fail_requests("JoinGroup", "COORDINATOR_LOAD_IN_PROGRESS", count=2)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id="g",
                             auto_offset_reset="earliest", enable_auto_commit=False, retry_backoff_ms=20)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        # kafka-python 3.0.12 can lose a join it assigned before it knew the topic; metadata first avoids that.
        assert consumer.partitions_for_topic("x") == {0, 1}
        consumer.subscribe(["x"])
        deadline = time.monotonic() + 30
        while len(consumer.assignment()) < 2 and time.monotonic() < deadline:
            consumer.poll(timeout_ms=100)
        assert len(consumer.assignment()) == 2  # joined after the two refused attempts
        assert broker.faults.list() == []

        broker.faults.fail_requests("OffsetCommit", "OFFSET_METADATA_TOO_LARGE", topic="x", partition=1)
        with pytest.raises(OffsetMetadataTooLargeError):
            consumer.commit({TopicPartition("x", 0): OffsetAndMetadata(5, "", -1),
                             TopicPartition("x", 1): OffsetAndMetadata(7, "", -1)})
        assert broker.state.committed_offsets("g") == {("x", 0): 5}  # the other partition was committed

        broker.faults.fail_requests("OffsetFetch", "GROUP_AUTHORIZATION_FAILED")
        with pytest.raises(GroupAuthorizationFailedError):
            admin.list_group_offsets("g")
        broker.faults.fail_requests("DescribeGroups", "GROUP_AUTHORIZATION_FAILED")
        assert "GroupAuthorizationFailedError" in admin.describe_groups(["g"])["g"]["error"]
    finally:
        consumer.close()
        admin.close()


def test_refused_delete_records_for_one_partition(minikafka_broker):
    broker = minikafka_broker
    broker.state.create_topic("x", partitions=2)
    producer = kp_producer(broker)
    for partition in (0, 1):
        producer.send("x", b"v", partition=partition).get(timeout=30)
    producer.close()
    broker.faults.fail_requests("DeleteRecords", "OFFSET_OUT_OF_RANGE", topic="x", partition=0)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        with pytest.raises(OffsetOutOfRangeError):
            admin.delete_records({TopicPartition("x", 0): 1, TopicPartition("x", 1): 1})
    finally:
        admin.close()
    assert [p.log_start_offset for p in broker.state.partitions("x")] == [0, 1]


# ---- replica requests and client requests ---------------------------------------------------------------------------

FOLLOWER_ID = 2


def topic_id_of(conn: RawConnection, topic: str) -> uuid.UUID:
    R = SCHEMAS[ApiKey.METADATA].request[12]
    response = conn.request(R(topics=[R.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False,
                              include_topic_authorized_operations=False))
    return response.topics[0].topic_id


def raw_fetch(conn: RawConnection, topic: str, *, replica_id: int, version: int = 12,
              topic_id: uuid.UUID | None = None) -> tuple[int, bytes]:
    """One Fetch of partition 0 from offset 0, from a follower (replica_id >= 0) or a consumer (-1): its error and
    records. From version 15 the replica id travels in ReplicaState, as brokers send it (KIP-903)."""
    R = SCHEMAS[ApiKey.FETCH].request[version]
    partition = R.FetchTopic.FetchPartition(partition=0, current_leader_epoch=-1, fetch_offset=0,
                                            last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1 << 20)
    fetch_topic = (R.FetchTopic(topic=topic, partitions=[partition]) if version < 13
                   else R.FetchTopic(topic_id=topic_id, partitions=[partition]))
    fields = dict(max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1,
                  topics=[fetch_topic], forgotten_topics_data=[], rack_id="")
    if version >= 15:
        fields["replica_state"] = R.ReplicaState(replica_id=replica_id, replica_epoch=-1)
    else:
        fields["replica_id"] = replica_id
    data = conn.request(R(**fields)).responses[0].partitions[0]
    return data.error_code, bytes(data.records or b"")


def raw_offset_for_leader_epoch(conn: RawConnection, topic: str, *, replica_id: int) -> int:
    R = SCHEMAS[ApiKey.OFFSET_FOR_LEADER_EPOCH].request[4]
    P = R.OffsetForLeaderTopic.OffsetForLeaderPartition
    response = conn.request(R(replica_id=replica_id, topics=[R.OffsetForLeaderTopic(
        topic=topic, partitions=[P(partition=0, current_leader_epoch=-1, leader_epoch=0)])]))
    return response.topics[0].partitions[0].error_code


def consume_all(broker, topic: str) -> list[bytes]:
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="earliest", retry_backoff_ms=20)
    got: list[bytes] = []
    try:
        consumer.assign([TopicPartition(topic, 0)])
        deadline = time.monotonic() + 30
        while not got and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                got += [r.value for r in records]
    finally:
        consumer.close()
    return got


@pytest.mark.parametrize("version", [12, 15])
def test_replica_fetch_fault_leaves_consumers_alone(minikafka_broker, version):
    broker = minikafka_broker
    broker.state.create_topic("t")
    producer = kp_producer(broker)
    producer.send("t", b"v").get(timeout=30)
    producer.close()
    fault = broker.faults.fail_requests("Fetch", "NOT_LEADER_OR_FOLLOWER", count=None, source="replica")
    assert fault.description["source"] == "replica"
    with RawConnection(broker.bootstrap_servers) as conn:
        topic_id = topic_id_of(conn, "t")
        error, records = raw_fetch(conn, "t", replica_id=FOLLOWER_ID, version=version, topic_id=topic_id)
        assert (error, records) == (ErrorCode.NOT_LEADER_OR_FOLLOWER, b"")
        error, records = raw_fetch(conn, "t", replica_id=-1, version=version, topic_id=topic_id)
        assert error == ErrorCode.NONE and records
    assert consume_all(broker, "t") == [b"v"]
    assert [f["id"] for f in broker.faults.list()] == [fault.id]  # still there: only replicas spend it


def test_client_fetch_fault_leaves_replicas_alone(minikafka_broker):
    broker = minikafka_broker
    broker.state.create_topic("t")
    producer = kp_producer(broker)
    producer.send("t", b"v").get(timeout=30)
    producer.close()
    broker.faults.fail_requests("Fetch", "KAFKA_STORAGE_ERROR", count=1, topic="t", source="client")
    with RawConnection(broker.bootstrap_servers) as conn:
        # Broker 2 is no replica of t-0 on a cluster of one broker: the leader itself refuses its fetch, as Kafka
        # refuses an unassigned replica, and the client fault is neither applied nor spent.
        assert raw_fetch(conn, "t", replica_id=FOLLOWER_ID) == (ErrorCode.NOT_LEADER_OR_FOLLOWER, b"")
        assert len(broker.faults.list()) == 1
        assert raw_fetch(conn, "t", replica_id=-1) == (ErrorCode.KAFKA_STORAGE_ERROR, b"")
    assert broker.faults.list() == []


def test_offset_for_leader_epoch_from_a_replica_is_a_replica_request(minikafka_broker):
    broker = minikafka_broker
    broker.state.create_topic("t")
    broker.faults.fail_requests("OffsetForLeaderEpoch", "FENCED_LEADER_EPOCH", count=None, source="replica")
    with RawConnection(broker.bootstrap_servers) as conn:
        assert raw_offset_for_leader_epoch(conn, "t", replica_id=-1) == ErrorCode.NONE
        assert raw_offset_for_leader_epoch(conn, "t", replica_id=FOLLOWER_ID) == ErrorCode.FENCED_LEADER_EPOCH


def test_latency_for_replica_requests_only(minikafka_broker):
    broker = minikafka_broker
    broker.state.create_topic("t")
    broker.faults.add_latency(300, api="Fetch", count=1, source="replica")
    with RawConnection(broker.bootstrap_servers) as conn:
        raw_fetch(conn, "t", replica_id=-1)
        assert len(broker.faults.list()) == 1  # a consumer's fetch was not held back
        started = time.monotonic()
        raw_fetch(conn, "t", replica_id=FOLLOWER_ID)
        assert time.monotonic() - started >= 0.3
    assert broker.faults.list() == []


def test_source_selectors_that_can_never_match_are_refused(minikafka_broker):
    faults = minikafka_broker.faults
    with pytest.raises(ControlError, match="Produce requests never come from replicas"):
        faults.fail_requests("Produce", "NOT_LEADER_OR_FOLLOWER", source="replica")
    with pytest.raises(ControlError, match="never come from replicas"):
        faults.add_latency(100, api="Metadata", source="replica")
    with pytest.raises(ControlError, match="unknown request source 'broker'"):
        faults.fail_requests("Fetch", "NOT_LEADER_OR_FOLLOWER", source="broker")
    assert faults.list() == []


def test_api_names_and_keys_name_the_same_rule(minikafka_broker):
    faults = minikafka_broker.faults
    named = [faults.fail_requests(api, "NOT_LEADER_OR_FOLLOWER").description
             for api in ("ListOffsets", "ListOffsetsRequest", "list_offsets", 2, "2")]
    assert {(d["api"], d["api_key"]) for d in named} == {("ListOffsets", 2)}


# ---- a full disk: the figures, the broker's log, the CLI ------------------------------------------------------------

QUOTA_REFUSAL = re.compile(r"appending (\d+) bytes would take the log dirs to (\d+) bytes, past the disk quota of "
                           r"(\d+) \((\d+) in use, (\d+) free\)")


def raw_produce(conn: RawConnection, topic: str, records: bytes) -> tuple[int, str | None]:
    R = SCHEMAS[ApiKey.PRODUCE].request[9]
    response = conn.request(R(transactional_id=None, acks=1, timeout_ms=10000, topic_data=[R.TopicProduceData(
        name=topic, partition_data=[R.TopicProduceData.PartitionProduceData(index=0, records=records)])]))
    answer = response.responses[0].partition_responses[0]
    return answer.error_code, answer.error_message


def bytes_under(paths: list[str]) -> int:
    return sum(os.path.getsize(os.path.join(root, name)) for path in paths for root, _dirs, names in os.walk(path)
               for name in names)


def refusals_logged(broker, topic: str) -> int:
    return broker.log_path.read_text().count(f"ERROR minikafka.faults: append to {topic}-0 refused")


def test_disk_quota_figures_add_up(minikafka_broker):
    broker = minikafka_broker
    broker.state.create_topic("t")
    log_dirs = broker.state.describe()[0]["log_dirs"]
    with RawConnection(broker.bootstrap_servers) as conn:
        assert raw_produce(conn, "t", record_batch([b"before"]))[0] == ErrorCode.NONE
        used = bytes_under(log_dirs)
        fault = broker.faults.fill_disk(quota_bytes=used + 1000)
        assert fault.description == {"kind": "disk", "id": fault.id, "quota_bytes": used + 1000, "used_bytes": used,
                                     "free_bytes": 1000, "hits": 0}
        assert broker.faults.list() == [fault.description]
        big = record_batch([b"x" * 2000])
        code, message = raw_produce(conn, "t", big)
        assert fault.hits == 1  # the append it refused
    assert code == ErrorCode.KAFKA_STORAGE_ERROR
    assert "No space left on device" in message
    size, total, quota, in_use, free = map(int, QUOTA_REFUSAL.search(message).groups())
    assert (size, in_use, quota, free) == (len(big), used, used + 1000, 1000)
    assert total == in_use + size > quota
    fault.clear()


def test_full_disk_is_logged_once_per_partition_and_episode(minikafka_broker):
    broker = minikafka_broker
    broker.state.create_topic("t")
    broker.state.create_topic("u")
    big, small = record_batch([b"x" * 3000]), record_batch([b"y"])
    with RawConnection(broker.bootstrap_servers) as conn:
        broker.faults.fill_disk(quota_bytes=broker.state.describe()[0]["disk_usage_bytes"] + 2000)
        for _ in range(5):  # a producer retrying against the full disk
            assert raw_produce(conn, "t", big)[0] == ErrorCode.KAFKA_STORAGE_ERROR
        assert raw_produce(conn, "u", big)[0] == ErrorCode.KAFKA_STORAGE_ERROR
        assert (refusals_logged(broker, "t"), refusals_logged(broker, "u")) == (1, 1)

        assert raw_produce(conn, "t", small)[0] == ErrorCode.NONE  # an append that fits ends t's episode
        for _ in range(3):
            assert raw_produce(conn, "t", big)[0] == ErrorCode.KAFKA_STORAGE_ERROR
        assert raw_produce(conn, "u", big)[0] == ErrorCode.KAFKA_STORAGE_ERROR  # u's episode goes on
        assert (refusals_logged(broker, "t"), refusals_logged(broker, "u")) == (2, 1)

        broker.faults.clear("disk")  # clearing the fault ends every episode
        broker.faults.fill_disk()
        assert raw_produce(conn, "u", big)[0] == ErrorCode.KAFKA_STORAGE_ERROR
        assert (refusals_logged(broker, "t"), refusals_logged(broker, "u")) == (2, 2)


def run_cli(broker, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "minikafka", *args, "--bootstrap-server", broker.bootstrap_servers],
                          input=stdin, capture_output=True, timeout=60)


def test_cli_produce_on_a_full_disk_shows_the_brokers_error(minikafka_broker):
    broker = minikafka_broker
    broker.state.create_topic("t")
    added = run_cli(broker, "fault", "disk-full")
    assert added.returncode == 0 and re.match(rb"Added fault \d+: disk quota ", added.stdout)
    quota = broker.faults.list()[0]["quota_bytes"]
    assert f"disk quota {quota} bytes: ".encode() in run_cli(broker, "fault", "list").stdout
    failed = run_cli(broker, "produce", "-t", "t", "--delivery-timeout-ms", "1500", stdin=b"x\n")
    stderr = failed.stderr.decode()
    assert failed.returncode == 1
    # said at once, while the producer still retries, and again in the final error
    assert "% t-0: the broker answered KAFKA_STORAGE_ERROR ([Errno 28] No space left on device" in stderr
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("Error: 1 message(s) not delivered within --delivery-timeout-ms (1500 ms); "
                           "the broker last answered t-0 with KAFKA_STORAGE_ERROR (")
    assert "No space left on device" in last
    assert refusals_logged(broker, "t") == 1


def test_cli_fault_error_with_source_and_the_readme_line(minikafka_broker):
    broker = minikafka_broker
    added = run_cli(broker, "fault", "error", "--api", "Fetch", "--error", "NOT_LEADER_OR_FOLLOWER", "--forever",
                    "--source", "replica")
    assert added.stdout == b"Added fault 1: Fetch from replicas fails with NOT_LEADER_OR_FOLLOWER until cleared\n"
    assert broker.faults.list()[0]["source"] == "replica"
    refused = run_cli(broker, "fault", "error", "--api", "Produce", "--error", "NOT_LEADER_OR_FOLLOWER",
                      "--source", "replica")
    assert refused.returncode == 1 and b"never come from replicas" in refused.stderr
    readme = run_cli(broker, *shlex.split(
        "fault error --api Produce --error NOT_LEADER_OR_FOLLOWER --count 3 --topic orders --partition 0"))
    assert readme.returncode == 0, readme.stderr
    assert readme.stdout == (b"Added fault 2: Produce fails with NOT_LEADER_OR_FOLLOWER for orders-0 "
                             b"for the next 3 request(s)\n")


def test_when_topic_and_partition_select_for_every_rule_fault(minikafka_broker):
    """when topic (and partition) selects the requests with entries for it: a drop-response to orders-0 leaves a
    produce to orders-1 answered; an error rule given them in when answers that partition's entries only."""
    broker = minikafka_broker
    broker.state.create_topic("routed", partitions=2)
    dropped = broker.faults.drop_responses("Produce", when={"topic": "routed", "partition": 0})
    assert dropped.description["when"] == {"topic": "routed", "partition": 0}
    producer = kp_producer(broker, client_id="router", retries=5, enable_idempotence=False,
                           max_in_flight_requests_per_connection=1)
    try:
        producer.send("routed", b"one", partition=1).get(timeout=30)  # not selected
        assert dropped.hits == 0
        producer.send("routed", b"zero", partition=0).get(timeout=30)  # written, answer dropped, written again
    finally:
        producer.close()
    assert dropped.hits == 1
    assert (values_of(broker, "routed", 0), values_of(broker, "routed", 1)) == ([b"zero", b"zero"], [b"one"])
    out = subprocess.run([sys.executable, "-m", "minikafka", "fault", "error", "--api", "Produce", "--error",
                          "NOT_ENOUGH_REPLICAS", "--when", "topic=routed,partition=1,client_id=billing",
                          "--bootstrap-server", broker.bootstrap_servers], capture_output=True, text=True, check=True)
    failing = next(f for f in broker.faults.list() if f.get("kind") == "error")
    assert (failing["topic"], failing["partition"], failing["when"]) == ("routed", 1, {"client_id": "billing"}), out
    billing = kp_producer(broker, client_id="billing", retries=0)
    try:
        billing.send("routed", b"passes", partition=0).get(timeout=30)
        with pytest.raises(KafkaError, match="NotEnoughReplicas"):
            billing.send("routed", b"refused", partition=1).get(timeout=30)
    finally:
        billing.close()
    assert values_of(broker, "routed", 1) == [b"one"]
    with pytest.raises(ControlError, match="when partition needs its topic"):
        broker.faults.add_latency(10, api="Fetch", when={"partition": 0})


def test_when_min_and_max_offset_select_the_commits_and_fetches_carrying_them(minikafka_broker):
    broker = minikafka_broker
    broker.state.create_topic("ranged")
    fault = broker.faults.fail_requests("OffsetCommit", "OFFSET_METADATA_TOO_LARGE", count=None,
                                        when={"topic": "ranged", "min_offset": 5, "max_offset": 9})
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id="ranged-g",
                             enable_auto_commit=False)
    try:
        for offset in (4, 10):  # outside the range: committed
            consumer.commit({TopicPartition("ranged", 0): OffsetAndMetadata(offset, "", -1)})
        assert fault.hits == 0
        with pytest.raises(OffsetMetadataTooLargeError):
            consumer.commit({TopicPartition("ranged", 0): OffsetAndMetadata(7, "", -1)})
        assert fault.hits == 1
        assert broker.state.committed_offsets("ranged-g") == {("ranged", 0): 10}
    finally:
        consumer.close()
    with pytest.raises(ControlError, match="when min_offset must be a number"):
        broker.faults.add_latency(1, api="Fetch", when={"min_offset": "x"})
