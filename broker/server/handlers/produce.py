"""Produce (v3-13, advertised from v0): appends to partition leaders.

Produce: Kafka 4 dropped v0-2 but still advertises them, because librdkafka needs to see them (KAFKA-18659); a
v0-2 request closes the connection, as any version outside the accepted range does. Per version:
- v3+: message format v2 only, exactly one record batch per partition (INVALID_RECORD otherwise); transactional
  batches need the request's transactional id and, with an authorizer, WRITE on it
  (TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition otherwise, as Kafka's authorization answers); each
  topic needs WRITE (TOPIC_AUTHORIZATION_FAILED for its partitions, before any other check of them, so a topic a
  principal may not write is never revealed as unknown); a transactional batch opens its producer's transaction in the
  partition, and a plain batch from a producer whose transaction there is open is refused (INVALID_TXN_STATE);
  with transaction.partition.verification.enable (the default) a batch that would open its producer's transaction
  in a partition is first checked with the transaction coordinator (KIP-890 part 1, add_partitions_to_txn_manager:
  INVALID_TXN_STATE, or v11+ TRANSACTION_ABORTABLE, for a partition not in the transaction; transactional records
  of more than one producer in a request are INVALID_PRODUCER_ID_MAPPING; a coordinator that cannot answer now is
  NOT_ENOUGH_REPLICAS, which every producer retries);
  acks must be 0, 1 or -1 (INVALID_REQUIRED_ACKS);
- v5+: each partition's answer carries the log start offset; v8+: record errors and an error message (KIP-467):
  a batch refused for some of its records (a timestamp out of range, no key on a compacted topic) lists each;
- v9+: flexible; v10+: NOT_LEADER_OR_FOLLOWER carries the current leader and epoch and the leaders' endpoints
  (KIP-951), so the producer moves without a metadata round trip; v11: TRANSACTION_ABORTABLE (KIP-890);
- v12+ (transaction version 2, KIP-890 part 2): a transactional batch adds its partition to the transaction at the
  coordinator, whatever transaction.partition.verification.enable says; CONCURRENT_TRANSACTIONS (the previous
  transaction still ending) is retried here every add.partitions.to.txn.retry.backoff.ms for at most
  add.partitions.to.txn.retry.backoff.max.ms, then answered as itself;
- v13: topics by id (UNKNOWN_TOPIC_ID when the id is not known).
acks=0 gets no response at all; when such a produce fails the connection is closed, the only signal that
producer gets. acks=-1 needs the ISR to reach min.insync.replicas (NOT_ENOUGH_REPLICAS, before anything is
appended) and is answered once the ISR has the records, within the request's timeout_ms (REQUEST_TIMED_OUT
otherwise; NOT_LEADER_OR_FOLLOWER if this broker stops leading the partition meanwhile). A waiting produce whose
client closes its connection is dropped. The request's bytes count toward the client's producer_byte_rate and,
but for acks=0, its handling time toward request_percentage; a client over either gets the throttle time in the
response, and its connection is muted as long (client_quota_manager).
"""
from __future__ import annotations

import logging
from typing import Any

import trio
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.producer.produce import ProduceRequest

from minikafka.broker.network.socket_server import CloseConnection
from minikafka.broker.security.acl import AclOperation, ResourceType
from minikafka.broker.server.add_partitions_to_txn_manager import TransactionSupportedOperation
from minikafka.broker.server.broker_services import RequestContext
from minikafka.broker.server.handlers.common import resolve_topic
from minikafka.broker.server.handlers.leader_hints import node_endpoints
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.protocol.record_batch import HEADER_SIZE, parse_header
from minikafka.storage.log_validator import RecordValidationError

log = logging.getLogger("minikafka.produce")

# Kafka 4 still advertises Produce from v0 (KAFKA-18659: librdkafka needs it) but refuses v0-2 requests.
PRODUCE_ADVERTISED_MIN = 0
MAGIC_V2 = 2
_RETRIABLE_AS_NOT_ENOUGH_REPLICAS = frozenset((
    ErrorCode.NETWORK_EXCEPTION, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_COORDINATOR))


def _more_than_one_batch(records: bytes) -> bool:
    """Kafka's ProduceRequest.validateRecords: v3+ carries exactly one v2 batch per partition."""
    if len(records) < HEADER_SIZE:
        return False  # too short to be a batch: the log's validation reports it as corrupt
    header = parse_header(records)
    return header.magic == MAGIC_V2 and 0 <= header.size < len(records)


async def _verify_transaction(ctx: RequestContext, transactional_id: str,
                              entries: dict[tuple[str, int], bytearray]) -> dict[tuple[str, int], ErrorCode]:
    """KIP-890: the partitions where a transactional batch would open its producer's transaction are checked with
    the coordinator first (part 1), or added to the transaction there (part 2, Produce v12+); the produce error of
    each that is not in the transaction (Kafka's ReplicaManager.handleProduceAppend)."""
    operation = TransactionSupportedOperation.for_produce(ctx.version)
    config = ctx.services.config
    if not (operation.supports_epoch_bump or config.get("transaction.partition.verification.enable")):
        return {}
    replica_manager = ctx.services.replica_manager
    producers: set[tuple[int, int]] = set()
    unverified = []
    for tp, records in entries.items():
        if not _is_transactional(records):
            continue
        header = parse_header(records)
        producers.add((header.producer_id, header.producer_epoch))
        partition = replica_manager.get_partition(*tp)
        if partition is None or not partition.is_leader:
            continue  # the append answers for it
        if not partition.log.producer_state.has_ongoing_transaction(header.producer_id, header.producer_epoch):
            unverified.append(tp)
    if len(producers) > 1:
        return dict.fromkeys(entries, ErrorCode.INVALID_PRODUCER_ID_MAPPING)
    if not unverified:
        return {}
    ((producer_id, producer_epoch),) = producers
    manager = ctx.services.add_partitions_to_txn
    errors = await manager.add_or_verify_transaction(transactional_id, producer_id, producer_epoch, unverified,
                                                     operation)
    if operation.supports_epoch_bump:
        # A transaction version 2 producer's first batch often comes while its previous transaction's markers are
        # still being written: retry a while here rather than have the whole produce retried.
        backoff_s = config.get("add.partitions.to.txn.retry.backoff.ms") / 1000
        deadline = trio.current_time() + min(config.get("add.partitions.to.txn.retry.backoff.max.ms"),
                                             config.get("request.timeout.ms")) / 1000
        while ErrorCode.CONCURRENT_TRANSACTIONS in errors.values() and trio.current_time() + backoff_s < deadline:
            await trio.sleep(backoff_s)
            errors = await manager.add_or_verify_transaction(transactional_id, producer_id, producer_epoch,
                                                             unverified, operation)
    return {tp: _as_produce_error(code, operation) for tp, code in errors.items()}


def _as_produce_error(code: ErrorCode, operation: TransactionSupportedOperation) -> ErrorCode:
    """A coordinator's error as a producer retries it: NOT_ENOUGH_REPLICAS (retried without a metadata refresh) for
    a coordinator that cannot answer now; CONCURRENT_TRANSACTIONS stays itself for a transaction version 2 client,
    which knows it."""
    if code in _RETRIABLE_AS_NOT_ENOUGH_REPLICAS or (code == ErrorCode.CONCURRENT_TRANSACTIONS
                                                     and not operation.supports_epoch_bump):
        return ErrorCode.NOT_ENOUGH_REPLICAS
    return code


def _is_transactional(records: bytes | bytearray | None) -> bool:
    return records is not None and len(records) >= HEADER_SIZE and parse_header(records).is_transactional


def _record_errors(PR: Any, error: KafkaError, version: int) -> list:
    """v8+ (KIP-467): the records the log validator refused one by one, each with its index in the batch."""
    if version < 8 or not isinstance(error, RecordValidationError):
        return []
    return [PR.BatchIndexAndErrorMessage(batch_index=e.batch_index, batch_index_error_message=e.message)
            for e in error.record_errors]


def produce_throttle_time_ms(ctx: RequestContext, acks: int) -> int:
    """A produce's throttle: its request bytes against producer_byte_rate, and, unless acks=0 (no response to
    carry it), its handling time against request_percentage."""
    bandwidth = ctx.services.client_quotas.produce.record_and_get_throttle_time_ms(ctx.user, ctx.client_id,
                                                                                   ctx.request_size)
    ctx.throttle_time_ms = max(bandwidth, ctx.request_throttle_time_ms(exempt=acks == 0))
    return ctx.throttle_time_ms


async def handle_produce(ctx: RequestContext, request: ProduceRequest) -> ApiMessage | None:
    R = ctx.response_class
    PR = R.TopicProduceResponse.PartitionProduceResponse
    by_id = ctx.version >= 13
    acks = request.acks
    entries: dict[tuple[str, int], bytearray] = {}
    # Keyed by (topic's position in the request, partition): the error to answer, or the partition appended to.
    errors: dict[tuple[int, int], ErrorCode] = {}
    targets: dict[tuple[int, int], tuple[str, int]] = {}
    # Kafka authorizes transactional records by the request's transactional id (WRITE on it): without one, or
    # without the right, every partition is refused.
    transactional_refused = any(_is_transactional(p.records) for t in request.topic_data
                                for p in t.partition_data) and (
        request.transactional_id is None
        or not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id))
    for ti, t in enumerate(request.topic_data):
        topic, err = resolve_topic(ctx, None if by_id else t.name, t.topic_id if by_id else None)
        name = topic.name if topic is not None else None if by_id else t.name
        authorized = name is None or ctx.authorize(AclOperation.WRITE, ResourceType.TOPIC, name)
        for p in t.partition_data:
            if transactional_refused:
                errors[(ti, p.index)] = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            elif not authorized:
                errors[(ti, p.index)] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif acks not in (0, 1, -1):
                errors[(ti, p.index)] = ErrorCode.INVALID_REQUIRED_ACKS
            elif topic is None:
                errors[(ti, p.index)] = err
            elif p.index not in topic.partitions:
                errors[(ti, p.index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif p.records is None or len(p.records) == 0 or _more_than_one_batch(p.records):
                errors[(ti, p.index)] = ErrorCode.INVALID_RECORD
            else:
                targets[(ti, p.index)] = (topic.name, p.index)
                entries[(topic.name, p.index)] = bytearray(p.records)
    replica_manager = ctx.services.replica_manager
    if request.transactional_id is not None:
        refused = await _verify_transaction(ctx, request.transactional_id, entries)
        for position, tp in list(targets.items()):
            if tp in refused:
                errors[position] = refused[tp]
                del targets[position], entries[tp]
    results = await replica_manager.append_records(request.timeout_ms, acks, entries, client=ctx.client,
                                                   stop_early=ctx.draining)
    throttle_time_ms = produce_throttle_time_ms(ctx, acks)
    if acks == 0:
        if errors or any(r.error for r in results.values()):
            # Kafka closes an acks=0 producer's connection on error: it is the only signal such a client gets.
            raise CloseConnection("acks=0 produce failed")
        return None
    topics_out = []
    leaders: set[int] = set()
    for ti, t in enumerate(request.topic_data):
        parts = []
        for p in t.partition_data:
            code = errors.get((ti, p.index))
            if code is not None:
                parts.append(PR(index=p.index, error_code=code, base_offset=-1, log_append_time_ms=-1,
                                log_start_offset=-1, record_errors=[], error_message=None))
                continue
            tp = targets[(ti, p.index)]
            result = results[tp]
            if result.error is not None:
                hint = {}
                if result.error.code == ErrorCode.NOT_LEADER_OR_FOLLOWER and ctx.version >= 10:
                    leader_id, leader_epoch = replica_manager.current_leader(tp)
                    hint["current_leader"] = PR.LeaderIdAndEpoch(leader_id=leader_id, leader_epoch=leader_epoch)
                    leaders.add(leader_id)
                # An acks=all append that then failed (timed out, ISR shrunk, leadership lost) keeps its offsets.
                info = result.info
                parts.append(PR(index=p.index, error_code=result.error.code,
                                base_offset=info.first_offset if info else -1,
                                log_append_time_ms=info.log_append_time if info else -1,
                                log_start_offset=info.log_start_offset if info else -1,
                                record_errors=_record_errors(PR, result.error, ctx.version),
                                error_message=result.error.message, **hint))
            else:
                info = result.info
                assert info is not None  # an append without an error has its outcome
                parts.append(PR(index=p.index, error_code=ErrorCode.NONE, base_offset=info.first_offset,
                                log_append_time_ms=info.log_append_time, log_start_offset=info.log_start_offset,
                                record_errors=[], error_message=None))
        topics_out.append(R.TopicProduceResponse(name=t.name if not by_id else None,
                                                 topic_id=t.topic_id if by_id else None,
                                                 partition_responses=parts))
    extra = {"node_endpoints": node_endpoints(ctx, R.NodeEndpoint, leaders)} if ctx.version >= 10 else {}
    return ctx.response(responses=topics_out, throttle_time_ms=throttle_time_ms, **extra)


HANDLERS = {ApiKey.PRODUCE: handle_produce}
VERSIONS = {ApiKey.PRODUCE: (PRODUCE_ADVERTISED_MIN, 13)}
