"""The controller of a quorum of one (Kafka's QuorumController): the one writer of the cluster metadata.

Its state is a metadata store (metadata_store): in KRaft mode the metadata log (`__cluster_metadata-0`), in
ZooKeeper mode Kafka's znodes; replayed into a metadata image when it opens, so a controller restarted after kill -9
holds exactly what was committed. Operations run one at a time, each as
validate against the image, build the records, append them as one batch and fsync (on a worker thread), replay
them into the image, and wake whoever waits for new metadata (brokers' long-poll fetches): a change is durable
before anyone sees it, and all of an operation's records land or none do. An append that fails (a full disk) leaves
the log and the image as they were and fails the operation with KAFKA_STORAGE_ERROR, the code of the exception
Kafka's log raises on an I/O failure, which its controller hands to the caller unchanged.

Open it inside trio: broker sessions run on trio's clock. `run()` keeps the background duties (fencing brokers
whose sessions end, the preferred-leader rebalance) until cancelled. In ZooKeeper mode there are no broker sessions
(`broker_sessions=False`): a broker is live while its /brokers/ids znode is, and the ZooKeeper controller tells this
one so through `sync_live_brokers`.
"""
from __future__ import annotations

import logging
import uuid
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import trio

from minikafka.broker.controller.acl_control import create_acls, delete_acls
from minikafka.broker.controller.broker_heartbeat_manager import BrokerControlState, BrokerHeartbeatManager
from minikafka.broker.controller.client_quota_control import ClientQuotaAlteration, alter_client_quotas
from minikafka.broker.controller.cluster_control import (
    BrokerRegistration,
    ClusterControlManager,
    HeartbeatReply,
    LiveBroker,
)
from minikafka.broker.controller.configuration_control import (
    UNCLEAN_LEADER_ELECTION,
    ConfigAlteration,
    broker_config_records,
    check_no_duplicates,
    config_records,
    group_config_records,
    incrementally_altered,
    replaced,
    unclean_leader_election_enabled,
    validate_topic_configs,
)
from minikafka.broker.controller.controller_config import QuorumControllerConfig
from minikafka.broker.controller.leader_move import leader_move
from minikafka.broker.controller.metadata_store import MetadataLogStore, MetadataStore
from minikafka.broker.controller.partition_reassignment import (
    OngoingPartitionReassignment,
    PartitionReassignment,
    ReassignablePartition,
)
from minikafka.broker.controller.producer_id_control import ProducerIdControlManager
from minikafka.broker.controller.replica_placer import StripedReplicaPlacer
from minikafka.broker.controller.replication_control import (
    MAX_RECORDS_PER_USER_OP,
    PREFERRED_ELECTION,
    UNCLEAN_ELECTION,
    CreatedTopic,
    IsrChange,
    NewTopic,
    OperationTooLargeError,
    ReplicationControl,
    partitions_named,
)
from minikafka.broker.controller.scram_control import (
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
    alter_scram_credentials,
)
from minikafka.broker.metadata.features import feature_update_error
from minikafka.broker.metadata.metadata_image import (
    BROKER_RESOURCE,
    GROUP_RESOURCE,
    TOPIC_RESOURCE,
    MetadataChange,
    MetadataImage,
    PartitionInfo,
)
from minikafka.broker.security.acl import AclBinding, AclBindingFilter
from minikafka.config import ConfigError
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.protocol.metadata_records import (
    FeatureLevelRecord,
    MetadataRecord,
    MetadataRecordError,
    RegisterBrokerRecord,
    UnregisterBrokerRecord,
)
from minikafka.storage.errors import KafkaStorageError
from minikafka.storage.log_dir import LogDir
from minikafka.storage.metadata_log import MetadataLog

log = logging.getLogger("minikafka.controller")

COMMIT_RETRY_BACKOFF_S = 1.0  # a background duty whose commit failed tries again after this
OFF_LOOP_PARTITIONS = 1000  # requests placing more new partitions are checked and built on a worker thread
REPLAY_STEP = 1000  # records replayed into the image between checkpoints, so a big commit lets other tasks run

T = TypeVar("T")
# Told of every commit once it is replayed: the records and what they changed in the image.
CommitListener = Callable[[Sequence[MetadataRecord], MetadataChange], None]


@dataclass(frozen=True)
class DeletedTopic:
    name: str | None
    topic_id: uuid.UUID | None
    error: KafkaError | None


@dataclass(frozen=True)
class NewPartitions:
    name: str
    count: int
    assignments: list[list[int]] | None


@dataclass(frozen=True)
class ConfigResourceAlteration:
    resource_type: int
    resource_name: str
    alterations: list[ConfigAlteration]


@dataclass(frozen=True)
class IsrChangeResult:
    change: IsrChange
    error: ErrorCode
    state: PartitionInfo | None  # the partition's state after the change, when accepted


@dataclass(frozen=True)
class TopicIsrChanges:
    """The partitions of one topic in an AlterPartition request, named by id (v2+) or by name."""

    topic_name: str | None
    topic_id: uuid.UUID | None
    changes: list[IsrChange]


@dataclass(frozen=True)
class ElectionResult:
    topic: str
    index: int
    error: ErrorCode
    message: str | None


class QuorumController:
    def __init__(self, config: QuorumControllerConfig, store: MetadataStore, cluster_id: str, *,
                 broker_sessions: bool = True, image: MetadataImage | None = None) -> None:
        """`broker_sessions`: brokers heartbeat and are fenced when they stop (KRaft); without, their liveness is
        told through `sync_live_brokers` (ZooKeeper). `image`: the image to replay into (a fresh one by
        default)."""
        self.config = config
        self.cluster_id = cluster_id
        self.node_id = config.node_id
        self._store = store
        self._broker_sessions = broker_sessions
        self.image = image if image is not None else MetadataImage()
        self.heartbeats = BrokerHeartbeatManager(self.image, config.broker_session_timeout_ms)
        self.cluster = ClusterControlManager(self.image, cluster_id, self.heartbeats)
        self.producer_ids = ProducerIdControlManager(self.image)
        # KIP-903's broker epochs in AlterPartition's ISRs are KRaft's: Kafka's ZooKeeper controller checks liveness.
        self.replication = ReplicationControl(self.image, config, StripedReplicaPlacer(), store.marked_for_deletion,
                                              isr_broker_epochs=broker_sessions)
        self.reassignment = PartitionReassignment(self.image, config)
        self.commit_listeners: list[CommitListener] = []
        self._lock = trio.Lock()  # one operation at a time
        self._appended = trio.Event()
        self._commits_failing = False  # the last commit failed: logged once until one succeeds
        for entry in store.load():
            self._replay(entry.record, entry.offset, entry.controller_epoch)
        self.image.controller_epoch = store.controller_epoch
        self._end_offset = store.end_offset
        log.info("controller %d loaded its metadata up to offset %d in epoch %d: %d broker(s), %d topic(s)",
                 self.node_id, self._end_offset, self.image.controller_epoch, len(self.image.brokers),
                 len(self.image.topics))

    @classmethod
    def open(cls, config: QuorumControllerConfig, metadata_dir: Path) -> QuorumController:
        """Open (or create) the metadata log in `metadata_dir` and replay it; the directory's meta.properties
        holds the cluster id (`config.cluster_id` must match it, and is written there on first start)."""
        try:
            cluster_id, _directory_id = LogDir(metadata_dir).load_or_create_meta(config.node_id, config.cluster_id)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        metadata_log = MetadataLog.open(metadata_dir)
        try:
            return cls(config, MetadataLogStore(metadata_log), cluster_id)
        except MetadataRecordError as exc:  # Kafka's controller stops at a record it cannot load, too
            metadata_log.close()
            raise KafkaStorageError(f"Error while replaying the metadata log {metadata_log.dir}: {exc}") from None
        except BaseException:
            metadata_log.close()
            raise

    def close(self) -> None:
        self._store.close()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Fence brokers whose sessions end and rebalance leaders, until cancelled."""
        async with trio.open_nursery() as nursery:
            if self._broker_sessions:
                nursery.start_soon(self.heartbeats.run, self.fence_if_stale)
            if self.config.auto_leader_rebalance_enable:
                nursery.start_soon(self._rebalance_periodically)
            task_status.started()

    # ---- the metadata log ----------------------------------------------------------------------------------------

    @property
    def log_end_offset(self) -> int:
        """One past the last committed record: the high watermark of `__cluster_metadata-0`."""
        return self._end_offset

    @property
    def log_start_offset(self) -> int:
        return self._metadata_log().log_start_offset

    def _metadata_log(self) -> MetadataLogStore:
        if not isinstance(self._store, MetadataLogStore):
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "this controller keeps no metadata log")
        return self._store

    async def read_metadata(self, offset: int, max_bytes: int) -> bytes:
        """Committed record batches from `offset`, for a metadata fetch; OFFSET_OUT_OF_RANGE outside the log."""
        store = self._metadata_log()
        if not store.log_start_offset <= offset <= self._end_offset:
            raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE,
                             f"offset {offset} is outside [{store.log_start_offset}, {self._end_offset}]")
        return await store.read(offset, max_bytes)

    async def wait_for_records(self, offset: int, deadline: float) -> bool:
        """Wait, until `deadline` on trio's clock, for a record at `offset` or later to be committed."""
        with trio.move_on_at(deadline):
            while self._end_offset <= offset:
                await self._appended.wait()
        return self._end_offset > offset

    async def _commit_each(self, records: Sequence[MetadataRecord], results: list[KafkaError | None],
                           validate_only: bool = False) -> list[KafkaError | None]:
        """Commit the records of a request whose items succeed or fail one by one (unless it only validates);
        when the commit fails, so does every item that had not failed already."""
        if records and not validate_only:
            try:
                await self._commit(records)
            except KafkaStorageError as exc:
                return [error or exc for error in results]
        return results

    async def _commit(self, records: Sequence[MetadataRecord]) -> int:
        """Append `records` as one durable batch, then replay them; returns the offset of the first. A failed
        append (KafkaStorageError from the log; ControllerMovedError from ZooKeeper, once this controller is
        deposed) changes nothing: the store is as it was and nothing is replayed."""
        try:
            last = await self._store.append(records)
        except KafkaStorageError as exc:
            if not self._commits_failing:
                self._commits_failing = True
                log.error("controller %d could not commit %d metadata record(s), nothing changed: %s (logged "
                          "once until a commit succeeds)", self.node_id, len(records), exc)
            raise
        if self._commits_failing:
            self._commits_failing = False
            log.info("controller %d commits metadata records again", self.node_id)
        first = last - len(records) + 1
        change = MetadataChange()
        with trio.CancelScope(shield=True):  # the image takes every record the store took
            for i, record in enumerate(records):
                if i and i % REPLAY_STEP == 0:
                    await trio.lowlevel.checkpoint()
                replayed = self._replay(record, first + i, self._store.controller_epoch)
                if replayed is not None:
                    change.merge(replayed)
        self._end_offset = last + 1
        appended, self._appended = self._appended, trio.Event()
        appended.set()
        for listener in self.commit_listeners:
            listener(records, change)
        return first

    def _replay(self, record: MetadataRecord, offset: int, controller_epoch: int) -> MetadataChange | None:
        if isinstance(record, RegisterBrokerRecord):
            previous = self.image.brokers.get(record.broker_id)
            new_incarnation = previous is None or previous.incarnation_id != record.incarnation_id
            change = self.image.replay(record, offset, controller_epoch)
            self.heartbeats.registered(record.broker_id, offset, new_incarnation)
            return change
        change = self.image.replay(record, offset, controller_epoch)
        if isinstance(record, UnregisterBrokerRecord):
            self.heartbeats.unregistered(record.broker_id)
        return change

    # ---- brokers ---------------------------------------------------------------------------------------------

    async def register_broker(self, registration: BrokerRegistration, connection_id: int | None = None) -> int:
        """Register a broker (fenced until it catches up) and return its broker epoch: the offset of its
        RegisterBrokerRecord. A new incarnation of a registered broker id replaces the old one, whose replicas
        leave their ISRs first (it may have lost what it had not flushed); the same incarnation registering again
        keeps its epoch and state."""
        async with self._lock:
            broker_id = registration.broker_id
            existing = self.cluster.check_registration(registration)
            same_incarnation = existing is not None and existing.incarnation_id == registration.incarnation_id
            records: list[MetadataRecord] = []
            if existing is not None and same_incarnation:
                epoch, fenced, in_shutdown = existing.broker_epoch, existing.fenced, existing.in_controlled_shutdown
            else:
                if existing is not None and not existing.fenced:
                    records += self.replication.remove_from_isrs(broker_id)
                epoch, fenced, in_shutdown = self._end_offset + len(records), True, False
            records.append(self.cluster.register_broker_record(registration, epoch, fenced, in_shutdown))
            await self._commit(records)
            self.heartbeats.touch(broker_id, -1, connection_id)
            log.info("registered broker %d (incarnation %s) with broker epoch %d", broker_id,
                     registration.incarnation_id, epoch)
            return epoch

    async def heartbeat(self, broker_id: int, broker_epoch: int, metadata_offset: int, *, want_fence: bool = False,
                        want_shut_down: bool = False, connection_id: int | None = None) -> HeartbeatReply:
        """Keep a broker's session, and move it between fenced, unfenced and controlled shutdown as it asks."""
        async with self._lock:
            broker = self.cluster.check_broker_epoch(broker_id, broker_epoch)
            current, after = self.heartbeats.next_state(broker, want_fence, want_shut_down, metadata_offset,
                                                        lambda: self.replication.has_leaderships(broker_id))
            records: list[MetadataRecord] = []
            if after is not current:
                if after.fenced and not broker.fenced:
                    log.info("fencing broker %d at its request", broker_id)
                    records = self.replication.broker_fenced(broker_id)
                elif after is BrokerControlState.UNFENCED:
                    log.info("unfencing broker %d: it has replayed the metadata log to offset %d", broker_id,
                             metadata_offset)
                    records = self.replication.broker_unfenced(broker_id)
                elif after is BrokerControlState.CONTROLLED_SHUTDOWN:
                    log.info("broker %d begins a controlled shutdown", broker_id)
                    records = self.replication.broker_in_controlled_shutdown(broker_id)
            if records:
                await self._commit(records)
            if after is BrokerControlState.CONTROLLED_SHUTDOWN and current is not after:
                self.heartbeats.began_controlled_shutdown(broker_id, self._end_offset - 1)
            self.heartbeats.touch(broker_id, metadata_offset, connection_id)
            session = self.heartbeats.sessions[broker_id]
            return HeartbeatReply(is_caught_up=metadata_offset >= session.registration_offset,
                                  is_fenced=after.fenced,
                                  should_shut_down=after is BrokerControlState.SHUTDOWN_NOW)

    async def fence_if_stale(self, broker_id: int) -> None:
        """Fence a broker whose session has ended (timed out, or its connection closed), unless it heartbeat
        again meanwhile."""
        async with self._lock:
            if broker_id not in self.heartbeats.stale_brokers():
                return
            if self.heartbeats.session_lost_by_close(broker_id):
                log.info("fencing broker %d: its controller connection closed", broker_id)
            else:
                log.info("fencing broker %d: no heartbeat for %d ms", broker_id,
                         self.config.broker_session_timeout_ms)
            try:
                await self._commit(self.replication.broker_fenced(broker_id))
            except KafkaStorageError:
                pass  # logged by _commit
            else:
                return
        # Still stale, so the heartbeat manager asks again at once: not before the backoff.
        await trio.sleep(COMMIT_RETRY_BACKOFF_S)

    # ---- brokers whose liveness ZooKeeper keeps ----------------------------------------------------------------

    async def sync_live_brokers(self, live: Mapping[int, LiveBroker]) -> None:
        """Bring the image's brokers to `live` (ZooKeeper's /brokers/ids), by KRaft's rules for fencing and
        unfencing: a broker gone is unregistered and leaves every ISR and leadership (an ISR is never emptied); a
        broker new, or back under a new epoch (it may have lost what it had not flushed), is registered fenced,
        leaves the ISRs an old incarnation held, and is then unfenced, electing it where it can lead an offline
        partition. Partitions led by, or with ISR members among, brokers no longer live get their changes too
        (what a controller taking over finds)."""
        async with self._lock:
            brokers, joining = self.cluster.live_broker_records(live)
            if brokers:
                await self._commit(brokers)
            offline = self.replication.inactive_replica_changes()
            if offline:
                await self._commit(offline)
            for broker_id in joining:
                await self._commit(self.replication.broker_unfenced(broker_id))

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> list[tuple[str, int]]:
        """A broker asks to shut down (ControlledShutdown, ZooKeeper mode): it enters controlled shutdown and
        leaves every ISR it is not the last member of, so its leaderships move; returns the partitions it still
        leads (the broker asks again until none)."""
        async with self._lock:
            broker = self.cluster.check_broker_epoch(broker_id, broker_epoch)
            records: list[MetadataRecord] = []
            if not broker.in_controlled_shutdown:
                log.info("broker %d begins a controlled shutdown", broker_id)
                records = self.replication.broker_in_controlled_shutdown(broker_id)
            else:
                records = self.replication.remove_from_isrs(broker_id)
            if records:
                await self._commit(records)
            return [(topic.name, index) for topic, index, partition in self.image.partitions()
                    if partition.leader == broker_id]

    async def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> tuple[int, int]:
        """(first id, count) of a new block of producer ids, durable before it is handed out."""
        async with self._lock:
            self.cluster.check_broker_epoch(broker_id, broker_epoch)
            record, start, count = self.producer_ids.generate_next_producer_id(broker_id, broker_epoch)
            await self._commit([record])
            return start, count

    async def replicas_offline(self, broker_id: int, broker_epoch: int,
                               replicas: Collection[tuple[uuid.UUID, int]]) -> None:
        """The broker lost these replicas with a failed log dir: it leaves their ISRs and their leaderships move to
        other ISR members, its other replicas untouched (Kafka's handleDirectoriesOffline)."""
        async with self._lock:
            self.cluster.check_broker_epoch(broker_id, broker_epoch)
            records = self.replication.remove_from_isrs(broker_id, set(replicas))
            log.info("broker %d lost %d replicas with a failed log dir: %d partition changes", broker_id,
                     len(replicas), len(records))
            if records:
                await self._commit(records)

    # ---- topics and partitions ---------------------------------------------------------------------------------

    async def create_topics(self, topics: Sequence[NewTopic],
                            validate_only: bool = False) -> list[CreatedTopic | KafkaError]:
        """Create each topic, or say why not; with `validate_only`, only say. A request that would write more
        than MAX_RECORDS_PER_USER_OP records fails as a whole, as Kafka's does (POLICY_VIOLATION for each topic)."""
        async with self._lock:
            try:
                records, results = await self._build(sum(max(t.num_partitions, len(t.assignments)) for t in topics),
                                                     lambda: self._new_topic_records(topics))
            except OperationTooLargeError as exc:
                return [exc] * len(topics)
            if records and not validate_only:
                try:
                    await self._commit(records)
                except KafkaStorageError as exc:
                    return [exc if isinstance(result, CreatedTopic) else result for result in results]
                for result in results:
                    if isinstance(result, CreatedTopic):
                        log.info("created topic %s with %d partition(s), replication factor %d (id %s)",
                                 result.name, result.num_partitions, result.replication_factor, result.topic_id)
            return results

    def _new_topic_records(self, topics: Sequence[NewTopic]) -> tuple[list[MetadataRecord],
                                                                       list[CreatedTopic | KafkaError]]:
        """The records creating `topics`, and each topic's outcome; OperationTooLargeError for a request over
        MAX_RECORDS_PER_USER_OP records."""
        records: list[MetadataRecord] = []
        results: list[CreatedTopic | KafkaError] = []
        for topic in topics:
            try:
                topic_records, created = self.replication.create_topic(topic, MAX_RECORDS_PER_USER_OP - len(records))
            except OperationTooLargeError:
                raise
            except KafkaError as exc:
                results.append(exc)
                continue
            records += topic_records
            results.append(created)
        return records, results

    async def _build(self, partitions: int, build: Callable[[], T]) -> T:
        """`build()` (checks and records for new partitions), on a worker thread when it places more than
        OFF_LOOP_PARTITIONS partitions, which would hold the event loop tens of ms per thousand. The image it
        reads changes only under the controller's lock, which the caller holds."""
        if partitions > OFF_LOOP_PARTITIONS:
            return await trio.to_thread.run_sync(build)
        return build()

    async def delete_topics(self, targets: Sequence[tuple[str | None, uuid.UUID | None]]) -> list[DeletedTopic]:
        """Delete topics named by name or (when given) by id: UNKNOWN_TOPIC_OR_PARTITION / UNKNOWN_TOPIC_ID for
        those that do not exist, TOPIC_DELETION_DISABLED for the others when delete.topic.enable is false."""
        async with self._lock:
            records: list[MetadataRecord] = []
            results = []
            found = [(name, topic_id, self.image.topics_by_id.get(topic_id) if topic_id is not None else
                      self.image.topics.get(name) if name is not None else None) for name, topic_id in targets]
            # As Kafka, a topic named more than once (by name, by id, or both) is not deleted: INVALID_REQUEST.
            times_named = Counter(topic.topic_id for _name, _topic_id, topic in found if topic is not None)
            for name, topic_id, topic in found:
                if topic is None:
                    results.append(DeletedTopic(name, topic_id, KafkaError(
                        ErrorCode.UNKNOWN_TOPIC_ID if topic_id is not None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)))
                elif times_named[topic.topic_id] > 1:
                    results.append(DeletedTopic(name, topic_id, KafkaError(
                        ErrorCode.INVALID_REQUEST, "Duplicate topic id." if topic_id is not None else
                        "Duplicate topic name.")))
                elif not self.config.delete_topic_enable:
                    results.append(DeletedTopic(topic.name, topic.topic_id,
                                                KafkaError(ErrorCode.TOPIC_DELETION_DISABLED,
                                                           "Topic deletion is disabled.")))
                else:
                    records += self.replication.delete_topic(topic)
                    results.append(DeletedTopic(topic.name, topic.topic_id, None))
            if records:
                try:
                    await self._commit(records)
                except KafkaStorageError as exc:
                    return [DeletedTopic(r.name, r.topic_id, r.error or exc) for r in results]
                for result in results:
                    if result.error is None:
                        log.info("deleted topic %s (id %s)", result.name, result.topic_id)
            return results

    async def create_partitions(self, requests: Sequence[NewPartitions],
                                validate_only: bool = False) -> list[KafkaError | None]:
        """Grow each topic, or say why not; a topic whose new partitions would take the request past
        MAX_RECORDS_PER_USER_OP records is refused (POLICY_VIOLATION) and adds none."""
        async with self._lock:
            records, results = await self._build(sum(r.count for r in requests),
                                                 lambda: self._new_partition_records(requests))
            return await self._commit_each(records, results, validate_only)

    def _new_partition_records(self, requests: Sequence[NewPartitions]) -> tuple[list[MetadataRecord],
                                                                                  list[KafkaError | None]]:
        records: list[MetadataRecord] = []
        results: list[KafkaError | None] = []
        for request in requests:
            try:
                records += self.replication.create_partitions(request.name, request.count, request.assignments,
                                                              MAX_RECORDS_PER_USER_OP - len(records))
                results.append(None)
            except KafkaError as exc:
                results.append(exc)
        return records, results

    async def alter_configs(self, resources: Sequence[ConfigResourceAlteration], *, incremental: bool,
                            validate_only: bool = False) -> list[KafkaError | None]:
        """Alter topic configs, dynamic broker configs and group configs: incrementally (SET, DELETE, APPEND,
        SUBTRACT) or, for the legacy AlterConfigs, replacing all of a resource's configs. Enabling unclean leader
        election elects leaders for the topic's offline partitions at once."""
        async with self._lock:
            records: list[MetadataRecord] = []
            results: list[KafkaError | None] = []
            for resource in resources:
                try:
                    records += self._alter_resource_configs(resource, incremental)
                    results.append(None)
                except KafkaError as exc:
                    results.append(exc)
            return await self._commit_each(records, results, validate_only)

    def _alter_resource_configs(self, resource: ConfigResourceAlteration, incremental: bool) -> list[MetadataRecord]:
        if resource.resource_type == BROKER_RESOURCE:  # dynamic broker configs
            return list(broker_config_records(self.image, resource.resource_name, resource.alterations, incremental))
        if resource.resource_type == GROUP_RESOURCE:
            return list(group_config_records(self.image, resource.resource_name, resource.alterations, incremental,
                                             self.config.group_config_defaults))
        if resource.resource_type != TOPIC_RESOURCE:
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             f"altering configs of resource type {resource.resource_type} is not supported")
        topic = self.image.topics.get(resource.resource_name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {resource.resource_name} does not exist")
        check_no_duplicates(resource.alterations)
        defaults = self.config.log_defaults
        current = self.image.topic_configs.get(topic.name, {})
        new = (incrementally_altered(current, defaults, resource.alterations) if incremental
               else replaced(resource.alterations))
        effective = validate_topic_configs(new, defaults)
        records: list[MetadataRecord] = list(config_records(topic.name, current, new))
        was_unclean = unclean_leader_election_enabled(self.image, topic.name, self.node_id, defaults)
        if UNCLEAN_LEADER_ELECTION in new and effective.unclean_leader_election_enable and not was_unclean:
            records += self.replication.unclean_elections(topic)
        return records

    # ---- client quotas ------------------------------------------------------------------------------------------

    async def alter_client_quotas(self, alterations: Sequence[ClientQuotaAlteration], *,
                                  validate_only: bool = False) -> list[KafkaError | None]:
        """Set and remove client quotas; each entry is applied or refused on its own, all applied ones in one
        commit."""
        async with self._lock:
            records, results = alter_client_quotas(self.image.client_quotas, alterations)
            return await self._commit_each(records, results, validate_only)

    # ---- SCRAM credentials --------------------------------------------------------------------------------------

    async def alter_user_scram_credentials(self, deletions: Sequence[ScramCredentialDeletion],
                                           upsertions: Sequence[ScramCredentialUpsertion]
                                           ) -> list[tuple[str, KafkaError | None]]:
        """Delete and create or replace SCRAM credentials: one result per user named, every accepted change in one
        commit (Kafka's atomic ControllerResult)."""
        async with self._lock:
            records, results = alter_scram_credentials(self.image.scram_credentials, deletions, upsertions)
            errors = await self._commit_each(records, [error for _, error in results])
            return [(user, error) for (user, _), error in zip(results, errors, strict=True)]

    # ---- features -----------------------------------------------------------------------------------------------

    async def update_features(self, updates: Sequence[tuple[str, int, int]], *,
                              validate_only: bool = False) -> KafkaError | None:
        """Finalize features at new levels ((name, level, upgrade type) each): all of them in one commit, or none
        with the first refusal (Kafka's FeatureControlManager.updateFeatures, INVALID_UPDATE_VERSION)."""
        async with self._lock:
            records: list[MetadataRecord] = []
            for name, level, upgrade_type in updates:
                message = feature_update_error(name, level, upgrade_type, self.image.features, self.node_id)
                if message is not None:
                    log.warning("%s", message)
                    return KafkaError(ErrorCode.INVALID_UPDATE_VERSION, message)
                records.append(FeatureLevelRecord(name=name, feature_level=level))
            if validate_only or not records:
                return None
            try:
                await self._commit(records)
            except KafkaStorageError as exc:
                return exc
            log.info("controller %d finalized %s", self.node_id,
                     ", ".join(f"{name}={level}" for name, level, _ in updates))
            return None

    # ---- ACLs -------------------------------------------------------------------------------------------------

    async def create_acls(self, creations: Sequence[AclBinding]) -> list[KafkaError | None]:
        """Create ACL bindings: each succeeds or fails on its own, every new one in one commit."""
        async with self._lock:
            records, results = create_acls(self.image.acls, creations)
            return await self._commit_each(records, results)

    async def delete_acls(self, filters: Sequence[AclBindingFilter]
                          ) -> list[tuple[KafkaError | None, list[AclBinding]]]:
        """Delete the ACL bindings each filter matches, all in one commit; a failed commit fails every filter."""
        async with self._lock:
            records, results = delete_acls(self.image.acls, filters)
            errors = await self._commit_each(records, [error for error, _ in results])
            return [(error, [] if error else matched) for error, (_, matched) in zip(errors, results, strict=True)]

    # ---- leaders and ISRs --------------------------------------------------------------------------------------

    async def alter_partition(self, broker_id: int, broker_epoch: int,
                              topics: Sequence[TopicIsrChanges]) -> list[list[IsrChangeResult]]:
        """ISR changes proposed by partition leaders; STALE_BROKER_EPOCH (raised) when the sender's registration
        is not the one it names."""
        async with self._lock:
            self.cluster.check_broker_epoch(broker_id, broker_epoch)
            records: list[MetadataRecord] = []
            results = []
            for request in topics:
                if request.topic_id is not None:
                    topic = self.image.topics_by_id.get(request.topic_id)
                    missing = ErrorCode.UNKNOWN_TOPIC_ID
                else:
                    topic = self.image.topics.get(request.topic_name) if request.topic_name is not None else None
                    missing = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                topic_results = []
                for change in request.changes:
                    if topic is None:
                        topic_results.append(IsrChangeResult(change, missing, None))
                        continue
                    record, error, state = self.replication.alter_partition(broker_id, topic, change)
                    if error is ErrorCode.NEW_LEADER_ELECTED and record is not None:
                        records.append(record)
                        log.info("broker %d completed the reassignment of %s-%d, whose leader is now %d",
                                 broker_id, topic.name, change.index, record.leader)
                    elif error is not ErrorCode.NONE:
                        log.info("refused AlterPartition from broker %d for %s-%d: %s", broker_id, topic.name,
                                 change.index, error.name)
                    elif record is not None:
                        records.append(record)
                        log.info("broker %d changed the ISR of %s-%d to %s", broker_id, topic.name, change.index,
                                 state.isr if state is not None else None)
                    topic_results.append(IsrChangeResult(change, error, state))
                results.append(topic_results)
            if records:
                await self._commit(records)
            return results

    async def elect_leaders(self, election_type: int,
                            partitions: Sequence[tuple[str, int]] | None) -> list[ElectionResult]:
        """Preferred or unclean elections for the named partitions, or for all (then leaving out those that
        need none, as Kafka does)."""
        if election_type not in (PREFERRED_ELECTION, UNCLEAN_ELECTION):
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unknown election type {election_type}")
        async with self._lock:
            records: list[MetadataRecord] = []
            results = []
            decided: dict[tuple[str, int], ElectionResult] = {}  # a partition named twice is elected once
            for topic, index in partitions_named(self.image, None if partitions is None else list(partitions)):
                result = decided.get((topic, index))
                if result is None:
                    record, error, message = self.replication.elect_leader(topic, index, election_type)
                    if record is not None:
                        records.append(record)
                    result = decided[(topic, index)] = ElectionResult(topic, index, error, message)
                if partitions is None and result.error is ErrorCode.ELECTION_NOT_NEEDED:
                    continue
                results.append(result)
            if records:
                await self._commit(records)
                log.info("ElectLeaders (%s) elected leaders for %d partition(s)",
                         "preferred" if election_type == PREFERRED_ELECTION else "unclean", len(records))
            return results

    # ---- reassignments -----------------------------------------------------------------------------------------

    async def alter_partition_reassignments(self, targets: Sequence[ReassignablePartition],
                                            allow_replication_factor_change: bool = True) -> list[KafkaError | None]:
        """Start, change or cancel (a None replica list) the reassignment of each partition, or say why not; the
        records of all that succeed are committed together."""
        async with self._lock:
            if len(targets) > MAX_RECORDS_PER_USER_OP:
                return [OperationTooLargeError()] * len(targets)
            records: list[MetadataRecord] = []
            results: list[KafkaError | None] = []
            for target in targets:
                try:
                    record = self.reassignment.alter(target, allow_replication_factor_change)
                except KafkaError as exc:
                    log.info("unable to alter the reassignment of %s-%d: %s %s", target.topic, target.index,
                             exc.code.name, exc.message or "")
                    results.append(exc)
                    continue
                if record is not None:
                    records.append(record)
                results.append(None)
            results = await self._commit_each(records, results)
            log.info("altered %d out of %d partition reassignment(s)", results.count(None), len(results))
            return results

    def list_partition_reassignments(self, wanted: Sequence[tuple[str, Sequence[int]]] | None
                                     ) -> list[OngoingPartitionReassignment]:
        return self.reassignment.list(wanted)

    async def move_leader(self, topic: str, index: int, to: int) -> PartitionInfo:
        """Make replica `to` lead the partition (a controlled move injected by a test, see leader_move); returns
        the partition's state after it."""
        async with self._lock:
            record = leader_move(self.image, topic, index, to)
            if record is not None:
                await self._commit([record])
                log.info("moved the leadership of %s-%d to broker %d", topic, index, to)
            return self.image.topics[topic].partitions[index]

    async def rebalance_leaders(self) -> None:
        """Move leadership back to preferred replicas where a broker leads too few of its preferred partitions
        (auto.leader.rebalance.enable)."""
        async with self._lock:
            records = self.replication.preferred_leader_rebalance(self.config.leader_imbalance_per_broker_percentage)
            if records:
                log.info("leader rebalance: moving %d partition(s) back to their preferred leader", len(records))
                await self._commit(records)

    async def _rebalance_periodically(self) -> None:
        interval = max(self.config.leader_imbalance_check_interval_seconds, 1)
        while True:
            await trio.sleep(interval)
            try:
                await self.rebalance_leaders()
            except KafkaStorageError:
                pass  # logged by _commit; the next interval tries again
