"""ListOffsets (v1-11) and OffsetForLeaderEpoch (v2-4): offsets by time and by leader epoch, from the leader.

ListOffsets: one offset per partition from v1 on (v0, with its offset arrays, is gone since Kafka 4.0). v2+ carries
the isolation level: read_committed stops at the last stable offset, read_uncommitted at the high watermark; a
replica (replica id >= 0) may see up to the log end offset: a follower resetting an out-of-range position asks
for the leader's log end or start offset. v4+ fences by the caller's current leader epoch (FENCED_LEADER_EPOCH /
UNKNOWN_LEADER_EPOCH, checked before leadership: NOT_LEADER_OR_FOLLOWER) and answers the leader epoch of the
offset found. The special
timestamps (storage/special_timestamps.py) are answered at every version, as Kafka's broker does; clients ask for
MAX_TIMESTAMP from v7, EARLIEST_LOCAL from v8, LATEST_TIERED from v9 and EARLIEST_PENDING_UPLOAD from v11, and
with no tiered storage the last two find no offset (-1). v6+ is flexible; v10 (KIP-1075) changes nothing here,
since every answer is local. An unknown negative timestamp is INVALID_REQUEST. With an authorizer, each topic needs
DESCRIBE (TOPIC_AUTHORIZATION_FAILED for its partitions).

OffsetForLeaderEpoch: the end offset of the largest leader epoch <= the one asked for, which a follower or a
consumer that saw a leader change uses to detect truncation (KIP-101, KIP-279, KIP-320). v2+ fences by the current
leader epoch, in the same order as ListOffsets; v3+ carries a replica id (a follower truncating), and every caller
is answered from the leader's log; v4+ is flexible. With an authorizer, CLUSTER_ACTION on the cluster (a follower)
or DESCRIBE on the topic (a consumer, KIP-320) is needed: TOPIC_AUTHORIZATION_FAILED otherwise.
"""
from __future__ import annotations

from kafka.protocol.api_message import ApiMessage
from kafka.protocol.consumer.offsets import IsolationLevel, ListOffsetsRequest, OffsetForLeaderEpochRequest

from minikafka.broker.security.acl import AclOperation, ResourceType
from minikafka.broker.server.broker_services import RequestContext
from minikafka.broker.server.handlers.common import per_partition
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.errors import ErrorCode


async def handle_list_offsets(ctx: RequestContext, request: ListOffsetsRequest) -> ApiMessage:
    R = ctx.response_class
    PR = R.ListOffsetsTopicResponse.ListOffsetsPartitionResponse
    replica_manager = ctx.services.replica_manager
    isolation = request.isolation_level if ctx.version >= 2 else IsolationLevel.READ_UNCOMMITTED
    isolation_level = None if request.replica_id >= 0 else isolation

    def answer(t, p):
        found = replica_manager.fetch_offset_for_timestamp((t.name, p.partition_index), p.timestamp, isolation_level,
                                                           p.current_leader_epoch)
        return PR(partition_index=p.partition_index, error_code=ErrorCode.NONE, timestamp=found.timestamp,
                  offset=found.offset, leader_epoch=found.leader_epoch)

    def failed(p, code):
        return PR(partition_index=p.partition_index, error_code=code, timestamp=-1, offset=-1, leader_epoch=-1)

    return ctx.response(throttle_time_ms=0, topics=[
        R.ListOffsetsTopicResponse(name=t.name, partitions=parts)
        for t, parts in per_partition(request.topics, answer, failed,
                                      lambda t: ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, t.name))])


async def handle_offset_for_leader_epoch(ctx: RequestContext, request: OffsetForLeaderEpochRequest) -> ApiMessage:
    R = ctx.response_class
    EO = R.OffsetForLeaderTopicResult.EpochEndOffset
    replica_manager = ctx.services.replica_manager

    def answer(t, p):
        epoch, end_offset = replica_manager.last_offset_for_leader_epoch((t.topic, p.partition), p.leader_epoch,
                                                                         p.current_leader_epoch)
        return EO(error_code=ErrorCode.NONE, partition=p.partition, leader_epoch=epoch, end_offset=end_offset)

    def failed(p, code):
        return EO(error_code=code, partition=p.partition, leader_epoch=-1, end_offset=-1)

    # A follower's truncation needs CLUSTER_ACTION; since KIP-320 a consumer's check needs DESCRIBE on the topic.
    cluster_action = ctx.authorize_cluster(AclOperation.CLUSTER_ACTION, log_if_denied=False)
    return ctx.response(throttle_time_ms=0, topics=[
        R.OffsetForLeaderTopicResult(topic=t.topic, partitions=parts)
        for t, parts in per_partition(
            request.topics, answer, failed,
            lambda t: cluster_action or ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, t.topic))])


HANDLERS = {ApiKey.LIST_OFFSETS: handle_list_offsets, ApiKey.OFFSET_FOR_LEADER_EPOCH: handle_offset_for_leader_epoch}
