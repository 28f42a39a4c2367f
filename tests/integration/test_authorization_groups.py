"""Authorization of the consumer group APIs (Kafka's StandardAuthorizer) with real clients: what a consumer, a
committer and an administrator without the ACLs Kafka asks for get, that a denied request leaves the group and its
offsets as they were, and that listings and descriptions show only what the principal may see."""
from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka import TopicPartition as ConfluentPartition
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import GroupAuthorizationFailedError, TopicAuthorizationFailedError

import minikafka
from minikafka import Acl
from minikafka.protocol.errors import ErrorCode
from minikafka.protocol.schema_loading import quiet_schema_loading
from tests.raw_client import RawConnection

with quiet_schema_loading():
    from kafka.protocol.consumer.group import OffsetDeleteRequest, OffsetFetchRequest
    from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest

TIMEOUT_S = 30.0
USERS = {"alice": "alice-secret", "bob": "bob-secret"}
EVERY_GROUP_OPERATION = ["READ", "DELETE", "DESCRIBE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"]


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


@pytest.fixture(scope="module")
def broker():
    with minikafka.Broker(security="SASL_PLAINTEXT", users=USERS, acls=[]) as broker:
        yield broker


@pytest.fixture(scope="module")
def admin(broker):
    client = KafkaAdminClient(**broker.client_config(client="kafka-python"))
    yield client
    client.close()


def _kafka_python(broker: minikafka.Broker, user: str, cls: type, *args, **settings):
    return cls(*args, **broker.client_config(user=user, client="kafka-python"), **settings)


def _commit(broker: minikafka.Broker, user: str, group: str, offsets: dict[TopicPartition, int]) -> None:
    consumer = _kafka_python(broker, user, KafkaConsumer, group_id=group, enable_auto_commit=False)
    try:
        consumer.commit({tp: OffsetAndMetadata(offset, "", -1) for tp, offset in offsets.items()})
    finally:
        consumer.close()


def _committed(admin: KafkaAdminClient, group: str) -> dict[TopicPartition, int]:
    return {tp: meta.offset for tp, meta in admin.list_group_offsets({group: None})[group].items()}


def _group_ids(admin: KafkaAdminClient) -> set[str]:
    return {g["group_id"] for g in admin.list_groups()}


def test_a_consumer_without_read_on_its_group_is_refused_and_no_group_is_made(broker, admin):
    topic = _name("orders")
    admin.create_topics([NewTopic(topic, 1, 1)])
    broker.add_acls(Acl("User:alice", "READ", topic=topic))
    unknown, describable, librdkafka = _name("g"), _name("g"), _name("g")
    broker.add_acls(Acl("User:alice", "DESCRIBE", group=describable))
    # Without DESCRIBE the coordinator lookup fails; with DESCRIBE alone, JoinGroup does.
    for group in (unknown, describable):
        consumer = _kafka_python(broker, "alice", KafkaConsumer, topic, group_id=group)
        try:
            with pytest.raises(GroupAuthorizationFailedError):
                consumer.poll(timeout_ms=int(TIMEOUT_S * 1000))
        finally:
            consumer.close()
    consumer = Consumer({**broker.client_config(user="alice"), "group.id": librdkafka})
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + TIMEOUT_S
        error = None
        while error is None and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            error = message.error() if message is not None else None
        assert error is not None and error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    finally:
        consumer.close()
    assert not _group_ids(admin) & {unknown, describable, librdkafka}


def test_with_group_read_a_consumer_commits_only_the_topics_it_may_read(broker, admin):
    readable, hidden, group = _name("readable"), _name("hidden"), _name("g")
    admin.create_topics([NewTopic(readable, 1, 1), NewTopic(hidden, 1, 1)])
    broker.add_acls(Acl("User:alice", "READ", group=group), Acl("User:alice", "READ", topic=readable),
                    Acl("User:alice", "DESCRIBE", topic=hidden))
    producer = _kafka_python(broker, "admin", KafkaProducer)
    for value in (b"a", b"b"):
        producer.send(readable, value)
    producer.flush(TIMEOUT_S)
    producer.close()
    consumer = _kafka_python(broker, "alice", KafkaConsumer, readable, group_id=group, enable_auto_commit=False,
                             auto_offset_reset="earliest", consumer_timeout_ms=int(TIMEOUT_S * 1000))
    try:
        assert [next(consumer).value for _ in range(2)] == [b"a", b"b"]
        consumer.commit()
        with pytest.raises(TopicAuthorizationFailedError):
            consumer.commit({TopicPartition(hidden, 0): OffsetAndMetadata(1, "", -1)})
    finally:
        consumer.close()
    # librdkafka reports the refused partition; the readable topic's offset is committed all the same.
    confluent = Consumer({**broker.client_config(user="alice"), "group.id": group, "enable.auto.commit": False})
    try:
        with pytest.raises(KafkaException) as refused:
            confluent.commit(offsets=[ConfluentPartition(readable, 0, 1), ConfluentPartition(hidden, 0, 1)],
                             asynchronous=False)
        assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    finally:
        confluent.close()
    assert _committed(admin, group) == {TopicPartition(readable, 0): 1}


def test_listed_groups_are_the_describable_ones_unless_the_cluster_is_describable(broker, admin):
    topic = _name("t")
    admin.create_topics([NewTopic(topic, 1, 1)])
    shown, hidden = _name("shown"), _name("hidden")
    for group in (shown, hidden):
        _commit(broker, "admin", group, {TopicPartition(topic, 0): 1})
    broker.add_acls(Acl("User:alice", "DESCRIBE", group=shown), Acl("User:bob", "DESCRIBE", cluster=True))
    for user, expected in (("alice", {shown}), ("bob", {shown, hidden})):
        client = _kafka_python(broker, user, KafkaAdminClient)
        try:
            assert _group_ids(client) & {shown, hidden} == expected
        finally:
            client.close()


def test_described_groups_carry_the_principals_authorized_operations(broker, admin):
    topic = _name("t")
    admin.create_topics([NewTopic(topic, 1, 1)])
    readable, hidden = _name("readable"), _name("hidden")
    for group in (readable, hidden):
        _commit(broker, "admin", group, {TopicPartition(topic, 0): 1})
    broker.add_acls(Acl("User:alice", "READ", group=readable))
    alice = _kafka_python(broker, "alice", KafkaAdminClient)
    try:
        # kafka-python asks for the authorized operations; READ implies DESCRIBE, as Kafka's authorizer has it.
        described = alice.describe_groups([readable, hidden], group_coordinator_id=broker.node_id)
    finally:
        alice.close()
    assert described[readable]["error"] is None and described[readable]["group_state"] == "Empty"
    assert sorted(described[readable]["authorized_operations"]) == ["DESCRIBE", "READ"]
    assert "GroupAuthorizationFailedError" in described[hidden]["error"]
    assert described[hidden]["authorized_operations"] is None and described[hidden]["group_state"] == ""
    # A super user may do everything a group has, the configurations included (Kafka 4.1's group configs).
    assert sorted(admin.describe_groups([readable])[readable]["authorized_operations"]) == sorted(
        EVERY_GROUP_OPERATION)


def test_fetched_offsets_show_only_the_group_and_topics_the_principal_may_describe(broker, admin):
    visible, hidden, group, other = _name("visible"), _name("hidden"), _name("g"), _name("g")
    admin.create_topics([NewTopic(visible, 1, 1), NewTopic(hidden, 1, 1)])
    _commit(broker, "admin", group, {TopicPartition(visible, 0): 3, TopicPartition(hidden, 0): 4})
    _commit(broker, "admin", other, {TopicPartition(visible, 0): 5})
    broker.add_acls(Acl("User:alice", "DESCRIBE", group=group), Acl("User:alice", "DESCRIBE", topic=visible))
    alice = _kafka_python(broker, "alice", KafkaAdminClient)
    try:
        assert alice.list_group_offsets({group: None})[group] == {
            TopicPartition(visible, 0): OffsetAndMetadata(3, "", -1)}
        with pytest.raises(GroupAuthorizationFailedError):
            alice.list_group_offsets({other: None})
    finally:
        alice.close()
    with RawConnection(broker.bootstrap_servers) as conn:
        conn.authenticate_plain("alice", USERS["alice"])
        R = OffsetFetchRequest[7]
        response = conn.request(R(group_id=group, require_stable=False, topics=[
            R.OffsetFetchRequestTopic(name=n, partition_indexes=[0]) for n in (hidden, visible)]))
        assert response.error_code == ErrorCode.NONE
        assert {(t.name, p.committed_offset, p.error_code) for t in response.topics for p in t.partitions} == {
            (visible, 3, ErrorCode.NONE), (hidden, -1, ErrorCode.TOPIC_AUTHORIZATION_FAILED)}
        R = OffsetFetchRequest[8]
        response = conn.request(R(require_stable=False, groups=[
            R.OffsetFetchRequestGroup(group_id=g, topics=None) for g in (group, other)]))
        assert [(g.group_id, g.error_code, [t.name for t in g.topics]) for g in response.groups] == [
            (group, ErrorCode.NONE, [visible]), (other, ErrorCode.GROUP_AUTHORIZATION_FAILED, [])]


def test_deleting_a_group_or_its_offsets_needs_delete_on_the_group_and_read_on_the_topics(broker, admin):
    topic, group = _name("t"), _name("g")
    admin.create_topics([NewTopic(topic, 1, 1)])
    _commit(broker, "admin", group, {TopicPartition(topic, 0): 7})
    partition = TopicPartition(topic, 0)
    alice = _kafka_python(broker, "alice", KafkaAdminClient)
    try:
        assert alice.delete_groups([group], group_coordinator_id=broker.node_id) == {
            group: "GroupAuthorizationFailedError"}
        with pytest.raises(GroupAuthorizationFailedError):
            alice.delete_group_offsets(group, [partition], group_coordinator_id=broker.node_id)
        broker.add_acls(Acl("User:alice", "DELETE", group=group))
        with RawConnection(broker.bootstrap_servers) as conn:
            conn.authenticate_plain("alice", USERS["alice"])
            R = OffsetDeleteRequest[0]
            response = conn.request(R(group_id=group, topics=[R.OffsetDeleteRequestTopic(
                name=topic, partitions=[R.OffsetDeleteRequestTopic.OffsetDeleteRequestPartition(partition_index=0)])]))
            assert response.error_code == ErrorCode.NONE
            assert [p.error_code for t in response.topics for p in t.partitions] == [
                ErrorCode.TOPIC_AUTHORIZATION_FAILED]
        assert _committed(admin, group) == {partition: 7}
        broker.add_acls(Acl("User:alice", "READ", topic=topic))
        alice.delete_group_offsets(group, [partition], group_coordinator_id=broker.node_id)
        assert _committed(admin, group) == {}
        assert alice.delete_groups([group], group_coordinator_id=broker.node_id) == {group: "OK"}
    finally:
        alice.close()
    assert group not in _group_ids(admin)


def test_coordinator_lookups_need_describe_per_key(broker, admin):
    group, hidden_group, txn, hidden_txn = _name("g"), _name("g"), _name("tx"), _name("tx")
    broker.add_acls(Acl("User:alice", "DESCRIBE", group=group), Acl("User:alice", "DESCRIBE", transactional_id=txn))
    with RawConnection(broker.bootstrap_servers) as conn:
        conn.authenticate_plain("alice", USERS["alice"])
        old = conn.request(FindCoordinatorRequest[3](key=hidden_group, key_type=0))
        assert (old.error_code, old.error_message, old.node_id) == (
            ErrorCode.GROUP_AUTHORIZATION_FAILED, "Group authorization failed.", -1)
        old = conn.request(FindCoordinatorRequest[3](key=hidden_txn, key_type=1))
        assert (old.error_code, old.error_message) == (
            ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "Transactional Id authorization failed.")
        for key_type, allowed, denied, error in ((0, group, hidden_group, ErrorCode.GROUP_AUTHORIZATION_FAILED),
                                                 (1, txn, hidden_txn, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)):
            batch = conn.request(FindCoordinatorRequest[4](key_type=key_type, coordinator_keys=[denied, allowed]))
            assert [(c.key, c.error_code, c.node_id) for c in batch.coordinators] == [
                (denied, error, -1), (allowed, ErrorCode.NONE, broker.node_id)]
        # Share coordinators are for brokers: without CLUSTER_ACTION every key of the request is refused.
        share = conn.request(FindCoordinatorRequest[6](key_type=2, coordinator_keys=["a", "b"]))
        assert [c.error_code for c in share.coordinators] == [ErrorCode.CLUSTER_AUTHORIZATION_FAILED] * 2
