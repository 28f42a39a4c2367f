"""Replaying consumer group records into the groups they describe (Kafka's GroupMetadataManager.replay for the
consumer group record types): the one way a consumer group changes, whether the records were just written by a
heartbeat or read back when a coordinator loads its `__consumer_offsets` partition.

A record for a group that does not exist creates it; a tombstone for one that does not exist, or for a member that
does not, is ignored. Tombstones must come in Kafka's order (a member's current assignment, then its target
assignment, then its subscription; the group's members and assignment epoch before the group itself): a record
stream that breaks it raises RuntimeError, as Kafka's replay throws IllegalStateException.
"""
from __future__ import annotations

from collections.abc import MutableMapping

from minikafka.broker.coordinator.group.consumer.consumer_group import ConsumerGroup
from minikafka.broker.coordinator.group.consumer.consumer_group_member import LEAVE_GROUP_MEMBER_EPOCH, MemberState
from minikafka.broker.coordinator.group.consumer.record_helpers import assignment_from_topic_partitions
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
)


def replay(groups: MutableMapping[str, ConsumerGroup], record: ConsumerGroupRecord) -> None:
    """Apply one record to `groups` (consumer groups by group id)."""
    key, value = record
    group = groups.get(key.group_id)
    if group is None:
        if value is None:
            return
        group = groups[key.group_id] = ConsumerGroup(key.group_id)
    if isinstance(key, ConsumerGroupMetadataKey):
        if value is None:
            _delete_group(groups, group)
        else:
            assert isinstance(value, ConsumerGroupMetadataValue)
            group.group_epoch = value.epoch
            group.metadata_hash = value.metadata_hash
    elif isinstance(key, ConsumerGroupPartitionMetadataKey):
        # Kafka 4.1 keeps a metadata hash instead; an old record left in the log is tombstoned by the next heartbeat.
        group.has_subscription_metadata_record = value is not None
    elif isinstance(key, ConsumerGroupMemberMetadataKey):
        _replay_member_metadata(group, key.member_id, value)
    elif isinstance(key, ConsumerGroupTargetAssignmentMemberKey):
        if value is None:
            group.remove_target_assignment(key.member_id)
        else:
            assert isinstance(value, ConsumerGroupTargetAssignmentMemberValue)
            group.update_target_assignment(key.member_id, assignment_from_topic_partitions(value.topic_partitions))
    elif isinstance(key, ConsumerGroupTargetAssignmentMetadataKey):
        if value is None:
            if group.target_assignment:
                raise RuntimeError(f"Received a tombstone record to delete target assignment of {group.group_id} "
                                   f"but the assignment still has {len(group.target_assignment)} members.")
            group.target_assignment_epoch = -1
        else:
            assert isinstance(value, ConsumerGroupTargetAssignmentMetadataValue)
            group.target_assignment_epoch = value.assignment_epoch
    elif isinstance(key, ConsumerGroupCurrentMemberAssignmentKey):
        _replay_current_assignment(group, key.member_id, value)
    elif isinstance(key, ConsumerGroupRegularExpressionKey):
        if value is None:
            group.remove_resolved_regular_expression(key.regular_expression)
        else:
            assert isinstance(value, ConsumerGroupRegularExpressionValue)
            group.update_resolved_regular_expression(
                key.regular_expression, ResolvedRegularExpression(frozenset(value.topics), value.version,
                                                                  value.timestamp))


def _delete_group(groups: MutableMapping[str, ConsumerGroup], group: ConsumerGroup) -> None:
    if group.members:
        raise RuntimeError(f"Received a tombstone record to delete group {group.group_id} but the group still has "
                           f"{len(group.members)} members.")
    if group.target_assignment:
        raise RuntimeError(f"Received a tombstone record to delete group {group.group_id} but the target "
                           f"assignment still has {len(group.target_assignment)} members.")
    if group.target_assignment_epoch != -1:
        raise RuntimeError(f"Received a tombstone record to delete group {group.group_id} but did not receive "
                           "ConsumerGroupTargetAssignmentMetadataValue tombstone.")
    del groups[group.group_id]


def _replay_member_metadata(group: ConsumerGroup, member_id: str, value: object) -> None:
    if value is None:
        member = group.members.get(member_id)
        if member is None:
            return
        if member.member_epoch != LEAVE_GROUP_MEMBER_EPOCH:
            raise RuntimeError(f"Received a tombstone record to delete member {member_id} but did not receive "
                               "ConsumerGroupCurrentMemberAssignmentValue tombstone.")
        if member_id in group.target_assignment:
            raise RuntimeError(f"Received a tombstone record to delete member {member_id} but did not receive "
                               "ConsumerGroupTargetAssignmentMetadataValue tombstone.")
        group.remove_member(member_id)
        return
    assert isinstance(value, ConsumerGroupMemberMetadataValue)
    member = group.get_or_maybe_create_member(member_id, True)
    group.update_member(member.replace(
        instance_id=value.instance_id,
        rack_id=value.rack_id,
        client_id=value.client_id,
        client_host=value.client_host,
        subscribed_topic_names=frozenset(value.subscribed_topic_names),
        subscribed_topic_regex=value.subscribed_topic_regex or None,
        rebalance_timeout_ms=value.rebalance_timeout_ms,
        server_assignor_name=value.server_assignor,
        classic_member_metadata=value.classic_member_metadata,
    ))


def _replay_current_assignment(group: ConsumerGroup, member_id: str, value: object) -> None:
    if value is None:
        member = group.members.get(member_id)
        if member is not None:
            # The member is leaving: it owns nothing any more, and its subscription tombstone follows.
            group.update_member(member.replace(
                member_epoch=LEAVE_GROUP_MEMBER_EPOCH, previous_member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                assigned_partitions={}, partitions_pending_revocation={}))
        return
    assert isinstance(value, ConsumerGroupCurrentMemberAssignmentValue)
    member = group.get_or_maybe_create_member(member_id, True)
    group.update_member(member.replace(
        member_epoch=value.member_epoch,
        previous_member_epoch=value.previous_member_epoch,
        state=MemberState.from_value(value.state),
        assigned_partitions=assignment_from_topic_partitions(value.assigned_partitions),
        partitions_pending_revocation=assignment_from_topic_partitions(value.partitions_pending_revocation),
    ))
