"""One transactional id's transaction state and its transitions (Kafka's TransactionMetadata and TxnTransitMetadata).

Every change goes in two steps, so memory never runs ahead of the log: a `prepare_*` method checks the move is legal,
marks the target state pending (which blocks any other move) and returns a TxnTransitMetadata, the state to be;
the coordinator appends that to `__transaction_state` and, once the append is replicated, `complete_transition_to`
checks the transit against the state it started from and makes it current. A failed append leaves the pending
state for the coordinator to clear. Kafka guards each metadata with a lock; here the broker's one event loop owns it.

Epochs are Java shorts, as on the wire: a producer may use epochs up to Short.MaxValue - 1, so that the coordinator
can always fence it with one more; past that the transactional id gets a new producer id.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum
from typing import NoReturn

from minikafka.protocol.coordinator_records import PartitionsSchema, TransactionLogRecordError, TransactionLogValue
from minikafka.protocol.errors import ErrorCode, FixedCodeError
from minikafka.protocol.record_batch import NO_PRODUCER_ID
from minikafka.storage.producer_state import NO_PRODUCER_EPOCH

from .transaction_state import TransactionState

TopicPartition = tuple[str, int]

MAX_PRODUCER_EPOCH = 0x7FFF
"""Short.MaxValue: the epoch only the coordinator's fence may reach."""


class IllegalStateError(FixedCodeError):
    """Kafka's IllegalStateException and IllegalArgumentException here: a transition the state machine forbids,
    which a correct coordinator never asks for; the client gets UNKNOWN_SERVER_ERROR, as from Kafka."""

    CODE = ErrorCode.UNKNOWN_SERVER_ERROR


class ProducerFencedError(FixedCodeError):
    """An InitProducerId whose expected epoch is neither the current nor the last one: another producer has
    taken the transactional id over."""

    CODE = ErrorCode.PRODUCER_FENCED


class TransactionVersion(IntEnum):
    """The levels of the transaction.version feature (Kafka's TransactionVersion): the transaction protocol a
    client speaks, and the one the cluster writes the log in."""

    TV_0 = 0
    TV_1 = 1
    TV_2 = 2

    @property
    def supports_epoch_bump(self) -> bool:
        """Transactions version 2 (KIP-890): every commit and abort bumps the producer epoch."""
        return self >= TransactionVersion.TV_2

    @property
    def transaction_log_value_version(self) -> int:
        """The transaction log value version written at this feature level: 1 (flexible) from level 1."""
        return 1 if self >= TransactionVersion.TV_1 else 0


def is_epoch_exhausted(producer_epoch: int) -> bool:
    """True when a producer may not be given a higher epoch: the next one is the coordinator's to fence with."""
    return producer_epoch >= MAX_PRODUCER_EPOCH - 1


def _short_increment(epoch: int) -> int:
    """epoch + 1 as a Java short, wrapping past Short.MaxValue as Kafka's arithmetic does."""
    return ((epoch + 1 + 0x8000) & 0xFFFF) - 0x8000


@dataclass(frozen=True)
class TxnTransitMetadata:
    """The state a transaction is moving to: what the coordinator logs, then makes current."""

    producer_id: int
    prev_producer_id: int
    next_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    txn_state: TransactionState
    topic_partitions: frozenset[TopicPartition]
    txn_start_timestamp: int
    txn_last_update_timestamp: int
    client_transaction_version: TransactionVersion

    def to_log_value(self) -> TransactionLogValue:
        """The transaction log value of this state, with what Kafka's TransactionLog writes: an Empty transaction
        has null partitions, and the previous and next producer ids are left at their defaults, as Kafka leaves
        them (so a coordinator that loads the log starts without them)."""
        if self.txn_state is TransactionState.EMPTY:
            if self.topic_partitions:
                raise IllegalStateError(f"an Empty transaction has no partitions, but {self} has")
            partitions = None
        else:
            by_topic: dict[str, list[int]] = {}
            for topic, partition in sorted(self.topic_partitions):
                by_topic.setdefault(topic, []).append(partition)
            partitions = tuple(PartitionsSchema(topic, tuple(ids)) for topic, ids in by_topic.items())
        return TransactionLogValue(
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            transaction_timeout_ms=self.txn_timeout_ms,
            transaction_status=self.txn_state.id,
            transaction_partitions=partitions,
            transaction_last_update_timestamp_ms=self.txn_last_update_timestamp,
            transaction_start_timestamp_ms=self.txn_start_timestamp,
            client_transaction_version=int(self.client_transaction_version),
        )


@dataclass(kw_only=True)
class TransactionMetadata:
    """A transactional id's producer id and epochs, and its transaction: state, partitions, timeout, timestamps.

    `prev_producer_id` is the producer id before the last transition that changed it; `next_producer_id` the one a
    transactions version 2 commit or abort moves to when the epochs of the current one run out. `last_producer_epoch`
    is the epoch before the last bump, so that a producer retrying a bump that succeeded is not fenced by it.
    `pending_state` is the state of a transition prepared and not yet completed; `has_failed_epoch_fence` records a
    fence whose append failed, so that the next fence does not bump the epoch again.
    """

    transactional_id: str
    producer_id: int
    prev_producer_id: int
    next_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState
    topic_partitions: set[TopicPartition]
    txn_start_timestamp: int = -1
    txn_last_update_timestamp: int
    client_transaction_version: TransactionVersion
    pending_state: TransactionState | None = None
    has_failed_epoch_fence: bool = False

    @classmethod
    def from_log_value(cls, transactional_id: str, value: TransactionLogValue) -> TransactionMetadata:
        """The metadata a coordinator loads from `transactional_id`'s latest log value, as Kafka's TransactionLog
        reads it: the last epoch is not logged, and an Empty transaction's partitions are ignored."""
        try:
            state = TransactionState.from_id(value.transaction_status)
            client_transaction_version = TransactionVersion(value.client_transaction_version)
        except ValueError as exc:
            raise TransactionLogRecordError(f"transaction log value of {transactional_id!r}: {exc}") from None
        partitions: set[TopicPartition] = set()
        if state is not TransactionState.EMPTY:
            if value.transaction_partitions is None:
                raise TransactionLogRecordError(
                    f"transaction log value of {transactional_id!r} in state {state.state_name} has null partitions")
            partitions = {(p.topic, partition) for p in value.transaction_partitions for partition in p.partition_ids}
        return cls(
            transactional_id=transactional_id,
            producer_id=value.producer_id,
            prev_producer_id=value.previous_producer_id,
            next_producer_id=value.next_producer_id,
            producer_epoch=value.producer_epoch,
            last_producer_epoch=NO_PRODUCER_EPOCH,
            txn_timeout_ms=value.transaction_timeout_ms,
            state=state,
            topic_partitions=partitions,
            txn_start_timestamp=value.transaction_start_timestamp_ms,
            txn_last_update_timestamp=value.transaction_last_update_timestamp_ms,
            client_transaction_version=client_transaction_version,
        )

    @property
    def pending_transition_in_progress(self) -> bool:
        """True between a prepare and its completion (or the coordinator clearing it after a failed append)."""
        return self.pending_state is not None

    @property
    def is_producer_epoch_exhausted(self) -> bool:
        """True when the producer id has no epoch left to give a producer, so the next one needs a new id."""
        return is_epoch_exhausted(self.producer_epoch)

    def remove_partition(self, topic_partition: TopicPartition) -> None:
        """Forget a partition whose transaction marker was written, while the transaction completes."""
        if self.state not in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT):
            raise IllegalStateError(
                f"transactional id {self.transactional_id!r} in state {self.state.state_name} has no transaction "
                f"markers to write, yet {topic_partition} had one written")
        self.topic_partitions.discard(topic_partition)

    def prepare_no_transit(self) -> TxnTransitMetadata:
        """The current state as a transit, without preparing any transition (nothing becomes pending)."""
        return TxnTransitMetadata(
            producer_id=self.producer_id,
            prev_producer_id=self.prev_producer_id,
            next_producer_id=self.next_producer_id,
            producer_epoch=self.producer_epoch,
            last_producer_epoch=self.last_producer_epoch,
            txn_timeout_ms=self.txn_timeout_ms,
            txn_state=self.state,
            topic_partitions=frozenset(self.topic_partitions),
            txn_start_timestamp=self.txn_start_timestamp,
            txn_last_update_timestamp=self.txn_last_update_timestamp,
            client_transaction_version=self.client_transaction_version,
        )

    def prepare_fence_producer_epoch(self) -> TxnTransitMetadata:
        """Fence the producer of an ongoing transaction (which timed out, or whose transactional id a new producer
        initialized) with a bumped epoch, before aborting its transaction.

        The bumped epoch is never returned to a client; if the append of an earlier fence failed, that fence's bump
        is reused instead of bumping again.
        """
        if self.producer_epoch == MAX_PRODUCER_EPOCH:
            raise IllegalStateError(
                f"cannot fence transactional id {self.transactional_id!r}: its producer epoch is already "
                f"{MAX_PRODUCER_EPOCH}, and one more would overflow")
        bumped_epoch = self.producer_epoch if self.has_failed_epoch_fence else _short_increment(self.producer_epoch)
        return self._prepare_transition_to(TransactionState.PREPARE_EPOCH_FENCE, producer_epoch=bumped_epoch,
                                           last_producer_epoch=NO_PRODUCER_EPOCH)

    def prepare_increment_producer_epoch(self, new_txn_timeout_ms: int, expected_producer_epoch: int | None,
                                         now_ms: int) -> TxnTransitMetadata:
        """InitProducerId on a transactional id with nothing in flight: a bumped epoch (KIP-360 rules when the
        producer says which epoch it expects).

        With no expected epoch, a new producer: bump, and forget the last epoch. Expecting the current epoch (or
        there being none yet): the producer recovers from an error; bump, and remember the current epoch as the
        last. Expecting the last epoch: a retry of a bump that succeeded; keep both. Anything else: the producer
        was fenced (ProducerFencedError).
        """
        if self.is_producer_epoch_exhausted:
            raise IllegalStateError(f"producer id {self.producer_id} has no producer epoch left to allocate")
        bumped_epoch = _short_increment(self.producer_epoch)
        if expected_producer_epoch is None:
            producer_epoch, last_producer_epoch = bumped_epoch, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_producer_epoch == self.producer_epoch:
            producer_epoch, last_producer_epoch = bumped_epoch, self.producer_epoch
        elif expected_producer_epoch == self.last_producer_epoch:
            producer_epoch, last_producer_epoch = self.producer_epoch, self.last_producer_epoch
        else:
            raise ProducerFencedError(
                f"expected producer epoch {expected_producer_epoch} of transactional id {self.transactional_id!r} "
                f"is neither its current epoch {self.producer_epoch} nor its last {self.last_producer_epoch}")
        return self._prepare_transition_to(
            TransactionState.EMPTY, producer_epoch=producer_epoch, last_producer_epoch=last_producer_epoch,
            txn_timeout_ms=new_txn_timeout_ms, topic_partitions=frozenset(), txn_start_timestamp=-1,
            txn_last_update_timestamp=now_ms)

    def prepare_producer_id_rotation(self, new_producer_id: int, new_txn_timeout_ms: int, now_ms: int,
                                     record_last_epoch: bool) -> TxnTransitMetadata:
        """InitProducerId when the epochs of the producer id are exhausted: a new producer id at epoch 0.

        `record_last_epoch` (the producer said which epoch it expects) keeps the old epoch as the last one, so a
        retry of this InitProducerId is recognized rather than fenced.
        """
        if self.state in (TransactionState.ONGOING, TransactionState.PREPARE_ABORT, TransactionState.PREPARE_COMMIT):
            raise IllegalStateError(
                f"cannot rotate the producer id of transactional id {self.transactional_id!r} while its transaction "
                f"is {self.state.state_name}")
        return self._prepare_transition_to(
            TransactionState.EMPTY, producer_id=new_producer_id, producer_epoch=0,
            last_producer_epoch=self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
            txn_timeout_ms=new_txn_timeout_ms, topic_partitions=frozenset(), txn_start_timestamp=-1,
            txn_last_update_timestamp=now_ms)

    def prepare_add_partitions(self, added_topic_partitions: Iterable[TopicPartition], now_ms: int,
                               client_transaction_version: TransactionVersion) -> TxnTransitMetadata:
        """Partitions join the transaction (AddPartitionsToTxn, AddOffsetsToTxn, or a transactions version 2
        produce); the first ones start it, which starts its timeout."""
        ended = self.state in (TransactionState.EMPTY, TransactionState.COMPLETE_ABORT,
                               TransactionState.COMPLETE_COMMIT)
        return self._prepare_transition_to(
            TransactionState.ONGOING, topic_partitions=frozenset(self.topic_partitions.union(added_topic_partitions)),
            txn_start_timestamp=now_ms if ended else self.txn_start_timestamp, txn_last_update_timestamp=now_ms,
            client_transaction_version=client_transaction_version)

    def prepare_abort_or_commit(self, new_state: TransactionState, client_transaction_version: TransactionVersion,
                                next_producer_id: int, now_ms: int, no_partition_added: bool) -> TxnTransitMetadata:
        """EndTxn, or the coordinator's abort of a fenced transaction: PrepareCommit or PrepareAbort.

        With transactions version 2 the epoch is bumped now (the bumped one goes back to the client), and
        `next_producer_id` is the producer id to move to when that bump exhausted the current one
        (NO_PRODUCER_ID otherwise). `no_partition_added` is an abort of an empty transaction, allowed from
        version 2, whose start time is taken to be now.
        """
        if client_transaction_version.supports_epoch_bump:
            producer_epoch, last_producer_epoch = _short_increment(self.producer_epoch), self.producer_epoch
        else:
            producer_epoch, last_producer_epoch = self.producer_epoch, self.last_producer_epoch
        return self._prepare_transition_to(
            new_state, next_producer_id=next_producer_id, producer_epoch=producer_epoch,
            last_producer_epoch=last_producer_epoch,
            txn_start_timestamp=now_ms if no_partition_added else self.txn_start_timestamp,
            txn_last_update_timestamp=now_ms, client_transaction_version=client_transaction_version)

    def prepare_complete(self, now_ms: int) -> TxnTransitMetadata:
        """The markers are written: CompleteCommit or CompleteAbort, with no partitions left.

        When a transactions version 2 bump exhausted the producer id, the transactional id moves to the next
        producer id at epoch 0, and keeps the exhausted epoch as the last one the client saw.
        """
        # The PrepareCommit/PrepareAbort was logged, so any fence before it was too.
        self.has_failed_epoch_fence = False
        new_state = (TransactionState.COMPLETE_COMMIT if self.state is TransactionState.PREPARE_COMMIT
                     else TransactionState.COMPLETE_ABORT)
        if self.client_transaction_version.supports_epoch_bump and self.next_producer_id != NO_PRODUCER_ID:
            producer_id, producer_epoch = self.next_producer_id, 0
        else:
            producer_id, producer_epoch = self.producer_id, self.producer_epoch
        return self._prepare_transition_to(
            new_state, producer_id=producer_id, next_producer_id=NO_PRODUCER_ID, producer_epoch=producer_epoch,
            topic_partitions=frozenset(), txn_last_update_timestamp=now_ms)

    def prepare_dead(self) -> TxnTransitMetadata:
        """The transactional id expired: its tombstone is written and it leaves the cache, never to be completed."""
        return self._prepare_transition_to(TransactionState.DEAD, topic_partitions=frozenset())

    def complete_transition_to(self, transit: TxnTransitMetadata) -> None:
        """Make the prepared transit current, once its log append is replicated, after checking it is the
        transition that was prepared from this state."""
        to_state = self.pending_state
        if to_state is None:
            raise IllegalStateError(
                f"transactional id {self.transactional_id!r} completes a transition to {transit} without one pending")
        if to_state is not transit.txn_state:
            self._transition_failure(transit)
        if to_state is TransactionState.EMPTY:  # InitProducerId
            if ((self.producer_epoch != transit.producer_epoch and not self._valid_producer_epoch_bump(transit))
                    or transit.topic_partitions or transit.txn_start_timestamp != -1):
                self._transition_failure(transit)
        elif to_state is TransactionState.ONGOING:  # partitions added
            if (not self._valid_producer_epoch(transit) or not self.topic_partitions <= transit.topic_partitions
                    or self.txn_timeout_ms != transit.txn_timeout_ms):
                self._transition_failure(transit)
        elif to_state in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT):  # EndTxn
            # A transactions version 2 abort of an empty transaction starts it now.
            empty_abort = (to_state is TransactionState.PREPARE_ABORT
                           and transit.client_transaction_version.supports_epoch_bump
                           and self.state in (TransactionState.EMPTY, TransactionState.COMPLETE_COMMIT,
                                              TransactionState.COMPLETE_ABORT))
            if (not self._valid_producer_epoch(transit) or self.topic_partitions != transit.topic_partitions
                    or self.txn_timeout_ms != transit.txn_timeout_ms
                    or not (empty_abort or self.txn_start_timestamp == transit.txn_start_timestamp)):
                self._transition_failure(transit)
        elif to_state in (TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT):  # markers written
            if (not self._valid_producer_epoch(transit) or self.txn_timeout_ms != transit.txn_timeout_ms
                    or transit.txn_start_timestamp == -1):
                self._transition_failure(transit)
        elif to_state is TransactionState.PREPARE_EPOCH_FENCE:
            # A fence is only ever replaced by the abort that follows it; it is never logged by itself.
            self._transition_failure(transit)
        else:  # Dead
            raise IllegalStateError(
                f"transactional id {self.transactional_id!r} completes a transition to Dead: an expired "
                "transactional id leaves the cache once its tombstone is written, it never becomes Dead in it")
        self.producer_id = transit.producer_id
        self.prev_producer_id = transit.prev_producer_id
        self.next_producer_id = transit.next_producer_id
        self.producer_epoch = transit.producer_epoch
        self.last_producer_epoch = transit.last_producer_epoch
        self.txn_timeout_ms = transit.txn_timeout_ms
        self.topic_partitions = set(transit.topic_partitions)
        self.txn_start_timestamp = transit.txn_start_timestamp
        self.txn_last_update_timestamp = transit.txn_last_update_timestamp
        self.client_transaction_version = transit.client_transaction_version
        self.pending_state = None
        self.state = to_state

    def _prepare_transition_to(self, state: TransactionState, *, producer_id: int | None = None,
                               next_producer_id: int | None = None, producer_epoch: int | None = None,
                               last_producer_epoch: int | None = None, txn_timeout_ms: int | None = None,
                               topic_partitions: frozenset[TopicPartition] | None = None,
                               txn_start_timestamp: int | None = None, txn_last_update_timestamp: int | None = None,
                               client_transaction_version: TransactionVersion | None = None) -> TxnTransitMetadata:
        """The transit to `state`, with what is not given as it is now; marks `state` pending."""
        if self.pending_state is not None:
            raise IllegalStateError(
                f"transactional id {self.transactional_id!r} prepares a transition to {state.state_name} while one "
                f"to {self.pending_state.state_name} is pending")
        new_producer_id = self.producer_id if producer_id is None else producer_id
        new_epoch = self.producer_epoch if producer_epoch is None else producer_epoch
        if new_producer_id < 0:
            raise IllegalStateError(f"illegal new producer id {new_producer_id}")
        # A new transactional id has no epoch until its first InitProducerId, and may expire without one.
        if state is not TransactionState.DEAD and new_epoch < 0:
            raise IllegalStateError(f"illegal new producer epoch {new_epoch}")
        if self.state not in state.valid_previous_states:
            raise IllegalStateError(
                f"transactional id {self.transactional_id!r} cannot move from {self.state.state_name} to "
                f"{state.state_name}")
        transit = TxnTransitMetadata(
            producer_id=new_producer_id,
            prev_producer_id=self.producer_id,
            next_producer_id=self.next_producer_id if next_producer_id is None else next_producer_id,
            producer_epoch=new_epoch,
            last_producer_epoch=self.last_producer_epoch if last_producer_epoch is None else last_producer_epoch,
            txn_timeout_ms=self.txn_timeout_ms if txn_timeout_ms is None else txn_timeout_ms,
            txn_state=state,
            topic_partitions=frozenset(self.topic_partitions) if topic_partitions is None else topic_partitions,
            txn_start_timestamp=self.txn_start_timestamp if txn_start_timestamp is None else txn_start_timestamp,
            txn_last_update_timestamp=(self.txn_last_update_timestamp if txn_last_update_timestamp is None
                                       else txn_last_update_timestamp),
            client_transaction_version=(self.client_transaction_version if client_transaction_version is None
                                        else client_transaction_version),
        )
        self.pending_state = state
        return transit

    def _valid_producer_epoch(self, transit: TxnTransitMetadata) -> bool:
        """The transit keeps this producer id and epoch, allowing for what transactions version 2 changes: a
        PrepareCommit/PrepareAbort bumped the epoch (its last epoch is the current one), and a completion that
        moved to the next producer id (epoch 0) came from the current one (its previous producer id)."""
        if transit.client_transaction_version.supports_epoch_bump:
            if (transit.txn_state in (TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT)
                    and transit.producer_epoch == 0):
                return (transit.last_producer_epoch == self.last_producer_epoch
                        and transit.prev_producer_id == self.producer_id)
            if transit.txn_state in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT):
                return transit.last_producer_epoch == self.producer_epoch and transit.producer_id == self.producer_id
        return transit.producer_epoch == self.producer_epoch and transit.producer_id == self.producer_id

    def _valid_producer_epoch_bump(self, transit: TxnTransitMetadata) -> bool:
        """The transit's epoch is this one bumped by one, or epoch 0 of a new producer id."""
        return (transit.producer_epoch == self.producer_epoch + 1
                or (transit.producer_epoch == 0 and transit.producer_id != self.producer_id))

    def _transition_failure(self, transit: TxnTransitMetadata) -> NoReturn:
        raise IllegalStateError(
            f"transactional id {self.transactional_id!r} in state {self.state.state_name} cannot complete the "
            f"transition to {transit}: it is not the transition prepared from {self}")
