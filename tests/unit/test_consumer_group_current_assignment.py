"""A member's reconciliation (CurrentAssignmentBuilder) moves as Kafka 4.1's: the cases of Kafka's
CurrentAssignmentBuilderTest, then a whole handover between two members driven through the group's partition
epochs."""
from __future__ import annotations

import uuid

import pytest

from minikafka.broker.coordinator.group.assignor.assignor_spec import SubscribedTopicDescriber, TopicMetadata
from minikafka.broker.coordinator.group.consumer.consumer_group import ConsumerGroup
from minikafka.broker.coordinator.group.consumer.consumer_group_member import ConsumerGroupMember, MemberState
from minikafka.broker.coordinator.group.consumer.current_assignment_builder import CurrentAssignmentBuilder
from minikafka.broker.coordinator.group.consumer.resolved_regular_expression import ResolvedRegularExpression
from minikafka.protocol.errors import ErrorCode, KafkaError

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)
DESCRIBER = SubscribedTopicDescriber([TopicMetadata(T1, "topic1", 10), TopicMetadata(T2, "topic2", 10)])
STABLE, UNREVOKED, UNRELEASED = MemberState.STABLE, MemberState.UNREVOKED_PARTITIONS, MemberState.UNRELEASED_PARTITIONS


def a(p1: tuple[int, ...] = (), p2: tuple[int, ...] = ()) -> dict[uuid.UUID, frozenset[int]]:
    """An assignment of topic1's and topic2's partitions."""
    return {t: frozenset(ps) for t, ps in ((T1, p1), (T2, p2)) if ps}


def m(state: MemberState, epoch: int, previous: int, assigned: dict, pending: dict | None = None,
      topics: tuple[str, ...] = ("topic1", "topic2"), regex: str | None = None) -> ConsumerGroupMember:
    return ConsumerGroupMember(member_id="member", state=state, member_epoch=epoch, previous_member_epoch=previous,
                               subscribed_topic_names=frozenset(topics), subscribed_topic_regex=regex,
                               assigned_partitions=assigned, partitions_pending_revocation=pending or {})


def build(member: ConsumerGroupMember, epoch: int, target: dict, partition_epoch: int = -1,
          owned: dict | None = None, changed: bool = False, regexes: dict | None = None) -> ConsumerGroupMember:
    return CurrentAssignmentBuilder(member, epoch, target, lambda t, p: partition_epoch, DESCRIBER,
                                    owned_topic_partitions=owned, has_subscription_changed=changed,
                                    resolved_regular_expressions=regexes or {}).build()


def test_stable_to_stable() -> None:
    member = m(STABLE, 10, 10, a((1, 2, 3), (4, 5, 6)))
    assert build(member, 11, a((1, 2, 3), (4, 5, 6)), 10) == m(STABLE, 11, 10, a((1, 2, 3), (4, 5, 6)))


def test_stable_to_stable_with_new_partitions() -> None:
    member = m(STABLE, 10, 10, a((1, 2, 3), (4, 5, 6)))
    assert build(member, 11, a((1, 2, 3, 4), (4, 5, 6, 7))) == m(STABLE, 11, 10, a((1, 2, 3, 4), (4, 5, 6, 7)))


def test_stable_to_unrevoked_partitions() -> None:
    member = m(STABLE, 10, 10, a((1, 2, 3), (4, 5, 6)))
    assert build(member, 11, a((2, 3, 4), (5, 6, 7))) == m(UNREVOKED, 10, 10, a((2, 3), (5, 6)), a((1,), (4,)))


def test_stable_to_unreleased_partitions() -> None:
    member = m(STABLE, 10, 10, a((1, 2, 3), (4, 5, 6)))
    assert build(member, 11, a((1, 2, 3, 4), (4, 5, 6, 7)), 10) == m(UNRELEASED, 11, 10, a((1, 2, 3), (4, 5, 6)))


def test_stable_to_unreleased_when_owned_partitions_hold_nothing_to_revoke() -> None:
    member = m(STABLE, 10, 10, a((1, 2, 3), (4, 5, 6)))
    got = CurrentAssignmentBuilder(member, 11, a((1, 2, 3), (4, 5, 7)), lambda t, p: 10 if t == T2 else -1,
                                   DESCRIBER, owned_topic_partitions={}).build()
    assert got == m(UNRELEASED, 11, 10, a((1, 2, 3), (4, 5)))


def test_unrevoked_partitions_to_stable() -> None:
    member = m(UNREVOKED, 10, 10, a((2, 3), (5, 6)), a((1,), (4,)))
    got = build(member, 11, a((2, 3), (5, 6)), owned={T1: [2, 3], T2: [5, 6]})
    assert got == m(STABLE, 11, 10, a((2, 3), (5, 6)))


def test_remains_in_unrevoked_partitions() -> None:
    member = m(UNREVOKED, 10, 10, a((2, 3), (5, 6)), a((1,), (4,)))
    for owned in (None, {T1: [1, 2, 3], T2: [5, 6]}, {T1: [2, 3], T2: [4, 5, 6]}):
        assert build(member, 12, a((3,), (6,)), owned=owned) is member


@pytest.mark.parametrize(("epoch", "target_epoch", "expected_epoch"), [(10, 12, 11), (10, 10, 10)])
def test_unrevoked_partitions_to_unrevoked_partitions(epoch: int, target_epoch: int, expected_epoch: int) -> None:
    member = m(UNREVOKED, epoch, epoch, a((2, 3), (5, 6)), a((1,), (4,)))
    got = build(member, target_epoch, a((3,), (6,)), owned={T1: [2, 3], T2: [5, 6]})
    # One epoch at a time, never past the target's.
    assert got == m(UNREVOKED, expected_epoch, epoch, a((3,), (6,)), a((2,), (5,)))


def test_unrevoked_partitions_to_unreleased_partitions() -> None:
    member = m(UNREVOKED, 11, 10, a((2, 3), (5, 6)))
    got = build(member, 11, a((2, 3, 4), (5, 6, 7)), 10, owned={T1: [2, 3], T2: [5, 6]})
    assert got == m(UNRELEASED, 11, 11, a((2, 3), (5, 6)))


def test_unreleased_partitions_to_stable() -> None:
    member = m(UNRELEASED, 11, 11, a((2, 3), (5, 6)))
    assert build(member, 12, a((2, 3), (5, 6)), 10) == m(STABLE, 12, 11, a((2, 3), (5, 6)))


def test_unreleased_partitions_to_stable_with_new_partitions() -> None:
    member = m(UNRELEASED, 11, 11, a((2, 3), (5, 6)))
    assert build(member, 11, a((2, 3, 4), (5, 6, 7))) == m(STABLE, 11, 11, a((2, 3, 4), (5, 6, 7)))


def test_unreleased_partitions_to_unreleased_partitions() -> None:
    member = m(UNRELEASED, 11, 11, a((2, 3), (5, 6)))
    assert build(member, 11, a((2, 3, 4), (5, 6, 7)), 10) == member


def test_unreleased_partitions_to_unrevoked_partitions() -> None:
    member = m(UNRELEASED, 11, 11, a((2, 3), (5, 6)))
    assert build(member, 12, a((3,), (6,)), 10) == m(UNREVOKED, 11, 11, a((3,), (6,)), a((2,), (5,)))


def test_unknown_state_fences_until_the_member_owns_nothing() -> None:
    member = m(MemberState.UNKNOWN, 11, 11, a((3,), (6,)), a((2,), (5,)))
    with pytest.raises(KafkaError) as raised:
        build(member, 12, a((3,), (6,)), 10)
    assert raised.value.code is ErrorCode.FENCED_MEMBER_EPOCH
    assert build(member, 12, a((3,), (6,)), 11, owned={}) == m(STABLE, 12, 11, a((3,), (6,)))


@pytest.mark.parametrize(("epoch", "target_epoch", "expected_epoch", "changed"),
                         [(10, 11, 11, False), (10, 11, 11, True), (10, 10, 10, True)])
def test_stable_drops_topics_no_longer_subscribed(epoch: int, target_epoch: int, expected_epoch: int,
                                                 changed: bool) -> None:
    member = m(STABLE, epoch, epoch, a((1, 2, 3), (4, 5, 6)), topics=("topic2",))
    got = build(member, target_epoch, a((1, 2, 3), (4, 5, 6)), owned={T2: [4, 5, 6]}, changed=changed)
    assert got == m(STABLE, expected_epoch, epoch, a((), (4, 5, 6)), topics=("topic2",))


@pytest.mark.parametrize(("epoch", "target_epoch", "expected_epoch", "changed"),
                         [(10, 11, 10, False), (10, 11, 10, True), (10, 10, 10, True)])
def test_stable_revokes_topics_no_longer_subscribed(epoch: int, target_epoch: int, expected_epoch: int,
                                                   changed: bool) -> None:
    member = m(STABLE, epoch, epoch, a((1, 2, 3), (4, 5, 6)), topics=("topic2",))
    got = build(member, target_epoch, a((1, 2, 3), (4, 5, 6)), owned={T1: [1, 2, 3], T2: [4, 5, 6]},
                changed=changed)
    assert got == m(UNREVOKED, expected_epoch, epoch, a((), (4, 5, 6)), a((1, 2, 3)), topics=("topic2",))


def test_unrevoked_adds_topics_no_longer_subscribed_to_revocation() -> None:
    member = m(UNREVOKED, 10, 10, a((2, 3), (5, 6)), a((1,), (4,)), topics=("topic2",))
    got = build(member, 12, a((1, 3, 4), (6, 7)), owned={T1: [1, 2, 3], T2: [4, 5, 6]}, changed=True)
    assert got == m(UNREVOKED, 10, 10, a((), (5, 6)), a((1, 2, 3), (4,)), topics=("topic2",))


def test_unresolved_regex_subscribes_to_nothing_more() -> None:
    member = m(STABLE, 10, 10, a((1, 2, 3), (4, 5, 6)), topics=("topic1",), regex="topic2*")
    got = build(member, 10, a((1, 2, 3), (4, 5, 6)), owned={T1: [1, 2, 3], T2: [4, 5, 6]}, changed=True)
    assert got == m(UNREVOKED, 10, 10, a((1, 2, 3)), a((), (4, 5, 6)), topics=("topic1",), regex="topic2*")
    only_regex = m(STABLE, 10, 10, a((1, 2, 3), (4, 5, 6)), topics=(), regex="topic2*")
    got = build(only_regex, 10, a((1, 2, 3), (4, 5, 6)), owned={T1: [1, 2, 3], T2: [4, 5, 6]}, changed=True)
    assert got == m(UNREVOKED, 10, 10, {}, a((1, 2, 3), (4, 5, 6)), topics=(), regex="topic2*")


def test_resolved_regex_keeps_its_topics() -> None:
    member = m(STABLE, 10, 10, a((1, 2, 3), (4, 5, 6)), topics=("topic1",), regex="topic2*")
    resolved = {"topic2*": ResolvedRegularExpression(frozenset({"topic2"}), 12345, 0)}
    got = build(member, 10, a((1, 2, 3), (4, 5, 6)), owned={T1: [1, 2, 3], T2: [4, 5, 6]}, changed=True,
                regexes=resolved)
    assert got == member


def test_a_partition_moves_only_after_its_owner_revoked_it() -> None:
    """Two members and the group's partition epochs: B is given P0 of topic1 in the target, but gets it only once
    A, which owned it, has revoked it; A's epoch advances only after the revocation."""
    group = ConsumerGroup("g")
    member_a = m(STABLE, 1, 0, a((0, 1)))
    group.update_member(member_a)
    group.update_member(ConsumerGroupMember(member_id="b", member_epoch=1, previous_member_epoch=0,
                                            subscribed_topic_names=frozenset({"topic1", "topic2"})))
    target_a, target_b = a((1,)), a((0,))
    group.update_target_assignment("member", target_a)
    group.update_target_assignment("b", target_b)
    group.target_assignment_epoch = group.group_epoch = 2

    def step(member: ConsumerGroupMember, target: dict, owned: dict | None) -> ConsumerGroupMember:
        new = CurrentAssignmentBuilder(member, 2, target, group.current_partition_epoch, DESCRIBER,
                                       owned_topic_partitions=owned).build()
        group.update_member(new)
        return new

    b = step(group.members["b"], target_b, {})
    assert (b.state, b.member_epoch, b.assigned_partitions) == (UNRELEASED, 2, {})
    a1 = step(group.members["member"], target_a, {T1: [0, 1]})
    assert (a1.state, a1.member_epoch, a1.partitions_pending_revocation) == (UNREVOKED, 1, a((0,)))
    assert group.current_partition_epoch(T1, 0) == 1
    b = step(b, target_b, {})
    assert b.state is UNRELEASED and group.waiting_on_unreleased_partition(b)
    a2 = step(a1, target_a, {T1: [1]})
    assert (a2.state, a2.member_epoch, a2.assigned_partitions) == (STABLE, 2, a((1,)))
    assert group.current_partition_epoch(T1, 0) == -1
    b = step(b, target_b, {})
    assert (b.state, b.member_epoch, b.assigned_partitions) == (STABLE, 2, a((0,)))
    assert group.current_partition_epoch(T1, 0) == 2
    assert group.state.value == "Stable"
