"""The admin and inter-broker APIs' authorization rules on their own, with a stand-in for the authorizer: what
DeleteTopics answers each entry the principal may not delete (Kafka's order: the request's shape, authorization,
then existence only to whom may describe), and that a control-plane request without CLUSTER_ACTION is refused
before the broker's metadata source sees it."""
from __future__ import annotations

import uuid
from types import SimpleNamespace

import pytest
import trio

from minikafka.broker.security.acl import AclOperation, ResourceType
from minikafka.broker.server.handlers import controller_requests
from minikafka.broker.server.handlers.topics import _deletion_refusals
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.control_plane import CONTROL_PLANE_SCHEMAS
from minikafka.protocol.errors import ErrorCode

ZERO = uuid.UUID(int=0)
SECRET_ID, OPEN_ID, DENIED_ID, UNKNOWN_ID = uuid.uuid4(), uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
DENIED, UNKNOWN = ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


class StandIn:
    """A request context whose principal may do exactly `allowed` ((operation, topic) pairs)."""

    def __init__(self, allowed: set[tuple[AclOperation, str]]) -> None:
        topics = {"secret": SimpleNamespace(name="secret", topic_id=SECRET_ID),
                  "open": SimpleNamespace(name="open", topic_id=OPEN_ID),
                  "denied": SimpleNamespace(name="denied", topic_id=DENIED_ID)}
        self.services = SimpleNamespace(metadata_cache=SimpleNamespace(
            topics=topics, topics_by_id={t.topic_id: t for t in topics.values()}))
        self.allowed = allowed

    def authorize(self, operation: AclOperation, resource_type: ResourceType, name: str, *,
                  log_if_denied: bool = True) -> bool:
        assert resource_type == ResourceType.TOPIC
        return (operation, name) in self.allowed


# bob may delete "open", describe "denied" and the missing "known-missing"; nothing of "secret".
BOB = StandIn({(AclOperation.DELETE, "open"), (AclOperation.DESCRIBE, "open"), (AclOperation.DESCRIBE, "denied"),
               (AclOperation.DESCRIBE, "known-missing")})


@pytest.mark.parametrize("target, refusal", [
    (("open", None), None),
    ((None, OPEN_ID), None),
    (("secret", None), ("secret", ZERO, DENIED, "Topic authorization failed.")),
    (("hidden-missing", None), ("hidden-missing", ZERO, DENIED, "Topic authorization failed.")),
    (("known-missing", None), ("known-missing", ZERO, UNKNOWN, "This server does not host this topic-partition.")),
    (("denied", None), ("denied", ZERO, DENIED, "Topic authorization failed.")),
    ((None, SECRET_ID), (None, SECRET_ID, DENIED, "Topic authorization failed.")),
    ((None, DENIED_ID), ("denied", DENIED_ID, DENIED, "Topic authorization failed.")),
    ((None, UNKNOWN_ID), (None, UNKNOWN_ID, ErrorCode.UNKNOWN_TOPIC_ID, "This server does not host this topic ID.")),
    ((None, None), (None, ZERO, ErrorCode.INVALID_REQUEST, "Neither topic name nor id were specified.")),
    (("secret", SECRET_ID), ("secret", SECRET_ID, ErrorCode.INVALID_REQUEST,
                             "You may not specify both topic name and topic id.")),
], ids=["deletable", "deletable-by-id", "not-describable", "missing-not-describable", "missing-describable",
        "describable-not-deletable", "by-id-not-describable", "by-id-describable", "unknown-id", "neither",
        "both"])
def test_each_entry_bob_may_not_delete_gets_kafkas_answer(target, refusal):
    assert _deletion_refusals(BOB, [target]).get(0) == refusal  # type: ignore[arg-type]


def test_a_topic_named_twice_is_invalid_whoever_asks():
    refusals = _deletion_refusals(BOB, [("secret", None), ("secret", None), (None, DENIED_ID), (None, DENIED_ID),
                                        ("open", None)])  # type: ignore[arg-type]
    assert refusals == {0: ("secret", ZERO, ErrorCode.INVALID_REQUEST, "Duplicate topic name."),
                        1: ("secret", ZERO, ErrorCode.INVALID_REQUEST, "Duplicate topic name."),
                        2: (None, DENIED_ID, ErrorCode.INVALID_REQUEST, "Duplicate topic id."),
                        3: (None, DENIED_ID, ErrorCode.INVALID_REQUEST, "Duplicate topic id.")}


@pytest.mark.parametrize("key, version", [(ApiKey.LEADER_AND_ISR, 7), (ApiKey.UPDATE_METADATA, 8),
                                          (ApiKey.STOP_REPLICA, 4), (ApiKey.ALTER_PARTITION, 3),
                                          (ApiKey.CONTROLLED_SHUTDOWN, 3), (ApiKey.ALLOCATE_PRODUCER_IDS, 0),
                                          (ApiKey.ASSIGN_REPLICAS_TO_DIRS, 0)])
def test_a_control_plane_request_without_cluster_action_is_refused_untouched(key, version):
    schema = CONTROL_PLANE_SCHEMAS[key]
    asked: list[AclOperation] = []

    def authorize_cluster(operation: AclOperation) -> bool:
        asked.append(operation)
        return False

    ctx = SimpleNamespace(authorize_cluster=authorize_cluster, version=version,
                          services=SimpleNamespace(metadata=None),  # the metadata source is never reached
                          response=lambda **fields: schema.response[version](**fields))
    handler = controller_requests.CONTROL_PLANE_HANDLERS[key]
    response = trio.run(handler, ctx, schema.request[version]())
    assert asked == [AclOperation.CLUSTER_ACTION]
    assert response.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert response.encode(version=version)
