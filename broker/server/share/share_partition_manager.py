"""The share-partitions a broker leads and the share sessions of their members (Kafka's SharePartitionManager,
KIP-932): what ShareFetch and ShareAcknowledge act on.

A share-partition (one group's view of one topic partition) is created on demand on the partition's leader, at its
leader epoch, and loaded from the persister; one the persister has no start offset for starts where the group's
share.auto.offset.reset says (latest by default). A share-partition that fails to load is dropped, so the next fetch
tries again. It is dropped when its partition stops being led here (a new leader loads the persisted state; an
acquisition is never persisted, so what a member held is delivered again there) and when a persister write is
fenced by a newer leader.

A fetch reads the log from the share-partition's next fetch offset, waits in the broker's purgatory (at most
max_wait_ms, Kafka's DelayedShareFetch) until min_bytes could be acquired, then acquires at most max_records for the
member under an acquisition lock of share.record.lock.duration.ms (the group's, else
group.share.record.lock.duration.ms). A wait ends when the high watermark moves or when records are released
(acknowledged RELEASE, a lock that ran out, a member gone). One task expires the acquisition locks as their deadlines
come, on trio's clock.

A member's acquired records are released when its share session ends: its final request (epoch -1) or its
connection closing (Kafka's ShareGroupListener.onMemberLeave, which the share session cache calls on a disconnect).
When a group's last share session here ends with its connection, the group's share-partitions are dropped
(onGroupEmpty), to be loaded again by the next fetch.
"""
from __future__ import annotations

import logging
import math
import re
import time
from collections.abc import Awaitable, Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any

import trio
from kafka.protocol.consumer.offsets import IsolationLevel

from minikafka.broker.coordinator.group.group_config import (
    SHARE_AUTO_OFFSET_RESET,
    SHARE_ISOLATION_LEVEL,
    SHARE_RECORD_LOCK_DURATION_MS,
)
from minikafka.broker.coordinator.share.share_coordinator_shard import SharePartitionKey
from minikafka.broker.replication.delayed_fetch import FetchParams, FetchPartitionRequest, fetch_key
from minikafka.broker.replication.purgatory import Purgatory
from minikafka.broker.replication.replica_manager import ReplicaManager
from minikafka.broker.server.share.persister import Persister
from minikafka.broker.server.share.share_partition import (
    AcknowledgementBatch,
    AcquiredRecords,
    SharePartition,
)
from minikafka.broker.server.share.share_session_cache import (
    ShareSession,
    ShareSessionCache,
    TopicIdPartition,
)
from minikafka.config import BrokerConfig
from minikafka.protocol.codec import Records
from minikafka.protocol.errors import DEFAULT_MESSAGES, ErrorCode, KafkaError, error_of
from minikafka.protocol.file_records import FileRecords
from minikafka.protocol.record_batch import HEADER_SIZE, BatchHeader, iter_batches, parse_header
from minikafka.storage.special_timestamps import SpecialTimestamp
from minikafka.storage.transaction_index import AbortedTxn

log = logging.getLogger("minikafka.share_partition_manager")

# Errors that mean another broker owns the share-partition now, or it is gone: it is dropped here, and the client,
# told so, looks for the leader again (Kafka's fencedSharePartitionHandler).
FENCED_ERRORS = frozenset((ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_STATE_EPOCH,
                           ErrorCode.GROUP_ID_NOT_FOUND, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))


def share_fetch_key(key: SharePartitionKey) -> Hashable:
    """The purgatory key share fetches of a share-partition wait on for released records."""
    return ("share_fetch", key.group_id, key.topic_id, key.partition)


def now_ms() -> int:
    return int(trio.current_time() * 1000)


@dataclass
class SharePartitionFetch:
    """One share-partition's part of a fetch: an error, or the records acquired and the batches holding them."""
    error: ErrorCode = ErrorCode.NONE
    error_message: str | None = None
    acquired: list[AcquiredRecords] = field(default_factory=list)
    records: Records = b""
    leader_id: int = -1
    leader_epoch: int = -1


@dataclass
class _Read:
    """What one read of the log found for a share-partition, before acquisition."""
    share_partition: SharePartition
    fetch_offset: int
    records: Records
    batches: list[tuple[int, BatchHeader]]
    aborted: list[AbortedTxn] | None = None  # read_committed: the aborted transactions the records overlap

    def aborted_ranges(self) -> tuple[tuple[int, int], ...]:
        """The offsets of the batches of aborted transactions (not their markers): a read_committed share group
        archives them rather than deliver them (Kafka's filterAbortedTransactionalAcquiredRecords)."""
        if not self.aborted:
            return ()
        return tuple((h.base_offset, h.last_offset) for _, h in self.batches
                     if h.is_transactional and not h.is_control
                     and any(t.producer_id == h.producer_id and t.first_offset <= h.base_offset <= t.last_offset
                             for t in self.aborted))


def batch_headers(records: Records) -> list[tuple[int, BatchHeader]]:
    """The position and header of each complete batch in `records` (a file's are read header by header)."""
    if not isinstance(records, FileRecords):
        return list(iter_batches(records))
    out = []
    pos = 0
    while pos + HEADER_SIZE <= len(records):
        header = parse_header(records.read(pos, HEADER_SIZE))
        if pos + header.size > len(records):
            break
        out.append((pos, header))
        pos += header.size
    return out


def slice_records(records: Records, start: int, end: int) -> Records:
    """Bytes start..end of `records`, still a slice of its file when it is one."""
    if isinstance(records, FileRecords):
        return FileRecords(records.fd, records.position + start, end - start)
    return records[start:end]


def records_of(read: _Read, acquired: list[AcquiredRecords]) -> Records:
    """The batches of a read that hold the acquired offsets (the member gets no batch it acquired nothing of)."""
    if not acquired:
        return b""
    first, last = acquired[0].first_offset, acquired[-1].last_offset
    held = [(pos, h) for pos, h in read.batches if h.last_offset >= first and h.base_offset <= last]
    start = held[0][0]
    end = held[-1][0] + held[-1][1].size
    return slice_records(read.records, start, end)


def split_at_batches(acquired: list[AcquiredRecords], base_offsets: list[int], batch_size: int
                     ) -> list[AcquiredRecords]:
    """The acquired ranges cut at a log batch's base offset once a range holds batch_size records or more, so a
    member acknowledges in pieces of about batch_size (Kafka's createBatches; a log batch is never cut)."""
    if batch_size <= 0:
        return acquired
    out = []
    for a in acquired:
        first = a.first_offset
        for base in base_offsets:
            if first < base <= a.last_offset and base - first >= batch_size:
                out.append(AcquiredRecords(first, base - 1, a.delivery_count))
                first = base
        out.append(AcquiredRecords(first, a.last_offset, a.delivery_count))
    return out


class SharePartitionManager:
    def __init__(self, config: BrokerConfig, replica_manager: ReplicaManager, purgatory: Purgatory,
                 persister: Callable[[], Persister], group_configs: Callable[[str], Mapping[str, str]]) -> None:
        self.config = config
        self.replica_manager = replica_manager
        self.purgatory = purgatory
        self._persister = persister
        self._group_configs = group_configs
        self.sessions = ShareSessionCache(config.get("group.share.max.share.sessions"))
        self.partitions: dict[SharePartitionKey, SharePartition] = {}
        self._timer_changed = trio.Event()
        self._nursery: trio.Nursery | None = None
        self._closed_send, self._closed_receive = trio.open_memory_channel[str](math.inf)
        replica_manager.on_become_follower.append(self._on_partition_moved)
        replica_manager.on_become_leader.append(self._on_partition_moved)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Expire acquisition locks and release the records of members whose connections closed, until
        cancelled."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            nursery.start_soon(self._expire_acquisition_locks)
            nursery.start_soon(self._release_closed_connections)
            task_status.started()

    # ---- configs ---------------------------------------------------------------------------------------------

    def record_lock_duration_ms(self, group_id: str) -> int:
        """The group's share.record.lock.duration.ms, else the broker's group.share.record.lock.duration.ms."""
        override = self._group_configs(group_id).get(SHARE_RECORD_LOCK_DURATION_MS)
        return int(override) if override is not None else self.config.get("group.share.record.lock.duration.ms")

    def isolation_level(self, group_id: str) -> int:
        level = self._group_configs(group_id).get(SHARE_ISOLATION_LEVEL, "read_uncommitted")
        return IsolationLevel.READ_COMMITTED if level == "read_committed" else IsolationLevel.READ_UNCOMMITTED

    def _reset_offset(self, group_id: str, tp: tuple[str, int]) -> Callable[[], Awaitable[int]]:
        """Where a share-partition with no persisted start offset starts: share.auto.offset.reset's latest (the
        high watermark), earliest (the log start) or by_duration (the first record at or after now - duration,
        else latest)."""
        strategy = self._group_configs(group_id).get(SHARE_AUTO_OFFSET_RESET, "latest").strip().lower()

        async def reset() -> int:
            rm = self.replica_manager
            if strategy == "earliest":
                timestamp = int(SpecialTimestamp.EARLIEST_TIMESTAMP)
            elif strategy.startswith("by_duration:"):
                timestamp = int(time.time() * 1000) - iso_duration_ms(strategy[len("by_duration:"):])
                found = rm.fetch_offset_for_timestamp(tp, timestamp, IsolationLevel.READ_UNCOMMITTED)
                if found.offset >= 0:
                    return found.offset
                timestamp = int(SpecialTimestamp.LATEST_TIMESTAMP)
            else:
                timestamp = int(SpecialTimestamp.LATEST_TIMESTAMP)
            return rm.fetch_offset_for_timestamp(tp, timestamp, IsolationLevel.READ_UNCOMMITTED).offset
        return reset

    # ---- sessions --------------------------------------------------------------------------------------------

    def new_context(self, group_id: str, member_id: str, epoch: int, fetch: list[TopicIdPartition],
                    forget: list[TopicIdPartition], has_acknowledgements: bool, connection_id: str
                    ) -> ShareSession | None:
        """The share session of a ShareFetch (see ShareSessionCache.new_context); ShareSessionError otherwise."""
        return self.sessions.new_context(group_id, member_id, epoch, fetch, forget, has_acknowledgements,
                                         connection_id)

    def acknowledge_session_update(self, group_id: str, member_id: str, epoch: int) -> None:
        self.sessions.acknowledge_session_update(group_id, member_id, epoch)

    async def release_session(self, group_id: str, member_id: str) -> ErrorCode:
        """End a member's share session and release what it acquired in its partitions; SHARE_SESSION_NOT_FOUND
        when it has none. The group's last session ending drops its share-partitions, as a connection closing does
        (Kafka's onGroupEmpty): state changed meanwhile in the share coordinator (an offsets reset) is read anew."""
        session = self.sessions.remove(group_id, member_id)
        if session is None:
            return ErrorCode.SHARE_SESSION_NOT_FOUND
        await self._release(session)
        if not any(s.group_id == group_id for s in self.sessions.sessions()):
            self.on_group_empty(group_id)
        return ErrorCode.NONE

    def on_group_empty(self, group_id: str) -> None:
        """The share group has no share session left here: its share-partitions are dropped (loaded again when
        needed)."""
        for key in [k for k in self.partitions if k.group_id == group_id]:
            self._remove(key)

    def connection_closed(self, connection_id: str) -> None:
        """A client connection closed: the sessions opened on it end, their records are released."""
        self._closed_send.send_nowait(connection_id)

    async def _release_closed_connections(self) -> None:
        async for connection_id in self._closed_receive:
            for session in self.sessions.connection_closed(connection_id):
                log.info("share session of member %s of group %s ended with its connection", session.member_id,
                         session.group_id)
                await self._release(session)
                if not any(s.group_id == session.group_id for s in self.sessions.sessions()):
                    self.on_group_empty(session.group_id)

    async def _release(self, session: ShareSession) -> None:
        for topic_id, partition in session.partitions:
            key = SharePartitionKey(session.group_id, topic_id, partition)
            share_partition = self.partitions.get(key)
            if share_partition is None:
                continue
            error, message = await share_partition.release_acquired_records(session.member_id)
            if error != ErrorCode.NONE:
                log.info("records of member %s in %s not released: %s (%s)", session.member_id, key, error.name,
                         message)
                self._maybe_fenced(key, error)
            self._wake(key)

    # ---- share-partitions ------------------------------------------------------------------------------------

    def _on_partition_moved(self, tp: tuple[str, int]) -> None:
        """Leadership of a partition changed here (lost, or taken at a new epoch): its share-partitions go, and
        a fetch at the new epoch loads them from the persister again."""
        for key, share_partition in list(self.partitions.items()):
            if share_partition.topic_partition == tp:
                partition = self.replica_manager.partitions.get(tp)
                if partition is None or not partition.is_leader or partition.leader_epoch != \
                        share_partition.leader_epoch:
                    self._remove(key)

    def _remove(self, key: SharePartitionKey) -> None:
        if self.partitions.pop(key, None) is not None:
            log.info("share-partition %s dropped", key)
            self._wake(key)

    def _maybe_fenced(self, key: SharePartitionKey, error: ErrorCode) -> None:
        if error in FENCED_ERRORS:
            self._remove(key)

    def _wake(self, key: SharePartitionKey) -> None:
        self.purgatory.check_and_complete(share_fetch_key(key))

    def get_or_create(self, key: SharePartitionKey, topic: str) -> SharePartition:
        """The share-partition, where this broker leads its partition (KafkaError NOT_LEADER_OR_FOLLOWER or
        UNKNOWN_TOPIC_OR_PARTITION otherwise), at the partition's leader epoch."""
        partition = self.replica_manager.leader_partition(topic, key.partition)
        share_partition = self.partitions.get(key)
        if share_partition is not None and share_partition.leader_epoch == partition.leader_epoch:
            return share_partition
        share_partition = SharePartition(key, partition.leader_epoch, self._persister(),
                                         delivery_count_limit=self.config.get("group.share.delivery.count.limit"),
                                         max_record_locks=self.config.get("group.share.partition.max.record.locks"),
                                         topic_partition=(topic, key.partition))
        self.partitions[key] = share_partition
        return share_partition

    def describe(self, group_id: str) -> dict[str, Any]:
        """What this broker holds of a share group, for state inspection: each loaded share-partition's start and
        end offsets and in-flight records (state, delivery count, holder), and the members' share sessions."""
        partitions = []
        for key, share_partition in sorted(self.partitions.items(), key=lambda kv: kv[1].topic_partition):
            state = share_partition.state
            if key.group_id != group_id or state is None:
                continue
            records = []
            for offset in range(state.start_offset, state.end_offset):
                record = state.record(offset)
                if record is not None:
                    records.append({"offset": offset, "state": record.state.name, "delivery_count":
                                    record.delivery_count, "member_id": record.member_id or None})
            topic, index = share_partition.topic_partition
            partitions.append({"topic": topic, "partition": index, "leader_epoch": share_partition.leader_epoch,
                               "start_offset": state.start_offset, "end_offset": state.end_offset,
                               "records": records})
        sessions = [{"member_id": session.member_id, "epoch": session.epoch,
                     "partitions": [[str(tid), index] for tid, index in session.partitions]}
                    for session in self.sessions.sessions() if session.group_id == group_id]
        return {"partitions": partitions, "sessions": sessions}

    # ---- fetch -----------------------------------------------------------------------------------------------

    async def fetch_messages(self, group_id: str, member_id: str, params: FetchParams, session_epoch: int,
                             max_records: int, batch_size: int, partitions: list[tuple[SharePartitionKey, str]],
                             client: trio.SocketStream | None = None,
                             stop_early: Callable[[], bool] = lambda: False
                             ) -> dict[SharePartitionKey, SharePartitionFetch]:
        """Acquire records of `partitions` (each with its topic's name) for a member: at once when there are
        min_bytes to acquire, else once enough came or max_wait_ms passed; answered in ranges of about
        batch_size. The partitions are taken in a
        rotation by session epoch, so that max_bytes and max_records do not always favour the first."""
        if partitions:
            shift = session_epoch % len(partitions) if session_epoch > 0 else 0
            partitions = partitions[shift:] + partitions[:shift]
        results: dict[SharePartitionKey, SharePartitionFetch] = {}
        wanted: list[tuple[SharePartitionKey, str, SharePartition]] = []
        for key, topic in partitions:
            try:
                share_partition = self.get_or_create(key, topic)
            except Exception as exc:  # noqa: BLE001 - reported per partition
                results[key] = self._failed(key, topic, error_of(exc).code, str(exc))
                continue
            if share_partition.state is None:
                self._start_loading(group_id, key, topic, share_partition)
            wanted.append((key, topic, share_partition))
        keys: list[Hashable] = [k for key, _, sp in wanted
                                for k in (share_fetch_key(key), fetch_key(sp.topic_partition))]
        deadline = trio.current_time() + params.max_wait_ms / 1000
        while wanted:
            loaded: list[tuple[SharePartitionKey, SharePartition]] = []
            for key, topic, share_partition in wanted:
                if key in results:
                    continue
                if share_partition.load_error != ErrorCode.NONE:
                    results[key] = self._failed(key, topic, share_partition.load_error, None)
                elif self.partitions.get(key) is not share_partition:
                    results[key] = self._failed(key, topic, ErrorCode.NOT_LEADER_OR_FOLLOWER, None)
                elif share_partition.state is not None:
                    loaded.append((key, share_partition))
            failed = any(key in results for key, _, _ in wanted)
            reads = await self._read(params, loaded, results) if loaded else {}
            readable = sum(len(r.records) for r in reads.values())
            expired = trio.current_time() >= deadline or stop_early()
            failed = failed or any(key in results for key, _ in loaded)
            if readable >= params.min_bytes or expired or failed:
                acquired = await self._acquire(group_id, member_id, max_records, batch_size, reads, results)
                if acquired or expired or failed:
                    break
            await self.purgatory.wait_any(keys, deadline - trio.current_time(), client)
        for key, _, share_partition in wanted:  # still loading, or nothing to acquire: answered with no records
            results.setdefault(key, SharePartitionFetch(leader_id=self.replica_manager.node_id,
                                                        leader_epoch=share_partition.leader_epoch))
        return results

    def _start_loading(self, group_id: str, key: SharePartitionKey, topic: str,
                       share_partition: SharePartition) -> None:
        """Load a share-partition from the persister in the background: a persister looking for a share
        coordinator that moves may take longer than a fetch may wait, and the fetches waiting meanwhile are
        answered with nothing at their max_wait_ms, as Kafka's are."""
        if share_partition.loading:
            return
        share_partition.loading = True
        assert self._nursery is not None, "the share partition manager runs"
        self._nursery.start_soon(self._load, group_id, key, topic, share_partition)

    async def _load(self, group_id: str, key: SharePartitionKey, topic: str, share_partition: SharePartition
                    ) -> None:
        try:
            error = await share_partition.maybe_initialize(self._reset_offset(group_id, (topic, key.partition)))
        except Exception as exc:  # noqa: BLE001 - e.g. leadership lost while the reset offset was looked up
            error = error_of(exc).code
        share_partition.loading = False
        if error != ErrorCode.NONE:
            share_partition.load_error = error  # the fetches waiting for it answer it; the next one loads anew
            if self.partitions.get(key) is share_partition:
                del self.partitions[key]
        self._wake(key)

    def _failed(self, key: SharePartitionKey, topic: str, error: ErrorCode, message: str | None
                ) -> SharePartitionFetch:
        leader_id, leader_epoch = self.replica_manager.current_leader((topic, key.partition))
        return SharePartitionFetch(error, message, leader_id=leader_id, leader_epoch=leader_epoch)

    async def _read(self, params: FetchParams, loaded: list[tuple[SharePartitionKey, SharePartition]],
                    results: dict[SharePartitionKey, SharePartitionFetch]) -> dict[SharePartitionKey, _Read]:
        """Read each share-partition that can acquire from its next fetch offset, within max_bytes (the first
        non-empty one may exceed it); a partition that fails goes into `results`."""
        wanted: list[tuple[SharePartitionKey, SharePartition, FetchPartitionRequest]] = []
        for key, share_partition in loaded:
            state = share_partition.state
            if key in results or state is None or self.partitions.get(key) is not share_partition:
                if key not in results:
                    results[key] = self._failed(key, share_partition.topic_partition[0],
                                                ErrorCode.NOT_LEADER_OR_FOLLOWER, None)
                continue
            partition = self.replica_manager.partitions.get(share_partition.topic_partition)
            if partition is not None and partition.log.log_start_offset > state.start_offset:
                error, message = await share_partition.update_log_start_offset(partition.log.log_start_offset)
                if error != ErrorCode.NONE:
                    self._maybe_fenced(key, error)
                    results[key] = self._failed(key, share_partition.topic_partition[0], error, message)
                    continue
            if not state.can_acquire():
                continue
            wanted.append((key, share_partition, FetchPartitionRequest(
                share_partition.topic_partition, state.next_fetch_offset(), params.max_bytes,
                share_partition.leader_epoch)))
        read = await self.replica_manager.read_from_log(params, [fr for _, _, fr in wanted], update_fetch_state=False)
        reads: dict[SharePartitionKey, _Read] = {}
        for (key, share_partition, fr), result in zip(wanted, read, strict=True):
            if result.error is not None:
                self._maybe_fenced(key, result.error.code)
                results[key] = SharePartitionFetch(result.error.code, str(result.error), leader_id=result.leader_id,
                                                   leader_epoch=result.leader_epoch)
                continue
            batches = batch_headers(result.records)
            if batches:
                reads[key] = _Read(share_partition, fr.fetch_offset, result.records, batches,
                                   result.aborted_transactions)
        return reads

    async def _acquire(self, group_id: str, member_id: str, max_records: int, batch_size: int,
                       reads: dict[SharePartitionKey, _Read], results: dict[SharePartitionKey, SharePartitionFetch]
                       ) -> bool:
        """Acquire what was read, up to max_records in all; whether anything was."""
        lock_ms = self.record_lock_duration_ms(group_id)
        any_acquired = False
        for key, read in reads.items():
            if max_records <= 0:
                break
            first = max(read.fetch_offset, read.batches[0][1].base_offset)
            last = read.batches[-1][1].last_offset
            acquired = await read.share_partition.acquire(member_id, first, last, max_records, now_ms(), lock_ms,
                                                          read.aborted_ranges())
            if not acquired:
                continue
            any_acquired = True
            max_records -= sum(a.last_offset - a.first_offset + 1 for a in acquired)
            acquired = split_at_batches(acquired, [h.base_offset for _, h in read.batches], batch_size)
            results[key] = SharePartitionFetch(acquired=acquired, records=records_of(read, acquired),
                                               leader_id=self.replica_manager.node_id,
                                               leader_epoch=read.share_partition.leader_epoch)
        if any_acquired:
            self._timer_changed.set()
        return any_acquired

    # ---- acknowledge -----------------------------------------------------------------------------------------

    async def acknowledge(self, group_id: str, member_id: str,
                          acknowledgements: dict[SharePartitionKey, list[AcknowledgementBatch]]
                          ) -> dict[SharePartitionKey, tuple[ErrorCode, str | None]]:
        """Apply a member's acknowledgements per share-partition: UNKNOWN_TOPIC_OR_PARTITION for one not loaded
        here (as Kafka answers), else the share-partition's answer."""
        out: dict[SharePartitionKey, tuple[ErrorCode, str | None]] = {}
        for key, batches in acknowledgements.items():
            share_partition = self.partitions.get(key)
            if share_partition is None:
                out[key] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, DEFAULT_MESSAGES[ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
                continue
            error, message = await share_partition.acknowledge(member_id, batches)
            self._maybe_fenced(key, error)
            self._wake(key)
            out[key] = error, message
        return out

    # ---- acquisition locks -----------------------------------------------------------------------------------

    async def _expire_acquisition_locks(self) -> None:
        """Release the records whose acquisition lock ran out, as each deadline comes (re-planned on each
        acquisition)."""
        while True:
            self._timer_changed = trio.Event()
            deadlines = [d for sp in self.partitions.values() if sp.state is not None
                         for d in (sp.state.next_lock_deadline_ms(),) if d is not None]
            wake_at = min(deadlines) / 1000 if deadlines else math.inf
            with trio.move_on_at(wake_at):
                await self._timer_changed.wait()
            now = now_ms()
            due = [(key, sp) for key, sp in self.partitions.items() if sp.state is not None
                   and (d := sp.state.next_lock_deadline_ms()) is not None and d <= now]
            async with trio.open_nursery() as nursery:
                for key, share_partition in due:
                    nursery.start_soon(self._expire, key, share_partition, now)

    async def _expire(self, key: SharePartitionKey, share_partition: SharePartition, now: int) -> None:
        error, message = await share_partition.expire_locks(now)
        if error != ErrorCode.NONE:
            log.info("expired acquisition locks of %s not written: %s (%s)", key, error.name, message)
            self._maybe_fenced(key, error)
            if error not in FENCED_ERRORS:
                await trio.sleep(1)  # the persister is unreachable: try again after a while, not at once
        self._wake(key)


def iso_duration_ms(text: str) -> int:
    """Milliseconds of an ISO-8601 duration as Java's Duration.parse reads it (PnDTnHnMn.nS)."""
    match = re.fullmatch(r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:[.,]\d+)?)S)?)?", text.strip().upper())
    if match is None:
        raise KafkaError(ErrorCode.INVALID_CONFIG, f"Invalid duration {text}")
    days, hours, minutes, seconds = match.groups()
    total = (int(days or 0) * 86400 + int(hours or 0) * 3600 + int(minutes or 0) * 60
             + float((seconds or "0").replace(",", ".")))
    return int(total * 1000)
