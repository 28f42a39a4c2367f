"""The replica manager: the partitions this broker hosts, as leader or follower, and the requests that use them.

Metadata decides each partition's role through `apply_partition_state` (Kafka's makeLeaders, makeFollowers and
stopReplicas): a leader serves produce and fetch and sends ISR changes through the AlterPartitionManager; a
follower replicates through the ReplicaFetcherManager; a replica no longer assigned here is stopped and deleted.
Every replica.lag.time.max.ms / 2 leaders drop followers that fell behind from their ISR.

Handlers speak to partitions only through here, so produce and fetch share one notion of errors (a Kafka error per
partition, never an exception across the connection). An acks=all append waits as a DelayedProduce and a long-poll
fetch as a DelayedFetch, both in the broker's purgatory, woken by what can complete them — appends, high
watermark moves, ISR and leadership changes — and never by polling.

A log dir that fails takes the replicas whose logs it held offline (Kafka's handleLogDirFailure); the controller is
told, and the broker's other dirs keep serving.
"""
from __future__ import annotations

import enum
import errno
import functools
import logging
import uuid
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio
from kafka.protocol.consumer.offsets import IsolationLevel

from minikafka.broker.clock.broker_clock import wall_clock_ms
from minikafka.broker.log.log_dir_failure_channel import LogDirFailureChannel
from minikafka.broker.log.log_manager import LogManager, NewLog
from minikafka.broker.network.controller_channel import ControllerChannel
from minikafka.broker.network.failure_log import FailureLog
from minikafka.broker.replication.alter_partition_manager import AlterPartitionManager
from minikafka.broker.replication.broker_topic_stats import BrokerMetrics, TopicMetrics
from minikafka.broker.replication.delayed_fetch import (
    DelayedFetch,
    FetchParams,
    FetchPartitionRequest,
    FetchPartitionResult,
    fetch_key,
)
from minikafka.broker.replication.delayed_produce import AppendResult, DelayedProduce, produce_key
from minikafka.broker.replication.partition import (
    NO_LEADER,
    LeaderAndIsr,
    Partition,
    PartitionRegistration,
    PendingIsrChange,
)
from minikafka.broker.replication.purgatory import Purgatory
from minikafka.broker.replication.replica_alter_log_dirs_manager import ReplicaAlterLogDirsManager
from minikafka.broker.replication.replica_fetcher import InitialFetchState
from minikafka.broker.replication.replica_fetcher_manager import ReplicaFetcherManager
from minikafka.broker.replication.replication_config import ReplicationConfig
from minikafka.broker.replication.replication_quota_manager import ReplicationQuotas
from minikafka.protocol.codec import Records
from minikafka.protocol.control_plane import AssignReplicasToDirsRequest
from minikafka.protocol.errors import ErrorCode, KafkaError, error_of
from minikafka.storage.log import AppendOrigin, TimestampAndOffset
from minikafka.storage.log_config import LogConfig
from minikafka.storage.log_dir import LOST_DIRECTORY_ID
from minikafka.storage.transaction_index import AbortedTxn

if TYPE_CHECKING:
    from minikafka.broker.metadata.metadata_image import MetadataChange, MetadataImage
    from minikafka.broker.network.network_client import LinkIsCut

log = logging.getLogger("minikafka.replica_manager")

TopicPartition = tuple[str, int]
# A broker's address for replication (its inter-broker listener), or None while it is not known.
LeaderEndpoint = Callable[[int], tuple[str, int] | None]
LeadershipCallback = Callable[[TopicPartition], None]
ASSIGN_REPLICAS_TO_DIRS_VERSION = 0
REPORT_LOST_REPLICAS_BACKOFF_S = 0.5


def now_ms() -> int:
    """The node's wall clock (see minikafka.broker.clock): LogAppendTime's."""
    return wall_clock_ms()


_DISK_FULL = frozenset({errno.ENOSPC, errno.EDQUOT})
# Errors that answer a produce or fetch as Kafka expects to (the client goes elsewhere, or sent what cannot be
# appended): Kafka's FailedProduceRequests and FailedFetchRequests count only the others, unexpected failures.
_EXPECTED_APPEND_ERRORS = frozenset({
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.MESSAGE_TOO_LARGE,
    ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.CORRUPT_MESSAGE, ErrorCode.KAFKA_STORAGE_ERROR})
_EXPECTED_READ_ERRORS = frozenset({
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.REPLICA_NOT_AVAILABLE, ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.INCONSISTENT_TOPIC_ID, ErrorCode.OFFSET_OUT_OF_RANGE})


class RoleChange(enum.Enum):
    """What applying a partition's state did to this broker's replica of it, as the INFO summary says it."""

    LEADER = "became leader of"  # a new leadership, or a new leader epoch
    FOLLOWER = "became follower of"  # at a new leader epoch
    STOPPED = "stopped and deleted its replicas of"


def _no_endpoint(_broker_id: int) -> tuple[str, int] | None:
    return None


def _clock_ms() -> int:
    """Replica lag is measured on trio's clock, as every wait of this broker is."""
    return int(trio.current_time() * 1000)


class ReplicaManager:
    def __init__(self, node_id: int, log_manager: LogManager, purgatory: Purgatory,
                 config: ReplicationConfig | None = None, leader_endpoint: LeaderEndpoint | None = None,
                 controller_channel: ControllerChannel | None = None, link_is_cut: LinkIsCut | None = None,
                 metrics: BrokerMetrics | None = None, replication_quotas: ReplicationQuotas | None = None) -> None:
        self.node_id = node_id
        # Replication throttling of replicas outside the ISR (leader.replication.throttled.rate and the follower's).
        self.replication_quotas = replication_quotas or ReplicationQuotas(node_id)
        self.metrics = metrics or BrokerMetrics()
        self.log_manager = log_manager
        self.purgatory = purgatory
        self.config = config or ReplicationConfig()
        self.leader_endpoint: LeaderEndpoint = leader_endpoint or _no_endpoint
        self.broker_epoch = -1  # this broker's, once registered with the controller
        self.partitions: dict[TopicPartition, Partition] = {}
        # Called with a partition this broker starts to lead (new leadership or new leader epoch) and with one it
        # stops leading or follows anew: the group coordinator loads and unloads __consumer_offsets partitions.
        self.on_become_leader: list[LeadershipCallback] = []
        self.on_become_follower: list[LeadershipCallback] = []
        # How many partitions changed role by metadata changes, until apply_delta's summary line says so.
        self._unlogged_role_changes: dict[RoleChange, int] = {}
        # Brokers allowed into an ISR (registered, unfenced, not shutting down) and their epochs; shared with every
        # Partition, kept current in place.
        self._alive_broker_epochs: dict[int, int] = {}
        # Partitions of the cluster not hosted here, with their leader and leader epoch: requests for them are
        # answered NOT_LEADER_OR_FOLLOWER with that leader, not UNKNOWN_TOPIC_OR_PARTITION.
        self._elsewhere: dict[TopicPartition, tuple[int, int]] = {}
        self._configs: dict[TopicPartition, dict[str, str]] = {}
        self._awaiting_leader_endpoint: set[TopicPartition] = set()
        self.fetcher_manager = ReplicaFetcherManager(self, self.config, link_is_cut)
        self.alter_partition_manager = AlterPartitionManager(node_id, lambda: self.broker_epoch, controller_channel,
                                                             self.config.alter_partition_retry_backoff_ms)
        self.alter_log_dirs_manager = ReplicaAlterLogDirsManager(log_manager, self.config, self.partitions.get,
                                                                 purgatory)
        # Replicas lost with a failed log dir: KAFKA_STORAGE_ERROR until the broker restarts (Kafka's
        # HostedPartition.Offline).
        self.offline_partitions: set[TopicPartition] = set()
        self.log_dir_failure_channel = LogDirFailureChannel()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Replicate until cancelled: the fetchers, ISR changes to the controller and the ISR expiration task."""
        async with trio.open_nursery() as nursery:
            await nursery.start(self.fetcher_manager.run)
            await nursery.start(self.alter_partition_manager.run)
            await nursery.start(self.alter_log_dirs_manager.run)
            await nursery.start(self.log_dir_failure_channel.run, self.handle_log_dir_failure)
            nursery.start_soon(self._isr_expiration)
            task_status.started()

    # ---- lookups -------------------------------------------------------------------------------------------------

    def get_partition(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    def unhosted_error(self, tp: TopicPartition) -> ErrorCode:
        """Kafka's answer for a partition this broker has no replica of: the cluster has it elsewhere, or not."""
        return ErrorCode.NOT_LEADER_OR_FOLLOWER if tp in self._elsewhere else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    def partition_or_error(self, topic: str, index: int) -> Partition:
        partition = self.partitions.get((topic, index))
        if partition is None and (topic, index) in self.offline_partitions:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"{topic}-{index} is offline: its log dir failed")
        if partition is None:
            raise KafkaError(self.unhosted_error((topic, index)), f"{topic}-{index} is not hosted here")
        return partition

    def leader_partition(self, topic: str, index: int, current_leader_epoch: int = -1) -> Partition:
        """The partition if this broker leads it, fenced by the caller's view of the leader epoch (KIP-320), in
        Kafka's order: FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH before NOT_LEADER_OR_FOLLOWER."""
        partition = self.partition_or_error(topic, index)
        partition.check_leader(current_leader_epoch)
        return partition

    def current_leader(self, tp: TopicPartition) -> tuple[int, int]:
        """The partition's leader and leader epoch as this broker knows them ((-1, -1) when unknown), for the
        NOT_LEADER_OR_FOLLOWER answers that tell a client where to go (KIP-951)."""
        partition = self.partitions.get(tp)
        if partition is not None:
            return partition.leader_id, partition.leader_epoch
        return self._elsewhere.get(tp, (NO_LEADER, -1))

    def high_watermarks(self) -> dict[TopicPartition, int]:
        return {tp: p.high_watermark for tp, p in self.partitions.items()}

    # ---- partition state from metadata -------------------------------------------------------------------------

    def apply_delta(self, image: MetadataImage, change: MetadataChange, broker_epochs: dict[int, int]) -> None:
        """Apply the partitions of a metadata change (Kafka's applyDelta), each as `apply_partition_state` does.

        The role changes are summed up once the event loop turns, in one INFO line per kind (Kafka's "Transitioning
        N partition(s) to local leaders"): a change the metadata loader publishes in parts (a new topic of thousands
        of partitions, a start) is told in a line or three, and each partition at DEBUG only."""
        for (topic, index), state in change.partitions.items():
            role = self.apply_partition_state(topic, change.topic_ids[topic], index, state,
                                              image.topic_configs.get(topic, {}), broker_epochs)
            if role is not None:
                if not self._unlogged_role_changes:
                    trio.lowlevel.current_trio_token().run_sync_soon(self._log_role_changes)
                self._unlogged_role_changes[role] = self._unlogged_role_changes.get(role, 0) + 1

    def _log_role_changes(self) -> None:
        for role in RoleChange:
            count = self._unlogged_role_changes.get(role)
            if count:
                log.info("broker %d %s %d partition(s)", self.node_id, role.value, count)
        self._unlogged_role_changes.clear()

    def apply_partition_state(self, topic: str, topic_id: uuid.UUID, index: int, state: PartitionRegistration | None,
                              configs: dict[str, str], broker_epochs: dict[int, int]) -> RoleChange | None:
        """Make this broker's replica of one partition what the controller decided: leader, follower, or none;
        returns the role change, if any.

        `broker_epochs` are the brokers allowed into an ISR (registered, unfenced, not shutting down) with their
        broker epochs. A state older than what a replica knows (a lower partition epoch) changes nothing.
        """
        self.update_alive_brokers(broker_epochs)
        tp = (topic, index)
        if tp in self.offline_partitions:
            if state is not None and self.node_id in state.replicas:
                return None  # its log dir failed: nothing is served or created here until a restart
            self.offline_partitions.discard(tp)
        if state is None or self.node_id not in state.replicas:
            stopped = self._stop_replica(tp, deleted=state is None)
            if state is None:
                self._elsewhere.pop(tp, None)
            else:
                self._elsewhere[tp] = (state.leader, state.leader_epoch)
            return RoleChange.STOPPED if stopped else None
        self._elsewhere.pop(tp, None)
        partition = self._get_or_create_partition(topic, index, topic_id, configs)
        if partition is None:
            return None
        if state.leader == self.node_id:
            return RoleChange.LEADER if self._make_leader(partition, state) else None
        return RoleChange.FOLLOWER if self._make_follower(partition, state) else None

    async def create_new_logs(self, image: MetadataImage, change: MetadataChange) -> None:
        """Create, off the event loop and before `change` is applied, the logs of the partitions it gives this
        broker anew (a leader's with its first leader epoch), so applying it opens no file: a topic of thousands
        of partitions does not stall the broker's other clients."""
        new = []
        for (topic, index), state in change.partitions.items():
            if state is None or self.node_id not in state.replicas or (topic, index) in self.partitions \
                    or (topic, index) in self.offline_partitions:
                continue  # gone, not here, or hosted already (a replica of an older topic id is replaced on apply)
            leader_epoch = state.leader_epoch if state.leader == self.node_id else None
            new.append(NewLog(topic, index, change.topic_ids[topic], image.topic_configs.get(topic, {}),
                              leader_epoch))
        if new:
            await self.log_manager.create_logs(new)

    def update_alive_brokers(self, broker_epochs: dict[int, int]) -> None:
        """The brokers allowed into an ISR changed (a registration, fencing or shutdown); followers waiting for
        their leader's address try again."""
        if broker_epochs != self._alive_broker_epochs:
            self._alive_broker_epochs.clear()
            self._alive_broker_epochs.update(broker_epochs)
        for tp in list(self._awaiting_leader_endpoint):
            partition = self.partitions.get(tp)
            self._awaiting_leader_endpoint.discard(tp)
            if partition is not None and not partition.is_leader:
                self._start_fetching(partition)

    def _get_or_create_partition(self, topic: str, index: int, topic_id: uuid.UUID,
                                 configs: dict[str, str]) -> Partition | None:
        tp = (topic, index)
        partition = self.partitions.get(tp)
        if partition is not None and partition.topic_id != topic_id:
            log.info("%s-%d: topic id is now %s, was %s: replacing the old replica", topic, index, topic_id,
                     partition.topic_id)
            self._stop_replica(tp)
            partition = None
        if partition is None:
            try:
                the_log = self.log_manager.get_or_create_log(topic, index, topic_id, configs)
            except (KafkaError, OSError) as exc:
                log.error("%s-%d: cannot host a replica: %s", topic, index, exc)
                return None
            partition = Partition(topic, index, topic_id, the_log, self.node_id,
                                  high_watermark=self.log_manager.high_watermark_of(topic, index),
                                  alive_broker_epochs=self._alive_broker_epochs,
                                  replica_lag_time_max_ms=self.config.replica_lag_time_max_ms)
            self.partitions[tp] = partition
            self.metrics.topic(topic)  # its series exist from the start, at zero
        if self._configs.get(tp) != configs:  # new, or changed (a log found on disk opened with defaults)
            try:
                partition.log.update_config(LogConfig.from_props(configs, self.log_manager.defaults))
            except ValueError as exc:
                log.error("%s-%d: configs %s not applied: %s", topic, index, configs, exc)
            self._configs[tp] = dict(configs)
        return partition

    def _make_leader(self, partition: Partition, state: PartitionRegistration) -> bool:
        """True when this is a new leadership (a new leader, or a new leader epoch)."""
        tp = (partition.topic, partition.index)
        pending = partition.pending_isr_change
        outcome = partition.make_leader(state, _clock_ms())
        if outcome is None:
            return False
        if outcome is False and pending is not None and list(state.isr) == pending.new_isr:
            self._count_committed_isr_change(pending)  # committed, and replayed here before the answer came
        self.fetcher_manager.remove_fetcher_for_partitions([tp])
        self.fetcher_manager.shutdown_idle_fetchers()
        self._awaiting_leader_endpoint.discard(tp)
        self._wake(tp)
        if outcome:
            self._notify(self.on_become_leader, tp)
        return outcome

    def _make_follower(self, partition: Partition, state: PartitionRegistration) -> bool:
        """True when the replica follows at a new leader epoch."""
        tp = (partition.topic, partition.index)
        was_leader = partition.is_leader
        outcome = partition.make_follower(state)
        if outcome is None:
            return False
        if outcome or self.fetcher_manager.fetch_state(tp) is None:
            self._start_fetching(partition)
        self._wake(tp)
        if outcome or was_leader:
            self._notify(self.on_become_follower, tp)
        return outcome

    def _start_fetching(self, partition: Partition) -> None:
        """(Re)start replication from the partition's leader: from the log end offset when the log has epochs
        (truncation then checks it against the leader), else from the high watermark."""
        tp = (partition.topic, partition.index)
        self.fetcher_manager.remove_fetcher_for_partitions([tp])
        leader = partition.leader_id
        endpoint = self.leader_endpoint(leader) if leader != NO_LEADER else None
        if endpoint is None:
            if leader != NO_LEADER:
                log.info("%s-%d: leader %d's address is not known yet; replication waits for it", *tp, leader)
                self._awaiting_leader_endpoint.add(tp)
        else:
            the_log = partition.log
            init_offset = (the_log.log_end_offset if the_log.leader_epoch_cache.latest_epoch is not None
                           else partition.high_watermark)
            self.fetcher_manager.add_fetcher_for_partitions({tp: InitialFetchState(
                partition.topic_id, leader, endpoint, partition.leader_epoch, init_offset)})
        self.fetcher_manager.shutdown_idle_fetchers()

    def _stop_replica(self, tp: TopicPartition, deleted: bool = False) -> bool:
        """Stop and delete this broker's replica (the partition was deleted, or moved to other brokers). A log
        with no replica (the broker was down when it was `deleted`) is deleted too. True if a replica stopped."""
        self.fetcher_manager.remove_fetcher_for_partitions([tp])
        self.fetcher_manager.shutdown_idle_fetchers()
        self._awaiting_leader_endpoint.discard(tp)
        self._configs.pop(tp, None)
        partition = self.partitions.pop(tp, None)
        if partition is None:
            if deleted and tp in self.log_manager.logs:
                self.log_manager.delete_log(*tp)
                log.info("%s-%d: deleted (the log of a replica not hosted here)", *tp)
            return False
        self.log_manager.delete_log(*tp)
        # Kafka drops a topic's meters once no replica of it is left here; a deleted topic has none left.
        if deleted or not any(topic == tp[0] for topic, _ in self.partitions):
            self.metrics.topics.pop(tp[0], None)
        self._wake(tp)
        if partition.is_leader:
            self._notify(self.on_become_follower, tp)
        log.debug("%s-%d: replica stopped and deleted", *tp)
        return True

    @staticmethod
    def _notify(callbacks: list[LeadershipCallback], tp: TopicPartition) -> None:
        for callback in callbacks:
            try:
                callback(tp)
            except Exception:  # a listener's failure must not stop the others or the state change
                log.exception("leadership callback %r for %s-%d failed", callback, *tp)

    def _wake(self, tp: TopicPartition) -> None:
        """Something a delayed request of `tp` may be waiting for changed (HW, leadership, the partition itself)."""
        self.purgatory.check_and_complete(fetch_key(tp))
        self.purgatory.check_and_complete(produce_key(tp))

    # ---- ISR changes ---------------------------------------------------------------------------------------------

    async def _isr_expiration(self) -> None:
        interval_s = max(self.config.replica_lag_time_max_ms, 2) / 2000
        while True:
            await trio.sleep(interval_s)
            now = _clock_ms()
            for partition in list(self.partitions.values()):
                change = partition.maybe_shrink_isr(now)
                if change is not None:
                    self._submit_isr_change(partition, change)

    def _submit_isr_change(self, partition: Partition, change: PendingIsrChange) -> None:
        tp = (partition.topic, partition.index)

        def on_answer(answer: LeaderAndIsr | ErrorCode) -> None:
            answers_pending = partition.pending_isr_change is change
            moved, retry = partition.on_isr_change_answered(change, answer, _clock_ms())
            if isinstance(answer, ErrorCode):
                self.metrics.failed_isr_updates += 1
            elif answers_pending and partition.pending_isr_change is None:
                self._count_committed_isr_change(change)
            if moved:
                self._wake(tp)
            if retry:
                submit()

        def submit() -> None:
            if not self.alter_partition_manager.submit(change, on_answer):
                # An older change of this partition still waits to be sent: this one is not attempted, and the
                # partition goes back to its committed ISR to try again later (Kafka's OPERATION_NOT_ATTEMPTED).
                on_answer(ErrorCode.OPERATION_NOT_ATTEMPTED)

        submit()

    def _count_committed_isr_change(self, change: PendingIsrChange) -> None:
        """Kafka's IsrShrinksPerSec and IsrExpandsPerSec: this leader's ISR changes the controller committed."""
        if len(change.new_isr) < len(change.maximal_isr):  # a shrink keeps the old ISR as its maximal one
            self.metrics.isr_shrinks += 1
        else:
            self.metrics.isr_expands += 1

    # ---- produce -------------------------------------------------------------------------------------------------

    def append_to_local_log(self, required_acks: int, entries: dict[TopicPartition, bytearray],
                            origin: AppendOrigin = AppendOrigin.CLIENT) -> dict[TopicPartition, AppendResult]:
        """Append to leaders' logs (Kafka's appendToLocalLog); acks=all is refused before appending while the ISR
        is smaller than min.insync.replicas (NOT_ENOUGH_REPLICAS)."""
        results: dict[TopicPartition, AppendResult] = {}
        timestamp = now_ms()
        metrics = self.metrics
        for tp, records in entries.items():
            topic_metrics: TopicMetrics | None = None
            try:
                partition = self.partition_or_error(*tp)
                topic_metrics = metrics.topic(tp[0])
                metrics.total_produce_requests += 1
                topic_metrics.total_produce_requests += 1
                partition.require_leader()
                min_isr = partition.log.config.min_insync_replicas
                if required_acks == -1 and len(partition.isr) < min_isr:
                    raise KafkaError(ErrorCode.NOT_ENOUGH_REPLICAS,
                                     f"ISR {partition.isr} is smaller than min.insync.replicas={min_isr}")
                refused = self.log_manager.disk_quota.refusal(tp, len(records))
                if refused is not None:  # a full disk (the quota logs its refusals itself, once per episode)
                    results[tp] = AppendResult(refused, None)
                    continue
                info = partition.log.append_as_leader(records, partition.leader_epoch, timestamp, origin=origin)
                results[tp] = AppendResult(None, info)
                if not info.duplicate:
                    size = len(records)
                    metrics.bytes_in += size
                    metrics.messages_in += info.records_count
                    topic_metrics.bytes_in += size
                    topic_metrics.messages_in += info.records_count
                if partition.maybe_increment_high_watermark(_clock_ms()):
                    self._wake(tp)
                else:
                    self.purgatory.check_and_complete(fetch_key(tp))  # followers wait for the new records
            except Exception as exc:  # noqa: BLE001 - every failure becomes this partition's error code
                err = error_of(exc)
                if topic_metrics is not None and err.code not in _EXPECTED_APPEND_ERRORS:
                    metrics.failed_produce_requests += 1
                    topic_metrics.failed_produce_requests += 1
                self.report_io_error(tp, exc)
                if err.code in (ErrorCode.UNKNOWN_SERVER_ERROR, ErrorCode.KAFKA_STORAGE_ERROR):
                    log.error("append to %s-%s failed: %s", tp[0], tp[1], err)
                else:
                    log.info("append to %s-%s refused: %s %s", tp[0], tp[1], err.code.name, err)
                results[tp] = AppendResult(err, None)
        return results

    def report_io_error(self, tp: TopicPartition, exc: Exception) -> None:
        """An I/O error of a log takes its log dir offline, as Kafka's LogDirFailureChannel does; the appends of
        leaders and followers report here. A full disk does not: appends are refused until space frees, and the
        broker serves on (its full-disk behaviour)."""
        io_error = exc if isinstance(exc, OSError) else exc.__cause__
        log_dir = self.log_manager.dir_of(tp)
        if isinstance(io_error, OSError) and io_error.errno not in _DISK_FULL and log_dir is not None:
            self.log_dir_failure_channel.maybe_add_offline_log_dir(log_dir.path, f"append to {tp[0]}-{tp[1]}",
                                                                   io_error)

    # ---- log dir failures ----------------------------------------------------------------------------------------

    async def handle_log_dir_failure(self, path: Path) -> None:
        """Kafka's handleLogDirFailure: take `path` offline, then tell the controller which replicas went with it.

        The LogManager drops the dir's logs; the replicas whose current log was there stop (fetchers removed) and are
        remembered as offline, so requests for them answer KAFKA_STORAGE_ERROR while the broker's other dirs keep
        serving, until the broker restarts. The controller learns of them from an AssignReplicasToDirs request
        (KIP-858) placing them in the reserved LOST directory: it takes this broker out of their ISRs and elects other
        leaders where it led."""
        topic_ids = {tp: p.topic_id for tp, p in self.partitions.items()}
        lost = self._take_replicas_offline(path)
        replicas = [(topic_ids[tp], tp[1]) for tp in lost if tp in topic_ids]
        if replicas:
            await self._report_lost_replicas(replicas)

    def _take_replicas_offline(self, path: Path) -> list[TopicPartition]:
        """Take `path` offline; returns the partitions whose replica here went offline with it."""
        lost = self.log_manager.take_offline(path)
        self.fetcher_manager.remove_fetcher_for_partitions(lost)
        self.fetcher_manager.shutdown_idle_fetchers()
        for tp in lost:
            partition = self.partitions.pop(tp, None)
            self.offline_partitions.add(tp)
            self._wake(tp)
            if partition is not None and partition.is_leader:
                for callback in self.on_become_follower:
                    callback(tp)
        if lost:
            log.error("log dir %s offline: replicas of %s stopped", path,
                      ", ".join(f"{t}-{i}" for t, i in sorted(lost)))
        return lost

    async def _report_lost_replicas(self, replicas: list[tuple[uuid.UUID, int]]) -> None:
        """Send AssignReplicasToDirs until the controller answers it (a controller moving or restarting meanwhile):
        one request serves both controller modes, since both run the same controller logic."""
        R: Any = AssignReplicasToDirsRequest
        D = R.DirectoryData
        by_topic: dict[uuid.UUID, list[int]] = defaultdict(list)
        for topic_id, index in replicas:
            by_topic[topic_id].append(index)
        failures = FailureLog(log, "reporting lost replicas to the controller")
        while True:
            channel = self.alter_partition_manager.channel
            if channel is not None:
                request = R(broker_id=self.node_id, broker_epoch=self.broker_epoch, directories=[
                    D(id=LOST_DIRECTORY_ID, topics=[D.TopicData(topic_id=topic_id, partitions=[
                        D.TopicData.PartitionData(partition_index=i) for i in indexes])
                        for topic_id, indexes in by_topic.items()])])
                try:
                    response = await channel.send(request, ASSIGN_REPLICAS_TO_DIRS_VERSION)
                except Exception as exc:  # noqa: BLE001 - any failure to reach the controller is retried
                    failures.failed(repr(exc))
                else:
                    if response.error_code == ErrorCode.NONE:
                        log.info("the controller knows of %d replicas lost here", len(replicas))
                        return
                    failures.failed(f"AssignReplicasToDirs refused: {ErrorCode(response.error_code).name}")
            await trio.sleep(REPORT_LOST_REPLICAS_BACKOFF_S)

    async def append_records(self, timeout_ms: int, required_acks: int, entries: dict[TopicPartition, bytearray], *,
                             client: trio.SocketStream | None = None,
                             stop_early: Callable[[], bool] | None = None,
                             origin: AppendOrigin = AppendOrigin.CLIENT) -> dict[TopicPartition, AppendResult]:
        """Append to leaders, and for acks=all wait (at most `timeout_ms`) until the ISR has every append (Kafka's
        appendRecords). `client` is the connection to drop the wait for when it closes; `stop_early` ends the
        wait when the broker shuts down."""
        results = self.append_to_local_log(required_acks, entries, origin)
        if required_acks != -1 or all(r.error is not None for r in results.values()):
            return results
        return await self.wait_for_replication(results, timeout_ms, client=client, stop_early=stop_early)

    async def wait_for_replication(self, results: dict[TopicPartition, AppendResult], timeout_ms: int, *,
                                   client: trio.SocketStream | None = None,
                                   stop_early: Callable[[], bool] | None = None) -> dict[TopicPartition, AppendResult]:
        """acks=all for appends already made (Kafka's DelayedProduce): until the ISR has each, at most
        `timeout_ms`."""
        delayed = DelayedProduce(self, results)
        if delayed.try_complete():
            return delayed.results
        return await delayed.wait(self.purgatory, trio.current_time() + max(0, timeout_ms) / 1000, client,
                                  stop_early)

    # ---- fetch ---------------------------------------------------------------------------------------------------

    async def fetch_messages(self, params: FetchParams, requests: list[FetchPartitionRequest], *,
                             client: trio.SocketStream | None = None,
                             stop_early: Callable[[], bool] | None = None,
                             watched: list[FetchPartitionRequest] | None = None) -> list[FetchPartitionResult]:
        """Kafka's fetchMessages: read now, and answer at once when there is enough, an error or a diverging epoch;
        otherwise wait as a DelayedFetch (at most max_wait_ms) and read again. `watched` partitions are known to
        have nothing new (a fetch session's quiet ones): never read here, but a change of theirs ends the wait; with
        nothing else to read, the wait costs nothing per partition (the caller looks again at what changed)."""
        watched = watched or []
        if not requests and watched and params.max_wait_ms > 0:
            await self.purgatory.wait_any([fetch_key(r.topic_partition) for r in watched], params.max_wait_ms / 1000,
                                          client)
            return []
        results = await self.read_from_log(params, requests, update_fetch_state=True)
        readable = sum(len(r.records) for r in results)
        if (params.max_wait_ms <= 0 or not (requests or watched) or readable >= params.min_bytes
                or any(r.error is not None or r.diverging_epoch is not None for r in results)):
            self.metrics.update_bytes_out(params.is_from_follower, requests, results)
            return results
        del results  # a parked fetch holds no records: it reads again when it completes
        delayed = DelayedFetch(self, self.replication_quotas.should_leader_throttle, params, requests + watched)
        await delayed.wait(self.purgatory, trio.current_time() + params.max_wait_ms / 1000, client, stop_early)
        results = await self.read_from_log(params, requests, update_fetch_state=False)
        self.metrics.update_bytes_out(params.is_from_follower, requests, results)
        return results

    async def read_from_log(self, params: FetchParams, requests: list[FetchPartitionRequest],
                            update_fetch_state: bool) -> list[FetchPartitionResult]:
        """Read every partition within the response's max_bytes; the first non-empty one may exceed it (KIP-74).
        A follower's fetch records its position on the first read only, not on the read after its wait."""
        remaining = params.max_bytes
        min_one_message = True
        results = []
        for request in requests:
            result = await self._read(params, request, max(0, remaining), min_one_message, update_fetch_state)
            if result.records:
                min_one_message = False
            remaining -= len(result.records)
            results.append(result)
        return results

    async def _read(self, params: FetchParams, request: FetchPartitionRequest, limit: int, min_one_message: bool,
                    update_fetch_state: bool) -> FetchPartitionResult:
        """Read one partition from its leader. Reads from the active segment stay on the event loop (its pages
        are warm: they were just written); reads of rolled segments, which a catching-up reader may need from
        disk, go to a worker thread so they never stall other connections."""
        result = FetchPartitionResult()
        tp = request.topic_partition
        metrics = self.metrics
        topic_metrics: TopicMetrics | None = None
        try:
            partition = self.partition_or_error(*tp)
            topic_metrics = metrics.topic(tp[0])
            metrics.total_fetch_requests += 1
            topic_metrics.total_fetch_requests += 1
            partition.check_leader(request.current_leader_epoch)
            replica = (partition.follower_replica(params.replica_id, request.current_leader_epoch)
                       if params.is_from_follower else None)
            result.leader_id, result.leader_epoch = partition.leader_id, partition.leader_epoch
            the_log = partition.log
            # As of before the read: appends that follow it must not keep a follower from counting as caught up.
            result.high_watermark = partition.high_watermark
            result.last_stable_offset = partition.last_stable_offset()
            result.log_start_offset = the_log.log_start_offset
            log_end = the_log.log_end_offset
            offset = request.fetch_offset
            result.diverging_epoch = partition.diverging_epoch(request.last_fetched_epoch, offset)
            if result.diverging_epoch is not None:
                return result
            if replica is not None:
                max_offset = None
            else:
                max_offset = partition.last_fetchable_offset(params.isolation_level)
            read_committed = replica is None and params.isolation_level == IsolationLevel.READ_COMMITTED
            read: Callable[[], Records | tuple[Records, list[AbortedTxn]]] = functools.partial(
                the_log.read_committed_records if read_committed else the_log.read_records, offset,
                min(limit, request.max_bytes), max_offset=max_offset, min_one_message=min_one_message)
            if replica is not None and self.replication_quotas.should_leader_throttle(partition, params.replica_id):
                read_result: Records | tuple[Records, list[AbortedTxn]] = b""  # throttled: its position still counts
            elif offset < the_log.active_segment.base_offset:
                read_result = await trio.to_thread.run_sync(read)
            else:
                read_result = read()
            if isinstance(read_result, tuple):
                result.records, result.aborted_transactions = read_result
            else:
                result.records = read_result
            if replica is not None and update_fetch_state and self.partitions.get(tp) is partition \
                    and partition.is_leader and partition.leader_epoch == result.leader_epoch:
                moved, expansion = partition.update_follower_fetch_state(
                    replica, offset, request.log_start_offset, _clock_ms(), log_end, params.replica_epoch)
                if expansion is not None:
                    self._submit_isr_change(partition, expansion)
                if moved:
                    self._wake(tp)
        except Exception as exc:  # noqa: BLE001 - reported per partition
            result.error = error_of(exc)
            if topic_metrics is not None and result.error.code not in _EXPECTED_READ_ERRORS:
                metrics.failed_fetch_requests += 1
                topic_metrics.failed_fetch_requests += 1
            result.records = b""
            result.leader_id, result.leader_epoch = self.current_leader(tp)
        return result

    # ---- offsets -------------------------------------------------------------------------------------------------

    def fetch_offset_for_timestamp(self, topic_partition: TopicPartition, timestamp: int, isolation_level: int | None,
                                   current_leader_epoch: int = -1) -> TimestampAndOffset:
        """ListOffsets for one partition, from its leader (Kafka's fetchOffsetForTimestamp). `timestamp` is a time
        or a SpecialTimestamp; a client passes its isolation level, a replica None (it may read to the log end)."""
        partition = self.leader_partition(*topic_partition, current_leader_epoch)
        return partition.fetch_offset_for_timestamp(timestamp, isolation_level)

    def last_offset_for_leader_epoch(self, topic_partition: TopicPartition, leader_epoch: int,
                                     current_leader_epoch: int = -1) -> tuple[int, int]:
        """OffsetForLeaderEpoch for one partition, from its leader (Kafka's lastOffsetForLeaderEpoch): the largest
        epoch <= `leader_epoch` and its end offset."""
        partition = self.leader_partition(*topic_partition, current_leader_epoch)
        return partition.last_offset_for_leader_epoch(leader_epoch)

    def delete_records(self, topic_partition: TopicPartition, offset: int) -> int:
        """DeleteRecords for one partition, on its leader (Kafka's deleteRecords): returns the new low watermark.

        Followers move their log start offsets on their next fetch; the request does not wait for them (Kafka's
        DelayedDeleteRecords would).
        """
        return self.leader_partition(*topic_partition).delete_records_on_leader(offset)
