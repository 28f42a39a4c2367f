"""The share groups' server-side assignor `simple` (Kafka 4.1's SimpleAssignor, KIP-932).

Share partitions are not exclusive: several members may fetch from one. Kafka 4.1 shares a partition only when the
members outnumber the partitions: each partition gets `desired sharing` = ceil(members / partitions) members, and
the members split the partitions x sharing evenly (the first members of the order get the rounding's extra one).
It is sticky: a member keeps what its current target gives it, less partitions no longer assignable (topics it left,
partitions not yet initialized), less what overfills it or overshares a partition; the free places are then filled
partition by partition, cycling through the members that still lack partitions.

A group whose members all subscribe to the same topics is assigned over all their partitions at once (homogeneous);
otherwise each topic on its own among its subscribers (heterogeneous). Members, topics and partitions are walked in
the order of Kafka's Java hash maps and sets (java_order), so a group gets the assignment Kafka 4.1 gives it.
"""
from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar

from minikafka.broker.coordinator.group.assignor.assignor_spec import (
    Assignment,
    GroupAssignment,
    GroupSpec,
    PartitionAssignorError,
    SubscribedTopicDescriber,
    SubscriptionType,
)
from minikafka.broker.coordinator.group.assignor.java_order import (
    hash_map_capacity,
    java_uuid_hash,
    topic_hash_order,
)

SIMPLE_ASSIGNOR_NAME = "simple"

TopicIdPartition = tuple[uuid.UUID, int]
T = TypeVar("T")


def _presized_capacity(expected: int) -> int:
    """The table size of Java's HashMap.newHashMap(expected) / HashSet.newHashSet(expected)."""
    wanted = max(1, math.ceil(expected / 0.75))
    capacity = 1
    while capacity < wanted:
        capacity *= 2
    return capacity


def _tp_hash(tp: TopicIdPartition) -> int:
    """The hashCode of Kafka's TopicIdPartition record (topic id, partition)."""
    return (31 * java_uuid_hash(tp[0]) + tp[1]) & 0xFFFFFFFF


def _ordered(keys: Iterable[T], hash_code: Callable[[T], int], capacity: int) -> list[T]:
    """`keys` (in insertion order) as a Java hash table of `capacity` buckets iterates them: by bucket, then by
    insertion within a bucket."""
    insertion = {key: i for i, key in enumerate(keys)}

    def bucket(key: T) -> int:
        h = hash_code(key)
        return (h ^ (h >> 16)) & (capacity - 1)
    return sorted(insertion, key=lambda k: (bucket(k), insertion[k]))


def _int_order(values: Iterable[int], capacity: int | None = None) -> list[int]:
    """A Java HashSet<Integer>'s iteration order."""
    values = list(values)
    return _ordered(sorted(values), lambda v: v & 0xFFFFFFFF, capacity or hash_map_capacity(len(values)))


def _desired_counts(sharing: int, num_partitions: int, num_members: int) -> list[int]:
    """How many partitions each of `num_members` members should have, the first ones taking the rounding's extra."""
    precise = sharing * num_partitions / num_members
    return [math.ceil(precise * (i + 1)) - math.ceil(precise * i) for i in range(num_members)]


def _copy(assignment: Assignment) -> dict[uuid.UUID, set[int]]:
    return {topic_id: set(partitions) for topic_id, partitions in assignment.items()}


def _target_partitions(group_spec: GroupSpec, topic_id: uuid.UUID, describer: SubscribedTopicDescriber,
                       assignable: Callable[[uuid.UUID, int], bool]) -> list[TopicIdPartition]:
    num_partitions = describer.num_partitions(topic_id)
    if num_partitions == -1:
        raise PartitionAssignorError(f"Members are subscribed to topic {topic_id} which doesn't exist in the topic "
                                     "metadata.")
    return [(topic_id, p) for p in range(num_partitions) if assignable(topic_id, p)]


class SimpleAssignor:
    """Kafka's `simple` share group assignor. `assignable(topic_id, partition)` says whether a partition may be
    assigned (Kafka's GroupSpec.isPartitionAssignable: its share state is initialized); by default all are."""

    name = SIMPLE_ASSIGNOR_NAME

    def __init__(self, assignable: Callable[[uuid.UUID, int], bool] = lambda _t, _p: True) -> None:
        self.assignable = assignable

    def assign(self, group_spec: GroupSpec, describer: SubscribedTopicDescriber) -> GroupAssignment:
        if not group_spec.members:
            return {}
        if group_spec.subscription_type is SubscriptionType.HOMOGENEOUS:
            return self._homogeneous(group_spec, describer)
        return self._heterogeneous(group_spec, describer)

    # ---- every member on the same topics ----------------------------------------------------------------------

    def _homogeneous(self, group_spec: GroupSpec, describer: SubscribedTopicDescriber) -> GroupAssignment:
        member_ids = group_spec.member_ids()
        first = group_spec.members[member_ids[0]]
        topic_ids = first.subscribed_topic_ids
        if not topic_ids:
            return {}
        n = len(member_ids)
        targets: list[TopicIdPartition] = []
        for topic_id in topic_hash_order(topic_ids):
            targets += _target_partitions(group_spec, topic_id, describer, self.assignable)
        sharing = 0 if not targets else (n + len(targets) - 1) // len(targets)
        desired = _desired_counts(sharing, len(targets), n)
        old = [group_spec.members[m].assignment for m in member_ids]
        new: dict[int, dict[uuid.UUID, set[int]]] = {}
        by_partition: dict[TopicIdPartition, list[int]] = {}
        by_member: dict[int, list[TopicIdPartition]] = {}
        unfilled: set[int] = set()
        overfilled: set[int] = set()

        # Keep what is still assignable, noting who has too few or too many.
        for index in range(n):
            count = 0
            for topic_id, partitions in old[index].items():
                if topic_id in topic_ids:
                    for partition in _int_order(partitions):
                        tp = (topic_id, partition)
                        count += 1
                        by_partition.setdefault(tp, []).append(index)
                        by_member.setdefault(index, []).append(tp)
                        if count >= desired[index] and index not in new:
                            new[index] = _copy(old[index])
                else:
                    new.setdefault(index, _copy(old[index])).pop(topic_id, None)
            if count < desired[index]:
                unfilled.add(index)
            elif count > desired[index]:
                overfilled.add(index)

        # Take the excess from overfilled members.
        for index in _int_order(overfilled):
            kept = by_member[index]
            for tp in _ordered(list(kept), _tp_hash, hash_map_capacity(len(kept))):
                if len(kept) <= desired[index]:
                    break
                new[index][tp[0]].discard(tp[1])
                by_partition[tp].remove(index)
                kept.remove(tp)

        # Take overshared partitions from members beyond the desired sharing.
        capacity = _presized_capacity(len(targets))
        for tp in _ordered(list(by_partition), _tp_hash, capacity):
            self._unshare(tp, by_partition[tp], sharing, old, new, by_member, unfilled)

        for tp in targets:
            by_partition.setdefault(tp, [])
        self._fill(_ordered(list(by_partition), _tp_hash, max(capacity, hash_map_capacity(len(by_partition)))),
                   by_partition, sharing, desired, unfilled, old, new, by_member)
        return {member_ids[i]: frozen(new[i]) if i in new else old[i] for i in range(n)}

    # ---- members on different topics ------------------------------------------------------------------------

    def _heterogeneous(self, group_spec: GroupSpec, describer: SubscribedTopicDescriber) -> GroupAssignment:
        member_ids = group_spec.member_ids()
        n = len(member_ids)
        topic_ids: set[uuid.UUID] = set()
        for member_id in member_ids:
            topic_ids |= group_spec.members[member_id].subscribed_topic_ids
        if not topic_ids:
            return {}
        subscribers: dict[uuid.UUID, list[int]] = {}
        for index, member_id in enumerate(member_ids):
            for topic_id in group_spec.members[member_id].subscribed_topic_ids:
                subscribers.setdefault(topic_id, []).append(index)
        targets = {topic_id: _target_partitions(group_spec, topic_id, describer, self.assignable)
                   for topic_id in topic_ids}
        old = [group_spec.members[m].assignment for m in member_ids]
        new: dict[int, dict[uuid.UUID, set[int]]] = {}
        for topic_id in topic_hash_order(topic_ids, hash_map_capacity(len(topic_ids))):
            self._assign_topic(topic_id, [p for _, p in targets[topic_id]], subscribers[topic_id], n, old, new)
        return {member_ids[i]: frozen(new[i]) if i in new else old[i] for i in range(n)}

    def _assign_topic(self, topic_id: uuid.UUID, partitions: list[int], members: list[int], n: int,
                      old: list[Assignment], new: dict[int, dict[uuid.UUID, set[int]]]) -> None:
        sharing = 0 if not partitions else (len(members) + len(partitions) - 1) // len(partitions)
        desired = [0] * n
        for position, count in enumerate(_desired_counts(sharing, len(partitions), len(members))):
            desired[members[position]] = count
        by_partition: dict[TopicIdPartition, list[int]] = {}
        by_member: dict[int, list[TopicIdPartition]] = {}
        for index in range(n):
            owned = old[index].get(topic_id)
            if not old[index] or owned is None:
                continue
            for partition in _int_order(owned):
                by_partition.setdefault((topic_id, partition), []).append(index)
                by_member.setdefault(index, []).append((topic_id, partition))
        for index in _int_order(by_member):
            kept = by_member[index]
            for tp in _ordered(sorted(kept), lambda t: t[1], hash_map_capacity(len(kept))):
                if len(kept) <= desired[index]:
                    break
                by_partition[tp].remove(index)
                kept.remove(tp)
                new.setdefault(index, _copy(old[index]))[topic_id].discard(tp[1])
        capacity = _presized_capacity(len(partitions))
        for tp in _ordered(list(by_partition), lambda t: t[1], capacity):
            self._unshare(tp, by_partition[tp], sharing, old, new, by_member, set())
        for partition in partitions:
            by_partition.setdefault((topic_id, partition), [])
        unfilled = {index for index in members if len(by_member.get(index, ())) < desired[index]}
        self._fill(_ordered(list(by_partition), lambda t: t[1], max(capacity, hash_map_capacity(len(by_partition)))),
                   by_partition, sharing, desired, unfilled, old, new, by_member)

    # ---- the steps both share ---------------------------------------------------------------------------------

    @staticmethod
    def _unshare(tp: TopicIdPartition, assigned: list[int], sharing: int, old: list[Assignment],
                 new: dict[int, dict[uuid.UUID, set[int]]], by_member: dict[int, list[TopicIdPartition]],
                 unfilled: set[int]) -> None:
        """Remove members from a partition shared by more than `sharing` of them."""
        if len(assigned) <= sharing:
            return
        for index in _int_order(list(assigned)):
            partitions = new.setdefault(index, _copy(old[index])).get(tp[0])
            if partitions is not None and tp[1] in partitions:
                partitions.discard(tp[1])
                assigned.remove(index)
                by_member[index].remove(tp)
                unfilled.add(index)
            if len(assigned) <= sharing:
                return

    @staticmethod
    def _fill(order: list[TopicIdPartition], by_partition: Mapping[TopicIdPartition, list[int]], sharing: int,
              desired: list[int], unfilled: set[int], old: list[Assignment],
              new: dict[int, dict[uuid.UUID, set[int]]], by_member: dict[int, list[TopicIdPartition]]) -> None:
        """Give each partition short of `sharing` members the next unfilled members, cycling through them; a member
        leaves the cycle once it has its desired count."""
        if not unfilled:
            return
        cycle = _int_order(unfilled)
        position = 0
        assigned_this_cycle = False
        for tp in order:
            members = by_partition[tp]
            to_make = sharing - len(members)
            while to_make > 0:
                if position >= len(cycle):
                    if not assigned_this_cycle:
                        break
                    cycle = _int_order(unfilled)
                    position = 0
                    assigned_this_cycle = False
                    if not cycle:
                        break
                index = cycle[position]
                position += 1
                if index in members:
                    continue
                new.setdefault(index, _copy(old[index])).setdefault(tp[0], set()).add(tp[1])
                by_member.setdefault(index, []).append(tp)
                to_make -= 1
                assigned_this_cycle = True
                if len(by_member[index]) >= desired[index]:
                    unfilled.discard(index)
            if not unfilled:
                break


def frozen(assignment: Mapping[uuid.UUID, Iterable[int]]) -> Assignment:
    """An assignment with frozen partition sets and no empty topic, as the coordinator keeps them."""
    return {topic_id: frozenset(ps) for topic_id, ps in assignment.items() if ps}
