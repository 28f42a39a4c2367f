"""The transaction coordinator (Kafka's TransactionCoordinator): producer ids and epochs for transactional ids,
the partitions of each transaction, and its end.

InitProducerId with a transactional id gives the id's producer a bumped epoch (a new producer id when the epochs
run out), fencing any older producer of the id; while a transaction of the id is still in flight it answers
CONCURRENT_TRANSACTIONS, and an Ongoing one is aborted first (fenced with an epoch the client never sees: at
transaction version 2 the abort's own bump, else a bump the abort then keeps). KIP-360:
a producer that says which producer id and epoch it had is either recognised (its current or last epoch) or told
PRODUCER_FENCED. AddPartitionsToTxn (and AddOffsetsToTxn, which adds the group's `__consumer_offsets` partition)
records partitions before the producer writes to them; the v4+ verify-only form (KIP-890 part 1) tells a partition
leader whether a partition is in the transaction. EndTxn writes PrepareCommit or PrepareAbort, answers, and hands
the transaction to the marker channel manager, which writes the markers and then CompleteCommit or CompleteAbort.

Transactions past their timeout are aborted every
transaction.abort.timed.out.transaction.cleanup.interval.ms (the epoch is bumped, so the old producer's late commit
is fenced), and ids idle for transactional.id.expiration.ms are removed.
"""
from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import NamedTuple

import trio

from minikafka.broker.clock.broker_clock import wall_clock_ms
from minikafka.broker.coordinator.coordinator_log import CoordinatorLog
from minikafka.broker.coordinator.transaction.transaction_config import TransactionConfig
from minikafka.broker.coordinator.transaction.transaction_marker_channel_manager import (
    TransactionMarkerChannelManager,
)
from minikafka.broker.coordinator.transaction.transaction_metadata import (
    MAX_PRODUCER_EPOCH,
    TransactionMetadata,
    TransactionVersion,
    TxnTransitMetadata,
    is_epoch_exhausted,
)
from minikafka.broker.coordinator.transaction.transaction_state import TransactionState
from minikafka.broker.coordinator.transaction.transaction_state_manager import (
    CoordinatorEpochAndTxnMetadata,
    TransactionStateManager,
)
from minikafka.protocol.errors import ErrorCode, KafkaError, error_of
from minikafka.protocol.record_batch import NO_PRODUCER_ID
from minikafka.storage.producer_state import NO_PRODUCER_EPOCH

log = logging.getLogger("minikafka.transaction_coordinator")

TopicPartition = tuple[str, int]
GenerateProducerId = Callable[[], Awaitable[int]]


class InitProducerIdResult(NamedTuple):
    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


class EndTxnResult(NamedTuple):
    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


class TransactionCoordinator:
    def __init__(self, config: TransactionConfig, state_manager: TransactionStateManager,
                 marker_manager: TransactionMarkerChannelManager, generate_producer_id: GenerateProducerId,
                 clock_ms: Callable[[], int] = wall_clock_ms) -> None:
        self.config = config
        self.state_manager = state_manager
        self.marker_manager = marker_manager
        self.generate_producer_id = generate_producer_id
        self.clock_ms = clock_ms
        # The partition loads running, each in its cancel scope, in the nursery of `run` once it is open.
        self._loads: dict[int, trio.CancelScope] = {}
        self._nursery: trio.Nursery | None = None

    # ---- lifecycle -----------------------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus = trio.TASK_STATUS_IGNORED) -> None:
        """The marker sender, the partition loads and the periodic aborts and expirations, until cancelled."""
        async with trio.open_nursery() as nursery:
            await nursery.start(self.marker_manager.run)
            self.state_manager.active = True
            self._nursery = nursery
            for partition, coordinator_epoch in self.state_manager.loading_partitions.items():
                self._start_load(partition, coordinator_epoch)  # elected before the coordinator ran
            nursery.start_soon(self._every, self.config.abort_timed_out_transactions_interval_ms,
                               self.abort_timed_out_transactions)
            nursery.start_soon(self._every, self.config.remove_expired_transactional_ids_interval_ms,
                               self.state_manager.remove_expired_transactional_ids)
            task_status.started()
            try:
                await trio.sleep_forever()
            finally:
                self.state_manager.active = False
                self._nursery = None
                self._loads.clear()  # cancelled with the nursery

    @staticmethod
    async def _every(interval_ms: int, action: Callable[[], Awaitable[object]]) -> None:
        while True:
            await trio.sleep(max(interval_ms, 1) / 1000)
            await action()

    def on_elected(self, partition: int, coordinator_epoch: int) -> None:
        """This broker now leads `partition` of `__transaction_state` (Kafka's onElection): its ids answer
        COORDINATOR_LOAD_IN_PROGRESS while a task loads them, off the caller's path, since a large partition takes
        long; then they are served and the commits and aborts its previous coordinator had prepared are finished.
        A load of an earlier election stops; an election before `run` is loaded once it runs; an empty partition is
        served at once."""
        self.marker_manager.remove_markers_for_txn_topic_partition(partition)
        self._cancel_load(partition)
        if self.state_manager.add_loading_partition(partition, coordinator_epoch) and self._nursery is not None:
            self._start_load(partition, coordinator_epoch)

    def on_resigned(self, partition: int) -> None:
        """This broker no longer leads `partition` (Kafka's onResignation): its load stops, its ids and their
        markers go."""
        self._cancel_load(partition)
        self.state_manager.remove_transactions_for_partition(partition)
        self.marker_manager.remove_markers_for_txn_topic_partition(partition)

    def _start_load(self, partition: int, coordinator_epoch: int) -> None:
        assert self._nursery is not None
        scope = trio.CancelScope()
        self._loads[partition] = scope
        self._nursery.start_soon(self._load, partition, coordinator_epoch, scope,
                                 name=f"load of {self.state_manager.transaction_log.topic}-{partition}")

    def _cancel_load(self, partition: int) -> None:
        scope = self._loads.pop(partition, None)
        if scope is not None:
            scope.cancel()

    async def _load(self, partition: int, coordinator_epoch: int, scope: trio.CancelScope) -> None:
        """Load one partition's ids (Kafka's loadTransactionsForTxnTopicPartition), then hand the transactions it
        finds prepared to the marker sender, in the same step as they are installed: no request comes between."""
        try:
            with scope:
                prepared = await self.state_manager.load_transactions_for_partition(partition, coordinator_epoch)
                for metadata in prepared or ():
                    commit = metadata.state is TransactionState.PREPARE_COMMIT
                    complete = metadata.prepare_complete(self.clock_ms())
                    self.marker_manager.add_txn_markers_to_send(coordinator_epoch, commit, metadata, complete)
        except Exception:  # a bug met by one load must not stop the coordinator; its ids answer NOT_COORDINATOR
            log.exception("loading partition %d of the transaction state failed", partition)
            if self.state_manager.loading_partitions.get(partition) == coordinator_epoch:
                self.state_manager.remove_transactions_for_partition(partition)
        finally:
            if self._loads.get(partition) is scope:
                del self._loads[partition]

    # ---- InitProducerId ------------------------------------------------------------------------------------

    async def handle_init_producer_id(self, transactional_id: str, transaction_timeout_ms: int,
                                      expected: tuple[int, int] | None) -> InitProducerIdResult:
        """`expected` is the (producer id, epoch) a v3+ client says it had (KIP-360), None for a new producer."""
        if transactional_id == "":
            return InitProducerIdResult(ErrorCode.INVALID_REQUEST)
        if not self.state_manager.validate_transaction_timeout_ms(transaction_timeout_ms):
            return InitProducerIdResult(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        try:
            current = self.state_manager.get_transaction_state(transactional_id)
            if current is None:
                producer_id = await self.generate_producer_id()
                current = self.state_manager.put_transaction_state_if_not_exists(TransactionMetadata(
                    transactional_id=transactional_id, producer_id=producer_id, prev_producer_id=NO_PRODUCER_ID,
                    next_producer_id=NO_PRODUCER_ID, producer_epoch=NO_PRODUCER_EPOCH,
                    last_producer_epoch=NO_PRODUCER_EPOCH, txn_timeout_ms=transaction_timeout_ms,
                    state=TransactionState.EMPTY, topic_partitions=set(), txn_last_update_timestamp=self.clock_ms(),
                    client_transaction_version=TransactionVersion.TV_0))
            coordinator_epoch, metadata = current
            transit = await self._prepare_init_producer_id_transit(metadata, transaction_timeout_ms, expected)
        except KafkaError as exc:
            return InitProducerIdResult(exc.code)
        if transit.txn_state is TransactionState.PREPARE_EPOCH_FENCE:
            # Abort the ongoing transaction first; the client retries and then gets a second bump.
            ended = await self._end_transaction(transactional_id, transit.producer_id, transit.producer_epoch,
                                                commit=False, is_from_client=False,
                                                client_transaction_version=self.state_manager.transaction_version())
            return InitProducerIdResult(ErrorCode.CONCURRENT_TRANSACTIONS if ended.error == ErrorCode.NONE
                                        else ended.error)
        error = await self.state_manager.append_transaction_to_log(transactional_id, coordinator_epoch, transit)
        if error != ErrorCode.NONE:
            return InitProducerIdResult(error)
        log.info("initialized transactional id %r with producer id %d and epoch %d", transactional_id,
                 transit.producer_id, transit.producer_epoch)
        return InitProducerIdResult(ErrorCode.NONE, transit.producer_id, transit.producer_epoch)

    async def _prepare_init_producer_id_transit(self, metadata: TransactionMetadata, timeout_ms: int,
                                                expected: tuple[int, int] | None) -> TxnTransitMetadata:
        def valid_producer_id(producer_id: int, epoch: int) -> bool:
            return (metadata.producer_epoch == NO_PRODUCER_EPOCH or producer_id == metadata.producer_id
                    or (producer_id == metadata.prev_producer_id and is_epoch_exhausted(epoch)))

        if metadata.pending_transition_in_progress:
            raise KafkaError(ErrorCode.CONCURRENT_TRANSACTIONS, "a transition is in progress")
        if expected is not None and not valid_producer_id(*expected):
            raise KafkaError(ErrorCode.PRODUCER_FENCED, f"producer id {expected[0]} is not the id's current one")
        state = metadata.state
        if state in (TransactionState.PREPARE_ABORT, TransactionState.PREPARE_COMMIT):
            raise KafkaError(ErrorCode.CONCURRENT_TRANSACTIONS, f"the transaction is {state.state_name}")
        if state in (TransactionState.COMPLETE_ABORT, TransactionState.COMPLETE_COMMIT, TransactionState.EMPTY):
            if metadata.is_producer_epoch_exhausted and (expected is None or expected[1] == metadata.producer_epoch):
                producer_id = await self.generate_producer_id()
                return metadata.prepare_producer_id_rotation(producer_id, timeout_ms, self.clock_ms(),
                                                             expected is not None)
            return metadata.prepare_increment_producer_epoch(timeout_ms, None if expected is None else expected[1],
                                                             self.clock_ms())
        if state is TransactionState.ONGOING:
            return metadata.prepare_fence_producer_epoch()
        raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"transactional id {metadata.transactional_id!r} is "
                                                         f"{state.state_name}, which it should never be here")

    # ---- AddPartitionsToTxn --------------------------------------------------------------------------------

    async def handle_add_partitions_to_transaction(self, transactional_id: str, producer_id: int,
                                                   producer_epoch: int, partitions: set[TopicPartition],
                                                   client_transaction_version: TransactionVersion) -> ErrorCode:
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST
        try:
            current = self.state_manager.get_transaction_state(transactional_id)
            if current is None:
                return ErrorCode.INVALID_PRODUCER_ID_MAPPING
            coordinator_epoch, metadata = current
            # A transition in progress first (KAFKA-18660): a version 2 client may already use the producer id a
            # pending completion moves to.
            if metadata.pending_transition_in_progress:
                return ErrorCode.CONCURRENT_TRANSACTIONS
            if metadata.producer_id != producer_id:
                return ErrorCode.INVALID_PRODUCER_ID_MAPPING
            if metadata.producer_epoch != producer_epoch:
                return ErrorCode.PRODUCER_FENCED
            if metadata.state in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT):
                return ErrorCode.CONCURRENT_TRANSACTIONS
            if metadata.state is TransactionState.ONGOING and partitions <= metadata.topic_partitions:
                return ErrorCode.NONE
            transit = metadata.prepare_add_partitions(partitions, self.clock_ms(), client_transaction_version)
        except KafkaError as exc:
            return exc.code
        return await self.state_manager.append_transaction_to_log(transactional_id, coordinator_epoch, transit)

    def handle_verify_partitions_in_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                                partitions: set[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """KIP-890 part 1: whether each partition is in the producer's ongoing transaction (a partition leader
        asks before appending a transactional batch); TRANSACTION_ABORTABLE for one that is not."""
        def all_partitions(code: ErrorCode) -> dict[TopicPartition, ErrorCode]:
            return dict.fromkeys(partitions, code)

        if not transactional_id:
            return all_partitions(ErrorCode.INVALID_REQUEST)
        try:
            current = self.state_manager.get_transaction_state(transactional_id)
        except KafkaError as exc:
            return all_partitions(exc.code)
        if current is None or current.metadata.producer_id != producer_id:
            return all_partitions(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        metadata = current.metadata
        if metadata.producer_epoch != producer_epoch:
            return all_partitions(ErrorCode.PRODUCER_FENCED)
        if metadata.state in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT):
            return all_partitions(ErrorCode.CONCURRENT_TRANSACTIONS)
        return {tp: ErrorCode.NONE if tp in metadata.topic_partitions else ErrorCode.TRANSACTION_ABORTABLE
                for tp in partitions}

    # ---- EndTxn --------------------------------------------------------------------------------------------

    async def handle_end_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                     commit: bool, client_transaction_version: TransactionVersion) -> EndTxnResult:
        return await self._end_transaction(transactional_id, producer_id, producer_epoch, commit=commit,
                                           is_from_client=True,
                                           client_transaction_version=client_transaction_version)

    async def _end_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int, *, commit: bool,
                               is_from_client: bool, client_transaction_version: TransactionVersion) -> EndTxnResult:
        if not transactional_id:
            return EndTxnResult(ErrorCode.INVALID_REQUEST)
        try:
            current = self.state_manager.get_transaction_state(transactional_id)
            if current is None:
                return EndTxnResult(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
            coordinator_epoch, metadata = current
            prepared = await self._prepare_end(metadata, producer_id, producer_epoch, commit, is_from_client,
                                               client_transaction_version)
        except KafkaError as exc:
            return EndTxnResult(exc.code)
        if isinstance(prepared, EndTxnResult):
            return prepared
        transit, is_epoch_fence = prepared
        error = await self.state_manager.append_transaction_to_log(transactional_id, coordinator_epoch, transit)
        if error != ErrorCode.NONE:
            if is_epoch_fence:
                # Before version 2 the fence's epoch is in place in memory, so the next fence reuses it; version 2
                # left the epoch as it was, and the next fence bumps it once again.
                if not client_transaction_version.supports_epoch_bump:
                    metadata.has_failed_epoch_fence = True
                log.warning("the epoch fence of transactional id %r was not written (%s)", transactional_id,
                            error.name)
            return EndTxnResult(error)
        result = self._send_markers(transactional_id, coordinator_epoch, metadata, producer_id, producer_epoch,
                                    commit, client_transaction_version)
        if result.error == ErrorCode.NONE:
            # The markers' senders were just woken: they write their WriteTxnMarkers first, this answer after. The
            # commit is done when its markers are; the answer only lets the producer begin its next transaction,
            # whose partitions wait for CompleteCommit anyway.
            await trio.lowlevel.checkpoint()
        return result

    async def _prepare_end(self, metadata: TransactionMetadata, producer_id: int, producer_epoch: int, commit: bool,
                           is_from_client: bool, client_transaction_version: TransactionVersion
                           ) -> tuple[TxnTransitMetadata, bool] | EndTxnResult:
        """The transit EndTxn writes, and whether it completes an epoch fence; or the answer when nothing is to be
        written. Raises KafkaError for the errors Kafka answers before writing.

        Transaction version 2 (EndTxn v5, and the coordinator's own aborts when the cluster is at version 2) bumps
        the epoch at every end, so the epoch alone tells a retry (the request's epoch is one below) from the next
        transaction's end (the same epoch): from Empty, CompleteCommit or CompleteAbort, an abort at the current
        epoch ends an empty transaction (with a bump), a retry of the end that got there is answered as the first
        was, and anything else is INVALID_TXN_STATE.
        """
        fencing = metadata.pending_state is TransactionState.PREPARE_EPOCH_FENCE
        state = metadata.state
        tv2 = client_transaction_version.supports_epoch_bump
        retry_on_overflow = (tv2 and not fencing and metadata.prev_producer_id == producer_id
                             and producer_epoch == MAX_PRODUCER_EPOCH - 1 and metadata.producer_epoch == 0)
        retry_on_epoch_bump = tv2 and not fencing and metadata.producer_epoch == producer_epoch + 1
        if tv2 and not fencing:
            if state in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT):
                valid_epoch = retry_on_epoch_bump
            elif state in (TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT):
                valid_epoch = retry_on_epoch_bump or retry_on_overflow or producer_epoch == metadata.producer_epoch
            else:
                valid_epoch = producer_epoch == metadata.producer_epoch
        else:
            valid_epoch = ((not is_from_client or producer_epoch == metadata.producer_epoch)
                           and producer_epoch >= metadata.producer_epoch)
        # Version 2 answers a transition in progress first (KAFKA-18660): across a producer id rotation the client
        # already has the next producer id, which only the pending completion installs.
        in_progress = metadata.pending_transition_in_progress and not fencing
        if tv2 and in_progress:
            raise KafkaError(ErrorCode.CONCURRENT_TRANSACTIONS, "a transition is in progress")
        if metadata.producer_id != producer_id and not retry_on_overflow:
            raise KafkaError(ErrorCode.INVALID_PRODUCER_ID_MAPPING, "not the id's producer id")
        if not valid_epoch:
            raise KafkaError(ErrorCode.PRODUCER_FENCED, f"producer epoch {producer_epoch} is fenced")
        if in_progress:
            raise KafkaError(ErrorCode.CONCURRENT_TRANSACTIONS, "a transition is in progress")
        is_retry = retry_on_epoch_bump or retry_on_overflow
        result = "commit" if commit else "abort"

        async def prepare(new_state: TransactionState, no_partition_added: bool) -> tuple[TxnTransitMetadata, bool]:
            next_producer_id = NO_PRODUCER_ID
            if tv2 and not fencing and metadata.is_producer_epoch_exhausted:
                next_producer_id = await self.generate_producer_id()
            epoch_fence = fencing and new_state is TransactionState.PREPARE_ABORT
            if epoch_fence:
                metadata.pending_state = None
                if not tv2:
                    # The fence's bumped epoch becomes the transaction's as its abort is prepared. Version 2's abort
                    # bumps by itself, and that one bump is the fence (KAFKA-19367): epoch e + 1, last epoch e.
                    metadata.producer_epoch = producer_epoch
                    metadata.last_producer_epoch = NO_PRODUCER_EPOCH
            # Before version 2, Kafka's end is written as transaction version 0's, whatever the level.
            version = client_transaction_version if tv2 else TransactionVersion.TV_0
            return (metadata.prepare_abort_or_commit(new_state, version, next_producer_id, self.clock_ms(),
                                                     no_partition_added), epoch_fence)

        def invalid() -> KafkaError:
            log.debug("transactional id %r is %s; EndTxn(%s) refused", metadata.transactional_id, state.state_name,
                      result)
            return KafkaError(ErrorCode.INVALID_TXN_STATE, f"the transaction is {state.state_name}")

        def current() -> EndTxnResult:
            return EndTxnResult(ErrorCode.NONE, metadata.producer_id, metadata.producer_epoch)

        if state is TransactionState.ONGOING:
            return await prepare(TransactionState.PREPARE_COMMIT if commit else TransactionState.PREPARE_ABORT, False)
        if state in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT):
            if commit == (state is TransactionState.PREPARE_COMMIT):
                raise KafkaError(ErrorCode.CONCURRENT_TRANSACTIONS, f"the transaction is {state.state_name}")
            raise invalid()
        if state in (TransactionState.DEAD, TransactionState.PREPARE_EPOCH_FENCE):
            raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"transactional id {metadata.transactional_id!r} is "
                                                             f"{state.state_name}, which it should never be here")
        if not tv2:
            if state is (TransactionState.COMPLETE_COMMIT if commit else TransactionState.COMPLETE_ABORT):
                return current()
            raise invalid()
        if state is TransactionState.COMPLETE_COMMIT:
            if commit:
                if is_retry:
                    return current()
                raise invalid()
            if is_retry:
                raise invalid()
            return await prepare(TransactionState.PREPARE_ABORT, True)
        if state is TransactionState.COMPLETE_ABORT:
            if commit:
                raise invalid()
            if is_retry:
                return current()
            return await prepare(TransactionState.PREPARE_ABORT, True)
        if commit:  # Empty
            raise invalid()
        return await prepare(TransactionState.PREPARE_ABORT, True)

    def _send_markers(self, transactional_id: str, coordinator_epoch: int, metadata: TransactionMetadata,
                      producer_id: int, producer_epoch: int, commit: bool,
                      client_transaction_version: TransactionVersion) -> EndTxnResult:
        """After PrepareCommit/PrepareAbort is written: answer the client with the producer id and epoch it goes on
        with (a version 2 end bumped the epoch, and may move to the next producer id), and have the markers
        written."""
        current = self._current(transactional_id)
        if current is None or current.coordinator_epoch != coordinator_epoch or current.metadata is not metadata:
            return EndTxnResult(ErrorCode.NOT_COORDINATOR)
        if metadata.producer_id != producer_id:
            return EndTxnResult(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        bumped = client_transaction_version.supports_epoch_bump and metadata.producer_epoch == producer_epoch + 1
        if metadata.producer_epoch != producer_epoch and not bumped:
            return EndTxnResult(ErrorCode.PRODUCER_FENCED)
        if metadata.pending_transition_in_progress:
            return EndTxnResult(ErrorCode.CONCURRENT_TRANSACTIONS)
        expected = TransactionState.PREPARE_COMMIT if commit else TransactionState.PREPARE_ABORT
        if metadata.state is not expected:
            return EndTxnResult(ErrorCode.INVALID_TXN_STATE)
        complete = metadata.prepare_complete(self.clock_ms())
        self.marker_manager.add_txn_markers_to_send(coordinator_epoch, commit, metadata, complete)
        return EndTxnResult(ErrorCode.NONE, complete.producer_id, complete.producer_epoch)

    def _current(self, transactional_id: str) -> CoordinatorEpochAndTxnMetadata | None:
        try:
            return self.state_manager.get_transaction_state(transactional_id)
        except KafkaError:
            return None

    # ---- timeouts ------------------------------------------------------------------------------------------

    async def abort_timed_out_transactions(self) -> None:
        """Fence and abort every Ongoing transaction past its timeout (Kafka's abortTimedOutTransactions)."""
        for txn in self.state_manager.timed_out_transactions():
            current = self._current(txn.transactional_id)
            if current is None:
                continue
            metadata = current.metadata
            if metadata.producer_id != txn.producer_id or metadata.pending_transition_in_progress:
                continue
            try:
                fence = metadata.prepare_fence_producer_epoch()
            except KafkaError as exc:
                log.error("cannot fence timed-out transactional id %r: %s", txn.transactional_id, error_of(exc))
                continue
            log.info("aborting the transaction of %r: it passed its timeout of %d ms", txn.transactional_id,
                     metadata.txn_timeout_ms)
            ended = await self._end_transaction(txn.transactional_id, fence.producer_id, fence.producer_epoch,
                                                commit=False, is_from_client=False,
                                                client_transaction_version=self.state_manager.transaction_version())
            if ended.error != ErrorCode.NONE:
                log.info("abort of timed-out transactional id %r: %s", txn.transactional_id, ended.error.name)


def load_transaction_coordinator(config: TransactionConfig, transaction_log: CoordinatorLog,
                                 marker_manager_factory: Callable[[TransactionStateManager],
                                                                  TransactionMarkerChannelManager],
                                 generate_producer_id: GenerateProducerId,
                                 transaction_version: Callable[[], TransactionVersion]) -> TransactionCoordinator:
    """The coordinator, serving no transactional id until this broker leads a partition of `__transaction_state`."""
    state_manager = TransactionStateManager(config, transaction_log, wall_clock_ms, transaction_version)
    return TransactionCoordinator(config, state_manager, marker_manager_factory(state_manager), generate_producer_id)
