"""Consumer groups rebuilt from their records: what the record helpers write, through Kafka's bytes and back,
replays into the same group; tombstones delete members and groups in Kafka's order, and out of order they fail as
Kafka's replay does."""
from __future__ import annotations

import uuid

import pytest

from minikafka.broker.coordinator.group.consumer import record_helpers as rh
from minikafka.broker.coordinator.group.consumer.consumer_group import ConsumerGroup, ConsumerGroupState
from minikafka.broker.coordinator.group.consumer.consumer_group_member import ConsumerGroupMember, MemberState
from minikafka.broker.coordinator.group.consumer.replay import replay
from minikafka.broker.coordinator.group.consumer.resolved_regular_expression import ResolvedRegularExpression
from minikafka.protocol.coordinator_records.consumer_group_records import (
    ClassicMemberMetadata,
    ClassicProtocol,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupRecord,
    decode_record,
    encode_key,
    encode_value,
)

FOO, BAR = uuid.UUID(int=0xF00), uuid.UUID(int=0xBA4)

M1 = ConsumerGroupMember(
    member_id="m1", member_epoch=5, previous_member_epoch=4, state=MemberState.UNREVOKED_PARTITIONS,
    instance_id="instance-1", rack_id="rack-a", rebalance_timeout_ms=30000, client_id="client", client_host="/1.2.3.4",
    subscribed_topic_names=frozenset({"foo", "bar"}), server_assignor_name="range",
    assigned_partitions={FOO: frozenset({0, 1})}, partitions_pending_revocation={BAR: frozenset({2})})
M2 = ConsumerGroupMember(
    member_id="m2", member_epoch=6, previous_member_epoch=5, subscribed_topic_regex="ba.*",
    assigned_partitions={BAR: frozenset({0, 1})},
    classic_member_metadata=ClassicMemberMetadata(45000, (ClassicProtocol("range", b"\x00\x01"),)))


def through_bytes(record: ConsumerGroupRecord) -> ConsumerGroupRecord:
    value = None if record.value is None else encode_value(record.value)
    return decode_record(encode_key(record.key), value)


def group_records() -> list[ConsumerGroupRecord]:
    return [
        rh.member_subscription_record("g", M1), rh.member_subscription_record("g", M2),
        rh.regular_expression_record("g", "ba.*", ResolvedRegularExpression(frozenset({"bar"}), 7, 1000)),
        rh.group_epoch_record("g", 6, 1234),
        rh.target_assignment_record("g", "m1", {FOO: frozenset({0, 1})}),
        rh.target_assignment_record("g", "m2", {BAR: frozenset({0, 1, 2})}),
        rh.target_assignment_epoch_record("g", 6),
        rh.current_assignment_record("g", M1), rh.current_assignment_record("g", M2),
    ]


def load(records: list[ConsumerGroupRecord]) -> dict[str, ConsumerGroup]:
    groups: dict[str, ConsumerGroup] = {}
    for record in records:
        replay(groups, through_bytes(record))
    return groups


def test_a_group_replays_from_its_records() -> None:
    group = load(group_records())["g"]
    assert group.members == {"m1": M1, "m2": M2}
    assert (group.group_epoch, group.metadata_hash, group.target_assignment_epoch) == (6, 1234, 6)
    assert group.target_assignment == {"m1": {FOO: frozenset({0, 1})}, "m2": {BAR: frozenset({0, 1, 2})}}
    assert group.inverted_target_assignment == {FOO: {0: "m1", 1: "m1"}, BAR: {0: "m2", 1: "m2", 2: "m2"}}
    assert group.current_partition_epoch(BAR, 2) == 5 and group.current_partition_epoch(BAR, 0) == 6
    assert group.static_member_id("instance-1") == "m1"
    assert group.resolved_regular_expressions == {"ba.*": ResolvedRegularExpression(frozenset({"bar"}), 7, 1000)}
    assert group.subscribed_topic_names["bar"].by_name_count == 1
    assert group.subscribed_topic_names["bar"].by_regex_count == 1
    assert group.num_classic_protocol_members == 1
    assert group.preferred_server_assignor() == "range"
    assert group.state is ConsumerGroupState.RECONCILING


def test_member_without_regex_is_written_with_an_empty_one_as_kafka_writes_it() -> None:
    value = rh.member_subscription_record("g", M1).value
    assert value is not None and value.subscribed_topic_regex == ""  # type: ignore[union-attr]
    assert load(group_records())["g"].members["m1"].subscribed_topic_regex is None


def test_member_leaving_in_kafkas_order() -> None:
    groups = load(group_records() + rh.member_removal_records("g", "m1"))
    group = groups["g"]
    assert set(group.members) == {"m2"} and "m1" not in group.target_assignment
    assert group.current_partition_epoch(FOO, 0) == -1 and not group.has_static_member("instance-1")
    assert group.server_assignors == {}


def test_member_subscription_deleted_before_its_assignment_is_refused() -> None:
    groups = load(group_records())
    with pytest.raises(RuntimeError):
        replay(groups, rh.member_subscription_tombstone("g", "m1"))
    replay(groups, rh.current_assignment_tombstone("g", "m1"))
    assert groups["g"].members["m1"].member_epoch == -1
    with pytest.raises(RuntimeError):
        replay(groups, rh.member_subscription_tombstone("g", "m1"))


def test_group_deleted_by_its_tombstones() -> None:
    groups = load(group_records())
    for record in rh.group_tombstone_records("g", ["m1", "m2"], ["ba.*"]):
        replay(groups, through_bytes(record))
    assert groups == {}


def test_group_tombstone_refused_while_it_has_members() -> None:
    groups = load(group_records())
    with pytest.raises(RuntimeError):
        replay(groups, rh.group_epoch_tombstone("g"))


def test_tombstones_for_what_does_not_exist_are_ignored() -> None:
    groups: dict[str, ConsumerGroup] = {}
    for record in rh.group_tombstone_records("nope", ["m"], ["x"]):
        replay(groups, record)
    assert groups == {}
    groups = load([rh.group_epoch_record("g", 1, 0)])
    replay(groups, rh.current_assignment_tombstone("g", "ghost"))
    replay(groups, rh.member_subscription_tombstone("g", "ghost"))
    assert groups["g"].members == {}


def test_old_partition_metadata_record_is_noted_for_deletion() -> None:
    old = ConsumerGroupRecord(ConsumerGroupPartitionMetadataKey("g"), ConsumerGroupPartitionMetadataValue(()))
    groups = load([old])
    assert groups["g"].has_subscription_metadata_record
    replay(groups, rh.subscription_metadata_tombstone("g"))
    assert not groups["g"].has_subscription_metadata_record


def test_unknown_member_state_is_kept_as_unknown() -> None:
    record = rh.current_assignment_record("g", M2)
    assert record.value is not None
    odd = ConsumerGroupRecord(record.key, type(record.value)(
        member_epoch=6, previous_member_epoch=5, state=9, assigned_partitions=(), partitions_pending_revocation=()))
    groups = load([odd])
    assert groups["g"].members["m2"].state is MemberState.UNKNOWN
