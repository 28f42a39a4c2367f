"""Kafka's ACL vocabulary (org.apache.kafka.common.acl and .resource): resource types, pattern types, operations,
permissions with their wire codes, an ACL binding (a resource pattern with an access control entry), and the
filters DescribeAcls and DeleteAcls carry, matched as Kafka's AclBindingFilter matches.

The names are Kafka's too: the ones ZooKeeper's `/kafka-acl` znodes and kafka-acls.sh print ("Topic", "Read",
"Allow"), and the enum names ("TOPIC", "LITERAL") of change notifications and the Java client's toString.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from minikafka.protocol.errors import ErrorCode

CLUSTER_NAME = "kafka-cluster"  # the one name of the CLUSTER resource
WILDCARD_RESOURCE = "*"
WILDCARD_HOST = "*"
WILDCARD_PRINCIPAL = "User:*"


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


def camel_name(value: IntEnum) -> str:
    """Kafka's SecurityUtils names: TRANSACTIONAL_ID is "TransactionalId", CLUSTER_ACTION "ClusterAction"."""
    return "".join(part.capitalize() for part in value.name.split("_"))


def from_camel_name(enum: type[IntEnum], name: str) -> IntEnum:
    """The member `camel_name` names (case-insensitive, with or without underscores, as Kafka's fromString)."""
    wanted = name.replace("_", "").upper()
    for member in enum:
        if member.name.replace("_", "") == wanted:
            return member
    raise ValueError(f"unknown {enum.__name__}: {name!r}")


# The operations each resource type has (Kafka's AclEntry.supportedOperations): what authorized_operations covers.
SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset({AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE,
                                   AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS,
                                   AclOperation.ALTER_CONFIGS}),
    ResourceType.GROUP: frozenset({AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE,
                                   AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}),
    ResourceType.CLUSTER: frozenset({AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
                                     AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
                                     AclOperation.DESCRIBE}),
    ResourceType.TRANSACTIONAL_ID: frozenset({AclOperation.DESCRIBE, AclOperation.WRITE}),
    ResourceType.DELEGATION_TOKEN: frozenset({AclOperation.DESCRIBE}),
    ResourceType.USER: frozenset({AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS}),
}

# The error a request denied on a resource of each type gets (Kafka's AclEntry.authorizationError).
AUTHORIZATION_ERRORS: dict[ResourceType, ErrorCode] = {
    ResourceType.TOPIC: ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    ResourceType.GROUP: ErrorCode.GROUP_AUTHORIZATION_FAILED,
    ResourceType.CLUSTER: ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    ResourceType.TRANSACTIONAL_ID: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    ResourceType.DELEGATION_TOKEN: ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED,
}


def operations_bitfield(operations: frozenset[AclOperation] | set[AclOperation]) -> int:
    """The authorized_operations field of Metadata, DescribeCluster and DescribeGroups: bit `code` per operation."""
    return sum(1 << op for op in operations)


@dataclass(frozen=True, order=True)
class AclBinding:
    """A resource pattern and an access control entry: Kafka's AclBinding, and StandardAcl's fields."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType


@dataclass(frozen=True)
class AclBindingFilter:
    """DescribeAcls' filter and each of DeleteAcls' filters: None (null on the wire) and ANY match every value."""

    resource_type: ResourceType
    resource_name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: AclOperation
    permission_type: AclPermissionType

    def is_unknown(self) -> bool:
        """A filter naming an UNKNOWN value matches nothing, and Kafka refuses it."""
        return (self.resource_type == ResourceType.UNKNOWN or self.pattern_type == PatternType.UNKNOWN
                or self.operation == AclOperation.UNKNOWN or self.permission_type == AclPermissionType.UNKNOWN)

    def matches(self, acl: AclBinding) -> bool:
        return self.matches_pattern(acl) and self.matches_entry(acl)

    def matches_pattern(self, acl: AclBinding) -> bool:
        """Kafka's ResourcePatternFilter.matches: MATCH takes the patterns that would apply to the named resource
        (the literal name, the literal wildcard, the prefixes of the name); ANY or a pattern type the exact name."""
        if self.resource_type != ResourceType.ANY and self.resource_type != acl.resource_type:
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH, acl.pattern_type):
            return False
        if self.resource_name is None:
            return True
        if self.pattern_type in (PatternType.ANY, acl.pattern_type):
            return self.resource_name == acl.resource_name
        if acl.pattern_type == PatternType.LITERAL:
            return acl.resource_name in (self.resource_name, WILDCARD_RESOURCE)
        return acl.pattern_type == PatternType.PREFIXED and self.resource_name.startswith(acl.resource_name)

    def matches_entry(self, acl: AclBinding) -> bool:
        return ((self.principal is None or self.principal == acl.principal)
                and (self.host is None or self.host == acl.host)
                and self.operation in (AclOperation.ANY, acl.operation)
                and self.permission_type in (AclPermissionType.ANY, acl.permission_type))


def parse_principal(principal: str) -> tuple[str, str]:
    """Kafka's SecurityUtils.parseKafkaPrincipal: "User:alice" is (User, alice)."""
    kind, sep, name = principal.partition(":")
    if not sep or not kind:
        raise ValueError(f"Could not parse principal from `{principal}` (no colon is present separating the "
                         "principal type from the principal name)")
    return kind, name


def _from_code(enum: type[IntEnum], code: int) -> IntEnum:
    """Kafka's fromCode: a code no member has is UNKNOWN."""
    try:
        return enum(code)
    except ValueError:
        return enum(0)


def acl_binding_of(creation: Any) -> AclBinding:
    """The binding a CreateAcls creation asks for."""
    return AclBinding(ResourceType(_from_code(ResourceType, creation.resource_type)), creation.resource_name,
                      PatternType(_from_code(PatternType, creation.resource_pattern_type)), creation.principal,
                      creation.host, AclOperation(_from_code(AclOperation, creation.operation)),
                      AclPermissionType(_from_code(AclPermissionType, creation.permission_type)))


def acl_filter_of(wire_filter: Any) -> AclBindingFilter:
    """The filter of DescribeAcls, or one of DeleteAcls' filters."""
    return AclBindingFilter(ResourceType(_from_code(ResourceType, wire_filter.resource_type_filter)),
                            wire_filter.resource_name_filter,
                            PatternType(_from_code(PatternType, wire_filter.pattern_type_filter)),
                            wire_filter.principal_filter, wire_filter.host_filter,
                            AclOperation(_from_code(AclOperation, wire_filter.operation)),
                            AclPermissionType(_from_code(AclPermissionType, wire_filter.permission_type)))
