"""Authorization (Kafka's StandardAuthorizer) on the data path and the ACL APIs, against real brokers and clients:
what a denied produce, fetch, metadata or offsets request gets, that it changes nothing, and that ACL changes apply
to the next request, on one broker and on clusters in both controller modes."""
from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import KafkaError, Producer
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import (
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    NewTopic,
    ResourcePatternFilter,
    ResourceType,
)
from kafka.errors import ClusterAuthorizationFailedError, SecurityDisabledError, TopicAuthorizationFailedError

import minikafka
from minikafka import Acl
from minikafka.protocol.schema_loading import quiet_schema_loading
from tests.raw_client import RawConnection

with quiet_schema_loading():
    from kafka.protocol.consumer.offsets import ListOffsetsRequest
    from kafka.protocol.metadata import MetadataRequest

TIMEOUT_S = 30.0
USERS = {"alice": "alice-secret", "bob": "bob-secret"}
EVERY_ACL = ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                      ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY))


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


@pytest.fixture(scope="module")
def broker():
    with minikafka.Broker(security="SASL_PLAINTEXT", users=USERS, acls=[]) as broker:
        yield broker


def _create_topics(broker: minikafka.Broker, *names: str) -> None:
    admin = KafkaAdminClient(**broker.client_config(client="kafka-python"))
    try:
        admin.create_topics([NewTopic(name, 1, 1) for name in names])
    finally:
        admin.close()


def _confluent_produce(broker: minikafka.Broker, user: str, topic: str, value: bytes) -> KafkaError | None:
    producer = Producer({**broker.client_config(user=user), "enable.idempotence": False, "linger.ms": 0,
                         "message.timeout.ms": 10000})
    outcome: list[KafkaError | None] = []
    producer.produce(topic, value, on_delivery=lambda err, _msg: outcome.append(err))
    producer.flush(TIMEOUT_S)
    assert len(outcome) == 1
    return outcome[0]


def _end_offset(broker: minikafka.Broker, topic: str) -> int:
    consumer = KafkaConsumer(**broker.client_config(client="kafka-python"))
    try:
        return consumer.end_offsets([TopicPartition(topic, 0)])[TopicPartition(topic, 0)]
    finally:
        consumer.close()


def test_a_denied_produce_writes_nothing_and_each_client_reports_topic_authorization(broker):
    secret, allowed = _name("secret"), _name("open")
    _create_topics(broker, secret, allowed)
    broker.add_acls(Acl("User:alice", "WRITE", topic=allowed))
    error = _confluent_produce(broker, "alice", secret, b"x")
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert _confluent_produce(broker, "alice", allowed, b"y") is None
    producer = KafkaProducer(**broker.client_config(user="alice", client="kafka-python"), max_block_ms=10000)
    try:
        with pytest.raises(TopicAuthorizationFailedError):
            producer.send(secret, b"z").get(TIMEOUT_S)
    finally:
        producer.close()
    assert _end_offset(broker, secret) == 0
    assert _end_offset(broker, allowed) == 1
    assert _confluent_produce(broker, "bob", allowed, b"w").code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_fetch_needs_read_and_list_offsets_describe(broker):
    topic = _name("reads")
    _create_topics(broker, topic)
    assert _confluent_produce(broker, "admin", topic, b"v") is None
    tp = TopicPartition(topic, 0)
    consumer = KafkaConsumer(**broker.client_config(user="alice", client="kafka-python"), consumer_timeout_ms=2000)
    try:
        consumer.assign([tp])
        with pytest.raises(TopicAuthorizationFailedError):
            consumer.end_offsets([tp])
        broker.add_acls(Acl("User:alice", "DESCRIBE", topic=topic))
        assert consumer.end_offsets([tp]) == {tp: 1}
        consumer.seek(tp, 0)
        with pytest.raises(TopicAuthorizationFailedError):
            consumer.poll(5000)
        broker.add_acls(Acl("User:alice", "READ", topic=topic))
        consumer.seek(tp, 0)
        records = consumer.poll(5000)
        assert [r.value for r in records.get(tp, [])] == [b"v"]
    finally:
        consumer.close()


def _metadata(broker: minikafka.Broker, user: str, topics: list[str] | None, *, auto_create: bool = False,
              cluster_ops: bool = False):
    with RawConnection(broker.bootstrap_servers).authenticate_plain(user, broker.security.users[user]) as conn:
        return conn.request(MetadataRequest[10](topics=None if topics is None else [
            MetadataRequest[10].MetadataRequestTopic(topic_id=None, name=t) for t in topics],
            allow_auto_topic_creation=auto_create, include_cluster_authorized_operations=cluster_ops,
            include_topic_authorized_operations=True))


def test_metadata_hides_what_may_not_be_described_and_auto_creation_needs_create(broker):
    seen, hidden = _name("seen"), _name("hidden")
    _create_topics(broker, seen, hidden)
    broker.add_acls(Acl("User:bob", "READ", topic=seen))
    every = _metadata(broker, "bob", None, cluster_ops=True)
    names = {t.name for t in every.topics}
    assert seen in names and hidden not in names
    (entry,) = [t for t in every.topics if t.name == seen]
    assert entry.authorized_operations == {ACLOperation.READ.value, ACLOperation.DESCRIBE.value}
    assert every.authorized_operations == set(), "no DESCRIBE on the cluster: no cluster operations"
    missing = _name("missing")
    named = {t.name: t.error_code for t in _metadata(broker, "bob", [hidden, missing], auto_create=True).topics}
    assert named == {hidden: 29, missing: 29}, "TOPIC_AUTHORIZATION_FAILED whether the topic exists or not"
    assert _metadata(broker, "admin", [missing]).topics[0].error_code == 3, "nothing was auto-created"
    broker.add_acls(Acl("User:bob", "CREATE", topic="auto-", pattern="PREFIXED"),
                    Acl("User:bob", "DESCRIBE", topic="auto-", pattern="PREFIXED"))
    created = _name("auto")
    assert _metadata(broker, "bob", [created], auto_create=True).topics[0].error_code in (0, 5)
    deadline = time.monotonic() + TIMEOUT_S
    while _metadata(broker, "admin", [created]).topics[0].error_code != 0:
        assert time.monotonic() < deadline, "the auto-created topic never appeared"
        time.sleep(0.1)


def test_acl_apis_need_the_cluster_and_list_what_was_created(broker):
    alice = KafkaAdminClient(**broker.client_config(user="alice", client="kafka-python"))
    try:
        with pytest.raises(ClusterAuthorizationFailedError):
            alice.describe_acls(EVERY_ACL)
        result = alice.create_acls([Acl("User:alice", "ALL", cluster=True).to_kafka_python()])
        assert result["failed"] == [ClusterAuthorizationFailedError]
    finally:
        alice.close()
    topic = _name("listed")
    wanted = [Acl("User:carol", "READ", topic=topic), Acl("User:carol", "WRITE", topic=topic, permission="DENY",
                                                          host="10.0.0.1")]
    broker.add_acls(*wanted)
    admin = KafkaAdminClient(**broker.client_config(client="kafka-python"))
    try:
        found, error = admin.describe_acls(ACLFilter("User:carol", None, ACLOperation.ANY, ACLPermissionType.ANY,
                                                     ResourcePatternFilter(ResourceType.TOPIC, topic,
                                                                           ACLResourcePatternType.MATCH)))
        assert {(a.operation, a.permission_type, a.host) for a in found} == {
            (ACLOperation.READ, ACLPermissionType.ALLOW, "*"), (ACLOperation.WRITE, ACLPermissionType.DENY, "10.0.0.1")}
        broker.remove_acls(*wanted)
        found, _ = admin.describe_acls(ACLFilter("User:carol", None, ACLOperation.ANY, ACLPermissionType.ANY,
                                                 ResourcePatternFilter(ResourceType.ANY, None,
                                                                       ACLResourcePatternType.ANY)))
        assert found == []
    finally:
        admin.close()


def test_without_an_authorizer_the_acl_apis_answer_security_disabled():
    with minikafka.Broker(security="SASL_PLAINTEXT", users=USERS) as plain:
        admin = KafkaAdminClient(**plain.client_config(client="kafka-python"))
        try:
            with pytest.raises(SecurityDisabledError):
                admin.describe_acls(EVERY_ACL)
        finally:
            admin.close()


def _list_offsets_error(broker: minikafka.Broker, user: str, topic: str) -> int:
    """What this broker itself answers `user`'s ListOffsets for the topic: TOPIC_AUTHORIZATION_FAILED (29) comes
    before leadership, so a broker that does not lead the partition still tells whether it authorizes it."""
    with RawConnection(broker.bootstrap_servers).authenticate_plain(user, broker.security.users[user]) as conn:
        R = ListOffsetsRequest[7]
        response = conn.request(R(replica_id=-1, isolation_level=0, topics=[R.ListOffsetsTopic(
            name=topic, partitions=[R.ListOffsetsTopic.ListOffsetsPartition(
                partition_index=0, current_leader_epoch=-1, timestamp=-1)])]))
        return response.topics[0].partitions[0].error_code


DENIED, NOT_LEADER = 29, 6


@pytest.mark.parametrize("zookeeper", [False, True], ids=["kraft", "zookeeper"])
def test_acl_changes_reach_every_broker_and_survive_restarts(zookeeper: bool):
    topic = _name("spread")
    with minikafka.Cluster(3, zookeeper=zookeeper, security="SASL_PLAINTEXT", users=USERS,
                           acls=[Acl("User:alice", "READ", group="spread-group")]) as cluster:
        admin = KafkaAdminClient(**cluster.client_config(client="kafka-python"))
        try:
            admin.create_topics([NewTopic(topic, 1, 3)])
        finally:
            admin.close()

        def answers(expected: set[int]) -> bool:
            return all(_list_offsets_error(b, "alice", topic) in expected for b in cluster.brokers)

        assert answers({DENIED})
        cluster.brokers[0].add_acls(Acl("User:alice", "DESCRIBE", topic=topic))
        assert _list_offsets_error(cluster.brokers[0], "alice", topic) in {0, NOT_LEADER}, \
            "the broker that took the change applies it to the next request"
        _until(lambda: answers({0, NOT_LEADER}), "every broker allows it")
        cluster.brokers[1].restart()
        assert _list_offsets_error(cluster.brokers[1], "alice", topic) in {0, NOT_LEADER}
        cluster.brokers[2].remove_acls(Acl("User:alice", "DESCRIBE", topic=topic))
        assert _list_offsets_error(cluster.brokers[2], "alice", topic) == DENIED
        _until(lambda: answers({DENIED}), "every broker denies it again")


def _until(condition, what: str, timeout_s: float = TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.2)


def test_the_kraft_controller_serves_only_its_brokers_and_super_users():
    """A client that reaches the controller's listener directly is authorized there too: without CLUSTER_ACTION
    (the brokers' own login, a super user here) every request but ApiVersions is CLUSTER_AUTHORIZATION_FAILED, and
    its control API is the super users'."""
    from kafka.protocol.admin.topics import CreateTopicsRequest

    from minikafka.control_client import ControlClient, ControlError
    from minikafka.handle_security import ClientSecurity

    with minikafka.Cluster(1, security="SASL_PLAINTEXT", users=USERS, acls=[]) as cluster:
        address = cluster.controller.address
        R = CreateTopicsRequest[5]
        for user, expected in (("alice", 31), ("admin", 0)):
            with RawConnection(address).authenticate_plain(user, cluster.security.users[user]) as conn:
                response = conn.request(R(topics=[R.CreatableTopic(
                    name=f"direct-{user}", num_partitions=1, replication_factor=1, assignments=[], configs=[])],
                    timeout_ms=10000, validate_only=False))
                assert [t.error_code for t in response.topics] == [expected], user
        alice = ControlClient(address, security=ClientSecurity("SASL_PLAINTEXT", None, "alice", USERS["alice"]))
        with pytest.raises(ControlError, match="CLUSTER_AUTHORIZATION_FAILED"):
            alice.call("describe")
        assert cluster.controller.control().call("describe")["role"] == "controller"
