"""The `uniform` assignor gives Kafka's assignments: the expectations of Kafka's OptimizedUniformAssignmentBuilderTest
and UniformHeterogeneousAssignmentBuilderTest for the same inputs, and, as properties, validity, balance and
stickiness."""
from __future__ import annotations

import base64
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minikafka.broker.coordinator.group.assignor.assignor_spec import (
    GroupSpec,
    MemberSubscription,
    PartitionAssignorError,
    SubscribedTopicDescriber,
    SubscriptionType,
    TopicMetadata,
)
from minikafka.broker.coordinator.group.assignor.java_order import (
    java_string_hash,
    java_uuid_hash,
    java_uuid_order,
    member_hash_order,
    topic_hash_order,
)
from minikafka.broker.coordinator.group.assignor.uniform_assignor import UniformAssignor


def kafka_uuid(text: str) -> uuid.UUID:
    """A topic id written as Kafka prints it (URL-safe base64 of its 16 bytes)."""
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=="))


T1 = kafka_uuid("T1-A4s3VTwiI5CTbEp6POw")
T2 = kafka_uuid("T2-B4s3VTwiI5YHbPp6YUe")
T3 = kafka_uuid("T3-CU8fVTLCz5YMkLoDQsa")
T4 = kafka_uuid("T4-Tw9fVTLCz5HbPp6YQsa")

HOMO = SubscriptionType.HOMOGENEOUS
HETERO = SubscriptionType.HETEROGENEOUS


def topics(**counts: int) -> SubscribedTopicDescriber:
    ids = {"t1": T1, "t2": T2, "t3": T3, "t4": T4}
    return SubscribedTopicDescriber(TopicMetadata(ids[name], name, n) for name, n in counts.items())


def member(subscribed: set[uuid.UUID], **assignment: tuple[int, ...]) -> MemberSubscription:
    ids = {"t1": T1, "t2": T2, "t3": T3, "t4": T4}
    return MemberSubscription(frozenset(subscribed), {ids[t]: frozenset(ps) for t, ps in assignment.items()})


def spec(members: dict[str, MemberSubscription], kind: SubscriptionType) -> GroupSpec:
    """Members in sorted order (Kafka's tests use a TreeMap) and the inverted current assignment."""
    inverted: dict[uuid.UUID, dict[int, str]] = {}
    for member_id, m in members.items():
        for topic_id, partitions in m.assignment.items():
            for p in partitions:
                inverted.setdefault(topic_id, {})[p] = member_id
    return GroupSpec(dict(sorted(members.items())), kind, inverted)


def plain(assignment: dict) -> dict:
    return {m: {t: set(ps) for t, ps in a.items()} for m, a in assignment.items()}


def test_java_orders() -> None:
    assert java_string_hash("A") == 65
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("\U0001F600") == (31 * 0xD83D + 0xDE00)
    assert java_uuid_hash(uuid.UUID(int=(1 << 64) | 3)) == 2
    # Uuid.compareTo is signed: a high first bit sorts first.
    high, low = uuid.UUID(int=1 << 127), uuid.UUID(int=1)
    assert sorted([low, high], key=java_uuid_order) == [high, low]
    assert member_hash_order(["C", "A", "B"]) == ["A", "B", "C"]
    assert topic_hash_order([T1, T3]) == [T3, T1]


# ---- homogeneous: Kafka's OptimizedUniformAssignmentBuilderTest ----------------------------------------------------

def test_no_member_no_assignment() -> None:
    assert UniformAssignor().assign(GroupSpec({}), topics(t1=3)) == {}


def test_one_member_no_topic_subscription() -> None:
    assert UniformAssignor().assign(spec({"A": member(set())}, HOMO), topics(t1=3)) == {}


def test_one_member_subscribed_to_nonexistent_topic() -> None:
    with pytest.raises(PartitionAssignorError):
        UniformAssignor().assign(spec({"A": member({T2})}, HOMO), topics(t1=3))


def test_first_assignment_two_members_two_topics() -> None:
    got = UniformAssignor().assign(spec({"A": member({T1, T3}), "B": member({T1, T3})}, HOMO), topics(t1=3, t3=2))
    assert plain(got) == {"A": {T3: {0, 1}}, "B": {T1: {0, 1, 2}}}


def test_first_assignment_more_members_than_partitions() -> None:
    got = UniformAssignor().assign(spec({m: member({T3}) for m in "ABC"}, HOMO), topics(t3=2))
    assert plain(got) == {"A": {}, "B": {T3: {0}}, "C": {T3: {1}}}


def test_reassignment_given_unbalanced_previous_assignment() -> None:
    members = {"A": member({T1, T2}, t1=(0, 1), t2=(0, 1)), "B": member({T1, T2}, t1=(2,), t2=(2,))}
    got = UniformAssignor().assign(spec(members, HOMO), topics(t1=3, t2=3))
    assert plain(got) == {"A": {T1: {0, 1}, T2: {0}}, "B": {T1: {2}, T2: {1, 2}}}


def test_reassignment_when_partitions_are_added() -> None:
    members = {"A": member({T1, T2}, t1=(0, 2), t2=(0,)), "B": member({T1, T2}, t1=(1,), t2=(1, 2))}
    got = UniformAssignor().assign(spec(members, HOMO), topics(t1=6, t2=5))
    assert plain(got) == {"A": {T1: {0, 2}, T2: {0, 3, 4}}, "B": {T1: {1, 3, 4, 5}, T2: {1, 2}}}


def test_reassignment_when_a_member_is_added() -> None:
    members = {"A": member({T1, T2}, t1=(0, 2), t2=(0,)), "B": member({T1, T2}, t1=(1,), t2=(1, 2)),
               "C": member({T1, T2})}
    got = UniformAssignor().assign(spec(members, HOMO), topics(t1=3, t2=3))
    assert plain(got) == {"A": {T1: {0, 2}}, "B": {T1: {1}, T2: {1}}, "C": {T2: {0, 2}}}


def test_reassignment_when_a_member_is_removed() -> None:
    members = {"A": member({T1, T2}, t1=(0,), t2=(0,)), "B": member({T1, T2}, t1=(1,), t2=(1,))}
    got = UniformAssignor().assign(spec(members, HOMO), topics(t1=3, t2=3))
    assert plain(got) == {"A": {T1: {0}, T2: {0, 2}}, "B": {T1: {1, 2}, T2: {1}}}


def test_reassignment_when_a_subscription_is_removed() -> None:
    members = {"A": member({T2}, t1=(0,), t2=(0,)), "B": member({T2}, t1=(1,), t2=(1,))}
    got = UniformAssignor().assign(spec(members, HOMO), topics(t1=2, t2=2))
    assert plain(got) == {"A": {T2: {0}}, "B": {T2: {1}}}


def test_stickiness_when_already_balanced() -> None:
    members = {"A": member({T1}, t1=(0, 3)), "B": member({T1}, t1=(1,)), "C": member({T1}, t1=(2, 4))}
    got = UniformAssignor().assign(spec(members, HOMO), topics(t1=5))
    assert plain(got) == {"A": {T1: {0, 3}}, "B": {T1: {1}}, "C": {T1: {2, 4}}}
    # Members that keep their assignment get back the very mapping they came with.
    assert all(got[m] is members[m].assignment for m in members)


# ---- heterogeneous: Kafka's UniformHeterogeneousAssignmentBuilderTest ---------------------------------------------

def test_heterogeneous_members_without_subscriptions() -> None:
    assert UniformAssignor().assign(spec({"A": member(set()), "B": member(set())}, HETERO), topics(t1=3)) == {}


def test_heterogeneous_nonexistent_topics() -> None:
    with pytest.raises(PartitionAssignorError):
        UniformAssignor().assign(spec({"A": member({T3}), "B": member({T2})}, HETERO), topics(t1=3))


def test_heterogeneous_first_assignment() -> None:
    got = UniformAssignor().assign(spec({"A": member({T1, T3}), "B": member({T3})}, HETERO), topics(t1=3, t3=6))
    assert plain(got) == {"A": {T1: {0, 1, 2}, T3: {4}}, "B": {T3: {0, 1, 2, 3, 5}}}


def test_heterogeneous_more_members_than_partitions() -> None:
    members = {"A": member({T3}), "B": member({T3}), "C": member({T1})}
    got = UniformAssignor().assign(spec(members, HETERO), topics(t1=2, t3=1))
    assert plain(got) == {"A": {T3: {0}}, "B": {}, "C": {T1: {0, 1}}}


def test_heterogeneous_unbalanced_previous_assignment() -> None:
    members = {"A": member({T1}, t1=(0, 1, 2)), "B": member({T1, T2}, t1=(3,), t2=(0,)),
               "C": member({T1, T2, T3}, t1=(4, 5), t2=(1, 2, 3), t3=(0, 1, 2, 3))}
    got = UniformAssignor().assign(spec(members, HETERO), topics(t1=6, t2=4, t3=4))
    assert plain(got) == {"A": {T1: {0, 1, 2, 5}}, "B": {T1: {3}, T2: {0, 1, 2, 3}},
                          "C": {T1: {4}, T3: {0, 1, 2, 3}}}


def test_heterogeneous_partitions_added() -> None:
    members = {"A": member({T1, T3}, t1=(0, 1, 2, 3), t3=(0, 1)),
               "B": member({T1, T2, T3, T4}, t2=(0, 1, 2), t4=(0, 1, 2))}
    got = UniformAssignor().assign(spec(members, HETERO), topics(t1=6, t2=5, t3=3, t4=3))
    assert plain(got) == {"A": {T1: {0, 1, 2, 3, 4, 5}, T3: {0, 1, 2}}, "B": {T2: {0, 1, 2, 3, 4}, T4: {0, 1, 2}}}


def test_heterogeneous_member_and_partitions_added() -> None:
    members = {"A": member({T1}, t1=(0, 2), t2=(0,)), "B": member({T1, T2}, t1=(1,), t2=(1, 2)),
               "C": member({T1, T2})}
    got = UniformAssignor().assign(spec(members, HETERO), topics(t1=6, t2=7))
    assert plain(got) == {"A": {T1: {0, 2, 3, 4, 5}}, "B": {T1: {1}, T2: {1, 2, 6}}, "C": {T2: {0, 3, 4, 5}}}


def test_heterogeneous_member_removed() -> None:
    members = {"A": member({T1, T3}, t1=(0, 1, 2), t3=(0, 1)), "B": member({T2}, t2=(3, 4, 5, 6))}
    got = UniformAssignor().assign(spec(members, HETERO), topics(t1=3, t2=8, t3=3))
    assert plain(got) == {"A": {T1: {0, 1, 2}, T3: {0, 1, 2}}, "B": {T2: set(range(8))}}


def test_heterogeneous_subscription_removed() -> None:
    members = {"A": member({T1}, t1=(0, 2), t2=(1, 3)), "B": member({T1, T2}, t1=(1,), t2=(0, 2, 4))}
    got = UniformAssignor().assign(spec(members, HETERO), topics(t1=3, t2=5))
    assert plain(got) == {"A": {T1: {0, 1, 2}}, "B": {T2: {0, 1, 2, 3, 4}}}


def test_heterogeneous_topic_partitions_run_out() -> None:
    members = {"A": member({T1, T2, T3}, t1=(0, 1), t2=(0, 1), t3=(0, 1)), "B": member({T1, T2, T3})}
    got = UniformAssignor().assign(spec(members, HETERO), topics(t1=2, t2=2, t3=2))
    assert plain(got) == {"A": {T2: {0}, T3: {0, 1}}, "B": {T1: {0, 1}, T2: {1}}}


def test_heterogeneous_member_without_subscriptions() -> None:
    got = UniformAssignor().assign(spec({"A": member({T1}), "B": member(set())}, HETERO), topics(t1=3))
    assert plain(got) == {"A": {T1: {0, 1, 2}}, "B": {}}


# ---- properties ----------------------------------------------------------------------------------------------------

def _topic_ids(n: int) -> list[uuid.UUID]:
    return [uuid.UUID(int=(i + 1) * 0x9E3779B97F4A7C15_F39CC0605CEDC834 % (1 << 128)) for i in range(n)]


def _check_valid(group: GroupSpec, describer: SubscribedTopicDescriber, got: dict) -> dict[tuple, str]:
    """Each member has only partitions of topics it subscribes to, no partition twice, every subscribed one once."""
    owner: dict[tuple, str] = {}
    for member_id, assignment in got.items():
        for topic_id, partitions in assignment.items():
            assert topic_id in group.members[member_id].subscribed_topic_ids
            for p in partitions:
                assert (topic_id, p) not in owner
                owner[(topic_id, p)] = member_id
    subscribed = {t for m in group.members.values() for t in m.subscribed_topic_ids}
    assert set(owner) == {(t, p) for t in subscribed for p in range(describer.num_partitions(t))}
    return owner


def _homogeneous(members: list[str], topic_ids: list[uuid.UUID],
                 previous: dict | None = None) -> GroupSpec:
    previous = previous or {}
    subs = {m: MemberSubscription(frozenset(topic_ids), previous.get(m, {})) for m in members}
    return spec(subs, HOMO)


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 12), st.lists(st.integers(0, 9), min_size=1, max_size=4))
def test_homogeneous_is_balanced_and_complete(num_members: int, counts: list[int]) -> None:
    topic_ids = _topic_ids(len(counts))
    describer = SubscribedTopicDescriber(TopicMetadata(t, f"t{i}", n) for i, (t, n) in
                                         enumerate(zip(topic_ids, counts, strict=True)))
    group = _homogeneous([f"member-{i}" for i in range(num_members)], topic_ids)
    got = UniformAssignor().assign(group, describer)
    _check_valid(group, describer, got)
    sizes = [sum(len(ps) for ps in a.values()) for a in got.values()]
    assert max(sizes) - min(sizes) <= 1
    assert got == UniformAssignor().assign(group, describer)


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 10), st.lists(st.integers(1, 9), min_size=1, max_size=3), st.booleans())
def test_homogeneous_join_or_leave_moves_little(num_members: int, counts: list[int], join: bool) -> None:
    """After a member joins or leaves, the members that stay keep all they had up to their new quota."""
    topic_ids = _topic_ids(len(counts))
    describer = SubscribedTopicDescriber(TopicMetadata(t, f"t{i}", n) for i, (t, n) in
                                         enumerate(zip(topic_ids, counts, strict=True)))
    members = [f"member-{i}" for i in range(num_members)]
    before = UniformAssignor().assign(_homogeneous(members, topic_ids), describer)
    after_members = members + ["joiner"] if join else members[1:]
    if not after_members:
        return
    group = _homogeneous(after_members, topic_ids, before)
    after = UniformAssignor().assign(group, describer)
    _check_valid(group, describer, after)
    total = sum(counts)
    quota = -(-total // len(after_members))
    moved = 0
    for m in after_members:
        kept = {(t, p) for t, ps in after[m].items() for p in ps}
        had = {(t, p) for t, ps in before.get(m, {}).items() for p in ps}
        assert len(had & kept) >= min(len(had), total // len(after_members))
        assert len(kept) <= quota
        moved += len(kept - had)
    # Only what the leaver had, or what the joiner needs, changes hands (give or take one extra slot each).
    leaver = sum(len(ps) for ps in before[members[0]].values()) if not join else 0
    assert moved <= (quota if join else leaver) + len(after_members)


@settings(max_examples=150, deadline=None)
@given(st.integers(2, 8), st.lists(st.integers(0, 9), min_size=1, max_size=4), st.data())
def test_heterogeneous_is_valid_and_deterministic(num_members: int, counts: list[int], data: st.DataObject) -> None:
    topic_ids = _topic_ids(len(counts))
    describer = SubscribedTopicDescriber(TopicMetadata(t, f"t{i}", n) for i, (t, n) in
                                         enumerate(zip(topic_ids, counts, strict=True)))
    subs = {f"member-{i}": MemberSubscription(frozenset(data.draw(st.sets(st.sampled_from(topic_ids)))))
            for i in range(num_members)}
    group = spec(subs, HETERO)
    got = UniformAssignor().assign(group, describer)
    if not any(m.subscribed_topic_ids for m in subs.values()):
        assert got == {}
        return
    owner = _check_valid(group, describer, got)
    # No partition could go to a subscriber with two fewer partitions than its owner.
    sizes = {m: sum(len(ps) for ps in a.values()) for m, a in got.items()}
    for (topic_id, _), member_id in owner.items():
        for other, sub in subs.items():
            if topic_id in sub.subscribed_topic_ids:
                assert sizes[member_id] - sizes[other] <= 1
    # Again from its own result: nothing moves.
    again = spec({m: MemberSubscription(s.subscribed_topic_ids, got[m]) for m, s in subs.items()}, HETERO)
    assert plain(UniformAssignor().assign(again, describer)) == plain(got)
