"""The group admin APIs of Kafka's GroupCoordinator (handleDescribeGroup, handleListGroups, handleDeleteGroups):
they read and delete the groups of the coordinator's GroupMetadataManager and take no part in membership."""
from __future__ import annotations

import logging
from dataclasses import dataclass

from minikafka.broker.coordinator.group.consumer.consumer_group import CONSUMER_PROTOCOL_TYPE
from minikafka.broker.coordinator.group.group import GROUP_TYPE_CLASSIC, Group, GroupState, Member
from minikafka.broker.coordinator.group.group_metadata_manager import GroupMetadataManager, changes_groups
from minikafka.broker.coordinator.group.share.share_group import SHARE_PROTOCOL_TYPE
from minikafka.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger("minikafka.group_coordinator")


@dataclass
class DescribedGroup:
    group_id: str
    error: ErrorCode
    state: str
    protocol_type: str
    protocol_data: str
    members: list[tuple[Member, bytes]]
    message: str | None = None


@dataclass(frozen=True)
class ListedGroup:
    """A group as ListGroups lists it."""

    group_id: str
    protocol_type: str
    state: str
    group_type: str


class GroupAdmin:
    """DescribeGroups, ListGroups and DeleteGroups over `group_manager`'s groups (the GroupCoordinator's)."""

    group_manager: GroupMetadataManager

    @property
    def groups(self) -> dict[str, Group]:
        return self.group_manager.groups

    @property
    def active(self) -> bool:
        return self.group_manager.active

    def describe_group(self, group_id: str, api_version: int) -> DescribedGroup:
        if not self.active:
            return DescribedGroup(group_id, ErrorCode.COORDINATOR_NOT_AVAILABLE, "", "", "", [])
        if not group_id:
            return DescribedGroup(group_id, ErrorCode.INVALID_GROUP_ID, "", "", "", [])
        if not self.group_manager.is_owned(group_id):
            return DescribedGroup(group_id, ErrorCode.NOT_COORDINATOR, "", "", "", [])
        if group_id in self.group_manager.consumer_groups or group_id in self.group_manager.share_groups:
            # As Kafka: DescribeGroups describes classic groups only.
            error = ErrorCode.GROUP_ID_NOT_FOUND if api_version >= 6 else ErrorCode.NONE
            return DescribedGroup(group_id, error, GroupState.DEAD.value, "", "", [],
                                  f"Group {group_id} is not a classic group.")
        group = self.groups.get(group_id)
        if group is None:
            error = ErrorCode.GROUP_ID_NOT_FOUND if api_version >= 6 else ErrorCode.NONE
            return DescribedGroup(group_id, error, GroupState.DEAD.value, "", "", [])
        if group.is_in(GroupState.STABLE):
            members = [(m, m.metadata(group.protocol_name)) for m in group.members.values()]
            return DescribedGroup(group_id, ErrorCode.NONE, group.state.value, group.protocol_type or "",
                                  group.protocol_name or "", members)
        return DescribedGroup(group_id, ErrorCode.NONE, group.state.value, group.protocol_type or "", "",
                              [(m, b"") for m in group.members.values()])

    def list_groups(self, states_filter: list[str], types_filter: list[str]) -> list[ListedGroup]:
        """Classic, KIP-848 consumer and KIP-932 share groups, by state and type (case-insensitive, as Kafka's
        filters). A classic group that only holds a consumer group's offsets is that consumer group."""
        if not self.active:
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        states = {s.strip().lower() for s in states_filter}
        types = {t.strip().lower() for t in types_filter}
        consumer_groups = self.group_manager.consumer_groups
        listed = [ListedGroup(g.group_id, g.protocol_type or "", g.state.value, GROUP_TYPE_CLASSIC)
                  for g in self.groups.values() if g.group_id not in consumer_groups]
        listed += [ListedGroup(g.group_id, CONSUMER_PROTOCOL_TYPE, g.state.value, CONSUMER_PROTOCOL_TYPE)
                   for g in consumer_groups.values()]
        listed += [ListedGroup(g.group_id, SHARE_PROTOCOL_TYPE, g.state.value, SHARE_PROTOCOL_TYPE)
                   for g in self.group_manager.share_groups.values()]
        return [g for g in listed
                if (not states or g.state.lower() in states) and (not types or g.group_type in types)]

    @changes_groups
    def delete_groups(self, group_ids: list[str | None]) -> list[tuple[str | None, ErrorCode]]:
        results: list[tuple[str | None, ErrorCode]] = []
        for group_id in group_ids:
            if not self.active:
                results.append((group_id, ErrorCode.COORDINATOR_NOT_AVAILABLE))
                continue
            if group_id is None:
                results.append((group_id, ErrorCode.INVALID_GROUP_ID))
                continue
            if not self.group_manager.is_owned(group_id):
                results.append((group_id, ErrorCode.NOT_COORDINATOR))
                continue
            consumer_group = self.group_manager.consumer_groups.get(group_id)
            if consumer_group is not None:
                try:
                    consumer_group.validate_delete_group()
                except KafkaError as exc:
                    results.append((group_id, exc.code))
                    continue
                results.append((group_id, self.group_manager.delete_consumer_group(group_id)))
                continue
            share_group = self.group_manager.share_groups.get(group_id)
            if share_group is not None:
                try:
                    share_group.validate_delete_group()
                except KafkaError as exc:
                    results.append((group_id, exc.code))
                    continue
                results.append((group_id, self.group_manager.delete_share_group(group_id)))
                log.info("deleted share group %s", group_id)
                continue
            group = self.groups.get(group_id)
            if group is None or group.is_in(GroupState.DEAD):
                results.append((group_id, ErrorCode.GROUP_ID_NOT_FOUND))
                continue
            if not group.is_empty:
                results.append((group_id, ErrorCode.NON_EMPTY_GROUP))
                continue
            offsets = len(group.offsets)
            error = self.group_manager.delete_group(group)
            if error != ErrorCode.NONE:
                results.append((group_id, error))
                continue
            log.info("deleted group %s and %d committed offsets", group_id, offsets)
            results.append((group_id, ErrorCode.NONE))
        return results
