"""The group coordinator's settings, read once from the broker's Kafka properties.

The membership protocol, the offset manager and the group metadata manager each need a few of these; gathering
them in one value (Kafka's GroupCoordinatorConfig) keeps the broker configuration out of those modules and lets
tests build a coordinator without a broker.
"""
from __future__ import annotations

from dataclasses import dataclass

from minikafka.config import BrokerConfig


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

    @classmethod
    def from_broker_config(cls, config: BrokerConfig) -> GroupCoordinatorConfig:
        return cls(num_partitions=config.get("offsets.topic.num.partitions"),
                   offsets_retention_ms=config.get("offsets.retention.minutes") * 60 * 1000,
                   offsets_retention_check_interval_ms=config.get("offsets.retention.check.interval.ms"),
                   offset_metadata_max_bytes=config.get("offset.metadata.max.bytes"),
                   min_session_timeout_ms=config.get("group.min.session.timeout.ms"),
                   max_session_timeout_ms=config.get("group.max.session.timeout.ms"),
                   initial_rebalance_delay_ms=config.get("group.initial.rebalance.delay.ms"),
                   max_size=config.get("group.max.size"))
