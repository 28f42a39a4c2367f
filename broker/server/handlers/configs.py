"""DescribeConfigs (v1-4), AlterConfigs (v0-2) and IncrementalAlterConfigs (v0-1): topic configs, dynamic
broker configs and group configs.

DescribeConfigs answers topic, broker and group resources (any other type is INVALID_REQUEST), each entry with its
source (v1+); synonyms are always empty even when asked for (v1+), and v3's config type and documentation are
unknown (0) and null. v4 is flexible. A broker resource is this broker ("<id>": every config, each from its dynamic
value, the cluster-wide dynamic default, its static property or Kafka's default, read-only unless Kafka can change
it dynamically) or the cluster default ("": its dynamic defaults alone); passwords are described without a value. A
group resource (any group name, known or not) lists every config of Kafka's GroupConfig: the group's own value
(GROUP_CONFIG) or this broker's default from its group.* properties (DEFAULT_CONFIG).

Alterations are the controller's: the topic, broker and group resources of an AlterConfigs or IncrementalAlterConfigs go
to it in one request of the same kind and version, and its answers are relayed in the request's order (it
validates each resource's result as a whole, applies SET, DELETE, APPEND and SUBTRACT, the last two to list configs
only, and answers validate_only exactly as the change would). A broker resource must name this broker or be the
cluster default (""), as Kafka's brokers check before forwarding (the ZooKeeper-mode controller, to which the other
brokers forward, takes any). Group resources are altered on the KRaft controller only (ZooKeeper mode, as Kafka's,
has no group configs); any other resource type is INVALID_REQUEST.
Flexible from v2 and v1.

With an authorizer, as Kafka: describing needs DESCRIBE_CONFIGS, altering ALTER_CONFIGS, on the cluster for
broker, broker-logger and client-metrics resources (else CLUSTER_AUTHORIZATION_FAILED), on the topic for a topic
(TOPIC_AUTHORIZATION_FAILED, whether it exists or not), on the group for a group (GROUP_AUTHORIZATION_FAILED), each
with Kafka's default message and, described, no configs. Authorization comes first, except that an alteration
naming another broker is refused before it (Kafka's brokers check that before forwarding); the legacy AlterConfigs
refuses broker loggers unauthorized, as Kafka's does. A refused alteration is not forwarded.
"""
from __future__ import annotations

from typing import Any

from kafka.protocol.admin.configs import AlterConfigsRequest, DescribeConfigsRequest, IncrementalAlterConfigsRequest
from kafka.protocol.api_message import ApiMessage

from minikafka.broker.coordinator.group.group_config import GroupConfigDefaults, described_group_configs
from minikafka.broker.security.acl import AUTHORIZATION_ERRORS, CLUSTER_NAME, AclOperation, ResourceType
from minikafka.broker.server.broker_services import BrokerServices, RequestContext
from minikafka.broker.server.forwarding import ForwardingError
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.errors import DEFAULT_MESSAGES, ErrorCode
from minikafka.storage.log_config import SOURCE_DEFAULT_CONFIG, ConfigEntry, LogConfig

TOPIC = 2
BROKER = 4
BROKER_LOGGER = 8
CLIENT_METRICS = 16
GROUP = 32
SOURCE_GROUP_CONFIG = 8  # DescribeConfigs' config source of a group's own override (Kafka's ConfigSource)
# Whose ACLs a config resource is authorized against (Kafka's ConfigResource types).
ACL_RESOURCES = {TOPIC: ResourceType.TOPIC, GROUP: ResourceType.GROUP, BROKER: ResourceType.CLUSTER,
                 BROKER_LOGGER: ResourceType.CLUSTER, CLIENT_METRICS: ResourceType.CLUSTER}


def _topic_config_entries(services: BrokerServices, overrides: dict[str, str]) -> list[ConfigEntry]:
    entries = LogConfig.from_props(overrides, services.log_defaults).describe()
    return [services.dynamic_config.topic_entry(e) for e in entries]


def _group_config_entries(services: BrokerServices, group: str) -> list[ConfigEntry]:
    """Every group config: the group's override (source GROUP_CONFIG) or this broker's default (DEFAULT_CONFIG)."""
    described = described_group_configs(services.metadata_cache.group_configs(group),
                                        GroupConfigDefaults.from_broker_config(services.config))
    return [ConfigEntry(name, value, not overridden, SOURCE_GROUP_CONFIG if overridden else SOURCE_DEFAULT_CONFIG)
            for name, value, overridden in described]


def _broker_name_error(services: BrokerServices, name: str) -> str | None:
    """Why a BROKER resource name is not this broker's nor the cluster default's (Kafka's message), or None."""
    if name == "":
        return None
    if not name.lstrip("-").isdigit():
        return f"Node id must be an integer, but it is: {name}"
    if int(name) != services.node_id:
        return f"Unexpected broker id, expected {services.node_id}, but received {name}"
    return None


def _authorization_refusal(ctx: RequestContext, operation: AclOperation,
                           resource: Any) -> tuple[ErrorCode, str] | None:
    """Kafka's error and message when the principal may not do `operation` on a config resource; None when it
    may, or when the type is none Kafka knows (refused then as unsupported)."""
    acl_type = ACL_RESOURCES.get(resource.resource_type)
    if acl_type is None:
        return None
    name = CLUSTER_NAME if acl_type == ResourceType.CLUSTER else resource.resource_name
    if ctx.authorize(operation, acl_type, name):
        return None
    code = AUTHORIZATION_ERRORS[acl_type]
    return code, DEFAULT_MESSAGES[code]


async def handle_describe_configs(ctx: RequestContext, request: DescribeConfigsRequest) -> ApiMessage:
    R = ctx.response_class
    CR = R.DescribeConfigsResult.DescribeConfigsResourceResult
    services = ctx.services
    results = []
    for res in request.resources:
        code, message, entries = ErrorCode.NONE, None, []
        refusal = _authorization_refusal(ctx, AclOperation.DESCRIBE_CONFIGS, res)
        if refusal is not None:
            code, message = refusal
        elif res.resource_type == TOPIC:
            cache = services.metadata_cache
            if res.resource_name not in cache.topics:
                code, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {res.resource_name} does not exist"
            else:
                entries = _topic_config_entries(services, cache.topic_configs(res.resource_name))
        elif res.resource_type == BROKER:
            message = _broker_name_error(services, res.resource_name)
            if message is not None:
                code = ErrorCode.INVALID_REQUEST
            else:
                entries = services.dynamic_config.describe(res.resource_name)
        elif res.resource_type == GROUP:
            if not res.resource_name:
                code, message = ErrorCode.INVALID_REQUEST, "Group name must not be empty"
            else:
                entries = _group_config_entries(services, res.resource_name)
        else:
            code, message = ErrorCode.INVALID_REQUEST, f"resource type {res.resource_type} is not supported"
        if res.configuration_keys is not None:
            wanted = set(res.configuration_keys)
            entries = [e for e in entries if e.name in wanted]
        configs = [CR(name=e.name, value=None if e.is_sensitive else e.value, read_only=e.read_only,
                      config_source=e.source, is_default=e.is_default, is_sensitive=e.is_sensitive, synonyms=[],
                      config_type=0, documentation=None) for e in entries]
        results.append(R.DescribeConfigsResult(error_code=code, error_message=message,
                                               resource_type=res.resource_type, resource_name=res.resource_name,
                                               configs=configs))
    return ctx.response(throttle_time_ms=0, results=results)


def _relays_for_other_brokers(ctx: RequestContext) -> bool:
    """Whether this broker is the ZooKeeper-mode controller, which gets the other brokers' forwarded alterations
    through its client API (their broker resources name them, not it)."""
    services = ctx.services
    return bool(services.config.zookeeper_mode and services.metadata.controller_id() == services.node_id)


def _alter_refusal(ctx: RequestContext, resource: Any, relaying: bool,
                   incremental: bool) -> tuple[ErrorCode, str] | None:
    """Why a resource's alteration is not forwarded, in Kafka's order: a broker resource naming another broker
    (which Kafka's brokers refuse before forwarding), authorization (not of the legacy AlterConfigs' broker loggers,
    which Kafka refuses first), then a type this broker does not alter; None to forward it."""
    if resource.resource_type == BROKER and not relaying:
        message = _broker_name_error(ctx.services, resource.resource_name)
        if message is not None:
            return ErrorCode.INVALID_REQUEST, message
    if incremental or resource.resource_type != BROKER_LOGGER:
        refusal = _authorization_refusal(ctx, AclOperation.ALTER_CONFIGS, resource)
        if refusal is not None:
            return refusal
    # Group configs are cluster metadata only the KRaft controller keeps (Kafka's ZooKeeper mode had none).
    alterable = (TOPIC, BROKER) if ctx.services.config.zookeeper_mode else (TOPIC, BROKER, GROUP)
    if resource.resource_type not in alterable:
        return (ErrorCode.INVALID_REQUEST,
                f"altering configs of resource type {resource.resource_type} is not supported")
    return None


async def _alter_configs(ctx: RequestContext, request: AlterConfigsRequest | IncrementalAlterConfigsRequest
                         ) -> ApiMessage:
    R = ctx.response_class
    relaying = _relays_for_other_brokers(ctx)
    incremental = request.API_KEY == ApiKey.INCREMENTAL_ALTER_CONFIGS
    answers: dict[int, tuple[ErrorCode, str | None]] = {}
    forwarded_resources = []
    for res in request.resources:
        refusal = _alter_refusal(ctx, res, relaying, incremental)
        if refusal is None:
            forwarded_resources.append(res)
        else:
            answers[id(res)] = refusal
    if forwarded_resources:
        forwarded = type(request)(resources=forwarded_resources, validate_only=request.validate_only)
        try:
            response = await ctx.services.forwarding.forward(forwarded, ctx.version)
            for res, answer in zip(forwarded_resources, response.responses, strict=True):
                answers[id(res)] = (ErrorCode(answer.error_code), answer.error_message)
        except ForwardingError as exc:
            answers.update({id(res): (exc.code, str(exc)) for res in forwarded_resources})
    responses = []
    for res in request.resources:
        code, message = answers[id(res)]
        responses.append(R.AlterConfigsResourceResponse(error_code=code, error_message=message,
                                                        resource_type=res.resource_type,
                                                        resource_name=res.resource_name))
    return ctx.response(throttle_time_ms=0, responses=responses)


async def handle_incremental_alter_configs(ctx: RequestContext,
                                           request: IncrementalAlterConfigsRequest) -> ApiMessage:
    return await _alter_configs(ctx, request)


async def handle_alter_configs(ctx: RequestContext, request: AlterConfigsRequest) -> ApiMessage:
    """The legacy AlterConfigs: the given set replaces all of the resource's configs (on the controller)."""
    return await _alter_configs(ctx, request)


HANDLERS = {ApiKey.DESCRIBE_CONFIGS: handle_describe_configs, ApiKey.ALTER_CONFIGS: handle_alter_configs,
            ApiKey.INCREMENTAL_ALTER_CONFIGS: handle_incremental_alter_configs}
