"""Which transactional ids this coordinator serves, and their state in `__transaction_state` (Kafka's
TransactionStateManager).

A transactional id lives on partition Utils.abs(hashCode) % transaction.state.log.num.partitions. When this broker
becomes leader of such a partition, the partition is loading (Kafka's loadingPartitions) under a coordinator epoch,
the partition's leader epoch: requests for its ids answer COORDINATOR_LOAD_IN_PROGRESS, which clients retry, while a
task of the coordinator replays the partition's records into a cache of TransactionMetadata (the last value of each
id; a tombstone removes it). The replay reads at most transaction.state.log.load.buffer.size bytes at a time and
yields to the event loop every few hundred records, so a large partition does not stall the broker's other work.
What it read takes effect all at once at its end, and only if the partition is still loading at the same coordinator
epoch (a resignation or a newer election meanwhile supersedes the load), so no request sees a partition half loaded.
When this broker stops leading the partition, its load or its cache entry goes and requests for those ids answer
NOT_COORDINATOR, so clients look their coordinator up again.

Every transition is written before it takes effect: the coordinator prepares it on the metadata (which makes it
pending), `append_transaction_to_log` appends the new value with acks=all and waits until the ISR has it (at most
the transaction's timeout, as Kafka's appendTransactionToLog; an expired id's tombstone at most
request.timeout.ms), and only then completes the transition, provided this broker still coordinates the id under
the same coordinator epoch. A failed write clears the pending state, except where the caller retries it.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

import trio

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

# How many records (and batches) a load replays between two yields to the event loop. Decoding a record takes tens
# of microseconds in Python, so a read of load.buffer.size bytes (5 MiB: tens of thousands of records) takes seconds:
# yielding only between reads would stall every other task of the broker that long; this way they wait milliseconds.
LOAD_RECORDS_PER_YIELD = 200


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
        # Partition -> the coordinator epoch it is being loaded at (Kafka's loadingPartitions): its ids answer
        # COORDINATOR_LOAD_IN_PROGRESS until that load installs its cache entry.
        self._loading: dict[int, int] = {}
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

    @property
    def loading_partitions(self) -> dict[int, int]:
        """The partitions being loaded, each with the coordinator epoch of its load (Kafka answers ListTransactions
        with COORDINATOR_LOAD_IN_PROGRESS while there is any)."""
        return dict(self._loading)

    def _check_loaded(self, partition: int) -> None:
        if partition in self._loading:
            raise KafkaError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                             f"the transactional ids of {self.transaction_log.topic}-{partition} are being loaded")

    # ---- the cache -----------------------------------------------------------------------------------------

    def get_transaction_state(self, transactional_id: str) -> CoordinatorEpochAndTxnMetadata | None:
        """The id's metadata, None if this coordinator has none; raises KafkaError COORDINATOR_NOT_AVAILABLE before
        the coordinator starts, COORDINATOR_LOAD_IN_PROGRESS while the id's partition is being loaded and
        NOT_COORDINATOR when this broker does not lead it."""
        if not self.active:
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "the transaction coordinator is not active")
        partition = self.partition_for(transactional_id)
        self._check_loaded(partition)
        entry = self._cache.get(partition)
        if entry is None:
            raise KafkaError(ErrorCode.NOT_COORDINATOR,
                             f"this broker is not the transaction coordinator of {transactional_id!r}")
        metadata = entry.metadata_per_transactional_id.get(transactional_id)
        return None if metadata is None else CoordinatorEpochAndTxnMetadata(entry.coordinator_epoch, metadata)

    def put_transaction_state_if_not_exists(self, metadata: TransactionMetadata) -> CoordinatorEpochAndTxnMetadata:
        """Cache a new transactional id's metadata, or return the one cached meanwhile (its partition may have
        been resigned, or elected again and loading, while the caller waited for a producer id)."""
        partition = self.partition_for(metadata.transactional_id)
        self._check_loaded(partition)
        entry = self._cache.get(partition)
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
        caller to write again (the markers' completion does). As in Kafka, a partition being loaded again (a newer
        election) answers COORDINATOR_LOAD_IN_PROGRESS, before the write and after it."""
        partition = self.partition_for(transactional_id)
        if partition in self._loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if self._current(transactional_id, coordinator_epoch) is None:
            return ErrorCode.NOT_COORDINATOR
        value_version = self.transaction_version().transaction_log_value_version
        record = (encode_key(transactional_id), encode_value(transit.to_log_value(), value_version))
        error = self.transaction_log.append(partition, [record], self.clock_ms())
        if error == ErrorCode.NONE:
            error = await self.transaction_log.wait_replicated(partition, transit.txn_timeout_ms)
        metadata = self._current(transactional_id, coordinator_epoch)
        if error == ErrorCode.NONE:
            if metadata is None:
                log.info("transactional id %r moved to another coordinator while its %s was written", transactional_id,
                         transit.txn_state.state_name)
                return (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if partition in self._loading
                        else ErrorCode.NOT_COORDINATOR)
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

    def add_loading_partition(self, partition: int, coordinator_epoch: int) -> bool:
        """This broker leads `partition` from `coordinator_epoch` on: its ids answer COORDINATOR_LOAD_IN_PROGRESS
        until `load_transactions_for_partition` at that epoch installs them; returns True. What an earlier leadership
        cached goes now, so a write of it still in flight finds its coordinator epoch gone. A partition without a
        single batch (`__transaction_state` just created) has nothing to load: it is served at once, so the request
        that created the topic goes on without a retry; returns False."""
        if self._cache.pop(partition, None) is not None:
            log.info("dropped the transactional ids of %s-%d loaded at an earlier coordinator epoch",
                     self.transaction_log.topic, partition)
        if self.transaction_log.is_empty(partition):
            self._loading.pop(partition, None)
            self._cache[partition] = TxnMetadataCacheEntry(coordinator_epoch)
            log.debug("%s-%d is empty: served at coordinator epoch %d", self.transaction_log.topic, partition,
                      coordinator_epoch)
            return False
        self._loading[partition] = coordinator_epoch
        return True

    async def load_transactions_for_partition(self, partition: int,
                                              coordinator_epoch: int) -> list[TransactionMetadata] | None:
        """Replay `partition` in reads of at most transaction.state.log.load.buffer.size bytes, yielding to the
        event loop every LOAD_RECORDS_PER_YIELD records, then install what was read under `coordinator_epoch`,
        provided the partition is still loading at that epoch. Returns the transactions that were prepared to commit
        or abort, whose markers the new coordinator must (re)send; None when a resignation or a newer election
        superseded the load."""
        started = time.monotonic()
        loaded: dict[str, TransactionMetadata] = {}
        records = 0
        since_yield = 0
        batches = self.transaction_log.replay_batches(partition, self.config.load_buffer_size)
        try:
            while self._loading.get(partition) == coordinator_epoch:  # checked before each batch, as Kafka does
                batch = next(batches, None)
                if batch is None:
                    break
                for offset, key, value in batch.records:
                    self._replay(loaded, partition, offset, key, value)
                records += len(batch.records)
                since_yield += len(batch.records) + 1
                if since_yield >= LOAD_RECORDS_PER_YIELD:
                    since_yield = 0
                    await trio.lowlevel.checkpoint()
        except (KafkaError, OSError) as exc:  # as Kafka: what was read is installed, and the error logged
            log.error("loading %s-%d at coordinator epoch %d stopped after %d records: %s", self.transaction_log.topic,
                      partition, coordinator_epoch, records, exc)
        if self._loading.get(partition) != coordinator_epoch:
            log.info("the load of %s-%d at coordinator epoch %d was superseded after %d records",
                     self.transaction_log.topic, partition, coordinator_epoch, records)
            return None
        del self._loading[partition]
        self._cache[partition] = TxnMetadataCacheEntry(coordinator_epoch, loaded)
        log.log(logging.INFO if records else logging.DEBUG,  # a broker starts with dozens of empty partitions
                "loaded %d transactional ids from %d records of %s-%d at coordinator epoch %d in %.0f ms", len(loaded),
                records, self.transaction_log.topic, partition, coordinator_epoch, 1000 * (time.monotonic() - started))
        return [m for m in loaded.values()
                if m.state in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT)]

    def _replay(self, loaded: dict[str, TransactionMetadata], partition: int, offset: int, key: bytes,
                value: bytes | None) -> None:
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

    def remove_transactions_for_partition(self, partition: int) -> None:
        """This broker no longer leads `partition`: a load of it installs nothing, and its ids go."""
        if self._loading.pop(partition, None) is not None:
            log.info("stopped loading the transactional ids of %s-%d", self.transaction_log.topic, partition)
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
