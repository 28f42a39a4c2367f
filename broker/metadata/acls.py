"""ACL bindings as cluster metadata, shared by the metadata image, the controller, the ZooKeeper store and the
brokers: an AccessControlEntryRecord is one binding under a Uuid (Kafka's StandardAclWithId), removed by that id.

In ZooKeeper (Kafka's AclAuthorizer layout) a resource pattern's bindings are one znode's JSON,
`{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"}]}`, at
`/kafka-acl/<Type>/<name>` for a literal pattern and `/kafka-acl-extended/prefixed/<Type>/<name>` for a prefixed one;
a change is announced by a sequential `acl_changes_` znode under `/kafka-acl-changes` (the text "TOPIC:name") or
`/kafka-acl-extended-changes` (JSON naming the resource type, name and pattern type).
"""
from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping

from minikafka.broker.security.acl import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    camel_name,
    from_camel_name,
)
from minikafka.protocol.metadata_records import AccessControlEntryRecord

Acls = Mapping[uuid.UUID, AclBinding]  # every ACL of the cluster, by id

ZK_LITERAL_ACLS = "/kafka-acl"
ZK_EXTENDED_ACLS = "/kafka-acl-extended"
ZK_LITERAL_CHANGES = "/kafka-acl-changes"
ZK_EXTENDED_CHANGES = "/kafka-acl-extended-changes"
ZK_CHANGE_PREFIX = "acl_changes_"
ZK_ACL_VERSION = 1


def acl_record(acl_id: uuid.UUID, acl: AclBinding) -> AccessControlEntryRecord:
    return AccessControlEntryRecord(
        id=acl_id, resource_type=int(acl.resource_type), resource_name=acl.resource_name,
        pattern_type=int(acl.pattern_type), principal=acl.principal, host=acl.host, operation=int(acl.operation),
        permission_type=int(acl.permission_type))


def acl_of_record(record: AccessControlEntryRecord) -> AclBinding:
    return AclBinding(ResourceType(record.resource_type), record.resource_name, PatternType(record.pattern_type),
                      record.principal, record.host, AclOperation(record.operation),
                      AclPermissionType(record.permission_type))


def acl_records(acls: Acls) -> list[AccessControlEntryRecord]:
    return [acl_record(acl_id, acl) for acl_id, acl in acls.items()]


def zk_resource_path(resource_type: ResourceType, pattern_type: PatternType, name: str) -> str:
    """The znode of a resource pattern's ACLs."""
    if pattern_type == PatternType.LITERAL:
        return f"{ZK_LITERAL_ACLS}/{camel_name(resource_type)}/{name}"
    return f"{ZK_EXTENDED_ACLS}/{pattern_type.name.lower()}/{camel_name(resource_type)}/{name}"


def zk_acls_json(acls: Iterable[AclBinding]) -> bytes:
    """A resource pattern's znode value: its ACLs' entries."""
    entries = [{"principal": a.principal, "permissionType": camel_name(a.permission_type),
                "operation": camel_name(a.operation), "host": a.host} for a in sorted(acls)]
    return json.dumps({"version": ZK_ACL_VERSION, "acls": entries}).encode()


def acls_of_zk_json(resource_type: ResourceType, pattern_type: PatternType, name: str,
                    data: bytes) -> list[AclBinding]:
    """The bindings a resource pattern's znode holds."""
    if not data:
        return []
    entries = json.loads(data).get("acls", [])
    return [AclBinding(resource_type, name, pattern_type, e["principal"], e["host"],
                       AclOperation(from_camel_name(AclOperation, e["operation"])),
                       AclPermissionType(from_camel_name(AclPermissionType, e["permissionType"])))
            for e in entries]


def zk_change_notification(resource_type: ResourceType, pattern_type: PatternType, name: str) -> tuple[str, bytes]:
    """The change znode's parent and value that announce a change of the pattern's ACLs."""
    if pattern_type == PatternType.LITERAL:
        return ZK_LITERAL_CHANGES, f"{resource_type.name}:{name}".encode()
    return ZK_EXTENDED_CHANGES, json.dumps({"version": ZK_ACL_VERSION, "resourceType": resource_type.name,
                                            "name": name, "patternType": pattern_type.name}).encode()
