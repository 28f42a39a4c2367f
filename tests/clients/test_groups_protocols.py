"""Which group protocols the broker speaks: the classic one, and KIP-848's ConsumerGroupHeartbeat beside it.

ApiVersions lists the classic group APIs and ConsumerGroupHeartbeat (key 68) and ConsumerGroupDescribe (key 69),
versions 0-1 as Kafka 4.1; consumers that do not ask for the new protocol keep using the classic one
(tests/clients/test_consumer_group_protocol.py has the consumers that do).
"""
from __future__ import annotations

import asyncio
import time

from confluent_kafka import Consumer
from kafka import KafkaConsumer
from kafka.protocol.metadata.api_versions import ApiVersionsRequest

from tests.group_worker import GROUP_BROKER, committed_offsets, create_topic, produce
from tests.raw_client import RawConnection

CONSUMER_GROUP_HEARTBEAT = 68
CONSUMER_GROUP_DESCRIBE = 69
CLASSIC_GROUP_APIS = {8, 9, 10, 11, 12, 13, 14, 15, 16, 42, 47}


def test_api_versions_lists_classic_group_apis_and_consumer_group_heartbeat(broker):
    with RawConnection(broker.bootstrap_servers) as conn:
        resp = conn.request(ApiVersionsRequest[3](client_software_name="t", client_software_version="1"))
        versions = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
        assert CLASSIC_GROUP_APIS <= versions.keys()
        assert versions[CONSUMER_GROUP_HEARTBEAT] == versions[CONSUMER_GROUP_DESCRIBE] == (0, 1)


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
