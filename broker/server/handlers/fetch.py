"""Fetch (v4-18): byte ranges of partition logs, for consumers and for follower replicas, long-polled in the
replica manager until min_bytes or max_wait.

Versions 0-3 are gone since Kafka 4.0 (v4 brought the isolation level and message format v2). Per version:
- v4+: read_committed reads up to the last stable offset and gets the aborted transactions that overlap what it
  read (from the segments' transaction indexes), read_uncommitted reads to the high watermark and gets none;
- v5+: the log start offset in each partition's answer, and a follower's own log start offset in the request;
- v7+: incremental fetch sessions (KIP-227, see fetch_session): a full fetch at epoch 0 opens a session, a fetch
  within one covers all its partitions and answers only those with something new (partitions known to have
  nothing new are watched for changes rather than read); a session the broker does not have is answered
  FETCH_SESSION_ID_NOT_FOUND, a wrong epoch INVALID_FETCH_SESSION_EPOCH, a session opened by name used by id (or
  the reverse) FETCH_SESSION_TOPIC_ID_ERROR;
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
With an authorizer, a follower's fetch needs CLUSTER_ACTION on the cluster and a consumer's READ on each topic
(TOPIC_AUTHORIZATION_FAILED for the partitions of a topic it may not read), as Kafka's.
Consumers (replica id < 0) read below the high watermark; followers read up to the log end offset, and their
fetch offsets tell the leader how far they have replicated. A follower outside the ISR gets no records of a
throttled partition while the leader's replication quota is exceeded, and what followers get of throttled
partitions counts toward that quota (leader.replication.throttled.rate, see replication_quota_manager). A fetch
from a broker that is not one of the partition's replicas is refused. The response's max_bytes holds, except
that the first non-empty partition may exceed it (KIP-74). As in Kafka, the broker's fetch.max.bytes caps the
response's max_bytes, and min_bytes never asks for more than that cap, for consumers and followers alike.

A consumer's fetch asks for no more than its consumer_byte_rate could ever let through at once; the bytes it gets
count toward that quota and its handling time toward request_percentage, and a consumer over either is answered
with no partitions and the throttle time, its session as before the fetch (client_quota_manager).

The long poll waits on trio's clock and ends early on any error, diverging epoch or unknown topic, when the
broker starts draining for shutdown, and — dropped, unanswered — when a consumer closes its connection (noticed
once the wait has lasted a moment: see purgatory).
"""
from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import trio
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.consumer.fetch import FetchRequest
from kafka.protocol.consumer.offsets import IsolationLevel

from minikafka.broker.replication.delayed_fetch import FetchParams, FetchPartitionRequest, FetchPartitionResult
from minikafka.broker.replication.fetch_session import (
    FetchContext,
    IncrementalFetchContext,
    PartitionData,
    PartitionKey,
    PartitionResponse,
    new_context,
)
from minikafka.broker.security.acl import AclOperation, ResourceType
from minikafka.broker.server.broker_services import RequestContext
from minikafka.broker.server.handlers.common import resolve_topic
from minikafka.broker.server.handlers.leader_hints import node_endpoints
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.errors import ErrorCode

# A requested partition: its request entry, the read to make or None, and the error to answer when there is none.
PlannedPartition = tuple[Any, FetchPartitionRequest | None, ErrorCode]
# Answers that send the client to the current leader (KIP-951).
LEADER_HINT_ERRORS = (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH)


class TopicRef(NamedTuple):
    topic: str | None
    topic_id: Any


class PartitionRef(NamedTuple):
    partition: int


def fetch_context(ctx: RequestContext, request: FetchRequest, is_follower: bool) -> FetchContext:
    """The request's partitions by topic id (v13+) or name, in its order, and what its session makes of them."""
    by_id = ctx.version >= 13
    fetch_data: dict[PartitionKey, PartitionData] = {}
    for t in request.topics:
        for p in t.partitions:
            fetch_data[(t.topic_id if by_id else t.topic, p.partition)] = PartitionData(
                p.fetch_offset, p.partition_max_bytes, p.current_leader_epoch,
                p.last_fetched_epoch if ctx.version >= 12 else -1, p.log_start_offset)
    to_forget: list[PartitionKey] = [(t.topic_id if by_id else t.topic, index)
                                     for t in request.forgotten_topics_data or [] for index in t.partitions]
    session_id, epoch = (request.session_id, request.session_epoch) if ctx.version >= 7 else (0, -1)
    return new_context(ctx.services.fetch_sessions, ctx.version, session_id, epoch, is_follower, fetch_data,
                       to_forget, trio.current_time() * 1000)


def is_quiet(ctx: RequestContext, context: FetchContext, params: FetchParams, key: PartitionKey,
             fr: FetchPartitionRequest) -> bool:
    """A partition of a fetch session with nothing new since its last answer: led here at the epoch asked for, the
    reader at the end of what it may read, the offsets as last answered. Such a partition is not read, only
    watched (a read would answer nothing), which keeps an idle session's fetch cheap however many partitions it
    holds. A follower's fetch state then stays as recorded at its last read, which, at the log end, keeps it
    caught up; each partition is still read every half replica.lag.time.max.ms, so that the time it was last
    caught up stays recent, as the ISR check wants; a follower outside the ISR is always read, so it can rejoin."""
    partition = ctx.services.replica_manager.partitions.get(fr.topic_partition)
    if partition is None or not partition.is_leader or fr.current_leader_epoch not in (-1, partition.leader_epoch):
        return False
    if params.is_from_follower:
        if params.replica_id not in partition.isr:
            return False
        end = partition.log.log_end_offset
    else:
        end = partition.last_fetchable_offset(params.isolation_level)
    return fr.fetch_offset == end and context.answered_unchanged(
        key, partition.high_watermark, partition.last_stable_offset(), partition.log.log_start_offset,
        ctx.services.replica_manager.config.replica_lag_time_max_ms / 2)


def consumer_fetch_max_bytes(ctx: RequestContext, max_bytes: int) -> int:
    """A consumer's fetch asks for no more than its consumer_byte_rate could ever let through in one go."""
    most = ctx.services.client_quotas.fetch.max_value_in_quota_window(ctx.user, ctx.client_id)
    return max_bytes if most >= max_bytes else int(most)


def fetch_throttle_time_ms(ctx: RequestContext, response_bytes: int, is_follower: bool) -> int:
    """A fetch's throttle (consumer_byte_rate and request_percentage; a follower's is exempt). A throttled fetch
    is answered without records, so its bytes are taken back from the consumer's rate."""
    if is_follower:
        ctx.request_throttle_time_ms(exempt=True)
        return 0
    quota = ctx.services.client_quotas.fetch
    now = quota.now_ms()
    bandwidth = quota.record_and_get_throttle_time_ms(ctx.user, ctx.client_id, response_bytes, now)
    throttle = max(bandwidth, ctx.request_throttle_time_ms())
    if throttle > 0:
        quota.unrecord(ctx.user, ctx.client_id, response_bytes, now)
    ctx.throttle_time_ms = throttle
    return throttle


async def handle_fetch(ctx: RequestContext, request: FetchRequest) -> ApiMessage:
    R = ctx.response_class
    by_id = ctx.version >= 13
    replica_id, replica_epoch = request.replica_id, -1
    if ctx.version >= 15:
        state = request.replica_state
        replica_id, replica_epoch = (state.replica_id, state.replica_epoch) if state is not None else (-1, -1)
    context = fetch_context(ctx, request, replica_id >= 0)
    if context.error != ErrorCode.NONE:
        return ctx.response(throttle_time_ms=0, error_code=context.error, session_id=0, responses=[])
    by_topic: dict[Any, list[tuple[int, PartitionData]]] = {}
    for (topic_key, index), data in context.partitions().items():
        by_topic.setdefault(topic_key, []).append((index, data))
    plan: list[tuple[Any, list[PlannedPartition]]] = []
    # Kafka's authorization: a follower needs CLUSTER_ACTION on the cluster, a consumer READ on each topic;
    # TOPIC_AUTHORIZATION_FAILED otherwise (after an unknown topic id, which names no topic to authorize).
    follower_authorized = replica_id < 0 or ctx.authorize_cluster(AclOperation.CLUSTER_ACTION)
    for topic_key, wanted_parts in by_topic.items():
        t = TopicRef(None, topic_key) if by_id else TopicRef(topic_key, None)
        topic, err = resolve_topic(ctx, t.topic, t.topic_id)
        name = topic.name if topic is not None else t.topic
        if not follower_authorized or (replica_id < 0 and name is not None
                                       and not ctx.authorize(AclOperation.READ, ResourceType.TOPIC, name)):
            topic, err = None, ErrorCode.TOPIC_AUTHORIZATION_FAILED
        parts: list[PlannedPartition] = []
        for index, data in wanted_parts:
            if topic is None:
                parts.append((PartitionRef(index), None, err))
            else:
                parts.append((PartitionRef(index), FetchPartitionRequest(
                    (topic.name, index), data.fetch_offset, data.max_bytes, data.current_leader_epoch,
                    data.last_fetched_epoch, data.log_start_offset), ErrorCode.NONE))
        plan.append((t, parts))
    unresolved = any(fr is None for _, parts in plan for _, fr, _ in parts)
    services = ctx.services
    max_bytes = min(request.max_bytes, services.config.get("fetch.max.bytes"))
    if replica_id < 0:
        max_bytes = consumer_fetch_max_bytes(ctx, max_bytes)
    params = FetchParams(replica_id, replica_epoch, 0 if unresolved else request.max_wait_ms,
                         min(request.min_bytes, max_bytes), max_bytes, request.isolation_level)
    wanted: list[FetchPartitionRequest] = []
    quiet: list[tuple[PartitionKey, FetchPartitionRequest]] = []
    for t, parts in plan:
        for p, fr, _ in parts:
            if fr is not None:
                key = (t.topic_id if by_id else t.topic, p.partition)
                if is_quiet(ctx, context, params, key, fr):
                    quiet.append((key, fr))
                else:
                    wanted.append(fr)
    replica_manager = services.replica_manager
    # A follower's fetch is not dropped when its broker goes: it waits at most replica.fetch.wait.max.ms, and the
    # watch of its connection would slow the wake-up of every replication round trip.
    client = None if params.is_from_follower else ctx.client
    watched = [fr for _, fr in quiet]
    deadline = trio.current_time() + params.max_wait_ms / 1000
    results = await replica_manager.fetch_messages(params, wanted, client=client,
                                                   stop_early=ctx.draining, watched=watched)
    # A quiet partition whose change ended the wait is read now. When the wait ran out, or the partitions read
    # had enough to answer, whatever changed meanwhile is seen by the client's next fetch instead.
    woken = [fr for key, fr in quiet if not is_quiet(ctx, context, params, key, fr)] \
        if quiet and not any(r.records for r in results) and trio.current_time() < deadline else []
    # Only quiet partitions, and the change that ended the wait gave none of them anything to answer (an append a
    # consumer may not read yet): wait on, until the fetch's own deadline.
    while not wanted and quiet and not woken and not ctx.draining():
        remaining_ms = int((deadline - trio.current_time()) * 1000)
        if remaining_ms <= 0:
            break
        await replica_manager.fetch_messages(dataclasses.replace(params, max_wait_ms=remaining_ms), [],
                                             client=client, watched=watched)
        woken = [fr for key, fr in quiet if not is_quiet(ctx, context, params, key, fr)]
    if woken:
        woken_results = await replica_manager.read_from_log(params, woken, update_fetch_state=True)
        replica_manager.metrics.update_bytes_out(params.is_from_follower, woken, woken_results)
        results += woken_results
        wanted += woken
    by_tp = {fr.topic_partition: res for fr, res in zip(wanted, results, strict=True)}
    if params.is_from_follower:
        replica_manager.replication_quotas.record_leader_throttled_bytes({tp: r.records for tp, r in by_tp.items()})
    throttle_time_ms = fetch_throttle_time_ms(ctx, sum(len(r.records) for r in results), replica_id >= 0)
    if throttle_time_ms:
        # Kafka's throttled fetch response: nothing, and the session's state as before this fetch.
        return ctx.response(throttle_time_ms=throttle_time_ms, error_code=ErrorCode.NONE, responses=[],
                            session_id=context.session_id() if isinstance(context, IncrementalFetchContext) else 0,
                            **({"node_endpoints": []} if ctx.version >= 16 else {}))
    responses = []
    leaders: set[int] = set()
    PD = R.FetchableTopicResponse.PartitionData
    read_committed = request.isolation_level == IsolationLevel.READ_COMMITTED
    for t, parts in plan:
        out = []
        for p, fr, err in parts:
            if fr is not None and fr.topic_partition not in by_tp:
                continue  # quiet: nothing new to answer
            res = by_tp[fr.topic_partition] if fr is not None else FetchPartitionResult()
            code = res.error.code if res.error else err
            if not context.must_respond((t.topic_id if by_id else t.topic, p.partition), PartitionResponse(
                    code, res.high_watermark, res.last_stable_offset, res.log_start_offset, len(res.records),
                    res.diverging_epoch is not None)):
                continue
            fields = dict(partition_index=p.partition, error_code=code, high_watermark=res.high_watermark,
                          last_stable_offset=res.last_stable_offset, log_start_offset=res.log_start_offset,
                          aborted_transactions=[PD.AbortedTransaction(producer_id=a.producer_id,
                                                                      first_offset=a.first_offset)
                                                for a in res.aborted_transactions or ()] if read_committed else None,
                          preferred_read_replica=-1, records=ctx.records(res.records))
            if ctx.version >= 12 and res.diverging_epoch is not None:
                fields["diverging_epoch"] = PD.EpochEndOffset(epoch=res.diverging_epoch[0],
                                                              end_offset=res.diverging_epoch[1])
            if ctx.version >= 12 and code in LEADER_HINT_ERRORS:
                fields["current_leader"] = PD.LeaderIdAndEpoch(leader_id=res.leader_id, leader_epoch=res.leader_epoch)
                leaders.add(res.leader_id)
            out.append(PD(**fields))
        if out:
            responses.append(R.FetchableTopicResponse(topic=None if by_id else t.topic,
                                                      topic_id=t.topic_id if by_id else None, partitions=out))
    extra = {"node_endpoints": node_endpoints(ctx, R.NodeEndpoint, leaders)} if ctx.version >= 16 else {}
    return ctx.response(throttle_time_ms=0, error_code=ErrorCode.NONE, session_id=context.session_id(),
                        responses=responses, **extra)


HANDLERS = {ApiKey.FETCH: handle_fetch}
