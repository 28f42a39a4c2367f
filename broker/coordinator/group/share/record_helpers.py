"""Building the share group records of `__consumer_offsets` (Kafka's GroupCoordinatorRecordHelpers for share
groups, types 10-15): each builder returns the key and value the coordinator appends and then replays, a tombstone
(value None) to delete what the key names."""
from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping

from minikafka.broker.coordinator.group.assignor.assignor_spec import Assignment
from minikafka.broker.coordinator.group.consumer.record_helpers import topic_partitions
from minikafka.broker.coordinator.group.share.share_group import InitMapValue
from minikafka.broker.coordinator.group.share.share_group_member import ShareGroupMember
from minikafka.protocol.coordinator_records.consumer_group_records import (
    ShareGroupCurrentMemberAssignmentKey,
    ShareGroupCurrentMemberAssignmentValue,
    ShareGroupMemberMetadataKey,
    ShareGroupMemberMetadataValue,
    ShareGroupMetadataKey,
    ShareGroupMetadataValue,
    ShareGroupRecord,
    ShareGroupStatePartitionMetadataKey,
    ShareGroupStatePartitionMetadataValue,
    ShareGroupTargetAssignmentMemberKey,
    ShareGroupTargetAssignmentMemberValue,
    ShareGroupTargetAssignmentMetadataKey,
    ShareGroupTargetAssignmentMetadataValue,
    TopicInfo,
    TopicPartitionsInfo,
)


def member_subscription_record(group_id: str, member: ShareGroupMember) -> ShareGroupRecord:
    """The member's subscription and client details (ShareGroupMemberMetadata)."""
    return ShareGroupRecord(ShareGroupMemberMetadataKey(group_id, member.member_id), ShareGroupMemberMetadataValue(
        rack_id=member.rack_id, client_id=member.client_id, client_host=member.client_host,
        subscribed_topic_names=tuple(sorted(member.subscribed_topic_names))))


def group_epoch_record(group_id: str, epoch: int, metadata_hash: int) -> ShareGroupRecord:
    return ShareGroupRecord(ShareGroupMetadataKey(group_id), ShareGroupMetadataValue(epoch, metadata_hash))


def target_assignment_record(group_id: str, member_id: str, partitions: Assignment) -> ShareGroupRecord:
    return ShareGroupRecord(ShareGroupTargetAssignmentMemberKey(group_id, member_id),
                            ShareGroupTargetAssignmentMemberValue(topic_partitions(partitions)))


def target_assignment_epoch_record(group_id: str, assignment_epoch: int) -> ShareGroupRecord:
    return ShareGroupRecord(ShareGroupTargetAssignmentMetadataKey(group_id),
                            ShareGroupTargetAssignmentMetadataValue(assignment_epoch))


def current_assignment_record(group_id: str, member: ShareGroupMember) -> ShareGroupRecord:
    """The member's epochs, state and partitions (ShareGroupCurrentMemberAssignment)."""
    return ShareGroupRecord(ShareGroupCurrentMemberAssignmentKey(group_id, member.member_id),
                            ShareGroupCurrentMemberAssignmentValue(
                                member_epoch=member.member_epoch, previous_member_epoch=member.previous_member_epoch,
                                state=member.state, assigned_partitions=topic_partitions(member.assigned_partitions)))


def state_partition_metadata_record(group_id: str, initializing: Mapping[uuid.UUID, InitMapValue],
                                    initialized: Mapping[uuid.UUID, InitMapValue],
                                    deleting: Mapping[uuid.UUID, str]) -> ShareGroupRecord:
    """Which topics' share state is initializing, initialized or deleting (ShareGroupStatePartitionMetadata)."""
    def infos(topics: Mapping[uuid.UUID, InitMapValue]) -> tuple[TopicPartitionsInfo, ...]:
        return tuple(TopicPartitionsInfo(topic_id, v.name, tuple(sorted(v.partitions)))
                     for topic_id, v in sorted(topics.items()))
    return ShareGroupRecord(ShareGroupStatePartitionMetadataKey(group_id), ShareGroupStatePartitionMetadataValue(
        infos(initializing), infos(initialized),
        tuple(TopicInfo(topic_id, name) for topic_id, name in sorted(deleting.items()))))


def member_removal_records(group_id: str, member_id: str) -> list[ShareGroupRecord]:
    """A member leaving or fenced, in Kafka's order: current assignment, target assignment, then subscription."""
    return [ShareGroupRecord(ShareGroupCurrentMemberAssignmentKey(group_id, member_id), None),
            ShareGroupRecord(ShareGroupTargetAssignmentMemberKey(group_id, member_id), None),
            ShareGroupRecord(ShareGroupMemberMetadataKey(group_id, member_id), None)]


def group_tombstone_records(group_id: str, member_ids: Iterable[str]) -> list[ShareGroupRecord]:
    """Everything of a group, deleted in the order its replay accepts (Kafka's createGroupTombstoneRecords)."""
    member_ids = list(member_ids)
    records = [ShareGroupRecord(ShareGroupCurrentMemberAssignmentKey(group_id, m), None) for m in member_ids]
    records += [ShareGroupRecord(ShareGroupTargetAssignmentMemberKey(group_id, m), None) for m in member_ids]
    records.append(ShareGroupRecord(ShareGroupTargetAssignmentMetadataKey(group_id), None))
    records += [ShareGroupRecord(ShareGroupMemberMetadataKey(group_id, m), None) for m in member_ids]
    records.append(ShareGroupRecord(ShareGroupStatePartitionMetadataKey(group_id), None))
    records.append(ShareGroupRecord(ShareGroupMetadataKey(group_id), None))
    return records
