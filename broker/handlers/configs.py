"""DescribeConfigs (v1-4), AlterConfigs (v0-2) and IncrementalAlterConfigs (v0-1): topic configs, and a read-only
view of broker configs.

DescribeConfigs answers topic and broker resources (any other type is INVALID_REQUEST), each entry with its source
(v1+); synonyms are always empty even when asked for (v1+), and v3's config type and documentation are unknown
(0) and null. v4 is flexible. The legacy AlterConfigs replaces all of a topic's overrides with the given set;
IncrementalAlterConfigs applies SET, DELETE, APPEND and SUBTRACT, the last two only to list configs
(INVALID_CONFIG otherwise). Both alter topics only, validate the result as a whole before applying it (so
validate_only answers exactly as the change would), and are flexible from v2 and v1.
"""
from __future__ import annotations

from kafka.protocol.admin.configs import AlterConfigsRequest, DescribeConfigsRequest, IncrementalAlterConfigsRequest
from kafka.protocol.api_message import ApiMessage

from minikafka.config import BROKER_PROPERTIES
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.storage.log_config import SOURCE_DEFAULT_CONFIG, SOURCE_STATIC_BROKER_CONFIG, ConfigEntry, LogConfig

from ..kafka_apis import RequestContext

TOPIC = 2
BROKER = 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
LIST_CONFIGS = frozenset({"cleanup.policy", "follower.replication.throttled.replicas",
                          "leader.replication.throttled.replicas"})


def topic_config_entries(broker, overrides: dict[str, str]) -> list[ConfigEntry]:
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
            topic = broker.controller.topics.get(res.resource_name)
            if topic is None:
                code, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {res.resource_name} does not exist"
            else:
                entries = topic_config_entries(broker, topic.configs)
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


def _altered(current: dict[str, str], effective: LogConfig, alterations) -> dict[str, str]:
    """Apply SET/DELETE/APPEND/SUBTRACT to a topic's overrides, as Kafka's incremental alter does."""
    new = dict(current)
    for c in alterations:
        if c.config_operation == SET:
            new[c.name] = c.value
        elif c.config_operation == DELETE:
            new.pop(c.name, None)
        elif c.config_operation in (APPEND, SUBTRACT):
            if c.name not in LIST_CONFIGS:
                raise KafkaError(ErrorCode.INVALID_CONFIG,
                                 f"Config value append/subtract is not allowed for config key: {c.name}")
            items = [i for i in effective.value_string(c.name).split(",") if i]
            change = [i for i in (c.value or "").split(",") if i]
            if c.config_operation == APPEND:
                items += [i for i in change if i not in items]
            else:
                items = [i for i in items if i not in change]
            new[c.name] = ",".join(items)
        else:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"unknown config operation {c.config_operation}")
    return new


def _alter_topic_configs(broker, resource, validate_only: bool, new_overrides) -> tuple[ErrorCode, str | None]:
    """Validate and apply one resource's alteration; `new_overrides(topic)` gives the topic's new overrides."""
    try:
        if resource.resource_type != TOPIC:
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             f"altering configs of resource type {resource.resource_type} is not supported")
        topic = broker.controller.topics.get(resource.resource_name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {resource.resource_name} does not exist")
        names = [c.name for c in resource.configs]
        if len(names) != len(set(names)):
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
        new = new_overrides(topic)
        try:
            LogConfig.from_props(new, broker.log_defaults)
        except ValueError as exc:
            raise KafkaError(ErrorCode.INVALID_CONFIG, str(exc)) from None
        if not validate_only:
            broker.set_topic_configs(topic.name, new)
    except KafkaError as exc:
        return exc.code, exc.message
    return ErrorCode.NONE, None


def _alter_response(ctx: RequestContext, request: AlterConfigsRequest | IncrementalAlterConfigsRequest,
                    new_overrides_for) -> ApiMessage:
    R = ctx.response_class
    responses = []
    for res in request.resources:
        code, message = _alter_topic_configs(ctx.broker, res, request.validate_only, new_overrides_for(res))
        responses.append(R.AlterConfigsResourceResponse(error_code=code, error_message=message,
                                                        resource_type=res.resource_type,
                                                        resource_name=res.resource_name))
    return ctx.response(throttle_time_ms=0, responses=responses)


async def handle_incremental_alter_configs(ctx: RequestContext,
                                           request: IncrementalAlterConfigsRequest) -> ApiMessage:
    def new_overrides_for(res):
        return lambda topic: _altered(topic.configs, LogConfig.from_props(topic.configs, ctx.broker.log_defaults),
                                      res.configs)
    return _alter_response(ctx, request, new_overrides_for)


async def handle_alter_configs(ctx: RequestContext, request: AlterConfigsRequest) -> ApiMessage:
    """The legacy AlterConfigs: the given set replaces all of the topic's overrides."""
    return _alter_response(ctx, request, lambda res: lambda topic: {c.name: c.value for c in res.configs})


HANDLERS = {ApiKey.DESCRIBE_CONFIGS: handle_describe_configs, ApiKey.ALTER_CONFIGS: handle_alter_configs,
            ApiKey.INCREMENTAL_ALTER_CONFIGS: handle_incremental_alter_configs}
