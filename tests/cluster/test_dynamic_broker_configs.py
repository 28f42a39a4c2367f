"""Dynamic broker configs through the AdminClient, as kafka-configs.sh --entity-type brokers sets them, in both
controller modes: stored by the controller, described with Kafka's sources, refused where Kafka refuses, and
applied live by the brokers (here: message.max.bytes as the cluster default, over a topic without overrides, and
a broker's own value over it)."""
from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)
from kafka.protocol.admin.configs import IncrementalAlterConfigsRequest

import minikafka
from tests.cluster.cluster_modes import CLUSTER_MODES
from tests.helpers import wait_until
from tests.raw_client import RawConnection

TOPIC = "dynamic"
WAIT_S = 30.0


def set_op(name: str, value: str) -> ConfigEntry:
    return ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)


def alter(admin: AdminClient, resource: ConfigResource, validate_only: bool = False) -> None:
    for future in admin.incremental_alter_configs([resource], validate_only=validate_only).values():
        future.result(timeout=WAIT_S)


def refused(admin: AdminClient, resource: ConfigResource) -> KafkaError:
    with pytest.raises(KafkaException) as info:
        alter(admin, resource)
    error: KafkaError = info.value.args[0]
    return error


def entries(admin: AdminClient, broker_id: int) -> dict[str, ConfigEntry]:
    resource = ConfigResource(ResourceType.BROKER, str(broker_id))
    return admin.describe_configs([resource])[resource].result(timeout=WAIT_S)


def source(entry: ConfigEntry) -> int:
    return getattr(entry.source, "value", entry.source)


def set_cluster_default(address: str, name: str, value: str | None, operation: int = 0) -> None:
    """The BROKER resource "" (confluent-kafka refuses that name): sent as the Java admin sends it."""
    R = IncrementalAlterConfigsRequest[1]
    with RawConnection(address) as connection:
        response = connection.request(R(resources=[R.AlterConfigsResource(
            resource_type=ResourceType.BROKER.value, resource_name="", configs=[
                R.AlterConfigsResource.AlterableConfig(name=name, config_operation=operation, value=value)])],
            validate_only=False))
    assert [(r.resource_name, r.error_code) for r in response.responses] == [("", 0)], response


def produce(bootstrap_servers: str, size: int) -> KafkaError | None:
    outcome: list[KafkaError | None] = []
    producer = Producer({"bootstrap.servers": bootstrap_servers, "acks": "all", "message.timeout.ms": 10000,
                         "message.max.bytes": 10_000_000, "retries": 0})
    producer.produce(TOPIC, b"x" * size, partition=0, on_delivery=lambda err, _msg: outcome.append(err))
    assert producer.flush(WAIT_S) == 0
    return outcome[0]


@pytest.mark.parametrize("zookeeper", CLUSTER_MODES)
@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated")  # the legacy AlterConfigs is under test
def test_dynamic_broker_configs_are_stored_described_and_applied(zookeeper: bool) -> None:
    with minikafka.Cluster(brokers=2, zookeeper=zookeeper) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        admin.create_topics([NewTopic(TOPIC, 1, replica_assignment=[[1, 2]])])[TOPIC].result(timeout=WAIT_S)
        cluster.wait_for_isr(TOPIC, 0, 2)

        static = refused(admin, ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
            set_op("log.dirs", "/elsewhere")]))
        assert static.code() == KafkaError.INVALID_REQUEST
        assert "Cannot update these configs dynamically" in static.str()
        bad = refused(admin, ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
            set_op("leader.replication.throttled.rate", "fast")]))
        assert bad.code() == KafkaError.INVALID_REQUEST and "leader.replication.throttled.rate" in bad.str()
        alter(admin, ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
            set_op("log.retention.bytes", "3600000")]), validate_only=True)
        assert source(entries(admin, 1)["log.retention.bytes"]) != ConfigSource.DYNAMIC_BROKER_CONFIG.value

        assert produce(cluster.bootstrap_servers, 20_000) is None
        set_cluster_default(cluster.broker(1).address, "message.max.bytes", "10000")
        wait_until(lambda: all(source(entries(admin, b)["message.max.bytes"])
                               == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value for b in (1, 2)),
                   WAIT_S, message="the cluster default reaching both brokers")
        too_large = produce(cluster.bootstrap_servers, 20_000)
        assert too_large is not None and too_large.code() == KafkaError.MSG_SIZE_TOO_LARGE
        topic = ConfigResource(ResourceType.TOPIC, TOPIC)
        max_message = admin.describe_configs([topic])[topic].result(timeout=WAIT_S)["max.message.bytes"]
        assert (max_message.value, source(max_message)) == ("10000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)

        # the leader's own value wins over the default; the legacy AlterConfigs replaces its whole set
        leader = cluster.leader_of(TOPIC, 0).node_id
        legacy = ConfigResource(ResourceType.BROKER, str(leader), set_config={"message.max.bytes": "100000"})
        for future in admin.alter_configs([legacy]).values():
            future.result(timeout=WAIT_S)
        wait_until(lambda: entries(admin, leader)["message.max.bytes"].value == "100000", WAIT_S,
                   message="the leader's own value applied")  # ZooKeeper mode: after the change notification
        entry = entries(admin, leader)["message.max.bytes"]
        assert (source(entry), entry.is_read_only) == (ConfigSource.DYNAMIC_BROKER_CONFIG.value, False)
        assert produce(cluster.bootstrap_servers, 20_000) is None

        # deleted again: back to the static value (Kafka's default here)
        alter(admin, ConfigResource(ResourceType.BROKER, str(leader), incremental_configs=[
            ConfigEntry("message.max.bytes", None, incremental_operation=AlterConfigOpType.DELETE)]))
        set_cluster_default(cluster.broker(1).address, "message.max.bytes", None, operation=1)
        wait_until(lambda: all(source(entries(admin, b)["message.max.bytes"]) == ConfigSource.DEFAULT_CONFIG.value
                               for b in (1, 2)), WAIT_S, message="the default gone from both brokers")
        assert entries(admin, leader)["message.max.bytes"].value == "1048588"
        assert entries(admin, leader)["node.id"].is_read_only
