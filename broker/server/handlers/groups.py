"""Consumer group APIs: FindCoordinator, the classic membership protocol, committed offsets, group admin.

The group coordinator (broker/coordinator/group/group_coordinator.py) and its offset manager (offset_manager.py
there) hold the state; these handlers translate between the wire versions and them. KIP-848's
ConsumerGroupHeartbeat (key 68) is deliberately absent: like a Kafka broker without the new protocol, it is not
advertised and a request for it closes the connection.

Versions served, and what changes between them:
- FindCoordinator (v0-6): v1+ names a key type: a group's coordinator is the leader of its __consumer_offsets
  partition (the first lookup has the controller create that topic, with offsets.topic.replication.factor; with
  fewer brokers than that, or no live leader, the answer is COORDINATOR_NOT_AVAILABLE), a transaction's is this
  broker, any other type (share groups, v6) is INVALID_REQUEST; v1+ carries error messages, v3+ is flexible, v4+
  looks up a batch of keys (KIP-699). A coordinator serves only the groups of the partitions it leads
  (NOT_COORDINATOR for the others).
- JoinGroup (v0-9): v1+ brings the rebalance timeout (v0 uses the session timeout); from v4 a member without an id
  gets MEMBER_ID_REQUIRED with its new id and joins again (KIP-394); v5+ group instance ids (static membership,
  KIP-345); v6+ flexible; v7+ answers the protocol type, and a protocol name not yet chosen is null; v8+ carries a
  reason (KIP-800); v9+ a rejoining static leader is told to skip the assignment (KIP-814).
- SyncGroup (v0-5): v3+ group instance id; v4+ flexible; v5+ sends the protocol type and name, which must match the
  group's (INCONSISTENT_GROUP_PROTOCOL, also when missing) and are answered back (KIP-559).
- Heartbeat (v0-4): v3+ group instance id; v4+ flexible; REBALANCE_IN_PROGRESS is the signal to rejoin.
- LeaveGroup (v0-5): v0-2 one member by id; v3+ a batch of members by id or instance id, each with its error;
  v4+ flexible; v5+ a reason per member.
- OffsetCommit (v2-10): v2-4 carry a retention time, later versions leave it to offsets.retention.minutes; v6+
  the committed leader epoch; v7+ group instance id; v8+ flexible; v9+ GROUP_ID_NOT_FOUND for a commit with a
  generation to an unknown group; v10 topics by id (UNKNOWN_TOPIC_ID).
- OffsetFetch (v1-10): v1 has no top-level error, so every requested partition carries it; v2+ a null topic list
  asks for all of the group's offsets; v5+ the committed leader epoch; v6+ flexible; v7+ require_stable: the
  answer waits until the group's writes so far are committed, and a partition a transaction holds an offset
  pending for is UNSTABLE_OFFSET_COMMIT (a partition-level error in every version, the group's error stays NONE);
  v8+ several groups per request (require_stable for all of them); v9's member id and epoch are read past
  (classic groups only); v10 topics by id.
- TxnOffsetCommit (v0-5): offsets committed in a producer's transaction, written as a batch of that transaction
  and pending (not returned by OffsetFetch) until its marker commits or aborts them. An unknown topic or partition
  is UNKNOWN_TOPIC_OR_PARTITION; errors of the group apply to the other partitions only. A commit without
  generation (-1) needs no membership, and one to an unknown group creates it (a generation there is
  ILLEGAL_GENERATION); v2+ the committed leader epoch; v3+ flexible, with member id, generation and group
  instance id checked as OffsetCommit checks them (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_INSTANCE_ID), but
  not refused during a rebalance. Before anything is written, the group's `__consumer_offsets` partition is
  checked to be in the producer's transaction (KIP-890 part 1, with transaction.partition.verification.enable: for
  all partitions INVALID_TXN_STATE, from v4 TRANSACTION_ABORTABLE, when no AddOffsetsToTxn added it;
  INVALID_PRODUCER_EPOCH for a fenced producer) or, from v5 (transaction version 2), added to it.
- OffsetDelete (v0): a group with members may delete only if it uses the "consumer" protocol type (NON_EMPTY_GROUP
  otherwise), and only offsets of topics it does not subscribe to (GROUP_SUBSCRIBED_TO_TOPIC).
- DescribeGroups (v0-6): v3+ authorized operations when asked for; v4+ members' group instance ids; v5+ flexible;
  v6+ GROUP_ID_NOT_FOUND for an unknown group (before, a Dead group without error).
- ListGroups (v0-5): v3+ flexible; v4+ filters by state (KIP-518); v5+ by type, every group being "classic".
- DeleteGroups (v0-2): NON_EMPTY_GROUP for a group with members; v2 flexible.
"""
from __future__ import annotations

import logging
import uuid
from typing import Any

from minikafka.broker.coordinator.group.group import SyncResult
from minikafka.broker.coordinator.group.group_coordinator import GroupCoordinator, JoinRequest
from minikafka.broker.coordinator.group.offset_manager import OffsetCommitEntry, OffsetManager
from minikafka.broker.server.add_partitions_to_txn_manager import TransactionSupportedOperation
from minikafka.broker.server.broker_services import RequestContext
from minikafka.broker.server.handlers.common import ZERO_UUID, resolve_topic
from minikafka.broker.server.handlers.transactions import find_transaction_coordinator
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.protocol.internal_topics import GROUP_METADATA_TOPIC

log = logging.getLogger("minikafka.groups")

GROUP_KEY, TRANSACTION_KEY = 0, 1
# Kafka's AclOperation codes a group has (READ 3, DELETE 6, DESCRIBE 8), as kafka-python's bitfield type takes
# them: a set of operation codes, or None for "not requested" (-2147483648 on the wire).
GROUP_OPERATIONS = frozenset({3, 6, 8})

# Kafka's default error messages, for the versions whose responses carry one.
_MESSAGES = {
    ErrorCode.COORDINATOR_NOT_AVAILABLE: "The coordinator is not available.",
    ErrorCode.INVALID_REQUEST: "This most likely occurs because of a request being malformed by the client "
                               "library or the message was sent to an incompatible broker. See the broker logs "
                               "for more details.",
    ErrorCode.NOT_COORDINATOR: "This is not the correct coordinator.",
}


def _coordinator(ctx: RequestContext) -> GroupCoordinator:
    return ctx.services.group_coordinator


def _offset_manager(ctx: RequestContext) -> OffsetManager:
    return ctx.services.group_coordinator.offset_manager


async def _committed(ctx: RequestContext, group_id: str) -> ErrorCode:
    """A request that wrote group records answers once they are committed (NONE) or with the group API error."""
    return await _coordinator(ctx).group_manager.wait_replicated(group_id)


async def _ensure_offsets_topic(ctx: RequestContext) -> None:
    """A group request may come before any coordinator lookup (from a client that remembers its coordinator): the
    coordinator's partitions come into being with it, as they would with the lookup."""
    if GROUP_METADATA_TOPIC not in ctx.services.metadata_cache.topics:
        await ctx.services.auto_topic_creation.create_topics([GROUP_METADATA_TOPIC], internal=True)


def _client_host(ctx: RequestContext) -> str:
    """Kafka reports the peer as InetAddress.toString(): '/' then the address."""
    host = ctx.conn.peer.rsplit(":", 1)[0] if ":" in ctx.conn.peer else ctx.conn.peer
    return "/" + host


# ---- FindCoordinator ----------------------------------------------------------------------------------------

async def _find_coordinator(ctx: RequestContext, key_type: int, key: str) -> tuple[ErrorCode, int, str, int]:
    if key_type == TRANSACTION_KEY:
        return await find_transaction_coordinator(ctx, key)
    if key_type != GROUP_KEY:
        return ErrorCode.INVALID_REQUEST, -1, "", -1
    services = ctx.services
    coordinator = _coordinator(ctx)
    if coordinator is None or not coordinator.active:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
    cache = services.metadata_cache
    # Clients look up their coordinator before any other group API: the first lookup creates the topic.
    if GROUP_METADATA_TOPIC not in cache.topics:
        errors = await services.auto_topic_creation.create_topics([GROUP_METADATA_TOPIC], internal=True)
        if GROUP_METADATA_TOPIC in errors:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
    topic = cache.topics.get(GROUP_METADATA_TOPIC)
    partition = topic.partitions.get(coordinator.group_manager.partition_for(key)) if topic is not None else None
    endpoint = cache.alive_endpoint(partition.leader, ctx.conn.listener) if partition is not None else None
    if partition is None or endpoint is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
    return ErrorCode.NONE, partition.leader, endpoint.host, endpoint.port


async def handle_find_coordinator(ctx: RequestContext, request) -> object:
    key_type = request.key_type if ctx.version >= 1 else GROUP_KEY
    if ctx.version < 4:
        code, node_id, host, port = await _find_coordinator(ctx, key_type, request.key)
        return ctx.response(throttle_time_ms=0, error_code=code, error_message=_MESSAGES.get(code),
                            node_id=node_id, host=host, port=port)
    R = ctx.response_class
    coordinators = []
    for key in request.coordinator_keys:
        code, node_id, host, port = await _find_coordinator(ctx, key_type, key)
        coordinators.append(R.Coordinator(key=key, node_id=node_id, host=host, port=port, error_code=code,
                                          error_message=_MESSAGES.get(code)))
    return ctx.response(throttle_time_ms=0, coordinators=coordinators)


# ---- membership -----------------------------------------------------------------------------------------------

async def handle_join_group(ctx: RequestContext, request) -> object:
    await _ensure_offsets_topic(ctx)
    R = ctx.response_class
    req = JoinRequest(
        group_id=request.group_id, member_id=request.member_id or "",
        group_instance_id=request.group_instance_id if ctx.version >= 5 else None,
        client_id=ctx.header.client_id or "", client_host=_client_host(ctx),
        session_timeout_ms=request.session_timeout_ms,
        rebalance_timeout_ms=request.rebalance_timeout_ms if ctx.version >= 1 else request.session_timeout_ms,
        protocol_type=request.protocol_type or "",
        protocols=[(p.name, bytes(p.metadata or b"")) for p in request.protocols],
        api_version=ctx.version, reason=request.reason if ctx.version >= 8 else None)
    result = await _coordinator(ctx).join_group(req).wait()
    if result.error == ErrorCode.NONE and req.group_instance_id is not None:
        error = await _committed(ctx, req.group_id)
        if error != ErrorCode.NONE:
            result.error = error
    protocol_name = result.protocol_name
    if ctx.version < 7 and protocol_name is None:
        protocol_name = ""
    elif ctx.version >= 7 and protocol_name == "":
        protocol_name = None
    if result.error not in (ErrorCode.NONE, ErrorCode.MEMBER_ID_REQUIRED):
        log.info("JoinGroup %s from %s (member %r): %s", request.group_id, ctx.header.client_id,
                 request.member_id, result.error.name)
    members = [R.JoinGroupResponseMember(member_id=member_id, group_instance_id=instance_id, metadata=metadata)
               for member_id, instance_id, metadata in result.members]
    return ctx.response(throttle_time_ms=0, error_code=result.error, generation_id=result.generation_id,
                        protocol_type=result.protocol_type, protocol_name=protocol_name, leader=result.leader,
                        skip_assignment=result.skip_assignment, member_id=result.member_id, members=members)


async def handle_sync_group(ctx: RequestContext, request) -> object:
    await _ensure_offsets_topic(ctx)
    if ctx.version >= 5 and (request.protocol_type is None or request.protocol_name is None):
        return ctx.response(throttle_time_ms=0, error_code=ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                            protocol_type=None, protocol_name=None, assignment=b"")
    result = await _coordinator(ctx).sync_group(
        request.group_id, request.generation_id, request.member_id,
        request.group_instance_id if ctx.version >= 3 else None,
        request.protocol_type if ctx.version >= 5 else None, request.protocol_name if ctx.version >= 5 else None,
        [(a.member_id, bytes(a.assignment or b"")) for a in request.assignments]).wait()
    if result.error == ErrorCode.NONE:
        error = await _committed(ctx, request.group_id)
        if error != ErrorCode.NONE:
            result = SyncResult(error)
    if result.error != ErrorCode.NONE:
        log.info("SyncGroup %s from member %s: %s", request.group_id, request.member_id, result.error.name)
    return ctx.response(throttle_time_ms=0, error_code=result.error, protocol_type=result.protocol_type,
                        protocol_name=result.protocol_name, assignment=result.assignment or b"")


async def handle_heartbeat(ctx: RequestContext, request) -> object:
    await _ensure_offsets_topic(ctx)
    code = _coordinator(ctx).heartbeat(request.group_id, request.generation_id, request.member_id,
                                       request.group_instance_id if ctx.version >= 3 else None)
    return ctx.response(throttle_time_ms=0, error_code=code)


async def handle_leave_group(ctx: RequestContext, request) -> object:
    await _ensure_offsets_topic(ctx)
    R = ctx.response_class
    if ctx.version >= 3:
        members = [(m.member_id, m.group_instance_id, m.reason if ctx.version >= 5 else None)
                   for m in request.members]
    else:
        members = [(request.member_id, None, None)]
    top, results = _coordinator(ctx).leave_group(request.group_id, members)
    if ctx.version >= 3:
        return ctx.response(throttle_time_ms=0, error_code=top, members=[
            R.MemberResponse(member_id=member_id, group_instance_id=instance_id, error_code=code)
            for member_id, instance_id, code in results])
    if top == ErrorCode.NONE and results:
        top = results[0][2]
    return ctx.response(throttle_time_ms=0, error_code=top, members=[])


# ---- offsets ------------------------------------------------------------------------------------------------

def _topic_by_id_or_name(ctx: RequestContext, by_id: bool, name: str | None, topic_id):
    topic, code = resolve_topic(ctx, None if by_id else name, topic_id if by_id else None)
    if by_id and topic is None and code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        code = ErrorCode.UNKNOWN_TOPIC_ID
    return topic, code


async def handle_txn_offset_commit(ctx: RequestContext, request) -> object:
    await _ensure_offsets_topic(ctx)
    R = ctx.response_class
    PR = R.TxnOffsetCommitResponseTopic.TxnOffsetCommitResponsePartition
    cache = ctx.services.metadata_cache
    # Per request partition: its error, or None when it goes to the coordinator.
    plan = []
    entries: list[OffsetCommitEntry] = []
    for t in request.topics:
        topic = cache.topics.get(t.name)
        parts: list[tuple[int, ErrorCode | None]] = []
        for p in t.partitions:
            if topic is None or p.partition_index not in topic.partitions:
                parts.append((p.partition_index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
            else:
                entries.append(OffsetCommitEntry(topic.name, p.partition_index, p.committed_offset,
                                                 p.committed_leader_epoch if ctx.version >= 2 else -1,
                                                 p.committed_metadata))
                parts.append((p.partition_index, None))
        plan.append((t.name, parts))
    entry_errors: list[ErrorCode] = []
    if entries:
        with_membership = ctx.version >= 3
        try:
            await _verify_offsets_partition(ctx, request)
            entry_errors = await _offset_manager(ctx).commit_transactional_offsets(
                request.group_id, request.producer_id, request.producer_epoch,
                request.member_id if with_membership else "",
                request.group_instance_id if with_membership else None,
                request.generation_id if with_membership else -1, entries, ctx.version)
        except KafkaError as exc:
            entry_errors = [exc.code] * len(entries)
            log.info("TxnOffsetCommit for group %s (transactional id %r, producer %d) refused: %s", request.group_id,
                     request.transactional_id, request.producer_id, exc.code.name)
    results = iter(entry_errors)
    topics = [R.TxnOffsetCommitResponseTopic(name=name, partitions=[
        PR(partition_index=index, error_code=next(results) if code is None else code) for index, code in parts])
        for name, parts in plan]
    return ctx.response(throttle_time_ms=0, topics=topics)


async def _verify_offsets_partition(ctx: RequestContext, request: Any) -> None:
    """KIP-890: the group's `__consumer_offsets` partition must be in the producer's transaction before its offsets
    are written there: checked with the transaction coordinator (v0-4, when transaction.partition.verification.enable)
    or added to the transaction (v5, transaction version 2, whose client sends no AddOffsetsToTxn). Raises the
    request's error as Kafka's group coordinator answers it: a coordinator that cannot be reached is
    COORDINATOR_LOAD_IN_PROGRESS, which clients retry without looking the group coordinator up again."""
    operation = TransactionSupportedOperation.for_txn_offset_commit(ctx.version)
    if not (operation.supports_epoch_bump or ctx.services.config.get("transaction.partition.verification.enable")):
        return
    if request.producer_id < 0 or request.producer_epoch < 0:
        return  # refused by the coordinator, which knows no such transaction
    tp = (GROUP_METADATA_TOPIC, _offset_manager(ctx).group_manager.partition_for(request.group_id))
    partition = ctx.services.replica_manager.get_partition(*tp)
    if partition is None or not partition.is_leader:
        return  # not this broker's group: the coordinator answers NOT_COORDINATOR
    if partition.log.producer_state.has_ongoing_transaction(request.producer_id, request.producer_epoch):
        return
    errors = await ctx.services.add_partitions_to_txn.add_or_verify_transaction(
        request.transactional_id, request.producer_id, request.producer_epoch, [tp], operation)
    error = errors.get(tp)
    if error is not None:
        raise KafkaError(_TXN_OFFSET_COMMIT_VERIFICATION_ERRORS.get(error, error),
                         f"the offsets partition is not in the transaction: {error.name}")


_TXN_OFFSET_COMMIT_VERIFICATION_ERRORS = {
    ErrorCode.NETWORK_EXCEPTION: ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
}


async def handle_offset_commit(ctx: RequestContext, request) -> object:
    await _ensure_offsets_topic(ctx)
    R = ctx.response_class
    PR = R.OffsetCommitResponseTopic.OffsetCommitResponsePartition
    by_id = ctx.version >= 10
    # Per request partition: its error, or None when it goes to the coordinator.
    plan = []
    entries: list[OffsetCommitEntry] = []
    for t in request.topics:
        topic, code = _topic_by_id_or_name(ctx, by_id, getattr(t, "name", None), getattr(t, "topic_id", None))
        parts = []
        for p in t.partitions:
            if topic is None:
                parts.append((p.partition_index, code))
            elif p.partition_index not in topic.partitions:
                parts.append((p.partition_index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
            else:
                entries.append(OffsetCommitEntry(topic.name, p.partition_index, p.committed_offset,
                                                 p.committed_leader_epoch if ctx.version >= 6 else -1,
                                                 p.committed_metadata))
                parts.append((p.partition_index, None))
        plan.append((t, parts))
    group_error = None
    entry_errors: list[ErrorCode] = []
    if entries:
        try:
            entry_errors = await _offset_manager(ctx).commit_offsets(
                request.group_id, request.member_id or "",
                request.group_instance_id if ctx.version >= 7 else None, request.generation_id_or_member_epoch,
                request.retention_time_ms if ctx.version <= 4 else -1, entries, ctx.version)
        except KafkaError as exc:
            group_error = exc.code
            log.info("OffsetCommit for group %s (member %r, generation %d) refused: %s", request.group_id,
                     request.member_id, request.generation_id_or_member_epoch, exc.code.name)
    results = iter(entry_errors)
    topics = []
    for t, parts in plan:
        out = []
        for index, code in parts:
            if group_error is not None:
                code = group_error
            elif code is None:
                code = next(results)
            out.append(PR(partition_index=index, error_code=code))
        topics.append(R.OffsetCommitResponseTopic(name=None if by_id else t.name,
                                                  topic_id=t.topic_id if by_id else None, partitions=out))
    return ctx.response(throttle_time_ms=0, topics=topics)


FetchedPartition = tuple[int, int, int, str | None, ErrorCode]


async def _fetch_group(ctx: RequestContext, group_id: str | None, topics: Any, by_id: bool, require_stable: bool
                       ) -> tuple[ErrorCode, list[tuple[str | None, uuid.UUID, list[FetchedPartition]]]]:
    """(group error, [(name, topic id, [(partition, offset, leader epoch, metadata, error)])])."""
    offset_manager = _offset_manager(ctx)
    cache = ctx.services.metadata_cache
    requested = None
    unknown: list[tuple[uuid.UUID, list[int], ErrorCode]] = []
    if topics is not None:
        requested = []
        for t in topics:
            if by_id:
                topic = cache.topics_by_id.get(t.topic_id)
                if topic is None:
                    unknown.append((t.topic_id, list(t.partition_indexes), ErrorCode.UNKNOWN_TOPIC_ID))
                    continue
                requested.append((topic.name, list(t.partition_indexes)))
            else:
                requested.append((t.name, list(t.partition_indexes)))
    try:
        if require_stable:
            await offset_manager.wait_stable(group_id)
        found = offset_manager.fetch_offsets(group_id, requested, require_stable)
    except KafkaError as exc:
        return exc.code, []
    out: list[tuple[str | None, uuid.UUID, list[FetchedPartition]]] = []
    for name, parts in found:
        topic = cache.topics.get(name)
        if by_id and topic is None:
            continue
        out.append((name, topic.topic_id if topic is not None else ZERO_UUID,
                    [(p, -1, -1, "", v) if isinstance(v, ErrorCode)
                     else (p, v.offset, v.leader_epoch, v.metadata, ErrorCode.NONE) if v is not None
                     else (p, -1, -1, "", ErrorCode.NONE) for p, v in parts]))
    for topic_id, indexes, code in unknown:
        out.append((None, topic_id, [(p, -1, -1, "", code) for p in indexes]))
    return ErrorCode.NONE, out


async def handle_offset_fetch(ctx: RequestContext, request) -> object:
    await _ensure_offsets_topic(ctx)
    R = ctx.response_class
    if ctx.version >= 8:
        by_id = ctx.version >= 10
        TopicR = R.OffsetFetchResponseGroup.OffsetFetchResponseTopics
        PartR = TopicR.OffsetFetchResponsePartitions
        groups = []
        for g in request.groups:
            code, found = await _fetch_group(ctx, g.group_id, g.topics, by_id, request.require_stable)
            topics = [TopicR(name=None if by_id else name, topic_id=topic_id if by_id else None,
                             partitions=[PartR(partition_index=p, committed_offset=offset,
                                               committed_leader_epoch=epoch, metadata=metadata, error_code=err)
                                         for p, offset, epoch, metadata, err in parts])
                      for name, topic_id, parts in found]
            groups.append(R.OffsetFetchResponseGroup(group_id=g.group_id, topics=topics, error_code=code))
        return ctx.response(throttle_time_ms=0, groups=groups)
    TopicR = R.OffsetFetchResponseTopic
    PartR = TopicR.OffsetFetchResponsePartition
    code, found = await _fetch_group(ctx, request.group_id, request.topics, False,
                                     ctx.version >= 7 and request.require_stable)
    if code != ErrorCode.NONE and ctx.version < 2:
        # v1 has no top-level error: every requested partition carries it.
        found = [(t.name, ZERO_UUID, [(p, -1, -1, "", code) for p in t.partition_indexes]) for t in request.topics]
    topics = [TopicR(name=name, partitions=[PartR(partition_index=p, committed_offset=offset,
                                                  committed_leader_epoch=epoch, metadata=metadata, error_code=err)
                                            for p, offset, epoch, metadata, err in parts])
              for name, _topic_id, parts in found]
    return ctx.response(throttle_time_ms=0, topics=topics, error_code=code)


async def handle_offset_delete(ctx: RequestContext, request) -> object:
    await _ensure_offsets_topic(ctx)
    R = ctx.response_class
    TopicR = R.OffsetDeleteResponseTopic
    PartR = TopicR.OffsetDeleteResponsePartition
    cache = ctx.services.metadata_cache
    known: list[tuple[str, list[int]]] = []
    refused: dict[tuple[str, int], ErrorCode] = {}
    for t in request.topics:
        topic = cache.topics.get(t.name)
        indexes = []
        for p in t.partitions:
            if topic is None or p.partition_index not in topic.partitions:
                refused[(t.name, p.partition_index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                indexes.append(p.partition_index)
        if indexes:
            known.append((t.name, indexes))
    try:
        deleted = dict(_offset_manager(ctx).delete_offsets(request.group_id, known))
    except KafkaError as exc:
        return ctx.response(error_code=exc.code, throttle_time_ms=0, topics=[])
    error = await _committed(ctx, request.group_id)
    if error != ErrorCode.NONE:
        return ctx.response(error_code=error, throttle_time_ms=0, topics=[])
    topics = []
    for t in request.topics:
        codes = dict(deleted.get(t.name, []))
        topics.append(TopicR(name=t.name, partitions=[
            PartR(partition_index=p.partition_index,
                  error_code=refused.get((t.name, p.partition_index), codes.get(p.partition_index, ErrorCode.NONE)))
            for p in t.partitions]))
    return ctx.response(error_code=ErrorCode.NONE, throttle_time_ms=0, topics=topics)


# ---- admin ----------------------------------------------------------------------------------------------------

async def handle_describe_groups(ctx: RequestContext, request) -> object:
    await _ensure_offsets_topic(ctx)
    R = ctx.response_class
    G = R.DescribedGroup
    coordinator = _coordinator(ctx)
    wants_ops = ctx.version >= 3 and request.include_authorized_operations
    groups = []
    for group_id in request.groups:
        d = coordinator.describe_group(group_id, ctx.version)
        message = f"Group {group_id} not found." if d.error == ErrorCode.GROUP_ID_NOT_FOUND else None
        members = [G.DescribedGroupMember(member_id=m.member_id, group_instance_id=m.group_instance_id,
                                          client_id=m.client_id, client_host=m.client_host,
                                          member_metadata=metadata, member_assignment=m.assignment or b"")
                   for m, metadata in d.members]
        ops = set(GROUP_OPERATIONS) if wants_ops and d.error == ErrorCode.NONE else None
        groups.append(G(error_code=d.error, error_message=message, group_id=group_id, group_state=d.state,
                        protocol_type=d.protocol_type, protocol_data=d.protocol_data, members=members,
                        authorized_operations=ops))
    return ctx.response(throttle_time_ms=0, groups=groups)


async def handle_list_groups(ctx: RequestContext, request) -> object:
    R = ctx.response_class
    try:
        groups = _coordinator(ctx).list_groups(request.states_filter if ctx.version >= 4 else [],
                                               request.types_filter if ctx.version >= 5 else [])
    except KafkaError as exc:
        return ctx.response(throttle_time_ms=0, error_code=exc.code, groups=[])
    return ctx.response(throttle_time_ms=0, error_code=ErrorCode.NONE, groups=[
        R.ListedGroup(group_id=g.group_id, protocol_type=g.protocol_type or "", group_state=g.state.value,
                      group_type="classic") for g in groups])


async def handle_delete_groups(ctx: RequestContext, request) -> object:
    await _ensure_offsets_topic(ctx)
    R = ctx.response_class
    names = list(dict.fromkeys(request.groups_names))
    results = _coordinator(ctx).delete_groups(names)
    results = [(group_id, await _committed(ctx, group_id) if code == ErrorCode.NONE and group_id is not None
                else code) for group_id, code in results]
    for group_id, code in results:
        if code != ErrorCode.NONE:
            log.info("DeleteGroups %s: %s", group_id, code.name)
    return ctx.response(throttle_time_ms=0, results=[R.DeletableGroupResult(group_id=group_id, error_code=code)
                                                     for group_id, code in results])


HANDLERS = {
    ApiKey.FIND_COORDINATOR: handle_find_coordinator,
    ApiKey.JOIN_GROUP: handle_join_group,
    ApiKey.SYNC_GROUP: handle_sync_group,
    ApiKey.HEARTBEAT: handle_heartbeat,
    ApiKey.LEAVE_GROUP: handle_leave_group,
    ApiKey.OFFSET_COMMIT: handle_offset_commit,
    ApiKey.OFFSET_FETCH: handle_offset_fetch,
    ApiKey.OFFSET_DELETE: handle_offset_delete,
    ApiKey.TXN_OFFSET_COMMIT: handle_txn_offset_commit,
    ApiKey.DESCRIBE_GROUPS: handle_describe_groups,
    ApiKey.LIST_GROUPS: handle_list_groups,
    ApiKey.DELETE_GROUPS: handle_delete_groups,
}
