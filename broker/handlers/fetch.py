"""Fetch (v4-18): byte ranges of partition logs, long-polled in the purgatory until min_bytes or max_wait.

Versions 0-3 are gone since Kafka 4.0 (v4 brought the isolation level and message format v2). Per version:
- v4+: read_committed gets an empty aborted-transactions list (there are no transactions), read_uncommitted none;
- v5+: the log start offset in each partition's answer;
- v7+: fetch sessions (KIP-227) are not kept: every response carries session id 0, which tells clients to send
  full fetch requests, as a Kafka broker whose session cache is full does; a request naming a session is answered
  FETCH_SESSION_ID_NOT_FOUND (or INVALID_FETCH_SESSION_EPOCH), and forgotten topics are ignored;
- v9+: the current leader epoch fences a stale or future leader view (KIP-320);
- v11+: the rack id is read past: the preferred read replica is always -1 (the leader);
- v12+: flexible; a last fetched epoch the leader's log diverges from is answered with the diverging epoch and
  its end offset instead of records (KIP-320), and NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH carry the
  current leader and epoch;
- v13+: topics by id (UNKNOWN_TOPIC_ID when the id is not known); v14 adds a tiered-storage error never sent here;
- v15+: the replica id moves into ReplicaState (KIP-903); v16-18 add nothing this broker reads or sends
  (node endpoints, directory ids, the follower's high watermark).
Consumers (replica id < 0) read below the high watermark, replicas up to the log end offset. The response's
max_bytes holds, except that the first non-empty partition may exceed it (KIP-74).

The long poll waits on trio's clock (so tests can run it under trio.testing.MockClock) and ends early on any
error, diverging epoch or unknown topic, and when the broker starts draining for shutdown.
"""
from __future__ import annotations

from typing import Any

import trio
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.consumer.fetch import FetchRequest
from kafka.protocol.consumer.offsets import IsolationLevel

from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.errors import ErrorCode

from ..kafka_apis import RequestContext
from ..replica_manager import FetchPartitionRequest, FetchPartitionResult, ReplicaManager
from .common import resolve_topic

# A requested partition: its request entry, the read to make or None, and the error to answer when there is none.
PlannedPartition = tuple[Any, FetchPartitionRequest | None, ErrorCode]


async def handle_fetch(ctx: RequestContext, request: FetchRequest) -> ApiMessage:
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
    plan: list[tuple[Any, list[PlannedPartition]]] = []
    for t in request.topics:
        topic, err = resolve_topic(ctx, None if by_id else t.topic, t.topic_id if by_id else None)
        parts: list[PlannedPartition] = []
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
    deadline = trio.current_time() + max(0, request.max_wait_ms) / 1000
    while True:
        results = await _read_all(replica_manager, wanted, request.max_bytes, committed_only)
        total = sum(len(r.records) for r in results)
        if (total >= request.min_bytes or unresolved or any(r.error or r.diverging_epoch for r in results)
                or trio.current_time() >= deadline or ctx.broker.socket_server.draining):
            break
        await ctx.broker.purgatory.wait_any([fr.topic_partition for fr in wanted], deadline - trio.current_time())
    by_tp = {fr.topic_partition: res for fr, res in zip(wanted, results, strict=True)}
    responses = []
    PD = R.FetchableTopicResponse.PartitionData
    read_committed = request.isolation_level == IsolationLevel.READ_COMMITTED
    for t, parts in plan:
        out = []
        for p, fr, err in parts:
            res = by_tp[fr.topic_partition] if fr is not None else FetchPartitionResult()
            code = res.error.code if res.error else err
            fields = dict(partition_index=p.partition, error_code=code, high_watermark=res.high_watermark,
                          last_stable_offset=res.last_stable_offset, log_start_offset=res.log_start_offset,
                          aborted_transactions=[] if read_committed else None,
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


async def _read_all(replica_manager: ReplicaManager, wanted: list[FetchPartitionRequest], response_max_bytes: int,
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


HANDLERS = {ApiKey.FETCH: handle_fetch}
