"""ListOffsets and OffsetForLeaderEpoch: offsets by time and by leader epoch."""
from __future__ import annotations

from minikafka.protocol.errors import ErrorCode, KafkaError

from ..kafka_apis import RequestContext
from ..partition import Partition
from .common import per_partition

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
EARLIEST_PENDING_UPLOAD = -6
READ_COMMITTED = 1


def _epoch(epoch: int | None) -> int:
    return -1 if epoch is None else epoch


def _list_offset(partition: Partition, timestamp: int, isolation_level: int, replica_id: int) -> tuple[int, int, int]:
    """(timestamp, offset, leader_epoch) for one ListOffsets partition, as Kafka's fetchOffsetForTimestamp."""
    the_log = partition.log
    if replica_id >= 0:
        upper = the_log.log_end_offset
    elif isolation_level == READ_COMMITTED:
        upper = partition.last_stable_offset()
    else:
        upper = partition.high_watermark
    if timestamp == LATEST:
        return -1, upper, _epoch(the_log.leader_epoch_cache.latest_epoch)
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        start = the_log.log_start_offset
        return -1, start, _epoch(the_log.leader_epoch_cache.epoch_for_offset(start))
    if timestamp in (LATEST_TIERED, EARLIEST_PENDING_UPLOAD):
        return -1, -1, -1
    if timestamp == MAX_TIMESTAMP:
        found = the_log.offset_of_max_timestamp()
    elif timestamp >= 0:
        found = the_log.fetch_offset_by_timestamp(timestamp)
    else:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"unknown special timestamp {timestamp}")
    if found is None or found[0] >= upper:
        return -1, -1, -1
    offset, ts, epoch = found
    return ts, offset, epoch


async def handle_list_offsets(ctx: RequestContext, request) -> object:
    R = ctx.response_class
    PR = R.ListOffsetsTopicResponse.ListOffsetsPartitionResponse
    replica_manager = ctx.broker.replica_manager
    isolation = request.isolation_level if ctx.version >= 2 else 0

    def answer(t, p):
        partition = replica_manager.leader_partition(t.name, p.partition_index, p.current_leader_epoch)
        ts, offset, epoch = _list_offset(partition, p.timestamp, isolation, request.replica_id)
        return PR(partition_index=p.partition_index, error_code=ErrorCode.NONE, timestamp=ts, offset=offset,
                  leader_epoch=epoch)

    def failed(p, code):
        return PR(partition_index=p.partition_index, error_code=code, timestamp=-1, offset=-1, leader_epoch=-1)

    return ctx.response(throttle_time_ms=0, topics=[
        R.ListOffsetsTopicResponse(name=t.name, partitions=parts)
        for t, parts in per_partition(request.topics, answer, failed)])


async def handle_offset_for_leader_epoch(ctx: RequestContext, request) -> object:
    R = ctx.response_class
    EO = R.OffsetForLeaderTopicResult.EpochEndOffset
    replica_manager = ctx.broker.replica_manager

    def answer(t, p):
        partition = replica_manager.leader_partition(t.topic, p.partition, p.current_leader_epoch)
        epoch, end_offset = partition.log.end_offset_for_epoch(p.leader_epoch)
        return EO(error_code=ErrorCode.NONE, partition=p.partition, leader_epoch=epoch, end_offset=end_offset)

    def failed(p, code):
        return EO(error_code=code, partition=p.partition, leader_epoch=-1, end_offset=-1)

    return ctx.response(throttle_time_ms=0, topics=[
        R.OffsetForLeaderTopicResult(topic=t.topic, partitions=parts)
        for t, parts in per_partition(request.topics, answer, failed)])


HANDLERS = {2: handle_list_offsets, 23: handle_offset_for_leader_epoch}
