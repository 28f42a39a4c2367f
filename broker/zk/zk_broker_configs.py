"""Dynamic broker configs in ZooKeeper, where Kafka's ZooKeeper mode kept them: /config/brokers/<id> for one
broker, /config/brokers/<default> for the cluster-wide default, each change announced by a config change
notification naming the entity's path (`brokers/<id>`, `brokers/<default>`), which the brokers follow.

In the metadata image (as in KRaft's ConfigRecords) the cluster default is the broker resource named "".
"""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from minikafka.broker.metadata.metadata_image import BROKER_RESOURCE, CLUSTER_DEFAULT
from minikafka.broker.zk.kafka_zk_client import CreateOp, KafkaZkClient, SetDataOp, ZkWrite
from minikafka.broker.zk.zk_data import (
    BROKER_CONFIG,
    CONFIG_CHANGES_PATH,
    config_entity_path,
    config_entity_type_path,
    decode_config,
    encode_config,
)
from minikafka.protocol.metadata_records import ConfigRecord, MetadataRecord

ZK_DEFAULT = "<default>"  # Kafka's ZooKeeperInternals.DEFAULT_STRING
CONFIG_CHANGE_PREFIX = f"{CONFIG_CHANGES_PATH}/config_change_"  # ZooKeeper appends the 10-digit sequence


def zk_entity_name(resource_name: str) -> str:
    """The znode name of a BROKER resource: its id, or <default> for the cluster default."""
    return ZK_DEFAULT if resource_name == CLUSTER_DEFAULT else resource_name


def resource_name_of(entity_name: str) -> str:
    return CLUSTER_DEFAULT if entity_name == ZK_DEFAULT else entity_name


async def read_broker_configs(zk: KafkaZkClient) -> dict[str, dict[str, str]]:
    """Every broker's dynamic configs and the cluster default's, by resource name (entities without any left out)."""
    configs = {}
    for entity in await zk.get_children(config_entity_type_path(BROKER_CONFIG)):
        values = await read_entity_broker_configs(zk, resource_name_of(entity))
        if values:
            configs[resource_name_of(entity)] = values
    return configs


async def read_entity_broker_configs(zk: KafkaZkClient, resource_name: str) -> dict[str, str]:
    """One BROKER resource's dynamic configs ({} when its znode is missing or empty)."""
    entity = zk_entity_name(resource_name)
    data, _stat = await zk.get_data_and_stat(config_entity_path(BROKER_CONFIG, entity))
    return decode_config(BROKER_CONFIG, entity, data)


def broker_config_records(configs: Mapping[str, Mapping[str, str]]) -> list[ConfigRecord]:
    """The records that rebuild these dynamic broker configs in a controller's image."""
    return [ConfigRecord(resource_type=BROKER_RESOURCE, resource_name=name, name=key, value=value)
            for name, values in sorted(configs.items()) for key, value in sorted(values.items())]


async def broker_config_record_writes(zk: KafkaZkClient, configs: Mapping[str, Mapping[str, str]],
                                      records: Sequence[MetadataRecord]) -> list[ZkWrite]:
    """The writes of a batch's BROKER ConfigRecords (applied to `configs`, the state before them): each entity's
    znode with its whole new set, then one change notification per entity."""
    changed: dict[str, dict[str, str]] = {}
    for record in records:
        if not isinstance(record, ConfigRecord) or record.resource_type != BROKER_RESOURCE:
            continue
        values = changed.setdefault(record.resource_name, dict(configs.get(record.resource_name, {})))
        if record.value is None:
            values.pop(record.name, None)
        else:
            values[record.name] = record.value
    writes: list[ZkWrite] = []
    for name, values in changed.items():
        path = config_entity_path(BROKER_CONFIG, zk_entity_name(name))
        if await zk.path_exists(path):
            writes.append(SetDataOp(path, encode_config(values)))
        else:
            writes.append(CreateOp(path, encode_config(values)))
    for name in changed:
        notification = json.dumps({"version": 2, "entity_path": f"{BROKER_CONFIG}/{zk_entity_name(name)}"}).encode()
        writes.append(CreateOp(CONFIG_CHANGE_PREFIX, notification, sequential=True))
    return writes
