"""Kafka's StandardAuthorizer: may this principal, from this host, do this operation on this resource?

The rules are StandardAuthorizerData's. Super users (`super.users`, "User:admin;User:bob") may do anything. Otherwise
every ACL whose pattern covers the resource counts: the literal name, the literal wildcard "*", and each prefix
pattern the name starts with. An ACL applies when its principal is the caller's or "User:*", its host the caller's
address or "*", and its operation the one asked for or ALL; an ALLOW of READ, WRITE, DELETE or ALTER also allows
DESCRIBE, and an ALLOW of ALTER_CONFIGS allows DESCRIBE_CONFIGS (a DENY implies nothing). A DENY that applies wins.
With no ALLOW that applies the request is denied, unless no ACL covers the resource at all: then
`allow.everyone.if.no.acl.found` decides.

The ACLs are the metadata image's (replayed AccessControlEntryRecords, or ZooKeeper's `/kafka-acl` znodes); an
index by resource is rebuilt whenever the image's ACL version moves, so a change applies to the next request.
Denials are logged as Kafka's `kafka.authorizer.logger` logs them, at INFO.
"""
from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from minikafka.broker.security.acl import (
    SUPPORTED_OPERATIONS,
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    camel_name,
)

log = logging.getLogger("minikafka.authorizer")

IMPLIES_DESCRIBE = frozenset({AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE,
                              AclOperation.ALTER})
IMPLIES_DESCRIBE_CONFIGS = frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS})


class AclImage(Protocol):
    """Where the ACLs are: the metadata image, by ACL id, with a version that moves on every change."""

    @property
    def acls(self) -> Mapping[uuid.UUID, AclBinding]: ...

    @property
    def acl_version(self) -> int: ...


def parse_super_users(value: str) -> frozenset[str]:
    """`super.users`: principals separated by semicolons."""
    return frozenset(p.strip() for p in value.split(";") if p.strip())


@dataclass
class _AclIndex:
    literal: dict[tuple[ResourceType, str], list[AclBinding]] = field(default_factory=dict)
    prefixed: dict[ResourceType, list[AclBinding]] = field(default_factory=dict)


def applies(acl: AclBinding, principal: str, host: str, operation: AclOperation) -> AclPermissionType | None:
    """Kafka's StandardAuthorizerData.findResult: the ACL's permission when it applies to the request, else None."""
    if acl.principal not in (principal, WILDCARD_PRINCIPAL):
        return None
    if acl.host not in (WILDCARD_HOST, host):
        return None
    if acl.operation != AclOperation.ALL:
        if acl.permission_type == AclPermissionType.ALLOW:
            if operation == AclOperation.DESCRIBE:
                if acl.operation not in IMPLIES_DESCRIBE:
                    return None
            elif operation == AclOperation.DESCRIBE_CONFIGS:
                if acl.operation not in IMPLIES_DESCRIBE_CONFIGS:
                    return None
            elif operation != acl.operation:
                return None
        elif operation != acl.operation:
            return None
    return acl.permission_type


class StandardAuthorizer:
    def __init__(self, image: Callable[[], AclImage], super_users: frozenset[str], allow_everyone_if_no_acl_found:
                 bool) -> None:
        self._image = image
        self.super_users = super_users
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._index = _AclIndex()
        self._indexed: tuple[int, int] | None = None  # (id of the image, its ACL version) the index was built from

    def _current_index(self) -> _AclIndex:
        image = self._image()
        key = (id(image), image.acl_version)
        if key != self._indexed:
            index = _AclIndex()
            for acl in image.acls.values():
                if acl.pattern_type == PatternType.LITERAL:
                    index.literal.setdefault((acl.resource_type, acl.resource_name), []).append(acl)
                else:
                    index.prefixed.setdefault(acl.resource_type, []).append(acl)
            self._index, self._indexed = index, key
        return self._index

    def _covering(self, resource_type: ResourceType, name: str) -> Iterator[AclBinding]:
        """The ACLs whose pattern covers the literal resource `name`."""
        index = self._current_index()
        yield from index.literal.get((resource_type, name), ())
        if name != WILDCARD_RESOURCE:
            yield from index.literal.get((resource_type, WILDCARD_RESOURCE), ())
        for acl in index.prefixed.get(resource_type, ()):
            if name.startswith(acl.resource_name):
                yield acl

    def authorize(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType,
                  name: str, *, request: str = "", log_if_denied: bool = True) -> bool:
        if principal in self.super_users:
            return True
        covered = False
        allowed = False
        for acl in self._covering(resource_type, name):
            covered = True
            permission = applies(acl, principal, host, operation)
            if permission == AclPermissionType.DENY:
                allowed = False
                break
            if permission == AclPermissionType.ALLOW:
                allowed = True
        else:
            if not covered:
                allowed = self.allow_everyone_if_no_acl_found
        if not allowed and log_if_denied:
            log.info("Principal = %s is Denied operation = %s from host = %s on resource = %s:LITERAL:%s for "
                     "request = %s", principal, operation.name, host, camel_name(resource_type), name, request)
        return allowed

    def authorize_by_resource_type(self, principal: str, host: str, operation: AclOperation,
                                   resource_type: ResourceType) -> bool:
        """Kafka's Authorizer.authorizeByResourceType: whether some resource of the type could be allowed, as
        InitProducerId asks for an idempotent producer (WRITE on any topic)."""
        if self.authorize(principal, host, operation, resource_type, "hardcode", log_if_denied=False):
            return True
        deny_literal: set[str] = set()
        deny_prefixed: set[str] = set()
        allows: list[AclBinding] = []
        for acl in self._image().acls.values():
            if acl.resource_type != resource_type or acl.host not in (host, WILDCARD_HOST):
                continue
            if acl.principal not in (principal, WILDCARD_PRINCIPAL):
                continue
            if acl.operation not in (operation, AclOperation.ALL):
                continue
            if acl.permission_type == AclPermissionType.DENY:
                if acl.pattern_type == PatternType.LITERAL:
                    if acl.resource_name == WILDCARD_RESOURCE:
                        return False
                    deny_literal.add(acl.resource_name)
                else:
                    deny_prefixed.add(acl.resource_name)
            elif acl.permission_type == AclPermissionType.ALLOW:
                if acl.pattern_type == PatternType.LITERAL and acl.resource_name == WILDCARD_RESOURCE:
                    return True
                allows.append(acl)
        for acl in allows:
            if acl.pattern_type == PatternType.LITERAL and acl.resource_name in deny_literal:
                continue
            name = acl.resource_name
            if not any(name[:end] in deny_prefixed for end in range(1, len(name) + 1)):
                return True
        return False

    def authorized_operations(self, principal: str, host: str, resource_type: ResourceType,
                              name: str) -> frozenset[AclOperation]:
        """The operations of the resource's type the principal is allowed (Metadata's and DescribeGroups'
        authorized_operations)."""
        return frozenset(op for op in SUPPORTED_OPERATIONS[resource_type]
                         if self.authorize(principal, host, op, resource_type, name, log_if_denied=False))

    def acls(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        """The ACLs a DescribeAcls filter matches, in Kafka's order (by resource pattern, then entry)."""
        return sorted(acl for acl in self._image().acls.values() if acl_filter.matches(acl))
