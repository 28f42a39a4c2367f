"""KIP-932 share group APIs: membership (ShareGroupHeartbeat, ShareGroupDescribe) and offsets
(DescribeShareGroupOffsets, AlterShareGroupOffsets, DeleteShareGroupOffsets).

The group coordinator's share_group_coordinator holds the state; these handlers translate between the wire and it.
Both are served only while `share.version` 1 is finalized; otherwise they answer UNSUPPORTED_VERSION before any
other check, as Kafka.

Versions served, and what changes between them:
- ShareGroupHeartbeat (v1, flexible; v0 was Kafka 4.0's early access, which 4.1 no longer serves): join with member
  epoch 0 and the member id the consumer made up, stay with the epoch it was given, leave with -1. Errors carry
  Kafka's messages; the answer waits until the heartbeat's records are committed. Share partitions are assigned once
  the share coordinator has initialized their state, which the heartbeat that finds them uninitialized sets off.
- ShareGroupDescribe (v1, flexible): members with their epochs, subscriptions and assignments (topic ids and
  names), the group and assignment epochs, the assignor ("simple"), authorized operations when asked. An unknown
  group, or one of another type, is GROUP_ID_NOT_FOUND.
- DescribeShareGroupOffsets (v0, flexible): each share-partition's start offset and leader epoch, read from the
  share coordinator (ReadShareGroupStateSummary); without topics, every share-partition the group initialized. A
  topic, partition or group without share state has start offset -1 and no error, as OffsetFetch answers.
- AlterShareGroupOffsets (v0, flexible): only for an empty share group (NON_EMPTY_GROUP; GROUP_ID_NOT_FOUND for
  none): the share-partitions' state is initialized anew in the share coordinator with the given start offsets, at
  the group epoch, so a new member is delivered the records from there (the offsets reset). Unknown topics and
  partitions are UNKNOWN_TOPIC_OR_PARTITION each.
- DeleteShareGroupOffsets (v0, flexible): only for an empty share group: the topics' share state is deleted in the
  share coordinator (DeleteShareGroupState) and leaves the group's share state metadata; a topic without any is
  UNKNOWN_TOPIC_OR_PARTITION.

Authorization, with an authorizer, as Kafka's KafkaApis checks it: ShareGroupHeartbeat needs READ on the group
(GROUP_AUTHORIZATION_FAILED), then DESCRIBE on every subscribed topic (TOPIC_AUTHORIZATION_FAILED);
ShareGroupDescribe DESCRIBE per group; DescribeShareGroupOffsets DESCRIBE on the group, then on each topic (those
refused are TOPIC_AUTHORIZATION_FAILED, or left out when all the group's are asked for); AlterShareGroupOffsets READ
on the group and on each topic; DeleteShareGroupOffsets DELETE on the group and READ on each topic.
"""
from __future__ import annotations

import logging
import uuid

from minikafka.broker.coordinator.group.share_group_coordinator import ShareHeartbeatRequest
from minikafka.broker.metadata.features import share_groups_enabled
from minikafka.broker.metadata.metadata_cache import MetadataCache
from minikafka.broker.security.acl import AclOperation, ResourceType
from minikafka.broker.server.broker_services import RequestContext
from minikafka.broker.server.handlers.common import client_host, described_assignment, ensure_offsets_topic
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.errors import DEFAULT_MESSAGES, ErrorCode, KafkaError

log = logging.getLogger("minikafka.share_groups")

_UNSET_OPERATIONS = -2147483648
_ZERO_UUID = uuid.UUID(int=0)


async def handle_share_group_heartbeat(ctx: RequestContext, request) -> object:
    R = ctx.response_class

    def error(code: ErrorCode, message: str | None) -> object:
        return ctx.response(throttle_time_ms=0, error_code=code, error_message=message, member_id=None,
                            member_epoch=0, heartbeat_interval_ms=0, assignment=None)

    if not share_groups_enabled(ctx.services.metadata_cache.image.features):
        return error(ErrorCode.UNSUPPORTED_VERSION, None)
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return error(ErrorCode.GROUP_AUTHORIZATION_FAILED, None)
    topics = request.subscribed_topic_names
    if topics and any(not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, t) for t in set(topics)):
        return error(ErrorCode.TOPIC_AUTHORIZATION_FAILED, None)
    coordinator = ctx.services.group_coordinator
    req = ShareHeartbeatRequest(group_id=request.group_id, member_id=request.member_id,
                                member_epoch=request.member_epoch, rack_id=request.rack_id,
                                subscribed_topic_names=None if topics is None else list(topics),
                                client_id=ctx.client_id, client_host=client_host(ctx))
    await ensure_offsets_topic(ctx)
    try:
        result, initialize = coordinator.share.heartbeat(req)
    except KafkaError as exc:
        if exc.code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE):
            return error(exc.code, None)
        log.info("ShareGroupHeartbeat of member %r (epoch %d) in group %s: %s %s", request.member_id,
                 request.member_epoch, request.group_id, exc.code.name, exc.message or "")
        return error(exc.code, exc.message or None)
    code = await coordinator.group_manager.wait_replicated(request.group_id)
    if code != ErrorCode.NONE:
        return error(code, None)
    if initialize is not None:
        coordinator.share.request_initialize(initialize)
    assignment = None if result.assignment is None else R.Assignment(topic_partitions=[
        R.Assignment.TopicPartitions(topic_id=topic_id, partitions=sorted(partitions))
        for topic_id, partitions in sorted(result.assignment.items()) if partitions])
    return ctx.response(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
                        member_id=result.member_id, member_epoch=result.member_epoch,
                        heartbeat_interval_ms=result.heartbeat_interval_ms, assignment=assignment)


async def handle_share_group_describe(ctx: RequestContext, request) -> object:
    G = ctx.response_class.DescribedGroup
    M = G.Member
    coordinator = ctx.services.group_coordinator

    def failed(group_id: str, code: ErrorCode, message: str | None) -> object:
        return G(error_code=code, error_message=message, group_id=group_id, group_state="", group_epoch=0,
                 assignment_epoch=0, assignor_name="", members=[])

    if not share_groups_enabled(ctx.services.metadata_cache.image.features):
        return ctx.response(throttle_time_ms=0, groups=[failed(g, ErrorCode.UNSUPPORTED_VERSION, None)
                                                        for g in request.group_ids])

    authorized = [g for g in request.group_ids if ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, g)]
    if authorized:
        await ensure_offsets_topic(ctx)
    groups = []
    for group_id in request.group_ids:
        if group_id not in authorized:
            groups.append(failed(group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED, None))
            continue
        try:
            group = coordinator.share.describe_group(group_id)
        except KafkaError as exc:
            groups.append(failed(group_id, exc.code, exc.message or None))
            continue
        members = [M(member_id=m.member_id, rack_id=m.rack_id, member_epoch=m.member_epoch, client_id=m.client_id,
                     client_host=m.client_host, subscribed_topic_names=sorted(m.subscribed_topic_names),
                     assignment=described_assignment(ctx, M.Assignment, m.assigned_partitions))
                   for m in group.members.values()]
        ops = (ctx.authorized_operations(ResourceType.GROUP, group_id) if request.include_authorized_operations
               else _UNSET_OPERATIONS)
        groups.append(G(error_code=ErrorCode.NONE, error_message=None, group_id=group_id,
                        group_state=group.state.value, group_epoch=group.group_epoch,
                        assignment_epoch=group.target_assignment_epoch,
                        assignor_name=coordinator.share.assignor_name(), members=members,
                        authorized_operations=ops))
    return ctx.response(throttle_time_ms=0, groups=groups)


def _topic_id(cache: MetadataCache, name: str) -> uuid.UUID | None:
    topic = cache.topics.get(name)
    return None if topic is None else topic.topic_id


def _topic_name(cache: MetadataCache, topic_id: uuid.UUID) -> str | None:
    topic = cache.topics_by_id.get(topic_id)
    return None if topic is None else topic.name


async def handle_describe_share_group_offsets(ctx: RequestContext, request) -> object:
    R = ctx.response_class
    G, T = R.DescribeShareGroupOffsetsResponseGroup, R.DescribeShareGroupOffsetsResponseGroup.\
        DescribeShareGroupOffsetsResponseTopic
    P = T.DescribeShareGroupOffsetsResponsePartition
    coordinator = ctx.services.group_coordinator
    enabled = share_groups_enabled(ctx.services.metadata_cache.image.features)

    def failed(group_id: str, code: ErrorCode, message: str | None) -> object:
        return G(group_id=group_id, topics=[], error_code=code, error_message=message)

    async def describe(group) -> object:
        group_id = group.group_id
        if not enabled:
            return failed(group_id, ErrorCode.UNSUPPORTED_VERSION, None)
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            return failed(group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED, None)
        if group.topics is not None and not group.topics:
            return failed(group_id, ErrorCode.NONE, None)
        await ensure_offsets_topic(ctx)
        cache = ctx.services.metadata_cache
        try:
            if group.topics is None:  # every initialized share-partition, of the topics the caller may describe
                asked = {tid: (name, sorted(ps)) for tid, ps in coordinator.share.initialized_partitions(
                    group_id).items() if (name := _topic_name(cache, tid)) is not None
                    and ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name, log_if_denied=False)}
                refused: list = []
                unknown: list = []
            else:
                coordinator.group_manager.check_active(group_id)
                allowed = [t for t in group.topics
                           if ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, t.topic_name)]
                refused = [t for t in group.topics if t not in allowed]
                asked, unknown = {}, []
                for t in allowed:
                    tid = _topic_id(cache, t.topic_name)
                    if tid is None:
                        unknown.append(t)
                    else:
                        asked[tid] = (t.topic_name, list(t.partitions))
            offsets = await coordinator.share.read_start_offsets(group_id, {t: ps for t, (_n, ps) in asked.items()})
        except KafkaError as exc:
            return failed(group_id, exc.code, exc.message or None)
        topics = [T(topic_name=name, topic_id=tid, partitions=[
            P(partition_index=p, start_offset=offsets[(tid, p)][0], leader_epoch=offsets[(tid, p)][1],
              error_code=ErrorCode.NONE, error_message=None) for p in ps]) for tid, (name, ps) in asked.items()]
        # A topic that does not exist has no offsets: -1, no error, as OffsetFetch answers.
        topics += [T(topic_name=t.topic_name, topic_id=_ZERO_UUID, partitions=[
            P(partition_index=p, start_offset=-1, leader_epoch=-1, error_code=ErrorCode.NONE, error_message=None)
            for p in t.partitions]) for t in unknown]
        topics += [T(topic_name=t.topic_name, topic_id=_ZERO_UUID, partitions=[
            P(partition_index=p, start_offset=-1, leader_epoch=0, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
              error_message=DEFAULT_MESSAGES[ErrorCode.TOPIC_AUTHORIZATION_FAILED]) for p in t.partitions])
            for t in refused]
        return G(group_id=group_id, topics=topics, error_code=ErrorCode.NONE, error_message=None)

    return ctx.response(throttle_time_ms=0, groups=[await describe(g) for g in request.groups])


async def handle_alter_share_group_offsets(ctx: RequestContext, request) -> object:
    R = ctx.response_class
    T = R.AlterShareGroupOffsetsResponseTopic
    P = T.AlterShareGroupOffsetsResponsePartition

    def error(code: ErrorCode, message: str | None) -> object:
        return ctx.response(throttle_time_ms=0, error_code=code, error_message=message, responses=[])

    def partition(index: int, code: ErrorCode) -> object:
        return P(partition_index=index, error_code=code,
                 error_message=None if code == ErrorCode.NONE else DEFAULT_MESSAGES.get(code))

    if not share_groups_enabled(ctx.services.metadata_cache.image.features):
        return error(ErrorCode.UNSUPPORTED_VERSION, DEFAULT_MESSAGES.get(ErrorCode.UNSUPPORTED_VERSION))
    group_id = request.group_id
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, group_id):
        return error(ErrorCode.GROUP_AUTHORIZATION_FAILED, DEFAULT_MESSAGES[ErrorCode.GROUP_AUTHORIZATION_FAILED])
    cache = ctx.services.metadata_cache
    refused: list = []
    offsets: dict[str, dict[int, int]] = {}
    for topic in request.topics:
        if not ctx.authorize(AclOperation.READ, ResourceType.TOPIC, topic.topic_name):
            code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif _topic_id(cache, topic.topic_name) is None:
            code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        else:
            offsets.setdefault(topic.topic_name, {}).update(
                {p.partition_index: p.start_offset for p in topic.partitions})
            continue
        refused.append(T(topic_name=topic.topic_name, topic_id=_topic_id(cache, topic.topic_name) or _ZERO_UUID,
                         partitions=[partition(p.partition_index, code) for p in topic.partitions]))
    coordinator = ctx.services.group_coordinator
    await ensure_offsets_topic(ctx)
    try:
        coordinator.group_manager.check_active(group_id)
        alteration = coordinator.share.begin_alter_offsets(group_id, offsets)
    except KafkaError as exc:
        return error(exc.code, exc.message or DEFAULT_MESSAGES.get(exc.code))
    code = await coordinator.group_manager.wait_replicated(group_id)
    if code != ErrorCode.NONE:
        return error(code, DEFAULT_MESSAGES.get(code))
    await coordinator.share.finish_alter_offsets(alteration)
    topics = [T(topic_name=name, topic_id=tid or _ZERO_UUID,
                partitions=[partition(p, c) for p, c in errors.items()])
              for name, (tid, errors) in alteration.topics.items()]
    return ctx.response(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
                        responses=refused + topics)


async def handle_delete_share_group_offsets(ctx: RequestContext, request) -> object:
    T = ctx.response_class.DeleteShareGroupOffsetsResponseTopic

    def error(code: ErrorCode, message: str | None) -> object:
        return ctx.response(throttle_time_ms=0, error_code=code, error_message=message, responses=[])

    if not share_groups_enabled(ctx.services.metadata_cache.image.features):
        return error(ErrorCode.UNSUPPORTED_VERSION, DEFAULT_MESSAGES.get(ErrorCode.UNSUPPORTED_VERSION))
    group_id = request.group_id
    if not ctx.authorize(AclOperation.DELETE, ResourceType.GROUP, group_id):
        return error(ErrorCode.GROUP_AUTHORIZATION_FAILED, DEFAULT_MESSAGES[ErrorCode.GROUP_AUTHORIZATION_FAILED])
    denied = DEFAULT_MESSAGES[ErrorCode.TOPIC_AUTHORIZATION_FAILED]
    topics = [T(topic_name=t.topic_name, topic_id=_ZERO_UUID, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                error_message=denied)
              for t in request.topics if not ctx.authorize(AclOperation.READ, ResourceType.TOPIC, t.topic_name)]
    refused = {t.topic_name for t in topics}
    coordinator = ctx.services.group_coordinator
    await ensure_offsets_topic(ctx)
    try:
        coordinator.group_manager.check_active(group_id)
        deletion = coordinator.share.begin_delete_offsets(
            group_id, [t.topic_name for t in request.topics if t.topic_name not in refused])
    except KafkaError as exc:
        return error(exc.code, exc.message or DEFAULT_MESSAGES.get(exc.code))
    code = await coordinator.group_manager.wait_replicated(group_id)
    if code != ErrorCode.NONE:
        return error(code, DEFAULT_MESSAGES.get(code))
    results = await coordinator.share.finish_delete_offsets(deletion)
    topics += [T(topic_name=name, topic_id=_ZERO_UUID, error_code=code, error_message=message)
               for name, (code, message) in deletion.refused.items()]
    topics += [T(topic_name=name, topic_id=tid, error_code=results[tid],
                 error_message=None if results[tid] == ErrorCode.NONE else DEFAULT_MESSAGES.get(results[tid]))
               for tid, (name, _ps) in deletion.partitions.items()]
    return ctx.response(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, responses=topics)


HANDLERS = {
    ApiKey.SHARE_GROUP_HEARTBEAT: handle_share_group_heartbeat,
    ApiKey.SHARE_GROUP_DESCRIBE: handle_share_group_describe,
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: handle_describe_share_group_offsets,
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: handle_alter_share_group_offsets,
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: handle_delete_share_group_offsets,
}
