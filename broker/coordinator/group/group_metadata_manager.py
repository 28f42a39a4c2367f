"""Which groups exist, and what persists them: the group cache, its loading and unloading, stored group metadata.

As Kafka's GroupMetadataManager, it places each group on a partition of `__consumer_offsets` and serves the
groups of the partitions this broker leads: when it becomes a partition's leader the partition is replayed to
rebuild its groups and committed offsets (loaded), and when it stops leading them they are dropped (unloaded); a
group of any other partition is answered NOT_COORDINATOR, so its clients look their coordinator up again. It
writes a group's metadata when a generation completes (tombstones when the group is deleted). The topic is
compacted by the log cleaner, so a replay meets offset gaps, emptied batches and tombstones, and the latest record
of each key still rebuilds the same state. The record formats and the log itself are group_metadata_log's.

An offset record does the same to its group whether it is written now or replayed (apply_offset_commit), as in
Kafka: outside a transaction it is the committed offset; in a producer's transaction it is pending, and the
transaction's marker (written by WriteTxnMarkers, or met in the replay) commits or drops it (Kafka's
handleTxnCompletion). Which groups a producer's open transaction touched is kept per partition, so a marker finds
them without looking at every group.
"""
from __future__ import annotations

import functools
import itertools
import logging
import time
from collections.abc import Callable, Iterable
from typing import Concatenate, ParamSpec, Protocol, TypeVar

from minikafka.broker.coordinator.coordinator_log import partition_for
from minikafka.broker.coordinator.group.consumer import record_helpers
from minikafka.broker.coordinator.group.consumer.consumer_group import ConsumerGroup
from minikafka.broker.coordinator.group.consumer.replay import replay as replay_consumer_group_record
from minikafka.broker.coordinator.group.group import Group, GroupState, Member, OffsetAndMetadata
from minikafka.broker.coordinator.group.group_coordinator_config import GroupCoordinatorConfig
from minikafka.broker.coordinator.group.group_metadata_log import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    Record,
    RecordKey,
    RecordValue,
    Replayed,
    TransactionalRecord,
    TransactionMarker,
    consumer_group_record,
    group_metadata_record,
    offset_commit_record,
)
from minikafka.broker.coordinator.group.share import record_helpers as share_record_helpers
from minikafka.broker.coordinator.group.share.replay import replay as replay_share_group_record
from minikafka.broker.coordinator.group.share.share_group import ShareGroup
from minikafka.protocol.coordinator_records.consumer_group_records import ConsumerGroupRecord, ShareGroupRecord
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.protocol.internal_topics import GROUP_METADATA_TOPIC
from minikafka.protocol.record_batch import NO_PRODUCER_ID

log = logging.getLogger("minikafka.group_metadata_manager")


class MetadataLog(Protocol):
    """Where coordinator records live: `__consumer_offsets` (GroupMetadataLog), or memory in unit tests."""

    def append(self, partition: int, records: list[Record], now_ms: int, *, producer_id: int = ...,
               producer_epoch: int = ...) -> ErrorCode: ...

    def replay(self, partition: int) -> Iterable[Replayed]: ...

    async def wait_replicated(self, partition: int) -> ErrorCode: ...


# The purgatory key of what waits for a group's state, members or generation to change.
GROUPS_CHANGED_KEY = ("groups", "changed")


class _WithGroupManager(Protocol):
    group_manager: GroupMetadataManager


S = TypeVar("S", bound=_WithGroupManager)
P = ParamSpec("P")
R = TypeVar("R")


def changes_groups(method: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], R]:
    """A coordinator entry point that may change a group's state, members or generation: what waits for a group
    looks again once it returns."""
    @functools.wraps(method)
    def changing(self: S, *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(self, *args, **kwargs)
        finally:
            self.group_manager.groups_changed()
    return changing


def committed_offsets_key(group_id: str) -> tuple[str, str]:
    """The purgatory key of what waits for a group's committed offsets to change."""
    return ("group-offsets", group_id)


class GroupMetadataManager:
    """The groups this coordinator serves, and the records in `__consumer_offsets` that rebuild them."""

    def __init__(self, config: GroupCoordinatorConfig, metadata_log: MetadataLog,
                 clock_ms: Callable[[], int]) -> None:
        self.config = config
        self.metadata_log = metadata_log
        self.clock_ms = clock_ms
        self.groups: dict[str, Group] = {}
        # KIP-848 consumer groups, rebuilt only by replaying their records. A classic Group of the same id, if any,
        # has no members: it holds the consumer group's committed offsets.
        self.consumer_groups: dict[str, ConsumerGroup] = {}
        # KIP-932 share groups, rebuilt only by replaying their records (no committed offsets: their progress is
        # the share coordinator's).
        self.share_groups: dict[str, ShareGroup] = {}
        # False until the coordinator starts and after shutdown: every group API then answers
        # COORDINATOR_NOT_AVAILABLE.
        self.active = False
        # Told a group's id whenever its committed offsets may have changed (a commit, a transaction's end, a load):
        # the broker wakes what waits on them.
        self.offsets_changed: Callable[[str], None] = lambda _group_id: None
        # Told whenever a group's state, members or generation may have changed (a group request answered, a timer
        # fired, a rebalance begun, a load): the broker wakes a test's wait for a group.
        self.groups_changed: Callable[[], None] = lambda: None
        # The partitions of `__consumer_offsets` this broker leads, whose groups it has loaded.
        self.owned_partitions: set[int] = set()
        # The order offset records are written or replayed in (OffsetAndMetadata.write_order).
        self._write_order = itertools.count(1)
        # Partition -> producer id -> the groups whose offsets its open transaction committed (Kafka's
        # openGroupsForProducer); an entry goes when the producer's marker comes.
        self._open_transactions: dict[int, dict[int, set[str]]] = {}

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.config.num_partitions)

    def check_active(self, group_id: str | None, allow_empty: bool = False) -> None:
        """COORDINATOR_NOT_AVAILABLE when not serving; INVALID_GROUP_ID for a null (or, for the membership
        APIs, empty) group id, as Kafka checks before a request reaches the group; NOT_COORDINATOR for a group
        of a partition this broker does not lead."""
        if not self.active:
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "the group coordinator is not active")
        if group_id is None or (not group_id and not allow_empty):
            raise KafkaError(ErrorCode.INVALID_GROUP_ID, "group id must not be empty")
        if not self.is_owned(group_id):
            raise KafkaError(ErrorCode.NOT_COORDINATOR, f"this broker is not the coordinator of group {group_id}")

    def is_owned(self, group_id: str) -> bool:
        return self.partition_for(group_id) in self.owned_partitions

    # ---- loading -------------------------------------------------------------------------------------------

    def load_partition(self, partition: int) -> list[Group]:
        """Replay one partition of `__consumer_offsets` and serve its groups; returns the groups loaded."""
        if partition in self.owned_partitions:
            return []
        started = time.monotonic()
        before = set(self.groups)
        consumer_before = set(self.consumer_groups) | set(self.share_groups)
        records = 0
        for replayed in self.metadata_log.replay(partition):
            if isinstance(replayed, ConsumerGroupRecord):
                replay_consumer_group_record(self.consumer_groups, replayed)
            elif isinstance(replayed, ShareGroupRecord):
                replay_share_group_record(self.share_groups, replayed, self.clock_ms())
            elif isinstance(replayed, TransactionMarker):
                self._complete_transaction(partition, replayed.producer_id, replayed.commit)
            elif isinstance(replayed, TransactionalRecord):
                self._replay(replayed.key, replayed.value, replayed.producer_id)
            else:
                self._replay(*replayed)
            records += 1
        self.owned_partitions.add(partition)
        loaded = [group for group_id, group in self.groups.items() if group_id not in before]
        for group in loaded:
            self.offsets_changed(group.group_id)
        self.groups_changed()
        # A consumer group's offsets are held by a classic group of the same id: one group, counted once.
        loaded_ids = {g.group_id for g in loaded} | (set(self.consumer_groups) | set(self.share_groups)).difference(
            consumer_before)
        level = logging.INFO if records else logging.DEBUG  # a broker starts with dozens of empty partitions
        log.log(level, "loaded %d groups from %d coordinator records of %s-%d in %.0f ms",
                len(loaded_ids), records, GROUP_METADATA_TOPIC, partition,
                1000 * (time.monotonic() - started))
        return loaded

    def unload_partition(self, partition: int) -> list[Group]:
        """Stop serving one partition's groups (another broker leads it now); returns the groups dropped."""
        if partition not in self.owned_partitions:
            return []
        self.owned_partitions.discard(partition)
        dropped = [group for group_id, group in self.groups.items() if self.partition_for(group_id) == partition]
        for group in dropped:
            del self.groups[group.group_id]
        for group_id in [g for g in self.consumer_groups if self.partition_for(g) == partition]:
            del self.consumer_groups[group_id]
        for group_id in [g for g in self.share_groups if self.partition_for(g) == partition]:
            del self.share_groups[group_id]
        self._open_transactions.pop(partition, None)
        log.log(logging.INFO if dropped else logging.DEBUG, "unloaded %d groups of %s-%d", len(dropped),
                GROUP_METADATA_TOPIC, partition)
        return dropped

    def _replay(self, key: RecordKey, value: RecordValue, producer_id: int = NO_PRODUCER_ID) -> None:
        if isinstance(key, OffsetCommitKey):
            group = self.groups.get(key.group)
            if value is None:
                if group is not None:
                    group.remove_offsets([(key.topic, key.partition)])
                return
            assert not isinstance(value, GroupMetadataValue)  # an offset key decodes to an offset value
            if group is None:
                group = self.groups[key.group] = Group(key.group, self.clock_ms())
            self.apply_offset_commit(group, (key.topic, key.partition), value, producer_id)
        elif isinstance(key, GroupMetadataKey):
            previous = self.groups.pop(key.group, None)
            if value is None:
                if previous is not None and (previous.offsets or any(previous.pending_txn_offsets.values())):
                    # The group became a consumer group: its committed offsets stay (a deleted group's offset
                    # tombstones come first, leaving nothing here).
                    self.groups[key.group] = _offsets_holder(previous, self.clock_ms())
                return
            assert isinstance(value, GroupMetadataValue)  # a group key decodes to a group value
            try:
                group = self._group_from_record(key.group, value)
            except ValueError as exc:
                log.error("group %s: unusable stored membership (%s); loading it without members", key.group, exc)
                group = Group(key.group, self.clock_ms(), GroupState.EMPTY, value.generation,
                              value.protocol_type or None)
            if previous is not None:
                group.offsets = previous.offsets
                group.pending_txn_offsets = previous.pending_txn_offsets
            self.groups[key.group] = group

    def _group_from_record(self, group_id: str, value: GroupMetadataValue) -> Group:
        members = value.members if value.protocol is not None else []
        group = Group(group_id, self.clock_ms(), GroupState.STABLE if members else GroupState.EMPTY,
                      value.generation, value.protocol_type or None, value.protocol, value.leader,
                      None if value.current_state_timestamp == -1 else value.current_state_timestamp)
        for m in members:
            assert value.protocol is not None  # members are loaded only with a selected protocol
            rebalance_timeout = m.session_timeout if m.rebalance_timeout == -1 else m.rebalance_timeout
            group.add(Member(m.member_id, m.group_instance_id, m.client_id, m.client_host, rebalance_timeout,
                             m.session_timeout, value.protocol_type, [(value.protocol, m.subscription)],
                             m.assignment))
        if value.leader is not None:
            group.leader_id = value.leader
        return group

    # ---- offsets and transactions ---------------------------------------------------------------------------

    def apply_offset_commit(self, group: Group, tp: tuple[str, int], value: OffsetAndMetadata,
                            producer_id: int = NO_PRODUCER_ID) -> None:
        """What a written offset commit record does, whether just written or replayed: outside a transaction it is
        the group's committed offset, in `producer_id`'s transaction it is pending until the transaction ends."""
        value.write_order = next(self._write_order)
        if producer_id == NO_PRODUCER_ID:
            group.offsets[tp] = value
            self.offsets_changed(group.group_id)
            return
        group.pending_txn_offsets.setdefault(producer_id, {})[tp] = value
        by_producer = self._open_transactions.setdefault(self.partition_for(group.group_id), {})
        by_producer.setdefault(producer_id, set()).add(group.group_id)

    def handle_txn_completion(self, producer_id: int, partitions: Iterable[int], commit: bool) -> None:
        """A COMMIT or ABORT marker of the producer was written to these partitions: its offsets pending in their
        groups become committed offsets or are dropped. Partitions this broker does not lead are not its to end."""
        for partition in partitions:
            if partition in self.owned_partitions:
                self._complete_transaction(partition, producer_id, commit)

    def _complete_transaction(self, partition: int, producer_id: int, commit: bool) -> None:
        for group_id in self._open_transactions.get(partition, {}).pop(producer_id, set()):
            group = self.groups.get(group_id)
            if group is not None:  # a group deleted meanwhile took its pending offsets with it
                group.complete_pending_txn_offset_commit(producer_id, commit)
                self.offsets_changed(group_id)

    # ---- storing -------------------------------------------------------------------------------------------

    def append(self, partition: int, records: list[Record], now_ms: int) -> ErrorCode:
        """Write records to one partition of the log; NONE, or the group API error to answer."""
        return self.metadata_log.append(partition, records, now_ms)

    def append_transactional(self, partition: int, records: list[Record], now_ms: int, producer_id: int,
                             producer_epoch: int) -> ErrorCode:
        """Write records to one partition as a batch of the producer's transaction; NONE, or the error to answer
        (an older producer epoch than the partition has seen is refused, INVALID_PRODUCER_EPOCH)."""
        return self.metadata_log.append(partition, records, now_ms, producer_id=producer_id,
                                        producer_epoch=producer_epoch)

    def append_consumer_group_records(self, group_id: str, records: list[ConsumerGroupRecord]) -> None:
        """Write consumer group records to the group's partition, then apply them by replay (so the groups are
        always what the log rebuilds); KafkaError when the write fails, and then nothing changes."""
        if not records:
            return
        error = self.append(self.partition_for(group_id), [consumer_group_record(r) for r in records],
                            self.clock_ms())
        if error != ErrorCode.NONE:
            raise KafkaError(error, f"storing the records of consumer group {group_id} failed")
        for record in records:
            replay_consumer_group_record(self.consumer_groups, record)

    def append_share_group_records(self, group_id: str, records: list[ShareGroupRecord]) -> None:
        """Write share group records to the group's partition, then apply them by replay; KafkaError when the
        write fails, and then nothing changes."""
        if not records:
            return
        error = self.append(self.partition_for(group_id), [consumer_group_record(r) for r in records],
                            self.clock_ms())
        if error != ErrorCode.NONE:
            raise KafkaError(error, f"storing the records of share group {group_id} failed")
        for record in records:
            replay_share_group_record(self.share_groups, record, self.clock_ms())

    def delete_share_group(self, group_id: str) -> ErrorCode:
        """Tombstone an empty share group (Kafka's group tombstones); nothing changes if writing fails."""
        group = self.share_groups[group_id]
        tombstones = share_record_helpers.group_tombstone_records(group_id, list(group.members))
        error = self.append(self.partition_for(group_id), [consumer_group_record(r) for r in tombstones],
                            self.clock_ms())
        if error == ErrorCode.NONE:
            for record in tombstones:
                replay_share_group_record(self.share_groups, record)
        return error

    async def wait_replicated(self, group_id: str) -> ErrorCode:
        """Wait until the writes made so far to the group's partition are committed: a request that wrote
        answers only then (NONE, or the group API error), while its state changes stay as made."""
        return await self.metadata_log.wait_replicated(self.partition_for(group_id))

    def store_group(self, group: Group, assignment: dict[str, bytes]) -> ErrorCode:
        """Persist the group's generation, members and their assignments (Kafka's GroupMetadataValue)."""
        value = self._group_metadata(group, assignment)
        return self.append(self.partition_for(group.group_id), [group_metadata_record(group.group_id, value)],
                           self.clock_ms())

    def _group_metadata(self, group: Group, assignment: dict[str, bytes]) -> GroupMetadataValue:
        members = [MemberMetadata(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                  m.rebalance_timeout_ms, m.session_timeout_ms, m.metadata(group.protocol_name),
                                  assignment.get(m.member_id, b""))
                   for m in group.members.values()]
        return GroupMetadataValue(group.protocol_type or "", group.generation_id, group.protocol_name,
                                  group.leader_id, group.state_timestamp if group.state_timestamp is not None else -1,
                                  members)

    def delete_group(self, group: Group) -> ErrorCode:
        """Tombstone the group and all its offsets, committed or pending in a transaction, then forget it; nothing
        changes if writing fails."""
        records = [offset_commit_record(group.group_id, topic, p, None) for topic, p in group.offset_partitions()]
        records.append(group_metadata_record(group.group_id, None))
        error = self.append(self.partition_for(group.group_id), records, self.clock_ms())
        if error == ErrorCode.NONE:
            group.transition_to(GroupState.DEAD, self.clock_ms())
            group.offsets.clear()
            group.pending_txn_offsets.clear()
            self.groups.pop(group.group_id, None)
        return error

    def delete_consumer_group(self, group_id: str, keep_offsets: bool = False) -> ErrorCode:
        """Tombstone a KIP-848 consumer group (Kafka's group tombstones) and, unless kept (the group becoming a
        classic one), its committed offsets; nothing changes if writing fails."""
        group = self.consumer_groups[group_id]
        holder = None if keep_offsets else self.groups.get(group_id)
        records = [] if holder is None else [offset_commit_record(group_id, topic, p, None)
                                             for topic, p in holder.offset_partitions()]
        if holder is not None:
            # Its replay drops the classic group that held the offsets.
            records.append(group_metadata_record(group_id, None))
        tombstones = record_helpers.group_tombstone_records(group_id, list(group.members),
                                                             list(group.resolved_regular_expressions))
        records += [consumer_group_record(r) for r in tombstones]
        error = self.append(self.partition_for(group_id), records, self.clock_ms())
        if error == ErrorCode.NONE:
            for record in tombstones:
                replay_consumer_group_record(self.consumer_groups, record)
            if holder is not None:
                holder.offsets.clear()
                holder.pending_txn_offsets.clear()
                self.groups.pop(group_id, None)
        return error

    def upgrade_to_consumer_group(self, classic: Group, records: list[ConsumerGroupRecord]) -> None:
        """Write, as one batch, the classic group's tombstone and the records creating the consumer group it
        becomes, then apply them: the classic group keeps only its committed offsets. KafkaError when the write
        fails, and then nothing changes."""
        group_id = classic.group_id
        batch = [group_metadata_record(group_id, None)] + [consumer_group_record(r) for r in records]
        error = self.append(self.partition_for(group_id), batch, self.clock_ms())
        if error != ErrorCode.NONE:
            raise KafkaError(error, f"storing the upgrade of classic group {group_id} failed")
        self.groups[group_id] = _offsets_holder(classic, self.clock_ms())
        for record in records:
            replay_consumer_group_record(self.consumer_groups, record)

    def downgrade_to_classic_group(self, classic: Group, tombstones: list[ConsumerGroupRecord]) -> None:
        """Write, as one batch, the consumer group's tombstones and the classic group it becomes (members and
        assignments), then apply them: `classic` takes over the committed offsets. KafkaError when the write
        fails, and then nothing changes."""
        group_id = classic.group_id
        value = self._group_metadata(classic, classic.assignments())
        batch = [consumer_group_record(r) for r in tombstones] + [group_metadata_record(group_id, value)]
        error = self.append(self.partition_for(group_id), batch, self.clock_ms())
        if error != ErrorCode.NONE:
            raise KafkaError(error, f"storing the downgrade of consumer group {group_id} failed")
        for record in tombstones:
            replay_consumer_group_record(self.consumer_groups, record)
        holder = self.groups.get(group_id)
        if holder is not None:
            classic.offsets = holder.offsets
            classic.pending_txn_offsets = holder.pending_txn_offsets
        self.groups[group_id] = classic


def _offsets_holder(group: Group, now_ms: int) -> Group:
    """A memberless classic group holding `group`'s committed offsets (and offsets pending in transactions)."""
    holder = Group(group.group_id, now_ms)
    holder.offsets = group.offsets
    holder.pending_txn_offsets = group.pending_txn_offsets
    return holder
