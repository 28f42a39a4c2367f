"""A follower's fetcher task for one leader (Kafka's AbstractFetcherThread and ReplicaFetcherThread).

Each pass of the loop first truncates, then fetches. A partition is in one of three states: truncating (it just
became a follower: its log may hold records the leader does not have), fetching, or delayed (after an error, for
replica.fetch.backoff.ms). Truncation asks the leader OffsetForLeaderEpoch for the follower's latest epoch and
cuts the log where the leader's copy of that epoch ends (KIP-101); a log with no epochs falls back to its high
watermark. When the leader answers with an epoch the follower does not have, the log is cut to the end of the
follower's epoch below it and fetching resumes: each Fetch carries the log's latest epoch, and the leader answers
one that diverges from its log with a DivergingEpoch (KIP-320), which truncates the same way, round after round
until the logs agree (KIP-279). OFFSET_OUT_OF_RANGE resets the position against the leader's log end or start
offset (Kafka's fetchOffsetAndTruncate).

Fetched records are appended as they came (the leader's offsets and epochs, so the leader-epoch checkpoint
follows); the follower's high watermark is the leader's, bounded by its own log, and its log start offset follows
the leader's but never passes that high watermark. A response is applied one partition at a time, with the event
loop free between partitions. Fetching can be paused per partition (fault injection: a stalled follower).

Fetches go through an incremental fetch session with the leader (KIP-227): after the first full fetch, a fetch
carries only the partitions whose position changed, and the leader answers only those with something new, so an
idle follower's fetches cost the same whatever the number of partitions. A session the leader lost or refused
(a restart, an eviction, a wrong epoch) is answered with an error, and the next fetch is full again.

Replication throttling (Kafka's shouldFollowerThrottle): a partition behind the leader's high watermark and
throttled by follower.replication.throttled.replicas is left out of the fetch (and so out of the session) while the
follower's replication quota is exceeded; the bytes fetched for throttled partitions count toward that quota.
"""
from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, Protocol

import trio
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.consumer.fetch import FetchRequest
from kafka.protocol.consumer.offsets import ListOffsetsRequest, OffsetForLeaderEpochRequest

from minikafka.broker.clock.broker_clock import wall_clock_ms
from minikafka.broker.network.failure_log import FailureLog
from minikafka.broker.network.network_client import DisconnectedError, LinkIsCut, NetworkClient, NetworkClientConfig
from minikafka.broker.replication.broker_topic_stats import BrokerMetrics
from minikafka.broker.replication.fetch_session import PartitionData
from minikafka.broker.replication.fetch_session_handler import FetchRequestData, FetchSessionHandler
from minikafka.broker.replication.replication_config import ReplicationConfig
from minikafka.broker.replication.replication_quota_manager import ReplicationQuotas
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.storage.errors import CorruptRecordError
from minikafka.storage.special_timestamps import SpecialTimestamp

if TYPE_CHECKING:
    from minikafka.broker.replication.partition import Partition

log = logging.getLogger("minikafka.replica_fetcher")

TopicPartition = tuple[str, int]
FETCH_VERSION = 17
SESSION_ERRORS = (ErrorCode.FETCH_SESSION_ID_NOT_FOUND, ErrorCode.INVALID_FETCH_SESSION_EPOCH,
                  ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)
OFFSET_FOR_LEADER_EPOCH_VERSION = 4
LIST_OFFSETS_VERSION = 9
UNDEFINED = -1  # Kafka's UNDEFINED_EPOCH and UNDEFINED_EPOCH_OFFSET


class FollowerReplicas(Protocol):
    """What a fetcher sees of the replica manager that owns it: the partitions it follows, the broker it fetches
    for, and where its failures and traffic are counted."""

    @property
    def node_id(self) -> int: ...

    @property
    def broker_epoch(self) -> int: ...

    @property
    def replication_quotas(self) -> ReplicationQuotas: ...

    @property
    def metrics(self) -> BrokerMetrics: ...

    def get_partition(self, topic: str, index: int) -> Partition | None: ...

    def report_io_error(self, tp: TopicPartition, exc: Exception) -> None:
        """Take the log dir of `tp` offline if `exc` is an I/O error of it."""
        ...


class FetchState(Enum):
    TRUNCATING = "truncating"
    FETCHING = "fetching"


@dataclass(frozen=True)
class InitialFetchState:
    """Where a follower starts: its leader, the leader epoch it follows, and its own position."""

    topic_id: uuid.UUID
    leader_id: int
    leader_endpoint: tuple[str, int]
    current_leader_epoch: int
    init_offset: int


@dataclass
class PartitionFetchState:
    topic_id: uuid.UUID
    fetch_offset: int
    current_leader_epoch: int
    state: FetchState
    last_fetched_epoch: int | None = None
    delayed_until: float | None = None  # trio's clock
    lag: int = 0  # records behind the leader's high watermark after the last fetch (Kafka's ConsumerLag)

    def is_delayed(self, now: float) -> bool:
        return self.delayed_until is not None and self.delayed_until > now

    def is_ready_for_fetch(self, now: float) -> bool:
        return self.state is FetchState.FETCHING and not self.is_delayed(now)

    def is_truncating(self, now: float) -> bool:
        return self.state is FetchState.TRUNCATING and not self.is_delayed(now)


class ReplicaFetcher:
    """Replicates the partitions one leader leads for this broker, over one connection to that leader."""

    def __init__(self, fetcher_id: int, leader_id: int, leader_endpoint: tuple[str, int],
                 replica_manager: FollowerReplicas, config: ReplicationConfig,
                 is_paused: Callable[[TopicPartition], bool], link_is_cut: LinkIsCut | None = None,
                 held_back: Callable[[TopicPartition], None] | None = None) -> None:
        self.fetcher_id = fetcher_id
        self.leader_id = leader_id
        self.leader_endpoint = leader_endpoint
        self._replica_manager = replica_manager
        self._config = config
        self._is_paused = is_paused
        self._held_back = held_back  # told of each paused partition a fetch leaves out
        self._link_is_cut = link_is_cut
        self._backoff_s = config.replica_fetch_backoff_ms / 1000
        self.partition_states: dict[TopicPartition, PartitionFetchState] = {}
        self.session = FetchSessionHandler()
        self._changed = trio.Event()
        self._cancel_scope = trio.CancelScope()
        self._failures = FailureLog(log, f"replication of broker {replica_manager.node_id} from broker {leader_id}",
                                    level=logging.INFO)

    def __repr__(self) -> str:
        return (f"ReplicaFetcher({self.fetcher_id} of broker {self._replica_manager.node_id} from leader "
                f"{self.leader_id} at {self.leader_endpoint[0]}:{self.leader_endpoint[1]})")

    # ---- partitions ----------------------------------------------------------------------------------------------

    def add_partitions(self, initial_states: dict[TopicPartition, InitialFetchState]) -> None:
        """Start following: a partition kept at the same leader epoch keeps its state; any other starts by
        truncating (a log with no epochs truncates to its high watermark, which is where it then starts)."""
        for tp, initial in initial_states.items():
            current = self.partition_states.get(tp)
            if current is not None and current.current_leader_epoch == initial.current_leader_epoch:
                continue
            self.partition_states[tp] = PartitionFetchState(initial.topic_id, initial.init_offset,
                                                            initial.current_leader_epoch, FetchState.TRUNCATING)
        self.wake()

    def remove_partitions(self, tps: list[TopicPartition]) -> None:
        for tp in tps:
            self.partition_states.pop(tp, None)

    def wake(self) -> None:
        self._changed.set()

    def shutdown(self) -> None:
        self._cancel_scope.cancel()

    # ---- the loop ------------------------------------------------------------------------------------------------

    async def run(self) -> None:
        node_id = self._replica_manager.node_id
        client_config = NetworkClientConfig(request_timeout_ms=self._config.replica_socket_timeout_ms,
                                            security=self._config.inter_broker_security)
        with self._cancel_scope:
            async with NetworkClient.open(self.leader_id, *self.leader_endpoint,
                                          f"broker-{node_id}-fetcher-{self.fetcher_id}", client_config,
                                          self._link_is_cut) as client:
                log.info("%r started", self)
                while True:
                    await self._maybe_truncate(client)
                    await self._maybe_fetch(client)

    async def _idle(self) -> None:
        """Nothing to fetch: wait for a partition to be added, its delay to pass, or at most the backoff."""
        now = trio.current_time()
        if any(s.is_truncating(now) and not self._is_paused(tp) for tp, s in self.partition_states.items()):
            return
        wake_at = now + self._backoff_s
        for state in self.partition_states.values():
            if state.delayed_until is not None and state.delayed_until > now:
                wake_at = min(wake_at, state.delayed_until)
        self._changed = trio.Event()
        with trio.move_on_at(wake_at):
            await self._changed.wait()

    def _delay(self, tps: Iterable[TopicPartition]) -> None:
        now = trio.current_time()
        for tp in tps:
            state = self.partition_states.get(tp)
            if state is not None and not state.is_delayed(now):
                state.delayed_until = now + self._backoff_s

    def _mark_failed(self, tp: TopicPartition, reason: str) -> None:
        """Stop fetching `tp` until new metadata makes this broker its follower again."""
        self.partition_states.pop(tp, None)
        log.warning("%s-%d: replication from broker %d stopped until the next leadership change: %s", tp[0], tp[1],
                    self.leader_id, reason)

    def _partition(self, tp: TopicPartition) -> Partition:
        partition = self._replica_manager.get_partition(*tp)
        if partition is None or partition.is_leader:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{tp[0]}-{tp[1]} is not a follower here")
        return partition

    def _on_partition_fenced(self, tp: TopicPartition, request_epoch: int) -> bool:
        """The leader is at a newer epoch. If this fetcher still follows the epoch it asked with, wait for the
        metadata that says so (False); if it already follows a newer one, retry after the backoff (True)."""
        state = self.partition_states.get(tp)
        if state is None:
            return False
        if state.current_leader_epoch == request_epoch:
            self._mark_failed(tp, f"leader epoch {request_epoch} is fenced by the leader")
            return False
        return True

    # ---- truncation ----------------------------------------------------------------------------------------------

    async def _maybe_truncate(self, client: NetworkClient) -> None:
        now = trio.current_time()
        with_epochs: dict[TopicPartition, tuple[int, int]] = {}
        without_epochs = []
        for tp, state in self.partition_states.items():
            if not state.is_truncating(now) or self._is_paused(tp):
                continue
            try:
                latest = self._partition(tp).log.leader_epoch_cache.latest_epoch
            except KafkaError:
                continue
            if latest is None:
                without_epochs.append(tp)
            else:
                with_epochs[tp] = (state.current_leader_epoch, latest)
        if with_epochs:
            await self._truncate_to_epoch_end_offsets(client, with_epochs)
        for tp in without_epochs:
            current = self.partition_states.get(tp)
            if current is not None and current.is_truncating(trio.current_time()):
                log.log(self._truncation_level(tp, current.fetch_offset),
                        "%s-%d: no leader epochs: truncating to the high watermark %d", *tp, current.fetch_offset)
                self._truncate(tp, current, current.fetch_offset)

    async def _truncate_to_epoch_end_offsets(self, client: NetworkClient,
                                             requested: dict[TopicPartition, tuple[int, int]]) -> None:
        R = OffsetForLeaderEpochRequest[OFFSET_FOR_LEADER_EPOCH_VERSION]
        by_topic: dict[str, list] = {}
        for (topic, index), (current_epoch, epoch) in requested.items():
            by_topic.setdefault(topic, []).append(R.OffsetForLeaderTopic.OffsetForLeaderPartition(
                partition=index, current_leader_epoch=current_epoch, leader_epoch=epoch))
        request = R(replica_id=self._replica_manager.node_id, topics=[
            R.OffsetForLeaderTopic(topic=topic, partitions=parts) for topic, parts in by_topic.items()])
        try:
            response = await client.send(request, OFFSET_FOR_LEADER_EPOCH_VERSION)
        except DisconnectedError as exc:
            self._failures.failed(f"OffsetForLeaderEpoch: {exc}")
            self._delay(requested)
            return
        self._failures.succeeded()
        retry = []
        for topic in response.topics:
            for p in topic.partitions:
                tp = (topic.topic, p.partition)
                state = self.partition_states.get(tp)
                if tp not in requested or state is None or state.current_leader_epoch != requested[tp][0]:
                    continue  # the partition moved on while the request was out
                code = ErrorCode(p.error_code)
                if code == ErrorCode.NONE:
                    offset, complete = self._offset_truncation_state(tp, state, p.leader_epoch, p.end_offset)
                    log.log(self._truncation_level(tp, offset),
                            "%s-%d: truncating to %d (leader's epoch %d ends at %d)%s", *tp, offset, p.leader_epoch,
                            p.end_offset, "" if complete else "; the next fetch checks the epochs before")
                    self._truncate(tp, state, offset)
                elif code == ErrorCode.FENCED_LEADER_EPOCH:
                    if self._on_partition_fenced(tp, requested[tp][0]):
                        retry.append(tp)
                else:
                    log.info("%s-%d: OffsetForLeaderEpoch answered %s; retrying", *tp, code.name)
                    retry.append(tp)
        self._delay(retry)

    def _offset_truncation_state(self, tp: TopicPartition, state: PartitionFetchState, leader_epoch: int,
                                 leader_end_offset: int) -> tuple[int, bool]:
        """Where to truncate given the leader's end offset for an epoch, and whether that is final (Kafka's
        getOffsetTruncationState)."""
        the_log = self._partition(tp).log
        log_end = the_log.log_end_offset
        if leader_end_offset == UNDEFINED:  # the leader knows no such epoch: keep to the starting position
            return state.fetch_offset, True
        if leader_epoch == UNDEFINED:
            return min(leader_end_offset, log_end), True
        follower_epoch, follower_end = the_log.end_offset_for_epoch(leader_epoch)
        if follower_end == UNDEFINED:  # this log never tracked that epoch: the leader's offset is the bound
            return min(leader_end_offset, log_end), True
        if follower_epoch != leader_epoch:  # an epoch this log does not have: cut to the one below, ask again
            return min(follower_end, log_end), False
        return min(follower_end, leader_end_offset, log_end), True

    def _truncation_level(self, tp: TopicPartition, offset: int) -> int:
        """INFO for a truncation that cuts records off; one at the log's end, as every new follower's is, DEBUG."""
        try:
            cuts = offset < self._partition(tp).log.log_end_offset
        except KafkaError:
            cuts = True
        return logging.INFO if cuts else logging.DEBUG

    def _truncate(self, tp: TopicPartition, state: PartitionFetchState, offset: int) -> None:
        """Cut the log at `offset` and fetch from there. Even when more truncation may be needed (an epoch this
        log does not have), fetching resumes: the fetch carries the log's latest epoch, and the leader answers a
        divergence with the next epoch's end offset (KIP-320)."""
        try:
            partition = self._partition(tp)
            if offset < partition.high_watermark:
                log.warning("%s-%d: truncating to %d, below the high watermark %d", *tp, offset,
                            partition.high_watermark)
            partition.log.truncate_to(offset, now_ms=wall_clock_ms())
            partition.clamp_high_watermark()
        except Exception as exc:  # noqa: BLE001 - a partition that cannot truncate cannot follow
            self._mark_failed(tp, f"truncation to {offset} failed: {exc!r}")
            return
        state.fetch_offset = offset
        state.last_fetched_epoch = partition.log.leader_epoch_cache.latest_epoch
        state.state = FetchState.FETCHING

    # ---- fetching ------------------------------------------------------------------------------------------------

    async def _maybe_fetch(self, client: NetworkClient) -> None:
        now = trio.current_time()
        ready = {}
        for tp, state in self.partition_states.items():
            if not state.is_ready_for_fetch(now):
                continue
            if not self._is_paused(tp):
                ready[tp] = state
            elif self._held_back is not None:
                self._held_back(tp)
        if not ready:
            await self._idle()
            return
        sent: dict[TopicPartition, tuple[PartitionFetchState, int]] = {}
        session_request = self._session_request(ready, sent)
        if not sent:
            await self._idle()
            return
        try:
            response = await client.send(self._fetch_request(session_request), FETCH_VERSION)
        except DisconnectedError as exc:
            self.session.handle_error()
            self._failures.failed(f"Fetch: {exc}")
            self._delay(sent)
            await self._idle()
            return
        self._failures.succeeded()
        await self._process_fetch_response(client, response, sent, session_request)

    def _session_request(self, ready: dict[TopicPartition, PartitionFetchState],
                         sent: dict[TopicPartition, tuple[PartitionFetchState, int]]) -> FetchRequestData:
        """What to fetch of the partitions ready for it, within the session; `sent` receives all of them (the
        leader fetches every partition of the session, and may answer any)."""
        wanted: dict[TopicPartition, tuple[uuid.UUID, PartitionData]] = {}
        unavailable = []
        quota = self._replica_manager.replication_quotas.follower
        for tp, state in ready.items():
            if state.lag > 0 and quota.is_throttled(tp) and quota.is_quota_exceeded():
                continue  # Kafka's shouldFollowerThrottle: not in sync, throttled, over the quota: left out for now
            try:
                start = self._partition(tp).log.log_start_offset
            except KafkaError:
                unavailable.append(tp)
                continue
            last_epoch = state.last_fetched_epoch
            wanted[tp] = (state.topic_id, PartitionData(
                state.fetch_offset, self._config.replica_fetch_max_bytes, state.current_leader_epoch,
                UNDEFINED if last_epoch is None else last_epoch, start))
            sent[tp] = (state, state.fetch_offset)
        self._delay(unavailable)
        return self.session.build(wanted)

    def _fetch_request(self, session_request: FetchRequestData) -> ApiMessage:
        R = FetchRequest[FETCH_VERSION]
        FP = R.FetchTopic.FetchPartition
        config = self._config
        by_topic: dict[uuid.UUID, list] = {}
        for (_, index), (topic_id, data) in session_request.to_send.items():
            by_topic.setdefault(topic_id, []).append(FP(
                partition=index, current_leader_epoch=data.current_leader_epoch, fetch_offset=data.fetch_offset,
                last_fetched_epoch=data.last_fetched_epoch, log_start_offset=data.log_start_offset,
                partition_max_bytes=data.max_bytes))
        forgotten: dict[uuid.UUID, list[int]] = {}
        for (_, index), topic_id in session_request.to_forget.items():
            forgotten.setdefault(topic_id, []).append(index)
        return R(replica_state=R.ReplicaState(replica_id=self._replica_manager.node_id,
                                              replica_epoch=self._replica_manager.broker_epoch),
                 max_wait_ms=config.replica_fetch_wait_max_ms, min_bytes=config.replica_fetch_min_bytes,
                 max_bytes=config.replica_fetch_response_max_bytes, isolation_level=0,
                 session_id=session_request.session_id, session_epoch=session_request.epoch,
                 topics=[R.FetchTopic(topic_id=topic_id, partitions=parts) for topic_id, parts in by_topic.items()],
                 forgotten_topics_data=[R.ForgottenTopic(topic_id=topic_id, partitions=indexes)
                                        for topic_id, indexes in forgotten.items()], rack_id="")

    async def _process_fetch_response(self, client: NetworkClient, response: Any,
                                      sent: dict[TopicPartition, tuple[PartitionFetchState, int]],
                                      session_request: FetchRequestData) -> None:
        names = {(state.topic_id, tp[1]): tp for tp, (state, _) in sent.items()}
        answered = [names.get((topic.topic_id, p.partition_index), (str(topic.topic_id), p.partition_index))
                    for topic in response.responses for p in topic.partitions]
        code = ErrorCode(response.error_code)
        if not self.session.handle_response(session_request, code, response.session_id, answered):
            if code == ErrorCode.NONE:
                log.info("%r: the fetch answer does not match fetch session %d: the next fetch is full", self,
                         session_request.session_id)
            elif code in SESSION_ERRORS:
                log.info("%r: fetch session %d answered %s: the next fetch is full", self,
                         session_request.session_id, code.name)
            else:
                log.info("%r: fetch answered %s", self, code.name)
                self._delay(sent)
            return
        log.debug("%r: fetch session %d epoch %d: sent %d partitions, forgot %d, answered %d", self,
                  session_request.session_id, session_request.epoch, len(session_request.to_send),
                  len(session_request.to_forget), len(answered))
        errors: list[TopicPartition] = []
        diverging: dict[TopicPartition, tuple[int, int]] = {}
        for topic in response.responses:
            for p in topic.partitions:
                tp = names.get((topic.topic_id, p.partition_index))
                if tp is None:
                    continue
                state, offset = sent[tp]
                if self.partition_states.get(tp) is not state or state.fetch_offset != offset \
                        or not state.is_ready_for_fetch(trio.current_time()) or self._is_paused(tp):
                    continue  # removed, re-added, moved or paused while the fetch was out
                code = ErrorCode(p.error_code)
                if code == ErrorCode.NONE:
                    if p.diverging_epoch is not None and p.diverging_epoch.epoch >= 0:
                        diverging[tp] = (p.diverging_epoch.epoch, p.diverging_epoch.end_offset)
                    elif not self._process_partition_data(tp, state, p):
                        errors.append(tp)
                    await trio.lowlevel.checkpoint()
                elif code == ErrorCode.OFFSET_OUT_OF_RANGE:
                    if not await self._handle_out_of_range(client, tp, state):
                        errors.append(tp)
                elif code == ErrorCode.FENCED_LEADER_EPOCH:
                    if self._on_partition_fenced(tp, state.current_leader_epoch):
                        errors.append(tp)
                else:
                    if code not in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_LEADER_EPOCH):
                        log.warning("%s-%d: fetch from broker %d answered %s", *tp, self.leader_id, code.name)
                    errors.append(tp)
        for tp, (epoch, end_offset) in diverging.items():
            current = self.partition_states.get(tp)
            if current is not None:
                offset, _ = self._offset_truncation_state(tp, current, epoch, end_offset)
                log.info("%s-%d: diverging from the leader at epoch %d, end offset %d: truncating to %d", *tp, epoch,
                         end_offset, offset)
                self._truncate(tp, current, offset)
        self._delay(errors)

    def _process_partition_data(self, tp: TopicPartition, state: PartitionFetchState, data: Any) -> bool:
        """Append what the leader sent and take over its high watermark and log start offset; False on an error
        worth retrying after the backoff."""
        try:
            partition = self._partition(tp)
            the_log = partition.log
            if state.fetch_offset != the_log.log_end_offset:
                self._mark_failed(tp, f"fetched offset {state.fetch_offset} is not the log end offset "
                                      f"{the_log.log_end_offset}")
                return True
            appended = the_log.append_as_follower(data.records, now_ms=wall_clock_ms()) if data.records else None
            quota = self._replica_manager.replication_quotas.follower
            if data.records and quota.is_throttled(tp):
                quota.record(len(data.records))
            partition.update_follower_high_watermark(data.high_watermark)
            new_start = min(data.log_start_offset, partition.high_watermark)
            if new_start > the_log.log_start_offset:
                the_log.maybe_increment_log_start_offset(new_start)
        except CorruptRecordError as exc:
            log.error("%s-%d: invalid records from broker %d at offset %d: %s", *tp, self.leader_id,
                      state.fetch_offset, exc)
            return False
        except KafkaError as exc:
            if exc.code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
                return True
            self._mark_failed(tp, f"processing fetched data failed: {exc!r}")
            self._replica_manager.report_io_error(tp, exc)
            return True
        except Exception as exc:  # noqa: BLE001 - a broken log (disk) stops replication of this partition only
            self._mark_failed(tp, f"processing fetched data failed: {exc!r}")
            self._replica_manager.report_io_error(tp, exc)
            return True
        if appended is not None and appended.last_offset >= 0:
            state.fetch_offset = appended.last_offset + 1
            state.last_fetched_epoch = the_log.leader_epoch_cache.latest_epoch
            self._replica_manager.metrics.replication_bytes_in += len(data.records)
        state.lag = max(0, data.high_watermark - state.fetch_offset)
        return True

    async def _handle_out_of_range(self, client: NetworkClient, tp: TopicPartition,
                                   state: PartitionFetchState) -> bool:
        """Kafka's fetchOffsetAndTruncate: a follower past the leader's end (an unclean election) truncates to
        it; one below the leader's start (retention moved on) starts over empty at it. True when the position was
        reset (or the partition is fenced and waits for metadata), False to retry after the backoff."""
        epoch = state.current_leader_epoch
        try:
            leader_end = await self._leader_offset(client, tp, epoch, SpecialTimestamp.LATEST_TIMESTAMP)
            leader_start = None
            if leader_end >= self._partition(tp).log.log_end_offset:
                leader_start = await self._leader_offset(client, tp, epoch, SpecialTimestamp.EARLIEST_TIMESTAMP)
        except KafkaError as exc:
            if exc.code == ErrorCode.FENCED_LEADER_EPOCH:
                return not self._on_partition_fenced(tp, epoch)
            log.info("%s-%d: cannot reset the out-of-range position %d: %s", *tp, state.fetch_offset, exc)
            return False
        except DisconnectedError as exc:
            log.info("%s-%d: cannot reset the out-of-range position %d: %s", *tp, state.fetch_offset, exc)
            return False
        current = self.partition_states.get(tp)
        if current is not state or state.current_leader_epoch != epoch:
            return True
        try:
            partition = self._partition(tp)
            the_log = partition.log
            log_end = the_log.log_end_offset
            if leader_start is None:
                log.warning("%s-%d: resetting the fetch offset from %d to the leader's end offset %d", *tp, log_end,
                            leader_end)
                the_log.truncate_to(leader_end, now_ms=wall_clock_ms())
                offset = leader_end
            elif leader_start > log_end:
                log.warning("%s-%d: the log ends at %d, before the leader's start offset %d: starting over there",
                            *tp, log_end, leader_start)
                the_log.truncate_fully_and_start_at(leader_start, now_ms=wall_clock_ms())
                offset = leader_start
            else:
                offset = log_end
            partition.clamp_high_watermark()
        except Exception as exc:  # noqa: BLE001 - a partition that cannot truncate cannot follow
            self._mark_failed(tp, f"resetting the out-of-range position failed: {exc!r}")
            return True
        state.fetch_offset = offset
        state.state = FetchState.FETCHING
        state.last_fetched_epoch = the_log.leader_epoch_cache.latest_epoch
        return True

    async def _leader_offset(self, client: NetworkClient, tp: TopicPartition, current_leader_epoch: int,
                             timestamp: int) -> int:
        R = ListOffsetsRequest[LIST_OFFSETS_VERSION]
        T = R.ListOffsetsTopic
        request = R(replica_id=self._replica_manager.node_id, isolation_level=0, topics=[T(name=tp[0], partitions=[
            T.ListOffsetsPartition(partition_index=tp[1], current_leader_epoch=current_leader_epoch,
                                   timestamp=timestamp)])])
        response = await client.send(request, LIST_OFFSETS_VERSION)
        for topic in response.topics:
            for p in topic.partitions:
                if topic.name == tp[0] and p.partition_index == tp[1]:
                    if p.error_code != ErrorCode.NONE:
                        raise KafkaError(ErrorCode(p.error_code), f"ListOffsets for {tp[0]}-{tp[1]}")
                    return int(p.offset)
        raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"ListOffsets answer has no {tp[0]}-{tp[1]}")
