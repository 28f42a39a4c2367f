"""Authorization of the admin APIs (Kafka's StandardAuthorizer) with real clients: what an administrator without
the ACLs Kafka asks for gets from kafka-python's and confluent-kafka's admin clients, that a denied request changes
nothing, that the ACLs Kafka names are enough to succeed, and that the control API is the super users' alone."""
from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import ElectionType, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as ConfluentPartition
from confluent_kafka import admin as confluent_admin
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.admin import (
    ConfigResource,
    ConfigResourceType,
    NewPartitions,
    NewTopic,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from kafka.errors import (
    ClusterAuthorizationFailedError,
    TopicAuthorizationFailedError,
    UnknownTopicOrPartitionError,
)

import minikafka
from minikafka import Acl
from minikafka.control_client import ControlClient, ControlError
from minikafka.handle_security import ClientSecurity
from minikafka.protocol.errors import ErrorCode
from minikafka.protocol.schema_loading import quiet_schema_loading
from tests.raw_client import RawConnection

with quiet_schema_loading():
    from kafka.protocol.admin.client_quotas import AlterClientQuotasRequest, DescribeClientQuotasRequest
    from kafka.protocol.admin.cluster import AlterReplicaLogDirsRequest, DescribeLogDirsRequest
    from kafka.protocol.admin.configs import DescribeConfigsRequest
    from kafka.protocol.admin.topics import (
        CreateTopicsRequest,
        DeleteTopicsRequest,
        ElectLeadersRequest,
        ListPartitionReassignmentsRequest,
    )

TIMEOUT_S = 30.0
# alice is never granted anything on the cluster; bob, carol and dave are, each by the tests that say so.
USERS = {"alice": "alice-secret", "bob": "bob-secret", "carol": "carol-secret", "dave": "dave-secret"}
AUTHORIZER = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "super.users": "User:admin"}
# Kafka's AclOperation codes of the CLUSTER resource's operations.
CLUSTER_OPERATIONS = {"CREATE": 5, "ALTER": 7, "DESCRIBE": 8, "CLUSTER_ACTION": 9, "DESCRIBE_CONFIGS": 10,
                      "ALTER_CONFIGS": 11, "IDEMPOTENT_WRITE": 12}
TOPIC, BROKER, GROUP = 2, 4, 32  # config resource types


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


@pytest.fixture(scope="module")
def broker():
    with minikafka.Broker(security="SASL_PLAINTEXT", users=USERS, config=AUTHORIZER) as broker:
        yield broker


@pytest.fixture(scope="module")
def admin(broker):
    client = KafkaAdminClient(**broker.client_config(client="kafka-python"))
    yield client
    client.close()


@pytest.fixture
def alice(broker):
    client = KafkaAdminClient(**broker.client_config(user="alice", client="kafka-python"))
    yield client
    client.close()


def _confluent(broker: minikafka.Broker, user: str) -> confluent_admin.AdminClient:
    """confluent-kafka's admin client as `user` (keep it referenced until its futures are done)."""
    return confluent_admin.AdminClient(broker.client_config(user=user))


def _error_of(future) -> KafkaError | None:
    """The error a confluent-kafka admin future ends with (None: it succeeded)."""
    try:
        future.result(TIMEOUT_S)
    except KafkaException as exc:
        return exc.args[0]
    return None


def _raw(broker: minikafka.Broker, user: str) -> RawConnection:
    return RawConnection(broker.bootstrap_servers).authenticate_plain(user, broker.security.users[user])


def _topics(admin: KafkaAdminClient) -> set[str]:
    return set(admin.list_topics())


def _produce(broker: minikafka.Broker, topic: str, count: int) -> None:
    producer = Producer({**broker.client_config(), "linger.ms": 0})
    for i in range(count):
        producer.produce(topic, str(i).encode())
    assert producer.flush(TIMEOUT_S) == 0


def _offsets(broker: minikafka.Broker, topic: str) -> tuple[int, int]:
    """(log start offset, end offset) of the topic's partition 0, as the admin reads them."""
    consumer = KafkaConsumer(**broker.client_config(client="kafka-python"))
    try:
        tp = TopicPartition(topic, 0)
        return consumer.beginning_offsets([tp])[tp], consumer.end_offsets([tp])[tp]
    finally:
        consumer.close()


# ---- CreateTopics ------------------------------------------------------------------------------------------------

def test_topic_creation_is_denied_without_create_and_creates_nothing(broker, admin, alice):
    refused, also_refused = _name("denied"), _name("denied")
    with pytest.raises(TopicAuthorizationFailedError):
        alice.create_topics([NewTopic(refused, 1, 1)])
    confluent = _confluent(broker, "alice")
    futures = confluent.create_topics([confluent_admin.NewTopic(also_refused, 1, 1)])
    assert _error_of(futures[also_refused]).code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert _create(broker, "alice", refused) == (ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
    assert not {refused, also_refused} & _topics(admin), "nothing was created"


def test_create_on_a_prefix_creates_and_describe_configs_decides_whether_the_configs_are_answered(broker, admin,
                                                                                                  alice):
    broker.add_acls(Acl("User:alice", "CREATE", topic="alice-", pattern="PREFIXED"))
    hidden, shown, elsewhere = _name("alice-plain"), _name("alice-configs"), _name("bob")
    created = alice.create_topics([NewTopic(hidden, 2, 1)])
    (result,) = created["topics"]
    assert result["error_code"] == 0
    assert (result["topic_config_error_code"], result["num_partitions"], result["replication_factor"]) == \
        (ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1, -1), "no DESCRIBE_CONFIGS: the configs are not answered"
    broker.add_acls(Acl("User:alice", "DESCRIBE_CONFIGS", topic=shown))
    (result,) = alice.create_topics([NewTopic(shown, 3, 1)])["topics"]
    assert (result["topic_config_error_code"], result["num_partitions"]) == (0, 3)
    assert result["configs"]["retention.ms"]["value"] == "604800000"
    with pytest.raises(TopicAuthorizationFailedError):
        alice.create_topics([NewTopic(elsewhere, 1, 1)])
    confluent = _confluent(broker, "alice")
    futures = confluent.create_topics([confluent_admin.NewTopic(_name("alice-c"), 1, 1)])
    assert all(_error_of(f) is None for f in futures.values()), "librdkafka creates under the prefix too"
    assert {hidden, shown} <= _topics(admin) and elsewhere not in _topics(admin)


def test_create_on_the_cluster_creates_any_topic(broker, admin):
    broker.add_acls(Acl("User:bob", "CREATE", cluster=True))
    topic = _name("anything")
    bob = KafkaAdminClient(**broker.client_config(user="bob", client="kafka-python"))
    try:
        (result,) = bob.create_topics([NewTopic(topic, 1, 1)])["topics"]
    finally:
        bob.close()
    assert result["error_code"] == 0
    assert topic in _topics(admin)
    broker.remove_acls(Acl("User:bob", "CREATE", cluster=True))


# ---- DeleteTopics, DeleteRecords, CreatePartitions ---------------------------------------------------------------

def test_deletion_is_denied_without_delete_and_leaves_the_data(broker, admin, alice):
    topic = _name("kept")
    admin.create_topics([NewTopic(topic, 1, 1)])
    _produce(broker, topic, 3)
    with pytest.raises(TopicAuthorizationFailedError):
        alice.delete_topics([topic])
    confluent = _confluent(broker, "alice")
    futures = confluent.delete_topics([topic])
    assert _error_of(futures[topic]).code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert topic in _topics(admin)
    assert _offsets(broker, topic) == (0, 3), "every record is still there"
    broker.add_acls(Acl("User:alice", "DELETE", topic=topic))
    alice.delete_topics([topic])
    assert topic not in _topics(admin)


def test_deletion_tells_whether_a_topic_exists_only_to_whom_may_describe_it(broker, admin):
    existing, missing = _name("secret"), _name("missing")
    admin.create_topics([NewTopic(existing, 1, 1)])
    topic_id = admin.describe_topics([existing])[0]["topic_id"]
    R = DeleteTopicsRequest[6]

    def delete(**entry) -> tuple[int, str | None]:
        with _raw(broker, "bob") as conn:
            (result,) = conn.request(R(topics=[R.DeleteTopicState(**entry)], timeout_ms=10000)).responses
        return result.error_code, result.name

    assert delete(name=existing, topic_id=None) == (ErrorCode.TOPIC_AUTHORIZATION_FAILED, existing)
    assert delete(name=missing, topic_id=None) == (ErrorCode.TOPIC_AUTHORIZATION_FAILED, missing)
    assert delete(name=None, topic_id=topic_id) == (ErrorCode.TOPIC_AUTHORIZATION_FAILED, None), \
        "no DESCRIBE: the name of a topic asked for by id is not told"
    broker.add_acls(Acl("User:bob", "DESCRIBE", topic=existing), Acl("User:bob", "DESCRIBE", topic=missing))
    assert delete(name=missing, topic_id=None) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, missing)
    assert delete(name=None, topic_id=topic_id) == (ErrorCode.TOPIC_AUTHORIZATION_FAILED, existing)
    assert delete(name=None, topic_id=uuid.uuid4()) == (ErrorCode.UNKNOWN_TOPIC_ID, None)
    assert existing in _topics(admin)


def test_delete_records_needs_delete_on_the_topic(broker, admin):
    topic = _name("records")
    admin.create_topics([NewTopic(topic, 1, 1)])
    _produce(broker, topic, 5)
    broker.add_acls(Acl("User:bob", "DESCRIBE", topic=topic))  # for the client to find the leader
    bob = _confluent(broker, "bob")
    tp = ConfluentPartition(topic, 0, 3)
    error = _error_of(bob.delete_records([tp])[tp])
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert _offsets(broker, topic) == (0, 5)
    broker.add_acls(Acl("User:bob", "DELETE", topic=topic))
    assert _error_of(bob.delete_records([tp])[tp]) is None
    assert _offsets(broker, topic) == (3, 5)


def test_create_partitions_needs_alter_on_the_topic(broker, admin, alice):
    topic = _name("grown")
    admin.create_topics([NewTopic(topic, 1, 1)])
    with pytest.raises(TopicAuthorizationFailedError):
        alice.create_partitions({topic: NewPartitions(3)})
    assert len(admin.describe_topics([topic])[0]["partitions"]) == 1
    broker.add_acls(Acl("User:alice", "ALTER", topic=topic))
    alice.create_partitions({topic: NewPartitions(3)})
    assert len(admin.describe_topics([topic])[0]["partitions"]) == 3


# ---- configs -----------------------------------------------------------------------------------------------------

def _describe_configs_errors(broker: minikafka.Broker, user: str, *resources: tuple[int, str]
                             ) -> list[tuple[int, str | None, int]]:
    """(error code, message, number of configs) of each resource described as `user`."""
    R = DescribeConfigsRequest[4]
    with _raw(broker, user) as conn:
        response = conn.request(R(resources=[R.DescribeConfigsResource(resource_type=t, resource_name=n,
                                                                        configuration_keys=None)
                                             for t, n in resources],
                                  include_synonyms=False, include_documentation=False))
    return [(r.error_code, r.error_message, len(r.configs)) for r in response.results]


def test_describe_configs_needs_describe_configs_on_each_resource(broker, admin):
    topic, missing = _name("configs"), _name("no-such-topic")
    admin.create_topics([NewTopic(topic, 1, 1)])
    node = str(broker.node_id)
    assert _describe_configs_errors(broker, "alice", (TOPIC, topic), (TOPIC, missing), (BROKER, node),
                                    (GROUP, "some-group")) == [
        (ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed.", 0),
        (ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed.", 0),
        (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.", 0),
        (ErrorCode.GROUP_AUTHORIZATION_FAILED, "Group authorization failed.", 0)]
    confluent = _confluent(broker, "alice")
    resource = confluent_admin.ConfigResource(confluent_admin.ResourceType.TOPIC, topic)
    error = _error_of(confluent.describe_configs([resource])[resource])
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    broker.add_acls(Acl("User:carol", "DESCRIBE_CONFIGS", topic=topic),
                    Acl("User:carol", "DESCRIBE_CONFIGS", cluster=True))
    (topic_result, broker_result) = _describe_configs_errors(broker, "carol", (TOPIC, topic), (BROKER, node))
    assert topic_result[0] == 0 and topic_result[2] > 0
    assert broker_result[0] == 0 and broker_result[2] > 0
    carol = _confluent(broker, "carol")
    configs = carol.describe_configs([resource])[resource].result(TIMEOUT_S)
    assert configs["retention.ms"].value == "604800000"


def test_alter_configs_needs_alter_configs_and_a_denied_change_is_not_made(broker, admin):
    topic = _name("altered")
    admin.create_topics([NewTopic(topic, 1, 1)])
    bob = KafkaAdminClient(**broker.client_config(user="bob", client="kafka-python"))
    try:
        change = [ConfigResource(ConfigResourceType.TOPIC, topic, configs={"retention.ms": "1000"})]
        for incremental in (True, False):
            result = bob.alter_configs(change, raise_on_unknown=False, incremental=incremental)
            assert "TopicAuthorizationFailedError" in str(result["topic"][topic])
        cluster_change = [ConfigResource(ConfigResourceType.BROKER, str(broker.node_id),
                                         configs={"log.cleaner.threads": "2"})]
        result = bob.alter_configs(cluster_change, raise_on_unknown=False, incremental=True)
        assert "ClusterAuthorizationFailedError" in str(result["broker"][str(broker.node_id)])
        assert _retention(admin, topic) == "604800000", "the denied change was not made"
        broker.add_acls(Acl("User:bob", "ALTER_CONFIGS", topic=topic))
        result = bob.alter_configs(change, raise_on_unknown=False, incremental=True)
        assert result["topic"][topic] == "OK"
        assert _retention(admin, topic) == "1000"
    finally:
        bob.close()
    confluent = _confluent(broker, "alice")
    resource = confluent_admin.ConfigResource(confluent_admin.ResourceType.TOPIC, topic, incremental_configs=[
        confluent_admin.ConfigEntry("retention.ms", "5", incremental_operation=confluent_admin.AlterConfigOpType.SET)])
    error = _error_of(confluent.incremental_alter_configs([resource])[resource])
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert _retention(admin, topic) == "1000"


def _retention(admin: KafkaAdminClient, topic: str) -> str:
    described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)], config_filter="all")
    return described["topic"][topic]["retention.ms"]["value"]


# ---- the cluster -------------------------------------------------------------------------------------------------

def test_describe_cluster_answers_the_operations_the_principal_may_do(broker):
    broker.add_acls(Acl("User:bob", "DESCRIBE", cluster=True))

    def operations(user: str) -> set[str]:
        confluent = _confluent(broker, user)
        found = confluent.describe_cluster(include_authorized_operations=True).result(TIMEOUT_S)
        return {op.name for op in found.authorized_operations or []}

    assert operations("bob") == {"DESCRIBE"}
    assert operations("alice") == set(), "no DESCRIBE on the cluster: no operations"
    assert operations("admin") == set(CLUSTER_OPERATIONS)
    bob = KafkaAdminClient(**broker.client_config(user="bob", client="kafka-python"))
    try:
        described = bob.describe_cluster()
    finally:
        bob.close()
    assert list(described["authorized_operations"]) == ["DESCRIBE"]


def test_log_dirs_need_the_cluster(broker, admin):
    topic = _name("dirs")
    admin.create_topics([NewTopic(topic, 1, 1)])
    with _raw(broker, "alice") as conn:
        described = conn.request(DescribeLogDirsRequest[4](topics=None))
        R = AlterReplicaLogDirsRequest[2]
        altered = conn.request(R(dirs=[R.AlterReplicaLogDir(path="/nowhere", topics=[
            R.AlterReplicaLogDir.AlterReplicaLogDirTopic(name=topic, partitions=[0])])]))
    assert (described.error_code, described.results) == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, [])
    assert [(t.topic_name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in altered.results] == \
        [(topic, [(0, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)])]
    assert admin.describe_log_dirs(), "the admin still sees them"


def test_reassignments_and_elections_need_the_cluster(broker, admin, alice):
    topic = _name("moved")
    admin.create_topics([NewTopic(topic, 1, 1)])
    with pytest.raises(ClusterAuthorizationFailedError):
        alice.list_partition_reassignments()
    with pytest.raises(ClusterAuthorizationFailedError):
        alice.alter_partition_reassignments({TopicPartition(topic, 0): [broker.node_id]})
    with _raw(broker, "alice") as conn:
        R = ListPartitionReassignmentsRequest[0]
        listed = conn.request(R(timeout_ms=1000, topics=[R.ListPartitionReassignmentsTopics(
            name=topic, partition_indexes=[0])]))
        E = ElectLeadersRequest[2]
        elected = conn.request(E(election_type=0, topic_partitions=[E.TopicPartitions(topic=topic, partitions=[0])],
                                 timeout_ms=1000))
    assert listed.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert listed.error_message == "Request ListPartitionReassignments from User:alice is not authorized."
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in listed.topics] == [(topic, [0])]
    assert elected.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert [[p.error_code for p in t.partition_result] for t in elected.replica_election_results] == \
        [[ErrorCode.CLUSTER_AUTHORIZATION_FAILED]]
    confluent = _confluent(broker, "alice")
    elections = confluent.elect_leaders(
        ElectionType.PREFERRED, [ConfluentPartition(topic, 0)])
    error = _error_of(elections)
    assert error is not None and error.code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    broker.add_acls(Acl("User:bob", "DESCRIBE", cluster=True))
    bob = KafkaAdminClient(**broker.client_config(user="bob", client="kafka-python"))
    try:
        assert bob.list_partition_reassignments() == {}
    finally:
        bob.close()


# ---- client quotas and SCRAM credentials -------------------------------------------------------------------------

def test_client_quotas_need_the_cluster_configs(broker, admin):
    D = DescribeClientQuotasRequest[1]
    A = AlterClientQuotasRequest[1]
    entity = [A.EntryData.EntityData(entity_type="user", entity_name="carol")]
    alteration = A(entries=[A.EntryData(entity=entity, ops=[A.EntryData.OpData(key="producer_byte_rate",
                                                                                value=1024.0, remove=False)])],
                   validate_only=False)
    every_user = D(components=[D.ComponentData(entity_type="user", match_type=2, match=None)], strict=False)
    with _raw(broker, "alice") as conn:
        described = conn.request(every_user)
        (altered,) = conn.request(alteration).entries
    assert (described.error_code, described.error_message, described.entries) == \
        (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None, None)
    assert (altered.error_code, altered.error_message) == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                                           "Cluster authorization failed.")
    with _raw(broker, "admin") as conn:
        assert conn.request(every_user).entries == [], "the denied alteration set no quota"
    broker.add_acls(Acl("User:dave", "ALTER_CONFIGS", cluster=True), Acl("User:dave", "DESCRIBE_CONFIGS",
                                                                         cluster=True))
    with _raw(broker, "dave") as conn:
        assert conn.request(alteration).entries[0].error_code == 0
        (entry,) = conn.request(every_user).entries
    assert [(v.key, v.value) for v in entry.values] == [("producer_byte_rate", 1024.0)]


def test_scram_credentials_need_the_cluster(broker, admin, alice):
    zed = UserScramCredentialUpsertion("zed", ScramMechanism.SCRAM_SHA_256, "zed-secret")
    with pytest.raises(ClusterAuthorizationFailedError):
        alice.describe_user_scram_credentials()
    with pytest.raises(ClusterAuthorizationFailedError):
        alice.describe_user_scram_credentials(["alice"])
    assert alice.alter_user_scram_credentials([zed]) == {
        "zed": "Request AlterUserScramCredentials from User:alice is not authorized."}
    # (Not librdkafka's describe: it frees the request-level error string it did not allocate, and crashes.)
    confluent = _confluent(broker, "alice")
    upsertion = confluent_admin.UserScramCredentialUpsertion(  # librdkafka aborts making a salt of its own here
        "zed", confluent_admin.ScramCredentialInfo(confluent_admin.ScramMechanism.SCRAM_SHA_256, 4096), b"zed-secret",
        b"0123456789abcdef")
    futures = confluent.alter_user_scram_credentials([upsertion])
    assert _error_of(futures["zed"]).code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    assert "zed" not in admin.describe_user_scram_credentials(), "the denied alteration made no credential"
    assert "alice" in admin.describe_user_scram_credentials()


# ---- the control API ---------------------------------------------------------------------------------------------

def test_the_control_api_is_the_super_users(broker):
    assert broker.state.describe() is not None, "the handle (the admin, a super user) inspects the broker"
    broker.faults.add_latency(1, api="Metadata", count=1)
    assert len(broker.faults.list()) == 1
    broker.faults.clear()
    control = ControlClient(broker.bootstrap_servers,
                            security=ClientSecurity("SASL_PLAINTEXT", None, "alice", USERS["alice"]))
    for op, fields in (("fault.list", {}), ("describe", {}), ("fault.add", {"kind": "latency", "delay_ms": 1}),
                       ("no.such.op", {})):
        with pytest.raises(ControlError, match="CLUSTER_AUTHORIZATION_FAILED.*User:alice"):
            control.call(op, **fields)
    assert broker.faults.list() == [], "the refused fault was not added"


# ---- a ZooKeeper-mode cluster ------------------------------------------------------------------------------------

def test_a_zookeeper_cluster_works_with_the_authorizer_and_forwards_only_what_is_allowed():
    """The brokers' own control-plane requests (LeaderAndIsr, UpdateMetadata) and forwarded admin requests pass
    as the inter-broker principal, a super user; a user's request is authorized on the broker it reached."""
    topic, refused = _name("replicated"), _name("refused")
    with minikafka.Cluster(2, zookeeper=True, security="SASL_PLAINTEXT", users=USERS, acls=[
            Acl("User:alice", "CREATE", topic="alice-", pattern="PREFIXED")]) as cluster:
        admin = KafkaAdminClient(**cluster.client_config(client="kafka-python"))
        try:
            admin.create_topics([NewTopic(topic, 2, 2)])
            _produce(cluster.brokers[0], topic, 4)
            for b in cluster.brokers:  # the controller, and a broker that forwards to it
                assert _create(b, "alice", refused, 2)[0] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
                assert _create(b, "alice", _name("alice-z"), 2)[0] == ErrorCode.NONE
            assert refused not in _topics(admin)
            with pytest.raises(UnknownTopicOrPartitionError):
                admin.delete_topics([_name("never")])
        finally:
            admin.close()
        deadline = time.monotonic() + TIMEOUT_S
        while sum(_offsets_of(cluster, topic)) != 4:
            assert time.monotonic() < deadline, "the records never reached every replica"
            time.sleep(0.2)


def _create(broker: minikafka.Broker, user: str, topic: str, replicas: int = 1) -> tuple[int, str | None]:
    """The error code and message of `user`'s CreateTopics of `topic` sent to `broker` itself."""
    R = CreateTopicsRequest[7]
    with _raw(broker, user) as conn:
        (result,) = conn.request(R(topics=[R.CreatableTopic(name=topic, num_partitions=1,
                                                            replication_factor=replicas, assignments=[], configs=[])],
                                   timeout_ms=10000, validate_only=False)).topics
    return result.error_code, result.error_message


def _offsets_of(cluster: minikafka.Cluster, topic: str) -> list[int]:
    consumer = KafkaConsumer(**cluster.client_config(client="kafka-python"))
    try:
        tps = [TopicPartition(topic, p) for p in range(2)]
        return list(consumer.end_offsets(tps).values())
    finally:
        consumer.close()
