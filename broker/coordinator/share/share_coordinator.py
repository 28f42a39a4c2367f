"""The share coordinator (Kafka's ShareCoordinatorService): which `__share_group_state` partitions this broker
leads, their shards loaded from the log, and each operation's records appended (acks=all) before its answer.

A share-partition lives on partition Utils.abs(hashCode("group:topicId:partition")) % the topic's partitions.
On election the partition answers COORDINATOR_LOAD_IN_PROGRESS while a task replays its snapshots, updates and
tombstones; on resignation its shard goes and its keys answer NOT_COORDINATOR, so the persister looks again.
Operations on one partition run one at a time, so each sees the records of the one before.
"""
from __future__ import annotations

import base64
import logging
import uuid
from collections.abc import Callable

import trio

from minikafka.broker.coordinator.coordinator_log import CoordinatorLog, partition_for
from minikafka.broker.coordinator.share.share_coordinator_shard import (
    ShareCoordinatorShard,
    SharePartitionKey,
    ShareStateResult,
    invalid_key,
)
from minikafka.protocol.coordinator_records import share_coordinator_records as records
from minikafka.protocol.coordinator_records.share_coordinator_records import ShareCoordinatorRecordError
from minikafka.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger("minikafka.share_coordinator")


def kafka_uuid_string(value: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, unpadded."""
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def coordinator_key(key: SharePartitionKey) -> str:
    """The share coordinator's key of a share-partition (FindCoordinator key type SHARE): group:topicId:partition."""
    return f"{key.group_id}:{kafka_uuid_string(key.topic_id)}:{key.partition}"


def parse_coordinator_key(text: str) -> SharePartitionKey | None:
    """The share-partition a FindCoordinator SHARE key names, as Kafka's SharePartitionKey.getInstance reads it
    (the group id trimmed); None for a key that is not group:topicId:partition."""
    tokens = text.split(":")
    if len(tokens) != 3 or not tokens[0].strip() or len(tokens[1]) > 22:
        return None
    try:
        topic_id = uuid.UUID(bytes=base64.urlsafe_b64decode(tokens[1] + "=="))
        partition = int(tokens[2], 10)
    except ValueError:
        return None
    if not -(1 << 31) <= partition < 1 << 31:
        return None
    return SharePartitionKey(tokens[0].strip(), topic_id, partition)


ShareOperation = Callable[[ShareCoordinatorShard], ShareStateResult]
"""What a request asks of the shard of its key's partition."""


class _Partition:
    def __init__(self, epoch: int, shard: ShareCoordinatorShard | None) -> None:
        self.epoch = epoch
        self.shard = shard  # None while loading
        self.lock = trio.Lock()


class ShareCoordinator:
    """The `__share_group_state` partitions this broker leads, and the operations on their share-partitions."""

    def __init__(self, state_log: CoordinatorLog, num_partitions: Callable[[], int],
                 new_shard: Callable[[], ShareCoordinatorShard], clock_ms: Callable[[], int]) -> None:
        self.state_log = state_log
        self._num_partitions = num_partitions
        self._new_shard = new_shard
        self._clock_ms = clock_ms
        self._partitions: dict[int, _Partition] = {}
        self._loads: dict[int, trio.CancelScope] = {}
        self._nursery: trio.Nursery | None = None

    def partition_for(self, key: SharePartitionKey) -> int:
        return partition_for(coordinator_key(key), self._num_partitions())

    async def run(self, *, task_status: trio.TaskStatus = trio.TASK_STATUS_IGNORED) -> None:
        """The partition loads, until cancelled; elections before it ran are loaded now."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            for partition, state in self._partitions.items():
                if state.shard is None:
                    self._start_load(partition, state.epoch)
            task_status.started()
            try:
                await trio.sleep_forever()
            finally:
                self._nursery = None
                self._loads.clear()

    def on_elected(self, partition: int, epoch: int) -> None:
        """This broker leads `partition` at leader epoch `epoch`: load it (an empty log is served at once)."""
        self._cancel_load(partition)
        if self.state_log.is_empty(partition):
            self._partitions[partition] = _Partition(epoch, self._new_shard())
            return
        self._partitions[partition] = _Partition(epoch, None)
        if self._nursery is not None:
            self._start_load(partition, epoch)

    def on_resigned(self, partition: int) -> None:
        """This broker no longer leads `partition`: its load stops and its state goes."""
        self._cancel_load(partition)
        if self._partitions.pop(partition, None) is not None:
            log.info("unloaded %s-%d", self.state_log.topic, partition)

    def _start_load(self, partition: int, epoch: int) -> None:
        assert self._nursery is not None
        scope = trio.CancelScope()
        self._loads[partition] = scope
        self._nursery.start_soon(self._load, partition, epoch, scope)

    def _cancel_load(self, partition: int) -> None:
        scope = self._loads.pop(partition, None)
        if scope is not None:
            scope.cancel()

    async def _load(self, partition: int, epoch: int, scope: trio.CancelScope) -> None:
        shard = self._new_shard()
        count = 0
        with scope:
            try:
                for batch in self.state_log.replay_batches(partition):
                    for offset, key, value in batch.records:
                        self._replay(shard, partition, offset, key, value)
                    count += len(batch.records)
                    await trio.lowlevel.checkpoint()
            except (KafkaError, OSError) as exc:
                log.error("loading %s-%d stopped after %d records: %s", self.state_log.topic, partition, count, exc)
            state = self._partitions.get(partition)
            if state is not None and state.epoch == epoch and state.shard is None:
                state.shard = shard
                log.info("loaded %d records of %s-%d at epoch %d", count, self.state_log.topic, partition, epoch)
        if self._loads.get(partition) is scope:
            del self._loads[partition]

    def _replay(self, shard: ShareCoordinatorShard, partition: int, offset: int, key: bytes,
                value: bytes | None) -> None:
        try:
            record_key = records.decode_key(key)
            shard.replay(record_key, records.decode_value(record_key.record_type, value))
        except ShareCoordinatorRecordError as exc:
            log.error("skipping unreadable record at %s-%d offset %d: %s", self.state_log.topic, partition, offset,
                      exc)

    async def execute(self, key: SharePartitionKey, operation: ShareOperation) -> ShareStateResult:
        """Run `operation` on the key's shard: its records appended and replicated before the result returns;
        NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS when this broker cannot answer for the key."""
        invalid = invalid_key(key)  # before hashing: a null topic id has no coordinator key
        if invalid is not None:
            return invalid
        partition = self.partition_for(key)
        state = self._partitions.get(partition)
        if state is None:
            return ShareStateResult(ErrorCode.NOT_COORDINATOR)
        if state.shard is None:
            return ShareStateResult(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        async with state.lock:
            if self._partitions.get(partition) is not state or state.shard is None:
                return ShareStateResult(ErrorCode.NOT_COORDINATOR)
            result = operation(state.shard)
            if result.error != ErrorCode.NONE or not result.records:
                return result
            encoded = [(records.encode_key(k), None if v is None else records.encode_value(v))
                        for k, v in result.records]
            error = self.state_log.append(partition, encoded, self._clock_ms())
            if error != ErrorCode.NONE:
                return ShareStateResult(error)
            for record_key, value in result.records:
                state.shard.replay(record_key, value)
            error = await self.state_log.wait_replicated(partition)
            if error != ErrorCode.NONE:
                return ShareStateResult(error)
            return result
