"""KIP-932's data APIs of share groups: ShareFetch (78) acquires records for a member of a share group (and may carry
its acknowledgements), ShareAcknowledge (79) only acknowledges; version 1 of each, the one Kafka 4.1 serves.

Both are refused as a whole: UNSUPPORTED_VERSION while share.version is 0, GROUP_AUTHORIZATION_FAILED without READ
on the group, a share session's error (SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH,
SHARE_SESSION_LIMIT_REACHED after max_wait_ms, INVALID_REQUEST for acknowledgements in the request that opens a
session), UNKNOWN_SERVER_ERROR for a member id that is not a Kafka UUID. Otherwise each partition is answered on its
own: UNKNOWN_TOPIC_ID, TOPIC_AUTHORIZATION_FAILED (READ on the topic), UNKNOWN_TOPIC_OR_PARTITION,
NOT_LEADER_OR_FOLLOWER with the current leader and its endpoint, and, for acknowledgements, INVALID_REQUEST for a
malformed batch list (ranges out of order, a type list that does not fit its range, a type outside 0-3) and
INVALID_RECORD_STATE for records the member does not hold. A ShareFetch long-polls up to max_wait_ms until min_bytes
can be acquired; its response says how long the acquisition locks last. The final request of a session (epoch -1)
fetches nothing, and its member's remaining records are released.
"""
from __future__ import annotations

import base64
import binascii
import uuid
from typing import Any

import trio
from kafka.protocol.api_message import ApiMessage

from minikafka.broker.coordinator.share.share_coordinator_shard import SharePartitionKey
from minikafka.broker.metadata import features
from minikafka.broker.replication.delayed_fetch import FetchParams
from minikafka.broker.security.acl import AclOperation, ResourceType
from minikafka.broker.server.broker_services import RequestContext
from minikafka.broker.server.handlers.fetch import consumer_fetch_max_bytes
from minikafka.broker.server.handlers.leader_hints import node_endpoints
from minikafka.broker.server.share.share_partition import AcknowledgementBatch
from minikafka.broker.server.share.share_partition_manager import SharePartitionFetch
from minikafka.broker.server.share.share_session_cache import FINAL_EPOCH, INITIAL_EPOCH, ShareSessionError
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.errors import ErrorCode

LEADER_HINT_ERRORS = (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH)

PartitionRef = tuple[uuid.UUID, int]


def valid_member_id(member_id: str | None) -> bool:
    """A Kafka Uuid's text: 16 bytes in URL-safe base64 without padding."""
    if member_id is None or len(member_id) > 24:
        return False
    try:
        return len(base64.urlsafe_b64decode(member_id + "=" * (-len(member_id) % 4))) == 16
    except (binascii.Error, ValueError):
        return False


def _message(error: ErrorCode, message: str | None) -> str | None:
    """A partition's error message: what the share-partition said, as Kafka sends its exception's message; none
    for the errors Kafka answers without one (validation, authorization, unknown topics)."""
    return message if error != ErrorCode.NONE else None


class _Partitions:
    """The partitions a request names, sorted by what is to be done with them: resolved to a share-partition key
    and topic name, or answered with an error at once."""

    def __init__(self, ctx: RequestContext, group_id: str) -> None:
        self.ctx = ctx
        self.group_id = group_id
        self._authorized: dict[str, bool] = {}

    def resolve(self, topic_id: uuid.UUID, index: int) -> tuple[SharePartitionKey, str] | ErrorCode:
        ctx = self.ctx
        topic = ctx.services.metadata_cache.topics_by_id.get(topic_id)
        if topic is None:
            return ErrorCode.UNKNOWN_TOPIC_ID
        allowed = self._authorized.get(topic.name)
        if allowed is None:
            allowed = self._authorized[topic.name] = ctx.authorize(AclOperation.READ, ResourceType.TOPIC, topic.name)
        if not allowed:
            return ErrorCode.TOPIC_AUTHORIZATION_FAILED
        if index not in topic.partitions:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return SharePartitionKey(self.group_id, topic_id, index), topic.name


def _batches(partition: Any) -> list[AcknowledgementBatch]:
    return [AcknowledgementBatch(b.first_offset, b.last_offset, tuple(b.acknowledge_types or ()))
            for b in partition.acknowledgement_batches or ()]


def _acknowledgements(request: Any) -> list[tuple[PartitionRef, list[AcknowledgementBatch]]]:
    return [((t.topic_id, p.partition_index), _batches(p)) for t in request.topics or [] for p in t.partitions or []]


def _valid_batches(batches: list[AcknowledgementBatch]) -> bool:
    """Kafka's validateAcknowledgementBatches: ranges in order without overlap, each with one type or one per
    offset, every type 0-3."""
    previous_end = -1
    for batch in batches:
        if batch.first_offset > batch.last_offset or batch.first_offset < previous_end:
            return False
        types = batch.acknowledge_types
        if not types or (len(types) > 1 and batch.last_offset - batch.first_offset != len(types) - 1):
            return False
        if any(t < 0 or t > 3 for t in types):
            return False
        previous_end = batch.last_offset
    return True


async def _acknowledge(ctx: RequestContext, partitions: _Partitions, member_id: str,
                       requested: list[tuple[PartitionRef, list[AcknowledgementBatch]]]
                       ) -> dict[PartitionRef, tuple[ErrorCode, str | None]]:
    """Each partition's acknowledgement answer."""
    out: dict[PartitionRef, tuple[ErrorCode, str | None]] = {}
    wanted: dict[SharePartitionKey, list[AcknowledgementBatch]] = {}
    refs: dict[SharePartitionKey, PartitionRef] = {}
    for ref, batches in requested:
        resolved = partitions.resolve(*ref)
        if isinstance(resolved, ErrorCode):
            out[ref] = resolved, None
        elif not _valid_batches(batches):
            out[ref] = ErrorCode.INVALID_REQUEST, None
        elif not batches:
            out[ref] = ErrorCode.NONE, None
        else:
            wanted[resolved[0]] = batches
            refs[resolved[0]] = ref
    if wanted:
        answers = await ctx.services.share_partition_manager.acknowledge(partitions.group_id, member_id, wanted)
        for key, answer in answers.items():
            out[refs[key]] = answer
    return out


def _leader(ctx: RequestContext, ref: PartitionRef) -> tuple[int, int]:
    topic = ctx.services.metadata_cache.topics_by_id.get(ref[0])
    if topic is None:
        return -1, -1
    return ctx.services.replica_manager.current_leader((topic.name, ref[1]))


async def handle_share_fetch(ctx: RequestContext, request: Any) -> ApiMessage:
    R = ctx.response_class
    services = ctx.services
    manager = services.share_partition_manager
    group_id, member_id, epoch = request.group_id, request.member_id, request.share_session_epoch
    lock_ms = manager.record_lock_duration_ms(group_id or "")

    def failed(error: ErrorCode) -> ApiMessage:  # as Kafka's getErrorResponse: no message
        return R(throttle_time_ms=0, error_code=error, error_message=None, acquisition_lock_timeout_ms=0,
                 responses=[], node_endpoints=[])

    if not features.share_groups_enabled(ctx.services.metadata_cache.image.features):
        return failed(ErrorCode.UNSUPPORTED_VERSION)
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, group_id or ""):
        return failed(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if not valid_member_id(member_id):
        return failed(ErrorCode.UNKNOWN_SERVER_ERROR)
    fetch = [(t.topic_id, p.partition_index) for t in request.topics or [] for p in t.partitions or []]
    forget = [(t.topic_id, index) for t in request.forgotten_topics_data or [] for index in t.partitions or []]
    acknowledgements = _acknowledgements(request)
    has_acknowledgements = any(batches for _, batches in acknowledgements)
    try:
        session = manager.new_context(group_id, member_id, epoch, fetch, forget, has_acknowledgements,
                                      str(ctx.conn.connection_id))
    except ShareSessionError as exc:
        if exc.error == ErrorCode.SHARE_SESSION_LIMIT_REACHED:
            # Kafka holds a request it cannot give a session for max_wait_ms, so its member does not spin.
            with trio.move_on_after(request.max_wait_ms / 1000):
                await trio.sleep_forever()
        return failed(exc.error)
    partitions = _Partitions(ctx, group_id)
    acknowledged = await _acknowledge(ctx, partitions, member_id, acknowledgements) if has_acknowledgements else {}
    # What to fetch: the partitions named in a request that opens a session, all of a session's after that, none
    # in the final request.
    to_fetch: list[PartitionRef] = [] if session is None else (
        list(dict.fromkeys(fetch)) if epoch == INITIAL_EPOCH else list(session.partitions))
    answers: dict[PartitionRef, SharePartitionFetch] = {}
    wanted: list[tuple[SharePartitionKey, str]] = []
    refs: dict[SharePartitionKey, PartitionRef] = {}
    for ref in to_fetch:
        resolved = partitions.resolve(*ref)
        if isinstance(resolved, ErrorCode):
            answers[ref] = SharePartitionFetch(resolved)
        else:
            wanted.append(resolved)
            refs[resolved[0]] = ref
    if wanted:
        max_bytes = consumer_fetch_max_bytes(ctx, min(request.max_bytes, services.config.get("fetch.max.bytes")))
        params = FetchParams(-1, -1, request.max_wait_ms, min(request.min_bytes, max_bytes), max_bytes,
                             manager.isolation_level(group_id))
        fetched = await manager.fetch_messages(group_id, member_id, params, epoch, request.max_records,
                                               request.batch_size, wanted,
                                               client=ctx.client, stop_early=ctx.draining)
        for key, answer in fetched.items():
            answers[refs[key]] = answer
    if epoch == FINAL_EPOCH:
        await manager.release_session(group_id, member_id)
    # A request within a session is answered only for the partitions with something to say.
    subsequent = epoch != INITIAL_EPOCH
    order = list(dict.fromkeys(to_fetch + list(acknowledged)))
    by_topic: dict[uuid.UUID, list[Any]] = {}
    leaders: set[int] = set()
    PD = R.ShareFetchableTopicResponse.PartitionData
    for ref in order:
        answer = answers.get(ref, SharePartitionFetch())
        ack_error, ack_message = acknowledged.get(ref, (ErrorCode.NONE, None))
        if subsequent and ref not in acknowledged and answer.error == ErrorCode.NONE and not answer.acquired:
            continue
        leader = (0, 0)
        if answer.error in LEADER_HINT_ERRORS or ack_error in LEADER_HINT_ERRORS:
            leader = _leader(ctx, ref)
            leaders.add(leader[0])
        by_topic.setdefault(ref[0], []).append(PD(
            partition_index=ref[1], error_code=answer.error, error_message=_message(answer.error, answer.error_message),
            acknowledge_error_code=ack_error, acknowledge_error_message=_message(ack_error, ack_message),
            current_leader=PD.LeaderIdAndEpoch(leader_id=leader[0], leader_epoch=leader[1]),
            records=ctx.records(answer.records),
            acquired_records=[PD.AcquiredRecords(first_offset=a.first_offset, last_offset=a.last_offset,
                                                 delivery_count=a.delivery_count) for a in answer.acquired]))
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, acquisition_lock_timeout_ms=lock_ms,
             responses=[R.ShareFetchableTopicResponse(topic_id=topic_id, partitions=parts)
                        for topic_id, parts in by_topic.items()],
             node_endpoints=node_endpoints(ctx, R.NodeEndpoint, {leader for leader in leaders if leader >= 0}))


async def handle_share_acknowledge(ctx: RequestContext, request: Any) -> ApiMessage:
    R = ctx.response_class
    manager = ctx.services.share_partition_manager
    group_id, member_id, epoch = request.group_id, request.member_id, request.share_session_epoch

    def failed(error: ErrorCode) -> ApiMessage:  # as Kafka's getErrorResponse: no message
        return R(throttle_time_ms=0, error_code=error, error_message=None, responses=[], node_endpoints=[])

    if not features.share_groups_enabled(ctx.services.metadata_cache.image.features):
        return failed(ErrorCode.UNSUPPORTED_VERSION)
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, group_id or ""):
        return failed(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if not valid_member_id(member_id):
        return failed(ErrorCode.UNKNOWN_SERVER_ERROR)
    try:
        manager.acknowledge_session_update(group_id, member_id, epoch)
    except ShareSessionError as exc:
        return failed(exc.error)
    requested = _acknowledgements(request)
    acknowledged = await _acknowledge(ctx, _Partitions(ctx, group_id), member_id, requested)
    if epoch == FINAL_EPOCH:
        await manager.release_session(group_id, member_id)
    by_topic: dict[uuid.UUID, list[Any]] = {}
    leaders: set[int] = set()
    PD = R.ShareAcknowledgeTopicResponse.PartitionData
    for ref, (error, message) in acknowledged.items():
        leader = (0, 0)
        if error in LEADER_HINT_ERRORS:
            leader = _leader(ctx, ref)
            leaders.add(leader[0])
        by_topic.setdefault(ref[0], []).append(PD(
            partition_index=ref[1], error_code=error, error_message=_message(error, message),
            current_leader=PD.LeaderIdAndEpoch(leader_id=leader[0], leader_epoch=leader[1])))
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
             responses=[R.ShareAcknowledgeTopicResponse(topic_id=topic_id, partitions=parts)
                        for topic_id, parts in by_topic.items()],
             node_endpoints=node_endpoints(ctx, R.NodeEndpoint, {leader for leader in leaders if leader >= 0}))


HANDLERS = {ApiKey.SHARE_FETCH: handle_share_fetch, ApiKey.SHARE_ACKNOWLEDGE: handle_share_acknowledge}
