"""Produce (v3-13, advertised from v0) and InitProducerId (v0-6): appends to partition leaders, producer ids.

Produce: Kafka 4 dropped v0-2 but still advertises them, because librdkafka needs to see them (KAFKA-18659); a
v0-2 request closes the connection, as any version outside the accepted range does. Per version:
- v3+: message format v2 only, exactly one record batch per partition (INVALID_RECORD otherwise); a transactional
  id is refused with TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as transactions are not served; acks must be 0, 1 or
  -1 (INVALID_REQUIRED_ACKS);
- v5+: each partition's answer carries the log start offset; v8+: record errors and an error message (KIP-467);
- v9+: flexible; v10-12 add nothing this broker sends (KIP-951 leader hints, KIP-890 error codes);
- v13: topics by id (UNKNOWN_TOPIC_ID when the id is not known).
acks=0 gets no response at all; when such a produce fails the connection is closed, the only signal that
producer gets. acks=-1 needs the ISR to reach min.insync.replicas (NOT_ENOUGH_REPLICAS).

InitProducerId: an idempotent producer gets a fresh producer id at epoch 0 on every call (so the v3+ producer id
and epoch a producer sends to resume are read past); a transactional id is refused with
TRANSACTIONAL_ID_AUTHORIZATION_FAILED, which every client treats as fatal. v2+ is flexible; v6's two-phase commit
fields (KIP-939) are read past.
"""
from __future__ import annotations

import logging

from kafka.protocol.api_message import ApiMessage
from kafka.protocol.producer.produce import ProduceRequest
from kafka.protocol.producer.transaction import InitProducerIdRequest

from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.errors import ErrorCode
from minikafka.protocol.record_batch import HEADER_SIZE, parse_header

from ..kafka_apis import RequestContext
from ..server import CloseConnection
from .common import resolve_topic

log = logging.getLogger("minikafka.produce")

# Kafka 4 still advertises Produce from v0 (KAFKA-18659: librdkafka needs it) but refuses v0-2 requests.
PRODUCE_ADVERTISED_MIN = 0
MAGIC_V2 = 2


def _more_than_one_batch(records: bytes) -> bool:
    """Kafka's ProduceRequest.validateRecords: v3+ carries exactly one v2 batch per partition."""
    if len(records) < HEADER_SIZE:
        return False  # too short to be a batch: the log's validation reports it as corrupt
    header = parse_header(records)
    return header.magic == MAGIC_V2 and 0 <= header.size < len(records)


async def handle_produce(ctx: RequestContext, request: ProduceRequest) -> ApiMessage | None:
    R = ctx.response_class
    PR = R.TopicProduceResponse.PartitionProduceResponse
    by_id = ctx.version >= 13
    acks = request.acks
    entries: dict[tuple[str, int], bytearray] = {}
    # Keyed by (topic's position in the request, partition): the error to answer, or the partition appended to.
    errors: dict[tuple[int, int], ErrorCode] = {}
    targets: dict[tuple[int, int], tuple[str, int]] = {}
    for ti, t in enumerate(request.topic_data):
        topic, err = resolve_topic(ctx, None if by_id else t.name, t.topic_id if by_id else None)
        for p in t.partition_data:
            if acks not in (0, 1, -1):
                errors[(ti, p.index)] = ErrorCode.INVALID_REQUIRED_ACKS
            elif request.transactional_id is not None:
                errors[(ti, p.index)] = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            elif topic is None:
                errors[(ti, p.index)] = err
            elif p.index not in topic.partitions:
                errors[(ti, p.index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif p.records is None or len(p.records) == 0 or _more_than_one_batch(p.records):
                errors[(ti, p.index)] = ErrorCode.INVALID_RECORD
            else:
                targets[(ti, p.index)] = (topic.name, p.index)
                entries[(topic.name, p.index)] = bytearray(p.records)
    results = ctx.broker.replica_manager.append_records(acks, entries)
    if acks == 0:
        if errors or any(r.error for r in results.values()):
            # Kafka closes an acks=0 producer's connection on error: it is the only signal such a client gets.
            raise CloseConnection("acks=0 produce failed")
        return None
    topics_out = []
    for ti, t in enumerate(request.topic_data):
        parts = []
        for p in t.partition_data:
            code = errors.get((ti, p.index))
            if code is not None:
                parts.append(PR(index=p.index, error_code=code, base_offset=-1, log_append_time_ms=-1,
                                log_start_offset=-1, record_errors=[], error_message=None))
                continue
            result = results[targets[(ti, p.index)]]
            if result.error is not None:
                parts.append(PR(index=p.index, error_code=result.error.code, base_offset=-1, log_append_time_ms=-1,
                                log_start_offset=-1, record_errors=[], error_message=result.error.message))
            else:
                info = result.info
                assert info is not None  # an append without an error has its outcome
                parts.append(PR(index=p.index, error_code=ErrorCode.NONE, base_offset=info.first_offset,
                                log_append_time_ms=info.log_append_time, log_start_offset=info.log_start_offset,
                                record_errors=[], error_message=None))
        topics_out.append(R.TopicProduceResponse(name=t.name if not by_id else None,
                                                 topic_id=t.topic_id if by_id else None,
                                                 partition_responses=parts))
    return ctx.response(responses=topics_out, throttle_time_ms=0)


async def handle_init_producer_id(ctx: RequestContext, request: InitProducerIdRequest) -> ApiMessage:
    if request.transactional_id is not None:
        # A fatal error in every client, so a transactional producer fails at once instead of retrying
        # until its max.block.ms; the log says why.
        log.warning("InitProducerId for transactional id %r refused: transactions are not supported",
                    request.transactional_id)
        return ctx.response(throttle_time_ms=0, error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                            producer_id=-1, producer_epoch=-1)
    # As Kafka does for idempotent producers: every call gets a fresh producer id at epoch 0.
    producer_id = ctx.broker.controller.allocate_producer_id()
    return ctx.response(throttle_time_ms=0, error_code=ErrorCode.NONE, producer_id=producer_id, producer_epoch=0)


HANDLERS = {ApiKey.PRODUCE: handle_produce, ApiKey.INIT_PRODUCER_ID: handle_init_producer_id}
VERSIONS = {ApiKey.PRODUCE: (PRODUCE_ADVERTISED_MIN, 13)}
