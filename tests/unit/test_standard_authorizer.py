"""StandardAuthorizer's rules (Kafka's StandardAuthorizerData), ACL filters (AclBindingFilter) and the controller's
validation of new ACLs (AclControlManager)."""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field

import pytest

from minikafka.broker.controller.acl_control import create_acls, delete_acls
from minikafka.broker.metadata.acls import acl_of_record, acls_of_zk_json, zk_acls_json, zk_resource_path
from minikafka.broker.metadata.metadata_image import MetadataImage
from minikafka.broker.security.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from minikafka.broker.security.standard_authorizer import StandardAuthorizer, parse_super_users
from minikafka.protocol.errors import ErrorCode

ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
Op = AclOperation


def acl(name: str, operation: AclOperation, permission: AclPermissionType = ALLOW, *, principal: str = "User:alice",
        host: str = "*", resource_type: ResourceType = TOPIC, pattern: PatternType = LITERAL) -> AclBinding:
    return AclBinding(resource_type, name, pattern, principal, host, operation, permission)


@dataclass
class Image:
    acls: dict[uuid.UUID, AclBinding] = field(default_factory=dict)
    acl_version: int = 0

    def add(self, *bindings: AclBinding) -> None:
        for binding in bindings:
            self.acls[uuid.uuid4()] = binding
        self.acl_version += 1


def authorizer(*bindings: AclBinding, super_users: str = "", allow_everyone: bool = False) -> StandardAuthorizer:
    image = Image()
    image.add(*bindings)
    return StandardAuthorizer(lambda: image, parse_super_users(super_users), allow_everyone)


def allowed(auth: StandardAuthorizer, operation: AclOperation, name: str, *, principal: str = "User:alice",
            host: str = "127.0.0.1", resource_type: ResourceType = TOPIC) -> bool:
    return auth.authorize(principal, host, operation, resource_type, name)


def test_literal_prefixed_and_wildcard_patterns_cover_a_resource():
    auth = authorizer(acl("orders", Op.READ), acl("pay", Op.WRITE, pattern=PREFIXED), acl("*", Op.CREATE))
    assert allowed(auth, Op.READ, "orders")
    assert not allowed(auth, Op.READ, "orders-2")
    assert allowed(auth, Op.WRITE, "payments") and allowed(auth, Op.WRITE, "pay")
    assert not allowed(auth, Op.WRITE, "pa")
    assert allowed(auth, Op.CREATE, "anything")
    assert not allowed(auth, Op.READ, "orders", principal="User:bob")


def test_read_write_delete_alter_imply_describe_only_when_allowed():
    auth = authorizer(acl("a", Op.READ), acl("b", Op.ALTER_CONFIGS), acl("c", Op.READ, DENY), acl("c", Op.DESCRIBE))
    assert allowed(auth, Op.DESCRIBE, "a")
    assert not allowed(auth, Op.WRITE, "a")
    assert allowed(auth, Op.DESCRIBE_CONFIGS, "b")
    assert allowed(auth, Op.DESCRIBE, "c"), "a DENY of READ does not deny DESCRIBE"
    assert not allowed(auth, Op.READ, "c")


def test_deny_wins_and_all_covers_every_operation():
    auth = authorizer(acl("t", Op.ALL), acl("t", Op.WRITE, DENY, principal="User:*"))
    assert allowed(auth, Op.READ, "t")
    assert not allowed(auth, Op.WRITE, "t")
    auth = authorizer(acl("t", Op.READ), acl("t", Op.ALL, DENY, host="127.0.0.1"))
    assert not allowed(auth, Op.READ, "t")
    assert allowed(auth, Op.READ, "t", host="10.0.0.1"), "a DENY for another host does not apply"


def test_hosts_principals_and_super_users():
    auth = authorizer(acl("t", Op.READ, host="10.0.0.1"), acl("u", Op.READ, principal="User:*"),
                      super_users="User:admin; User:ops")
    assert not allowed(auth, Op.READ, "t")
    assert allowed(auth, Op.READ, "t", host="10.0.0.1")
    assert allowed(auth, Op.READ, "u", principal="User:anyone")
    assert allowed(auth, Op.DELETE, "t", principal="User:ops")


def test_allow_everyone_if_no_acl_found_covers_only_resources_without_acls():
    auth = authorizer(acl("guarded", Op.READ, principal="User:bob"), allow_everyone=True)
    assert allowed(auth, Op.WRITE, "free")
    assert not allowed(auth, Op.READ, "guarded"), "an ACL for someone else still guards the resource"
    assert not allowed(authorizer(), Op.READ, "free")


def test_an_acl_change_applies_to_the_next_check():
    image = Image()
    auth = StandardAuthorizer(lambda: image, frozenset(), False)
    assert not allowed(auth, Op.READ, "t")
    image.add(acl("t", Op.READ))
    assert allowed(auth, Op.READ, "t")


def test_authorize_by_resource_type_as_kafka():
    assert authorizer(acl("one", Op.WRITE)).authorize_by_resource_type("User:alice", "h", Op.WRITE, TOPIC)
    assert not authorizer(acl("one", Op.READ)).authorize_by_resource_type("User:alice", "h", Op.WRITE, TOPIC)
    denied = authorizer(acl("orders", Op.WRITE), acl("ord", Op.WRITE, DENY, pattern=PREFIXED))
    assert not denied.authorize_by_resource_type("User:alice", "h", Op.WRITE, TOPIC)
    assert not authorizer(acl("x", Op.WRITE), acl("*", Op.WRITE, DENY)).authorize_by_resource_type(
        "User:alice", "h", Op.WRITE, TOPIC)
    assert authorizer(super_users="User:alice").authorize_by_resource_type("User:alice", "h", Op.WRITE, TOPIC)


def test_authorized_operations_of_a_topic():
    auth = authorizer(acl("t", Op.READ), acl("t", Op.ALTER_CONFIGS))
    assert auth.authorized_operations("User:alice", "h", TOPIC, "t") == {Op.READ, Op.DESCRIBE, Op.ALTER_CONFIGS,
                                                                         Op.DESCRIBE_CONFIGS}


def test_filters_match_as_kafkas_acl_binding_filter():
    bindings = [acl("orders", Op.READ), acl("ord", Op.WRITE, pattern=PREFIXED), acl("*", Op.READ),
                acl("g", Op.READ, resource_type=GROUP)]

    def matching(resource_type: ResourceType, name: str | None, pattern: PatternType) -> list[AclBinding]:
        f = AclBindingFilter(resource_type, name, pattern, None, None, Op.ANY, AclPermissionType.ANY)
        return [b for b in bindings if f.matches(b)]

    assert matching(TOPIC, "orders", PatternType.MATCH) == bindings[:3]
    assert matching(TOPIC, "orders", PatternType.ANY) == bindings[:1]
    assert matching(TOPIC, "ord", PREFIXED) == bindings[1:2]
    assert matching(ResourceType.ANY, None, PatternType.ANY) == bindings
    f = AclBindingFilter(ResourceType.ANY, None, PatternType.ANY, "User:bob", None, Op.ANY, AclPermissionType.ANY)
    assert not any(f.matches(b) for b in bindings)


def test_controller_validates_creations_and_writes_each_binding_once():
    image = MetadataImage()
    creations = [acl("t", Op.READ), acl("t", Op.READ), acl("", Op.READ), acl("c", Op.ALTER, resource_type=CLUSTER),
                 acl("t", Op.ANY), acl("t", Op.READ, principal="alice"), acl("t", Op.READ, pattern=PatternType.MATCH)]
    records, results = create_acls(image.acls, creations)
    assert len(records) == 1 and acl_of_record(records[0]) == creations[0]
    assert results[:2] == [None, None]
    assert [e.code if e else None for e in results[2:]] == [ErrorCode.INVALID_REQUEST] * 5
    assert results[3] is not None and results[3].message == \
        "The only valid name for the CLUSTER resource is kafka-cluster"
    for offset, record in enumerate(records):
        image.replay(record, offset)
    assert create_acls(image.acls, creations[:1])[0] == [], "an ACL that exists is not written again"
    every = AclBindingFilter(ResourceType.ANY, None, PatternType.ANY, None, None, Op.ANY, AclPermissionType.ANY)
    removals, deleted = delete_acls(image.acls, [every, every])
    assert len(removals) == 1 and deleted == [(None, [creations[0]]), (None, [creations[0]])]
    image.replay(removals[0], 1)
    assert image.acls == {}


@pytest.mark.parametrize("pattern, path", [(LITERAL, "/kafka-acl/Topic/orders"),
                                           (PREFIXED, "/kafka-acl-extended/prefixed/Topic/orders")])
def test_zookeeper_layout_round_trips(pattern: PatternType, path: str):
    bindings = [acl("orders", Op.READ, pattern=pattern), acl("orders", Op.CLUSTER_ACTION, DENY, pattern=pattern)]
    assert zk_resource_path(TOPIC, pattern, "orders") == path
    data = zk_acls_json(bindings)
    assert b'"operation": "ClusterAction"' in data and b'"permissionType": "Deny"' in data
    assert sorted(acls_of_zk_json(TOPIC, pattern, "orders", data)) == sorted(bindings)
