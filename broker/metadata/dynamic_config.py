"""The broker configs Kafka lets change at run time (Kafka's DynamicConfig and DynamicBrokerConfig.validateConfigs),
below both the controller, which validates a BROKER resource's new dynamic configs before writing them, and the
broker's DynamicBrokerConfig, which applies and describes them.

The names Kafka lets change dynamically are accepted (with their values checked); a name Kafka knows as static
(read-only) is refused with INVALID_REQUEST "Cannot update these configs dynamically", a keystore or truststore
setting without its listener prefix (listener.name.<listener>.) likewise, and a per-broker name (listeners, SSL and
SASL settings) set as the cluster default with "Cannot update these configs at default cluster level"; names
Kafka does not know are kept, as Kafka keeps custom properties. As in Kafka, a bad value is INVALID_REQUEST too
(KAFKA-13609).
"""
from __future__ import annotations

from collections.abc import Mapping

from minikafka.config import BROKER_PROPERTIES, ConfigError, _parse
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.storage.log_config import topic_defaults_from_broker_props

LEADER_REPLICATION_THROTTLED_RATE = "leader.replication.throttled.rate"
FOLLOWER_REPLICATION_THROTTLED_RATE = "follower.replication.throttled.rate"
REPLICA_ALTER_LOG_DIRS_IO_MAX_BYTES_PER_SECOND = "replica.alter.log.dirs.io.max.bytes.per.second"
# Kafka's broker quota configs: dynamic only (no server.properties entry), unbounded by default.
BROKER_QUOTA_CONFIGS = (LEADER_REPLICATION_THROTTLED_RATE, FOLLOWER_REPLICATION_THROTTLED_RATE,
                        REPLICA_ALTER_LOG_DIRS_IO_MAX_BYTES_PER_SECOND)

_SSL_CONFIGS = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password", "ssl.keystore.certificate.chain",
    "ssl.keystore.key", "ssl.truststore.certificates"})
_LISTENER_CONFIGS = frozenset({
    "advertised.listeners", "listeners", "listener.security.protocol.map", "principal.builder.class",
    "ssl.protocol", "ssl.provider", "ssl.cipher.suites", "ssl.enabled.protocols", "ssl.keystore.type",
    "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password", "ssl.truststore.type",
    "ssl.truststore.location", "ssl.truststore.password", "ssl.keymanager.algorithm", "ssl.trustmanager.algorithm",
    "ssl.endpoint.identification.algorithm", "ssl.secure.random.implementation", "ssl.client.auth",
    "ssl.engine.factory.class", "sasl.mechanism.inter.broker.protocol", "sasl.jaas.config",
    "sasl.enabled.mechanisms", "sasl.kerberos.service.name", "sasl.kerberos.kinit.cmd",
    "sasl.kerberos.ticket.renew.window.factor", "sasl.kerberos.ticket.renew.jitter",
    "sasl.kerberos.min.time.before.relogin", "sasl.kerberos.principal.to.local.rules",
    "sasl.login.refresh.window.factor", "sasl.login.refresh.window.jitter", "sasl.login.refresh.min.period.seconds",
    "sasl.login.refresh.buffer.seconds", "max.connections", "max.connection.creation.rate", "num.network.threads"})
_CLUSTER_LEVEL_LISTENER_CONFIGS = frozenset({"max.connections", "max.connection.creation.rate",
                                             "num.network.threads"})
# The broker properties that give topics their defaults (Kafka's DynamicLogConfig: the first synonym of each).
DYNAMIC_LOG_CONFIGS = frozenset({
    "log.segment.bytes", "log.roll.ms", "log.roll.jitter.ms", "log.index.size.max.bytes",
    "log.flush.interval.messages", "log.flush.interval.ms", "log.retention.bytes", "log.retention.ms",
    "message.max.bytes", "log.index.interval.bytes", "log.cleaner.delete.retention.ms",
    "log.cleaner.min.compaction.lag.ms", "log.cleaner.max.compaction.lag.ms", "log.segment.delete.delay.ms",
    "log.cleaner.min.cleanable.ratio", "log.cleanup.policy", "unclean.leader.election.enable",
    "min.insync.replicas", "compression.type", "compression.gzip.level", "compression.lz4.level",
    "compression.zstd.level", "log.preallocate", "log.message.timestamp.type",
    "log.message.timestamp.difference.max.ms", "log.message.timestamp.before.max.ms",
    "log.message.timestamp.after.max.ms", "log.message.downconversion.enable", "log.local.retention.ms",
    "log.local.retention.bytes"})
_OTHER_DYNAMIC_CONFIGS = frozenset({
    # the log cleaner, thread pools, metric reporters, connection limits, producer state, remote log
    "log.cleaner.threads", "log.cleaner.dedupe.buffer.size", "log.cleaner.io.buffer.load.factor",
    "log.cleaner.io.buffer.size", "log.cleaner.io.max.bytes.per.second", "log.cleaner.backoff.ms",
    "num.io.threads", "num.replica.fetchers", "num.recovery.threads.per.data.dir", "background.threads",
    "metric.reporters", "max.connections.per.ip", "max.connections.per.ip.overrides",
    "producer.id.expiration.ms", "transaction.partition.verification.enable",
    "remote.log.index.file.cache.total.size.bytes", "remote.fetch.max.wait.ms",
    "remote.log.manager.copy.max.bytes.per.second", "remote.log.manager.fetch.max.bytes.per.second",
    "remote.list.offsets.request.timeout.ms"})
ALL_DYNAMIC_CONFIGS = (_SSL_CONFIGS | _LISTENER_CONFIGS | DYNAMIC_LOG_CONFIGS | _OTHER_DYNAMIC_CONFIGS
                       | frozenset(BROKER_QUOTA_CONFIGS))
PER_BROKER_CONFIGS = (_SSL_CONFIGS | _LISTENER_CONFIGS) - _CLUSTER_LEVEL_LISTENER_CONFIGS
# Static broker configs Kafka knows beyond the ones this broker reads (a dynamic change of any is refused).
_OTHER_STATIC_CONFIGS = frozenset({
    "broker.id", "log.retention.minutes", "log.retention.hours", "log.roll.hours", "log.roll.jitter.hours",
    "log.flush.scheduler.interval.ms", "num.partitions", "default.replication.factor", "replica.fetch.max.bytes",
    "replica.fetch.wait.max.ms", "replication.quota.window.num", "replication.quota.window.size.seconds",
    "quota.window.num", "quota.window.size.seconds", "reserved.broker.max.id", "broker.id.generation.enable"})
STATIC_CONFIGS = (frozenset(BROKER_PROPERTIES) | _OTHER_STATIC_CONFIGS) - ALL_DYNAMIC_CONFIGS
_LONG_CONFIGS = frozenset({*BROKER_QUOTA_CONFIGS, "log.cleaner.dedupe.buffer.size",
                           "log.cleaner.backoff.ms", "remote.log.index.file.cache.total.size.bytes",
                           "remote.log.manager.copy.max.bytes.per.second",
                           "remote.log.manager.fetch.max.bytes.per.second"})
_INT_CONFIGS = frozenset({"log.cleaner.threads", "log.cleaner.io.buffer.size", "num.io.threads",
                          "num.replica.fetchers", "num.recovery.threads.per.data.dir", "background.threads",
                          "max.connections.per.ip", "max.connections", "max.connection.creation.rate",
                          "num.network.threads", "remote.fetch.max.wait.ms", "remote.list.offsets.request.timeout.ms"})
_AT_LEAST_ONE = frozenset({"log.cleaner.threads", "num.io.threads", "num.replica.fetchers",
                           "num.recovery.threads.per.data.dir", "background.threads", "num.network.threads"})


def _invalid_value(name: str, value: str, why: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_REQUEST, f"Invalid value {value} for configuration {name}: {why}")


def _check_value(name: str, value: str) -> None:
    if name in _LONG_CONFIGS or name in _INT_CONFIGS:
        kind, limit = ("LONG", 2**63 - 1) if name in _LONG_CONFIGS else ("INT", 2**31 - 1)
        try:
            number = int(value.strip())
        except ValueError:
            raise _invalid_value(name, value, f"Not a number of type {kind}") from None
        if not -limit - 1 <= number <= limit:
            raise _invalid_value(name, value, f"Not a number of type {kind}")
        minimum = 1 if name in _AT_LEAST_ONE else 0
        if number < minimum:
            raise _invalid_value(name, value, f"Value must be at least {minimum}")
    elif name in BROKER_PROPERTIES:
        try:
            _parse(name, BROKER_PROPERTIES[name][0], value)
        except ConfigError as exc:
            raise KafkaError(ErrorCode.INVALID_REQUEST, str(exc)) from None


def validate_dynamic_broker_configs(configs: Mapping[str, str], per_broker: bool) -> None:
    """Kafka's DynamicBrokerConfig.validateConfigs and value checks, for a BROKER resource's whole new set of
    dynamic configs: INVALID_REQUEST naming what cannot be set, or the first bad value."""
    static = sorted(name for name in configs if name in STATIC_CONFIGS)
    if static:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Cannot update these configs dynamically: {_set(static)}")
    unprefixed = sorted(name for name in configs if name in _SSL_CONFIGS)
    if unprefixed:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "These security configs can be dynamically updated only "
                                                    f"per-listener using the listener prefix: {_set(unprefixed)}")
    if not per_broker:
        per_broker_only = sorted(name for name in configs if name in PER_BROKER_CONFIGS)
        if per_broker_only:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Cannot update these configs at default cluster level, "
                                                        f"broker id must be specified: {_set(per_broker_only)}")
    for name, value in sorted(configs.items()):
        _check_value(name, value)
        if name in DYNAMIC_LOG_CONFIGS:
            try:
                topic_defaults_from_broker_props({name: value})
            except ValueError as exc:  # the message names the topic config: name the broker's
                raise _invalid_value(name, value, str(exc).partition(": ")[2] or str(exc)) from None


def _set(names: list[str]) -> str:
    return "Set(" + ", ".join(names) + ")"
