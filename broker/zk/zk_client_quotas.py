"""Client quotas in ZooKeeper, where Kafka's ZooKeeper mode kept them: an entity's quotas are entries of its config
znode (/config/users/<user>, /config/clients/<client>, /config/users/<user>/clients/<client>, /config/ips/<ip>,
"<default>" for a default), and each change is announced by a config change notification naming the entity's
path (`users/<user>/clients/<client>`), which the brokers follow.

Entries of those znodes that are not quotas (a user's SCRAM credentials) are kept as they are.
"""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from minikafka.broker.metadata.client_quota_entity import (
    IP_KEYS,
    USER_AND_CLIENT_KEYS,
    ZK_CLIENTS,
    ZK_IPS,
    ZK_USERS,
    ClientQuotaEntity,
    ClientQuotas,
    entity_of_zk_path,
    quota_config,
    quota_entity,
    quota_values,
    zk_entity_path,
)
from minikafka.broker.zk.kafka_zk_client import CreateOp, KafkaZkClient, SetDataOp, ZkWrite
from minikafka.broker.zk.zk_data import CONFIG_CHANGES_PATH, CONFIG_PATH, decode_config, encode_config
from minikafka.protocol.metadata_records import ClientQuotaRecord, MetadataRecord

CONFIG_CHANGE_PREFIX = f"{CONFIG_CHANGES_PATH}/config_change_"  # ZooKeeper appends the 10-digit sequence


def _decode(entity_path: str, data: bytes | None) -> dict[str, str]:
    entity_type, entity_name = entity_path.split("/", 1)
    return decode_config(entity_type, entity_name, data)


def _is_quota_key(key: str) -> bool:
    return key in USER_AND_CLIENT_KEYS or key in IP_KEYS


async def client_quota_writes(zk: KafkaZkClient, entity: ClientQuotaEntity, values: Mapping[str, float],
                              created: set[str]) -> list[ZkWrite]:
    """The writes giving `entity`'s config znode these quotas (creating it, and its parents, when missing);
    `created` holds the paths earlier writes of the same batch create, and takes those these create."""
    entity_path = zk_entity_path(entity)
    path = f"{CONFIG_PATH}/{entity_path}"
    data, stat = await zk.get_data_and_stat(path)
    kept = {k: v for k, v in _decode(entity_path, data).items() if not _is_quota_key(k)}
    config = encode_config({**kept, **quota_config(values)})
    if stat is not None or path in created:
        return [SetDataOp(path, config)]
    writes: list[ZkWrite] = []
    parts = entity_path.split("/")
    for depth in range(2, len(parts)):  # /config/users/<user> and .../clients of a user's client
        parent = f"{CONFIG_PATH}/{'/'.join(parts[:depth])}"
        if parent not in created and not await zk.path_exists(parent):
            writes.append(CreateOp(parent, encode_config({}) if depth == 2 else b""))
            created.add(parent)
    writes.append(CreateOp(path, config))
    created.add(path)
    return writes


async def client_quota_record_writes(zk: KafkaZkClient, quotas: ClientQuotas,
                                     records: Sequence[MetadataRecord]) -> list[ZkWrite]:
    """The writes of a batch's ClientQuotaRecords (applied to `quotas`, the state before them): each entity's
    config znode, then one change notification per entity."""
    changed: dict[ClientQuotaEntity, dict[str, float]] = {}
    for record in records:
        if not isinstance(record, ClientQuotaRecord):
            continue
        entity = quota_entity((e.entity_type, e.entity_name) for e in record.entity)
        values = changed.setdefault(entity, dict(quotas.get(entity, {})))
        if record.remove:
            values.pop(record.key, None)
        else:
            values[record.key] = record.value
    writes: list[ZkWrite] = []
    created: set[str] = set()
    for entity, values in sorted(changed.items(), key=lambda item: len(item[0])):  # a user before its clients
        writes += await client_quota_writes(zk, entity, values, created)
    for entity in changed:
        notification = json.dumps({"version": 2, "entity_path": zk_entity_path(entity)}).encode()
        writes.append(CreateOp(CONFIG_CHANGE_PREFIX, notification, sequential=True))
    return writes


def client_quota_records(quotas: ClientQuotas) -> list[ClientQuotaRecord]:
    """The records that rebuild these quotas in a controller's image."""
    return [ClientQuotaRecord(entity=[ClientQuotaRecord.EntityData(entity_type=t, entity_name=n) for t, n in entity],
                              key=key, value=value, remove=False)
            for entity, values in quotas.items() for key, value in sorted(values.items())]


async def read_client_quotas(zk: KafkaZkClient) -> dict[ClientQuotaEntity, dict[str, float]]:
    """Every entity's quotas, as the controller rebuilds them when it takes over (entities without any left out)."""
    entity_paths = [f"{ZK_CLIENTS}/{c}" for c in await zk.get_children(f"{CONFIG_PATH}/{ZK_CLIENTS}")]
    entity_paths += [f"{ZK_IPS}/{i}" for i in await zk.get_children(f"{CONFIG_PATH}/{ZK_IPS}")]
    for user in await zk.get_children(f"{CONFIG_PATH}/{ZK_USERS}"):
        entity_paths.append(f"{ZK_USERS}/{user}")
        entity_paths += [f"{ZK_USERS}/{user}/{ZK_CLIENTS}/{c}"
                         for c in await zk.get_children(f"{CONFIG_PATH}/{ZK_USERS}/{user}/{ZK_CLIENTS}")]
    quotas: dict[ClientQuotaEntity, dict[str, float]] = {}
    for entity_path in entity_paths:
        entity = entity_of_zk_path(entity_path)
        if entity is None:
            continue
        values = await read_entity_quotas(zk, entity)
        if values:
            quotas[entity] = values
    return quotas


async def read_entity_quotas(zk: KafkaZkClient, entity: ClientQuotaEntity) -> dict[str, float]:
    """One entity's quotas as its config znode holds them ({} when it has none or no znode)."""
    entity_path = zk_entity_path(entity)
    data, _stat = await zk.get_data_and_stat(f"{CONFIG_PATH}/{entity_path}")
    return quota_values(_decode(entity_path, data))
