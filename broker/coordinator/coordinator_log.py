"""A coordinator's records in the partitions of its internal topic (`__consumer_offsets`, `__transaction_state`).

Both coordinators write the same way in Kafka: a key and a value per record, one uncompressed batch per write
(all or nothing), appended as leader with acks=all and answered only once the ISR has it, within a timeout; append
errors become coordinator errors by one mapping. When a broker becomes leader of such a partition it replays the
records to rebuild the coordinator's state. Both topics are compacted by the log cleaner, so a replay reads past
offset gaps and batches emptied of their records (kept for their producer state), and meets tombstones.
"""
from __future__ import annotations

import functools
import logging
from collections.abc import Iterator
from typing import NamedTuple

import trio
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

from minikafka.broker.replication.delayed_produce import AppendResult, DelayedProduce
from minikafka.broker.replication.replica_manager import ReplicaManager
from minikafka.protocol.end_transaction_marker import EndTransactionMarker, parse_marker
from minikafka.protocol.errors import ErrorCode
from minikafka.protocol.record_batch import NO_PRODUCER_ID, CorruptRecordError, parse_header
from minikafka.storage.log import AppendInfo, AppendOrigin
from minikafka.storage.producer_state import NO_PRODUCER_EPOCH

log = logging.getLogger("minikafka.coordinator_log")

READ_CHUNK_BYTES = 1 << 20

# A coordinator record as written to the log: key bytes and value bytes (None: a tombstone).
Record = tuple[bytes, bytes | None]

# Append errors seen by a coordinator, as Kafka's coordinators turn them into their APIs' errors.
APPEND_ERROR_MAP = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.INVALID_FETCH_SIZE: ErrorCode.UNKNOWN_SERVER_ERROR,
}


@functools.lru_cache(maxsize=65536)
def java_string_hashcode(value: str) -> int:
    """Java's String.hashCode (over UTF-16 code units, 32-bit overflow), which Kafka uses to place keys."""
    h = 0
    data = value.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(key: str, num_partitions: int) -> int:
    """The partition a group id or transactional id lives on: Kafka's Utils.abs(key.hashCode()) % partitions."""
    h = java_string_hashcode(key)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions


class ReplayedBatch(NamedTuple):
    """One batch as a coordinator replays it: the producer of a transactional batch (NO_PRODUCER_ID for the
    coordinator's own plain writes), the end marker of a control batch (None otherwise), and the keyed records."""

    producer_id: int
    marker: EndTransactionMarker | None
    records: list[tuple[int, bytes, bytes | None]]


class RecordFormatError(ValueError):
    """Bytes that are not a coordinator record this broker understands."""


def build_batch(records: list[Record], timestamp_ms: int, producer_id: int = NO_PRODUCER_ID,
                producer_epoch: int = NO_PRODUCER_EPOCH) -> bytes:
    """One uncompressed v2 batch holding the records: a write is all-or-nothing, as in Kafka. With a producer id it
    is that producer's transactional batch (a transactional offset commit), at sequence 0 as Kafka writes them."""
    size = sum(len(k) + len(v or b"") + 32 for k, v in records) + 128
    transactional = producer_id != NO_PRODUCER_ID
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=size, transactional=transactional,
                                   producer_id=producer_id, producer_epoch=producer_epoch,
                                   base_sequence=0 if transactional else -1)
    for key, value in records:
        if builder.append(timestamp=timestamp_ms, key=key, value=value, headers=[]) is None:
            raise RecordFormatError("record batch builder refused a record")
    builder.close()
    return bytes(builder.buffer())


class CoordinatorLog:
    """Appends records to, and replays them from, the partitions of one internal topic."""

    def __init__(self, replica_manager: ReplicaManager, topic: str, commit_timeout_ms: int) -> None:
        self._replica_manager = replica_manager
        self.topic = topic
        self._commit_timeout_ms = commit_timeout_ms

    def append(self, partition: int, records: list[Record], now_ms: int, *, producer_id: int = NO_PRODUCER_ID,
               producer_epoch: int = NO_PRODUCER_EPOCH) -> ErrorCode:
        """Write records to one partition through the replica manager (acks=all), as one batch (of a transaction of
        `producer_id`'s, if given); NONE or the coordinator error."""
        if not records:
            return ErrorCode.NONE
        tp = (self.topic, partition)
        try:
            batch = build_batch(records, now_ms, producer_id, producer_epoch)
        except RecordFormatError as exc:
            log.error("cannot build a coordinator batch for %s-%d: %s", *tp, exc)
            return ErrorCode.UNKNOWN_SERVER_ERROR
        result = self._replica_manager.append_to_local_log(-1, {tp: bytearray(batch)}, AppendOrigin.COORDINATOR)[tp]
        if result.error is None:
            return ErrorCode.NONE
        code = APPEND_ERROR_MAP.get(result.error.code, result.error.code)
        log.warning("writing %d coordinator records to %s-%d failed: %s -> %s", len(records), *tp,
                    result.error.code.name, code.name)
        return code

    async def wait_replicated(self, partition: int, timeout_ms: int | None = None) -> ErrorCode:
        """Wait, at most `timeout_ms` (the commit timeout if not given), until the ISR has everything appended to
        the partition so far: a coordinator answers a write only once it is committed, as Kafka's acks=all
        coordinator appends do. NONE or the coordinator error."""
        tp = (self.topic, partition)
        hosted = self._replica_manager.get_partition(*tp)
        if hosted is None:
            return APPEND_ERROR_MAP.get(self._replica_manager.unhosted_error(tp), ErrorCode.NOT_COORDINATOR)
        end = hosted.log.log_end_offset
        # The wait only needs the offset the high watermark must pass: the last one appended.
        appended = AppendInfo(end - 1, end - 1, -1, end - 1, -1, hosted.log.log_start_offset, 0)
        delayed = DelayedProduce(self._replica_manager, {tp: AppendResult(None, appended)})
        if not delayed.try_complete():
            wait_ms = self._commit_timeout_ms if timeout_ms is None else timeout_ms
            await delayed.wait(self._replica_manager.purgatory, trio.current_time() + wait_ms / 1000)
        error = delayed.results[tp].error
        if error is None:
            return ErrorCode.NONE
        code = APPEND_ERROR_MAP.get(error.code, error.code)
        log.warning("coordinator records of %s-%d not replicated: %s -> %s", *tp, error.code.name, code.name)
        return code

    def is_empty(self, partition: int) -> bool:
        """Whether this broker's replica of `partition` holds no offset at all (False when it has no replica)."""
        hosted = self._replica_manager.get_partition(self.topic, partition)
        return hosted is not None and hosted.log.log_start_offset >= hosted.log.log_end_offset

    def replay_batches(self, partition: int, max_bytes: int = READ_CHUNK_BYTES) -> Iterator[ReplayedBatch]:
        """Every batch of one partition in log order: its keyed records, and for a transaction's batches the
        producer and, for a control batch, the end marker it holds. The log is read `max_bytes` at a time (a bigger
        first batch whole; Kafka's coordinators read their load.buffer.size), and the replica and its log end
        offset are looked up again for each read, so a caller may yield to the event loop between batches: a
        replica gone meanwhile ends the replay, and a log start offset moved past the next read raises
        OffsetOutOfRangeError."""
        offset: int | None = None
        while True:
            hosted = self._replica_manager.get_partition(self.topic, partition)
            if hosted is None:
                return
            the_log = hosted.log
            if offset is None:
                offset = the_log.log_start_offset
            end = the_log.log_end_offset
            if offset >= end:
                return
            data = bytes(the_log.read(offset, max_bytes, max_offset=end, min_one_message=True))
            if not data:
                break
            next_offset = offset
            position = 0
            records = MemoryRecords(data)
            while records.has_next():
                batch = records.next_batch()
                if batch is None:
                    break
                header = parse_header(data, position)
                position += header.size
                next_offset = max(next_offset, header.last_offset + 1)
                producer_id = header.producer_id if header.is_transactional else NO_PRODUCER_ID
                if header.is_control:
                    try:
                        marker = parse_marker(data[position - header.size:position], header)
                    except CorruptRecordError as exc:
                        log.error("skipping an unreadable marker at %s-%d offset %d: %s", self.topic, partition,
                                  header.base_offset, exc)
                        continue
                    if marker is not None and producer_id != NO_PRODUCER_ID:
                        yield ReplayedBatch(producer_id, marker, [])
                    continue
                yield ReplayedBatch(producer_id, None, [(record.offset, record.key, record.value) for record in batch
                                                        if record.offset >= offset and record.key is not None])
            if next_offset <= offset:
                log.error("replay of %s-%d made no progress at offset %d; stopping", self.topic, partition, offset)
                break
            offset = next_offset
