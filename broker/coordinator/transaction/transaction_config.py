"""The transaction coordinator's settings, read once from the broker's Kafka properties (Kafka's TransactionConfig
and TransactionStateManagerConfig), so the coordinator's modules and their tests need no broker configuration."""
from __future__ import annotations

from dataclasses import dataclass

from minikafka.config import BrokerConfig


@dataclass
class TransactionConfig:
    num_partitions: int = 50  # transaction.state.log.num.partitions
    max_timeout_ms: int = 900000  # transaction.max.timeout.ms
    transactional_id_expiration_ms: int = 604800000  # transactional.id.expiration.ms
    abort_timed_out_transactions_interval_ms: int = 10000
    remove_expired_transactional_ids_interval_ms: int = 3600000
    request_timeout_ms: int = 30000  # request.timeout.ms: a state write's and a marker request's wait
    partition_verification_enable: bool = True  # transaction.partition.verification.enable (KIP-890)
    load_buffer_size: int = 5242880  # transaction.state.log.load.buffer.size: one read of a partition's load

    @classmethod
    def from_broker_config(cls, config: BrokerConfig) -> TransactionConfig:
        return cls(
            num_partitions=config.get("transaction.state.log.num.partitions"),
            max_timeout_ms=config.get("transaction.max.timeout.ms"),
            transactional_id_expiration_ms=config.get("transactional.id.expiration.ms"),
            abort_timed_out_transactions_interval_ms=config.get(
                "transaction.abort.timed.out.transaction.cleanup.interval.ms"),
            remove_expired_transactional_ids_interval_ms=config.get(
                "transaction.remove.expired.transaction.cleanup.interval.ms"),
            request_timeout_ms=config.get("request.timeout.ms"),
            partition_verification_enable=config.get("transaction.partition.verification.enable"),
            load_buffer_size=max(1, config.get("transaction.state.log.load.buffer.size")),
        )
