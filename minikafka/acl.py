"""`minikafka.Acl`: an ACL binding as a test states it, for `Broker(acls=[...])`, `Cluster(acls=[...])` and the
handles' `add_acls` / `remove_acls`.

    minikafka.Acl("User:alice", "READ", topic="orders")
    minikafka.Acl("User:alice", "WRITE", topic="orders-", pattern="PREFIXED")
    minikafka.Acl("User:bob", "ALL", group="*", permission="DENY")
    minikafka.Acl("User:svc", "IDEMPOTENT_WRITE", cluster=True)

Operations, pattern types and permissions are Kafka's names (READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE,
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, ALL; LITERAL or PREFIXED; ALLOW or DENY). The
handle creates them as its admin user, a super user, with CreateAcls (and deletes them with DeleteAcls), exactly as
kafka-acls.sh would.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

RESOURCE_TYPES = ("topic", "group", "cluster", "transactional_id", "user")


@dataclass(frozen=True)
class Acl:
    principal: str
    operation: str
    topic: str | None = None
    group: str | None = None
    cluster: bool = False
    transactional_id: str | None = None
    user: str | None = None  # a USER resource (delegation tokens' CREATE_TOKENS / DESCRIBE_TOKENS)
    pattern: str = "LITERAL"
    permission: str = "ALLOW"
    host: str = "*"

    def __post_init__(self) -> None:
        named = self._named()
        if len(named) != 1:
            raise ValueError(f"an Acl names exactly one resource (topic=, group=, cluster=True, transactional_id= or "
                             f"user=), not {named or 'none'}")
        if ":" not in self.principal:
            raise ValueError(f"principal {self.principal!r} is not TYPE:NAME, e.g. 'User:alice'")

    @property
    def resource(self) -> tuple[str, str]:
        """(Kafka's resource type name, resource name)."""
        (kind,) = self._named()
        return (kind.upper(), "kafka-cluster") if kind == "cluster" else (kind.upper(), getattr(self, kind))

    def _named(self) -> list[str]:
        return [kind for kind in RESOURCE_TYPES if getattr(self, kind) not in (None, False)]

    def to_kafka_python(self) -> Any:
        from kafka.admin import (
            ACL,
            ACLOperation,
            ACLPermissionType,
            ACLResourcePatternType,
            ResourcePattern,
            ResourceType,
        )

        kind, name = self.resource
        return ACL(self.principal, self.host, ACLOperation[self.operation.upper()],
                   ACLPermissionType[self.permission.upper()],
                   ResourcePattern(ResourceType[kind], name, ACLResourcePatternType[self.pattern.upper()]))


def _admin(client_config: Mapping[str, Any]) -> Any:
    from kafka.admin import KafkaAdminClient

    return KafkaAdminClient(**client_config)


def create_acls(client_config: Mapping[str, Any], acls: Iterable[Acl]) -> None:
    """CreateAcls as the admin: raises with the broker's error when one is refused."""
    wanted = [a.to_kafka_python() for a in acls]
    if not wanted:
        return
    admin = _admin(client_config)
    try:
        result = admin.create_acls(wanted)
    finally:
        admin.close()
    if result["failed"]:  # kafka-python lists the error classes of the refused ones
        raise RuntimeError(f"the broker refused {len(result['failed'])} ACL(s): {result['failed']}")


def delete_acls(client_config: Mapping[str, Any], acls: Iterable[Acl]) -> None:
    """DeleteAcls of exactly these bindings, as the admin."""
    from kafka.admin import ACLFilter, ResourcePatternFilter

    filters = []
    for acl in acls:
        binding = acl.to_kafka_python()
        filters.append(ACLFilter(binding.principal, binding.host, binding.operation, binding.permission_type,
                                 ResourcePatternFilter(binding.resource_pattern.resource_type,
                                                       binding.resource_pattern.resource_name,
                                                       binding.resource_pattern.pattern_type)))
    if not filters:
        return
    admin = _admin(client_config)
    try:
        results = admin.delete_acls(filters)
    finally:
        admin.close()
    for acl_filter, _deleted, error in results:
        if error.errno != 0:
            raise RuntimeError(f"the broker refused to delete {acl_filter}: {error!r}")
