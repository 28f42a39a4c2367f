"""Fetch (v4-18): byte ranges of partition logs, for consumers and for follower replicas, long-polled in the
replica manager until min_bytes or max_wait.

Versions 0-3 are gone since Kafka 4.0 (v4 brought the isolation level and message format v2). Per version:
- v4+: read_committed gets an empty aborted-transactions list (there are no transactions), read_uncommitted none;
- v5+: the log start offset in each partition's answer, and a follower's own log start offset in the request;
- v7+: fetch sessions (KIP-227) are not kept: every response carries session id 0, which tells clients to send
  full fetch requests, as a Kafka broker whose session cache is full does; a request naming a session is answered
  FETCH_SESSION_ID_NOT_FOUND (or INVALID_FETCH_SESSION_EPOCH), and forgotten topics are ignored;
- v9+: the current leader epoch fences a stale or future leader view (KIP-320): FENCED_LEADER_EPOCH or
  UNKNOWN_LEADER_EPOCH, checked before leadership (NOT_LEADER_OR_FOLLOWER);
- v11+: the rack id is read past: the preferred read replica is always -1 (the leader);
- v12+: flexible; a last fetched epoch the leader's log diverges from is answered with the diverging epoch and
  its end offset instead of records (KIP-320), and NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH carry the
  current leader and epoch;
- v13+: topics by id (UNKNOWN_TOPIC_ID when the id is not known); v14 adds a tiered-storage error never sent here;
- v15+: the replica id and broker epoch move into ReplicaState (KIP-903); a fetch carrying an older broker epoch
  than the follower registered with is refused (NOT_LEADER_OR_FOLLOWER);
- v16+: with NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH, the current leaders' endpoints (KIP-951);
  v17-18 add nothing this broker reads or sends (directory ids, the follower's high watermark).
Consumers (replica id < 0) read below the high watermark; followers read up to the log end offset, and their
fetch offsets tell the leader how far they have replicated. A fetch from a broker that is not one of the
partition's replicas is refused. The response's max_bytes holds, except that the first non-empty partition may
exceed it (KIP-74). As in Kafka, the broker's fetch.max.bytes caps the response's max_bytes, and min_bytes never
asks for more than that cap, for consumers and followers alike.

The long poll waits on trio's clock and ends early on any error, diverging epoch or unknown topic, when the
broker starts draining for shutdown, and — dropped, unanswered — when the client closes its connection.
"""
from __future__ import annotations

from typing import Any

from kafka.protocol.api_message import ApiMessage
from kafka.protocol.consumer.fetch import FetchRequest
from kafka.protocol.consumer.offsets import IsolationLevel

from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.errors import ErrorCode

from ..delayed_fetch import FetchParams, FetchPartitionRequest, FetchPartitionResult
from ..kafka_apis import RequestContext
from .common import resolve_topic
from .leader_hints import node_endpoints

# A requested partition: its request entry, the read to make or None, and the error to answer when there is none.
PlannedPartition = tuple[Any, FetchPartitionRequest | None, ErrorCode]
# Answers that send the client to the current leader (KIP-951).
LEADER_HINT_ERRORS = (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH)


async def handle_fetch(ctx: RequestContext, request: FetchRequest) -> ApiMessage:
    R = ctx.response_class
    if request.session_id != 0 or request.session_epoch > 0:
        code = ErrorCode.FETCH_SESSION_ID_NOT_FOUND if request.session_id else ErrorCode.INVALID_FETCH_SESSION_EPOCH
        return ctx.response(throttle_time_ms=0, error_code=code, session_id=0, responses=[])
    by_id = ctx.version >= 13
    replica_id, replica_epoch = request.replica_id, -1
    if ctx.version >= 15:
        state = request.replica_state
        replica_id, replica_epoch = (state.replica_id, state.replica_epoch) if state is not None else (-1, -1)
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
                                                       p.last_fetched_epoch if ctx.version >= 12 else -1,
                                                       p.log_start_offset), ErrorCode.NONE))
        plan.append((t, parts))
    wanted = [fr for _, parts in plan for _, fr, _ in parts if fr is not None]
    unresolved = any(fr is None for _, parts in plan for _, fr, _ in parts)
    broker = ctx.broker
    max_bytes = min(request.max_bytes, broker.config.get("fetch.max.bytes"))
    params = FetchParams(replica_id, replica_epoch, 0 if unresolved else request.max_wait_ms,
                         min(request.min_bytes, max_bytes), max_bytes, request.isolation_level)
    results = await broker.replica_manager.fetch_messages(
        params, wanted, client=broker.socket_server.connections.get(ctx.conn.connection_id),
        stop_early=lambda: broker.socket_server.draining)
    by_tp = {fr.topic_partition: res for fr, res in zip(wanted, results, strict=True)}
    responses = []
    leaders: set[int] = set()
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
            if ctx.version >= 12 and code in LEADER_HINT_ERRORS:
                fields["current_leader"] = PD.LeaderIdAndEpoch(leader_id=res.leader_id, leader_epoch=res.leader_epoch)
                leaders.add(res.leader_id)
            out.append(PD(**fields))
        responses.append(R.FetchableTopicResponse(topic=None if by_id else t.topic,
                                                  topic_id=t.topic_id if by_id else None, partitions=out))
    extra = {"node_endpoints": node_endpoints(ctx, R.NodeEndpoint, leaders)} if ctx.version >= 16 else {}
    return ctx.response(throttle_time_ms=0, error_code=ErrorCode.NONE, session_id=0, responses=responses, **extra)


HANDLERS = {ApiKey.FETCH: handle_fetch}
