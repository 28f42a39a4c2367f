"""Replaying share group records into the groups they describe (Kafka's GroupMetadataManager.replay for record
types 10-15): the one way a share group changes, whether the records were just written by a heartbeat or read back
when a coordinator loads its `__consumer_offsets` partition.

A record for a group that does not exist creates it; a tombstone for one that does not exist, or for a member that
does not, is ignored. Tombstones must come in Kafka's order (current assignment, target assignment, subscription;
the members before the group): a stream that breaks it raises RuntimeError, as Kafka's replay throws
IllegalStateException.
"""
from __future__ import annotations

import uuid
from collections.abc import MutableMapping

from minikafka.broker.coordinator.group.consumer.record_helpers import assignment_from_topic_partitions
from minikafka.broker.coordinator.group.share.share_group import InitMapValue, ShareGroup, StatePartitionMetadata
from minikafka.broker.coordinator.group.share.share_group_member import LEAVE_GROUP_MEMBER_EPOCH
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
    TopicPartitionsInfo,
)


def replay(groups: MutableMapping[str, ShareGroup], record: ShareGroupRecord, now_ms: int = -1) -> None:
    """Apply one record to `groups` (share groups by group id); `now_ms` is when, for the share partitions'
    initialization times (the record does not keep them, Kafka's replay stamps them with its clock too)."""
    key, value = record
    group = groups.get(key.group_id)
    if group is None:
        if value is None:
            return
        group = groups[key.group_id] = ShareGroup(key.group_id)
    if isinstance(key, ShareGroupMetadataKey):
        if value is None:
            _delete_group(groups, group)
        else:
            assert isinstance(value, ShareGroupMetadataValue)
            group.group_epoch = value.epoch
            group.metadata_hash = value.metadata_hash
    elif isinstance(key, ShareGroupMemberMetadataKey):
        _replay_member_metadata(group, key.member_id, value)
    elif isinstance(key, ShareGroupTargetAssignmentMemberKey):
        if value is None:
            group.remove_target_assignment(key.member_id)
        else:
            assert isinstance(value, ShareGroupTargetAssignmentMemberValue)
            group.update_target_assignment(key.member_id, assignment_from_topic_partitions(value.topic_partitions))
    elif isinstance(key, ShareGroupTargetAssignmentMetadataKey):
        if value is None:
            if group.target_assignment:
                raise RuntimeError(f"Received a tombstone record to delete target assignment of {group.group_id} "
                                   f"but the assignment still has {len(group.target_assignment)} members.")
            group.target_assignment_epoch = -1
        else:
            assert isinstance(value, ShareGroupTargetAssignmentMetadataValue)
            group.target_assignment_epoch = value.assignment_epoch
    elif isinstance(key, ShareGroupCurrentMemberAssignmentKey):
        _replay_current_assignment(group, key.member_id, value)
    elif isinstance(key, ShareGroupStatePartitionMetadataKey):
        if value is None:
            group.state_metadata = None
        else:
            assert isinstance(value, ShareGroupStatePartitionMetadataValue)
            group.state_metadata = StatePartitionMetadata(
                _init_map(value.initializing_topics, now_ms), _init_map(value.initialized_topics, now_ms),
                {t.topic_id: t.topic_name for t in value.deleting_topics})


def _init_map(topics: tuple[TopicPartitionsInfo, ...], now_ms: int) -> dict[uuid.UUID, InitMapValue]:
    return {t.topic_id: InitMapValue(t.topic_name, frozenset(t.partitions), now_ms) for t in topics}


def _delete_group(groups: MutableMapping[str, ShareGroup], group: ShareGroup) -> None:
    if group.members:
        raise RuntimeError(f"Received a tombstone record to delete group {group.group_id} but the group still has "
                           f"{len(group.members)} members.")
    if group.target_assignment:
        raise RuntimeError(f"Received a tombstone record to delete group {group.group_id} but the target "
                           f"assignment still has {len(group.target_assignment)} members.")
    del groups[group.group_id]


def _replay_member_metadata(group: ShareGroup, member_id: str, value: object) -> None:
    if value is None:
        member = group.members.get(member_id)
        if member is None:
            return
        if member.member_epoch != LEAVE_GROUP_MEMBER_EPOCH:
            raise RuntimeError(f"Received a tombstone record to delete member {member_id} but did not receive "
                               "ShareGroupCurrentMemberAssignmentValue tombstone.")
        if member_id in group.target_assignment:
            raise RuntimeError(f"Received a tombstone record to delete member {member_id} but did not receive "
                               "ShareGroupTargetAssignmentMetadataValue tombstone.")
        group.remove_member(member_id)
        return
    assert isinstance(value, ShareGroupMemberMetadataValue)
    member = group.get_or_maybe_create_member(member_id, True)
    group.update_member(member.replace(rack_id=value.rack_id, client_id=value.client_id,
                                       client_host=value.client_host,
                                       subscribed_topic_names=frozenset(value.subscribed_topic_names)))


def _replay_current_assignment(group: ShareGroup, member_id: str, value: object) -> None:
    if value is None:
        member = group.members.get(member_id)
        if member is not None:
            group.update_member(member.replace(member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                                               previous_member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                                               assigned_partitions={}))
        return
    assert isinstance(value, ShareGroupCurrentMemberAssignmentValue)
    member = group.get_or_maybe_create_member(member_id, True)
    group.update_member(member.replace(member_epoch=value.member_epoch,
                                       previous_member_epoch=value.previous_member_epoch, state=value.state,
                                       assigned_partitions=assignment_from_topic_partitions(
                                           value.assigned_partitions)))
