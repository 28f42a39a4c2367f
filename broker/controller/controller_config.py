"""The controller's settings (Kafka's QuorumController and ReplicationControlManager options), typed and apart from
the properties they come from, so the controller is built the same way from a node's config and from a test."""
from __future__ import annotations

from dataclasses import dataclass, field

from minikafka.broker.coordinator.group.group_config import GroupConfigDefaults
from minikafka.config import BrokerConfig, ConfigError
from minikafka.storage.log_config import LogConfig, topic_defaults_from_broker_props


@dataclass(frozen=True)
class QuorumControllerConfig:
    node_id: int = 1
    cluster_id: str | None = None  # None: the metadata log dir's meta.properties holds it (generated once)
    num_partitions: int = 1
    default_replication_factor: int = 1
    delete_topic_enable: bool = True
    broker_session_timeout_ms: int = 9000
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_check_interval_seconds: int = 300
    leader_imbalance_per_broker_percentage: int = 10
    # Topic config defaults from the node's properties (log.retention.hours, min.insync.replicas,
    # unclean.leader.election.enable, ...): what CreateTopics validates against and answers.
    log_defaults: LogConfig = field(default_factory=LogConfig)
    # What a group's config overrides are validated against (its defaults and the group.* bounds).
    group_config_defaults: GroupConfigDefaults = field(
        default_factory=lambda: GroupConfigDefaults.from_broker_config(BrokerConfig({})))

    @classmethod
    def from_broker_config(cls, config: BrokerConfig) -> QuorumControllerConfig:
        try:
            log_defaults = topic_defaults_from_broker_props(config.props)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        return cls(
            node_id=config.node_id,
            cluster_id=config.get("cluster.id") or None,
            num_partitions=config.get("num.partitions"),
            default_replication_factor=config.get("default.replication.factor"),
            delete_topic_enable=config.get("delete.topic.enable"),
            broker_session_timeout_ms=config.get("broker.session.timeout.ms"),
            auto_leader_rebalance_enable=config.get("auto.leader.rebalance.enable"),
            leader_imbalance_check_interval_seconds=config.get("leader.imbalance.check.interval.seconds"),
            leader_imbalance_per_broker_percentage=config.get("leader.imbalance.per.broker.percentage"),
            log_defaults=log_defaults,
            group_config_defaults=GroupConfigDefaults.from_broker_config(config),
        )
