"""Fetch: byte ranges of partition logs, long-polled in the purgatory until min_bytes or max_wait.

Fetch sessions (KIP-227) are not kept: every response carries session id 0, which tells clients to send
full fetch requests, as a Kafka broker whose session cache is full does.
"""
from __future__ import annotations

import time

from minikafka.protocol.errors import ErrorCode

from ..kafka_apis import RequestContext
from ..replica_manager import FetchPartitionRequest, FetchPartitionResult
from .common import resolve_topic

READ_COMMITTED = 1


async def handle_fetch(ctx: RequestContext, request) -> object:
    R = ctx.response_class
    if request.session_id != 0 or request.session_epoch > 0:
        code = ErrorCode.FETCH_SESSION_ID_NOT_FOUND if request.session_id else ErrorCode.INVALID_FETCH_SESSION_EPOCH
        return ctx.response(throttle_time_ms=0, error_code=code, session_id=0, responses=[])
    by_id = ctx.version >= 13
    if ctx.version >= 15:
        replica_id = request.replica_state.replica_id if request.replica_state is not None else -1
    else:
        replica_id = request.replica_id
    committed_only = replica_id < 0
    # (topic entry, partition entry, resolved request or the error to answer with)
    plan: list[tuple[object, list[tuple[object, FetchPartitionRequest | None, ErrorCode]]]] = []
    for t in request.topics:
        topic, err = resolve_topic(ctx, None if by_id else t.topic, t.topic_id if by_id else None)
        parts = []
        for p in t.partitions:
            if topic is None:
                parts.append((p, None, err))
            else:
                parts.append((p, FetchPartitionRequest((topic.name, p.partition), p.fetch_offset,
                                                       p.partition_max_bytes, p.current_leader_epoch,
                                                       p.last_fetched_epoch if ctx.version >= 12 else -1),
                              ErrorCode.NONE))
        plan.append((t, parts))
    wanted = [fr for _, parts in plan for _, fr, _ in parts if fr is not None]
    unresolved = any(fr is None for _, parts in plan for _, fr, _ in parts)
    replica_manager = ctx.broker.replica_manager
    deadline = time.monotonic() + max(0, request.max_wait_ms) / 1000
    while True:
        results = await _read_all(replica_manager, wanted, request.max_bytes, committed_only)
        total = sum(len(r.records) for r in results)
        if (total >= request.min_bytes or unresolved or any(r.error or r.diverging_epoch for r in results)
                or time.monotonic() >= deadline or ctx.broker.socket_server.draining):
            break
        await ctx.broker.purgatory.wait_any([fr.topic_partition for fr in wanted], deadline - time.monotonic())
    by_tp = {fr.topic_partition: res for fr, res in zip(wanted, results)}
    responses = []
    PD = R.FetchableTopicResponse.PartitionData
    for t, parts in plan:
        out = []
        for p, fr, err in parts:
            res = by_tp[fr.topic_partition] if fr is not None else FetchPartitionResult()
            code = res.error.code if res.error else err
            fields = dict(partition_index=p.partition, error_code=code, high_watermark=res.high_watermark,
                          last_stable_offset=res.last_stable_offset, log_start_offset=res.log_start_offset,
                          aborted_transactions=[] if request.isolation_level == READ_COMMITTED else None,
                          preferred_read_replica=-1, records=ctx.records(res.records))
            if ctx.version >= 12 and res.diverging_epoch is not None:
                fields["diverging_epoch"] = PD.EpochEndOffset(epoch=res.diverging_epoch[0],
                                                              end_offset=res.diverging_epoch[1])
            if ctx.version >= 12 and code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH):
                fields["current_leader"] = PD.LeaderIdAndEpoch(leader_id=res.leader_id, leader_epoch=res.leader_epoch)
            out.append(PD(**fields))
        responses.append(R.FetchableTopicResponse(topic=None if by_id else t.topic,
                                                  topic_id=t.topic_id if by_id else None, partitions=out))
    return ctx.response(throttle_time_ms=0, error_code=ErrorCode.NONE, session_id=0, responses=responses)


async def _read_all(replica_manager, wanted: list[FetchPartitionRequest], response_max_bytes: int,
                    committed_only: bool) -> list[FetchPartitionResult]:
    """Read every partition within the response's max_bytes; the first non-empty one may exceed it (KIP-74)."""
    remaining = response_max_bytes
    results = []
    for fr in wanted:
        res = await replica_manager.read_partition(fr, max(0, remaining),
                                                   min_one_message=remaining == response_max_bytes,
                                                   committed_only=committed_only)
        remaining -= len(res.records)
        results.append(res)
    return results


HANDLERS = {1: handle_fetch}
