"""The leader's rules for one partition, without brokers: high watermark over the maximal ISR, ISR expansion and
shrink, the controller's answers to ISR changes, acks=all completion and Kafka's fencing order."""
from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from minikafka.broker.metadata.metadata_image import PartitionInfo
from minikafka.broker.replication.partition import LeaderAndIsr, Partition
from minikafka.broker.replication.replica import NO_BROKER_EPOCH
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.storage.log import Log
from minikafka.storage.log_config import LogConfig
from tests.raw_client import record_batch

NOW = 1_000_000
LAG_MS = 1000
EPOCHS = {1: 101, 2: 102, 3: 103}  # brokers allowed into the ISR, with their broker epochs
TOPIC_ID = uuid.uuid4()


def leader(tmp_path: Path, isr: list[int], *, replicas: tuple[int, ...] = (1, 2, 3), min_isr: int = 1,
           alive: dict[int, int] | None = None) -> Partition:
    config = LogConfig.from_props({"min.insync.replicas": str(min_isr)})
    the_log = Log.open(tmp_path / "t-0", "t", 0, config, now_ms=int(time.time() * 1000))
    partition = Partition("t", 0, TOPIC_ID, the_log, 1, alive_broker_epochs=EPOCHS if alive is None else alive,
                          replica_lag_time_max_ms=LAG_MS)
    assert partition.make_leader(PartitionInfo(list(replicas), isr, 1, 0, 0), NOW) is True
    return partition


def append(partition: Partition, count: int) -> None:
    for i in range(count):
        partition.log.append_as_leader(bytearray(record_batch([b"r%d" % i])), partition.leader_epoch,
                                       int(time.time() * 1000))
    partition.maybe_increment_high_watermark(NOW)


def fetch(partition: Partition, broker: int, offset: int, now: int = NOW, broker_epoch: int | None = None):
    replica = partition.follower_replica(broker, partition.leader_epoch)
    return partition.update_follower_fetch_state(replica, offset, 0, now, partition.log_end_offset,
                                                 EPOCHS[broker] if broker_epoch is None else broker_epoch)


def test_high_watermark_is_the_slowest_isr_member_and_never_moves_back(tmp_path: Path) -> None:
    partition = leader(tmp_path, [1, 2, 3])
    append(partition, 5)
    assert partition.high_watermark == 0  # the followers' positions are unknown to a new leader
    fetch(partition, 2, 5)
    assert partition.high_watermark == 0
    moved, _ = fetch(partition, 3, 3)
    assert moved and partition.high_watermark == 3
    fetch(partition, 3, 5)
    assert partition.high_watermark == 5
    fetch(partition, 3, 1)  # a follower that truncated does not take the HW back
    assert partition.high_watermark == 5


def test_a_single_replica_isr_follows_the_leader(tmp_path: Path) -> None:
    partition = leader(tmp_path, [1], replicas=(1,))
    append(partition, 3)
    assert partition.high_watermark == 3


def test_under_min_isr_the_high_watermark_stays(tmp_path: Path) -> None:
    partition = leader(tmp_path, [1], min_isr=2)
    append(partition, 2)
    assert partition.high_watermark == 0  # KIP-966: ISR {1} is below min.insync.replicas=2 of three replicas


def test_a_caught_up_follower_joins_the_isr_and_bounds_the_hw_while_pending(tmp_path: Path) -> None:
    partition = leader(tmp_path, [1, 2])
    append(partition, 4)
    fetch(partition, 2, 4)
    assert partition.high_watermark == 4
    append(partition, 2)
    _, expansion = fetch(partition, 3, 4)  # at the HW, inside this leader epoch
    assert expansion is not None and expansion.new_isr == [1, 2, 3]
    assert expansion.new_isr_with_epochs == [(1, -1), (2, 102), (3, 103)]
    assert partition.maximal_isr == [1, 2, 3] and partition.isr == [1, 2]
    fetch(partition, 2, 6)
    assert partition.high_watermark == 4  # broker 3, being added, holds it
    moved, retry = partition.on_isr_change_answered(expansion, LeaderAndIsr(1, 0, [1, 2, 3], 1), NOW)
    assert not moved and not retry
    assert partition.isr == [1, 2, 3] and partition.partition_epoch == 1 and partition.pending_isr_change is None
    moved, _ = fetch(partition, 3, 6)
    assert moved and partition.high_watermark == 6


def test_no_expansion_for_ineligible_or_short_followers(tmp_path: Path) -> None:
    partition = leader(tmp_path, [1, 2], alive={1: 101, 2: 102})
    append(partition, 2)
    fetch(partition, 2, 2)
    assert fetch(partition, 3, 2)[1] is None  # broker 3 is not a live broker
    partition = leader(tmp_path / "b", [1, 2])
    append(partition, 2)
    assert partition.make_leader(PartitionInfo([1, 2, 3], [1, 2], 1, 1, 1), NOW) is True  # epoch 1 starts at 2
    append(partition, 2)
    assert partition.leader_epoch_start_offset == 2
    assert fetch(partition, 3, 1)[1] is None  # not into the current leader epoch yet
    assert fetch(partition, 3, 2)[1] is not None


def test_isr_changes_carry_fetch_epochs_only_where_the_metadata_has_broker_epochs(tmp_path: Path) -> None:
    partition = leader(tmp_path, [1, 2])
    append(partition, 2)
    fetch(partition, 2, 2)
    _, expansion = fetch(partition, 3, 2)
    assert expansion is not None and expansion.new_isr_with_epochs == [(1, -1), (2, 102), (3, 103)]  # KRaft
    # ZooKeeper mode: UpdateMetadata names the live brokers without epochs, so none is sent (as Kafka's leaders
    # send none there): 55, broker 2's last fetch, may be the epoch of a process restarted since.
    zookeeper_mode = leader(tmp_path / "zk", [1, 2], alive={1: 101, 2: NO_BROKER_EPOCH, 3: NO_BROKER_EPOCH})
    append(zookeeper_mode, 2)
    fetch(zookeeper_mode, 2, 2, broker_epoch=55)
    _, expansion = fetch(zookeeper_mode, 3, 2, broker_epoch=77)
    assert expansion is not None and expansion.new_isr_with_epochs == [(1, -1), (2, -1), (3, -1)]


def test_a_lagging_follower_is_shrunk_out_and_the_hw_moves_only_once_committed(tmp_path: Path) -> None:
    partition = leader(tmp_path, [1, 2, 3])
    append(partition, 3)
    fetch(partition, 2, 3)
    fetch(partition, 3, 0)
    assert partition.high_watermark == 0
    assert partition.maybe_shrink_isr(NOW + LAG_MS) is None  # in the ISR at election: caught up then
    shrink = partition.maybe_shrink_isr(NOW + LAG_MS + 1)
    assert shrink is not None and shrink.new_isr == [1, 2] and shrink.maximal_isr == [1, 2, 3]
    assert not partition.maybe_increment_high_watermark(NOW + LAG_MS + 1)
    assert partition.maybe_shrink_isr(NOW + 2 * LAG_MS) is None  # one change in flight
    moved, _ = partition.on_isr_change_answered(shrink, LeaderAndIsr(1, 0, [1, 2], 1), NOW + LAG_MS + 2)
    assert moved and partition.high_watermark == 3 and partition.isr == [1, 2]


def test_a_follower_fetching_at_the_leaders_end_stays_in_sync(tmp_path: Path) -> None:
    partition = leader(tmp_path, [1, 2])
    append(partition, 2)
    fetch(partition, 2, 2, now=NOW + 5 * LAG_MS)
    assert partition.maybe_shrink_isr(NOW + 5 * LAG_MS + 1) is None


@pytest.mark.parametrize("answer, pending, retry", [
    (ErrorCode.INVALID_UPDATE_VERSION, True, False),
    (ErrorCode.FENCED_LEADER_EPOCH, True, False),
    (ErrorCode.OPERATION_NOT_ATTEMPTED, False, False),
    (ErrorCode.INELIGIBLE_REPLICA, False, False),
    (ErrorCode.UNKNOWN_SERVER_ERROR, True, True),
])
def test_refused_isr_changes(tmp_path: Path, answer: ErrorCode, pending: bool, retry: bool) -> None:
    partition = leader(tmp_path, [1, 2, 3])
    shrink = partition.maybe_shrink_isr(NOW + 2 * LAG_MS)
    assert shrink is not None
    assert partition.on_isr_change_answered(shrink, answer, NOW) == (False, retry)
    assert (partition.pending_isr_change is shrink) == pending
    assert partition.isr == [1, 2, 3]


def test_stale_answers_are_ignored(tmp_path: Path) -> None:
    partition = leader(tmp_path, [1, 2, 3])
    assert partition.make_leader(PartitionInfo([1, 2, 3], [1, 2, 3], 1, 0, 2), NOW) is False
    shrink = partition.maybe_shrink_isr(NOW + 2 * LAG_MS)
    assert shrink is not None
    partition.on_isr_change_answered(shrink, LeaderAndIsr(1, 0, [1], 1), NOW)  # an older partition epoch
    assert partition.isr == [1, 2, 3] and partition.pending_isr_change is shrink
    # New metadata (same leader epoch, newer partition epoch) replaces the pending change; its answer is stale.
    assert partition.make_leader(PartitionInfo([1, 2, 3], [1, 2], 1, 0, 5), NOW) is False
    assert partition.pending_isr_change is None and partition.isr == [1, 2]
    partition.on_isr_change_answered(shrink, LeaderAndIsr(1, 0, [1], 6), NOW)
    assert partition.isr == [1, 2] and partition.partition_epoch == 5
    assert partition.make_leader(PartitionInfo([1, 2, 3], [1], 1, 0, 4), NOW) is None  # older: skipped
    assert partition.isr == [1, 2]


def test_acks_all_completion(tmp_path: Path) -> None:
    partition = leader(tmp_path, [1, 2], min_isr=2)
    append(partition, 2)
    assert partition.check_enough_replicas_reach_offset(2) == (False, ErrorCode.NONE)
    fetch(partition, 2, 2)
    assert partition.check_enough_replicas_reach_offset(2) == (True, ErrorCode.NONE)
    partition.isr = [1]  # the ISR shrank after the HW passed the append
    assert partition.check_enough_replicas_reach_offset(2) == (True, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
    partition.make_follower(PartitionInfo([1, 2, 3], [2], 2, 1, 1))
    assert partition.check_enough_replicas_reach_offset(2) == (True, ErrorCode.NOT_LEADER_OR_FOLLOWER)


def test_fencing_order_and_unknown_replicas(tmp_path: Path) -> None:
    partition = leader(tmp_path, [1, 2])
    partition.make_follower(PartitionInfo([1, 2, 3], [2], 2, 3, 3))
    with pytest.raises(KafkaError) as fenced:
        partition.check_leader(2)
    assert fenced.value.code == ErrorCode.FENCED_LEADER_EPOCH  # before NOT_LEADER_OR_FOLLOWER, as Kafka checks
    with pytest.raises(KafkaError) as unknown:
        partition.check_leader(4)
    assert unknown.value.code == ErrorCode.UNKNOWN_LEADER_EPOCH
    with pytest.raises(KafkaError) as not_leader:
        partition.check_leader(3)
    assert not_leader.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    partition = leader(tmp_path / "b", [1, 2], replicas=(1, 2))
    for epoch, code in ((0, ErrorCode.UNKNOWN_LEADER_EPOCH), (-1, ErrorCode.NOT_LEADER_OR_FOLLOWER)):
        with pytest.raises(KafkaError) as refused:
            partition.follower_replica(3, epoch)
        assert refused.value.code == code


def test_a_fetch_with_a_stale_broker_epoch_is_refused(tmp_path: Path) -> None:
    partition = leader(tmp_path, [1, 2])
    with pytest.raises(KafkaError) as stale:
        fetch(partition, 2, 0, broker_epoch=99)  # from before broker 2 registered again as 102
    assert stale.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    fetch(partition, 2, 0, broker_epoch=-1)  # no epoch sent: accepted


def test_follower_high_watermark_is_the_leaders_within_its_log(tmp_path: Path) -> None:
    partition = leader(tmp_path, [1, 2])
    append(partition, 3)
    partition.make_follower(PartitionInfo([1, 2], [1, 2], 2, 1, 1))
    assert partition.update_follower_high_watermark(10) and partition.high_watermark == 3
    assert partition.update_follower_high_watermark(1) and partition.high_watermark == 1
