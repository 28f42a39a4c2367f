"""The state of one `__share_group_state` partition's share-partitions (Kafka's ShareCoordinatorShard), sans-IO.

Each operation checks its request against the replayed state and answers with the records to append (acks=all)
before the answer counts, or an error and no records. Appended records come back through `replay`, which is also
how a new coordinator loads the partition: a snapshot replaces a share-partition's state, an update merges onto
it, a tombstone deletes it. Writes become updates until `snapshot_update_records_per_snapshot` of them follow a
snapshot; the next is a snapshot again, so a load replays a bounded tail.
"""
from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace

from minikafka.broker.coordinator.share.state_batch_combiner import combine_state_batches
from minikafka.protocol.coordinator_records.share_coordinator_records import (
    ShareRecordKey,
    ShareRecordType,
    ShareSnapshotValue,
    ShareUpdateValue,
    StateBatch,
)
from minikafka.protocol.errors import ErrorCode

SHARE_COORDINATOR_SNAPSHOT_UPDATE_RECORDS_PER_SNAPSHOT = 500
"""share.coordinator.snapshot.update.records.per.snapshot's default."""

ShareRecord = tuple[ShareRecordKey, ShareSnapshotValue | ShareUpdateValue | None]


@dataclass(frozen=True)
class SharePartitionKey:
    """A share partition, one group's view of one topic partition: the share coordinator's key
    `group:topicId:partition`, and what a leader's persister names."""

    group_id: str
    topic_id: uuid.UUID
    partition: int


@dataclass(frozen=True)
class ShareStateResult:
    """An operation's answer for one share-partition, and the records to append before giving it."""

    error: ErrorCode = ErrorCode.NONE
    error_message: str | None = None
    records: tuple[ShareRecord, ...] = ()
    state: ShareSnapshotValue | None = None


def invalid_key(key: SharePartitionKey) -> ShareStateResult | None:
    """INVALID_REQUEST for a key no share-partition has: a null topic id or a negative partition."""
    if key.topic_id is None:
        return ShareStateResult(ErrorCode.INVALID_REQUEST, "Topic id must not be null.")
    if key.partition < 0:
        return ShareStateResult(ErrorCode.INVALID_REQUEST, "Partition id must not be negative.")
    return None


class ShareCoordinatorShard:
    """Share-partition states of one `__share_group_state` partition, as its records built them."""

    def __init__(self, partition_count: Callable[[uuid.UUID], int | None], clock_ms: Callable[[], int],
                 snapshot_update_records_per_snapshot: int = SHARE_COORDINATOR_SNAPSHOT_UPDATE_RECORDS_PER_SNAPSHOT
                 ) -> None:
        self._partition_count = partition_count
        self._clock_ms = clock_ms
        self._updates_per_snapshot = snapshot_update_records_per_snapshot
        self._states: dict[SharePartitionKey, ShareSnapshotValue] = {}
        self._leader_epochs: dict[SharePartitionKey, int] = {}
        self._state_epochs: dict[SharePartitionKey, int] = {}
        self._updates_since_snapshot: dict[SharePartitionKey, int] = {}

    def state(self, key: SharePartitionKey) -> ShareSnapshotValue | None:
        """A share-partition's state with every update merged in, or None when it has none."""
        return self._states.get(key)

    # Replay ---------------------------------------------------------------------------------------------------

    def replay(self, record_key: ShareRecordKey, value: ShareSnapshotValue | ShareUpdateValue | None) -> None:
        """Apply an appended (or loaded) record."""
        key = SharePartitionKey(record_key.group_id, record_key.topic_id, record_key.partition)
        if value is None:
            self._states.pop(key, None)
            self._leader_epochs.pop(key, None)
            self._state_epochs.pop(key, None)
            self._updates_since_snapshot.pop(key, None)
            return
        self._raise_epoch(self._leader_epochs, key, value.leader_epoch)
        if isinstance(value, ShareSnapshotValue):
            self._raise_epoch(self._state_epochs, key, value.state_epoch)
            self._states[key] = value
            if self._updates_since_snapshot.get(key, 0) >= self._updates_per_snapshot:
                self._updates_since_snapshot[key] = 0
            return
        current = self._states.get(key)
        if current is None:
            # An update with no snapshot before it (the snapshot was cleaned away): it is all there is.
            self._states[key] = ShareSnapshotValue(
                snapshot_epoch=value.snapshot_epoch, state_epoch=0, leader_epoch=value.leader_epoch,
                start_offset=value.start_offset, create_timestamp=0, write_timestamp=0,
                state_batches=value.state_batches)
            self._updates_since_snapshot[key] = 0
            return
        start = current.start_offset if value.start_offset == -1 else value.start_offset
        self._states[key] = replace(
            current, start_offset=start,
            leader_epoch=current.leader_epoch if value.leader_epoch == -1 else value.leader_epoch,
            state_batches=combine_state_batches(current.state_batches, value.state_batches, start))
        self._updates_since_snapshot[key] = self._updates_since_snapshot.get(key, -1) + 1

    @staticmethod
    def _raise_epoch(epochs: dict[SharePartitionKey, int], key: SharePartitionKey, epoch: int) -> None:
        epochs[key] = max(epoch, epochs.get(key, epoch))

    # Operations -----------------------------------------------------------------------------------------------

    def _unknown(self, key: SharePartitionKey) -> ShareStateResult | None:
        count = self._partition_count(key.topic_id)
        if count is None or count <= key.partition:
            return ShareStateResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                    "This server does not host this topic-partition.")
        return None

    def initialize(self, key: SharePartitionKey, state_epoch: int, start_offset: int) -> ShareStateResult:
        """A fresh snapshot at `state_epoch` (a new snapshot epoch); an older state epoch is fenced."""
        bad = invalid_key(key)
        if bad is not None:
            return bad
        if state_epoch != -1 and self._state_epochs.get(key, state_epoch) > state_epoch:
            return ShareStateResult(ErrorCode.FENCED_STATE_EPOCH, "The state epoch is fenced.")
        bad = self._unknown(key)
        if bad is not None:
            return bad
        current = self._states.get(key)
        now = self._clock_ms()
        snapshot = ShareSnapshotValue(
            snapshot_epoch=0 if current is None else current.snapshot_epoch + 1, state_epoch=state_epoch,
            leader_epoch=0, start_offset=start_offset, create_timestamp=now, write_timestamp=now, state_batches=())
        return ShareStateResult(records=((self._record_key(ShareRecordType.SHARE_SNAPSHOT, key), snapshot),))

    def write(self, key: SharePartitionKey, state_epoch: int, leader_epoch: int, start_offset: int,
              state_batches: tuple[StateBatch, ...]) -> ShareStateResult:
        """Batches and start offset from the share-partition leader, fenced by both epochs."""
        bad = invalid_key(key)
        if bad is not None:
            return bad
        if key not in self._states:
            return ShareStateResult(ErrorCode.INVALID_REQUEST, "Write sent for uninitialized share partition.")
        if leader_epoch != -1 and self._leader_epochs.get(key, leader_epoch) > leader_epoch:
            return ShareStateResult(ErrorCode.FENCED_LEADER_EPOCH, "The leader epoch in the request is older "
                                    "than the epoch on the broker.")
        if state_epoch != -1 and self._state_epochs.get(key, state_epoch) > state_epoch:
            return ShareStateResult(ErrorCode.FENCED_STATE_EPOCH, "The state epoch is fenced.")
        bad = self._unknown(key)
        if bad is not None:
            return bad
        return ShareStateResult(records=(self._state_record(key, leader_epoch, start_offset, state_batches),))

    def read(self, key: SharePartitionKey, leader_epoch: int) -> ShareStateResult:
        """The state a new leader loads; a newer leader epoch is recorded (an update) before the answer."""
        bad = invalid_key(key)
        if bad is not None:
            return bad
        current = self._states.get(key)
        if current is None:
            return ShareStateResult(ErrorCode.INVALID_REQUEST, "Read sent for uninitialized share partition.")
        if self._leader_epochs.get(key, leader_epoch) > leader_epoch:
            return ShareStateResult(ErrorCode.FENCED_LEADER_EPOCH, "The leader epoch in the request is older "
                                    "than the epoch on the broker.")
        bad = self._unknown(key)
        if bad is not None:
            return bad
        if leader_epoch == -1 or self._leader_epochs.get(key) == leader_epoch:
            return ShareStateResult(state=current)
        return ShareStateResult(state=current, records=(
            self._state_record(key, leader_epoch, current.start_offset, ()),))

    def read_summary(self, key: SharePartitionKey) -> ShareStateResult:
        """Epochs and start offset; an uninitialized share-partition answers its defaults, not an error."""
        bad = invalid_key(key) or self._unknown(key)
        if bad is not None:
            return bad
        return ShareStateResult(state=self._states.get(key))

    def delete(self, key: SharePartitionKey) -> ShareStateResult:
        """A tombstone for the share-partition's state; deleting what is absent succeeds with no record."""
        bad = invalid_key(key) or self._unknown(key)
        if bad is not None:
            return bad
        if key not in self._states:
            return ShareStateResult()
        return ShareStateResult(records=((self._record_key(ShareRecordType.SHARE_SNAPSHOT, key), None),))

    # Records --------------------------------------------------------------------------------------------------

    @staticmethod
    def _record_key(record_type: ShareRecordType, key: SharePartitionKey) -> ShareRecordKey:
        return ShareRecordKey(record_type, key.group_id, key.topic_id, key.partition)

    def _state_record(self, key: SharePartitionKey, leader_epoch: int, start_offset: int,
                      batches: tuple[StateBatch, ...]) -> ShareRecord:
        """A snapshot once enough updates follow the last one, else an update (Kafka's generateShareStateRecord)."""
        current = self._states[key]
        new_leader_epoch = current.leader_epoch if leader_epoch == -1 else leader_epoch
        if self._updates_since_snapshot.get(key, 0) >= self._updates_per_snapshot:
            start = current.start_offset if start_offset == -1 else start_offset
            now = self._clock_ms()
            snapshot = ShareSnapshotValue(
                snapshot_epoch=current.snapshot_epoch + 1, state_epoch=current.state_epoch,
                leader_epoch=new_leader_epoch, start_offset=start, create_timestamp=now, write_timestamp=now,
                state_batches=combine_state_batches(current.state_batches, batches, start))
            return self._record_key(ShareRecordType.SHARE_SNAPSHOT, key), snapshot
        update = ShareUpdateValue(snapshot_epoch=current.snapshot_epoch, leader_epoch=new_leader_epoch,
                                  start_offset=start_offset,
                                  state_batches=combine_state_batches((), batches, start_offset))
        return self._record_key(ShareRecordType.SHARE_UPDATE, key), update
