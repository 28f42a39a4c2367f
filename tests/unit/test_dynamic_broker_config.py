"""Dynamic broker configs: Kafka's validation, their alteration on the controller (per broker and cluster default,
SET/DELETE/APPEND/SUBTRACT, legacy replace, validate_only), and a broker's view of them (overlay and describe)."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from minikafka.broker.controller import QuorumController
from minikafka.broker.controller.configuration_control import APPEND, DELETE, SET, SUBTRACT, ConfigAlteration
from minikafka.broker.controller.controller_config import QuorumControllerConfig
from minikafka.broker.controller.quorum_controller import ConfigResourceAlteration
from minikafka.broker.metadata.dynamic_config import validate_dynamic_broker_configs
from minikafka.broker.metadata.metadata_image import BROKER_RESOURCE
from minikafka.broker.replication.replication_quota_manager import UNLIMITED
from minikafka.broker.server.dynamic_broker_config import (
    SOURCE_DYNAMIC_BROKER_CONFIG,
    SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG,
    DynamicBrokerConfig,
)
from minikafka.config import BrokerConfig
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.storage.log_config import (
    SOURCE_DEFAULT_CONFIG,
    SOURCE_STATIC_BROKER_CONFIG,
    SOURCE_TOPIC_CONFIG,
    LogConfig,
)

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"


@pytest.fixture
def controller(tmp_path: Path) -> Iterator[QuorumController]:
    opened = QuorumController.open(QuorumControllerConfig(node_id=3000, cluster_id=CLUSTER,
                                                          auto_leader_rebalance_enable=False), tmp_path / "metadata")
    yield opened
    opened.close()


def refusal(configs: dict[str, str], per_broker: bool = True) -> tuple[ErrorCode, str]:
    with pytest.raises(KafkaError) as info:
        validate_dynamic_broker_configs(configs, per_broker)
    return info.value.code, str(info.value)


def test_dynamic_names_and_custom_properties_are_accepted() -> None:
    validate_dynamic_broker_configs({"leader.replication.throttled.rate": "1000", "log.retention.ms": "60000",
                                     "message.max.bytes": "2000000", "num.replica.fetchers": "2",
                                     "my.own.property": "anything"}, per_broker=False)
    validate_dynamic_broker_configs({"listeners": "PLAINTEXT://127.0.0.1:9092"}, per_broker=True)


def test_static_configs_are_read_only() -> None:
    code, message = refusal({"log.dirs": "/x", "node.id": "4", "log.retention.ms": "1"})
    assert code == ErrorCode.INVALID_REQUEST
    assert "Cannot update these configs dynamically: Set(log.dirs, node.id)" in message
    assert refusal({"log.retention.hours": "1"})[0] == ErrorCode.INVALID_REQUEST  # only the ms synonym is dynamic


def test_per_broker_configs_are_refused_as_the_cluster_default() -> None:
    code, message = refusal({"listeners": "PLAINTEXT://:9092"}, per_broker=False)
    assert code == ErrorCode.INVALID_REQUEST and "default cluster level" in message
    validate_dynamic_broker_configs({"max.connections": "10"}, per_broker=False)


@pytest.mark.parametrize("name, value", [("leader.replication.throttled.rate", "fast"),
                                         ("follower.replication.throttled.rate", "-1"),
                                         ("log.retention.ms", "soon"), ("num.io.threads", "0"),
                                         ("unclean.leader.election.enable", "maybe"),
                                         ("log.message.timestamp.type", "Whenever")])
def test_bad_values_are_refused(name: str, value: str) -> None:
    code, message = refusal({name: value})
    assert code == ErrorCode.INVALID_REQUEST and name in message


async def alter(controller: QuorumController, name: str, *alterations: tuple[str, int, str | None],
                incremental: bool = True, validate_only: bool = False) -> KafkaError | None:
    resource = ConfigResourceAlteration(BROKER_RESOURCE, name, [ConfigAlteration(*a) for a in alterations])
    return (await controller.alter_configs([resource], incremental=incremental, validate_only=validate_only))[0]


async def test_the_controller_alters_a_brokers_and_the_defaults_dynamic_configs(controller: QuorumController) -> None:
    assert await alter(controller, "1", ("follower.replication.throttled.rate", SET, "1000"),
                       ("metric.reporters", APPEND, "a,b")) is None
    assert await alter(controller, "", ("log.retention.ms", SET, "60000")) is None
    assert controller.image.broker_configs == {"1": {"follower.replication.throttled.rate": "1000",
                                                     "metric.reporters": "a,b"},
                                               "": {"log.retention.ms": "60000"}}
    assert await alter(controller, "1", ("metric.reporters", SUBTRACT, "a"),
                       ("follower.replication.throttled.rate", DELETE, None)) is None
    assert controller.image.broker_configs["1"] == {"metric.reporters": "b"}
    assert await alter(controller, "1", ("leader.replication.throttled.rate", SET, "5"),
                       validate_only=True) is None
    assert controller.image.broker_configs["1"] == {"metric.reporters": "b"}
    # the legacy AlterConfigs replaces the whole set
    assert await alter(controller, "1", ("leader.replication.throttled.rate", SET, "5"), incremental=False) is None
    assert controller.image.broker_configs["1"] == {"leader.replication.throttled.rate": "5"}


async def test_the_controller_refuses_what_kafka_refuses(controller: QuorumController) -> None:
    static = await alter(controller, "1", ("log.dirs", SET, "/x"), validate_only=True)
    assert static is not None and static.code == ErrorCode.INVALID_REQUEST
    bad = await alter(controller, "1", ("leader.replication.throttled.rate", SET, "lots"))
    assert bad is not None and bad.code == ErrorCode.INVALID_REQUEST
    not_a_list = await alter(controller, "1", ("log.retention.ms", APPEND, "5"))
    assert not_a_list is not None and not_a_list.code == ErrorCode.INVALID_CONFIG
    not_an_id = await alter(controller, "one", ("log.retention.ms", SET, "5"))
    assert not_an_id is not None and not_an_id.code == ErrorCode.INVALID_REQUEST
    duplicate = await alter(controller, "1", ("log.retention.ms", SET, "5"), ("log.retention.ms", SET, "6"))
    assert duplicate is not None and duplicate.code == ErrorCode.INVALID_REQUEST
    assert controller.image.broker_configs == {}


def test_a_broker_lays_its_own_over_the_default_over_its_static_config() -> None:
    config = DynamicBrokerConfig(BrokerConfig({"node.id": "1", "log.retention.ms": "1000",
                                               "message.max.bytes": "5000"}))
    assert config.log_defaults.retention_ms == 1000
    assert config.replication_throttled_rate("leader.replication.throttled.rate") == UNLIMITED
    changed = config.update({"": {"log.retention.ms": "2000", "leader.replication.throttled.rate": "300"},
                             "1": {"leader.replication.throttled.rate": "100"},
                             "2": {"log.retention.ms": "9"}})
    assert changed and config.log_defaults.retention_ms == 2000 and config.log_defaults.max_message_bytes == 5000
    assert config.replication_throttled_rate("leader.replication.throttled.rate") == 100
    assert not config.update({"": {"log.retention.ms": "2000"}})  # the log defaults stay as they were
    assert config.replication_throttled_rate("leader.replication.throttled.rate") == UNLIMITED
    assert config.update({}) and config.log_defaults.retention_ms == 1000


def test_describe_reports_kafkas_sources() -> None:
    config = DynamicBrokerConfig(BrokerConfig({"node.id": "1", "log.retention.ms": "1000"}))
    config.update({"": {"message.max.bytes": "3000", "log.retention.ms": "7"},
                   "1": {"log.retention.ms": "2000", "ssl.keystore.password": "secret"}})
    entries = {e.name: e for e in config.describe("1")}
    assert (entries["log.retention.ms"].value, entries["log.retention.ms"].source) == (
        "2000", SOURCE_DYNAMIC_BROKER_CONFIG)
    assert (entries["message.max.bytes"].value, entries["message.max.bytes"].source) == (
        "3000", SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG)
    assert entries["node.id"].source == SOURCE_STATIC_BROKER_CONFIG and entries["node.id"].read_only
    assert entries["log.segment.bytes"].source == SOURCE_DEFAULT_CONFIG and not entries["log.segment.bytes"].read_only
    assert not entries["log.retention.ms"].read_only
    assert entries["leader.replication.throttled.rate"].value == str(UNLIMITED)
    assert entries["ssl.keystore.password"].is_sensitive
    defaults = config.describe("")
    assert [(e.name, e.value, e.source) for e in defaults] == [
        ("log.retention.ms", "7", SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("message.max.bytes", "3000", SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG)]


def test_a_topics_configs_name_the_dynamic_broker_config_they_come_from() -> None:
    config = DynamicBrokerConfig(BrokerConfig({"node.id": "1", "log.segment.bytes": "1048576"}))
    config.update({"": {"message.max.bytes": "3000"}, "1": {"log.retention.ms": "2000"}})
    entries = {e.name: e for e in (config.topic_entry(e) for e in
                                   LogConfig.from_props({"retention.bytes": "5"}, config.log_defaults).describe())}
    assert (entries["max.message.bytes"].value, entries["max.message.bytes"].source) == (
        "3000", SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG)
    assert (entries["retention.ms"].value, entries["retention.ms"].source) == ("2000", SOURCE_DYNAMIC_BROKER_CONFIG)
    assert entries["segment.bytes"].source == SOURCE_STATIC_BROKER_CONFIG
    assert entries["retention.bytes"].source == SOURCE_TOPIC_CONFIG
    assert entries["segment.ms"].source == SOURCE_DEFAULT_CONFIG


def test_keystores_are_set_per_listener() -> None:
    code, message = refusal({"ssl.keystore.location": "/k"})
    assert code == ErrorCode.INVALID_REQUEST and "listener prefix" in message
    validate_dynamic_broker_configs({"listener.name.internal.ssl.keystore.location": "/k"}, per_broker=True)
