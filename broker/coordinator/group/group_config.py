"""Kafka's GroupConfig: the configs one group may override (DescribeConfigs and IncrementalAlterConfigs on resource
type GROUP), their defaults, and the bounds the broker's group.* properties put on them.

A group's overrides live in the cluster metadata beside topic configs, so every broker, and the coordinator a group
moves to, applies the same ones. They are validated as a whole, as Kafka's GroupConfig.validate does, on the
controller before anything is written: known names, typed values, then each bound, with Kafka's messages.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from minikafka.config import BrokerConfig
from minikafka.protocol.errors import ErrorCode, KafkaError

CONSUMER_SESSION_TIMEOUT_MS = "consumer.session.timeout.ms"
CONSUMER_HEARTBEAT_INTERVAL_MS = "consumer.heartbeat.interval.ms"
SHARE_SESSION_TIMEOUT_MS = "share.session.timeout.ms"
SHARE_HEARTBEAT_INTERVAL_MS = "share.heartbeat.interval.ms"
SHARE_RECORD_LOCK_DURATION_MS = "share.record.lock.duration.ms"
SHARE_AUTO_OFFSET_RESET = "share.auto.offset.reset"
SHARE_ISOLATION_LEVEL = "share.isolation.level"
STREAMS_SESSION_TIMEOUT_MS = "streams.session.timeout.ms"
STREAMS_HEARTBEAT_INTERVAL_MS = "streams.heartbeat.interval.ms"
STREAMS_NUM_STANDBY_REPLICAS = "streams.num.standby.replicas"


@dataclass(frozen=True)
class _IntConfig:
    name: str
    at_least: int
    default_property: str | None  # the broker property its default comes from (Kafka's extractGroupConfigMap)
    default: int  # when no broker property gives it
    min_property: str | None
    max_property: str | None


_INT_CONFIGS = (
    _IntConfig(CONSUMER_SESSION_TIMEOUT_MS, 1, "group.consumer.session.timeout.ms", 45000,
               "group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms"),
    _IntConfig(CONSUMER_HEARTBEAT_INTERVAL_MS, 1, "group.consumer.heartbeat.interval.ms", 5000,
               "group.consumer.min.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms"),
    _IntConfig(SHARE_SESSION_TIMEOUT_MS, 1, "group.share.session.timeout.ms", 45000,
               "group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms"),
    _IntConfig(SHARE_HEARTBEAT_INTERVAL_MS, 1, "group.share.heartbeat.interval.ms", 5000,
               "group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms"),
    _IntConfig(SHARE_RECORD_LOCK_DURATION_MS, 1000, "group.share.record.lock.duration.ms", 30000,
               "group.share.min.record.lock.duration.ms", "group.share.max.record.lock.duration.ms"),
    _IntConfig(STREAMS_SESSION_TIMEOUT_MS, 1, None, 45000,
               "group.streams.min.session.timeout.ms", "group.streams.max.session.timeout.ms"),
    _IntConfig(STREAMS_HEARTBEAT_INTERVAL_MS, 1, None, 5000,
               "group.streams.min.heartbeat.interval.ms", "group.streams.max.heartbeat.interval.ms"),
    _IntConfig(STREAMS_NUM_STANDBY_REPLICAS, 0, None, 0, None, "group.streams.max.standby.replicas"),
)
_STRING_DEFAULTS = {SHARE_AUTO_OFFSET_RESET: "latest", SHARE_ISOLATION_LEVEL: "read_uncommitted"}
_ISOLATION_LEVELS = ("read_committed", "read_uncommitted")
# Kafka's describe order: GroupConfig's ConfigDef lists its names sorted.
GROUP_CONFIG_NAMES = tuple(sorted([c.name for c in _INT_CONFIGS] + list(_STRING_DEFAULTS)))
# A session timeout must be greater than its heartbeat interval, for each kind of group.
_SESSION_OVER_HEARTBEAT = ((CONSUMER_SESSION_TIMEOUT_MS, CONSUMER_HEARTBEAT_INTERVAL_MS),
                           (SHARE_SESSION_TIMEOUT_MS, SHARE_HEARTBEAT_INTERVAL_MS),
                           (STREAMS_SESSION_TIMEOUT_MS, STREAMS_HEARTBEAT_INTERVAL_MS))
# Kafka's order of the bound checks (GroupConfig.validateValues).
_BOUND_ORDER = (CONSUMER_HEARTBEAT_INTERVAL_MS, CONSUMER_SESSION_TIMEOUT_MS, SHARE_HEARTBEAT_INTERVAL_MS,
                SHARE_SESSION_TIMEOUT_MS, SHARE_RECORD_LOCK_DURATION_MS, STREAMS_HEARTBEAT_INTERVAL_MS,
                STREAMS_SESSION_TIMEOUT_MS, STREAMS_NUM_STANDBY_REPLICAS)
# A non-negative duration in Java's Duration.parse text (PnDTnHnMn.nS), as share.auto.offset.reset's by_duration
# takes it.
_ISO_DURATION = re.compile(r"P(?=\d|T\d)(?:\d+D)?(?:T(?=\d)(?:\d+H)?(?:\d+M)?(?:\d+(?:[.,]\d{1,9})?S)?)?",
                           re.IGNORECASE)


@dataclass(frozen=True)
class GroupConfigDefaults:
    """What a group gets without overrides, and the bounds on its overrides, from a node's properties."""

    defaults: Mapping[str, str]
    bounds: Mapping[str, int]  # group.*.min/max properties by name

    @classmethod
    def from_broker_config(cls, config: BrokerConfig) -> GroupConfigDefaults:
        defaults = {c.name: str(config.get(c.default_property) if c.default_property else c.default)
                    for c in _INT_CONFIGS}
        defaults.update(_STRING_DEFAULTS)
        bounds = {p: config.get(p) for c in _INT_CONFIGS for p in (c.min_property, c.max_property) if p}
        return cls(defaults, bounds)


def _invalid(message: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_CONFIG, message)


def _valid_offset_reset(value: str) -> bool:
    strategy = value.strip().lower()
    if strategy in ("earliest", "latest"):
        return True
    return strategy.startswith("by_duration:") and bool(_ISO_DURATION.fullmatch(value.strip()[len("by_duration:"):]))


def validate_group_configs(overrides: Mapping[str, str], defaults: GroupConfigDefaults) -> dict[str, str]:
    """The group's effective configs with these overrides; INVALID_CONFIG, with Kafka's message, for an unknown
    name, a value of the wrong type, or one outside the broker's bounds."""
    for name in overrides:
        if name not in GROUP_CONFIG_NAMES:
            raise _invalid(f"Unknown group config name: {name}")
    effective = {**defaults.defaults, **overrides}
    values: dict[str, int] = {}
    for config in _INT_CONFIGS:
        text = effective[config.name].strip()
        try:
            values[config.name] = int(text)
        except ValueError:
            raise _invalid(f"Invalid value {text} for configuration {config.name}: Not a number of type INT") \
                from None
        if values[config.name] < config.at_least:
            raise _invalid(f"Invalid value {text} for configuration {config.name}: Value must be at least "
                           f"{config.at_least}")
    reset = effective[SHARE_AUTO_OFFSET_RESET]
    if not _valid_offset_reset(reset):
        raise _invalid(f"Invalid value {reset} for configuration {SHARE_AUTO_OFFSET_RESET}: Invalid value `{reset}` "
                       f"for configuration {SHARE_AUTO_OFFSET_RESET}. The value must be either 'earliest', 'latest' "
                       "or of the format 'by_duration:<PnDTnHnMn.nS>'.")
    isolation = effective[SHARE_ISOLATION_LEVEL]
    if isolation not in _ISOLATION_LEVELS:
        raise _invalid(f"Invalid value {isolation} for configuration {SHARE_ISOLATION_LEVEL}: String must be one "
                       f"of: {', '.join(_ISOLATION_LEVELS)}")
    by_name = {c.name: c for c in _INT_CONFIGS}
    for config in (by_name[name] for name in _BOUND_ORDER):
        value = values[config.name]
        if config.min_property and value < defaults.bounds[config.min_property]:
            raise _invalid(f"{config.name} must be greater than or equal to {config.min_property}")
        if config.max_property and value > defaults.bounds[config.max_property]:
            raise _invalid(f"{config.name} must be less than or equal to {config.max_property}")
    for session, heartbeat in _SESSION_OVER_HEARTBEAT:
        if values[session] <= values[heartbeat]:
            raise _invalid(f"{session} must be greater than {heartbeat}")
    return effective


def described_group_configs(overrides: Mapping[str, str], defaults: GroupConfigDefaults) -> list[tuple[str, str, bool]]:
    """Every group config as DescribeConfigs lists it: (name, value, whether the group overrides it)."""
    return [(name, overrides.get(name, defaults.defaults[name]), name in overrides) for name in GROUP_CONFIG_NAMES]
