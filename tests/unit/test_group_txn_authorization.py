"""A principal with no ACL at all is refused by every group and transaction API as Kafka refuses it, at every
version the broker serves and whatever the request holds: the response carries only the authorization error Kafka
answers with (or an error Kafka checks before authorization), it encodes and parses at the request's version, and
the handler reaches no coordinator, log or metadata on the way: a denied request changes nothing."""
from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any

import pytest
import trio
from hypothesis import HealthCheck, given, settings

from minikafka.broker.network.request_channel import Request, RequestKind
from minikafka.broker.network.socket_server import ConnectionInfo
from minikafka.broker.security.standard_authorizer import StandardAuthorizer
from minikafka.broker.server.broker_services import RequestContext
from minikafka.broker.server.handlers import groups, transactions
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.codec import SCHEMAS, encode_response
from minikafka.protocol.errors import ErrorCode
from minikafka.protocol.request_header import RequestHeader
from tests.unit.request_strategies import SERVED, RequestValues

E = ErrorCode
EXAMPLES_PER_VERSION = 10
# Per API: the errors a refused request may carry. SyncGroup v5+ checks its protocol fields before authorization;
# FindCoordinator answers key types it has no coordinator for with INVALID_REQUEST.
REFUSALS: dict[ApiKey, frozenset[ErrorCode]] = {
    ApiKey.FIND_COORDINATOR: frozenset({E.GROUP_AUTHORIZATION_FAILED, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                        E.CLUSTER_AUTHORIZATION_FAILED, E.INVALID_REQUEST}),
    ApiKey.JOIN_GROUP: frozenset({E.GROUP_AUTHORIZATION_FAILED}),
    ApiKey.SYNC_GROUP: frozenset({E.GROUP_AUTHORIZATION_FAILED, E.INCONSISTENT_GROUP_PROTOCOL}),
    ApiKey.HEARTBEAT: frozenset({E.GROUP_AUTHORIZATION_FAILED}),
    ApiKey.LEAVE_GROUP: frozenset({E.GROUP_AUTHORIZATION_FAILED}),
    ApiKey.OFFSET_COMMIT: frozenset({E.GROUP_AUTHORIZATION_FAILED}),
    ApiKey.OFFSET_FETCH: frozenset({E.GROUP_AUTHORIZATION_FAILED}),
    ApiKey.OFFSET_DELETE: frozenset({E.GROUP_AUTHORIZATION_FAILED}),
    ApiKey.TXN_OFFSET_COMMIT: frozenset({E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}),
    ApiKey.DESCRIBE_GROUPS: frozenset({E.GROUP_AUTHORIZATION_FAILED}),
    ApiKey.DELETE_GROUPS: frozenset({E.GROUP_AUTHORIZATION_FAILED}),
    ApiKey.INIT_PRODUCER_ID: frozenset({E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, E.CLUSTER_AUTHORIZATION_FAILED}),
    ApiKey.ADD_PARTITIONS_TO_TXN: frozenset({E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                             E.CLUSTER_AUTHORIZATION_FAILED}),
    ApiKey.ADD_OFFSETS_TO_TXN: frozenset({E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}),
    ApiKey.END_TXN: frozenset({E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}),
    ApiKey.WRITE_TXN_MARKERS: frozenset({E.CLUSTER_AUTHORIZATION_FAILED}),
    ApiKey.DESCRIBE_TRANSACTIONS: frozenset({E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}),
    # As Kafka's, an illegal topic name is answered before the authorization check.
    ApiKey.DESCRIBE_PRODUCERS: frozenset({E.TOPIC_AUTHORIZATION_FAILED, E.INVALID_TOPIC_EXCEPTION}),
}
HANDLERS = {**groups.HANDLERS, **transactions.HANDLERS}
VERSIONS = [(key, version) for key in REFUSALS for version in range(SERVED[key][0], SERVED[key][1] + 1)]


class Untouchable:
    """A broker service a refused request must not use."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attribute: str) -> Any:
        raise AssertionError(f"a refused request used {self._name}.{attribute}")


class NoAcls:
    acls: dict[uuid.UUID, Any] = {}
    acl_version = 0


def _services() -> SimpleNamespace:
    untouchable = {name: Untouchable(name) for name in (
        "metadata_cache", "auto_topic_creation", "group_coordinator", "replica_manager", "add_partitions_to_txn",
        "producer_ids", "config")}
    return SimpleNamespace(authorizer=StandardAuthorizer(NoAcls, frozenset({"User:admin"}), False),
                           transaction_coordinator=SimpleNamespace(state_manager=Untouchable("state_manager")),
                           **untouchable)


def _errors(struct: Any, message: Any, version: int) -> list[ErrorCode]:
    """Every error code in the response, at any depth, of the fields `version` has."""
    found = []
    for field in struct.fields.values():
        if not field.for_version_q(version):
            continue
        value = getattr(message, field.name)
        if field.name.endswith("error_code"):
            found.append(ErrorCode(value))
        elif field.is_struct_array():
            for element in value or ():
                found += _errors(field.array_of, element, version)
        elif field.is_struct() and value is not None:
            found += _errors(field, value, version)
    return found


@pytest.mark.parametrize(("api_key", "version"), VERSIONS, ids=[f"{k.name}-v{v}" for k, v in VERSIONS])
def test_a_principal_without_acls_is_refused_and_nothing_is_reached(api_key: ApiKey, version: int) -> None:
    schema = SCHEMAS[api_key]

    @settings(max_examples=EXAMPLES_PER_VERSION, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(RequestValues(names=["g", "t", "tx"], nulls_anywhere=False).request(api_key, version))
    def refused(request: Any) -> None:
        conn = ConnectionInfo(1, "127.0.0.1:1", "SASL_PLAINTEXT", security_protocol="SASL_PLAINTEXT")
        conn.principal = "User:alice"
        ctx = RequestContext(_services(), Request(RequestKind.KAFKA, RequestHeader(api_key, version, 7, "test"),
                                                  schema, request, conn, b"", 0, lambda: False))
        response = trio.run(HANDLERS[api_key], ctx, request)
        encoded = encode_response(schema, version, 7, response, ctx.splicer)
        decoded = schema.response.decode(encoded[8 + schema.response_header_version(version):], version=version)
        errors = set(_errors(schema.response._struct, decoded, version))
        assert errors <= REFUSALS[api_key], errors

    refused()
