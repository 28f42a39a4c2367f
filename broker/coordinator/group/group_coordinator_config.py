"""The group coordinator's settings, read once from the broker's Kafka properties.

The membership protocol, the offset manager and the group metadata manager each need a few of these; gathering
them in one value (Kafka's GroupCoordinatorConfig) keeps the broker configuration out of those modules and lets
tests build a coordinator without a broker.
"""
from __future__ import annotations

from dataclasses import dataclass

from minikafka.config import BrokerConfig, ConfigError

# The names Kafka's group.consumer.assignors takes for its built-in assignors: the short name or the class.
# Kafka's ConsumerGroupMigrationPolicy: which online conversions between a classic and a consumer group it permits.
MIGRATION_POLICIES = ("bidirectional", "upgrade", "downgrade", "disabled")
# The group types group.coordinator.rebalance.protocols may list (Kafka's Group.GroupType).
REBALANCE_PROTOCOLS = ("classic", "consumer", "share", "streams")

_ASSIGNOR_CLASSES = {"org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
                     "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range"}


@dataclass
class GroupCoordinatorConfig:
    num_partitions: int = 50
    offsets_retention_ms: int = 10080 * 60 * 1000
    offsets_retention_check_interval_ms: int = 600000
    offset_metadata_max_bytes: int = 4096
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    initial_rebalance_delay_ms: int = 3000
    max_size: int = 2147483647
    consumer_session_timeout_ms: int = 45000
    consumer_heartbeat_interval_ms: int = 5000
    consumer_max_size: int = 2147483647
    consumer_assignors: tuple[str, ...] = ("uniform", "range")
    consumer_migration_policy: str = "bidirectional"
    rebalance_protocols: frozenset[str] = frozenset(("classic", "consumer", "streams"))
    share_session_timeout_ms: int = 45000
    share_heartbeat_interval_ms: int = 5000
    share_max_size: int = 200
    share_initialize_retry_interval_ms: int = 30000

    @property
    def upgrade_enabled(self) -> bool:
        """Whether a non-empty classic group may become a consumer group (Kafka's isUpgradeEnabled)."""
        return self.consumer_migration_policy in ("bidirectional", "upgrade")

    @property
    def downgrade_enabled(self) -> bool:
        """Whether a consumer group left with only classic members may become a classic group again."""
        return self.consumer_migration_policy in ("bidirectional", "downgrade")

    @property
    def consumer_protocol_enabled(self) -> bool:
        """Whether group.coordinator.rebalance.protocols lets ConsumerGroupHeartbeat and ConsumerGroupDescribe be
        served (with group.version 1 finalized; Kafka's KafkaApis.isConsumerGroupProtocolEnabled)."""
        return "consumer" in self.rebalance_protocols

    @classmethod
    def from_broker_config(cls, config: BrokerConfig) -> GroupCoordinatorConfig:
        return cls(num_partitions=config.get("offsets.topic.num.partitions"),
                   offsets_retention_ms=config.get("offsets.retention.minutes") * 60 * 1000,
                   offsets_retention_check_interval_ms=config.get("offsets.retention.check.interval.ms"),
                   offset_metadata_max_bytes=config.get("offset.metadata.max.bytes"),
                   min_session_timeout_ms=config.get("group.min.session.timeout.ms"),
                   max_session_timeout_ms=config.get("group.max.session.timeout.ms"),
                   initial_rebalance_delay_ms=config.get("group.initial.rebalance.delay.ms"),
                   max_size=config.get("group.max.size"),
                   consumer_session_timeout_ms=config.get("group.consumer.session.timeout.ms"),
                   consumer_heartbeat_interval_ms=config.get("group.consumer.heartbeat.interval.ms"),
                   consumer_max_size=config.get("group.consumer.max.size"),
                   consumer_assignors=consumer_assignors(config),
                   consumer_migration_policy=consumer_migration_policy(config),
                   rebalance_protocols=rebalance_protocols(config),
                   share_session_timeout_ms=config.get("group.share.session.timeout.ms"),
                   share_heartbeat_interval_ms=config.get("group.share.heartbeat.interval.ms"),
                   share_max_size=share_max_size(config),
                   share_initialize_retry_interval_ms=config.get("group.share.initialize.retry.interval.ms"))


def consumer_migration_policy(config: BrokerConfig) -> str:
    """group.consumer.migration.policy, one of Kafka's four policies whatever its case (ConfigError otherwise)."""
    raw = config.get("group.consumer.migration.policy")
    policy = raw.strip().lower()
    if policy not in MIGRATION_POLICIES:
        raise ConfigError(f"Invalid value {raw} for configuration group.consumer.migration.policy: String must be "
                          f"one of (case insensitive): {', '.join(p.upper() for p in MIGRATION_POLICIES)}")
    return policy


def rebalance_protocols(config: BrokerConfig) -> frozenset[str]:
    """group.coordinator.rebalance.protocols as group types: a non-empty list of Kafka's lower-case names, classic
    among them (ConfigError otherwise, as Kafka's ConfigDef and KafkaConfig)."""
    raw = config.get("group.coordinator.rebalance.protocols")
    names = [n.strip() for n in raw.split(",") if n.strip()]
    if not names:
        raise ConfigError("Invalid value  for configuration group.coordinator.rebalance.protocols: Empty list "
                          "is not allowed")
    unknown = [n for n in names if n not in REBALANCE_PROTOCOLS]
    if unknown:
        raise ConfigError(f"Invalid value {unknown[0]} for configuration group.coordinator.rebalance.protocols: "
                          f"String must be one of: {', '.join(REBALANCE_PROTOCOLS)}")
    if "classic" not in names:
        raise ConfigError("Disabling the 'classic' protocol is not supported.")
    return frozenset(names)


def consumer_assignors(config: BrokerConfig) -> tuple[str, ...]:
    """group.consumer.assignors as assignor names, checked with the bounds Kafka's GroupCoordinatorConfig requires
    of the group.consumer.* timeouts (ConfigError otherwise)."""
    names = tuple(_ASSIGNOR_CLASSES.get(n.strip(), n.strip())
                  for n in config.get("group.consumer.assignors").split(",") if n.strip())
    unknown = [n for n in names if n not in ("uniform", "range")]
    if unknown or not names:
        raise ConfigError(f"Invalid value {config.get('group.consumer.assignors')!r} for configuration "
                          "group.consumer.assignors: the built-in assignors are uniform and range")
    session, heartbeat = config.get("group.consumer.session.timeout.ms"), config.get(
        "group.consumer.heartbeat.interval.ms")
    min_session, max_session = (config.get("group.consumer.min.session.timeout.ms"),
                                config.get("group.consumer.max.session.timeout.ms"))
    min_heartbeat, max_heartbeat = (config.get("group.consumer.min.heartbeat.interval.ms"),
                                    config.get("group.consumer.max.heartbeat.interval.ms"))
    for ok, message in (
            (min(session, heartbeat, min_session, max_session, min_heartbeat, max_heartbeat,
                 config.get("group.consumer.max.size")) >= 1, "group.consumer.* values must be at least 1"),
            (max_heartbeat >= min_heartbeat, "group.consumer.max.heartbeat.interval.ms must be greater than or "
                                             "equal to group.consumer.min.heartbeat.interval.ms"),
            (min_heartbeat <= heartbeat <= max_heartbeat, "group.consumer.heartbeat.interval.ms must be between "
                                                          "its min and max"),
            (max_session >= min_session, "group.consumer.max.session.timeout.ms must be greater than or equal to "
                                         "group.consumer.min.session.timeout.ms"),
            (min_session <= session <= max_session, "group.consumer.session.timeout.ms must be between its min "
                                                    "and max"),
            (heartbeat < session, "group.consumer.heartbeat.interval.ms must be less than "
                                  "group.consumer.session.timeout.ms")):
        if not ok:
            raise ConfigError(message)
    return names


def share_max_size(config: BrokerConfig) -> int:
    """group.share.max.size, checked with the bounds Kafka's GroupCoordinatorConfig and ShareGroupConfig require of
    it, of the share-partition limits and of the group.share.* timeouts (ConfigError otherwise)."""
    for name, low, high in (("group.share.max.size", 1, 1000), ("group.share.delivery.count.limit", 2, 10),
                            ("group.share.partition.max.record.locks", 100, 10000),
                            ("group.share.max.share.sessions", 1, None)):
        value = config.get(name)
        if value < low:
            raise ConfigError(f"Invalid value {value} for configuration {name}: Value must be at least {low}")
        if high is not None and value > high:
            raise ConfigError(f"Invalid value {value} for configuration {name}: Value must be no more than {high}")
    size = config.get("group.share.max.size")
    session, heartbeat = config.get("group.share.session.timeout.ms"), config.get("group.share.heartbeat.interval.ms")
    min_session, max_session = (config.get("group.share.min.session.timeout.ms"),
                                config.get("group.share.max.session.timeout.ms"))
    min_heartbeat, max_heartbeat = (config.get("group.share.min.heartbeat.interval.ms"),
                                    config.get("group.share.max.heartbeat.interval.ms"))
    for ok, message in (
            (min(session, heartbeat, min_session, max_session, min_heartbeat, max_heartbeat,
                 config.get("group.share.initialize.retry.interval.ms")) >= 1,
             "group.share.* values must be at least 1"),
            (max_heartbeat >= min_heartbeat, "group.share.max.heartbeat.interval.ms must be greater than or equal "
                                             "to group.share.min.heartbeat.interval.ms"),
            (min_heartbeat <= heartbeat <= max_heartbeat, "group.share.heartbeat.interval.ms must be greater than or "
                                                          "equal to group.share.min.heartbeat.interval.ms and less "
                                                          "than or equal to group.share.max.heartbeat.interval.ms"),
            (max_session >= min_session, "group.share.max.session.timeout.ms must be greater than or equal to "
                                         "group.share.min.session.timeout.ms"),
            (min_session <= session <= max_session, "group.share.session.timeout.ms must be greater than or equal "
                                                    "to group.share.min.session.timeout.ms and less than or equal to "
                                                    "group.share.max.session.timeout.ms"),
            (heartbeat < session, "group.share.heartbeat.interval.ms must be less than "
                                  "group.share.session.timeout.ms")):
        if not ok:
            raise ConfigError(message)
    return size
