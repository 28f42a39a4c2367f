"""A partition leader asks the transaction coordinator about a partition before it appends a producer's first
transactional batch there (KIP-890; Kafka's AddPartitionsToTxnManager): whether the partition is in the
transaction (part 1, verify), or to add it (part 2, a transaction version 2 client that sends no AddPartitionsToTxn).

Without the check, a batch that arrives after its transaction was aborted (a slow retry) would open a transaction
no coordinator knows of, and hold the partition's last stable offset forever. The question is an
AddPartitionsToTxn v4+ request, verify_only unless adding, sent over the inter-broker listener to the leader of
the id's `__transaction_state` partition. What the request version of the client's Produce or TxnOffsetCommit says
it understands picks the operation (Kafka's TransactionSupportedOperation): below Produce v11 / TxnOffsetCommit v4
TRANSACTION_ABORTABLE is answered as INVALID_TXN_STATE; from Produce v12 / TxnOffsetCommit v5 the partition is
added. PRODUCER_FENCED is INVALID_PRODUCER_EPOCH, which producers handle there.
"""
from __future__ import annotations

import logging
from collections import defaultdict
from enum import Enum

from kafka.protocol.producer.transaction import AddPartitionsToTxnRequest

from minikafka.broker.coordinator.coordinator_log import partition_for
from minikafka.broker.metadata.metadata_cache import MetadataCache
from minikafka.broker.network.broker_clients import BrokerClients
from minikafka.broker.network.network_client import DisconnectedError
from minikafka.protocol.errors import ErrorCode
from minikafka.protocol.internal_topics import TRANSACTION_STATE_TOPIC

log = logging.getLogger("minikafka.add_partitions_to_txn_manager")

TopicPartition = tuple[str, int]
ADD_PARTITIONS_TO_TXN_VERSION = 5


class TransactionSupportedOperation(Enum):
    """What a client's request version says it understands (Kafka's TransactionSupportedOperation)."""

    DEFAULT_ERROR = "default error"  # verify; TRANSACTION_ABORTABLE unknown to the client
    GENERIC_ERROR_SUPPORTED = "generic error supported"  # verify
    ADD_PARTITION = "add partition"  # add the partition (transaction version 2)

    @property
    def supports_epoch_bump(self) -> bool:
        return self is TransactionSupportedOperation.ADD_PARTITION

    @classmethod
    def for_produce(cls, version: int) -> TransactionSupportedOperation:
        return cls._by_version(version, generic_from=11, add_from=12)

    @classmethod
    def for_txn_offset_commit(cls, version: int) -> TransactionSupportedOperation:
        return cls._by_version(version, generic_from=4, add_from=5)

    @classmethod
    def _by_version(cls, version: int, *, generic_from: int, add_from: int) -> TransactionSupportedOperation:
        if version >= add_from:
            return cls.ADD_PARTITION
        return cls.GENERIC_ERROR_SUPPORTED if version >= generic_from else cls.DEFAULT_ERROR


class AddPartitionsToTxnManager:
    def __init__(self, metadata_cache: MetadataCache, clients: BrokerClients) -> None:
        self.metadata_cache = metadata_cache
        self.clients = clients

    async def add_or_verify_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                        partitions: list[TopicPartition], operation: TransactionSupportedOperation
                                        ) -> dict[TopicPartition, ErrorCode]:
        """The coordinator's error for each partition it did not verify (or add); {} when all are in."""
        errors = await self._ask_coordinator(transactional_id, producer_id, producer_epoch, partitions,
                                             verify_only=not operation.supports_epoch_bump)
        answer = {}
        for tp, code in errors.items():
            if code == ErrorCode.NONE:
                continue
            if code == ErrorCode.PRODUCER_FENCED:
                code = ErrorCode.INVALID_PRODUCER_EPOCH
            elif code == ErrorCode.TRANSACTION_ABORTABLE and operation is TransactionSupportedOperation.DEFAULT_ERROR:
                code = ErrorCode.INVALID_TXN_STATE
            answer[tp] = code
        return answer

    async def _ask_coordinator(self, transactional_id: str, producer_id: int, producer_epoch: int,
                               partitions: list[TopicPartition], *, verify_only: bool
                               ) -> dict[TopicPartition, ErrorCode]:
        def every(code: ErrorCode) -> dict[TopicPartition, ErrorCode]:
            return dict.fromkeys(partitions, code)

        topic = self.metadata_cache.topics.get(TRANSACTION_STATE_TOPIC)
        state_partition = (topic.partitions.get(partition_for(transactional_id, len(topic.partitions)))
                           if topic is not None else None)
        if state_partition is None or state_partition.leader < 0:
            return every(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        client = await self.clients.get(state_partition.leader)
        if client is None:
            return every(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        by_topic: dict[str, list[int]] = defaultdict(list)
        for name, index in partitions:
            by_topic[name].append(index)
        R = AddPartitionsToTxnRequest[ADD_PARTITIONS_TO_TXN_VERSION]
        T = R.AddPartitionsToTxnTransaction
        request = R(transactions=[T(transactional_id=transactional_id, producer_id=producer_id,
                                    producer_epoch=producer_epoch, verify_only=verify_only,
                                    topics=[T.AddPartitionsToTxnTopic(name=name, partitions=indexes)
                                            for name, indexes in by_topic.items()])])
        try:
            response = await client.send(request)
        except DisconnectedError as exc:
            log.info("verifying the transaction of %r failed: %s", transactional_id, exc)
            return every(ErrorCode.NETWORK_EXCEPTION)
        if response.error_code != ErrorCode.NONE:
            code = ErrorCode(response.error_code)
            return every(ErrorCode.INVALID_TXN_STATE if code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED else code)
        found = every(ErrorCode.NONE)
        for result in response.results_by_transaction:
            for topic_result in result.topic_results:
                for p in topic_result.results_by_partition:
                    found[(topic_result.name, p.partition_index)] = ErrorCode(p.partition_error_code)
        return found
