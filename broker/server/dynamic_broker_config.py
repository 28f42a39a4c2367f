"""Kafka's DynamicBrokerConfig: broker configs changed at run time through (Incremental)AlterConfigs on BROKER
resources, for one broker ("<id>") or as the cluster-wide default (""), kept by the controller (KRaft ConfigRecords
of resource type 4; /config/brokers/<id> and /config/brokers/<default> in ZooKeeper mode), which validates them
(minikafka.broker.metadata.dynamic_config).

A broker's effective config is its own dynamic value over the cluster default over its static property over
Kafka's default. What takes effect live here: the replication throttle rates (and the log-dir move rate,
replica.alter.log.dirs.io.max.bytes.per.second), the log defaults of topics without their own overrides
(log.retention.ms, log.segment.bytes, message.max.bytes, min.insync.replicas, ...: Kafka's DynamicLogConfig),
the log cleaner's log.cleaner.* (its threads restart with them, as Kafka's LogCleaner.reconfigure) and
unclean.leader.election.enable (read by the controller); the rest are stored and described.
"""
from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from minikafka.broker.metadata.dynamic_config import BROKER_QUOTA_CONFIGS, STATIC_CONFIGS
from minikafka.broker.replication.replication_quota_manager import UNLIMITED
from minikafka.config import BROKER_PROPERTIES, BrokerConfig, ConfigError, typed_value
from minikafka.storage.log_config import (
    SOURCE_DEFAULT_CONFIG,
    SOURCE_STATIC_BROKER_CONFIG,
    ConfigEntry,
    LogConfig,
    topic_defaults_from_broker_props,
)

log = logging.getLogger("minikafka.broker")

SOURCE_DYNAMIC_BROKER_CONFIG = 2  # Kafka's DescribeConfigs ConfigSource
SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG = 3
CLUSTER_DEFAULT = ""

# Each topic config's broker synonym among DYNAMIC_LOG_CONFIGS (Kafka's ServerTopicConfigSynonyms), for a topic's
# DescribeConfigs.
TOPIC_CONFIG_SYNONYMS = {
    "segment.bytes": "log.segment.bytes", "segment.ms": "log.roll.ms", "segment.jitter.ms": "log.roll.jitter.ms",
    "segment.index.bytes": "log.index.size.max.bytes", "flush.messages": "log.flush.interval.messages",
    "flush.ms": "log.flush.interval.ms", "retention.bytes": "log.retention.bytes", "retention.ms": "log.retention.ms",
    "max.message.bytes": "message.max.bytes", "index.interval.bytes": "log.index.interval.bytes",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
    "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
    "file.delete.delay.ms": "log.segment.delete.delay.ms",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
    "cleanup.policy": "log.cleanup.policy", "unclean.leader.election.enable": "unclean.leader.election.enable",
    "min.insync.replicas": "min.insync.replicas", "compression.type": "compression.type",
    "compression.gzip.level": "compression.gzip.level", "compression.lz4.level": "compression.lz4.level",
    "compression.zstd.level": "compression.zstd.level", "preallocate": "log.preallocate",
    "message.timestamp.type": "log.message.timestamp.type",
    "message.timestamp.before.max.ms": "log.message.timestamp.before.max.ms",
    "message.timestamp.after.max.ms": "log.message.timestamp.after.max.ms",
    "local.retention.ms": "log.local.retention.ms", "local.retention.bytes": "log.local.retention.bytes"}


def is_sensitive(name: str) -> bool:
    """A password or JAAS config: described without its value, as Kafka does."""
    return name.endswith(".password") or name.endswith("sasl.jaas.config")


class DynamicBrokerConfig:
    """One broker's config with the controller's dynamic broker configs laid over its static properties."""

    def __init__(self, static: BrokerConfig) -> None:
        self.static = static
        self.node_id = static.node_id
        self.per_broker: dict[str, str] = {}
        self.cluster_default: dict[str, str] = {}
        self.log_defaults = self._log_defaults()

    def update(self, broker_configs: Mapping[str, Mapping[str, str]]) -> bool:
        """Take the dynamic configs of this broker and the cluster default (the image's broker_configs); whether
        the log defaults changed (then every topic without its own overrides follows)."""
        self.per_broker = dict(broker_configs.get(str(self.node_id), {}))
        self.cluster_default = dict(broker_configs.get(CLUSTER_DEFAULT, {}))
        log_defaults = self._log_defaults()
        changed = log_defaults != self.log_defaults
        self.log_defaults = log_defaults
        return changed

    def _merged(self) -> dict[str, str]:
        props = dict(self.static.props)
        props.update(self.cluster_default)
        props.update(self.per_broker)
        return props

    def _log_defaults(self) -> LogConfig:
        try:
            return topic_defaults_from_broker_props(self._merged())
        except ValueError as exc:  # checked by the controller: only a value stored by another version gets here
            log.error("dynamic log configs not applied: %s", exc)
            return topic_defaults_from_broker_props(self.static.props)

    def value(self, name: str) -> str | None:
        """The effective value as a property string: per-broker, cluster default, static; None when unset."""
        for scope in (self.per_broker, self.cluster_default, self.static.props):
            if name in scope:
                return scope[name]
        return None

    def get(self, name: str) -> Any:
        """The effective value, typed as BrokerConfig.get types it; one that does not parse (stored by another
        version: the controller checks them) leaves the static one."""
        try:
            return typed_value(name, self.value(name))
        except ConfigError as exc:
            log.error("dynamic config not applied: %s", exc)
            return self.static.get(name)

    def replication_throttled_rate(self, name: str) -> int:
        """leader.replication.throttled.rate or follower.replication.throttled.rate in bytes/s (unbounded when
        unset or unreadable)."""
        text = self.value(name)
        try:
            return int(text) if text is not None else UNLIMITED
        except ValueError:
            return UNLIMITED

    def topic_entry(self, entry: ConfigEntry) -> ConfigEntry:
        """A topic's DescribeConfigs entry whose value comes from a dynamic broker config, with that source."""
        if entry.source not in (SOURCE_STATIC_BROKER_CONFIG, SOURCE_DEFAULT_CONFIG):
            return entry
        synonym = TOPIC_CONFIG_SYNONYMS.get(entry.name)
        if synonym in self.per_broker:
            return entry._replace(is_default=False, source=SOURCE_DYNAMIC_BROKER_CONFIG)
        if synonym in self.cluster_default:
            return entry._replace(is_default=False, source=SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG)
        return entry

    def describe(self, resource_name: str) -> list[ConfigEntry]:
        """DescribeConfigs of a BROKER resource: the cluster default ("") lists the dynamic defaults alone; a broker
        every config with its source (per-broker dynamic, dynamic default, static, default)."""
        if resource_name == CLUSTER_DEFAULT:
            return [ConfigEntry(name, value, False, SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG, read_only=False,
                                is_sensitive=is_sensitive(name))
                    for name, value in sorted(self.cluster_default.items())]
        names = set(BROKER_PROPERTIES) | set(BROKER_QUOTA_CONFIGS) | set(self.per_broker) | set(self.cluster_default)
        entries = []
        for name in sorted(names):
            if name in self.per_broker:
                text, source = self.per_broker[name], SOURCE_DYNAMIC_BROKER_CONFIG
            elif name in self.cluster_default:
                text, source = self.cluster_default[name], SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG
            elif name in self.static.props:
                text, source = self.static.props[name], SOURCE_STATIC_BROKER_CONFIG
            elif name in BROKER_PROPERTIES:
                default = BROKER_PROPERTIES[name][1]
                if default is None:
                    continue
                text = str(default).lower() if isinstance(default, bool) else str(default)
                source = SOURCE_DEFAULT_CONFIG
            else:
                text, source = str(UNLIMITED), SOURCE_DEFAULT_CONFIG
            entries.append(ConfigEntry(name, text, source == SOURCE_DEFAULT_CONFIG, source,
                                       read_only=name in STATIC_CONFIGS, is_sensitive=is_sensitive(name)))
        return entries
