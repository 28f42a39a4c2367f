"""The records a consumer group's changes are written as (Kafka's GroupCoordinatorRecordHelpers for consumer
groups): each builder returns the key and value the coordinator appends to `__consumer_offsets` and then replays,
a tombstone (value None) to delete what the key names."""
from __future__ import annotations

import uuid

from minikafka.broker.coordinator.group.assignor.assignor_spec import Assignment
from minikafka.broker.coordinator.group.consumer.consumer_group_member import ConsumerGroupMember
from minikafka.broker.coordinator.group.consumer.resolved_regular_expression import ResolvedRegularExpression
from minikafka.protocol.coordinator_records.consumer_group_records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupRecord,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    TopicPartitions,
)


def topic_partitions(assignment: Assignment) -> tuple[TopicPartitions, ...]:
    """An assignment as the records hold it: topics and partitions in order, no empty topic."""
    return tuple(TopicPartitions(topic_id, tuple(sorted(partitions)))
                 for topic_id, partitions in sorted(assignment.items()) if partitions)


def assignment_from_topic_partitions(topics: tuple[TopicPartitions, ...]) -> dict[uuid.UUID, frozenset[int]]:
    """A record's topic partitions as an assignment."""
    return {tp.topic_id: frozenset(tp.partitions) for tp in topics if tp.partitions}


def member_subscription_record(group_id: str, member: ConsumerGroupMember) -> ConsumerGroupRecord:
    """The member's subscription and client details (ConsumerGroupMemberMetadata)."""
    key = ConsumerGroupMemberMetadataKey(group_id, member.member_id)
    return ConsumerGroupRecord(key, ConsumerGroupMemberMetadataValue(
        instance_id=member.instance_id,
        rack_id=member.rack_id,
        client_id=member.client_id,
        client_host=member.client_host,
        subscribed_topic_names=tuple(sorted(member.subscribed_topic_names)),
        # Kafka's member holds "" for no regex and writes it so.
        subscribed_topic_regex=member.subscribed_topic_regex or "",
        rebalance_timeout_ms=member.rebalance_timeout_ms,
        server_assignor=member.server_assignor_name,
        classic_member_metadata=member.classic_member_metadata,
    ))


def member_subscription_tombstone(group_id: str, member_id: str) -> ConsumerGroupRecord:
    return ConsumerGroupRecord(ConsumerGroupMemberMetadataKey(group_id, member_id), None)


def group_epoch_record(group_id: str, epoch: int, metadata_hash: int) -> ConsumerGroupRecord:
    """The group epoch and the hash of its subscribed topics' metadata (ConsumerGroupMetadata)."""
    return ConsumerGroupRecord(ConsumerGroupMetadataKey(group_id), ConsumerGroupMetadataValue(epoch, metadata_hash))


def group_epoch_tombstone(group_id: str) -> ConsumerGroupRecord:
    """Deletes the group, once it has no member, target assignment or assignment epoch left."""
    return ConsumerGroupRecord(ConsumerGroupMetadataKey(group_id), None)


def subscription_metadata_tombstone(group_id: str) -> ConsumerGroupRecord:
    """Deletes the ConsumerGroupPartitionMetadata record older brokers wrote."""
    return ConsumerGroupRecord(ConsumerGroupPartitionMetadataKey(group_id), None)


def target_assignment_record(group_id: str, member_id: str, partitions: Assignment) -> ConsumerGroupRecord:
    """A member's target assignment (ConsumerGroupTargetAssignmentMember)."""
    return ConsumerGroupRecord(ConsumerGroupTargetAssignmentMemberKey(group_id, member_id),
                               ConsumerGroupTargetAssignmentMemberValue(topic_partitions(partitions)))


def target_assignment_tombstone(group_id: str, member_id: str) -> ConsumerGroupRecord:
    return ConsumerGroupRecord(ConsumerGroupTargetAssignmentMemberKey(group_id, member_id), None)


def target_assignment_epoch_record(group_id: str, assignment_epoch: int) -> ConsumerGroupRecord:
    """The epoch of the group's target assignment (ConsumerGroupTargetAssignmentMetadata)."""
    return ConsumerGroupRecord(ConsumerGroupTargetAssignmentMetadataKey(group_id),
                               ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch))


def target_assignment_epoch_tombstone(group_id: str) -> ConsumerGroupRecord:
    return ConsumerGroupRecord(ConsumerGroupTargetAssignmentMetadataKey(group_id), None)


def current_assignment_record(group_id: str, member: ConsumerGroupMember) -> ConsumerGroupRecord:
    """The member's epochs, state and partitions (ConsumerGroupCurrentMemberAssignment)."""
    return ConsumerGroupRecord(
        ConsumerGroupCurrentMemberAssignmentKey(group_id, member.member_id),
        ConsumerGroupCurrentMemberAssignmentValue(
            member_epoch=member.member_epoch,
            previous_member_epoch=member.previous_member_epoch,
            state=member.state.value,
            assigned_partitions=topic_partitions(member.assigned_partitions),
            partitions_pending_revocation=topic_partitions(member.partitions_pending_revocation),
        ))


def current_assignment_tombstone(group_id: str, member_id: str) -> ConsumerGroupRecord:
    return ConsumerGroupRecord(ConsumerGroupCurrentMemberAssignmentKey(group_id, member_id), None)


def regular_expression_record(group_id: str, regex: str, resolved: ResolvedRegularExpression) -> ConsumerGroupRecord:
    """What a subscription regex resolved to (ConsumerGroupRegularExpression)."""
    return ConsumerGroupRecord(ConsumerGroupRegularExpressionKey(group_id, regex), ConsumerGroupRegularExpressionValue(
        tuple(sorted(resolved.topics)), resolved.version, resolved.timestamp))


def regular_expression_tombstone(group_id: str, regex: str) -> ConsumerGroupRecord:
    return ConsumerGroupRecord(ConsumerGroupRegularExpressionKey(group_id, regex), None)


def member_removal_records(group_id: str, member_id: str) -> list[ConsumerGroupRecord]:
    """A member leaving or fenced, in Kafka's order: current assignment, target assignment, then subscription."""
    return [current_assignment_tombstone(group_id, member_id), target_assignment_tombstone(group_id, member_id),
            member_subscription_tombstone(group_id, member_id)]


def group_tombstone_records(group_id: str, member_ids: list[str], regexes: list[str]) -> list[ConsumerGroupRecord]:
    """Everything of a group, deleted in the order its replay accepts (Kafka's createGroupTombstoneRecords)."""
    records = [current_assignment_tombstone(group_id, m) for m in member_ids]
    records += [target_assignment_tombstone(group_id, m) for m in member_ids]
    records.append(target_assignment_epoch_tombstone(group_id))
    records += [member_subscription_tombstone(group_id, m) for m in member_ids]
    records += [regular_expression_tombstone(group_id, r) for r in regexes]
    records.append(subscription_metadata_tombstone(group_id))
    records.append(group_epoch_tombstone(group_id))
    return records
