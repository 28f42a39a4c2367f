"""Which transactional ids this coordinator serves, and their state in `__transaction_state` (Kafka's
TransactionStateManager).

A transactional id lives on partition Utils.abs(hashCode) % transaction.state.log.num.partitions. When this broker
becomes leader of such a partition it replays the partition's records into a cache of TransactionMetadata (the last
value of each id; a tombstone removes it) under a coordinator epoch, the partition's leader epoch; when it stops
leading it, the cache entry goes and requests for those ids answer NOT_COORDINATOR, so clients look their
coordinator up again. The load runs on the event loop in one go, so no request ever sees a partition half loaded.

Every transition is written before it takes effect: the coordinator prepares it on the metadata (which makes it
pending), `append_transaction_to_log` appends the new value with acks=all and waits until the ISR has it (at most
request.timeout.ms), and only then completes the transition, provided this broker still coordinates the id under
the same coordinator epoch. A failed write clears the pending state, except where the caller retries it.
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

from minikafka.broker.coordinator.coordinator_log import CoordinatorLog, partition_for
from minikafka.broker.coordinator.transaction.transaction_config import TransactionConfig
from minikafka.broker.coordinator.transaction.transaction_metadata import (
    IllegalStateError,
    TransactionMetadata,
    TransactionVersion,
    TxnTransitMetadata,
)
from minikafka.broker.coordinator.transaction.transaction_state import TransactionState
from minikafka.protocol.coordinator_records import (
    TransactionLogRecordError,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from minikafka.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger("minikafka.transaction_state_manager")


class CoordinatorEpochAndTxnMetadata(NamedTuple):
    coordinator_epoch: int
    metadata: TransactionMetadata


class TransactionalIdAndProducerIdEpoch(NamedTuple):
    transactional_id: str
    producer_id: int
    producer_epoch: int


@dataclass
class TxnMetadataCacheEntry:
    """The transactional ids of one partition this broker leads, under the coordinator epoch it was loaded at."""

    coordinator_epoch: int
    metadata_per_transactional_id: dict[str, TransactionMetadata] = field(default_factory=dict)


class TransactionStateManager:
    def __init__(self, config: TransactionConfig, transaction_log: CoordinatorLog, clock_ms: Callable[[], int],
                 transaction_version: Callable[[], TransactionVersion]) -> None:
        self.config = config
        self.transaction_log = transaction_log
        self.clock_ms = clock_ms
        # The cluster's finalized transaction.version: which log value version to write.
        self.transaction_version = transaction_version
        self._cache: dict[int, TxnMetadataCacheEntry] = {}
        # False until the coordinator starts and after shutdown: every transaction API then answers
        # COORDINATOR_NOT_AVAILABLE.
        self.active = False

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.config.num_partitions)

    def validate_transaction_timeout_ms(self, timeout_ms: int) -> bool:
        return 0 < timeout_ms <= self.config.max_timeout_ms

    @property
    def owned_partitions(self) -> set[int]:
        return set(self._cache)

    # ---- the cache -----------------------------------------------------------------------------------------

    def get_transaction_state(self, transactional_id: str) -> CoordinatorEpochAndTxnMetadata | None:
        """The id's metadata, None if this coordinator has none; raises KafkaError COORDINATOR_NOT_AVAILABLE before
        the coordinator starts and NOT_COORDINATOR when this broker does not lead the id's partition."""
        if not self.active:
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "the transaction coordinator is not active")
        entry = self._cache.get(self.partition_for(transactional_id))
        if entry is None:
            raise KafkaError(ErrorCode.NOT_COORDINATOR,
                             f"this broker is not the transaction coordinator of {transactional_id!r}")
        metadata = entry.metadata_per_transactional_id.get(transactional_id)
        return None if metadata is None else CoordinatorEpochAndTxnMetadata(entry.coordinator_epoch, metadata)

    def put_transaction_state_if_not_exists(self, metadata: TransactionMetadata) -> CoordinatorEpochAndTxnMetadata:
        """Cache a new transactional id's metadata, or return the one cached meanwhile."""
        entry = self._cache.get(self.partition_for(metadata.transactional_id))
        if entry is None:
            raise KafkaError(ErrorCode.NOT_COORDINATOR,
                             f"this broker is not the transaction coordinator of {metadata.transactional_id!r}")
        existing = entry.metadata_per_transactional_id.setdefault(metadata.transactional_id, metadata)
        return CoordinatorEpochAndTxnMetadata(entry.coordinator_epoch, existing)

    def all_transactions(self) -> list[TransactionMetadata]:
        """Every transactional id this coordinator serves (ListTransactions, inspection)."""
        return [m for entry in self._cache.values() for m in entry.metadata_per_transactional_id.values()]

    def _current(self, transactional_id: str, coordinator_epoch: int) -> TransactionMetadata | None:
        entry = self._cache.get(self.partition_for(transactional_id))
        if entry is None or entry.coordinator_epoch != coordinator_epoch:
            return None
        return entry.metadata_per_transactional_id.get(transactional_id)

    # ---- writing -------------------------------------------------------------------------------------------

    async def append_transaction_to_log(self, transactional_id: str, coordinator_epoch: int,
                                        transit: TxnTransitMetadata, *, retry_on_error: bool = False) -> ErrorCode:
        """Write `transit` for the id, and complete its transition once the ISR has it. Returns NONE or the error
        the client gets; with `retry_on_error` a COORDINATOR_NOT_AVAILABLE leaves the transition pending for the
        caller to write again (the markers' completion does)."""
        if self._current(transactional_id, coordinator_epoch) is None:
            return ErrorCode.NOT_COORDINATOR
        partition = self.partition_for(transactional_id)
        value_version = self.transaction_version().transaction_log_value_version
        record = (encode_key(transactional_id), encode_value(transit.to_log_value(), value_version))
        error = self.transaction_log.append(partition, [record], self.clock_ms())
        if error == ErrorCode.NONE:
            error = await self.transaction_log.wait_replicated(partition)
        metadata = self._current(transactional_id, coordinator_epoch)
        if error == ErrorCode.NONE:
            if metadata is None:
                log.info("transactional id %r moved to another coordinator while its %s was written", transactional_id,
                         transit.txn_state.state_name)
                return ErrorCode.NOT_COORDINATOR
            try:
                metadata.complete_transition_to(transit)
            except IllegalStateError as exc:
                log.error("completing the transition of %r failed: %s", transactional_id, exc)
                metadata.pending_state = None
                return exc.code
            return ErrorCode.NONE
        log.info("writing %s of transactional id %r failed: %s", transit.txn_state.state_name, transactional_id,
                 error.name)
        if metadata is not None and not (retry_on_error and error == ErrorCode.COORDINATOR_NOT_AVAILABLE):
            metadata.pending_state = None
        return error

    # ---- loading and unloading -----------------------------------------------------------------------------

    def load_transactions_for_partition(self, partition: int, coordinator_epoch: int) -> list[TransactionMetadata]:
        """Replay `partition` into the cache under `coordinator_epoch`; returns the transactions that were
        prepared to commit or abort, whose markers the new coordinator must (re)send."""
        loaded: dict[str, TransactionMetadata] = {}
        for offset, key, value in self.transaction_log.replay_records(partition):
            try:
                transactional_id = decode_key(key)
                decoded = decode_value(value)
                if decoded is None:
                    loaded.pop(transactional_id, None)
                else:
                    loaded[transactional_id] = TransactionMetadata.from_log_value(transactional_id, decoded)
            except TransactionLogRecordError as exc:
                log.error("skipping unreadable record at %s-%d offset %d: %s", self.transaction_log.topic, partition,
                          offset, exc)
        self._cache[partition] = TxnMetadataCacheEntry(coordinator_epoch, loaded)
        log.info("loaded %d transactional ids of %s-%d at coordinator epoch %d", len(loaded),
                 self.transaction_log.topic, partition, coordinator_epoch)
        return [m for m in loaded.values()
                if m.state in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT)]

    def remove_transactions_for_partition(self, partition: int) -> None:
        if self._cache.pop(partition, None) is not None:
            log.info("unloaded the transactional ids of %s-%d", self.transaction_log.topic, partition)

    # ---- timers --------------------------------------------------------------------------------------------

    def timed_out_transactions(self) -> list[TransactionalIdAndProducerIdEpoch]:
        """Ongoing transactions past their timeout, not already being ended: the coordinator aborts them."""
        now = self.clock_ms()
        return [TransactionalIdAndProducerIdEpoch(m.transactional_id, m.producer_id, m.producer_epoch)
                for m in self.all_transactions()
                if m.state is TransactionState.ONGOING and not m.pending_transition_in_progress
                and m.txn_start_timestamp + m.txn_timeout_ms < now]

    async def remove_expired_transactional_ids(self) -> int:
        """Write a tombstone for each id with nothing in flight and no update for transactional.id.expiration.ms,
        and drop it from the cache; returns how many went."""
        now = self.clock_ms()
        removed = 0
        for partition, entry in list(self._cache.items()):
            for metadata in list(entry.metadata_per_transactional_id.values()):
                if (not metadata.state.is_expiration_allowed or metadata.pending_transition_in_progress
                        or metadata.txn_last_update_timestamp + self.config.transactional_id_expiration_ms > now):
                    continue
                metadata.prepare_dead()
                error = self.transaction_log.append(partition, [(encode_key(metadata.transactional_id), None)], now)
                if error == ErrorCode.NONE:
                    error = await self.transaction_log.wait_replicated(partition)
                current = self._current(metadata.transactional_id, entry.coordinator_epoch)
                if current is not metadata:
                    continue
                metadata.pending_state = None
                if error == ErrorCode.NONE:
                    del entry.metadata_per_transactional_id[metadata.transactional_id]
                    removed += 1
                    log.info("transactional id %r expired", metadata.transactional_id)
        return removed
