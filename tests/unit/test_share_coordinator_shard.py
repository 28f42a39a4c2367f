"""The share coordinator shard: what each operation answers and appends, fencing, batch merging and replay."""
import uuid

from minikafka.broker.coordinator.share.share_coordinator_shard import (
    ShareCoordinatorShard,
    SharePartitionKey,
    ShareStateResult,
)
from minikafka.broker.coordinator.share.state_batch_combiner import combine_state_batches
from minikafka.protocol.coordinator_records import share_coordinator_records as records
from minikafka.protocol.coordinator_records.share_coordinator_records import (
    ShareRecordType,
    ShareSnapshotValue,
    ShareUpdateValue,
    StateBatch,
)
from minikafka.protocol.errors import ErrorCode

TOPIC = uuid.UUID(int=42)
KEY = SharePartitionKey("g", TOPIC, 0)


def _shard(per_snapshot: int = 500) -> ShareCoordinatorShard:
    return ShareCoordinatorShard(lambda topic_id: 3 if topic_id == TOPIC else None, lambda: 1000, per_snapshot)


def _apply(shard: ShareCoordinatorShard, result: ShareStateResult) -> ShareStateResult:
    """Append the result's records the way the coordinator does: through their bytes, then replay."""
    assert result.error == ErrorCode.NONE, result
    for key, value in result.records:
        decoded_key = records.decode_key(records.encode_key(key))
        shard.replay(decoded_key, records.decode_value(
            decoded_key.record_type, None if value is None else records.encode_value(value)))
    return result


def test_initialize_write_read_round_trip() -> None:
    shard = _shard()
    _apply(shard, shard.initialize(KEY, state_epoch=1, start_offset=10))
    written = _apply(shard, shard.write(KEY, 1, 5, 12, (StateBatch(12, 14, 2, 1), StateBatch(15, 15, 0, 2))))
    assert [k.record_type for k, _ in written.records] == [ShareRecordType.SHARE_UPDATE]
    read = shard.read(KEY, leader_epoch=5)
    assert read.records == ()
    assert read.state is not None
    assert (read.state.state_epoch, read.state.leader_epoch, read.state.start_offset, read.state.state_batches) == (
        1, 5, 12, (StateBatch(12, 14, 2, 1), StateBatch(15, 15, 0, 2)))


def test_writes_merge_onto_earlier_batches_and_start_offset_prunes() -> None:
    shard = _shard()
    _apply(shard, shard.initialize(KEY, 0, 0))
    _apply(shard, shard.write(KEY, 0, 1, -1, (StateBatch(0, 9, 0, 1),)))
    _apply(shard, shard.write(KEY, 0, 1, 3, (StateBatch(5, 6, 2, 1),)))
    state = shard.state(KEY)
    assert state is not None
    assert (state.start_offset, state.state_batches) == (
        3, (StateBatch(3, 4, 0, 1), StateBatch(5, 6, 2, 1), StateBatch(7, 9, 0, 1)))


def test_combiner_higher_delivery_count_then_state_wins_and_contiguous_coalesce() -> None:
    assert combine_state_batches((StateBatch(0, 9, 0, 2),), (StateBatch(3, 12, 4, 1),), -1) == (
        StateBatch(0, 9, 0, 2), StateBatch(10, 12, 4, 1))
    assert combine_state_batches((StateBatch(0, 9, 2, 1),), (StateBatch(3, 5, 0, 1),), -1) == (
        StateBatch(0, 9, 2, 1),)
    assert combine_state_batches((StateBatch(0, 4, 0, 1),), (StateBatch(5, 9, 0, 1),), 2) == (
        StateBatch(2, 9, 0, 1),)
    assert combine_state_batches((StateBatch(0, 1, 0, 1),), (), 5) == ()


def test_leader_epoch_and_state_epoch_fencing() -> None:
    shard = _shard()
    _apply(shard, shard.initialize(KEY, 2, 0))
    read = _apply(shard, shard.read(KEY, leader_epoch=4))
    assert [(k.record_type, v.leader_epoch) for k, v in read.records if v is not None] == [
        (ShareRecordType.SHARE_UPDATE, 4)]
    assert shard.read(KEY, 3).error == ErrorCode.FENCED_LEADER_EPOCH
    assert shard.write(KEY, 2, 3, -1, ()).error == ErrorCode.FENCED_LEADER_EPOCH
    assert shard.write(KEY, 1, 4, -1, ()).error == ErrorCode.FENCED_STATE_EPOCH
    assert shard.initialize(KEY, 1, 0).error == ErrorCode.FENCED_STATE_EPOCH
    assert shard.write(KEY, 2, 4, -1, ()).error == ErrorCode.NONE


def test_uninitialized_unknown_and_invalid_partitions() -> None:
    shard = _shard()
    assert shard.write(KEY, 0, 0, 0, ()).error == ErrorCode.INVALID_REQUEST
    assert shard.read(KEY, 0).error == ErrorCode.INVALID_REQUEST
    assert shard.read_summary(KEY) == ShareStateResult()
    assert shard.initialize(SharePartitionKey("g", TOPIC, 3), 0, 0).error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert shard.initialize(SharePartitionKey("g", uuid.UUID(int=1), 0), 0, 0).error == \
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert shard.initialize(SharePartitionKey("g", TOPIC, -1), 0, 0).error == ErrorCode.INVALID_REQUEST


def test_snapshot_every_n_updates_and_replay_rebuilds_the_same_state() -> None:
    shard = _shard(per_snapshot=2)
    log = []
    for result in [shard.initialize(KEY, 0, 0)]:
        log.extend(_apply(shard, result).records)
    kinds = []
    for i in range(5):
        result = _apply(shard, shard.write(KEY, 0, 1, -1, (StateBatch(i, i, 2, 1),)))
        log.extend(result.records)
        kinds.append(result.records[0][0].record_type)
    u, s = ShareRecordType.SHARE_UPDATE, ShareRecordType.SHARE_SNAPSHOT
    # As Kafka counts: the first update after a snapshot counts 0, so n + 1 updates come before a snapshot.
    assert kinds == [u, u, u, s, u]
    snapshot = log[4][1]
    assert isinstance(snapshot, ShareSnapshotValue) and snapshot.snapshot_epoch == 1
    assert isinstance(log[5][1], ShareUpdateValue) and log[5][1].snapshot_epoch == 1
    reloaded = _shard(per_snapshot=2)
    for key, value in log:
        reloaded.replay(key, value)
    assert reloaded.state(KEY) == shard.state(KEY)
    state = shard.state(KEY)
    assert state is not None and state.state_batches == (StateBatch(0, 4, 2, 1),)


def test_delete_writes_a_tombstone_and_forgets_the_epochs() -> None:
    shard = _shard()
    assert shard.delete(KEY) == ShareStateResult()
    _apply(shard, shard.initialize(KEY, 5, 0))
    deleted = _apply(shard, shard.delete(KEY))
    assert [(k.record_type, v) for k, v in deleted.records] == [(ShareRecordType.SHARE_SNAPSHOT, None)]
    assert shard.state(KEY) is None
    assert shard.initialize(KEY, 1, 0).error == ErrorCode.NONE
