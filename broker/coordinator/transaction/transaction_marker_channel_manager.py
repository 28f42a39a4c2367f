"""Ending a transaction in its partitions: WriteTxnMarkers to their leaders, then the completion in the log (Kafka's
TransactionMarkerChannelManager and TransactionMarkerRequestCompletionHandler).

Once PrepareCommit or PrepareAbort is written, the coordinator hands the transaction here: its partitions are
grouped by their current leader (from the metadata cache) and each leader gets a WriteTxnMarkers request over the
inter-broker listener, this broker included. Per partition, as Kafka handles the answers: NONE takes the partition
off the transaction; a leader that moved, an ISR too small, a timeout or a broker that cannot be reached is retried
at the then current leader after retry.backoff.ms (markers a fault holds back wait the same way); a partition
whose topic is gone is dropped; INVALID_PRODUCER_EPOCH
or TRANSACTION_COORDINATOR_FENCED means a newer coordinator owns the transaction, so this one stops. When no
partition is left, CompleteCommit or CompleteAbort is written (again and again while the log answers
COORDINATOR_NOT_AVAILABLE). A transaction whose coordinator partition this broker stops leading is given up here;
the new coordinator resends its markers when it loads the partition.
"""
from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable

import trio
from kafka.protocol.producer.transaction import WriteTxnMarkersRequest

from minikafka.broker.coordinator.transaction.transaction_metadata import TransactionMetadata, TxnTransitMetadata
from minikafka.broker.coordinator.transaction.transaction_state_manager import TransactionStateManager
from minikafka.broker.metadata.metadata_cache import MetadataCache
from minikafka.broker.network.broker_clients import BrokerClients
from minikafka.broker.network.network_client import DisconnectedError
from minikafka.protocol.errors import ErrorCode

log = logging.getLogger("minikafka.transaction_marker_channel_manager")

TopicPartition = tuple[str, int]
WRITE_TXN_MARKERS_VERSION = 1
RETRY_BACKOFF_S = 0.1  # Kafka's retry.backoff.ms for the inter-broker send thread

_RETRIABLE = frozenset((ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                        ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                        ErrorCode.REQUEST_TIMED_OUT, ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.NETWORK_EXCEPTION))
_FENCED = frozenset((ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED))


class TransactionMarkerChannelManager:
    def __init__(self, metadata_cache: MetadataCache, state_manager: TransactionStateManager,
                 clients: BrokerClients, is_held: Callable[[int], bool] | None = None) -> None:
        self.metadata_cache = metadata_cache
        self.state_manager = state_manager
        self.clients = clients
        # Fault injection: markers to a broker it names wait (are retried) until the fault is cleared.
        self._is_held = is_held
        self._nursery: trio.Nursery | None = None
        # By partition of `__transaction_state`: the sends of its transactions, cancelled when it is unloaded.
        self._scopes: dict[int, set[trio.CancelScope]] = defaultdict(set)

    async def run(self, *, task_status: trio.TaskStatus = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(self.clients.run)
            self._nursery = nursery
            task_status.started()
            try:
                await trio.sleep_forever()
            finally:
                self._nursery = None

    def add_txn_markers_to_send(self, coordinator_epoch: int, commit: bool, metadata: TransactionMetadata,
                                complete: TxnTransitMetadata) -> None:
        """Write the markers of `metadata`'s transaction (in PrepareCommit or PrepareAbort), then `complete`."""
        if self._nursery is None:
            log.warning("markers of %r not sent: the coordinator is not running", metadata.transactional_id)
            return
        self._nursery.start_soon(self._complete, coordinator_epoch, commit, metadata, complete)

    def remove_markers_for_txn_topic_partition(self, partition: int) -> None:
        for scope in self._scopes.pop(partition, set()):
            scope.cancel()

    async def _complete(self, coordinator_epoch: int, commit: bool, metadata: TransactionMetadata,
                        complete: TxnTransitMetadata) -> None:
        transactional_id = metadata.transactional_id
        txn_partition = self.state_manager.partition_for(transactional_id)
        scope = trio.CancelScope()
        self._scopes[txn_partition].add(scope)
        try:
            with scope:
                if await self._write_markers(coordinator_epoch, commit, metadata):
                    await self._write_completion(coordinator_epoch, metadata, complete)
        except Exception:  # a bug here must not take the broker down; the next coordinator resends the markers
            log.exception("ending the transaction of %r failed", transactional_id)
        finally:
            self._scopes[txn_partition].discard(scope)

    def _still_coordinating(self, coordinator_epoch: int, metadata: TransactionMetadata) -> bool:
        try:
            current = self.state_manager.get_transaction_state(metadata.transactional_id)
        except Exception:  # noqa: BLE001 - any refusal means another coordinator has it now
            return False
        return current is not None and current.coordinator_epoch == coordinator_epoch and current.metadata is metadata

    async def _write_markers(self, coordinator_epoch: int, commit: bool, metadata: TransactionMetadata) -> bool:
        """Until every partition has its marker: True, or False when this coordinator must give up."""
        while metadata.topic_partitions:
            if not self._still_coordinating(coordinator_epoch, metadata):
                log.info("markers of %r abandoned: this broker no longer coordinates it", metadata.transactional_id)
                return False
            by_leader: dict[int, list[TopicPartition]] = defaultdict(list)
            for tp in sorted(metadata.topic_partitions):
                topic = self.metadata_cache.topics.get(tp[0])
                partition = topic.partitions.get(tp[1]) if topic is not None else None
                if partition is None:
                    log.info("transaction %r: partition %s-%d no longer exists, no marker for it",
                             metadata.transactional_id, *tp)
                    metadata.remove_partition(tp)
                elif partition.leader >= 0 and not (self._is_held is not None and self._is_held(partition.leader)):
                    by_leader[partition.leader].append(tp)
            answers: dict[TopicPartition, ErrorCode] = {}
            async with trio.open_nursery() as nursery:
                for leader, tps in by_leader.items():
                    nursery.start_soon(self._send, leader, coordinator_epoch, commit, metadata, tps, answers)
            for tp, code in answers.items():
                if code == ErrorCode.NONE or code == ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT:
                    metadata.remove_partition(tp)
                elif code in _FENCED:
                    log.info("markers of %r stopped: %s-%d answered %s (a newer coordinator has it)",
                             metadata.transactional_id, *tp, code.name)
                    return False
                elif code not in _RETRIABLE:
                    log.error("marker of %r for %s-%d failed with %s; retrying", metadata.transactional_id, *tp,
                              code.name)
            if metadata.topic_partitions:
                await trio.sleep(RETRY_BACKOFF_S)
        return True

    async def _send(self, leader: int, coordinator_epoch: int, commit: bool, metadata: TransactionMetadata,
                    partitions: list[TopicPartition], answers: dict[TopicPartition, ErrorCode]) -> None:
        client = await self.clients.get(leader)
        if client is None:
            return
        by_topic: dict[str, list[int]] = defaultdict(list)
        for topic, index in partitions:
            by_topic[topic].append(index)
        R = WriteTxnMarkersRequest[WRITE_TXN_MARKERS_VERSION]
        request = R(markers=[R.WritableTxnMarker(
            producer_id=metadata.producer_id, producer_epoch=metadata.producer_epoch, transaction_result=commit,
            topics=[R.WritableTxnMarker.WritableTxnMarkerTopic(name=t, partition_indexes=ids)
                    for t, ids in by_topic.items()],
            coordinator_epoch=coordinator_epoch)])
        try:
            response = await client.send(request)
        except DisconnectedError as exc:
            log.info("WriteTxnMarkers to broker %d failed: %s; retrying", leader, exc)
            return
        for marker in response.markers:
            for topic in marker.topics:
                for p in topic.partitions:
                    answers[(topic.name, p.partition_index)] = ErrorCode(p.error_code)

    async def _write_completion(self, coordinator_epoch: int, metadata: TransactionMetadata,
                                complete: TxnTransitMetadata) -> None:
        while True:
            error = await self.state_manager.append_transaction_to_log(metadata.transactional_id, coordinator_epoch,
                                                                       complete, retry_on_error=True)
            if error != ErrorCode.COORDINATOR_NOT_AVAILABLE:
                if error == ErrorCode.NONE:
                    log.debug("transaction %r completed: %s", metadata.transactional_id, complete.txn_state.state_name)
                return
            await trio.sleep(RETRY_BACKOFF_S)
