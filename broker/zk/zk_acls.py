"""ACLs in ZooKeeper, as Kafka's AclAuthorizer keeps them (layout in broker/metadata/acls.py): what the controller
writes for a batch of ACL records, and the reads the controller (when it takes over) and every broker (at start and
on each change notification) make.

ZooKeeper names no ACL by id, so an ACL's id here is derived from the binding itself (a name-based UUID): the
controller and every broker give the same binding the same id, and a RemoveAccessControlEntryRecord names it.
"""
from __future__ import annotations

import uuid
from collections.abc import Sequence

from minikafka.broker.metadata.acls import (
    ZK_EXTENDED_ACLS,
    ZK_LITERAL_ACLS,
    Acls,
    acl_of_record,
    acls_of_zk_json,
    zk_acls_json,
    zk_change_notification,
    zk_resource_path,
)
from minikafka.broker.security.acl import AclBinding, PatternType, ResourceType, from_camel_name
from minikafka.broker.zk.kafka_zk_client import CreateOp, DeleteOp, KafkaZkClient, SetDataOp, ZkWrite
from minikafka.protocol.metadata_records import (
    AccessControlEntryRecord,
    MetadataRecord,
    RemoveAccessControlEntryRecord,
)

ACL_ID_NAMESPACE = uuid.UUID("5c4f2d1e-8a4b-4f0e-9d3a-6b7e1c2a9f10")
ResourcePatternKey = tuple[ResourceType, PatternType, str]


def zk_acl_id(acl: AclBinding) -> uuid.UUID:
    return uuid.uuid5(ACL_ID_NAMESPACE, repr(acl))


def _pattern(acl: AclBinding) -> ResourcePatternKey:
    return acl.resource_type, acl.pattern_type, acl.resource_name


async def acl_record_writes(zk: KafkaZkClient, acls: Acls, records: Sequence[MetadataRecord]) -> list[ZkWrite]:
    """The writes of a batch's ACL records (applied to `acls`, the state before them): each changed resource
    pattern's znode (removed once it holds no ACL), then one change notification per pattern."""
    changed: dict[ResourcePatternKey, set[AclBinding]] = {}

    def held(pattern: ResourcePatternKey) -> set[AclBinding]:
        if pattern not in changed:
            changed[pattern] = {a for a in acls.values() if _pattern(a) == pattern}
        return changed[pattern]

    for record in records:
        if isinstance(record, AccessControlEntryRecord):
            acl = acl_of_record(record)
            held(_pattern(acl)).add(acl)
        elif isinstance(record, RemoveAccessControlEntryRecord) and record.id in acls:
            acl = acls[record.id]
            held(_pattern(acl)).discard(acl)
    writes: list[ZkWrite] = []
    for pattern, bindings in changed.items():
        path = zk_resource_path(*pattern)
        await zk.make_sure_persistent_path_exists(path.rpartition("/")[0])
        exists = await zk.path_exists(path)
        if bindings:
            writes.append(SetDataOp(path, zk_acls_json(bindings)) if exists else CreateOp(path, zk_acls_json(bindings)))
        elif exists:
            writes.append(DeleteOp(path))
    for pattern in changed:
        parent, data = zk_change_notification(*pattern)
        await zk.make_sure_persistent_path_exists(parent)
        writes.append(CreateOp(f"{parent}/acl_changes_", data, sequential=True))
    return writes


async def read_resource_acls(zk: KafkaZkClient, resource_type: ResourceType, pattern_type: PatternType,
                             name: str) -> list[AclBinding]:
    data, _version = await zk.get_data_and_version(zk_resource_path(resource_type, pattern_type, name))
    return acls_of_zk_json(resource_type, pattern_type, name, data or b"")


async def read_acls(zk: KafkaZkClient) -> dict[uuid.UUID, AclBinding]:
    """Every ACL in ZooKeeper, by its id."""
    found: dict[uuid.UUID, AclBinding] = {}
    roots = [(ZK_LITERAL_ACLS, PatternType.LITERAL)]
    roots += [(f"{ZK_EXTENDED_ACLS}/{child}", PatternType[child.upper()])
              for child in await zk.get_children(ZK_EXTENDED_ACLS) if child.upper() in PatternType.__members__]
    for root, pattern_type in roots:
        for type_name in await zk.get_children(root):
            try:
                resource_type = ResourceType(from_camel_name(ResourceType, type_name))
            except ValueError:
                continue
            for name in await zk.get_children(f"{root}/{type_name}"):
                for acl in await read_resource_acls(zk, resource_type, pattern_type, name):
                    found[zk_acl_id(acl)] = acl
    return found
