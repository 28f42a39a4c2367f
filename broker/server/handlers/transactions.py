"""WriteTxnMarkers (v1-2): the transaction coordinator asks this broker, as partition leader, to end a producer's
transaction in its partitions with a COMMIT or ABORT marker.

Per marker (one producer) the partitions are appended to as acks=all with origin COORDINATOR, waiting at most
request.timeout.ms; each partition is answered with the append's error: NOT_LEADER_OR_FOLLOWER where this broker
does not lead it (the coordinator retries at the current leader), UNKNOWN_TOPIC_OR_PARTITION where it has no
replica, INVALID_PRODUCER_EPOCH for a marker of an older producer epoch and TRANSACTION_COORDINATOR_FENCED for one
from an older coordinator epoch than the partition has seen (nothing is appended then). The markers of a request
are written concurrently; the response comes when all are done. v1 is flexible; v2 adds the transaction version
of KIP-890, which changes nothing in what is written.
"""
from __future__ import annotations

import time

import trio
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.producer.transaction import WriteTxnMarkersRequest

from minikafka.broker.replication.delayed_produce import AppendResult
from minikafka.broker.server.broker_services import RequestContext
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.end_transaction_marker import ControlRecordType, EndTransactionMarker, build_marker_batch
from minikafka.protocol.errors import ErrorCode
from minikafka.storage.log import AppendOrigin

TopicPartition = tuple[str, int]


async def handle_write_txn_markers(ctx: RequestContext, request: WriteTxnMarkersRequest) -> ApiMessage:
    replica_manager = ctx.services.replica_manager
    timeout_ms = ctx.services.config.get("request.timeout.ms")
    answers: list[dict[TopicPartition, ErrorCode]] = [{} for _ in request.markers]

    async def write(i: int, marker: WriteTxnMarkersRequest.WritableTxnMarker) -> None:
        end_marker = EndTransactionMarker(
            ControlRecordType.COMMIT if marker.transaction_result else ControlRecordType.ABORT,
            marker.coordinator_epoch)
        entries: dict[TopicPartition, bytearray] = {}
        for t in marker.topics:
            for index in t.partition_indexes:
                tp = (t.name, index)
                if replica_manager.get_partition(*tp) is None:
                    answers[i][tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    entries[tp] = build_marker_batch(marker.producer_id, marker.producer_epoch, end_marker,
                                                     time.time_ns() // 1_000_000)
        if not entries:
            return
        results: dict[TopicPartition, AppendResult] = await replica_manager.append_records(
            timeout_ms, -1, entries, client=ctx.client, stop_early=ctx.draining, origin=AppendOrigin.COORDINATOR)
        for tp, result in results.items():
            answers[i][tp] = result.error.code if result.error is not None else ErrorCode.NONE

    async with trio.open_nursery() as nursery:
        for i, marker in enumerate(request.markers):
            nursery.start_soon(write, i, marker)
    R = ctx.response_class
    M = R.WritableTxnMarkerResult
    T = M.WritableTxnMarkerTopicResult
    markers = []
    for marker, answer in zip(request.markers, answers, strict=True):
        topics: dict[str, list] = {}
        for (topic, index), code in answer.items():
            topics.setdefault(topic, []).append(T.WritableTxnMarkerPartitionResult(partition_index=index,
                                                                                   error_code=code))
        markers.append(M(producer_id=marker.producer_id,
                         topics=[T(name=name, partitions=parts) for name, parts in topics.items()]))
    return ctx.response(markers=markers)


HANDLERS = {ApiKey.WRITE_TXN_MARKERS: handle_write_txn_markers}
