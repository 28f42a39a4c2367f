"""Online migration between the classic and consumer group protocols (KIP-848): a classic group becoming a consumer
group when its first member sends ConsumerGroupHeartbeat, and a consumer group whose last consumer-protocol member
left becoming a classic group again, as Kafka 4.1's ConsumerGroup.fromClassicGroup and ClassicGroup.fromConsumerGroup.

Upgrading keeps every classic member and its assignment: each becomes a stable consumer group member at the
classic generation, with its subscription, rack and client details from its JoinGroup metadata and its session
timeout and protocols kept as classic member metadata, so it goes on being served through JoinGroup, SyncGroup and
Heartbeat. Downgrading builds a stable classic group at the group epoch whose members keep their target
assignments, written in the consumer protocol version of each member's subscription; the coordinator then starts a
rebalance. The coordinators write the records (the consumer group's records and the classic group's tombstone, or
the other way round) and apply them.
"""
from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping

from minikafka.broker.coordinator.group.assignor.assignor_spec import Assignment, SubscribedTopicDescriber
from minikafka.broker.coordinator.group.consumer import record_helpers as rh
from minikafka.broker.coordinator.group.consumer.consumer_group import CONSUMER_PROTOCOL_TYPE, ConsumerGroup
from minikafka.broker.coordinator.group.consumer.consumer_group_member import (
    ConsumerGroupMember,
    MemberState,
    assignment_of,
)
from minikafka.broker.coordinator.group.group import Group, GroupState, Member
from minikafka.protocol.consumer_protocol import (
    ConsumerProtocolError,
    deserialize_version,
    parse_assignment,
    parse_subscription,
    serialize_assignment,
)
from minikafka.protocol.coordinator_records.consumer_group_records import (
    ClassicMemberMetadata,
    ClassicProtocol,
    ConsumerGroupRecord,
)
from minikafka.protocol.errors import ErrorCode, KafkaError


def to_assignment(partitions: Mapping[str, Iterable[int]], describer: SubscribedTopicDescriber) -> Assignment:
    """Partitions by topic name as an assignment by topic id; topics the cluster does not have are left out."""
    by_id: dict[uuid.UUID, list[int]] = {}
    for name, ps in partitions.items():
        topic_id = describer.topic_id(name)
        if topic_id is not None:
            by_id.setdefault(topic_id, []).extend(ps)
    return assignment_of(by_id)


def to_topic_names(assignment: Assignment, describer: SubscribedTopicDescriber) -> dict[str, list[int]]:
    """An assignment by topic id as partitions by topic name; topics the cluster no longer has are left out."""
    result: dict[str, list[int]] = {}
    for topic_id, partitions in assignment.items():
        name = describer.topic_name(topic_id)
        if name is not None and partitions:
            result[name] = sorted(partitions)
    return result


def classic_member_metadata(session_timeout_ms: int, protocols: Iterable[tuple[str, bytes]]
                            ) -> ClassicMemberMetadata:
    return ClassicMemberMetadata(session_timeout_ms, tuple(ClassicProtocol(name, bytes(metadata))
                                                           for name, metadata in protocols))


def prepare_assignment(member: ConsumerGroupMember, describer: SubscribedTopicDescriber) -> bytes:
    """A classic member's assigned partitions as the SyncGroup Assignment, in the consumer protocol version of its
    first protocol's subscription (Kafka's prepareAssignment)."""
    assert member.classic_member_metadata is not None  # only classic members sync
    protocols = member.classic_member_metadata.supported_protocols
    version = deserialize_version(protocols[0].metadata) if protocols else 0
    return serialize_assignment(to_topic_names(member.assigned_partitions, describer), version)


def consumer_group_from_classic(classic: Group, describer: SubscribedTopicDescriber) -> ConsumerGroup:
    """The consumer group a classic group with members becomes (its metadata hash left to the caller);
    GROUP_ID_NOT_FOUND with Kafka's message when a
    member's subscription or assignment cannot be read, or an assignor's user data would be lost."""
    group_id = classic.group_id
    group = ConsumerGroup(group_id)
    group.group_epoch = classic.generation_id
    group.target_assignment_epoch = classic.generation_id
    for member in classic.members.values():
        try:
            assigned: Assignment = {}
            if member.assignment:
                assignment = parse_assignment(member.assignment)
                if assignment.user_data:
                    raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, (
                        f"Cannot upgrade classic group {group_id} to consumer group because an unsupported custom "
                        "assignor is in use. Please refer to the documentation or switch to a default assignor "
                        "before re-attempting the upgrade."))
                assigned = to_assignment(assignment.partitions, describer)
            protocol_name = classic.protocol_name or member.protocols[0][0]
            subscription = parse_subscription(member.metadata(protocol_name))
        except (ConsumerProtocolError, ValueError, IndexError):
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, (
                f"Cannot upgrade classic group {group_id} to consumer group because the embedded consumer protocol "
                "is malformed.")) from None
        new_member = ConsumerGroupMember(
            member_id=member.member_id, member_epoch=classic.generation_id,
            previous_member_epoch=classic.generation_id, state=MemberState.STABLE,
            instance_id=member.group_instance_id, rack_id=subscription.rack_id,
            rebalance_timeout_ms=member.rebalance_timeout_ms, client_id=member.client_id,
            client_host=member.client_host, subscribed_topic_names=frozenset(subscription.topics),
            assigned_partitions=assigned,
            classic_member_metadata=classic_member_metadata(member.session_timeout_ms, member.protocols))
        group.update_target_assignment(new_member.member_id, assigned)
        group.update_member(new_member)
    return group


def consumer_group_records(group: ConsumerGroup) -> list[ConsumerGroupRecord]:
    """The records that create `group`, in Kafka's createConsumerGroupRecords order."""
    group_id = group.group_id
    records = [rh.member_subscription_record(group_id, m) for m in group.members.values()]
    records.append(rh.group_epoch_record(group_id, group.group_epoch, group.metadata_hash))
    records += [rh.target_assignment_record(group_id, member_id, group.target_assignment_of(member_id))
                for member_id in group.members]
    records.append(rh.target_assignment_epoch_record(group_id, group.group_epoch))
    records += [rh.current_assignment_record(group_id, m) for m in group.members.values()]
    return records


def classic_group_from_consumer(group: ConsumerGroup, leaving: Iterable[ConsumerGroupMember],
                                describer: SubscribedTopicDescriber, now_ms: int) -> Group:
    """The stable classic group the consumer group becomes once `leaving` are gone: the remaining (classic)
    members, each with its target assignment in its own consumer protocol version. GROUP_ID_NOT_FOUND when a
    member's metadata cannot be read."""
    leaving_ids = {m.member_id for m in leaving}
    classic = Group(group.group_id, now_ms, GroupState.STABLE, group.group_epoch, CONSUMER_PROTOCOL_TYPE)
    for member in group.members.values():
        if member.member_id in leaving_ids:
            continue
        metadata = member.classic_member_metadata
        assert metadata is not None  # a downgrade keeps classic members only
        classic.add(Member(member.member_id, member.instance_id, member.client_id, member.client_host,
                           member.rebalance_timeout_ms, metadata.session_timeout_ms, CONSUMER_PROTOCOL_TYPE,
                           [(p.name, p.metadata) for p in metadata.supported_protocols]))
    classic.protocol_name = classic.select_protocol()
    try:
        for classic_member in classic.members.values():
            version = deserialize_version(classic_member.metadata(classic.protocol_name))
            classic_member.assignment = serialize_assignment(
                to_topic_names(group.target_assignment_of(classic_member.member_id), describer), version)
    except (ConsumerProtocolError, ValueError) as exc:
        raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND,
                         f"Cannot downgrade the classic group {group.group_id}: {exc}.") from None
    return classic
