"""Ending a transaction in its partitions: WriteTxnMarkers to their leaders, then the completion in the log (Kafka's
TransactionMarkerChannelManager and TransactionMarkerRequestCompletionHandler).

Once PrepareCommit or PrepareAbort is written, the coordinator hands the transaction here. Its partitions are
grouped by their current leader (from the metadata cache) and each group is queued for that broker, in a queue per
destination broker kept by partition of `__transaction_state`. One sender task per broker drains everything queued
for it into one WriteTxnMarkers request (a marker per transaction) over the inter-broker listener (this broker's own
partitions' request is handed to its WriteTxnMarkers handling directly, not through its own socket), with one request
in flight per broker: markers queued meanwhile go together in the next one. So many
transactions ending at once cost a request per broker per round trip, not one per transaction and broker, and a
leader appends all their markers before one wait for its ISR.

Each answer goes back to its transaction, per partition as Kafka handles them: NONE takes the partition off the
transaction; a leader that moved, an ISR too small, a timeout or a broker that cannot be reached is retried at the
then current leader after retry.backoff.ms, as are partitions without a leader and markers to a broker a fault holds
back (they wait until it is cleared); a partition whose topic is gone is dropped; INVALID_PRODUCER_EPOCH or
TRANSACTION_COORDINATOR_FENCED means a newer coordinator owns the transaction, so this one stops. When no partition
is left, CompleteCommit or CompleteAbort is written (again and again while the log answers COORDINATOR_NOT_AVAILABLE).
A transaction whose coordinator partition this broker stops leading, or whose coordinator epoch has changed, is given
up here: its queued markers are removed, answers still out are ignored, and the new coordinator resends its markers
when it loads the partition.
"""
from __future__ import annotations

import logging
import math
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, replace

import trio
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.producer.transaction import WriteTxnMarkersRequest

from minikafka.broker.coordinator.transaction.transaction_metadata import TransactionMetadata, TxnTransitMetadata
from minikafka.broker.coordinator.transaction.transaction_state_manager import TransactionStateManager
from minikafka.broker.metadata.metadata_cache import MetadataCache
from minikafka.broker.network.broker_clients import BrokerClients
from minikafka.broker.network.network_client import DisconnectedError
from minikafka.protocol.errors import ErrorCode
from minikafka.protocol.internal_topics import TRANSACTION_STATE_TOPIC

log = logging.getLogger("minikafka.transaction_marker_channel_manager")

TopicPartition = tuple[str, int]
WRITE_TXN_MARKERS_VERSION = 1
RETRY_BACKOFF_S = 0.1  # Kafka's retry.backoff.ms for the inter-broker send thread
NO_DESTINATION = -1  # the queue of markers waiting to be routed again

_DONE = frozenset((ErrorCode.NONE, ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT))
_RETRIABLE = frozenset((ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                        ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                        ErrorCode.REQUEST_TIMED_OUT, ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.NETWORK_EXCEPTION))
_FENCED = frozenset((ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED))


@dataclass(eq=False)
class PendingCompleteTxn:
    """A transaction whose markers are being written, and the completion to write once none is left. Compared by
    identity: a newer one for the same transactional id replaces it, and what is still queued for it is ignored."""

    transactional_id: str
    txn_topic_partition: int  # its partition of `__transaction_state`
    coordinator_epoch: int
    txn_metadata: TransactionMetadata
    new_metadata: TxnTransitMetadata
    commit: bool
    # As when the markers were handed over: the markers carry these, whatever the metadata says later.
    producer_id: int
    producer_epoch: int


@dataclass(frozen=True)
class TxnMarkerEntry:
    """The marker of one transaction for some of its partitions, all led by one broker (or none yet)."""

    pending: PendingCompleteTxn
    partitions: frozenset[TopicPartition]
    retry_at: float = 0.0  # waiting to be routed again: the trio time its retry.backoff.ms ends


class TxnMarkerQueue:
    """The markers waiting for one destination broker, by partition of `__transaction_state` (Kafka's
    TxnMarkerQueue), so that unloading a partition takes its transactions' markers out before they are sent."""

    def __init__(self, destination: int) -> None:
        self.destination = destination
        self._markers_per_txn_topic_partition: dict[int, list[TxnMarkerEntry]] = {}
        self._added = trio.Event()

    def add_markers(self, txn_topic_partition: int, entry: TxnMarkerEntry) -> None:
        self._markers_per_txn_topic_partition.setdefault(txn_topic_partition, []).append(entry)
        self._added.set()

    def remove_markers_for_txn_topic_partition(self, txn_topic_partition: int) -> list[TxnMarkerEntry]:
        return self._markers_per_txn_topic_partition.pop(txn_topic_partition, [])

    def earliest_retry_at(self) -> float:
        return min((e.retry_at for entries in self._markers_per_txn_topic_partition.values() for e in entries),
                   default=math.inf)

    async def wait_for_markers(self) -> None:
        """Until something is queued (at once if something is). Only the queue's one sender task waits here."""
        while not self._markers_per_txn_topic_partition:
            self._added = trio.Event()
            await self._added.wait()

    def drain(self, ready_at: float = math.inf) -> list[TxnMarkerEntry]:
        """Take every queued marker (those due to be retried by `ready_at`), in the order they were queued per
        partition of `__transaction_state`."""
        drained: list[TxnMarkerEntry] = []
        for txn_topic_partition, entries in list(self._markers_per_txn_topic_partition.items()):
            kept = [e for e in entries if e.retry_at > ready_at]
            drained += [e for e in entries if e.retry_at <= ready_at]
            if kept:
                self._markers_per_txn_topic_partition[txn_topic_partition] = kept
            else:
                del self._markers_per_txn_topic_partition[txn_topic_partition]
        return drained


class TransactionMarkerChannelManager:
    def __init__(self, metadata_cache: MetadataCache, state_manager: TransactionStateManager,
                 clients: BrokerClients, is_held: Callable[[int], bool] | None = None,
                 retry_backoff_s: float = RETRY_BACKOFF_S, local_broker_id: int = NO_DESTINATION,
                 write_locally: Callable[[ApiMessage], Awaitable[ApiMessage]] | None = None) -> None:
        self.metadata_cache = metadata_cache
        self.state_manager = state_manager
        self.clients = clients
        # Fault injection: markers to a broker it names wait (are retried) until the fault is cleared.
        self._is_held = is_held
        self.retry_backoff_s = retry_backoff_s
        self.local_broker_id = local_broker_id
        self._write_locally = write_locally
        self._nursery: trio.Nursery | None = None
        self._markers_queue_per_broker: dict[int, TxnMarkerQueue] = {}
        # Markers with no destination for now (no leader, a held broker, a retriable failure): routed again at the
        # then current leaders once their backoff has passed.
        self._markers_queue_for_retry = TxnMarkerQueue(NO_DESTINATION)
        self._transactions_with_pending_markers: dict[str, PendingCompleteTxn] = {}
        # By partition of `__transaction_state`: the completions being written, cancelled when it is unloaded.
        self._completions: dict[int, set[trio.CancelScope]] = defaultdict(set)

    async def run(self, *, task_status: trio.TaskStatus = trio.TASK_STATUS_IGNORED) -> None:
        """The connections, the retry task and (started as brokers get markers) a sender task per broker."""
        async with trio.open_nursery() as nursery:
            await nursery.start(self.clients.run)
            nursery.start_soon(self._retry_markers)
            self._nursery = nursery
            task_status.started()
            try:
                await trio.sleep_forever()
            finally:
                self._nursery = None
                self._markers_queue_per_broker.clear()
                self._markers_queue_for_retry = TxnMarkerQueue(NO_DESTINATION)
                self._transactions_with_pending_markers.clear()
                self._completions.clear()

    # ---- the coordinator's side -----------------------------------------------------------------------------

    def add_txn_markers_to_send(self, coordinator_epoch: int, commit: bool, metadata: TransactionMetadata,
                                complete: TxnTransitMetadata) -> None:
        """Write the markers of `metadata`'s transaction (in PrepareCommit or PrepareAbort), then `complete`."""
        if self._nursery is None:
            log.warning("markers of %r not sent: the coordinator is not running", metadata.transactional_id)
            return
        transactional_id = metadata.transactional_id
        pending = PendingCompleteTxn(transactional_id, self.state_manager.partition_for(transactional_id),
                                     coordinator_epoch, metadata, complete, commit, metadata.producer_id,
                                     metadata.producer_epoch)
        previous = self._transactions_with_pending_markers.get(transactional_id)
        if previous is not None:
            log.info("markers of %r at coordinator epoch %d replace those at coordinator epoch %d", transactional_id,
                     coordinator_epoch, previous.coordinator_epoch)
        self._transactions_with_pending_markers[transactional_id] = pending
        self._guarded(pending, self._add_txn_markers_to_broker_queue, pending, metadata.topic_partitions)

    def remove_markers_for_txn_topic_partition(self, partition: int) -> None:
        """This broker no longer coordinates `partition` of `__transaction_state` (or loads it afresh): its
        transactions' markers are not sent, their answers are ignored and their completions are not written."""
        for queue in (*self._markers_queue_per_broker.values(), self._markers_queue_for_retry):
            removed = queue.remove_markers_for_txn_topic_partition(partition)
            if removed:
                log.info("removed %d markers of %s-%d %s", len(removed), TRANSACTION_STATE_TOPIC, partition,
                         "waiting for a retry" if queue.destination == NO_DESTINATION
                         else f"queued for broker {queue.destination}")
        for transactional_id, pending in list(self._transactions_with_pending_markers.items()):
            if pending.txn_topic_partition == partition:
                del self._transactions_with_pending_markers[transactional_id]
        for scope in self._completions.pop(partition, set()):
            scope.cancel()

    # ---- routing ----------------------------------------------------------------------------------------------

    def _is_pending(self, pending: PendingCompleteTxn) -> bool:
        return self._transactions_with_pending_markers.get(pending.transactional_id) is pending

    def _remove_markers_for_txn(self, pending: PendingCompleteTxn) -> None:
        if self._is_pending(pending):
            del self._transactions_with_pending_markers[pending.transactional_id]

    def _still_coordinating(self, pending: PendingCompleteTxn) -> bool:
        try:
            current = self.state_manager.get_transaction_state(pending.transactional_id)
        except Exception:  # noqa: BLE001 - any refusal means another coordinator has it now
            return False
        return (current is not None and current.coordinator_epoch == pending.coordinator_epoch
                and current.metadata is pending.txn_metadata)

    def _add_txn_markers_to_broker_queue(self, pending: PendingCompleteTxn,
                                         partitions: Iterable[TopicPartition]) -> None:
        """Queue the markers of `partitions` for their current leaders; those without one wait to be routed again.
        Completes the transaction if dropping partitions whose topic is gone leaves none."""
        if not self._still_coordinating(pending):
            log.info("markers of %r abandoned: this broker no longer coordinates it", pending.transactional_id)
            self._remove_markers_for_txn(pending)
            return
        metadata = pending.txn_metadata
        by_leader: dict[int, set[TopicPartition]] = defaultdict(set)
        unroutable: set[TopicPartition] = set()
        for tp in sorted(partitions):
            if tp not in metadata.topic_partitions:
                continue  # its marker is written
            topic = self.metadata_cache.topics.get(tp[0])
            partition = topic.partitions.get(tp[1]) if topic is not None else None
            if partition is None:
                log.info("transaction %r: partition %s-%d no longer exists, no marker for it",
                         pending.transactional_id, *tp)
                metadata.remove_partition(tp)
            elif partition.leader < 0 or (self._is_held is not None and self._is_held(partition.leader)):
                unroutable.add(tp)
            else:
                by_leader[partition.leader].add(tp)
        for leader, tps in by_leader.items():
            self._queue_for_broker(leader).add_markers(pending.txn_topic_partition,
                                                       TxnMarkerEntry(pending, frozenset(tps)))
        if unroutable:
            self._retry_later(TxnMarkerEntry(pending, frozenset(unroutable)))
        self._maybe_write_txn_completion(pending)

    def _queue_for_broker(self, broker_id: int) -> TxnMarkerQueue:
        queue = self._markers_queue_per_broker.get(broker_id)
        if queue is None:
            queue = self._markers_queue_per_broker[broker_id] = TxnMarkerQueue(broker_id)
            if self._nursery is not None:
                self._nursery.start_soon(self._send_markers_to_broker, queue)
        return queue

    def _retry_later(self, entry: TxnMarkerEntry) -> None:
        self._markers_queue_for_retry.add_markers(
            entry.pending.txn_topic_partition, replace(entry, retry_at=trio.current_time() + self.retry_backoff_s))

    async def _retry_markers(self) -> None:
        """Route the markers waiting for a retry again, each once its backoff has passed."""
        while True:
            queue = self._markers_queue_for_retry
            await queue.wait_for_markers()
            await trio.sleep_until(queue.earliest_retry_at())
            for entry in queue.drain(ready_at=trio.current_time()):
                if self._is_pending(entry.pending):
                    self._guarded(entry.pending, self._add_txn_markers_to_broker_queue, entry.pending,
                                  entry.partitions)

    def _guarded(self, pending: PendingCompleteTxn, action: Callable[..., None], *args: object) -> None:
        """Run a step of a transaction's markers; a bug in it gives up that transaction, never the broker (the next
        coordinator resends the markers)."""
        try:
            action(*args)
        except Exception:
            log.exception("ending the transaction of %r failed", pending.transactional_id)
            self._remove_markers_for_txn(pending)

    # ---- sending ---------------------------------------------------------------------------------------------

    async def _send_markers_to_broker(self, queue: TxnMarkerQueue) -> None:
        """The broker's sender: everything queued for it goes in one WriteTxnMarkers request, one at a time."""
        broker_id = queue.destination
        while True:
            await queue.wait_for_markers()
            entries = [e for e in queue.drain() if self._is_pending(e.pending)]
            if not entries:
                continue
            if self._is_held is not None and self._is_held(broker_id):
                for entry in entries:
                    self._retry_later(entry)
                continue
            markers, deferred = _one_marker_per_producer(entries)
            for entry in deferred:
                queue.add_markers(entry.pending.txn_topic_partition, entry)
            try:
                await self._send(broker_id, markers)
            except Exception:  # a bug here must not take the broker down; the next coordinator resends the markers
                log.exception("WriteTxnMarkers to broker %d failed", broker_id)
                for entry in markers:
                    self._remove_markers_for_txn(entry.pending)

    async def _send(self, broker_id: int, markers: list[TxnMarkerEntry]) -> None:
        request = _write_txn_markers_request(markers)
        if broker_id == self.local_broker_id and self._write_locally is not None:
            response = await self._write_locally(request)
        else:
            client = await self.clients.get(broker_id)
            if client is None:
                log.info("WriteTxnMarkers to broker %d: it has no endpoint; retrying", broker_id)
                for entry in markers:
                    self._retry_later(entry)
                return
            try:
                response = await client.send(request)
            except DisconnectedError as exc:
                log.info("WriteTxnMarkers to broker %d failed: %s; retrying", broker_id, exc)
                for entry in markers:
                    self._retry_later(entry)
                return
        answers: dict[int, dict[TopicPartition, ErrorCode]] = {}
        for marker in response.markers:
            answer = answers.setdefault(marker.producer_id, {})
            for topic in marker.topics:
                for p in topic.partitions:
                    answer[(topic.name, p.partition_index)] = ErrorCode(p.error_code)
        for entry in markers:
            if self._is_pending(entry.pending):
                self._guarded(entry.pending, self._on_marker_answered, broker_id, entry,
                              answers.get(entry.pending.producer_id, {}))

    def _on_marker_answered(self, broker_id: int, entry: TxnMarkerEntry,
                            errors: dict[TopicPartition, ErrorCode]) -> None:
        """Kafka's completion handler for one marker: per partition done, retried or fenced."""
        pending = entry.pending
        if not self._still_coordinating(pending):
            log.info("markers of %r abandoned: this broker no longer coordinates it", pending.transactional_id)
            self._remove_markers_for_txn(pending)
            return
        retry: set[TopicPartition] = set()
        for tp in sorted(entry.partitions):
            code = errors.get(tp)
            if code in _DONE:
                pending.txn_metadata.remove_partition(tp)
            elif code in _FENCED:
                log.info("markers of %r stopped: %s-%d answered %s (a newer coordinator has it)",
                         pending.transactional_id, *tp, code.name)
                self._remove_markers_for_txn(pending)
                return
            else:
                if code is None:
                    log.warning("broker %d did not answer the marker of %r for %s-%d; retrying", broker_id,
                                pending.transactional_id, *tp)
                elif code in _RETRIABLE:
                    log.debug("marker of %r for %s-%d: broker %d answered %s; retrying", pending.transactional_id,
                              *tp, broker_id, code.name)
                else:
                    log.error("marker of %r for %s-%d failed with %s; retrying", pending.transactional_id, *tp,
                              code.name)
                retry.add(tp)
        if retry:
            self._retry_later(TxnMarkerEntry(pending, frozenset(retry)))
        else:
            self._maybe_write_txn_completion(pending)

    # ---- completion ------------------------------------------------------------------------------------------

    def _maybe_write_txn_completion(self, pending: PendingCompleteTxn) -> None:
        if pending.txn_metadata.topic_partitions or not self._is_pending(pending) or self._nursery is None:
            return
        del self._transactions_with_pending_markers[pending.transactional_id]
        self._nursery.start_soon(self._write_txn_completion, pending)

    async def _write_txn_completion(self, pending: PendingCompleteTxn) -> None:
        scope = trio.CancelScope()
        scopes = self._completions[pending.txn_topic_partition]
        scopes.add(scope)
        try:
            with scope:
                while self._still_coordinating(pending):
                    error = await self.state_manager.append_transaction_to_log(
                        pending.transactional_id, pending.coordinator_epoch, pending.new_metadata,
                        retry_on_error=True)
                    if error != ErrorCode.COORDINATOR_NOT_AVAILABLE:
                        if error == ErrorCode.NONE:
                            log.debug("transaction %r completed: %s", pending.transactional_id,
                                      pending.new_metadata.txn_state.state_name)
                        return
                    await trio.sleep(self.retry_backoff_s)
        except Exception:  # a bug here must not take the broker down; the next coordinator completes it
            log.exception("completing the transaction of %r failed", pending.transactional_id)
        finally:
            scopes.discard(scope)


def _one_marker_per_producer(entries: list[TxnMarkerEntry]) -> tuple[list[TxnMarkerEntry], list[TxnMarkerEntry]]:
    """One marker per transaction, its partitions merged; answers come by producer id, so a second transaction of
    the same producer id (a stale one) waits for the next request."""
    partitions: dict[PendingCompleteTxn, set[TopicPartition]] = {}
    owners: dict[int, PendingCompleteTxn] = {}
    deferred = []
    for entry in entries:
        pending = entry.pending
        if owners.setdefault(pending.producer_id, pending) is not pending:
            deferred.append(entry)
        else:
            partitions.setdefault(pending, set()).update(entry.partitions)
    return [TxnMarkerEntry(pending, frozenset(tps)) for pending, tps in partitions.items()], deferred


def _write_txn_markers_request(markers: list[TxnMarkerEntry]) -> ApiMessage:
    R = WriteTxnMarkersRequest[WRITE_TXN_MARKERS_VERSION]
    M = R.WritableTxnMarker
    T = M.WritableTxnMarkerTopic
    written = []
    for entry in markers:
        pending = entry.pending
        by_topic: dict[str, list[int]] = defaultdict(list)
        for topic, index in sorted(entry.partitions):
            by_topic[topic].append(index)
        written.append(M(producer_id=pending.producer_id, producer_epoch=pending.producer_epoch,
                         transaction_result=pending.commit, coordinator_epoch=pending.coordinator_epoch,
                         topics=[T(name=t, partition_indexes=ids) for t, ids in by_topic.items()]))
    return R(markers=written)
