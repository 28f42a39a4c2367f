"""The target assignment builder hands the assignor each member's subscription (names and resolved regexes, as
topic ids) and current target, applies the heartbeat's member change (a static member taking over its predecessor's
target), and writes records only for members whose target changed, then the assignment epoch (Kafka's
TargetAssignmentBuilderTest)."""
from __future__ import annotations

import uuid

from minikafka.broker.coordinator.group.assignor.assignor_spec import (
    Assignment,
    GroupAssignment,
    GroupSpec,
    SubscribedTopicDescriber,
    SubscriptionType,
    TopicMetadata,
)
from minikafka.broker.coordinator.group.assignor.uniform_assignor import UniformAssignor
from minikafka.broker.coordinator.group.consumer import record_helpers as rh
from minikafka.broker.coordinator.group.consumer.consumer_group_member import ConsumerGroupMember
from minikafka.broker.coordinator.group.consumer.resolved_regular_expression import ResolvedRegularExpression
from minikafka.broker.coordinator.group.consumer.target_assignment_builder import TargetAssignmentBuilder

FOO, BAR = uuid.UUID(int=0xF00), uuid.UUID(int=0xBA4)
DESCRIBER = SubscribedTopicDescriber([TopicMetadata(FOO, "foo", 6), TopicMetadata(BAR, "bar", 6)])


def a(foo: tuple[int, ...] = (), bar: tuple[int, ...] = ()) -> dict[uuid.UUID, frozenset[int]]:
    return {t: frozenset(ps) for t, ps in ((FOO, foo), (BAR, bar)) if ps}


class PreparedAssignor:
    """An assignor returning prepared assignments and keeping the spec it was given."""

    name = "prepared"

    def __init__(self, prepared: GroupAssignment) -> None:
        self.prepared = prepared
        self.spec: GroupSpec | None = None

    def assign(self, group_spec: GroupSpec, describer: SubscribedTopicDescriber) -> GroupAssignment:
        self.spec = group_spec
        return self.prepared


def members(*specs: tuple[str, tuple[str, ...]]) -> dict[str, ConsumerGroupMember]:
    return {m: ConsumerGroupMember(member_id=m, subscribed_topic_names=frozenset(topics)) for m, topics in specs}


def builder(assignor: object, group_members: dict, target: dict[str, Assignment], **extra: object
            ) -> TargetAssignmentBuilder:
    return TargetAssignmentBuilder("my-group", 20, assignor, DESCRIBER, group_members,  # type: ignore[arg-type]
                                   target_assignment=target, **extra)  # type: ignore[arg-type]


def test_empty_group_writes_only_the_epoch() -> None:
    result = builder(PreparedAssignor({}), {}, {}).build()
    assert result.records == [rh.target_assignment_epoch_record("my-group", 20)]
    assert result.target_assignment == {}


def test_unchanged_assignment_writes_only_the_epoch() -> None:
    group = members(("member-1", ("foo", "bar", "zar")), ("member-2", ("foo", "bar", "zar")))
    target = {"member-1": a((1, 2, 3), (1, 2, 3)), "member-2": a((4, 5, 6), (4, 5, 6))}
    assignor = PreparedAssignor(dict(target))
    result = builder(assignor, group, target).build()
    assert result.records == [rh.target_assignment_epoch_record("my-group", 20)]
    assert result.target_assignment == target
    # Topics that do not exist ("zar") are not in the subscription the assignor sees.
    assert assignor.spec is not None
    assert assignor.spec.members["member-1"].subscribed_topic_ids == {FOO, BAR}
    assert assignor.spec.members["member-2"].assignment == target["member-2"]


def test_partial_assignment_update_writes_changed_members() -> None:
    group = members(("member-1", ("foo", "bar", "zar")), ("member-2", ("foo", "bar", "zar")),
                    ("member-3", ("bar", "zar")))
    target = {"member-1": a((1, 2), (1, 2)), "member-2": a((3, 4), (3, 4)), "member-3": a((5,), (5,))}
    new = {"member-1": a((1, 2), (1, 2)), "member-2": a((3, 4, 5), (3, 4, 5)), "member-3": a((0,), (0,))}
    result = builder(PreparedAssignor(new), group, target).build()
    assert sorted(result.records[:-1], key=lambda r: r.key.member_id) == [  # type: ignore[union-attr]
        rh.target_assignment_record("my-group", "member-2", new["member-2"]),
        rh.target_assignment_record("my-group", "member-3", new["member-3"])]
    assert result.records[-1] == rh.target_assignment_epoch_record("my-group", 20)


def test_new_updated_and_deleted_members() -> None:
    group = members(("member-1", ("foo",)), ("member-2", ("foo",)))
    target = {"member-1": a((0, 1, 2)), "member-2": a((3, 4, 5))}
    new = {"member-1": a((0, 1)), "member-3": a((2, 3, 4, 5), (0, 1, 2, 3, 4, 5))}
    assignor = PreparedAssignor(new)
    b = builder(assignor, group, target)
    b.add_or_update_member("member-1", group["member-1"].replace(subscribed_topic_names=frozenset({"foo"}),
                                                                  rack_id="rack-1"))
    b.add_or_update_member("member-3", ConsumerGroupMember(member_id="member-3",
                                                           subscribed_topic_names=frozenset({"foo", "bar"})))
    b.remove_member("member-2")
    result = b.build()
    assert assignor.spec is not None and set(assignor.spec.members) == {"member-1", "member-3"}
    assert assignor.spec.members["member-1"].rack_id == "rack-1"
    assert assignor.spec.members["member-3"].assignment == {}
    assert {r.key.member_id for r in result.records[:-1]} == {"member-1", "member-3"}  # type: ignore[union-attr]


def test_static_member_replacing_another_starts_from_its_target() -> None:
    group = {"member-1": ConsumerGroupMember(member_id="member-1", instance_id="instance-1",
                                             subscribed_topic_names=frozenset({"foo"}))}
    target = {"member-1": a((0, 1, 2, 3, 4, 5))}
    assignor = PreparedAssignor({"member-1-bis": a((0, 1, 2, 3, 4, 5))})
    b = builder(assignor, group, target, static_members={"instance-1": "member-1"})
    b.remove_member("member-1")
    b.add_or_update_member("member-1-bis", ConsumerGroupMember(member_id="member-1-bis", instance_id="instance-1",
                                                               subscribed_topic_names=frozenset({"foo"})))
    result = b.build()
    assert assignor.spec is not None and assignor.spec.members["member-1-bis"].assignment == target["member-1"]
    assert result.records[0] == rh.target_assignment_record("my-group", "member-1-bis", target["member-1"])


def test_regular_expressions_add_their_topics() -> None:
    group = {"member-1": ConsumerGroupMember(member_id="member-1", subscribed_topic_names=frozenset({"bar"}),
                                             subscribed_topic_regex="foo*"),
             "member-2": ConsumerGroupMember(member_id="member-2", subscribed_topic_regex="ba.*")}
    assignor = PreparedAssignor({})
    builder(assignor, group, {}, resolved_regular_expressions={
        "foo*": ResolvedRegularExpression(frozenset({"foo"}), 1, 0)}).build()
    assert assignor.spec is not None
    assert assignor.spec.members["member-1"].subscribed_topic_ids == {FOO, BAR}
    # Not resolved yet: nothing.
    assert assignor.spec.members["member-2"].subscribed_topic_ids == frozenset()


def test_with_the_uniform_assignor_a_joining_member_takes_only_what_it_needs() -> None:
    group = members(("m1", ("foo", "bar")), ("m2", ("foo", "bar")))
    first = builder(UniformAssignor(), group, {}).build().target_assignment
    b = builder(UniformAssignor(), group, first, inverted_target_assignment={
        t: {p: m for m, asg in first.items() for p in asg.get(t, ())} for t in (FOO, BAR)},
        subscription_type=SubscriptionType.HOMOGENEOUS)
    b.add_or_update_member("m3", ConsumerGroupMember(member_id="m3", subscribed_topic_names=frozenset({"foo", "bar"})))
    after = b.build().target_assignment
    assert sorted(sum(map(len, x.values())) for x in after.values()) == [4, 4, 4]
    moved = sum(len(ps - after[m].get(t, frozenset())) for m in first for t, ps in first[m].items())
    assert moved == 4
