"""Consumer group APIs: FindCoordinator, the classic membership protocol, committed offsets, group admin.

The group coordinator (broker/coordinator/group/group_coordinator.py) and its offset manager (offset_manager.py
there) hold the state; these handlers translate between the wire versions and them. KIP-848's consumer groups are
the coordinator's consumer_group_coordinator (ConsumerGroupHeartbeat, ConsumerGroupDescribe).

Versions served, and what changes between them:
- FindCoordinator (v0-6): v1+ names a key type: a group's coordinator is the leader of its __consumer_offsets
  partition (the first lookup has the controller create that topic, with offsets.topic.replication.factor; with
  fewer brokers than that, or no live leader, the answer is COORDINATOR_NOT_AVAILABLE), a transaction's is this
  broker, any other type (share groups, v6) is INVALID_REQUEST; v1+ carries error messages, v3+ is flexible, v4+
  looks up a batch of keys (KIP-699). A coordinator serves only the groups of the partitions it leads
  (NOT_COORDINATOR for the others).
- JoinGroup (v0-9): a KIP-848 consumer group with members is INCONSISTENT_GROUP_PROTOCOL (classic members in
  consumer groups are not served yet), an empty one becomes a classic group; v1+ brings the rebalance timeout
  (v0 uses the session timeout); from v4 a member without an id gets MEMBER_ID_REQUIRED with its new id and joins
  again (KIP-394); v5+ group instance ids (static membership, KIP-345); v6+ flexible; v7+ answers the protocol
  type, and a protocol name not yet chosen is null; v8+ carries a reason (KIP-800); v9+ a rejoining static leader
  is told to skip the assignment (KIP-814).
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
  v8+ several groups per request (require_stable for all of them); v9's member id and epoch are checked for a
  KIP-848 consumer group (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH), read past for a classic group; v10 topics by id.
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
  v6+ GROUP_ID_NOT_FOUND for an unknown group (before, a Dead group without error). A KIP-848 consumer group is not
  described here, as in Kafka: Dead, and from v6 GROUP_ID_NOT_FOUND "Group G is not a classic group.".
- ListGroups (v0-5): v3+ flexible; v4+ filters by state (KIP-518); v5+ by type, "classic" or "consumer" (KIP-848
  groups, protocol type "consumer", states Empty, Assigning, Reconciling, Stable).
- ConsumerGroupHeartbeat (v0-1, flexible): KIP-848 membership (join with epoch 0, leave with -1 or -2); v0 members
  get a member id from the coordinator, from v1 the consumer makes its own and SubscribedTopicRegex may be set.
  Errors carry Kafka's messages; the answer waits until the heartbeat's records are committed.
- ConsumerGroupDescribe (v0-1, flexible): members with their epochs, assignments and target assignments (topic ids
  and names), the group and assignment epochs, the assignor; v1 each member's type (1, consumer). An unknown group
  or a classic one is GROUP_ID_NOT_FOUND.
- DeleteGroups (v0-2): NON_EMPTY_GROUP for a group with members; v2 flexible. An empty share group's share state is
  deleted in the share coordinator first (DeleteShareGroupState), and the group only when that succeeded.

Authorization, with an authorizer, as Kafka's KafkaApis checks it (before anything else is looked at, so a denied
request changes nothing, and a topic the principal may not see is never revealed as unknown):
- FindCoordinator: DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED) or the transactional id
  (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), per key; a v6 share-group lookup needs CLUSTER_ACTION on the cluster,
  without which every key is CLUSTER_AUTHORIZATION_FAILED.
- JoinGroup, SyncGroup (after its v5 protocol check), Heartbeat, LeaveGroup, ConsumerGroupHeartbeat: READ on the
  group, else GROUP_AUTHORIZATION_FAILED. ConsumerGroupDescribe: DESCRIBE per group.
- OffsetCommit: READ on the group (GROUP_AUTHORIZATION_FAILED for every partition), then READ on each topic
  (TOPIC_AUTHORIZATION_FAILED for its partitions; a v10 topic id that names no topic is UNKNOWN_TOPIC_ID first),
  then unknown topics and partitions. TxnOffsetCommit first needs WRITE on the transactional id
  (TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition), then the same. A group error from the coordinator
  goes to the partitions it was given only.
- OffsetFetch: DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED, per group from v8); a named topic the principal
  may not DESCRIBE is TOPIC_AUTHORIZATION_FAILED, and a fetch of all the group's offsets leaves such topics out.
- OffsetDelete: DELETE on the group (GROUP_AUTHORIZATION_FAILED), READ on each topic (TOPIC_AUTHORIZATION_FAILED).
- DescribeGroups: DESCRIBE per group (GROUP_AUTHORIZATION_FAILED in its entry, those entries first); v3+ authorized
  operations are the principal's on the group. ListGroups: DESCRIBE on the cluster lists every group, otherwise
  only the groups the principal may DESCRIBE. DeleteGroups: DELETE per group (GROUP_AUTHORIZATION_FAILED, those
  results last).
"""
from __future__ import annotations

import logging
import uuid
from typing import Any

from minikafka.broker.coordinator.group.assignor.assignor_spec import Assignment
from minikafka.broker.coordinator.group.consumer_group_coordinator import HeartbeatRequest
from minikafka.broker.coordinator.group.group import SyncResult
from minikafka.broker.coordinator.group.group_coordinator import GroupCoordinator, JoinRequest
from minikafka.broker.coordinator.group.offset_manager import OffsetCommitEntry, OffsetManager
from minikafka.broker.metadata.features import CONSUMER_REBALANCE_PROTOCOL_GROUP_VERSION, GROUP_VERSION, finalized_level
from minikafka.broker.security.acl import AUTHORIZATION_ERRORS, AclOperation, ResourceType
from minikafka.broker.server.add_partitions_to_txn_manager import TransactionSupportedOperation
from minikafka.broker.server.broker_services import RequestContext
from minikafka.broker.server.handlers.common import (
    ZERO_UUID,
    client_host,
    described_assignment,
    ensure_offsets_topic,
    operation_set,
    resolve_topic,
)
from minikafka.broker.server.handlers.share_state import find_share_coordinator
from minikafka.broker.server.handlers.transactions import find_transaction_coordinator
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.errors import DEFAULT_MESSAGES, ErrorCode, KafkaError
from minikafka.protocol.internal_topics import GROUP_METADATA_TOPIC

log = logging.getLogger("minikafka.groups")

GROUP_KEY, TRANSACTION_KEY, SHARE_KEY = 0, 1, 2
# What a coordinator key names, for the DESCRIBE a lookup needs.
_KEY_RESOURCES = {GROUP_KEY: ResourceType.GROUP, TRANSACTION_KEY: ResourceType.TRANSACTIONAL_ID}
FIRST_SHARE_KEY_VERSION = 6



def _coordinator(ctx: RequestContext) -> GroupCoordinator:
    return ctx.services.group_coordinator


def _offset_manager(ctx: RequestContext) -> OffsetManager:
    return ctx.services.group_coordinator.offset_manager


async def _committed(ctx: RequestContext, group_id: str) -> ErrorCode:
    """A request that wrote group records answers once they are committed (NONE) or with the group API error."""
    return await _coordinator(ctx).group_manager.wait_replicated(group_id)




# ---- FindCoordinator ----------------------------------------------------------------------------------------

async def _find_coordinator(ctx: RequestContext, key_type: int, key: str) -> tuple[ErrorCode, int, str, int]:
    resource_type = _KEY_RESOURCES.get(key_type)
    if resource_type is not None and not ctx.authorize(AclOperation.DESCRIBE, resource_type, key):
        return AUTHORIZATION_ERRORS[resource_type], -1, "", -1
    if key_type == TRANSACTION_KEY:
        return await find_transaction_coordinator(ctx, key)
    if key_type == SHARE_KEY:  # share coordinators came with v6
        if ctx.version < FIRST_SHARE_KEY_VERSION:
            return ErrorCode.INVALID_REQUEST, -1, "", -1
        return await find_share_coordinator(ctx, key)
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
        return ctx.response(throttle_time_ms=0, error_code=code, error_message=DEFAULT_MESSAGES.get(code),
                            node_id=node_id, host=host, port=port)
    R = ctx.response_class
    if (key_type == SHARE_KEY and ctx.version >= FIRST_SHARE_KEY_VERSION and request.coordinator_keys
            and not ctx.authorize_cluster(AclOperation.CLUSTER_ACTION)):
        # Share coordinators are looked up by brokers only: Kafka fails the whole request without CLUSTER_ACTION.
        code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return ctx.response(throttle_time_ms=0, coordinators=[
            R.Coordinator(key=key, node_id=-1, host="", port=-1, error_code=code, error_message=DEFAULT_MESSAGES[code])
            for key in request.coordinator_keys])
    coordinators = []
    for key in request.coordinator_keys:
        code, node_id, host, port = await _find_coordinator(ctx, key_type, key)
        coordinators.append(R.Coordinator(key=key, node_id=node_id, host=host, port=port, error_code=code,
                                          error_message=DEFAULT_MESSAGES.get(code)))
    return ctx.response(throttle_time_ms=0, coordinators=coordinators)


# ---- membership -----------------------------------------------------------------------------------------------

def _may_read_group(ctx: RequestContext, group_id: str) -> bool:
    """What membership and offset commits need of a group (else GROUP_AUTHORIZATION_FAILED)."""
    return ctx.authorize(AclOperation.READ, ResourceType.GROUP, group_id)


async def handle_join_group(ctx: RequestContext, request) -> object:
    if not _may_read_group(ctx, request.group_id):
        return ctx.response(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, generation_id=-1,
                            protocol_type=None, protocol_name=None if ctx.version >= 7 else "", leader="",
                            skip_assignment=False, member_id="", members=[])
    await ensure_offsets_topic(ctx)
    R = ctx.response_class
    req = JoinRequest(
        group_id=request.group_id, member_id=request.member_id or "",
        group_instance_id=request.group_instance_id if ctx.version >= 5 else None,
        client_id=ctx.header.client_id or "", client_host=client_host(ctx),
        session_timeout_ms=request.session_timeout_ms,
        rebalance_timeout_ms=request.rebalance_timeout_ms if ctx.version >= 1 else request.session_timeout_ms,
        protocol_type=request.protocol_type or "",
        protocols=[(p.name, bytes(p.metadata or b"")) for p in request.protocols],
        api_version=ctx.version, reason=request.reason if ctx.version >= 8 else None)
    result = await _coordinator(ctx).join_group(req).wait()
    # A static member's join, and any join to a consumer group, wrote records: answered once they are committed.
    if result.error == ErrorCode.NONE and (req.group_instance_id is not None
                                           or req.group_id in _coordinator(ctx).group_manager.consumer_groups):
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
    # As Kafka: the protocol type and name v5+ must carry are checked before the group's authorization.
    if ctx.version >= 5 and (request.protocol_type is None or request.protocol_name is None):
        return ctx.response(throttle_time_ms=0, error_code=ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                            protocol_type=None, protocol_name=None, assignment=b"")
    if not _may_read_group(ctx, request.group_id):
        return ctx.response(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
                            protocol_type=None, protocol_name=None, assignment=b"")
    await ensure_offsets_topic(ctx)
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
    if not _may_read_group(ctx, request.group_id):
        return ctx.response(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    await ensure_offsets_topic(ctx)
    code = _coordinator(ctx).heartbeat(request.group_id, request.generation_id, request.member_id,
                                       request.group_instance_id if ctx.version >= 3 else None)
    return ctx.response(throttle_time_ms=0, error_code=code)


async def handle_leave_group(ctx: RequestContext, request) -> object:
    if not _may_read_group(ctx, request.group_id):
        return ctx.response(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, members=[])
    await ensure_offsets_topic(ctx)
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


# Per request topic, each partition's error, or None where the partition goes to the coordinator.
CommitPlan = list[tuple[Any, list[tuple[int, ErrorCode | None]]]]


def _refused(topics: Any, code: ErrorCode) -> CommitPlan:
    """Every partition of the request answered with `code`, as Kafka's getErrorResponse answers a commit."""
    return [(t, [(p.partition_index, code) for p in t.partitions]) for t in topics]


def _commit_answers(plan: CommitPlan, entry_errors: list[ErrorCode]) -> list[tuple[Any, list[tuple[int, ErrorCode]]]]:
    """The plan's partitions with the coordinator's errors, in order, for those that went to it."""
    results = iter(entry_errors)
    return [(t, [(index, next(results) if code is None else code) for index, code in parts]) for t, parts in plan]


async def handle_txn_offset_commit(ctx: RequestContext, request) -> object:
    R = ctx.response_class
    PR = R.TxnOffsetCommitResponseTopic.TxnOffsetCommitResponsePartition
    plan: CommitPlan = []
    entries: list[OffsetCommitEntry] = []
    # As Kafka: WRITE on the transactional id (which implies the producer id), READ on the group, READ on each topic.
    if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        plan = _refused(request.topics, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    elif not _may_read_group(ctx, request.group_id):
        plan = _refused(request.topics, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    else:
        await ensure_offsets_topic(ctx)
        cache = ctx.services.metadata_cache
        for t in request.topics:
            topic = cache.topics.get(t.name)
            authorized = ctx.authorize(AclOperation.READ, ResourceType.TOPIC, t.name)
            parts: list[tuple[int, ErrorCode | None]] = []
            for p in t.partitions:
                if not authorized:
                    parts.append((p.partition_index, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                elif topic is None or p.partition_index not in topic.partitions:
                    parts.append((p.partition_index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                else:
                    entries.append(OffsetCommitEntry(topic.name, p.partition_index, p.committed_offset,
                                                     p.committed_leader_epoch if ctx.version >= 2 else -1,
                                                     p.committed_metadata))
                    parts.append((p.partition_index, None))
            plan.append((t, parts))
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
    return ctx.response(throttle_time_ms=0, topics=[
        R.TxnOffsetCommitResponseTopic(name=t.name, partitions=[PR(partition_index=index, error_code=code)
                                                                for index, code in parts])
        for t, parts in _commit_answers(plan, entry_errors)])


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
    R = ctx.response_class
    PR = R.OffsetCommitResponseTopic.OffsetCommitResponsePartition
    by_id = ctx.version >= 10
    plan: CommitPlan = []
    entries: list[OffsetCommitEntry] = []
    if not _may_read_group(ctx, request.group_id):
        plan = _refused(request.topics, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    else:
        await ensure_offsets_topic(ctx)
        for t in request.topics:
            topic, code = _topic_by_id_or_name(ctx, by_id, getattr(t, "name", None), getattr(t, "topic_id", None))
            # An unknown topic id names nothing to authorize; a name is authorized before it is looked up, so that
            # a topic the principal may not read is never revealed as unknown.
            name = topic.name if topic is not None else None if by_id else t.name
            if name is not None and not ctx.authorize(AclOperation.READ, ResourceType.TOPIC, name):
                topic, code = None, ErrorCode.TOPIC_AUTHORIZATION_FAILED
            parts: list[tuple[int, ErrorCode | None]] = []
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
    entry_errors: list[ErrorCode] = []
    if entries:
        try:
            entry_errors = await _offset_manager(ctx).commit_offsets(
                request.group_id, request.member_id or "",
                request.group_instance_id if ctx.version >= 7 else None, request.generation_id_or_member_epoch,
                request.retention_time_ms if ctx.version <= 4 else -1, entries, ctx.version)
        except KafkaError as exc:
            # As Kafka's coordinator answers: the group's error for the partitions it was given; those refused
            # before (unauthorized or unknown) keep their own errors.
            entry_errors = [exc.code] * len(entries)
            log.info("OffsetCommit for group %s (member %r, generation %d) refused: %s", request.group_id,
                     request.member_id, request.generation_id_or_member_epoch, exc.code.name)
    return ctx.response(throttle_time_ms=0, topics=[
        R.OffsetCommitResponseTopic(name=None if by_id else t.name, topic_id=t.topic_id if by_id else None,
                                    partitions=[PR(partition_index=index, error_code=code) for index, code in parts])
        for t, parts in _commit_answers(plan, entry_errors)])


FetchedPartition = tuple[int, int, int, str | None, ErrorCode]


async def _fetch_group(ctx: RequestContext, group_id: str, topics: Any, by_id: bool, require_stable: bool,
                       member_id: str | None = None, member_epoch: int = -1
                       ) -> tuple[ErrorCode, list[tuple[str | None, uuid.UUID, list[FetchedPartition]]]]:
    """(group error, [(name, topic id, [(partition, offset, leader epoch, metadata, error)])]). As Kafka: the group
    needs DESCRIBE; offsets are shown only for topics the principal may DESCRIBE: a named topic it may not is
    TOPIC_AUTHORIZATION_FAILED, and a fetch of all the group's offsets leaves such topics out."""
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, []
    await ensure_offsets_topic(ctx)
    offset_manager = _offset_manager(ctx)
    cache = ctx.services.metadata_cache
    requested = None
    # Topics answered here rather than by the coordinator, after its answer: (name, id, partitions, error).
    refused: list[tuple[str | None, uuid.UUID, list[int], ErrorCode]] = []
    if topics is not None:
        requested = []
        for t in topics:
            if by_id:
                topic = cache.topics_by_id.get(t.topic_id)
                if topic is None:
                    refused.append((None, t.topic_id, list(t.partition_indexes), ErrorCode.UNKNOWN_TOPIC_ID))
                    continue
                name = topic.name
            else:
                name = t.name
            if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name):
                refused.append((name, t.topic_id if by_id else ZERO_UUID, list(t.partition_indexes),
                                ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            requested.append((name, list(t.partition_indexes)))
    try:
        if require_stable:
            await offset_manager.wait_stable(group_id)
        found = offset_manager.fetch_offsets(group_id, requested, require_stable, member_id, member_epoch)
    except KafkaError as exc:
        return exc.code, []
    if requested is None:
        found = [(name, parts) for name, parts in found
                 if ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name)]
    out: list[tuple[str | None, uuid.UUID, list[FetchedPartition]]] = []
    for name, parts in found:
        topic = cache.topics.get(name)
        if by_id and topic is None:
            continue
        out.append((name, topic.topic_id if topic is not None else ZERO_UUID,
                    [(p, -1, -1, "", v) if isinstance(v, ErrorCode)
                     else (p, v.offset, v.leader_epoch, v.metadata, ErrorCode.NONE) if v is not None
                     else (p, -1, -1, "", ErrorCode.NONE) for p, v in parts]))
    for refused_name, topic_id, indexes, code in refused:
        out.append((refused_name, topic_id, [(p, -1, -1, "", code) for p in indexes]))
    return ErrorCode.NONE, out


async def handle_offset_fetch(ctx: RequestContext, request) -> object:
    R = ctx.response_class
    if ctx.version >= 8:
        by_id = ctx.version >= 10
        TopicR = R.OffsetFetchResponseGroup.OffsetFetchResponseTopics
        PartR = TopicR.OffsetFetchResponsePartitions
        groups = []
        for g in request.groups:
            code, found = await _fetch_group(ctx, g.group_id, g.topics, by_id, request.require_stable,
                                             g.member_id if ctx.version >= 9 else None,
                                             g.member_epoch if ctx.version >= 9 else -1)
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
    if not ctx.authorize(AclOperation.DELETE, ResourceType.GROUP, request.group_id):
        return ctx.response(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, throttle_time_ms=0, topics=[])
    await ensure_offsets_topic(ctx)
    R = ctx.response_class
    TopicR = R.OffsetDeleteResponseTopic
    PartR = TopicR.OffsetDeleteResponsePartition
    cache = ctx.services.metadata_cache
    known: list[tuple[str, list[int]]] = []
    refused: dict[tuple[str, int], ErrorCode] = {}
    for t in request.topics:
        topic = cache.topics.get(t.name)
        authorized = ctx.authorize(AclOperation.READ, ResourceType.TOPIC, t.name)
        indexes = []
        for p in t.partitions:
            if not authorized:
                refused[(t.name, p.partition_index)] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif topic is None or p.partition_index not in topic.partitions:
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
    R = ctx.response_class
    G = R.DescribedGroup
    coordinator = _coordinator(ctx)
    wants_ops = ctx.version >= 3 and request.include_authorized_operations
    # As Kafka: the groups the principal may not DESCRIBE are answered first, then the described ones.
    groups = []
    authorized = []
    for group_id in request.groups:
        if ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            authorized.append(group_id)
        else:
            groups.append(G(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, error_message=None, group_id=group_id,
                            group_state="", protocol_type="", protocol_data="", members=[],
                            authorized_operations=None))
    if authorized:
        await ensure_offsets_topic(ctx)
    for group_id in authorized:
        d = coordinator.describe_group(group_id, ctx.version)
        message = d.message or (f"Group {group_id} not found." if d.error == ErrorCode.GROUP_ID_NOT_FOUND else None)
        members = [G.DescribedGroupMember(member_id=m.member_id, group_instance_id=m.group_instance_id,
                                          client_id=m.client_id, client_host=m.client_host,
                                          member_metadata=metadata, member_assignment=m.assignment or b"")
                   for m, metadata in d.members]
        ops = (operation_set(ctx.authorized_operations(ResourceType.GROUP, group_id))
               if wants_ops and d.error == ErrorCode.NONE else None)
        groups.append(G(error_code=d.error, error_message=message, group_id=group_id, group_state=d.state,
                        protocol_type=d.protocol_type, protocol_data=d.protocol_data, members=members,
                        authorized_operations=ops))
    return ctx.response(throttle_time_ms=0, groups=groups)


async def handle_list_groups(ctx: RequestContext, request) -> object:
    R = ctx.response_class
    # DESCRIBE on the cluster lists every group (kept by Kafka for compatibility); otherwise only the groups the
    # principal may DESCRIBE. Neither check logs a denial.
    cluster_describe = ctx.authorize_cluster(AclOperation.DESCRIBE, log_if_denied=False)
    try:
        groups = _coordinator(ctx).list_groups(request.states_filter if ctx.version >= 4 else [],
                                               request.types_filter if ctx.version >= 5 else [])
    except KafkaError as exc:
        return ctx.response(throttle_time_ms=0, error_code=exc.code, groups=[])
    return ctx.response(throttle_time_ms=0, error_code=ErrorCode.NONE, groups=[
        R.ListedGroup(group_id=g.group_id, protocol_type=g.protocol_type, group_state=g.state,
                      group_type=g.group_type) for g in groups
        if cluster_describe or ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, g.group_id,
                                             log_if_denied=False)])


async def handle_delete_groups(ctx: RequestContext, request) -> object:
    R = ctx.response_class
    names = list(dict.fromkeys(request.groups_names))
    authorized: list[str | None] = []
    denied: list[str] = []
    for name in names:
        if ctx.authorize(AclOperation.DELETE, ResourceType.GROUP, name):
            authorized.append(name)
        else:
            denied.append(name)
    results: list[tuple[str | None, ErrorCode]] = []
    if authorized:
        await ensure_offsets_topic(ctx)
        # As Kafka: an empty share group's share state is deleted first; a group whose deletion fails stays.
        for share_group_id, partitions in _coordinator(ctx).share.share_partitions_to_delete(authorized).items():
            state_error = await _committed(ctx, share_group_id)
            if state_error == ErrorCode.NONE:
                state_error = await _coordinator(ctx).share.delete_share_state(share_group_id, partitions)
            if state_error != ErrorCode.NONE:
                authorized.remove(share_group_id)
                results.append((share_group_id, state_error))
        results += [(group_id, await _committed(ctx, group_id) if code == ErrorCode.NONE and group_id is not None
                    else code) for group_id, code in _coordinator(ctx).delete_groups(authorized)]
    # As Kafka: the groups the principal may not DELETE follow the coordinator's results.
    results += [(name, ErrorCode.GROUP_AUTHORIZATION_FAILED) for name in denied]
    for group_id, code in results:
        if code != ErrorCode.NONE:
            log.info("DeleteGroups %s: %s", group_id, code.name)
    return ctx.response(throttle_time_ms=0, results=[R.DeletableGroupResult(group_id=group_id, error_code=code)
                                                     for group_id, code in results])


# ---- KIP-848 consumer groups ------------------------------------------------------------------------------------

def _consumer_protocol_enabled(ctx: RequestContext) -> bool:
    """Whether the consumer rebalance protocol is served: listed in group.coordinator.rebalance.protocols and
    group.version 1 finalized; otherwise its APIs answer UNSUPPORTED_VERSION before any other check, as Kafka."""
    return (_coordinator(ctx).config.consumer_protocol_enabled
            and finalized_level(GROUP_VERSION, ctx.services.metadata_cache.image.features)
            >= CONSUMER_REBALANCE_PROTOCOL_GROUP_VERSION)


async def handle_consumer_group_heartbeat(ctx: RequestContext, request) -> object:
    R = ctx.response_class

    def error(code: ErrorCode, message: str | None) -> object:
        return ctx.response(throttle_time_ms=0, error_code=code, error_message=message, member_id=None,
                            member_epoch=0, heartbeat_interval_ms=0, assignment=None)

    if not _consumer_protocol_enabled(ctx):
        return error(ErrorCode.UNSUPPORTED_VERSION, None)
    if not _may_read_group(ctx, request.group_id):
        return error(ErrorCode.GROUP_AUTHORIZATION_FAILED, None)
    owned = None if request.topic_partitions is None else {
        tp.topic_id: list(tp.partitions) for tp in request.topic_partitions}
    req = HeartbeatRequest(
        group_id=request.group_id, member_id=request.member_id, member_epoch=request.member_epoch,
        instance_id=request.instance_id, rack_id=request.rack_id, rebalance_timeout_ms=request.rebalance_timeout_ms,
        subscribed_topic_names=None if request.subscribed_topic_names is None else list(
            request.subscribed_topic_names),
        subscribed_topic_regex=request.subscribed_topic_regex if ctx.version >= 1 else None,
        server_assignor=request.server_assignor, owned_partitions=owned, client_id=ctx.client_id,
        client_host=client_host(ctx), api_version=ctx.version)
    await ensure_offsets_topic(ctx)
    try:
        result = _coordinator(ctx).consumer.heartbeat(req)
    except KafkaError as exc:
        if exc.code not in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE):
            log.info("ConsumerGroupHeartbeat of member %r (epoch %d) in group %s: %s %s", request.member_id,
                     request.member_epoch, request.group_id, exc.code.name, exc.message or "")
        message = exc.message if exc.message else None
        if exc.code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE):
            message = None
        return error(exc.code, message)
    code = await _committed(ctx, request.group_id)
    if code != ErrorCode.NONE:
        return error(code, None)
    assignment = None if result.assignment is None else R.Assignment(topic_partitions=_topic_partitions(
        R.Assignment.TopicPartitions, result.assignment))
    return ctx.response(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
                        member_id=result.member_id, member_epoch=result.member_epoch,
                        heartbeat_interval_ms=result.heartbeat_interval_ms, assignment=assignment)


def _topic_partitions(cls: Any, assignment: Assignment) -> list:
    return [cls(topic_id=topic_id, partitions=sorted(partitions))
            for topic_id, partitions in sorted(assignment.items()) if partitions]


async def handle_consumer_group_describe(ctx: RequestContext, request) -> object:
    G = ctx.response_class.DescribedGroup
    M = G.Member
    coordinator = _coordinator(ctx)
    groups = []
    if not _consumer_protocol_enabled(ctx):
        return ctx.response(throttle_time_ms=0, groups=[
            G(error_code=ErrorCode.UNSUPPORTED_VERSION, error_message=None, group_id=group_id, group_state="",
              group_epoch=0, assignment_epoch=0, assignor_name="", members=[]) for group_id in request.group_ids])

    authorized = [g for g in request.group_ids if ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, g)]
    if authorized:
        await ensure_offsets_topic(ctx)
    for group_id in request.group_ids:
        if group_id not in authorized:
            groups.append(G(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, error_message=None, group_id=group_id,
                            group_state="", group_epoch=0, assignment_epoch=0, assignor_name="", members=[]))
            continue
        try:
            group = coordinator.consumer.describe_group(group_id)
        except KafkaError as exc:
            groups.append(G(error_code=exc.code, error_message=exc.message or None, group_id=group_id,
                            group_state="", group_epoch=0, assignment_epoch=0, assignor_name="", members=[]))
            continue
        members = [M(member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id,
                     member_epoch=m.member_epoch, client_id=m.client_id, client_host=m.client_host,
                     subscribed_topic_names=sorted(m.subscribed_topic_names),
                     subscribed_topic_regex=m.subscribed_topic_regex,
                     assignment=described_assignment(ctx, M.Assignment, m.assigned_partitions),
                     target_assignment=described_assignment(ctx, M.Assignment, group.target_assignment_of(m.member_id)),
                     member_type=0 if m.use_classic_protocol else 1)
                   for m in group.members.values()]
        ops = (ctx.authorized_operations(ResourceType.GROUP, group_id) if request.include_authorized_operations
               else -2147483648)
        groups.append(G(error_code=ErrorCode.NONE, error_message=None, group_id=group_id,
                        group_state=group.state.value, group_epoch=group.group_epoch,
                        assignment_epoch=group.target_assignment_epoch,
                        assignor_name=coordinator.consumer.assignor_name(group), members=members,
                        authorized_operations=ops))
    return ctx.response(throttle_time_ms=0, groups=groups)


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
    ApiKey.CONSUMER_GROUP_HEARTBEAT: handle_consumer_group_heartbeat,
    ApiKey.CONSUMER_GROUP_DESCRIBE: handle_consumer_group_describe,
}
