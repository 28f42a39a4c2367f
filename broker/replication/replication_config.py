"""The broker settings replication runs on, under Kafka's property names and defaults."""
from __future__ import annotations

from dataclasses import dataclass

from minikafka.broker.security.client_security import ClientChannelSecurity
from minikafka.config import BrokerConfig


@dataclass(frozen=True)
class ReplicationConfig:
    replica_lag_time_max_ms: int = 30_000
    num_replica_fetchers: int = 1
    replica_fetch_backoff_ms: int = 1000
    replica_fetch_max_bytes: int = 1_048_576  # per partition
    replica_fetch_response_max_bytes: int = 10_485_760
    replica_fetch_wait_max_ms: int = 500
    replica_fetch_min_bytes: int = 1
    replica_socket_timeout_ms: int = 30_000  # a follower's request to its leader gives up after this
    # How long an AlterPartition that could not reach the controller waits before it is sent again.
    alter_partition_retry_backoff_ms: int = 100
    # How followers' connections to their leaders (on the inter-broker listener) are secured; None: PLAINTEXT.
    inter_broker_security: ClientChannelSecurity | None = None

    @classmethod
    def from_broker_config(cls, config: BrokerConfig,
                           inter_broker_security: ClientChannelSecurity | None = None) -> ReplicationConfig:
        return cls(
            replica_lag_time_max_ms=config.get("replica.lag.time.max.ms"),
            num_replica_fetchers=max(1, config.get("num.replica.fetchers")),
            replica_fetch_backoff_ms=config.get("replica.fetch.backoff.ms"),
            replica_fetch_max_bytes=config.get("replica.fetch.max.bytes"),
            replica_fetch_response_max_bytes=config.get("replica.fetch.response.max.bytes"),
            replica_fetch_wait_max_ms=config.get("replica.fetch.wait.max.ms"),
            replica_fetch_min_bytes=config.get("replica.fetch.min.bytes"),
            replica_socket_timeout_ms=config.get("replica.socket.timeout.ms"),
            inter_broker_security=inter_broker_security,
        )
