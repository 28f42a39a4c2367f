"""Authorization of the transaction APIs (Kafka's StandardAuthorizer) with real clients: a transactional producer
needs WRITE on its transactional id (and READ on the group and its topics to commit offsets), an idempotent one
IDEMPOTENT_WRITE or WRITE on some topic; the brokers' APIs need the cluster's rights; the admin APIs show only what
the principal may describe. A denied request writes nothing."""
from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from kafka import KafkaAdminClient, KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition
from kafka.admin import AbortTransactionSpec, NewTopic
from kafka.errors import ClusterAuthorizationFailedError, TopicAuthorizationFailedError

import minikafka
from minikafka import Acl
from minikafka.protocol.errors import ErrorCode
from minikafka.protocol.internal_topics import GROUP_METADATA_TOPIC
from minikafka.protocol.schema_loading import quiet_schema_loading
from tests.helpers import wait_until
from tests.raw_client import RawConnection

with quiet_schema_loading():
    from kafka.protocol.admin.transactions import DescribeTransactionsRequest
    from kafka.protocol.producer.transaction import (
        AddOffsetsToTxnRequest,
        AddPartitionsToTxnRequest,
        EndTxnRequest,
        InitProducerIdRequest,
        WriteTxnMarkersRequest,
    )

TIMEOUT_S = 30.0
USERS = {"alice": "alice-secret", "bob": "bob-secret"}


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


def _topics(admin: KafkaAdminClient, *names: str) -> None:
    admin.create_topics([NewTopic(name, 1, 1) for name in names])


def _end_offset(broker: minikafka.Broker, topic: str) -> int:
    consumer = KafkaConsumer(**broker.client_config(client="kafka-python"))
    try:
        partition = KafkaTopicPartition(topic, 0)
        return consumer.end_offsets([partition])[partition]
    finally:
        consumer.close()


def _committed_values(broker: minikafka.Broker, topic: str, count: int) -> list[bytes]:
    consumer = Consumer({**broker.client_config(), "group.id": _name("reader"), "isolation.level": "read_committed",
                         "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(topic, 0)])
        values = []
        while len(values) < count:
            message = consumer.poll(TIMEOUT_S)
            assert message is not None and message.error() is None, message and message.error()
            values.append(message.value())
        return values
    finally:
        consumer.close()


def _init_fails_with(broker: minikafka.Broker, user: str, transactional_id: str) -> KafkaError:
    producer = Producer({**broker.client_config(user=user), "transactional.id": transactional_id})
    with pytest.raises(KafkaException) as refused:
        producer.init_transactions(TIMEOUT_S)
    return refused.value.args[0]


def test_a_transactional_producer_needs_write_on_its_transactional_id(broker, admin):
    topic, unknown, describable = _name("out"), _name("tx"), _name("tx")
    _topics(admin, topic)
    broker.add_acls(Acl("User:alice", "WRITE", topic=topic),
                    Acl("User:alice", "DESCRIBE", transactional_id=describable))
    # No right on the id: FindCoordinator is refused; DESCRIBE alone: InitProducerId is. Both are fatal.
    for transactional_id in (unknown, describable):
        error = _init_fails_with(broker, "alice", transactional_id)
        assert error.code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED and error.fatal()
    assert not any(t.transactional_id in (unknown, describable)
                   for listed in admin.list_transactions().values() for t in listed)
    broker.add_acls(Acl("User:alice", "WRITE", transactional_id=describable))
    producer = Producer({**broker.client_config(user="alice"), "transactional.id": describable})
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    producer.produce(topic, b"committed")
    producer.commit_transaction(TIMEOUT_S)
    assert _committed_values(broker, topic, 1) == [b"committed"]


def test_offsets_sent_to_a_transaction_need_read_on_the_group_and_on_their_topics(broker, admin):
    source, sink, group, transactional_id = _name("in"), _name("out"), _name("g"), _name("tx")
    _topics(admin, source, sink)
    broker.add_acls(Acl("User:alice", "WRITE", transactional_id=transactional_id),
                    Acl("User:alice", "WRITE", topic=sink))
    producer = Producer({**broker.client_config(user="alice"), "transactional.id": transactional_id})
    producer.init_transactions(TIMEOUT_S)
    group_metadata = Consumer({**broker.client_config(user="alice"), "group.id": group}).consumer_group_metadata()
    # AddOffsetsToTxn needs READ on the group, TxnOffsetCommit then READ on each topic.
    for missing, grant in ((KafkaError.GROUP_AUTHORIZATION_FAILED, Acl("User:alice", "READ", group=group)),
                           (KafkaError.TOPIC_AUTHORIZATION_FAILED, Acl("User:alice", "READ", topic=source))):
        producer.begin_transaction()
        producer.produce(sink, b"aborted")
        with pytest.raises(KafkaException) as refused:
            producer.send_offsets_to_transaction([TopicPartition(source, 0, 5)], group_metadata, TIMEOUT_S)
        assert refused.value.args[0].code() == missing and refused.value.args[0].txn_requires_abort()
        producer.abort_transaction(TIMEOUT_S)
        assert admin.list_group_offsets({group: None})[group] == {}
        broker.add_acls(grant)
    producer.begin_transaction()
    producer.produce(sink, b"committed")
    producer.send_offsets_to_transaction([TopicPartition(source, 0, 5)], group_metadata, TIMEOUT_S)
    producer.commit_transaction(TIMEOUT_S)
    # The offsets become visible once the commit marker is written, soon after EndTxn is answered.
    wait_until(lambda: {tp.topic: m.offset for tp, m in admin.list_group_offsets({group: None})[group].items()}
               == {source: 5}, message="the transaction's offsets to be committed")
    assert _committed_values(broker, sink, 1) == [b"committed"]


def test_an_idempotent_producer_needs_idempotent_write_or_write_on_some_topic(broker, admin):
    writable, other = _name("writable"), _name("other")
    _topics(admin, writable, other)
    # WRITE on one topic is enough for a producer id (Kafka's authorizeByResourceType).
    broker.add_acls(Acl("User:alice", "WRITE", topic=writable), Acl("User:bob", "DESCRIBE", topic=other))
    alice = Producer({**broker.client_config(user="alice"), "enable.idempotence": True})
    delivered: list[KafkaError | None] = []
    alice.produce(writable, b"once", on_delivery=lambda err, _msg: delivered.append(err))
    assert alice.flush(TIMEOUT_S) == 0 and delivered == [None]
    # Bob may write nowhere: librdkafka's InitProducerId gets CLUSTER_AUTHORIZATION_FAILED, a fatal error.
    bob = Producer({**broker.client_config(user="bob"), "enable.idempotence": True, "error_cb": lambda _err: None})
    bob.produce(other, b"never")
    with pytest.raises(KafkaException) as refused:
        bob.flush(TIMEOUT_S)
    assert refused.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED and refused.value.args[0].fatal()
    assert _end_offset(broker, other) == 0
    with RawConnection(broker.bootstrap_servers) as conn:
        conn.authenticate_plain("bob", USERS["bob"])
        init = InitProducerIdRequest[4](transactional_id=None, transaction_timeout_ms=60000, producer_id=-1,
                                        producer_epoch=-1)
        refused = conn.request(init)
        assert (refused.error_code, refused.producer_id) == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, -1)
        broker.add_acls(Acl("User:bob", "IDEMPOTENT_WRITE", cluster=True))
        assert conn.request(init).error_code == ErrorCode.NONE


def test_each_transaction_request_needs_write_on_the_transactional_id_then_its_topics_and_group(broker, admin):
    writable, readonly, group, transactional_id, foreign = (_name("w"), _name("r"), _name("g"), _name("tx"),
                                                             _name("tx"))
    _topics(admin, writable, readonly)
    broker.add_acls(Acl("User:alice", "WRITE", transactional_id=transactional_id),
                    Acl("User:alice", "WRITE", topic=writable), Acl("User:alice", "DESCRIBE", topic=readonly))
    with RawConnection(broker.bootstrap_servers) as conn:
        conn.authenticate_plain("alice", USERS["alice"])
        init = conn.request(InitProducerIdRequest[4](transactional_id=transactional_id, transaction_timeout_ms=60000,
                                                     producer_id=-1, producer_epoch=-1))
        assert init.error_code == ErrorCode.NONE
        pid, epoch = init.producer_id, init.producer_epoch
        R = AddPartitionsToTxnRequest[3]

        def add(txn_id: str, *topics: str) -> dict[str, int]:
            response = conn.request(R(v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=pid,
                                      v3_and_below_producer_epoch=epoch, v3_and_below_topics=[
                                          R.AddPartitionsToTxnTopic(name=t, partitions=[0]) for t in topics]))
            return {t.name: p.partition_error_code for t in response.results_by_topic_v3_and_below
                    for p in t.results_by_partition}

        assert add(transactional_id, writable, readonly) == {
            writable: ErrorCode.OPERATION_NOT_ATTEMPTED, readonly: ErrorCode.TOPIC_AUTHORIZATION_FAILED}
        assert add(transactional_id, writable, GROUP_METADATA_TOPIC) == {
            writable: ErrorCode.OPERATION_NOT_ATTEMPTED, GROUP_METADATA_TOPIC: ErrorCode.TOPIC_AUTHORIZATION_FAILED}
        assert add(foreign, writable) == {writable: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
        # The batched versions are the brokers' (CLUSTER_ACTION): the whole request is refused.
        B = AddPartitionsToTxnRequest[5]
        batched = conn.request(B(transactions=[B.AddPartitionsToTxnTransaction(
            transactional_id=transactional_id, producer_id=pid, producer_epoch=epoch, verify_only=False,
            topics=[B.AddPartitionsToTxnTopic(name=writable, partitions=[0])])]))
        assert (batched.error_code, batched.results_by_transaction) == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, [])
        offsets = AddOffsetsToTxnRequest[3]
        assert conn.request(offsets(transactional_id=foreign, producer_id=pid, producer_epoch=epoch,
                                    group_id=group)).error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        assert conn.request(offsets(transactional_id=transactional_id, producer_id=pid, producer_epoch=epoch,
                                    group_id=group)).error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
        end = conn.request(EndTxnRequest[5](transactional_id=foreign, producer_id=pid, producer_epoch=epoch,
                                            committed=True))
        assert (end.error_code, end.producer_id, end.producer_epoch) == (
            ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1, -1)
    # Nothing of it reached the transaction: it is still empty.
    [description] = admin.describe_transactions([transactional_id]).values()
    assert (description.state.value, description.topic_partitions) == ("Empty", set())


def test_an_open_transaction_is_described_and_aborted_only_with_the_rights_kafka_asks_for(broker, admin):
    shown, hidden, transactional_id, other_id = _name("shown"), _name("hidden"), _name("tx"), _name("tx")
    _topics(admin, shown, hidden)
    hanging = Producer({**broker.client_config(), "transactional.id": transactional_id})
    hanging.init_transactions(TIMEOUT_S)
    hanging.begin_transaction()
    hanging.produce(shown, b"hanging")
    hanging.produce(hidden, b"hanging")
    assert hanging.flush(TIMEOUT_S) == 0
    other = Producer({**broker.client_config(), "transactional.id": other_id})
    other.init_transactions(TIMEOUT_S)
    broker.add_acls(Acl("User:alice", "DESCRIBE", transactional_id=transactional_id),
                    Acl("User:alice", "DESCRIBE", topic=shown))
    partition = KafkaTopicPartition(shown, 0)
    alice = KafkaAdminClient(**broker.client_config(user="alice", client="kafka-python"))
    try:
        listed = {t.transactional_id for listing in alice.list_transactions().values() for t in listing}
        assert transactional_id in listed and other_id not in listed
        # Described, with only the topics alice may describe.
        description = alice.describe_transactions([transactional_id])[transactional_id]
        assert (description.state.value, description.topic_partitions) == ("Ongoing", {partition})
        with RawConnection(broker.bootstrap_servers) as conn:
            conn.authenticate_plain("alice", USERS["alice"])
            [state] = conn.request(DescribeTransactionsRequest[0](transactional_ids=[other_id])).transaction_states
            assert state.error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        with pytest.raises(TopicAuthorizationFailedError):
            alice.describe_producers([partition])
        broker.add_acls(Acl("User:alice", "READ", topic=shown))
        [producer] = alice.describe_producers([partition])[partition].active_producers
        assert producer.current_transaction_start_offset == 0
        spec = AbortTransactionSpec(partition, producer.producer_id, producer.producer_epoch,
                                    producer.coordinator_epoch)
        # WriteTxnMarkers is for the coordinators' brokers (CLUSTER_ACTION) and administrators (ALTER).
        with pytest.raises(ClusterAuthorizationFailedError):
            alice.abort_transaction(spec)
        assert _end_offset(broker, shown) == 1
        broker.add_acls(Acl("User:alice", "ALTER", cluster=True))
        alice.abort_transaction(spec)
        [after] = alice.describe_producers([partition])[partition].active_producers
        assert after.current_transaction_start_offset == -1
    finally:
        alice.close()
        hanging.abort_transaction(TIMEOUT_S)
    end_offset = _end_offset(broker, hidden)
    with RawConnection(broker.bootstrap_servers) as conn:
        conn.authenticate_plain("bob", USERS["bob"])
        W = WriteTxnMarkersRequest[1].WritableTxnMarker
        response = conn.request(WriteTxnMarkersRequest[1](markers=[W(
            producer_id=producer.producer_id, producer_epoch=producer.producer_epoch, transaction_result=False,
            topics=[W.WritableTxnMarkerTopic(name=hidden, partition_indexes=[0])], coordinator_epoch=0)]))
        assert [(t.name, p.error_code) for m in response.markers for t in m.topics for p in t.partitions] == [
            (hidden, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)]
    assert _end_offset(broker, hidden) == end_offset
