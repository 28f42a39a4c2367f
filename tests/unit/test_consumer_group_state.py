"""A consumer group's derived state as Kafka's ConsumerGroup keeps it (cases of Kafka's ConsumerGroupTest): its
state from epochs and members, partition epochs, static members, subscription counts and type, the preferred
assignor, the inverted target assignment, and the OffsetCommit / OffsetFetch epoch checks."""
from __future__ import annotations

import uuid

import pytest

from minikafka.broker.coordinator.group.assignor.assignor_spec import SubscriptionType
from minikafka.broker.coordinator.group.consumer.consumer_group import (
    ConsumerGroup,
    ConsumerGroupState,
    SubscriptionCount,
    subscription_type_of,
)
from minikafka.broker.coordinator.group.consumer.consumer_group_member import ConsumerGroupMember, MemberState
from minikafka.broker.coordinator.group.consumer.resolved_regular_expression import ResolvedRegularExpression
from minikafka.protocol.coordinator_records.consumer_group_records import ClassicMemberMetadata, ClassicProtocol
from minikafka.protocol.errors import ErrorCode, KafkaError

FOO = uuid.UUID(int=7)
HOMO, HETERO = SubscriptionType.HOMOGENEOUS, SubscriptionType.HETEROGENEOUS


def member(member_id: str, **fields: object) -> ConsumerGroupMember:
    return ConsumerGroupMember(member_id=member_id, **fields)  # type: ignore[arg-type]


def code_of(call: object) -> ErrorCode:
    with pytest.raises(KafkaError) as raised:
        call()  # type: ignore[operator]
    return raised.value.code


def test_get_or_create_member() -> None:
    group = ConsumerGroup("foo")
    assert code_of(lambda: group.get_or_maybe_create_member("m1", False)) is ErrorCode.UNKNOWN_MEMBER_ID
    created = group.get_or_maybe_create_member("m1", True)
    assert created == member("m1") and not group.has_member("m1")
    group.update_member(created)
    assert group.get_or_maybe_create_member("m1", False) is created


def test_static_members() -> None:
    group = ConsumerGroup("foo")
    assert group.static_member_id("instance") is None and group.static_member_id(None) is None
    group.update_member(member("m1", instance_id="instance"))
    assert group.static_member_id("instance") == "m1" and group.has_static_member("instance")
    assert group.static_member("instance") == member("m1", instance_id="instance")
    group.remove_member("m1")
    assert not group.has_static_member("instance") and not group.has_member("m1")


def test_partition_epochs_follow_members() -> None:
    group = ConsumerGroup("foo")
    group.update_member(member("m1", member_epoch=10, assigned_partitions={FOO: frozenset({1, 2})},
                               partitions_pending_revocation={FOO: frozenset({3})}))
    assert [group.current_partition_epoch(FOO, p) for p in (1, 2, 3, 4)] == [10, 10, 10, -1]
    group.update_member(member("m1", member_epoch=11, assigned_partitions={FOO: frozenset({1})}))
    assert [group.current_partition_epoch(FOO, p) for p in (1, 2, 3)] == [11, -1, -1]
    group.remove_member("m1")
    assert group.current_partition_epoch(FOO, 1) == -1


def test_partition_reassigned_to_the_same_member_before_its_revocation() -> None:
    group = ConsumerGroup("foo")
    m = member("m", member_epoch=10, partitions_pending_revocation={FOO: frozenset({1})})
    group.update_member(m)
    assert group.current_partition_epoch(FOO, 1) == 10
    group.update_member(m.replace(member_epoch=11, assigned_partitions={FOO: frozenset({1})},
                                  partitions_pending_revocation={}))
    assert group.current_partition_epoch(FOO, 1) == 11


def test_a_partition_owned_twice_is_a_bug() -> None:
    group = ConsumerGroup("foo")
    group.update_member(member("m1", member_epoch=10, assigned_partitions={FOO: frozenset({1})}))
    with pytest.raises(RuntimeError):
        group.update_member(member("m2", member_epoch=10, assigned_partitions={FOO: frozenset({1})}))


def test_group_state() -> None:
    group = ConsumerGroup("foo")
    assert group.state is ConsumerGroupState.EMPTY
    m1 = member("member1", member_epoch=1, previous_member_epoch=0)
    group.update_member(m1)
    group.group_epoch = 1
    assert group.state is ConsumerGroupState.ASSIGNING
    m2 = member("member2", member_epoch=1, previous_member_epoch=0)
    group.update_member(m2)
    group.group_epoch = 2
    assert group.state is ConsumerGroupState.ASSIGNING
    group.target_assignment_epoch = 2
    assert group.state is ConsumerGroupState.RECONCILING
    group.update_member(m1.replace(member_epoch=2, previous_member_epoch=1))
    assert group.state is ConsumerGroupState.RECONCILING
    group.update_member(m2.replace(member_epoch=2, previous_member_epoch=1, state=MemberState.UNREVOKED_PARTITIONS))
    assert group.state is ConsumerGroupState.RECONCILING
    group.update_member(m2.replace(member_epoch=2, previous_member_epoch=1))
    assert group.state is ConsumerGroupState.STABLE
    assert group.is_in_states(["stable"]) and not group.is_in_states(["Stable", "empty"])
    group.remove_member("member1")
    group.remove_member("member2")
    assert group.state is ConsumerGroupState.EMPTY


def test_preferred_server_assignor() -> None:
    group = ConsumerGroup("foo")
    m1, m2, m3 = (member(f"member{i}", server_assignor_name=n) for i, n in ((1, "range"), (2, "range"),
                                                                          (3, "uniform")))
    assert group.preferred_server_assignor() is None
    assert group.compute_preferred_server_assignor(None, m1) == "range"
    group.update_member(m1)
    assert group.preferred_server_assignor() == "range"
    assert group.compute_preferred_server_assignor(m1, None) is None
    group.update_member(m2)
    group.update_member(m3)
    assert group.preferred_server_assignor() == "range"
    assert group.compute_preferred_server_assignor(m1, member("member1")) in ("range", "uniform")
    group.update_member(member("member1"))
    assert group.compute_preferred_server_assignor(m2, member("member2")) == "uniform"
    group.update_member(member("member2"))
    assert group.preferred_server_assignor() == "uniform"
    group.update_member(member("member3"))
    assert group.preferred_server_assignor() is None


def test_subscribed_topic_names_and_subscription_type() -> None:
    group = ConsumerGroup("group-foo")
    assert group.subscribed_topic_names == {} and group.subscription_type is HOMO
    group.update_member(member("member1", subscribed_topic_names=frozenset({"foo"})))
    assert group.subscription_type is HOMO
    group.update_member(member("member2", subscribed_topic_names=frozenset({"bar", "foo"})))
    assert group.subscription_type is HETERO
    group.update_member(member("member3", subscribed_topic_names=frozenset({"bar", "foo"})))
    assert group.subscribed_topic_names == {"foo": SubscriptionCount(3, 0), "bar": SubscriptionCount(2, 0)}
    group.remove_member("member1")
    assert group.subscription_type is HOMO and group.is_subscribed_to_topic("bar")
    group.update_member(member("member2", subscribed_topic_names=frozenset({"bar", "foo", "zar"})))
    assert group.subscription_type is HETERO


@pytest.mark.parametrize(("regexes", "names", "members", "expected"), [
    ({}, {}, 0, HOMO),
    ({}, {"foo": SubscriptionCount(5, 0)}, 5, HOMO),
    ({}, {"foo": SubscriptionCount(4, 0), "bar": SubscriptionCount(1, 0)}, 5, HETERO),
    ({"foo*": 5}, {"foo": SubscriptionCount(0, 1)}, 5, HOMO),
    ({"foo*": 5}, {"foo": SubscriptionCount(0, 1), "food": SubscriptionCount(0, 1)}, 5, HOMO),
    ({"foo*": 5}, {"foo": SubscriptionCount(1, 1)}, 5, HETERO),
    ({"foo*": 5}, {"foo": SubscriptionCount(0, 1), "bar": SubscriptionCount(1, 0)}, 5, HETERO),
    ({"foo*": 4, "bar*": 1}, {"foo": SubscriptionCount(0, 1), "bar": SubscriptionCount(0, 1)}, 5, HETERO),
])
def test_subscription_type(regexes: dict, names: dict, members: int, expected: SubscriptionType) -> None:
    assert subscription_type_of(regexes, names, members) is expected


def test_regular_expressions_count_their_topics_once() -> None:
    group = ConsumerGroup("foo")
    m1 = member("m1", subscribed_topic_regex="foo*")
    group.update_member(m1)
    group.update_member(member("m2", subscribed_topic_regex="foo*", subscribed_topic_names=frozenset({"bar"})))
    assert group.subscribed_regular_expressions == {"foo*": 2} and group.num_subscribed_members("foo*") == 2
    group.update_resolved_regular_expression("foo*", ResolvedRegularExpression(frozenset({"foo", "food"}), 1, 5))
    assert group.subscribed_topic_names == {"foo": SubscriptionCount(0, 1), "food": SubscriptionCount(0, 1),
                                            "bar": SubscriptionCount(1, 0)}
    assert group.last_resolved_regular_expression_version() == 1
    assert group.last_resolved_regular_expression_refresh_time_ms() == 5
    # Were m1 to leave the regex, m2 still holds it: its topics stay.
    assert group.compute_subscribed_topic_names(m1, member("m1")) == {
        "foo": SubscriptionCount(0, 1), "food": SubscriptionCount(0, 1), "bar": SubscriptionCount(1, 0)}
    assert group.compute_subscribed_regular_expressions(m1, member("m1")) == {"foo*": 1}
    group.update_member(member("m1"))
    # The regex's last member leaving it: its topics go.
    m2 = group.members["m2"]
    assert group.compute_subscribed_topic_names(m2, m2.replace(subscribed_topic_regex=None)) == {
        "bar": SubscriptionCount(1, 0)}
    assert group.compute_subscribed_topic_names_without_deleted_members([m2], ["foo*"]) == {}
    group.remove_resolved_regular_expression("foo*")
    assert group.subscribed_topic_names == {"bar": SubscriptionCount(1, 0)}


def test_inverted_target_assignment() -> None:
    group = ConsumerGroup("test-group")
    group.update_target_assignment("A", {FOO: frozenset({0})})
    assert group.inverted_target_assignment == {FOO: {0: "A"}}
    # p0 moves from A to B, B's new target written first: A's update must not undo it.
    group.update_target_assignment("B", {FOO: frozenset({0})})
    group.update_target_assignment("A", {FOO: frozenset({1})})
    assert group.inverted_target_assignment == {FOO: {0: "B", 1: "A"}}
    group.remove_target_assignment("A")
    group.remove_target_assignment("B")
    assert group.inverted_target_assignment == {} and group.target_assignment == {}


def test_target_assignment_of_a_static_member_follows_its_instance() -> None:
    group = ConsumerGroup("g")
    group.update_member(member("old", instance_id="i"))
    group.update_target_assignment("old", {FOO: frozenset({1})})
    assert group.target_assignment_of("new", "i") == {FOO: frozenset({1})}
    assert group.target_assignment_of("old") == {FOO: frozenset({1})}
    assert group.target_assignment_of("x", "unknown") == {}


def test_waiting_on_unreleased_partition() -> None:
    group = ConsumerGroup("g")
    group.update_member(member("owner", member_epoch=10, assigned_partitions={FOO: frozenset({1})}))
    waiting = member("w", member_epoch=11, state=MemberState.UNRELEASED_PARTITIONS)
    group.update_member(waiting)
    group.update_target_assignment("w", {FOO: frozenset({1, 2})})
    assert group.waiting_on_unreleased_partition(waiting)
    group.update_member(member("owner", member_epoch=11))
    assert not group.waiting_on_unreleased_partition(waiting)


@pytest.mark.parametrize("version", range(0, 11))
def test_validate_offset_commit(version: int) -> None:
    group = ConsumerGroup("group-foo")
    group.validate_offset_commit("", "", -1, False, version)
    assert code_of(lambda: group.validate_offset_commit("member-id", None, 0, False, version)) \
        is ErrorCode.UNKNOWN_MEMBER_ID
    group.update_member(member("new-protocol-member-id"))
    group.update_member(member("old-protocol-member-id", classic_member_metadata=ClassicMemberMetadata(45000, ())))
    for instance_id in ("", None):
        assert code_of(lambda i=instance_id: group.validate_offset_commit("", i, -1, False, version)) \
            is ErrorCode.UNKNOWN_MEMBER_ID
    expected = ErrorCode.STALE_MEMBER_EPOCH if version >= 9 else ErrorCode.UNSUPPORTED_VERSION
    assert code_of(lambda: group.validate_offset_commit("new-protocol-member-id", "", 10, False, version)) \
        is expected
    assert code_of(lambda: group.validate_offset_commit("old-protocol-member-id", "", 10, False, version)) \
        is ErrorCode.ILLEGAL_GENERATION
    if version >= 9:
        group.validate_offset_commit("new-protocol-member-id", "", 0, False, version)
    else:
        assert code_of(lambda: group.validate_offset_commit("new-protocol-member-id", "", 0, False, version)) \
            is ErrorCode.UNSUPPORTED_VERSION


@pytest.mark.parametrize("version", range(0, 6))
def test_validate_transactional_offset_commit(version: int) -> None:
    group = ConsumerGroup("group-foo")
    group.validate_offset_commit("", "", -1, True, version)
    assert code_of(lambda: group.validate_offset_commit("member-id", None, 0, True, version)) \
        is ErrorCode.UNKNOWN_MEMBER_ID
    group.update_member(member("member-id"))
    assert code_of(lambda: group.validate_offset_commit("", "", -1, True, version)) is ErrorCode.UNKNOWN_MEMBER_ID
    assert code_of(lambda: group.validate_offset_commit("member-id", "", 10, True, version)) \
        is ErrorCode.STALE_MEMBER_EPOCH
    group.validate_offset_commit("member-id", "", 0, True, version)
    group.validate_offset_commit("", None, -1, True, version)


def test_validate_offset_fetch() -> None:
    group = ConsumerGroup("group-foo")
    group.validate_offset_fetch(None, -1)
    assert code_of(lambda: group.validate_offset_fetch("member-id", 0)) is ErrorCode.UNKNOWN_MEMBER_ID
    group.update_member(member("member-id"))
    assert code_of(lambda: group.validate_offset_fetch("member-id", 10)) is ErrorCode.STALE_MEMBER_EPOCH
    group.validate_offset_fetch("member-id", 0)


def test_validate_delete_group() -> None:
    group = ConsumerGroup("foo")
    group.validate_delete_group()
    group.update_member(member("member1", member_epoch=1, previous_member_epoch=0))
    assert group.state is ConsumerGroupState.RECONCILING
    assert code_of(group.validate_delete_group) is ErrorCode.NON_EMPTY_GROUP
    group.group_epoch = 1
    assert group.state is ConsumerGroupState.ASSIGNING
    group.target_assignment_epoch = 1
    assert group.state is ConsumerGroupState.STABLE
    assert code_of(group.validate_delete_group) is ErrorCode.NON_EMPTY_GROUP


def test_classic_members() -> None:
    group = ConsumerGroup("foo")
    assert not group.supports_classic_protocols("consumer", [])
    assert group.supports_classic_protocols("consumer", ["range"])
    assert not group.supports_classic_protocols("connect", ["range"])
    classic = ClassicMemberMetadata(45000, (ClassicProtocol("range", b""), ClassicProtocol("roundrobin", b"")))
    m1 = member("m1", classic_member_metadata=classic)
    group.update_member(m1)
    group.update_member(member("m2"))
    assert group.num_classic_protocol_members == 1
    assert group.classic_protocol_members_supported_protocols == {"range": 1, "roundrobin": 1}
    assert group.supports_classic_protocols("consumer", ["sticky", "roundrobin"])
    assert not group.supports_classic_protocols("consumer", ["sticky"])
    assert group.all_members_use_classic_protocol_except([group.members["m2"]])
    assert not group.all_members_use_classic_protocol_except([m1])
    group.remove_member("m1")
    assert group.num_classic_protocol_members == 0 and group.classic_protocol_members_supported_protocols == {}


def test_member_state_from_record_values() -> None:
    assert [MemberState.from_value(v) for v in (0, 1, 2, 3, 127)] == [
        MemberState.STABLE, MemberState.UNREVOKED_PARTITIONS, MemberState.UNRELEASED_PARTITIONS, MemberState.UNKNOWN,
        MemberState.UNKNOWN]
    assert member("m", subscribed_topic_regex="").subscribed_topic_regex is None
    m = member("m", member_epoch=5, previous_member_epoch=4).update_member_epoch(6)
    assert (m.member_epoch, m.previous_member_epoch) == (6, 5)
