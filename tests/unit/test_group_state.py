"""The classic group model: Kafka's state transitions, protocol selection, leadership and static members."""
from __future__ import annotations

import struct

import pytest

from minikafka.broker.coordinator.group.group import (
    Completion,
    Group,
    GroupState,
    JoinResult,
    Member,
    SyncResult,
    parse_subscription_topics,
)
from minikafka.protocol.errors import ErrorCode, KafkaError

S = GroupState


def member(member_id: str, protocols=(("range", b"r"), ("roundrobin", b"rr")), instance: str | None = None,
           protocol_type: str = "consumer") -> Member:
    return Member(member_id, instance, "client", "/127.0.0.1", 30000, 10000, protocol_type, list(protocols))


@pytest.mark.parametrize("source,target", [
    (S.EMPTY, S.PREPARING_REBALANCE), (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE),
    (S.PREPARING_REBALANCE, S.EMPTY), (S.COMPLETING_REBALANCE, S.STABLE),
    (S.COMPLETING_REBALANCE, S.PREPARING_REBALANCE), (S.STABLE, S.PREPARING_REBALANCE),
    (S.EMPTY, S.DEAD), (S.STABLE, S.DEAD), (S.DEAD, S.DEAD),
])
def test_valid_transitions(source, target):
    group = Group("g", 0, state=source)
    group.transition_to(target, 5)
    assert group.state is target and group.previous_state is source and group.state_timestamp == 5


@pytest.mark.parametrize("source,target", [
    (S.EMPTY, S.STABLE), (S.EMPTY, S.COMPLETING_REBALANCE), (S.STABLE, S.COMPLETING_REBALANCE),
    (S.PREPARING_REBALANCE, S.STABLE), (S.STABLE, S.EMPTY), (S.DEAD, S.EMPTY), (S.COMPLETING_REBALANCE, S.EMPTY),
])
def test_invalid_transitions_are_refused(source, target):
    group = Group("g", 0, state=source)
    with pytest.raises(ValueError):
        group.transition_to(target, 5)
    assert group.state is source


def test_first_member_leads_and_leadership_moves_on_removal():
    group = Group("g", 0)
    group.add(member("a"))
    group.add(member("b"))
    assert group.leader_id == "a" and group.protocol_type == "consumer"
    group.remove("a")
    assert group.leader_id == "b"
    group.remove("b")
    assert group.leader_id is None


def test_protocol_selected_by_votes_among_common_protocols():
    group = Group("g", 0)
    group.add(member("a", [("range", b""), ("sticky", b"")]))
    group.add(member("b", [("sticky", b""), ("range", b"")]))
    group.add(member("c", [("sticky", b""), ("roundrobin", b""), ("range", b"")]))
    assert group.candidate_protocols() == {"range", "sticky"}
    assert group.select_protocol() == "sticky"


def test_supports_protocols_needs_a_common_protocol_and_type():
    group = Group("g", 0)
    assert not group.supports_protocols("consumer", set())          # empty protocol list
    assert not group.supports_protocols("", {"range"})              # empty protocol type
    group.add(member("a", [("range", b"")]))
    group.transition_to(S.PREPARING_REBALANCE, 1)
    assert group.supports_protocols("consumer", {"range", "x"})
    assert not group.supports_protocols("consumer", {"roundrobin"})
    assert not group.supports_protocols("connect", {"range"})


def test_join_bookkeeping_and_next_generation():
    group = Group("g", 0)
    join_a, join_b = Completion(), Completion()
    group.add(member("a"), join_a)
    group.add(member("b"), join_b)
    group.transition_to(S.PREPARING_REBALANCE, 1)
    assert group.has_all_members_joined()
    group.add_pending_member("p")
    assert not group.has_all_members_joined()
    group.remove("p")
    group.init_next_generation(2)
    assert group.state is S.COMPLETING_REBALANCE and group.generation_id == 1 and group.protocol_name == "range"
    assert group.current_member_metadata() == [("a", None, b"r"), ("b", None, b"r")]
    assert group.complete_join(group.members["a"], JoinResult(ErrorCode.NONE, member_id="a"))
    assert join_a.done and join_a.result.member_id == "a"
    assert not group.complete_join(group.members["a"], JoinResult(ErrorCode.NONE))
    assert group.num_awaiting_join == 1


def test_empty_generation_clears_protocol():
    group = Group("g", 0)
    group.add(member("a"))
    group.transition_to(S.PREPARING_REBALANCE, 1)
    group.remove("a")
    group.init_next_generation(2)
    assert group.state is S.EMPTY and group.protocol_name is None and group.generation_id == 1


def test_removing_a_parked_member_releases_its_requests():
    group = Group("g", 0)
    join = Completion()
    group.add(member("a"), join)
    sync = Completion()
    group.members["a"].awaiting_sync = sync
    group.remove("a")
    assert join.result.error == ErrorCode.UNKNOWN_MEMBER_ID and sync.result.error == ErrorCode.UNKNOWN_MEMBER_ID
    assert group.num_awaiting_join == 0


def test_static_member_replacement_fences_the_old_member_id():
    group = Group("g", 0)
    old_join = Completion()
    group.add(member("old", instance="i-1"), old_join)
    group.members["old"].assignment = b"asg"
    new = group.replace_static_member("i-1", "old", "new")
    assert old_join.result.error == ErrorCode.FENCED_INSTANCE_ID
    assert new.assignment == b"asg" and group.leader_id == "new" and group.static_member_id("i-1") == "new"
    with pytest.raises(KafkaError) as fenced:
        group.validate_member("old", "i-1")
    assert fenced.value.code == ErrorCode.FENCED_INSTANCE_ID
    with pytest.raises(KafkaError) as unknown:
        group.validate_member("new", "i-2")
    assert unknown.value.code == ErrorCode.UNKNOWN_MEMBER_ID
    group.validate_member("new", "i-1")


def test_new_leader_elected_among_rejoined_members():
    group = Group("g", 0)
    group.add(member("a"))
    group.add(member("b"), Completion())
    assert group.maybe_elect_new_joined_leader() and group.leader_id == "b"
    lonely = Group("h", 0)
    lonely.add(member("a"))
    assert not lonely.maybe_elect_new_joined_leader()


def test_heartbeat_satisfaction():
    m = member("a")
    assert not m.has_satisfied_heartbeat()
    m.awaiting_sync = Completion()
    assert m.has_satisfied_heartbeat()
    m.is_new = True
    assert not m.has_satisfied_heartbeat()


def test_completion_completes_once():
    done: Completion[SyncResult] = Completion()
    assert done.complete(SyncResult(ErrorCode.NONE, b"x"))
    assert not done.complete(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
    assert done.result.assignment == b"x"


def _subscription(topics: list[str]) -> bytes:
    body = struct.pack(">hi", 1, len(topics))
    for t in topics:
        body += struct.pack(">h", len(t)) + t.encode()
    return body + struct.pack(">i", -1)  # user data (null) and later-version fields follow the topics


def test_subscribed_topics_come_from_consumer_subscriptions():
    group = Group("g", 0)
    group.add(member("a", [("range", _subscription(["t1", "t2"]))]))
    group.add(member("b", [("range", _subscription(["t3"]))]))
    group.transition_to(S.PREPARING_REBALANCE, 1)
    group.init_next_generation(2)
    assert group.subscribed_topics() == {"t1", "t2", "t3"}
    assert group.is_subscribed_to("t3") and not group.is_subscribed_to("other")


@pytest.mark.parametrize("data", [b"", b"\x00\x01\x00\x00\x00\x05", b"\x00\x01\x00\x00\x00\x01\x00\x09ab",
                                  b"\x00\x01\x7f\xff\xff\xff"])
def test_malformed_subscriptions_raise_value_error(data):
    with pytest.raises(ValueError):
        parse_subscription_topics(data)
