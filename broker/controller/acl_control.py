"""ACLs on the controller (Kafka's AclControlManager with the checks of the broker's AclApis): the
AccessControlEntryRecords of CreateAcls and the RemoveAccessControlEntryRecords of DeleteAcls.

Each creation succeeds or fails on its own: an UNKNOWN or ANY resource type, a pattern type other than LITERAL or
PREFIXED, an UNKNOWN or ANY operation, a permission other than ALLOW or DENY, an empty resource name, a CLUSTER
resource not named "kafka-cluster", or a principal without its type are INVALID_REQUEST with Kafka's message. A
binding that exists already succeeds and writes nothing. Each deletion filter deletes every binding it matches and
answers with them; a filter with an UNKNOWN value is INVALID_REQUEST. All records of a request commit together.
"""
from __future__ import annotations

import uuid
from collections.abc import Sequence

from minikafka.broker.metadata.acls import Acls, acl_record
from minikafka.broker.security.acl import (
    CLUSTER_NAME,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    parse_principal,
)
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.protocol.metadata_records import MetadataRecord, RemoveAccessControlEntryRecord

MAX_RECORDS_PER_USER_OP = 10000  # Kafka's QuorumController bound on the records of one request


def _invalid(message: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_REQUEST, message)


def validate_new_acl(acl: AclBinding) -> None:
    if acl.resource_type == ResourceType.CLUSTER and acl.resource_name != CLUSTER_NAME:
        raise _invalid(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    if not acl.resource_name:
        raise _invalid("Invalid empty resource name")
    if acl.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        raise _invalid(f"Invalid resourceType {acl.resource_type.name}")
    if acl.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise _invalid(f"Invalid patternType {acl.pattern_type.name}")
    if acl.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        raise _invalid(f"Invalid operation {acl.operation.name}")
    if acl.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        raise _invalid(f"Invalid permissionType {acl.permission_type.name}")
    try:
        parse_principal(acl.principal)
    except ValueError as exc:
        raise _invalid(str(exc)) from None


def create_acls(acls: Acls, creations: Sequence[AclBinding]) -> tuple[list[MetadataRecord], list[KafkaError | None]]:
    """The records of the new bindings, and each creation's result (None: created or there already)."""
    existing = set(acls.values())
    records: list[MetadataRecord] = []
    results: list[KafkaError | None] = []
    for acl in creations:
        try:
            validate_new_acl(acl)
        except KafkaError as exc:
            results.append(exc)
            continue
        if acl not in existing:
            existing.add(acl)
            acl_id = uuid.uuid4()
            while acl_id in acls:
                acl_id = uuid.uuid4()
            records.append(acl_record(acl_id, acl))
        results.append(None)
    if len(records) > MAX_RECORDS_PER_USER_OP:
        error = _invalid(f"Cannot create more than {MAX_RECORDS_PER_USER_OP} acls in a single request.")
        return [], [error] * len(creations)
    return records, results


def delete_acls(acls: Acls, filters: Sequence[AclBindingFilter]
                ) -> tuple[list[MetadataRecord], list[tuple[KafkaError | None, list[AclBinding]]]]:
    """The removals of every binding a filter matches (once, however many match it), and each filter's result:
    its error, or the bindings it matched."""
    removed: dict[uuid.UUID, AclBinding] = {}
    results: list[tuple[KafkaError | None, list[AclBinding]]] = []
    for acl_filter in filters:
        if acl_filter.is_unknown():
            results.append((_invalid("Unknown patternFilter." if acl_filter.pattern_type == PatternType.UNKNOWN
                                     or acl_filter.resource_type == ResourceType.UNKNOWN
                                     else "Unknown entryFilter."), []))
            continue
        matched = [(acl_id, acl) for acl_id, acl in acls.items() if acl_filter.matches(acl)]
        removed.update(matched)
        results.append((None, sorted(acl for _, acl in matched)))
    if len(removed) > MAX_RECORDS_PER_USER_OP:
        error = _invalid(f"Cannot remove more than {MAX_RECORDS_PER_USER_OP} acls in a single delete operation.")
        return [], [(error, []) for _ in filters]
    return [RemoveAccessControlEntryRecord(id=acl_id) for acl_id in removed], results
