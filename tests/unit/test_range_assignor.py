"""The `range` assignor gives Kafka 4.1's RangeAssignor assignments (the expectations of Kafka's RangeAssignorTest),
and co-partitioned topics get the same partition numbers per member."""
from __future__ import annotations

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
from minikafka.broker.coordinator.group.assignor.range_assignor import RangeAssignor

T1, T2, T3 = (uuid.UUID(int=i) for i in (11, 22, 33))
HOMO = SubscriptionType.HOMOGENEOUS
HETERO = SubscriptionType.HETEROGENEOUS


def topics(**counts: int) -> SubscribedTopicDescriber:
    ids = {"t1": T1, "t2": T2, "t3": T3}
    return SubscribedTopicDescriber(TopicMetadata(ids[name], name, n) for name, n in counts.items())


def sub(*topic_ids: uuid.UUID, instance_id: str | None = None, **assignment: tuple[int, ...]) -> MemberSubscription:
    ids = {"t1": T1, "t2": T2, "t3": T3}
    return MemberSubscription(frozenset(topic_ids), {ids[t]: frozenset(p) for t, p in assignment.items()},
                              instance_id=instance_id)


def assign(members: dict[str, MemberSubscription], kind: SubscriptionType,
           describer: SubscribedTopicDescriber) -> dict:
    got = RangeAssignor().assign(GroupSpec(members, kind), describer)
    return {m: {t: set(ps) for t, ps in a.items()} for m, a in got.items()}


def test_one_member_no_topic() -> None:
    assert assign({"A": sub()}, HOMO, topics()) == {"A": {}}


def test_one_member_subscribed_to_nonexistent_topic() -> None:
    with pytest.raises(PartitionAssignorError):
        assign({"A": sub(T2)}, HOMO, topics(t1=3))


def test_first_assignment_same_subscriptions() -> None:
    got = assign({"A": sub(T1, T3), "B": sub(T1, T3)}, HOMO, topics(t1=3, t3=2))
    assert got == {"A": {T1: {0, 1}, T3: {0}}, "B": {T1: {2}, T3: {1}}}


def test_first_assignment_different_subscriptions() -> None:
    got = assign({"A": sub(T1, T2), "B": sub(T3), "C": sub(T2, T3)}, HETERO, topics(t1=3, t2=3, t3=2))
    assert got == {"A": {T1: {0, 1, 2}, T2: {0, 1}}, "B": {T3: {0}}, "C": {T2: {2}, T3: {1}}}


def test_first_assignment_more_members_than_partitions() -> None:
    got = assign({m: sub(T1, T3) for m in "ABC"}, HOMO, topics(t1=3, t3=2))
    assert got == {"A": {T1: {0}, T3: {0}}, "B": {T1: {1}, T3: {1}}, "C": {T1: {2}}}


def test_static_member_rejoining_gets_its_partitions_back() -> None:
    describer = topics(t1=5)
    before = assign({"A": sub(T1, instance_id="instanceA"), "C": sub(T1, instance_id="instanceC"),
                     "B": sub(T1)}, HOMO, describer)
    after = assign({"memberA1": sub(T1, instance_id="instanceA"), "C": sub(T1, instance_id="instanceC"),
                    "B": sub(T1)}, HOMO, describer)
    assert after["memberA1"] == before["A"] and after["B"] == before["B"] and after["C"] == before["C"]
    # Static members first, by instance id; then the others, by member id.
    assert before == {"A": {T1: {0, 1}}, "C": {T1: {2, 3}}, "B": {T1: {4}}}


def test_member_added_when_more_members_than_partitions() -> None:
    got = assign({"A": sub(T1, T2, t1=(0,), t2=(0,)), "B": sub(T1, T2, t1=(1,), t2=(1,)), "C": sub(T1, T2)},
                 HOMO, topics(t1=2, t2=2))
    assert got == {"A": {T1: {0}, T2: {0}}, "B": {T1: {1}, T2: {1}}, "C": {}}


def test_partition_added() -> None:
    got = assign({"A": sub(T1, T2, t1=(0, 1), t2=(0, 1)), "B": sub(T1, T2, t1=(2,), t2=(2,))},
                 HOMO, topics(t1=4, t2=4))
    assert got == {"A": {T1: {0, 1}, T2: {0, 1}}, "B": {T1: {2, 3}, T2: {2, 3}}}


def test_member_added() -> None:
    got = assign({"A": sub(T1, T2, t1=(0, 1), t2=(0, 1)), "B": sub(T1, T2, t1=(2,), t2=(2,)), "C": sub(T1, T2)},
                 HOMO, topics(t1=3, t2=3))
    assert got == {"A": {T1: {0}, T2: {0}}, "B": {T1: {1}, T2: {1}}, "C": {T1: {2}, T2: {2}}}


def test_member_and_partition_added() -> None:
    got = assign({"A": sub(T1, T2, t1=(0, 1), t2=(0, 1)), "B": sub(T1, T2, t1=(2,), t2=(2,)), "C": sub(T1)},
                 HETERO, topics(t1=4, t2=3))
    assert got == {"A": {T1: {0, 1}, T2: {0, 1}}, "B": {T1: {2}, T2: {2}}, "C": {T1: {3}}}


def test_member_removed() -> None:
    got = assign({"B": sub(T1, T2, t1=(2,), t2=(2,))}, HOMO, topics(t1=3, t2=3))
    assert got == {"B": {T1: {0, 1, 2}, T2: {0, 1, 2}}}


def test_subscriptions_removed() -> None:
    got = assign({"A": sub(T1, t1=(0, 1, 2), t2=(0,)), "B": sub(T1, T2, T3, t2=(1,)),
                  "C": sub(T2, t2=(2,), t3=(0, 1))}, HETERO, topics(t1=3, t2=3, t3=2))
    assert got == {"A": {T1: {0, 1}}, "B": {T1: {2}, T2: {0, 1}, T3: {0, 1}}, "C": {T2: {2}}}


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 10), st.integers(0, 20), st.integers(1, 3))
def test_co_partitioned_topics_get_the_same_partitions(num_members: int, partitions: int, num_topics: int) -> None:
    topic_ids = [uuid.UUID(int=100 + i) for i in range(num_topics)]
    describer = SubscribedTopicDescriber(TopicMetadata(t, str(t), partitions) for t in topic_ids)
    members = {f"m{i:02}": MemberSubscription(frozenset(topic_ids)) for i in range(num_members)}
    got = RangeAssignor().assign(GroupSpec(members, HOMO), describer)
    for assignment in got.values():
        ranges = [assignment.get(t, frozenset()) for t in topic_ids]
        assert all(r == ranges[0] for r in ranges)
        if ranges[0]:
            assert ranges[0] == frozenset(range(min(ranges[0]), max(ranges[0]) + 1))
    sizes = [len(a.get(topic_ids[0], ())) for a in got.values()]
    assert sum(sizes) == partitions and max(sizes) - min(sizes) <= 1
    assert got == RangeAssignor().assign(GroupSpec(members, HOMO), describer)
