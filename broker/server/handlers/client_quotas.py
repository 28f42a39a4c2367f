"""DescribeClientQuotas (v0-1) and AlterClientQuotas (v0-1): client quotas of users, client ids and ips.

DescribeClientQuotas is answered from this broker's own metadata image, as Kafka's brokers answer it. Its filter
components name an entity type (user, client-id or ip; another is UNSUPPORTED_VERSION) at most once each, and
match an exact name (match type 0, a name required), the default (1, no name) or any entity of that type (2, no
name); an ip component beside a user or client-id one, or an unknown match type, is INVALID_REQUEST. An entity
matches when it has every component's type with the name asked for; `strict` also wants it to have no other
type. A refused filter answers the error for the whole request and no entries.

AlterClientQuotas goes to the controller as it came, and its answer (one per entry, validated there) is relayed;
a ZooKeeper-mode broker first reads the altered entities back from ZooKeeper, so it describes them as altered at
once (a KRaft broker has caught up with the controller by then).
Both are flexible from v1.

With an authorizer, as Kafka: DescribeClientQuotas needs DESCRIBE_CONFIGS on the cluster (else
CLUSTER_AUTHORIZATION_FAILED, no message, null entries), AlterClientQuotas ALTER_CONFIGS on the cluster (else each
entry is CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.", and nothing goes to the controller).
"""
from __future__ import annotations

from kafka.protocol.admin.client_quotas import AlterClientQuotasRequest, DescribeClientQuotasRequest
from kafka.protocol.api_message import ApiMessage

from minikafka.broker.metadata.client_quota_entity import (
    CLIENT_ID,
    ENTITY_TYPES,
    IP,
    USER,
    ClientQuotaEntity,
    ClientQuotas,
    quota_entity,
)
from minikafka.broker.security.acl import AclOperation
from minikafka.broker.server.broker_services import RequestContext
from minikafka.broker.server.handlers.common import forward
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.errors import DEFAULT_MESSAGES, ErrorCode, KafkaError

MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2
# A filter: the names wanted by entity type (None: the default), and the types wanted with any name.
QuotaFilter = tuple[dict[str, str | None], set[str]]


def quota_filter(components: list) -> QuotaFilter:
    """The filter of a request's components, checked as Kafka checks it."""
    exact: dict[str, str | None] = {}
    specified: set[str] = set()
    for c in components:
        if not c.entity_type:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Invalid empty entity type.")
        if c.entity_type in exact or c.entity_type in specified:
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             f"Entity type {c.entity_type} cannot appear more than once in the filter.")
        if c.entity_type not in ENTITY_TYPES:
            raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, f"Unsupported entity type {c.entity_type}")
        if c.match_type == MATCH_EXACT:
            if c.match is None:
                raise KafkaError(ErrorCode.INVALID_REQUEST,
                                 "Request specified MATCH_TYPE_EXACT, but set match string to null.")
            exact[c.entity_type] = c.match
        elif c.match_type == MATCH_DEFAULT:
            if c.match is not None:
                raise KafkaError(ErrorCode.INVALID_REQUEST,
                                 "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.")
            exact[c.entity_type] = None
        elif c.match_type == MATCH_SPECIFIED:
            if c.match is not None:
                raise KafkaError(ErrorCode.INVALID_REQUEST,
                                 "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.")
            specified.add(c.entity_type)
        else:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unknown match type {c.match_type}")
    types = set(exact) | specified
    if IP in types and (USER in types or CLIENT_ID in types):
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Invalid entity filter component combination. IP filter "
                         "component should not be used with user or clientId filter component.")
    return exact, specified


def matches(entity: ClientQuotaEntity, wanted: QuotaFilter, strict: bool) -> bool:
    exact, specified = wanted
    names = dict(entity)
    if strict and len(names) != len(exact) + len(specified):
        return False
    return (all(t in names and names[t] == name for t, name in exact.items())
            and all(t in names for t in specified))


def describe_client_quotas(quotas: ClientQuotas, components: list,
                           strict: bool) -> list[tuple[ClientQuotaEntity, dict[str, float]]]:
    """The entities the filter matches, with their quotas, in a stable order."""
    wanted = quota_filter(components)
    found = [(entity, dict(values)) for entity, values in quotas.items() if matches(entity, wanted, strict)]
    return sorted(found, key=lambda item: [(t, n is not None, n or "") for t, n in item[0]])


async def handle_describe_client_quotas(ctx: RequestContext, request: DescribeClientQuotasRequest) -> ApiMessage:
    R = ctx.response_class
    if not ctx.authorize_cluster(AclOperation.DESCRIBE_CONFIGS):
        return ctx.response(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                            error_message=None, entries=None)
    try:
        found = describe_client_quotas(ctx.services.metadata_cache.image.client_quotas, request.components,
                                       request.strict)
    except KafkaError as exc:
        return ctx.response(throttle_time_ms=0, error_code=exc.code, error_message=exc.message, entries=[])
    entries = [R.EntryData(entity=[R.EntryData.EntityData(entity_type=t, entity_name=n) for t, n in entity],
                           values=[R.EntryData.ValueData(key=k, value=v) for k, v in sorted(values.items())])
               for entity, values in found]
    return ctx.response(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, entries=entries)


async def handle_alter_client_quotas(ctx: RequestContext, request: AlterClientQuotasRequest) -> ApiMessage:
    R = ctx.response_class

    def failed(code: ErrorCode, message: str) -> ApiMessage:
        return ctx.response(throttle_time_ms=0, entries=[R.EntryData(
            error_code=code, error_message=message,
            entity=[R.EntryData.EntityData(entity_type=e.entity_type, entity_name=e.entity_name)
                    for e in entry.entity]) for entry in request.entries])

    if not ctx.authorize_cluster(AclOperation.ALTER_CONFIGS):
        return failed(ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                      DEFAULT_MESSAGES[ErrorCode.CLUSTER_AUTHORIZATION_FAILED])
    response = await forward(ctx, request, failed)
    if not request.validate_only:
        await ctx.services.metadata.client_quotas_altered(
            [quota_entity((e.entity_type, e.entity_name) for e in entry.entity)
             for entry, answer in zip(request.entries, response.entries, strict=True)
             if answer.error_code == ErrorCode.NONE])
    return response


HANDLERS = {ApiKey.DESCRIBE_CLIENT_QUOTAS: handle_describe_client_quotas,
            ApiKey.ALTER_CLIENT_QUOTAS: handle_alter_client_quotas}
