"""A partition leader asks the transaction coordinator whether a partition is in a producer's transaction before
it appends the producer's first transactional batch there (KIP-890 part 1; Kafka's AddPartitionsToTxnManager).

Without the check, a batch that arrives after its transaction was aborted (a slow retry) would open a transaction
no coordinator knows of, and hold the partition's last stable offset forever. The question is an
AddPartitionsToTxn v4 request with verify_only, sent over the inter-broker listener to the leader of the id's
`__transaction_state` partition. Its answers become produce errors as Kafka's do: PRODUCER_FENCED is
INVALID_PRODUCER_EPOCH; TRANSACTION_ABORTABLE only for producers that know it (Produce v11+), INVALID_TXN_STATE for
the others; a coordinator that cannot be reached, moved or is busy (CONCURRENT_TRANSACTIONS) becomes
NOT_ENOUGH_REPLICAS, which every client retries without refreshing its metadata.
"""
from __future__ import annotations

import logging
from collections import defaultdict

from kafka.protocol.producer.transaction import AddPartitionsToTxnRequest

from minikafka.broker.coordinator.coordinator_log import partition_for
from minikafka.broker.metadata.metadata_cache import MetadataCache
from minikafka.broker.network.broker_clients import BrokerClients
from minikafka.broker.network.network_client import DisconnectedError
from minikafka.protocol.errors import ErrorCode
from minikafka.protocol.internal_topics import TRANSACTION_STATE_TOPIC

log = logging.getLogger("minikafka.add_partitions_to_txn_manager")

TopicPartition = tuple[str, int]
VERIFY_VERSION = 4
# Produce versions above this understand TRANSACTION_ABORTABLE (KIP-890).
GENERIC_ERROR_PRODUCE_VERSION = 10
_RETRIABLE_AS_NOT_ENOUGH_REPLICAS = frozenset((
    ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.NETWORK_EXCEPTION, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR))


class AddPartitionsToTxnManager:
    def __init__(self, metadata_cache: MetadataCache, clients: BrokerClients) -> None:
        self.metadata_cache = metadata_cache
        self.clients = clients

    async def verify_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                 partitions: list[TopicPartition], produce_version: int) -> dict[TopicPartition,
                                                                                                 ErrorCode]:
        """The produce error of each partition that is not verified to be in the transaction; {} when all are."""
        errors = await self._ask_coordinator(transactional_id, producer_id, producer_epoch, partitions)
        generic = produce_version > GENERIC_ERROR_PRODUCE_VERSION
        answer = {}
        for tp, code in errors.items():
            if code == ErrorCode.NONE:
                continue
            if code == ErrorCode.PRODUCER_FENCED:
                code = ErrorCode.INVALID_PRODUCER_EPOCH
            elif code == ErrorCode.TRANSACTION_ABORTABLE and not generic:
                code = ErrorCode.INVALID_TXN_STATE
            if code in _RETRIABLE_AS_NOT_ENOUGH_REPLICAS:
                code = ErrorCode.NOT_ENOUGH_REPLICAS
            answer[tp] = code
        return answer

    async def _ask_coordinator(self, transactional_id: str, producer_id: int, producer_epoch: int,
                               partitions: list[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
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
        R = AddPartitionsToTxnRequest[VERIFY_VERSION]
        T = R.AddPartitionsToTxnTransaction
        request = R(transactions=[T(transactional_id=transactional_id, producer_id=producer_id,
                                    producer_epoch=producer_epoch, verify_only=True,
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
