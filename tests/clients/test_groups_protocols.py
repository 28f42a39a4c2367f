"""Which group protocols the broker speaks: the classic one, not KIP-848's ConsumerGroupHeartbeat.

A Kafka broker without the new consumer protocol does not list ConsumerGroupHeartbeat (key 68) in ApiVersions;
clients that want it must notice and fail clearly (or fall back). Classic consumers are unaffected.
"""
from __future__ import annotations

import asyncio
import struct
import time

from confluent_kafka import Consumer, KafkaError, KafkaException
from kafka import KafkaConsumer
from kafka.protocol.metadata.api_versions import ApiVersionsRequest

from tests.clients.test_groups_support import GROUP_BROKER, committed_offsets, create_topic, produce
from tests.raw_client import RawConnection

CONSUMER_GROUP_HEARTBEAT = 68
CLASSIC_GROUP_APIS = {8, 9, 10, 11, 12, 13, 14, 15, 16, 42, 47}


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


def test_confluent_consumer_with_group_protocol_consumer_fails_clearly(broker_factory, unique_topic):
    broker = broker_factory(**GROUP_BROKER)
    create_topic(broker.bootstrap_servers, unique_topic, 1)
    produce(broker.bootstrap_servers, unique_topic, "v", 3, 1)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "kip848",
                         "group.protocol": "consumer", "auto.offset.reset": "earliest"})
    errors = []
    try:
        consumer.subscribe([unique_topic])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not errors:
            try:
                msg = consumer.poll(0.5)
            except KafkaException as exc:
                errors.append(exc.args[0])
                continue
            if msg is not None and msg.error() is not None:
                errors.append(msg.error())
            assert msg is None or msg.error() is not None, "consumed without a group protocol the broker has"
    finally:
        consumer.close()
    assert errors, "the consumer neither failed nor reported an error"
    error = errors[0]
    assert error.code() == KafkaError._UNSUPPORTED_FEATURE
    assert "ConsumerGroupHeartbeat" in error.str() or "KIP-848" in error.str() or "consumer" in error.str()


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
