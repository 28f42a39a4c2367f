"""Which group protocols the broker speaks: the classic one, not KIP-848's ConsumerGroupHeartbeat.

A Kafka broker without the new consumer protocol does not list ConsumerGroupHeartbeat (key 68) in ApiVersions;
clients that want it must notice. Classic consumers are unaffected.
"""
from __future__ import annotations

import asyncio
import logging
import struct
import time

from confluent_kafka import Consumer
from kafka import KafkaConsumer
from kafka.protocol.admin.groups import ListGroupsRequest
from kafka.protocol.metadata.api_versions import ApiVersionsRequest

from tests.group_worker import GROUP_BROKER, committed_offsets, create_topic, produce
from tests.raw_client import RawConnection

CONSUMER_GROUP_HEARTBEAT = 68
CLASSIC_GROUP_APIS = {8, 9, 10, 11, 12, 13, 14, 15, 16, 42, 47}
UNSUPPORTED = "ConsumerGroupHeartbeatRequest not supported by broker"


def test_api_versions_lists_classic_group_apis_but_not_consumer_group_heartbeat(broker):
    with RawConnection(broker.bootstrap_servers) as conn:
        resp = conn.request(ApiVersionsRequest[3](client_software_name="t", client_software_version="1"))
        keys = {k.api_key for k in resp.api_keys}
        assert CLASSIC_GROUP_APIS <= keys
        assert CONSUMER_GROUP_HEARTBEAT not in keys


def test_consumer_group_heartbeat_request_closes_the_connection(broker):
    with RawConnection(broker.bootstrap_servers) as conn:
        # A ConsumerGroupHeartbeat v0 request header: the broker closes the connection, as Kafka does for an
        # API key it does not serve.
        frame = struct.pack(">hhih", CONSUMER_GROUP_HEARTBEAT, 0, 1, 4) + b"test" + b"\x00" * 24
        conn.send_bytes(struct.pack(">i", len(frame)) + frame)
        assert conn.read_frame() is None


class _Captured(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def test_confluent_consumer_with_group_protocol_consumer_is_told_the_broker_lacks_it(broker_factory, unique_topic):
    """librdkafka (2.16) learns from ApiVersions that ConsumerGroupHeartbeat is missing, marks the coordinator
    unusable with "ConsumerGroupHeartbeatRequest not supported by broker" and keeps retrying without consuming,
    exactly as against a Kafka broker without KIP-848; it does not fall back to the classic protocol."""
    broker = broker_factory(**GROUP_BROKER)
    create_topic(broker.bootstrap_servers, unique_topic, 1)
    produce(broker.bootstrap_servers, unique_topic, "v", 3, 1)
    captured = _Captured()
    rdkafka_log = logging.getLogger("test.rdkafka.kip848")
    rdkafka_log.addHandler(captured)
    rdkafka_log.setLevel(logging.DEBUG)
    errors = []
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "kip848",
                         "group.protocol": "consumer", "auto.offset.reset": "earliest", "debug": "cgrp",
                         "error_cb": errors.append}, logger=rdkafka_log)
    consumed = []
    try:
        consumer.subscribe([unique_topic])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not any(UNSUPPORTED in line for line in captured.lines):
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                consumed.append(msg.value())
        for _ in range(10):  # and it stays that way: no assignment, nothing consumed
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                consumed.append(msg.value())
        assert consumer.assignment() == []
    finally:
        consumer.close()
        rdkafka_log.removeHandler(captured)
    assert any(UNSUPPORTED in line for line in captured.lines), captured.lines[-20:]
    assert consumed == []
    assert errors == []
    # The broker holds no trace of a group it never served.
    with RawConnection(broker.bootstrap_servers) as conn:
        assert conn.request(ListGroupsRequest[4](states_filter=[])).groups == []


def test_confluent_classic_protocol_is_the_default_and_works(broker_factory, unique_topic):
    broker = broker_factory(**GROUP_BROKER)
    create_topic(broker.bootstrap_servers, unique_topic, 2)
    expected = produce(broker.bootstrap_servers, unique_topic, "c", 20, 2)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "classic-ck",
                         "group.protocol": "classic", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    got: set[str] = set()
    try:
        consumer.subscribe([unique_topic])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and got != expected:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.add(msg.value().decode())
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    assert got == expected


def test_kafka_python_and_aiokafka_use_the_classic_protocol(broker_factory, unique_topic):
    broker = broker_factory(**GROUP_BROKER)
    create_topic(broker.bootstrap_servers, unique_topic, 2)
    expected = produce(broker.bootstrap_servers, unique_topic, "k", 20, 2)

    consumer = KafkaConsumer(unique_topic, bootstrap_servers=broker.bootstrap_servers, group_id="classic-kp",
                             auto_offset_reset="earliest", enable_auto_commit=False)
    got: set[str] = set()
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and got != expected:
            for records in consumer.poll(timeout_ms=500).values():
                got.update(r.value.decode() for r in records)
        consumer.commit()
    finally:
        consumer.close()
    assert got == expected

    async def aio() -> set[str]:
        from aiokafka import AIOKafkaConsumer
        aio_consumer = AIOKafkaConsumer(unique_topic, bootstrap_servers=broker.bootstrap_servers,
                                        group_id="classic-aio", auto_offset_reset="earliest",
                                        enable_auto_commit=False)
        await aio_consumer.start()
        seen: set[str] = set()
        try:
            end = time.monotonic() + 30
            while time.monotonic() < end and seen != expected:
                for records in (await aio_consumer.getmany(timeout_ms=500)).values():
                    seen.update(r.value.decode() for r in records)
            await aio_consumer.commit()
        finally:
            await aio_consumer.stop()
        return seen

    assert asyncio.run(aio()) == expected
    for group in ("classic-kp", "classic-aio"):
        assert committed_offsets(broker.bootstrap_servers, group) == {(unique_topic, 0): 10, (unique_topic, 1): 10}
