"""DescribeConfigs (v1-4), AlterConfigs (v0-2) and IncrementalAlterConfigs (v0-1): topic configs, and a read-only
view of broker configs.

DescribeConfigs answers topic and broker resources (any other type is INVALID_REQUEST), each entry with its source
(v1+); synonyms are always empty even when asked for (v1+), and v3's config type and documentation are unknown
(0) and null. v4 is flexible. Topic alterations are the controller's: the topic resources of an AlterConfigs or
IncrementalAlterConfigs go to it in one request of the same kind and version, and its answers are relayed in the
request's order (it validates each topic's result as a whole, applies SET, DELETE, APPEND and SUBTRACT, the last
two to list configs only, and answers validate_only exactly as the change would). Broker configs are static, so
their alteration is refused here, as any other resource type is (INVALID_REQUEST). Flexible from v2 and v1.
"""
from __future__ import annotations

from typing import Any

from kafka.protocol.admin.configs import AlterConfigsRequest, DescribeConfigsRequest, IncrementalAlterConfigsRequest
from kafka.protocol.api_message import ApiMessage

from minikafka.config import BROKER_PROPERTIES
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.errors import ErrorCode
from minikafka.storage.log_config import SOURCE_DEFAULT_CONFIG, SOURCE_STATIC_BROKER_CONFIG, ConfigEntry, LogConfig

from ..forwarding import ForwardingError
from ..kafka_apis import RequestContext

TOPIC = 2
BROKER = 4


def _topic_config_entries(broker, overrides: dict[str, str]) -> list[ConfigEntry]:
    return LogConfig.from_props(overrides, broker.log_defaults).describe()


def _broker_config_entries(broker) -> list[ConfigEntry]:
    entries = []
    for name in sorted(BROKER_PROPERTIES):
        value = broker.config.get(name)
        if value is None:
            continue
        text = str(value).lower() if isinstance(value, bool) else str(value)
        source = SOURCE_STATIC_BROKER_CONFIG if name in broker.config.props else SOURCE_DEFAULT_CONFIG
        entries.append(ConfigEntry(name, text, source == SOURCE_DEFAULT_CONFIG, source, read_only=True))
    return entries


async def handle_describe_configs(ctx: RequestContext, request: DescribeConfigsRequest) -> ApiMessage:
    R = ctx.response_class
    CR = R.DescribeConfigsResult.DescribeConfigsResourceResult
    broker = ctx.broker
    results = []
    for res in request.resources:
        code, message, entries = ErrorCode.NONE, None, []
        if res.resource_type == TOPIC:
            cache = broker.metadata_cache
            if res.resource_name not in cache.topics:
                code, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {res.resource_name} does not exist"
            else:
                entries = _topic_config_entries(broker, cache.topic_configs(res.resource_name))
        elif res.resource_type == BROKER:
            if res.resource_name not in ("", str(broker.node_id)):
                code, message = ErrorCode.INVALID_REQUEST, f"unexpected broker id {res.resource_name}"
            else:
                entries = _broker_config_entries(broker)
        else:
            code, message = ErrorCode.INVALID_REQUEST, f"resource type {res.resource_type} is not supported"
        if res.configuration_keys is not None:
            wanted = set(res.configuration_keys)
            entries = [e for e in entries if e.name in wanted]
        configs = [CR(name=e.name, value=e.value, read_only=e.read_only, config_source=e.source,
                      is_default=e.is_default, is_sensitive=e.is_sensitive, synonyms=[], config_type=0,
                      documentation=None) for e in entries]
        results.append(R.DescribeConfigsResult(error_code=code, error_message=message,
                                               resource_type=res.resource_type, resource_name=res.resource_name,
                                               configs=configs))
    return ctx.response(throttle_time_ms=0, results=results)


def _local_refusal(resource: Any) -> tuple[ErrorCode, str]:
    return ErrorCode.INVALID_REQUEST, f"altering configs of resource type {resource.resource_type} is not supported"


async def _alter_configs(ctx: RequestContext, request: AlterConfigsRequest | IncrementalAlterConfigsRequest
                         ) -> ApiMessage:
    R = ctx.response_class
    topics = [res for res in request.resources if res.resource_type == TOPIC]
    answers: dict[int, tuple[ErrorCode, str | None]] = {}
    if topics:
        forwarded = type(request)(resources=topics, validate_only=request.validate_only)
        try:
            response = await ctx.broker.forwarding.forward(forwarded, ctx.version)
            for res, answer in zip(topics, response.responses, strict=True):
                answers[id(res)] = (ErrorCode(answer.error_code), answer.error_message)
        except ForwardingError as exc:
            answers.update({id(res): (exc.code, str(exc)) for res in topics})
    responses = []
    for res in request.resources:
        code, message = answers[id(res)] if id(res) in answers else _local_refusal(res)
        responses.append(R.AlterConfigsResourceResponse(error_code=code, error_message=message,
                                                        resource_type=res.resource_type,
                                                        resource_name=res.resource_name))
    return ctx.response(throttle_time_ms=0, responses=responses)


async def handle_incremental_alter_configs(ctx: RequestContext,
                                           request: IncrementalAlterConfigsRequest) -> ApiMessage:
    return await _alter_configs(ctx, request)


async def handle_alter_configs(ctx: RequestContext, request: AlterConfigsRequest) -> ApiMessage:
    """The legacy AlterConfigs: the given set replaces all of the topic's overrides (on the controller)."""
    return await _alter_configs(ctx, request)


HANDLERS = {ApiKey.DESCRIBE_CONFIGS: handle_describe_configs, ApiKey.ALTER_CONFIGS: handle_alter_configs,
            ApiKey.INCREMENTAL_ALTER_CONFIGS: handle_incremental_alter_configs}
