"""The replica manager: the partitions this broker hosts, and appends and reads across them.

Handlers speak to partitions only through here, so produce and fetch share one notion of errors (a Kafka error
per partition, never an exception across the connection) and one purgatory.
"""
from __future__ import annotations

import functools
import logging
import time
import uuid
from dataclasses import dataclass
from typing import NamedTuple

import trio

from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.storage.log import AppendInfo, TimestampAndOffset

from .log_manager import LogManager
from .partition import Partition
from .purgatory import Purgatory

log = logging.getLogger("minikafka.replica_manager")

TopicPartition = tuple[str, int]


def now_ms() -> int:
    return int(time.time() * 1000)


def error_of(exc: Exception) -> KafkaError:
    """Storage and record errors are Kafka errors already; an OSError is a storage failure, anything else a bug."""
    if isinstance(exc, KafkaError):
        return exc
    if isinstance(exc, OSError):
        return KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, str(exc))
    return KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, repr(exc))


class AppendResult(NamedTuple):
    error: KafkaError | None
    info: AppendInfo | None


@dataclass
class FetchPartitionRequest:
    topic_partition: TopicPartition
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1


@dataclass
class FetchPartitionResult:
    error: KafkaError | None = None
    records: bytes = b""
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    diverging_epoch: tuple[int, int] | None = None
    leader_id: int = -1
    leader_epoch: int = -1


class ReplicaManager:
    def __init__(self, node_id: int, log_manager: LogManager, purgatory: Purgatory) -> None:
        self.node_id = node_id
        self.log_manager = log_manager
        self.purgatory = purgatory
        self.partitions: dict[TopicPartition, Partition] = {}

    def get_partition(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    def partition_or_error(self, topic: str, index: int) -> Partition:
        partition = self.partitions.get((topic, index))
        if partition is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic}-{index} is not hosted here")
        return partition

    def leader_partition(self, topic: str, index: int, current_leader_epoch: int = -1) -> Partition:
        """The partition if this broker leads it, fenced by the caller's view of the leader epoch (KIP-320)."""
        partition = self.partition_or_error(topic, index)
        partition.require_leader()
        partition.check_leader_epoch(current_leader_epoch)
        return partition

    def make_leader(self, topic: str, index: int, topic_id: uuid.UUID, leader_epoch: int, replicas: list[int],
                    isr: list[int], config_overrides: dict[str, str]) -> Partition:
        """Host a partition as its leader, creating its log if new."""
        partition = self.partitions.get((topic, index))
        if partition is None:
            the_log = self.log_manager.get_or_create_log(topic, index, topic_id, config_overrides)
            partition = Partition(topic, index, topic_id, the_log, self.node_id, self.node_id, leader_epoch,
                                  replicas, isr, high_watermark=self.log_manager.high_watermark_of(topic, index))
            self.partitions[(topic, index)] = partition
        partition.leader_id = self.node_id
        partition.leader_epoch = leader_epoch
        partition.replicas = replicas
        partition.isr = isr
        partition.log.leader_epoch_cache.assign(leader_epoch, partition.log.log_end_offset)
        partition.clamp_high_watermark()
        partition.maybe_increment_high_watermark()
        return partition

    def delete_partition(self, topic: str, index: int) -> None:
        partition = self.partitions.pop((topic, index), None)
        if partition is not None:
            self.log_manager.delete_log(topic, index)
            self.purgatory.check_and_complete((topic, index))

    def append_records(self, required_acks: int,
                       entries: dict[TopicPartition, bytearray]) -> dict[TopicPartition, AppendResult]:
        """Append to leaders. With one replica in the ISR an acks=all append is complete once it is local."""
        results: dict[TopicPartition, AppendResult] = {}
        timestamp = now_ms()
        for tp, records in entries.items():
            try:
                partition = self.leader_partition(*tp)
                min_isr = partition.log.config.min_insync_replicas
                if required_acks == -1 and len(partition.isr) < min_isr:
                    raise KafkaError(ErrorCode.NOT_ENOUGH_REPLICAS,
                                     f"ISR {partition.isr} is smaller than min.insync.replicas={min_isr}")
                refused = self.log_manager.disk_quota.refusal(tp, len(records))
                if refused is not None:  # a full disk (the quota logs its refusals itself, once per episode)
                    results[tp] = AppendResult(refused, None)
                    continue
                info = partition.log.append_as_leader(records, partition.leader_epoch, timestamp)
                partition.maybe_increment_high_watermark()
                results[tp] = AppendResult(None, info)
                self.purgatory.check_and_complete(tp)
            except Exception as exc:  # noqa: BLE001 - every failure becomes this partition's error code
                err = error_of(exc)
                if err.code in (ErrorCode.UNKNOWN_SERVER_ERROR, ErrorCode.KAFKA_STORAGE_ERROR):
                    log.error("append to %s-%s failed: %s", tp[0], tp[1], err)
                else:
                    log.info("append to %s-%s refused: %s %s", tp[0], tp[1], err.code.name, err)
                results[tp] = AppendResult(err, None)
        return results

    async def read_partition(self, request: FetchPartitionRequest, max_bytes: int, min_one_message: bool,
                             committed_only: bool) -> FetchPartitionResult:
        """Read one partition for a fetch: from the leader, bounded by the HW for consumers.

        Reads from the active segment stay on the event loop (its pages are warm: they were just written); reads
        of rolled segments, which a catching-up consumer may need from disk, go to a worker thread so they never
        stall other connections.
        """
        result = FetchPartitionResult()
        try:
            partition = self.leader_partition(*request.topic_partition, request.current_leader_epoch)
            result.leader_id, result.leader_epoch = partition.leader_id, partition.leader_epoch
            the_log = partition.log
            result.high_watermark = partition.high_watermark
            result.last_stable_offset = partition.last_stable_offset()
            result.log_start_offset = the_log.log_start_offset
            if request.last_fetched_epoch >= 0:
                epoch, end_offset = the_log.end_offset_for_epoch(request.last_fetched_epoch)
                if epoch != request.last_fetched_epoch or end_offset < request.fetch_offset:
                    result.diverging_epoch = (epoch, end_offset)
                    return result
            read = functools.partial(the_log.read, request.fetch_offset, min(max_bytes, request.max_bytes),
                                     max_offset=partition.high_watermark if committed_only else None,
                                     min_one_message=min_one_message)
            if request.fetch_offset < the_log.active_segment.base_offset:
                result.records = await trio.to_thread.run_sync(read)
            else:
                result.records = read()
        except Exception as exc:  # noqa: BLE001
            result.error = error_of(exc)
            result.records = b""
        return result

    def fetch_offset_for_timestamp(self, topic_partition: TopicPartition, timestamp: int, isolation_level: int | None,
                                   current_leader_epoch: int = -1) -> TimestampAndOffset:
        """ListOffsets for one partition, from its leader (Kafka's fetchOffsetForTimestamp). `timestamp` is a time
        or a SpecialTimestamp; a client passes its isolation level, a replica None (it may read to the log end)."""
        partition = self.leader_partition(*topic_partition, current_leader_epoch)
        return partition.fetch_offset_for_timestamp(timestamp, isolation_level)

    def last_offset_for_leader_epoch(self, topic_partition: TopicPartition, leader_epoch: int,
                                     current_leader_epoch: int = -1) -> tuple[int, int]:
        """OffsetForLeaderEpoch for one partition, from its leader (Kafka's lastOffsetForLeaderEpoch): the largest
        epoch <= `leader_epoch` and its end offset."""
        partition = self.leader_partition(*topic_partition, current_leader_epoch)
        return partition.last_offset_for_leader_epoch(leader_epoch)

    def delete_records(self, topic_partition: TopicPartition, offset: int) -> int:
        """DeleteRecords for one partition, on its leader (Kafka's deleteRecords): returns the new low watermark.

        With no followers to wait for (Kafka's DelayedDeleteRecords waits for their low watermarks) the request is
        complete once the leader's log start offset has moved.
        """
        return self.leader_partition(*topic_partition).delete_records_on_leader(offset)

    def high_watermarks(self) -> dict[TopicPartition, int]:
        return {tp: p.high_watermark for tp, p in self.partitions.items()}
