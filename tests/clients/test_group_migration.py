"""Classic and consumer rebalance protocols side by side on a real broker: what group.coordinator.rebalance.protocols
and group.consumer.migration.policy permit, and the errors Kafka 4.1 gives when they forbid a client's protocol."""
from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError
from kafka import KafkaConsumer, KafkaProducer
from kafka.protocol.admin.groups import DescribeGroupsRequest
from kafka.protocol.consumer.group import JoinGroupRequest

from minikafka.protocol.client_apis.messages import ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest
from minikafka.protocol.errors import ErrorCode as E
from tests.helpers import wait_until
from tests.raw_client import RawConnection


def join_heartbeat(raw: RawConnection, group: str, topic: str, version: int = 1) -> object:
    """A new consumer-protocol member's first ConsumerGroupHeartbeat (epoch 0), as confluent-kafka sends it."""
    R = ConsumerGroupHeartbeatRequest[version]
    fields = dict(group_id=group, member_id=str(uuid.uuid4()), member_epoch=0, instance_id=None, rack_id=None,
                  rebalance_timeout_ms=30000, subscribed_topic_names=[topic], server_assignor=None,
                  topic_partitions=[])
    if version >= 1:
        fields["subscribed_topic_regex"] = None
    return raw.request(R(**fields))


def classic_join(raw: RawConnection, group: str, protocol_type: str) -> object:
    J = JoinGroupRequest[3]  # before v4 a member joins with an empty member id in one round trip
    return raw.request(J(group_id=group, session_timeout_ms=30000, rebalance_timeout_ms=30000, member_id="",
                         protocol_type=protocol_type,
                         protocols=[J.JoinGroupRequestProtocol(name="range", metadata=b"m")]))


def test_without_the_consumer_protocol_its_apis_answer_unsupported_version(broker_factory):
    broker = broker_factory(group_coordinator_rebalance_protocols="classic", group_initial_rebalance_delay_ms=0)
    with RawConnection(broker.bootstrap_servers) as raw:
        raw.find_coordinator("g")
        for version in (0, 1):
            response = join_heartbeat(raw, "g", "t", version)
            assert (response.error_code, response.error_message) == (E.UNSUPPORTED_VERSION, None)
        described = raw.request(ConsumerGroupDescribeRequest[1](group_ids=["g", "h"],
                                                                include_authorized_operations=False))
        assert [(g.group_id, g.error_code) for g in described.groups] == [
            ("g", E.UNSUPPORTED_VERSION), ("h", E.UNSUPPORTED_VERSION)]
        # The classic protocol is still served.
        joined = classic_join(raw, "g", "consumer")
        assert joined.error_code == E.NONE and joined.leader == joined.member_id


@pytest.mark.parametrize("policy, protocol_type, reason", [
    ("disabled", "consumer", "online upgrade is disabled."),
    ("downgrade", "consumer", "online upgrade is disabled."),
    ("upgrade", "connect", "the group does not use the consumer embedded protocol."),
])
def test_an_upgrade_the_policy_or_the_group_forbids_is_refused_and_the_classic_group_goes_on(
        broker_factory, policy, protocol_type, reason):
    broker = broker_factory(group_consumer_migration_policy=policy, group_initial_rebalance_delay_ms=0)
    with RawConnection(broker.bootstrap_servers) as raw:
        raw.find_coordinator("g")
        joined = classic_join(raw, "g", protocol_type)
        assert joined.error_code == E.NONE
        response = join_heartbeat(raw, "g", "t")
        assert (response.error_code, response.error_message) == (
            E.GROUP_ID_NOT_FOUND, f"Cannot upgrade classic group g to consumer group because {reason}")
        (group,) = raw.request(DescribeGroupsRequest[3](groups=["g"], include_authorized_operations=False)).groups
        assert (group.error_code, group.protocol_type) == (E.NONE, protocol_type)
        assert [m.member_id for m in group.members] == [joined.member_id]


def test_a_kafka_python_group_refuses_an_upgrade_when_the_policy_is_disabled_and_keeps_consuming(
        broker_factory, unique_topic):
    broker = broker_factory(group_consumer_migration_policy="disabled", group_initial_rebalance_delay_ms=0)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, acks="all")
    try:
        for i in range(10):
            producer.send(unique_topic, str(i).encode())
        producer.flush(30)
    finally:
        producer.close()
    consumer = KafkaConsumer(unique_topic, bootstrap_servers=broker.bootstrap_servers, group_id="g",
                             auto_offset_reset="earliest", enable_auto_commit=False)
    try:
        values: list[int] = []

        def consumed(count: int) -> bool:
            for records in consumer.poll(timeout_ms=200).values():
                values.extend(int(r.value) for r in records)
            return len(values) >= count

        wait_until(lambda: consumed(10), timeout=60, message="the first ten records")
        with RawConnection(broker.bootstrap_servers) as raw:
            raw.find_coordinator("g")
            response = join_heartbeat(raw, "g", unique_topic)
        assert (response.error_code, response.error_message) == (
            E.GROUP_ID_NOT_FOUND, "Cannot upgrade classic group g to consumer group because online upgrade is "
                                  "disabled.")
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, acks="all")
        try:
            for i in range(10, 20):
                producer.send(unique_topic, str(i).encode())
            producer.flush(30)
        finally:
            producer.close()
        wait_until(lambda: consumed(20), timeout=60, message="the next ten records")
        assert sorted(values) == list(range(20))
    finally:
        consumer.close()


@pytest.mark.parametrize("config, error", [
    ({"group.consumer.migration.policy": "disabled"}, E.GROUP_ID_NOT_FOUND),
    ({"group.coordinator.rebalance.protocols": "classic"}, E.UNSUPPORTED_VERSION),
])
def test_a_confluent_consumer_protocol_member_is_fatally_refused_where_kafka_refuses_it(
        broker_factory, unique_topic, config, error):
    broker = broker_factory(group_initial_rebalance_delay_ms=0, **{k.replace(".", "_"): v for k, v in config.items()})
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, acks="all")
    try:
        producer.send(unique_topic, b"0")
        producer.flush(30)
    finally:
        producer.close()
    classic = KafkaConsumer(unique_topic, bootstrap_servers=broker.bootstrap_servers, group_id="g",
                            auto_offset_reset="earliest", enable_auto_commit=False)
    consumer = None
    try:
        def assigned() -> bool:
            classic.poll(timeout_ms=200)
            return bool(classic.assignment())

        wait_until(assigned, timeout=60, message="the classic member's assignment")
        consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "g",
                             "group.protocol": "consumer", "auto.offset.reset": "earliest"})
        consumer.subscribe([unique_topic])
        deadline = time.monotonic() + 60
        while True:
            assert time.monotonic() < deadline, "no error from the consumer-protocol member"
            message = consumer.poll(0.5)
            classic.poll(timeout_ms=50)
            if message is not None and message.error() is not None:
                break
            assert message is None, "the consumer-protocol member was given records"
        # librdkafka stops the consumer on the heartbeat's error, as it does against Kafka; the classic member
        # keeps its partition.
        assert message.error().code() == KafkaError._FATAL
        assert f"ConsumerGroupHeartbeat fatal error: {KafkaError(error.value).str()}" in message.error().str()
        classic.poll(timeout_ms=50)
        assert {tp.partition for tp in classic.assignment()} == {0}
    finally:
        if consumer is not None:
            consumer.close()
        classic.close()
