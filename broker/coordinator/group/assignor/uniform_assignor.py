"""Kafka's `uniform` assignor, the default: partitions spread as evenly as the subscriptions allow, moving as few as
it can from the current target assignment.

Homogeneous groups (every member subscribes to the same topics) use Kafka's UniformHomogeneousAssignmentBuilder:
each member keeps up to its quota of what it has (a quota of total // members, one more for the first members that
can still take an extra one) and the freed or new partitions fill the members under their quota. Heterogeneous
groups use Kafka's UniformHeterogeneousAssignmentBuilder: partitions of unsubscribed topics are dropped, unowned
partitions go to the least loaded subscriber, topic by topic, then partitions move from the most to the least
loaded subscribers of each topic until no subscriber has two more than another, for at most 16 rounds. Neither
reads racks, as in Kafka 4.1. Members are taken in the group spec's order and topics in Kafka's (java_order), so the
same input gives the same assignment as in Kafka.
"""
from __future__ import annotations

import uuid
from collections.abc import Iterable

from minikafka.broker.coordinator.group.assignor.assignor_spec import (
    Assignment,
    GroupAssignment,
    GroupSpec,
    PartitionAssignorError,
    SubscribedTopicDescriber,
    SubscriptionType,
)
from minikafka.broker.coordinator.group.assignor.java_order import java_uuid_order, topic_hash_order

NAME = "uniform"

# How many passes over the topics the heterogeneous balancing makes at most.
MAX_ITERATION_COUNT = 16


class UniformAssignor:
    """The `uniform` server assignor."""

    name = NAME

    def assign(self, group_spec: GroupSpec, describer: SubscribedTopicDescriber) -> GroupAssignment:
        """The group's new target assignment."""
        if not group_spec.members:
            return {}
        if group_spec.subscription_type is SubscriptionType.HOMOGENEOUS:
            return _HomogeneousBuilder(group_spec, describer).build()
        return _HeterogeneousBuilder(group_spec, describer).build()


def _num_partitions(describer: SubscribedTopicDescriber, topic_id: uuid.UUID) -> int:
    count = describer.num_partitions(topic_id)
    if count == -1:
        raise PartitionAssignorError(
            f"Members are subscribed to topic {topic_id} which doesn't exist in the topic metadata.")
    return count


class _HomogeneousBuilder:
    """Kafka's UniformHomogeneousAssignmentBuilder: every member subscribes to the same topics."""

    def __init__(self, group_spec: GroupSpec, describer: SubscribedTopicDescriber) -> None:
        self.spec = group_spec
        self.describer = describer
        self.member_ids = group_spec.member_ids()
        self.subscribed = group_spec.members[self.member_ids[0]].subscribed_topic_ids
        self.unfilled: list[tuple[str, int]] = []
        self.unassigned: list[tuple[uuid.UUID, int]] = []
        self.target: dict[str, Assignment] = {}

    def build(self) -> GroupAssignment:
        if not self.subscribed:
            return {}
        total = 0
        for topic_id in topic_hash_order(self.subscribed):
            count = _num_partitions(self.describer, topic_id)
            self.unassigned.extend((topic_id, p) for p in range(count)
                                   if not self.spec.is_partition_assigned(topic_id, p))
            total += count
        members = len(self.member_ids)
        self._revoke(total // members, total % members)
        self._assign_remaining()
        return self.target

    def _revoke(self, minimum_quota: int, extra: int) -> None:
        """Keep what each member may keep of its current assignment; what is over its quota, or of a topic it no
        longer subscribes to, is freed."""
        member_count = len(self.member_ids)
        for index, member_id in enumerate(self.member_ids):
            old = self.spec.members[member_id].assignment
            new: dict[uuid.UUID, frozenset[int]] | None = None
            quota = minimum_quota
            has_extra = extra > 0
            if has_extra:
                quota += 1
            for topic_id in old:
                partitions = old[topic_id]
                if topic_id not in self.subscribed:
                    new = dict(old) if new is None else new
                    del new[topic_id]
                elif len(partitions) <= quota:
                    quota -= len(partitions)
                else:
                    kept = sorted(partitions)[:quota]
                    self.unassigned.extend((topic_id, p) for p in sorted(partitions)[quota:])
                    quota = 0
                    new = dict(old) if new is None else new
                    if kept:
                        new[topic_id] = frozenset(kept)
                    else:
                        del new[topic_id]
            # A member that cannot fill its extra slot from what it had leaves it to a later member, as long as
            # enough members remain to take all the extra partitions.
            if quota > 0 and has_extra and member_count - index > extra:
                quota -= 1
                has_extra = False
            if quota > 0:
                self.unfilled.append((member_id, quota))
            if has_extra:
                extra -= 1
            self.target[member_id] = old if new is None else new

    def _assign_remaining(self) -> None:
        """Hand the freed and new partitions, in order, to the members under their quota, in order."""
        next_index = 0
        for member_id, quota in self.unfilled:
            given = self.unassigned[next_index:next_index + quota]
            if not given:
                continue
            next_index += len(given)
            new = {t: set(ps) for t, ps in self.target[member_id].items()}
            for topic_id, partition in given:
                new.setdefault(topic_id, set()).add(partition)
            self.target[member_id] = {t: frozenset(ps) for t, ps in new.items()}
        if next_index < len(self.unassigned):
            raise PartitionAssignorError("Partitions were left unassigned")


class _HeterogeneousBuilder:
    """Kafka's UniformHeterogeneousAssignmentBuilder: members subscribe to different topics."""

    def __init__(self, group_spec: GroupSpec, describer: SubscribedTopicDescriber) -> None:
        self.spec = group_spec
        self.describer = describer
        self.member_ids = group_spec.member_ids()
        self.subscribers: dict[uuid.UUID, list[int]] = {}
        self.partition_counts: dict[uuid.UUID, int] = {}
        for index, member_id in enumerate(self.member_ids):
            for topic_id in group_spec.members[member_id].subscribed_topic_ids:
                self.partition_counts[topic_id] = _num_partitions(describer, topic_id)
                self.subscribers.setdefault(topic_id, []).append(index)
        self.sizes = [0] * len(self.member_ids)
        self.owners = {t: [-1] * n for t, n in self.partition_counts.items()}
        self.target: dict[str, Assignment] = {}
        self.changed: dict[str, dict[uuid.UUID, set[int]]] = {}

    def build(self) -> GroupAssignment:
        if not self.partition_counts:
            return {}
        self._revoke()
        unassigned = {t: [p for p, owner in enumerate(owners) if owner == -1] for t, owners in self.owners.items()}
        self._assign_remaining({t: ps for t, ps in unassigned.items() if ps})
        self._balance()
        return {m: {t: frozenset(ps) for t, ps in self.changed[m].items()} if m in self.changed else a
                for m, a in self.target.items()}

    def _topic_order(self, topic_id: uuid.UUID) -> tuple[float, int, tuple[int, int]]:
        """Topics with the most partitions per subscriber first, then with fewer subscribers, then by id."""
        subscribers = len(self.subscribers[topic_id])
        return -self.partition_counts[topic_id] / subscribers, subscribers, java_uuid_order(topic_id)

    def _sorted_topics(self, topic_ids: Iterable[uuid.UUID]) -> list[uuid.UUID]:
        return sorted(topic_ids, key=self._topic_order)

    def _revoke(self) -> None:
        """Drop the partitions of topics a member no longer subscribes to (or that no longer exist); record who
        owns the rest."""
        for index, member_id in enumerate(self.member_ids):
            member = self.spec.members[member_id]
            old = member.assignment
            new: dict[uuid.UUID, frozenset[int]] | None = None
            for topic_id, partitions in old.items():
                if topic_id in member.subscribed_topic_ids:
                    owners = self.owners[topic_id]
                    kept = frozenset(p for p in partitions if p < len(owners))
                    for partition in kept:
                        owners[partition] = index
                    self.sizes[index] += len(kept)
                    if kept != partitions:
                        new = dict(old) if new is None else new
                        new[topic_id] = kept
                else:
                    new = dict(old) if new is None else new
                    del new[topic_id]
            if new is not None:
                new = {t: ps for t, ps in new.items() if ps}
            self.target[member_id] = old if new is None else new

    def _assign_remaining(self, unassigned: dict[uuid.UUID, list[int]]) -> None:
        """Each unowned partition goes to the least loaded subscriber of its topic, the members sharing the least
        load taken in turn."""
        balancer = _MemberAssignmentBalancer(self.sizes)
        for topic_id in self._sorted_topics(unassigned):
            balancer.initialize(self.subscribers[topic_id])
            for partition in unassigned[topic_id]:
                self._assign(topic_id, partition, balancer.next_least_loaded_member())

    def _balance(self) -> None:
        topic_ids = [t for t in self.partition_counts if len(self.subscribers[t]) >= 2]
        if not topic_ids:
            return
        sorted_topics = self._sorted_topics(topic_ids)
        balancer = _MemberAssignmentBalancer(self.sizes)
        last_rebalanced = -1
        for _ in range(MAX_ITERATION_COUNT):
            for topic_index, topic_id in enumerate(sorted_topics):
                # A whole pass over the topics without a move since the last one that moved: balanced.
                if topic_index == last_rebalanced:
                    return
                if self._balance_topic(topic_id, balancer) > 0 or last_rebalanced == -1:
                    last_rebalanced = topic_index

    def _balance_topic(self, topic_id: uuid.UUID, balancer: _MemberAssignmentBalancer) -> int:
        """Move the topic's partitions from its most to its least loaded subscribers until none has two more than
        another (or the most loaded have none of the topic's partitions left to give); how many moved."""
        moved = 0
        if balancer.initialize(self.subscribers[topic_id]) <= 1:
            return moved
        owners = self.owners[topic_id]
        partitions = sorted(range(self.partition_counts[topic_id]), key=lambda p: (owners[p], p))
        start: dict[int, int] = {}
        end: dict[int, int] = {}
        for i, partition in enumerate(partitions):
            start.setdefault(owners[partition], i)
            end[owners[partition]] = i + 1
        while not balancer.is_balanced():
            while True:
                most_loaded = balancer.next_most_loaded_member()
                if most_loaded == -1:
                    break
                if most_loaded not in end or end[most_loaded] - start[most_loaded] <= 0:
                    balancer.exclude_most_loaded_member()
                    continue
                break
            if most_loaded == -1:
                break
            partition = partitions[end[most_loaded] - 1]
            end[most_loaded] -= 1
            least_loaded = balancer.next_least_loaded_member()
            if balancer.is_balanced():
                break
            self._assign(topic_id, partition, least_loaded)
            moved += 1
        return moved

    def _assign(self, topic_id: uuid.UUID, partition: int, member_index: int) -> None:
        old_owner = self.owners[topic_id][partition]
        if old_owner != -1:
            partitions = self._mutable(old_owner)
            partitions[topic_id].discard(partition)
            if not partitions[topic_id]:
                del partitions[topic_id]
            self.sizes[old_owner] -= 1
        self._mutable(member_index).setdefault(topic_id, set()).add(partition)
        self.owners[topic_id][partition] = member_index
        self.sizes[member_index] += 1

    def _mutable(self, member_index: int) -> dict[uuid.UUID, set[int]]:
        """The member's assignment as it changes; members left alone keep the mapping they came with."""
        member_id = self.member_ids[member_index]
        if member_id not in self.changed:
            self.changed[member_id] = {t: set(ps) for t, ps in self.target[member_id].items()}
        return self.changed[member_id]


class _MemberAssignmentBalancer:
    """Kafka's MemberAssignmentBalancer: walks a topic's subscribers from the least and the most loaded ends, the
    members of equal load taken round robin, as partitions move between them."""

    def __init__(self, sizes: list[int]) -> None:
        self.sizes = sizes
        self.sorted_members: list[int] = []
        self.least_loaded_range_end = 0
        self.least_loaded_range_count = -1
        self.next_least_loaded = 0
        self.most_loaded_range_start = 0
        self.most_loaded_range_end = 0
        self.most_loaded_range_count = 1
        self.next_most_loaded = -1

    def initialize(self, members: list[int]) -> int:
        """Start over with these members; the spread between the most and the least loaded."""
        self.sorted_members = sorted(members, key=lambda m: (self.sizes[m], m))
        first, last = self.sorted_members[0], self.sorted_members[-1]
        self.least_loaded_range_end = 0
        self.least_loaded_range_count = self.sizes[first] - 1
        self.next_least_loaded = 0
        self.most_loaded_range_start = len(self.sorted_members)
        self.most_loaded_range_end = len(self.sorted_members)
        self.most_loaded_range_count = self.sizes[last] + 1
        self.next_most_loaded = len(self.sorted_members) - 1
        return self.sizes[last] - self.sizes[first]

    def next_least_loaded_member(self) -> int:
        members, sizes = self.sorted_members, self.sizes
        if self.next_least_loaded >= self.least_loaded_range_end:
            self.least_loaded_range_count += 1
            while (self.least_loaded_range_end < len(members)
                   and sizes[members[self.least_loaded_range_end]] == self.least_loaded_range_count):
                self.least_loaded_range_end += 1
            self.next_least_loaded = 0
        member = members[self.next_least_loaded]
        self.next_least_loaded += 1
        return member

    def next_most_loaded_member(self) -> int:
        members, sizes = self.sorted_members, self.sizes
        if self.next_most_loaded < self.most_loaded_range_start:
            if self.most_loaded_range_end <= self.most_loaded_range_start and self.most_loaded_range_start > 0:
                self.most_loaded_range_count = sizes[members[self.most_loaded_range_start - 1]]
            else:
                self.most_loaded_range_count -= 1
            while (self.most_loaded_range_start > 0
                   and sizes[members[self.most_loaded_range_start - 1]] == self.most_loaded_range_count):
                self.most_loaded_range_start -= 1
            self.next_most_loaded = self.most_loaded_range_end - 1
        if self.next_most_loaded < 0:
            return -1
        member = members[self.next_most_loaded]
        self.next_most_loaded -= 1
        return member

    def exclude_most_loaded_member(self) -> None:
        """Drop the member just returned by next_most_loaded_member from the most loaded range: it has nothing of
        the topic to give."""
        i, last = self.next_most_loaded + 1, self.most_loaded_range_end - 1
        self.sorted_members[i], self.sorted_members[last] = self.sorted_members[last], self.sorted_members[i]
        self.most_loaded_range_end -= 1

    def is_balanced(self) -> bool:
        return self.most_loaded_range_count - self.least_loaded_range_count <= 1
