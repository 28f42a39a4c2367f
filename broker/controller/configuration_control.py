"""Topic, broker and group configs on the controller (Kafka's ConfigurationControlManager): validation, incremental
alterations, and the ConfigRecords that carry a topic's new overrides or a broker's new dynamic configs.

A topic's overrides are validated as a whole against the controller's topic defaults, and a BROKER resource's
dynamic configs (one broker's, or the cluster default's) as Kafka's DynamicBrokerConfig validates them, before any
record is written, so a change is all or nothing and validate_only answers exactly as the change would.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from minikafka.broker.coordinator.group.group_config import GroupConfigDefaults, validate_group_configs
from minikafka.broker.metadata.dynamic_config import validate_dynamic_broker_configs
from minikafka.broker.metadata.metadata_image import (
    BROKER_RESOURCE,
    CLUSTER_DEFAULT,
    GROUP_RESOURCE,
    TOPIC_RESOURCE,
    MetadataImage,
)
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.protocol.metadata_records import ConfigRecord
from minikafka.storage.log_config import LogConfig

# IncrementalAlterConfigs operations
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
LIST_CONFIGS = frozenset({"cleanup.policy", "follower.replication.throttled.replicas",
                          "leader.replication.throttled.replicas"})
# Broker configs of Kafka's LIST type among the dynamic ones: the only broker configs APPEND and SUBTRACT take.
BROKER_LIST_CONFIGS = frozenset({"log.cleanup.policy", "metric.reporters", "listeners", "advertised.listeners",
                                 "ssl.cipher.suites", "ssl.enabled.protocols", "sasl.enabled.mechanisms",
                                 "sasl.kerberos.principal.to.local.rules"})
UNCLEAN_LEADER_ELECTION = "unclean.leader.election.enable"


@dataclass(frozen=True)
class ConfigAlteration:
    """One entry of an alter-configs request: SET/DELETE/APPEND/SUBTRACT of `name` (legacy AlterConfigs: SET)."""

    name: str
    operation: int
    value: str | None


def validate_topic_configs(configs: dict[str, str], defaults: LogConfig) -> LogConfig:
    """The effective config of a topic with these overrides; INVALID_CONFIG for an unknown name or a bad value."""
    try:
        return LogConfig.from_props(configs, defaults)
    except ValueError as exc:
        raise KafkaError(ErrorCode.INVALID_CONFIG, str(exc)) from None


def _null_value(name: str) -> str:
    return f"Invalid value null for configuration {name}: null is not supported"


def check_no_duplicates(alterations: Sequence[ConfigAlteration]) -> None:
    names = [a.name for a in alterations]
    if len(names) != len(set(names)):
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")


def incrementally_altered(current: dict[str, str], defaults: LogConfig | None,
                          alterations: Sequence[ConfigAlteration]) -> dict[str, str]:
    """A topic's overrides (`defaults` its defaults) or a broker resource's dynamic configs (`defaults` None) after
    SET, DELETE, APPEND and SUBTRACT, the last two for list configs only."""
    effective = validate_topic_configs(current, defaults) if defaults is not None else None
    list_configs = LIST_CONFIGS if defaults is not None else BROKER_LIST_CONFIGS
    new = dict(current)
    for a in alterations:
        if a.operation == SET:
            if a.value is None:
                raise KafkaError(ErrorCode.INVALID_CONFIG, _null_value(a.name))
            new[a.name] = a.value
        elif a.operation == DELETE:
            new.pop(a.name, None)
        elif a.operation in (APPEND, SUBTRACT):
            if a.name not in list_configs:
                raise KafkaError(ErrorCode.INVALID_CONFIG,
                                 f"Config value append/subtract is not allowed for config key: {a.name}")
            value = effective.value_string(a.name) if effective is not None else new.get(a.name, "")
            items = [i.strip() for i in value.split(",") if i.strip()]
            change = [i for i in (a.value or "").split(",") if i]
            if a.operation == APPEND:
                items += [i for i in change if i not in items]
            else:
                items = [i for i in items if i not in change]
            new[a.name] = ",".join(items)
        else:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"unknown config operation {a.operation}")
    return new


def replaced(alterations: Sequence[ConfigAlteration]) -> dict[str, str]:
    """The legacy AlterConfigs: the given set replaces all of a topic's overrides."""
    new = {}
    for a in alterations:
        if a.value is None:
            raise KafkaError(ErrorCode.INVALID_CONFIG, _null_value(a.name))
        new[a.name] = a.value
    return new


def config_records(topic: str, current: dict[str, str], new: dict[str, str],
                   resource_type: int = TOPIC_RESOURCE) -> list[ConfigRecord]:
    """ConfigRecords taking a topic's (or another resource's) configs from `current` to `new`: a null value deletes
    an entry."""
    records = [ConfigRecord(resource_type=resource_type, resource_name=topic, name=name, value=None)
               for name in sorted(current) if name not in new]
    records += [ConfigRecord(resource_type=resource_type, resource_name=topic, name=name, value=value)
                for name, value in sorted(new.items()) if current.get(name) != value]
    return records


def group_config_records(image: MetadataImage, group: str, alterations: Sequence[ConfigAlteration],
                         incremental: bool, defaults: GroupConfigDefaults) -> list[ConfigRecord]:
    """ConfigRecords altering a group's config overrides, validated as a whole (Kafka's GroupConfig.validate); a
    group need not exist to be configured."""
    if not group:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Group name must not be empty")
    check_no_duplicates(alterations)
    for a in alterations:
        if a.operation in (APPEND, SUBTRACT):
            raise KafkaError(ErrorCode.INVALID_CONFIG,
                             f"Config value append/subtract is not allowed for config key: {a.name}")
    current = image.group_configs.get(group, {})
    new = incrementally_altered(current, None, alterations) if incremental else replaced(alterations)
    validate_group_configs(new, defaults)
    return config_records(group, current, new, GROUP_RESOURCE)


def broker_config_records(image: MetadataImage, resource_name: str, alterations: Sequence[ConfigAlteration],
                          incremental: bool) -> list[ConfigRecord]:
    """ConfigRecords altering the dynamic configs of broker `resource_name` ("" for the cluster default), validated
    as a whole; INVALID_REQUEST for a name that is not a broker id, or configs Kafka refuses to set dynamically."""
    if resource_name != CLUSTER_DEFAULT and not resource_name.isdigit():
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Node id must be an integer, but it is: {resource_name}")
    check_no_duplicates(alterations)
    for a in alterations:
        if a.value is None and (a.operation != DELETE or not incremental):
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {a.name}")
    current = image.broker_configs.get(resource_name, {})
    new = incrementally_altered(current, None, alterations) if incremental else replaced(alterations)
    validate_dynamic_broker_configs(new, per_broker=resource_name != CLUSTER_DEFAULT)
    return config_records(resource_name, current, new, BROKER_RESOURCE)


def unclean_leader_election_enabled(image: MetadataImage, topic: str, node_id: int, defaults: LogConfig) -> bool:
    """unclean.leader.election.enable as it applies to `topic`: its own override, else this controller's dynamic
    broker config, else the cluster-wide dynamic default, else the static property."""
    for scope in (image.topic_configs.get(topic, {}), image.broker_configs.get(str(node_id), {}),
                  image.broker_configs.get(CLUSTER_DEFAULT, {})):
        if UNCLEAN_LEADER_ELECTION in scope:
            return scope[UNCLEAN_LEADER_ELECTION].strip().lower() == "true"
    return defaults.unclean_leader_election_enable
