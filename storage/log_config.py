"""Topic-level log configuration under Kafka's names, defaults and validation rules.

Every Kafka 4 topic config is known, so CreateTopics/AlterConfigs/DescribeConfigs behave as
against Kafka (unknown names and bad values are rejected, everything is listed), even for the
settings this broker stores without acting on (tiered storage, throttling).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

LONG_MAX = 2**63 - 1
_INT_RANGE = (-(2**31), 2**31 - 1)
_LONG_RANGE = (-(2**63), 2**63 - 1)

CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"

# DescribeConfigs config_source values.
SOURCE_TOPIC_CONFIG = 1
SOURCE_STATIC_BROKER_CONFIG = 4
SOURCE_DEFAULT_CONFIG = 5


@dataclass(frozen=True)
class LogConfig:
    """Effective configuration of one partition log; field = Kafka name with '.' -> '_'.

    `overrides` names the configs set on the topic itself (as opposed to inherited from the
    broker defaults); it does not take part in equality.
    """

    cleanup_policy: str = "delete"
    compression_type: str = "producer"
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_zstd_level: int = 3
    delete_retention_ms: int = 86400000
    file_delete_delay_ms: int = 60000
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    follower_replication_throttled_replicas: str = ""
    index_interval_bytes: int = 4096
    leader_replication_throttled_replicas: str = ""
    local_retention_bytes: int = -2
    local_retention_ms: int = -2
    max_compaction_lag_ms: int = LONG_MAX
    max_message_bytes: int = 1048588
    message_timestamp_after_max_ms: int = 3600000
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_type: str = CREATE_TIME
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    min_insync_replicas: int = 1
    preallocate: bool = False
    remote_log_copy_disable: bool = False
    remote_log_delete_on_disable: bool = False
    remote_storage_enable: bool = False
    retention_bytes: int = -1
    retention_ms: int = 604800000
    segment_bytes: int = 1073741824
    segment_index_bytes: int = 10485760
    segment_jitter_ms: int = 0
    segment_ms: int = 604800000
    unclean_leader_election_enable: bool = False
    # Kafka's internal.segment.bytes: a segment size below segment.bytes' minimum, for tests only (None: unset).
    internal_segment_bytes: int | None = None
    overrides: frozenset[str] = field(default=frozenset(), compare=False)

    @property
    def compact_enabled(self) -> bool:
        """Whether the log cleaner compacts the log (cleanup.policy contains "compact")."""
        return "compact" in self.cleanup_policy.split(",")

    @property
    def segment_size(self) -> int:
        """The size a segment rolls at: internal.segment.bytes where a test sets it, else segment.bytes."""
        return self.segment_bytes if self.internal_segment_bytes is None else self.internal_segment_bytes

    @property
    def delete_enabled(self) -> bool:
        """Whether retention deletes segments (cleanup.policy contains "delete")."""
        return "delete" in self.cleanup_policy.split(",")

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == LOG_APPEND_TIME

    @classmethod
    def from_props(cls, props: Mapping[str, Any], defaults: LogConfig | None = None) -> LogConfig:
        """Apply topic-level `props` (Kafka names, string values) on top of `defaults`.

        Raises ValueError naming the config for an unknown name or an invalid value.
        """
        base = defaults if defaults is not None else cls()
        changes = {_attr(name): _parse(name, value) for name, value in props.items()}
        config = dataclasses.replace(base, overrides=frozenset(props), **changes)
        if config.min_compaction_lag_ms > config.max_compaction_lag_ms:  # Kafka's LogConfig.validateValues
            raise ValueError(f"conflict topic config setting min.compaction.lag.ms ({config.min_compaction_lag_ms}) "
                             f"> max.compaction.lag.ms ({config.max_compaction_lag_ms})")
        return config

    def value_string(self, name: str) -> str:
        """The config's value rendered as Kafka renders it in DescribeConfigs."""
        return _render(getattr(self, _attr(name)))

    def override_props(self) -> dict[str, str]:
        """The topic-level settings as strings, e.g. to persist them with the topic."""
        return {name: self.value_string(name) for name in sorted(self.overrides)}

    def describe(self) -> list[ConfigEntry]:
        """Every topic config with its value and where it comes from, for DescribeConfigs."""
        entries = []
        for definition in _DEFS:
            if definition.internal and definition.name not in self.overrides:
                continue  # Kafka lists an internal config only where it is set
            value = self.value_string(definition.name)
            if definition.name in self.overrides:
                source = SOURCE_TOPIC_CONFIG
            elif value != TOPIC_CONFIG_DEFAULTS[definition.name]:
                source = SOURCE_STATIC_BROKER_CONFIG
            else:
                source = SOURCE_DEFAULT_CONFIG
            entries.append(ConfigEntry(definition.name, value, source == SOURCE_DEFAULT_CONFIG, source))
        return entries


class ConfigEntry(NamedTuple):
    """One DescribeConfigs result row."""

    name: str
    value: str
    is_default: bool
    source: int
    read_only: bool = False
    is_sensitive: bool = False


class _Def(NamedTuple):
    name: str
    kind: str  # int | long | boolean | double | string | list
    check: Callable[[Any], str | None] | None = None
    internal: bool = False  # Kafka's defineInternal: for tests, not listed unless set


def _at_least(minimum: int) -> Callable[[Any], str | None]:
    return lambda v: None if v >= minimum else f"Value must be at least {minimum}"


def _between(low: float, high: float) -> Callable[[Any], str | None]:
    return lambda v: None if low <= v <= high else f"Value must be no less than {low} and no more than {high}"


def _one_of(*allowed: str) -> Callable[[Any], str | None]:
    return lambda v: None if v in allowed else f"String must be one of: {', '.join(allowed)}"


def _list_of(*allowed: str) -> Callable[[Any], str | None]:
    def check(value: str) -> str | None:
        bad = [item for item in value.split(",") if item and item not in allowed]
        return f"Invalid value(s) {bad}: must be one of {list(allowed)}" if bad else None

    return check


def _level(low: int, high: int, default: int) -> Callable[[Any], str | None]:
    return lambda v: None if v == default or low <= v <= high else f"Value must be between {low} and {high}"


_DEFS: tuple[_Def, ...] = (
    _Def("cleanup.policy", "list", _list_of("compact", "delete")),
    _Def("compression.type", "string", _one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")),
    _Def("compression.gzip.level", "int", _level(1, 9, -1)),
    _Def("compression.lz4.level", "int", _level(1, 17, 9)),
    _Def("compression.zstd.level", "int", _level(-131072, 22, 3)),
    _Def("delete.retention.ms", "long", _at_least(0)),
    _Def("file.delete.delay.ms", "long", _at_least(0)),
    _Def("flush.messages", "long", _at_least(1)),
    _Def("flush.ms", "long", _at_least(0)),
    _Def("follower.replication.throttled.replicas", "list"),
    _Def("index.interval.bytes", "int", _at_least(0)),
    _Def("leader.replication.throttled.replicas", "list"),
    _Def("local.retention.bytes", "long", _at_least(-2)),
    _Def("local.retention.ms", "long", _at_least(-2)),
    _Def("max.compaction.lag.ms", "long", _at_least(1)),
    _Def("max.message.bytes", "int", _at_least(0)),
    _Def("message.timestamp.after.max.ms", "long", _at_least(0)),
    _Def("message.timestamp.before.max.ms", "long", _at_least(0)),
    _Def("message.timestamp.type", "string", _one_of(CREATE_TIME, LOG_APPEND_TIME)),
    _Def("min.cleanable.dirty.ratio", "double", _between(0, 1)),
    _Def("min.compaction.lag.ms", "long", _at_least(0)),
    _Def("min.insync.replicas", "int", _at_least(1)),
    _Def("preallocate", "boolean"),
    _Def("remote.log.copy.disable", "boolean"),
    _Def("remote.log.delete.on.disable", "boolean"),
    _Def("remote.storage.enable", "boolean"),
    _Def("retention.bytes", "long"),
    _Def("retention.ms", "long", _at_least(-1)),
    _Def("segment.bytes", "int", _at_least(1024 * 1024)),
    _Def("segment.index.bytes", "int", _at_least(4)),
    _Def("segment.jitter.ms", "long", _at_least(0)),
    _Def("segment.ms", "long", _at_least(1)),
    _Def("unclean.leader.election.enable", "boolean"),
    _Def("internal.segment.bytes", "int", internal=True),
)
_DEF_BY_NAME = {d.name: d for d in _DEFS}


def _attr(name: str) -> str:
    if name not in _DEF_BY_NAME:
        raise ValueError(f"Unknown topic config name: {name}")
    return name.replace(".", "_")


def _render(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _parse(name: str, raw: Any) -> Any:
    definition = _DEF_BY_NAME[name]
    if raw is None:
        raise ValueError(f"Invalid value null for configuration {name}: null is not supported")
    text = _render(raw).strip()
    value: Any
    if definition.kind in ("int", "long"):
        low, high = _INT_RANGE if definition.kind == "int" else _LONG_RANGE
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or not low <= value <= high:
            raise ValueError(
                f"Invalid value {raw} for configuration {name}: Not a number of type {definition.kind.upper()}"
            )
    elif definition.kind == "boolean":
        if text.lower() not in ("true", "false"):
            raise ValueError(f"Invalid value {raw} for configuration {name}: Expected value to be either true or false")
        value = text.lower() == "true"
    elif definition.kind == "double":
        try:
            value = float(text)
        except ValueError:
            raise ValueError(f"Invalid value {raw} for configuration {name}: Not a number of type DOUBLE") from None
    elif definition.kind == "list":
        value = ",".join(item.strip() for item in text.split(",") if item.strip())
    else:
        value = text
    problem = definition.check(value) if definition.check else None
    if problem:
        raise ValueError(f"Invalid value {raw} for configuration {name}: {problem}")
    return value


TOPIC_CONFIG_DEFAULTS: dict[str, str] = {d.name: LogConfig().value_string(d.name) for d in _DEFS if not d.internal}
"""Kafka's default value, as a string, of every topic config name."""


# Broker property -> topic config it provides the default for. Where several broker properties
# feed one topic config, the first one present wins (Kafka: ms over minutes over hours). The
# number converts a time unit to milliseconds; None passes the value through unchanged.
_BROKER_TO_TOPIC: tuple[tuple[str, tuple[tuple[str, int | None], ...]], ...] = (
    ("segment.bytes", (("log.segment.bytes", 1),)),
    ("segment.ms", (("log.roll.ms", 1), ("log.roll.hours", 3600000))),
    ("segment.jitter.ms", (("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", 3600000))),
    ("segment.index.bytes", (("log.index.size.max.bytes", 1),)),
    ("retention.ms", (("log.retention.ms", 1), ("log.retention.minutes", 60000), ("log.retention.hours", 3600000))),
    ("retention.bytes", (("log.retention.bytes", 1),)),
    ("index.interval.bytes", (("log.index.interval.bytes", 1),)),
    ("flush.messages", (("log.flush.interval.messages", 1),)),
    ("flush.ms", (("log.flush.interval.ms", 1), ("log.flush.scheduler.interval.ms", 1))),
    ("file.delete.delay.ms", (("log.segment.delete.delay.ms", 1),)),
    ("max.message.bytes", (("message.max.bytes", 1),)),
    ("message.timestamp.type", (("log.message.timestamp.type", None),)),
    ("message.timestamp.before.max.ms", (("log.message.timestamp.before.max.ms", 1),)),
    ("message.timestamp.after.max.ms", (("log.message.timestamp.after.max.ms", 1),)),
    ("min.insync.replicas", (("min.insync.replicas", 1),)),
    ("cleanup.policy", (("log.cleanup.policy", None),)),
    ("compression.type", (("compression.type", None),)),
    ("preallocate", (("log.preallocate", None),)),
    ("unclean.leader.election.enable", (("unclean.leader.election.enable", None),)),
    ("delete.retention.ms", (("log.cleaner.delete.retention.ms", 1),)),
    ("min.compaction.lag.ms", (("log.cleaner.min.compaction.lag.ms", 1),)),
    ("max.compaction.lag.ms", (("log.cleaner.max.compaction.lag.ms", 1),)),
    ("min.cleanable.dirty.ratio", (("log.cleaner.min.cleanable.ratio", None),)),
)


def topic_defaults_from_broker_props(props: Mapping[str, Any]) -> LogConfig:
    """Topic config defaults implied by broker properties (log.segment.bytes, log.retention.hours, ...).

    Unit-suffixed properties are converted (log.retention.hours=1 -> retention.ms=3600000; a
    negative retention time means unlimited, -1). Raises ValueError for an invalid value.
    """
    topic_props: dict[str, Any] = {}
    for topic_name, sources in _BROKER_TO_TOPIC:
        for broker_name, multiplier in sources:
            if broker_name not in props:
                continue
            raw = props[broker_name]
            if multiplier is not None:
                try:
                    number = int(str(raw).strip())
                except ValueError:
                    raise ValueError(f"Invalid value {raw} for configuration {broker_name}: Not a number") from None
                number *= multiplier
                if topic_name == "retention.ms" and number < 0:
                    number = -1
                topic_props[topic_name] = number
            else:
                topic_props[topic_name] = raw
            break
    return dataclasses.replace(LogConfig.from_props(topic_props), overrides=frozenset())
