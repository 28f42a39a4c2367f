"""DescribeLogDirs (v1-4) and AlterReplicaLogDirs (v1-2): this broker's log dirs (JBOD), answered by the broker
itself, never forwarded: the dirs and the replicas in them are the broker's own.

DescribeLogDirs lists every configured dir by its absolute path: an offline one with KAFKA_STORAGE_ERROR and
nothing else, an online one with the logs in it (all, or the partitions asked for), each with its size and offset
lag (a current log: how far its end is behind the high watermark; a future log, is_future_key: how far it is
behind the current log). v2 is flexible, v3 adds the top-level error code, v4 the volume's total and usable bytes.
The schema's v5 (IsCordoned, a later Kafka's) is decoded but not advertised, as Kafka 4.1 serves v1-4.

AlterReplicaLogDirs moves replicas to another dir of this broker: a future log is created there and copied by the
ReplicaAlterLogDirsManager while the partition goes on serving, then swapped in. Per partition, as Kafka answers:
LOG_DIR_NOT_FOUND for a path that is not a configured log dir, KAFKA_STORAGE_ERROR for an offline one (or while
any dir is offline), REPLICA_NOT_AVAILABLE for a partition not hosted here — the dir is still remembered and the
replica is created there when it comes. v2 is flexible.

With an authorizer, as Kafka: DescribeLogDirs needs DESCRIBE on the cluster, else it answers no dirs (and, from v3,
CLUSTER_AUTHORIZATION_FAILED); AlterReplicaLogDirs needs ALTER on the cluster, else every partition is
CLUSTER_AUTHORIZATION_FAILED and nothing moves.
"""
from __future__ import annotations

import logging
import os
from collections import defaultdict

from kafka.protocol.admin.cluster import AlterReplicaLogDirsRequest, DescribeLogDirsRequest
from kafka.protocol.api_message import ApiMessage

from minikafka.broker.log.log_manager import future_dir_name
from minikafka.broker.replication.replica_manager import ReplicaManager
from minikafka.broker.security.acl import AclOperation
from minikafka.broker.server.broker_services import RequestContext
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.storage.log_dir import LogDir

log = logging.getLogger("minikafka.handlers.log_dirs")

TopicPartition = tuple[str, int]
TOP_LEVEL_ERROR_MIN_VERSION = 3
VOLUME_BYTES_MIN_VERSION = 4
INVALID_OFFSET_LAG = -1
MAX_FILE_NAME_LENGTH = 255


async def handle_describe_log_dirs(ctx: RequestContext, request: DescribeLogDirsRequest) -> ApiMessage:
    fields: dict[str, object] = {"throttle_time_ms": 0, "results": []}
    if not ctx.authorize_cluster(AclOperation.DESCRIBE):
        if ctx.version >= TOP_LEVEL_ERROR_MIN_VERSION:
            fields["error_code"] = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return ctx.response(**fields)
    wanted: set[TopicPartition] | None = None
    if request.topics is not None:
        wanted = {(t.topic, p) for t in request.topics for p in t.partitions}
    replica_manager = ctx.services.replica_manager
    fields["results"] = [_describe_dir(ctx, replica_manager, log_dir, wanted)
                         for log_dir in replica_manager.log_manager.log_dirs]
    if ctx.version >= TOP_LEVEL_ERROR_MIN_VERSION:
        fields["error_code"] = ErrorCode.NONE
    return ctx.response(**fields)


def _describe_dir(ctx: RequestContext, replica_manager: ReplicaManager, log_dir: LogDir,
                  wanted: set[TopicPartition] | None) -> object:
    R = ctx.response_class.DescribeLogDirsResult
    path = str(log_dir.path.absolute())
    if log_dir.path in replica_manager.log_manager.offline_dirs:
        return R(error_code=ErrorCode.KAFKA_STORAGE_ERROR, log_dir=path, topics=[])
    by_topic = defaultdict(list)
    for tp, the_log, is_future in sorted(replica_manager.log_manager.logs_in(log_dir), key=lambda e: e[:1]):
        if wanted is not None and tp not in wanted:
            continue
        by_topic[tp[0]].append(R.DescribeLogDirsTopic.DescribeLogDirsPartition(
            partition_index=tp[1], partition_size=the_log.size_in_bytes,
            offset_lag=_offset_lag(replica_manager, tp, the_log.log_end_offset, is_future), is_future_key=is_future))
    topics = [R.DescribeLogDirsTopic(name=name, partitions=partitions) for name, partitions in by_topic.items()]
    fields: dict[str, object] = {"error_code": ErrorCode.NONE, "log_dir": path, "topics": topics}
    if ctx.version >= VOLUME_BYTES_MIN_VERSION:
        try:
            volume = os.statvfs(log_dir.path)
            fields["total_bytes"] = volume.f_blocks * volume.f_frsize
            fields["usable_bytes"] = volume.f_bavail * volume.f_frsize
        except OSError as exc:
            log.warning("cannot read the volume sizes of %s: %s", path, exc)
    return R(**fields)


def _offset_lag(replica_manager: ReplicaManager, tp: TopicPartition, log_end_offset: int, is_future: bool) -> int:
    """Kafka's getLogEndOffsetLag."""
    partition = replica_manager.partitions.get(tp)
    if partition is None:
        return INVALID_OFFSET_LAG
    if is_future:
        return max(partition.log.log_end_offset - log_end_offset, 0)
    return max(partition.high_watermark - log_end_offset, 0)


async def handle_alter_replica_log_dirs(ctx: RequestContext, request: AlterReplicaLogDirsRequest) -> ApiMessage:
    R = ctx.response_class.AlterReplicaLogDirTopicResult
    if not ctx.authorize_cluster(AclOperation.ALTER):
        # Kafka's error response: a result per dir and topic named, as they came.
        return ctx.response(throttle_time_ms=0, results=[
            R(topic_name=topic.name, partitions=[
                R.AlterReplicaLogDirPartitionResult(partition_index=index,
                                                    error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
                for index in topic.partitions])
            for entry in request.dirs for topic in entry.topics])
    destinations: dict[TopicPartition, str] = {}
    for entry in request.dirs:
        for topic in entry.topics:
            for index in topic.partitions:
                destinations[(topic.name, index)] = entry.path
    replica_manager = ctx.services.replica_manager
    errors = {tp: alter_replica_log_dir(replica_manager, tp, path) for tp, path in destinations.items()}
    if any(code == ErrorCode.NONE for code in errors.values()):
        replica_manager.alter_log_dirs_manager.wake()
    by_topic = defaultdict(list)
    for (topic, index), code in errors.items():
        by_topic[topic].append(R.AlterReplicaLogDirPartitionResult(partition_index=index, error_code=code))
    return ctx.response(throttle_time_ms=0, results=[R(topic_name=name, partitions=partitions)
                                                     for name, partitions in by_topic.items()])


def alter_replica_log_dir(replica_manager: ReplicaManager, tp: TopicPartition, path: str) -> ErrorCode:
    """Kafka's ReplicaManager.alterReplicaLogDirs for one partition."""
    log_manager = replica_manager.log_manager
    try:
        if len(future_dir_name(*tp)) > MAX_FILE_NAME_LENGTH:
            raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, "The topic name is too long.")
        log_dir = log_manager.log_dir_named(path)
        log_manager.prefer_log_dir(tp, log_dir)
        partition = replica_manager.partitions.get(tp)
        if partition is None:
            raise KafkaError(ErrorCode.REPLICA_NOT_AVAILABLE, f"{tp[0]}-{tp[1]} is not hosted here")
        log_manager.maybe_create_future_log(tp, log_dir, partition.topic_id)
    except KafkaError as exc:
        log.warning("unable to alter the log dir of %s-%d to %s: %s", *tp, path, exc)
        return exc.code
    except OSError as exc:
        log.warning("unable to alter the log dir of %s-%d to %s: %s", *tp, path, exc)
        return ErrorCode.KAFKA_STORAGE_ERROR
    return ErrorCode.NONE


HANDLERS = {ApiKey.DESCRIBE_LOG_DIRS: handle_describe_log_dirs,
            ApiKey.ALTER_REPLICA_LOG_DIRS: handle_alter_replica_log_dirs}
VERSIONS = {ApiKey.DESCRIBE_LOG_DIRS: (1, 4), ApiKey.ALTER_REPLICA_LOG_DIRS: (1, 2)}
