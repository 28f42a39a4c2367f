"""The pieces together, as the coordinator wires them: heartbeats that write records and replay them. Whatever the
order of joins, leaves and heartbeats, no partition is ever held by two clients at once (it is given to a new
member only after its owner revoked it), and once everyone heartbeats the group settles: stable, every partition
owned once, balanced."""
from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from minikafka.broker.coordinator.group.assignor.assignor_spec import (
    Assignment,
    SubscribedTopicDescriber,
    TopicMetadata,
)
from minikafka.broker.coordinator.group.assignor.uniform_assignor import UniformAssignor
from minikafka.broker.coordinator.group.consumer import record_helpers as rh
from minikafka.broker.coordinator.group.consumer.consumer_group import (
    ConsumerGroup,
    ConsumerGroupState,
    subscription_type_of,
)
from minikafka.broker.coordinator.group.consumer.current_assignment_builder import CurrentAssignmentBuilder
from minikafka.broker.coordinator.group.consumer.replay import replay
from minikafka.broker.coordinator.group.consumer.target_assignment_builder import TargetAssignmentBuilder
from minikafka.protocol.coordinator_records.consumer_group_records import ConsumerGroupRecord

TOPICS = [TopicMetadata(uuid.UUID(int=i + 1), f"t{i}", n) for i, n in enumerate((4, 3, 5))]
DESCRIBER = SubscribedTopicDescriber(TOPICS)
GROUP = "g"


class Coordinator:
    """A minimal heartbeat handler over the sans-IO core: compute records, then replay them."""

    def __init__(self) -> None:
        self.groups: dict[str, ConsumerGroup] = {}
        self.log: list[ConsumerGroupRecord] = []

    def _write(self, records: list[ConsumerGroupRecord]) -> None:
        for record in records:
            self.log.append(record)
            replay(self.groups, record)

    def heartbeat(self, member_id: str, topics: frozenset[str] | None, owned: Assignment | None) -> Assignment:
        group = self.groups.get(GROUP) or ConsumerGroup(GROUP)
        member = group.get_or_maybe_create_member(member_id, True)
        updated = member if topics is None else member.replace(subscribed_topic_names=topics)
        records: list[ConsumerGroupRecord] = []
        subscription_changed = updated != member or member_id not in group.members
        group_epoch = group.group_epoch
        if subscription_changed:
            records.append(rh.member_subscription_record(GROUP, updated))
            group_epoch += 1
            records.append(rh.group_epoch_record(GROUP, group_epoch, 0))
        target_epoch = group.target_assignment_epoch
        target = group.target_assignment_of(member_id)
        if group_epoch > target_epoch:
            members_after = len(group.members) + (member_id not in group.members)
            subscription_type = subscription_type_of(group.compute_subscribed_regular_expressions(member, updated),
                                                     group.compute_subscribed_topic_names(member, updated),
                                                     members_after)
            result = TargetAssignmentBuilder.for_group(group, group_epoch, UniformAssignor(), DESCRIBER,
                                                       subscription_type).add_or_update_member(member_id,
                                                                                               updated).build()
            records += result.records
            target_epoch, target = group_epoch, result.target_assignment.get(member_id, {})
        reconciled = CurrentAssignmentBuilder(updated, target_epoch, target, group.current_partition_epoch,
                                              DESCRIBER, owned_topic_partitions=owned,
                                              has_subscription_changed=subscription_changed).build()
        if reconciled != member or member_id not in group.members:
            records.append(rh.current_assignment_record(GROUP, reconciled))
        self._write(records)
        return reconciled.assigned_partitions

    def leave(self, member_id: str) -> None:
        group = self.groups[GROUP]
        self._write(rh.member_removal_records(GROUP, member_id) + [
            rh.group_epoch_record(GROUP, group.group_epoch + 1, 0)])


def _owned_pairs(assignment: Assignment) -> set[tuple[uuid.UUID, int]]:
    return {(t, p) for t, ps in assignment.items() for p in ps}


ops = st.lists(st.tuples(st.sampled_from(["join", "leave", "heartbeat"]), st.integers(0, 4),
                         st.sets(st.sampled_from([t.name for t in TOPICS]), min_size=1)), max_size=40)


@settings(max_examples=120, deadline=None)
@given(ops)
def test_no_partition_is_held_twice_and_the_group_settles(operations: list) -> None:
    coordinator = Coordinator()
    clients: dict[str, Assignment] = {}

    def check_exclusive() -> None:
        seen: set[tuple[uuid.UUID, int]] = set()
        for assignment in clients.values():
            pairs = _owned_pairs(assignment)
            assert not pairs & seen
            seen |= pairs

    for op, index, topics in operations:
        member_id = f"member-{index}"
        if op == "join" and member_id not in clients:
            clients[member_id] = coordinator.heartbeat(member_id, frozenset(topics), {})
        elif op == "leave" and member_id in clients:
            coordinator.leave(member_id)
            del clients[member_id]
        elif op == "heartbeat" and member_id in clients:
            clients[member_id] = coordinator.heartbeat(member_id, None, clients[member_id])
        check_exclusive()
    for _ in range(8):
        for member_id in sorted(clients):
            clients[member_id] = coordinator.heartbeat(member_id, None, clients[member_id])
            check_exclusive()
    group = coordinator.groups.get(GROUP)
    if not clients:
        assert group is None or group.state is ConsumerGroupState.EMPTY
        return
    assert group is not None and group.state is ConsumerGroupState.STABLE
    subscribed = {t.topic_id for m in group.members.values() for t in TOPICS if t.name in m.subscribed_topic_names}
    owned = [pair for assignment in clients.values() for pair in _owned_pairs(assignment)]
    assert sorted(owned) == sorted((t.topic_id, p) for t in TOPICS if t.topic_id in subscribed
                                   for p in range(t.num_partitions))
    # A reload from the log gives the same group.
    reloaded: dict[str, ConsumerGroup] = {}
    for record in coordinator.log:
        replay(reloaded, record)
    assert reloaded[GROUP].members == group.members
    assert reloaded[GROUP].target_assignment == group.target_assignment


def test_a_member_joining_takes_partitions_only_once_they_are_revoked() -> None:
    coordinator = Coordinator()
    everything = frozenset(t.name for t in TOPICS)
    a = coordinator.heartbeat("a", everything, {})
    assert sum(map(len, a.values())) == 12
    b = coordinator.heartbeat("b", everything, {})
    assert b == {}  # all of b's target is still a's
    a = coordinator.heartbeat("a", None, a)  # a is asked to revoke half
    assert sum(map(len, a.values())) == 6
    b = coordinator.heartbeat("b", None, b)
    assert b == {}  # a has not confirmed the revocation yet
    a = coordinator.heartbeat("a", None, a)  # a no longer owns them: epoch advances
    b = coordinator.heartbeat("b", None, b)
    assert sum(map(len, b.values())) == 6 and not _owned_pairs(a) & _owned_pairs(b)
    group = coordinator.groups[GROUP]
    assert group.state is ConsumerGroupState.STABLE
    assert {m.member_epoch for m in group.members.values()} == {2}
