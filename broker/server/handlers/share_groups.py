"""KIP-932 share group membership APIs: ShareGroupHeartbeat and ShareGroupDescribe.

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

Authorization, with an authorizer, as Kafka's KafkaApis checks it: ShareGroupHeartbeat needs READ on the group
(GROUP_AUTHORIZATION_FAILED), then DESCRIBE on every subscribed topic (TOPIC_AUTHORIZATION_FAILED);
ShareGroupDescribe DESCRIBE per group.
"""
from __future__ import annotations

import logging

from minikafka.broker.coordinator.group.share_group_coordinator import ShareHeartbeatRequest
from minikafka.broker.metadata.features import share_groups_enabled
from minikafka.broker.security.acl import AclOperation, ResourceType
from minikafka.broker.server.broker_services import RequestContext
from minikafka.broker.server.handlers.common import client_host, described_assignment, ensure_offsets_topic
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger("minikafka.share_groups")

_UNSET_OPERATIONS = -2147483648


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


HANDLERS = {
    ApiKey.SHARE_GROUP_HEARTBEAT: handle_share_group_heartbeat,
    ApiKey.SHARE_GROUP_DESCRIBE: handle_share_group_describe,
}
