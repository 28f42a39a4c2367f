"""Committed offsets: OffsetCommit, TxnOffsetCommit, OffsetFetch and OffsetDelete, and their expiry.

As Kafka's OffsetMetadataManager, a commit is checked against the group's membership and generation, written to
the group's partition of `__consumer_offsets` and only then applied, so a failed write changes nothing. A
TxnOffsetCommit is written in the producer's transaction and stays pending in the group until the transaction's
marker: OffsetFetch does not return it, and with require_stable answers its partition UNSTABLE_OFFSET_COMMIT.
Offsets past offsets.retention.minutes are tombstoned, unless a transaction holds one pending for the same
partition, and an empty group left without offsets or open transactions is deleted. Every commit supersedes an
earlier record of its key; the log cleaner compacts `__consumer_offsets` (cleanup.policy=compact) to the latest
record of each key, and drops tombstones after delete.retention.ms, so a group committing forever keeps a bounded
log.
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from minikafka.broker.coordinator.group.group import Group, GroupState, Member, OffsetAndMetadata
from minikafka.broker.coordinator.group.group_coordinator_config import GroupCoordinatorConfig
from minikafka.broker.coordinator.group.group_metadata_log import Record, offset_commit_record
from minikafka.broker.coordinator.group.group_metadata_manager import GroupMetadataManager
from minikafka.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger("minikafka.offset_manager")

# OffsetCommit v9+ answers GROUP_ID_NOT_FOUND for a generation-bearing commit to an unknown group.
GROUP_ID_NOT_FOUND_COMMIT_MIN_VERSION = 9
# The largest timestamp an offset's record holds (an int64).
MAX_TIMESTAMP_MS = (1 << 63) - 1


@dataclass
class OffsetCommitEntry:
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str | None


class OffsetManager:
    """Offsets of the groups in `group_manager`; `reschedule_heartbeat` keeps a committing member's session alive,
    as a commit from a member counts as a sign of life in Kafka."""

    def __init__(self, config: GroupCoordinatorConfig, group_manager: GroupMetadataManager,
                 clock_ms: Callable[[], int], reschedule_heartbeat: Callable[[Group, Member], None]) -> None:
        self.config = config
        self.group_manager = group_manager
        self.clock_ms = clock_ms
        self._reschedule_heartbeat = reschedule_heartbeat

    # ---- OffsetCommit and TxnOffsetCommit ------------------------------------------------------------------

    def _validate_offset_commit(self, group: Group | None, group_id: str, member_id: str,
                                group_instance_id: str | None, generation_id: int, api_version: int,
                                is_transactional: bool = False) -> Group:
        """The group to commit to (a new simple group for a commit without generation to an unknown group), or
        KafkaError. A transactional commit without generation needs no membership even in a group with members
        (TxnOffsetCommit before v3 carries none), and none is refused during a rebalance."""
        if group is None:
            if generation_id < 0:
                log.info("creating simple group %s through a manual offset commit", group_id)
                return Group(group_id, self.clock_ms())
            if api_version >= GROUP_ID_NOT_FOUND_COMMIT_MIN_VERSION and not is_transactional:
                raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"group {group_id} not found")
            raise KafkaError(ErrorCode.ILLEGAL_GENERATION, f"group {group_id} not found")
        if group.is_in(GroupState.DEAD):
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if generation_id < 0 and group.is_empty:
            # assign()-only consumers and admin clients commit without membership to an empty group.
            return group
        if generation_id >= 0 or member_id or group_instance_id is not None:
            group.validate_member(member_id, group_instance_id)
            if generation_id != group.generation_id:
                raise KafkaError(ErrorCode.ILLEGAL_GENERATION,
                                 f"generation {generation_id} is not the group's {group.generation_id}")
        elif not group.is_empty and not is_transactional:
            raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID, "a commit without membership needs an empty group")
        if group.is_in(GroupState.COMPLETING_REBALANCE) and not is_transactional:
            raise KafkaError(ErrorCode.REBALANCE_IN_PROGRESS)
        return group

    def _refuse_share_group(self, group_id: str) -> None:
        """A share group has no committed offsets (its progress is the share coordinator's): the offset APIs
        answer GROUP_ID_NOT_FOUND, as Kafka's ShareGroup.validateOffsetCommit/Fetch/Delete."""
        if group_id in self.group_manager.share_groups:
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")

    async def commit_offsets(self, group_id: str, member_id: str, group_instance_id: str | None,
                             generation_id: int, retention_time_ms: int, entries: list[OffsetCommitEntry],
                             api_version: int) -> list[ErrorCode]:
        """One error per entry, once the commit is replicated; a group-level problem raises KafkaError (every
        partition gets that code). As Kafka's pending offset commits, offsets whose records fail to replicate are
        taken back: the group keeps what it had, unless a later commit has replaced them meanwhile."""
        manager = self.group_manager
        manager.check_active(group_id, allow_empty=True)
        self._refuse_share_group(group_id)
        existing = manager.groups.get(group_id)
        consumer_group = manager.consumer_groups.get(group_id)
        if consumer_group is not None:
            # A KIP-848 group checks the member epoch; its offsets are kept in a classic group without members.
            consumer_group.validate_offset_commit(member_id, group_instance_id, generation_id, False, api_version)
            group = existing if existing is not None else Group(group_id, self.clock_ms())
        else:
            group = self._validate_offset_commit(existing, group_id, member_id, group_instance_id, generation_id,
                                                 api_version)
        if group.is_in(GroupState.STABLE, GroupState.PREPARING_REBALANCE) and member_id in group.members:
            self._reschedule_heartbeat(group, group.members[member_id])
        now = self.clock_ms()
        # As Kafka: commit time plus retention, unless the retention is -1 (offsets.retention.minutes applies). Kafka
        # adds them as longs, which wrap into the past; a sum past the largest timestamp means never, not at once.
        expire = None if retention_time_ms == -1 else min(now + retention_time_ms, MAX_TIMESTAMP_MS)
        errors, records, staged = self._offset_records(group_id, entries, now, expire)
        if records:
            error = manager.append(manager.partition_for(group_id), records, now)
            if error != ErrorCode.NONE:
                raise KafkaError(error, f"storing offsets of group {group_id} failed")
            if existing is None:
                manager.groups[group_id] = group
            previous = {tp: group.offsets.get(tp) for tp, _ in staged}
            for tp, value in staged:
                manager.apply_offset_commit(group, tp, value)
            error = await manager.wait_replicated(group_id)
            if error != ErrorCode.NONE:
                for tp, value in staged:
                    if group.offsets.get(tp) is value:
                        before = previous[tp]
                        if before is None:
                            del group.offsets[tp]
                        else:
                            group.offsets[tp] = before
                errors = [error if code == ErrorCode.NONE else code for code in errors]
        return errors

    async def commit_transactional_offsets(self, group_id: str, producer_id: int, producer_epoch: int,
                                           member_id: str, group_instance_id: str | None, generation_id: int,
                                           entries: list[OffsetCommitEntry], api_version: int) -> list[ErrorCode]:
        """TxnOffsetCommit: one error per entry, once the commit is replicated; a group-level problem raises
        KafkaError. The offsets are written as a batch of the producer's transaction and stay pending in the group
        until its marker (GroupCoordinator.on_transaction_completed). As commit_offsets, offsets whose records fail
        to replicate are taken back. The generation is checked as OffsetCommit checks it (a KIP-848 group's member
        epoch, a stale one answered ILLEGAL_GENERATION), but an unknown group with a generation is
        ILLEGAL_GENERATION in every version, and no membership is needed (Kafka 4.1). No
        transaction has a negative producer id or epoch: those are refused as Kafka's transaction verification
        refuses them (INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED), and are never written."""
        manager = self.group_manager
        manager.check_active(group_id)
        if producer_id < 0:
            raise KafkaError(ErrorCode.INVALID_PRODUCER_ID_MAPPING, f"producer id {producer_id} has no transaction")
        if producer_epoch < 0:
            raise KafkaError(ErrorCode.PRODUCER_FENCED, f"producer epoch {producer_epoch} has no transaction")
        self._refuse_share_group(group_id)
        existing = manager.groups.get(group_id)
        consumer_group = manager.consumer_groups.get(group_id)
        if consumer_group is not None:
            # A KIP-848 member's transactional commit carries its member epoch as the generation; a stale one is
            # ILLEGAL_GENERATION here, as Kafka's validateTransactionalOffsetCommit answers it.
            try:
                consumer_group.validate_offset_commit(member_id, group_instance_id, generation_id, True, api_version)
            except KafkaError as exc:
                if exc.code != ErrorCode.STALE_MEMBER_EPOCH:
                    raise
                raise KafkaError(ErrorCode.ILLEGAL_GENERATION, str(exc)) from None
            group = existing if existing is not None else Group(group_id, self.clock_ms())
        else:
            group = self._validate_offset_commit(existing, group_id, member_id, group_instance_id, generation_id,
                                                 api_version, is_transactional=True)
        now = self.clock_ms()
        errors, records, staged = self._offset_records(group_id, entries, now, None)
        if not records:
            return errors
        error = manager.append_transactional(manager.partition_for(group_id), records, now, producer_id,
                                             producer_epoch)
        if error != ErrorCode.NONE:
            raise KafkaError(error, f"storing transactional offsets of group {group_id} failed")
        if existing is None:
            manager.groups[group_id] = group
        previous = {tp: group.pending_txn_offsets.get(producer_id, {}).get(tp) for tp, _ in staged}
        for tp, value in staged:
            manager.apply_offset_commit(group, tp, value, producer_id)
        error = await manager.wait_replicated(group_id)
        if error != ErrorCode.NONE:
            pending = group.pending_txn_offsets.get(producer_id, {})
            for tp, value in staged:
                if pending.get(tp) is value:
                    before = previous[tp]
                    if before is None:
                        del pending[tp]
                    else:
                        pending[tp] = before
            errors = [error if code == ErrorCode.NONE else code for code in errors]
        return errors

    def _offset_records(self, group_id: str, entries: list[OffsetCommitEntry], now: int, expire: int | None
                        ) -> tuple[list[ErrorCode], list[Record], list[tuple[tuple[str, int], OffsetAndMetadata]]]:
        """Per entry its error (OFFSET_METADATA_TOO_LARGE, or NONE), and the records and offsets of those to
        write."""
        errors: list[ErrorCode] = []
        records: list[Record] = []
        staged: list[tuple[tuple[str, int], OffsetAndMetadata]] = []
        for entry in entries:
            metadata = entry.metadata if entry.metadata is not None else ""
            if entry.metadata is not None and len(entry.metadata) > self.config.offset_metadata_max_bytes:
                errors.append(ErrorCode.OFFSET_METADATA_TOO_LARGE)
                continue
            value = OffsetAndMetadata(entry.offset, entry.leader_epoch, metadata, now, expire)
            records.append(offset_commit_record(group_id, entry.topic, entry.partition, value))
            staged.append(((entry.topic, entry.partition), value))
            errors.append(ErrorCode.NONE)
        return errors, records, staged

    # ---- OffsetFetch and OffsetDelete ----------------------------------------------------------------------

    def fetch_offsets(self, group_id: str | None, partitions: list[tuple[str, list[int]]] | None,
                      require_stable: bool = False, member_id: str | None = None, member_epoch: int = -1
                      ) -> list[tuple[str, list[tuple[int, OffsetAndMetadata | ErrorCode | None]]]]:
        """Committed offsets by topic (None where there is none); `partitions` None means every committed offset of
        the group. With `require_stable`, a partition an open transaction holds an offset for is
        UNSTABLE_OFFSET_COMMIT instead (Kafka's rule: a pending offset without a committed one is not listed among
        all offsets). A KIP-848 group checks the member id and epoch (OffsetFetch v9+) when they are given."""
        self.group_manager.check_active(group_id, allow_empty=True)
        assert group_id is not None  # check_active refuses a null group id
        self._refuse_share_group(group_id)
        consumer_group = self.group_manager.consumer_groups.get(group_id)
        if consumer_group is not None:
            consumer_group.validate_offset_fetch(member_id, member_epoch)
        group = self.group_manager.groups.get(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            return [] if partitions is None else [(topic, [(p, None) for p in indexes])
                                                  for topic, indexes in partitions]

        def answer(tp: tuple[str, int]) -> OffsetAndMetadata | ErrorCode | None:
            if require_stable and group.has_pending_txn_offset(tp):
                return ErrorCode.UNSTABLE_OFFSET_COMMIT
            return group.offsets.get(tp)

        if partitions is None:
            by_topic: dict[str, list[tuple[int, OffsetAndMetadata | ErrorCode | None]]] = {}
            for tp in group.offsets:
                by_topic.setdefault(tp[0], []).append((tp[1], answer(tp)))
            return [(topic, sorted(parts, key=lambda p: p[0])) for topic, parts in by_topic.items()]
        return [(topic, [(p, answer((topic, p))) for p in indexes]) for topic, indexes in partitions]

    async def wait_stable(self, group_id: str | None) -> None:
        """OffsetFetch with require_stable answers once every write to the group's partition so far is committed,
        as Kafka 4.1 serves it as a write operation; a group-level problem raises KafkaError."""
        manager = self.group_manager
        manager.check_active(group_id, allow_empty=True)
        assert group_id is not None  # check_active refuses a null group id
        error = await manager.wait_replicated(group_id)
        if error != ErrorCode.NONE:
            raise KafkaError(error, f"offsets of group {group_id} are not committed yet")

    def delete_offsets(self, group_id: str, partitions: list[tuple[str, list[int]]]
                       ) -> list[tuple[str, list[tuple[int, ErrorCode]]]]:
        """OffsetDelete; group-level errors raise KafkaError."""
        manager = self.group_manager
        manager.check_active(group_id)
        self._refuse_share_group(group_id)
        group = manager.groups.get(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"group {group_id} not found")
        if group.is_in(GroupState.STABLE, GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE) \
                and not group.uses_consumer_protocol:
            raise KafkaError(ErrorCode.NON_EMPTY_GROUP)
        results = []
        records: list[Record] = []
        deleted: list[tuple[str, int]] = []
        consumer_group = manager.consumer_groups.get(group_id)
        for topic, indexes in partitions:
            if group.is_subscribed_to(topic) or (consumer_group is not None
                                                 and consumer_group.is_subscribed_to_topic(topic)):
                results.append((topic, [(p, ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC) for p in indexes]))
                continue
            for p in indexes:
                # A tombstone also takes an offset pending in a transaction, as in Kafka.
                if (topic, p) in group.offsets or group.has_pending_txn_offset((topic, p)):
                    records.append(offset_commit_record(group_id, topic, p, None))
                    deleted.append((topic, p))
            results.append((topic, [(p, ErrorCode.NONE) for p in indexes]))
        error = manager.append(manager.partition_for(group_id), records, self.clock_ms())
        if error != ErrorCode.NONE:
            raise KafkaError(error, f"deleting offsets of group {group_id} failed")
        group.remove_offsets(deleted)
        return results

    def on_topic_deleted(self, topic: str) -> int:
        """Kafka's onPartitionsDeleted: offsets of a deleted topic, committed or pending in a transaction, are
        tombstoned, so a topic created again under the same name starts without them. Returns how many offsets
        were removed."""
        manager = self.group_manager
        removed = 0
        for group in list(manager.groups.values()):
            gone = [tp for tp in group.offset_partitions() if tp[0] == topic]
            if not gone:
                continue
            records = [offset_commit_record(group.group_id, t, p, None) for t, p in gone]
            error = manager.append(manager.partition_for(group.group_id), records, self.clock_ms())
            if error != ErrorCode.NONE:
                log.warning("removing offsets of deleted topic %s from group %s failed: %s", topic, group.group_id,
                            error.name)
                continue
            group.remove_offsets(gone)
            removed += len(gone)
        if removed:
            log.info("removed %d committed offsets of deleted topic %s", removed, topic)
        return removed

    # ---- offsets.retention.minutes -------------------------------------------------------------------------

    @staticmethod
    def _offset_expiry_base(group: Group) -> Callable[[OffsetAndMetadata], int] | None:
        """When an offset's retention clock starts, per Kafka's OffsetExpirationCondition; None: never expire."""
        if group.protocol_type is None:
            return lambda o: o.commit_timestamp
        if group.is_empty:
            return lambda o: group.state_timestamp if group.state_timestamp is not None else o.commit_timestamp
        if group.uses_consumer_protocol and group.is_in(GroupState.STABLE) and group.subscribed_topics() is not None:
            return lambda o: o.commit_timestamp
        return None

    def cleanup_group_metadata(self) -> int:
        """Expire offsets past offsets.retention.minutes, but none a transaction holds an offset pending for;
        delete empty groups left without offsets or open transactions. A KIP-848 consumer group keeps the offsets of
        the topics it subscribes to, and goes once it is empty and has no offsets left."""
        manager = self.group_manager
        if not manager.active:
            return 0
        now = self.clock_ms()
        retention = self.config.offsets_retention_ms
        removed = 0
        for group_id, empty_candidate in list(manager.consumer_groups.items()):
            if group_id not in manager.groups and empty_candidate.is_empty():
                error = manager.delete_consumer_group(group_id)
                if error != ErrorCode.NONE:
                    log.warning("deleting empty consumer group %s failed: %s", group_id, error.name)
        for group in list(manager.groups.values()):
            consumer_group = manager.consumer_groups.get(group.group_id)
            base = self._offset_expiry_base(group)
            expired: list[tuple[str, int]] = []
            all_expired = True
            if group.offsets and base is None:
                all_expired = False
            elif group.offsets:
                assert base is not None
                for (topic, partition), value in group.offsets.items():
                    if (group.is_subscribed_to(topic) or group.has_pending_txn_offset((topic, partition))
                            or (consumer_group is not None and consumer_group.is_subscribed_to_topic(topic))):
                        all_expired = False
                        continue
                    if value.expire_timestamp is not None:
                        is_expired = now >= value.expire_timestamp
                    else:
                        is_expired = now - base(value) >= retention
                    if is_expired:
                        expired.append((topic, partition))
                    else:
                        all_expired = False
            if consumer_group is not None and not consumer_group.is_empty():
                all_expired = False  # the consumer group stays, whatever its offsets
            if all_expired and group.is_empty and not group.has_open_transactions:
                # Every offset it has expired: the group goes with them.
                error = (manager.delete_group(group) if consumer_group is None
                         else manager.delete_consumer_group(group.group_id))
                if error != ErrorCode.NONE:
                    log.warning("expiring offsets of group %s failed: %s", group.group_id, error.name)
                    continue
                removed += len(expired)
                log.info("group %s expired and was removed", group.group_id)
                continue
            if not expired:
                continue
            records = [offset_commit_record(group.group_id, topic, p, None) for topic, p in expired]
            error = manager.append(manager.partition_for(group.group_id), records, now)
            if error != ErrorCode.NONE:
                log.warning("expiring offsets of group %s failed: %s", group.group_id, error.name)
                continue
            group.remove_offsets(expired)
            removed += len(expired)
        if removed:
            log.info("expired %d committed offsets", removed)
        return removed
