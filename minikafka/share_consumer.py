"""A member of a KIP-932 share group for `minikafka share-consume`, as Kafka's KafkaShareConsumer behaves with
explicit acknowledgement: no Python client speaks the share protocol yet.

Membership: the member makes up its id, joins with ShareGroupHeartbeat epoch 0 at the coordinator FindCoordinator
names, heartbeats at the interval answered, and leaves with epoch -1. The coordinator assigns the partitions.
Records: one share session (ShareFetch) with each leader of the assigned partitions, found by topic id in Metadata;
each fetch carries the acknowledgements of the records handed out since the previous one to that leader, and the
session is closed (ShareAcknowledge at epoch -1) with the last of them, which releases what was acquired and not
acknowledged. A partition whose leader moved (NOT_LEADER_OR_FOLLOWER...) is looked up again.

Requests go over a kafka-python network client, one at a time, from the caller's thread.
"""
from __future__ import annotations

import base64
import logging
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from minikafka.protocol.schema_loading import quiet_schema_loading

with quiet_schema_loading():
    import kafka.errors as errors
    from kafka.net.compat import KafkaNetClient
    from kafka.protocol.metadata import MetadataRequest
    from kafka.record import MemoryRecords

from minikafka.group_member import FENCED, REQUEST_TIMEOUT_MS, GroupMember, failed
from minikafka.protocol.client_apis.messages import ShareGroupHeartbeatRequest
from minikafka.protocol.client_apis.share_fetch import ShareAcknowledgeRequest, ShareFetchRequest
from minikafka.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

# Kafka's AcknowledgeType: GAP marks an acquired offset that holds no record (a transaction marker, a compacted
# record), which the broker archives.
GAP, ACCEPT, RELEASE, REJECT = 0, 1, 2, 3
ACKNOWLEDGE_TYPES = {"accept": ACCEPT, "release": RELEASE, "reject": REJECT}
INITIAL_EPOCH, FINAL_EPOCH = 0, -1
LEAVE_GROUP_MEMBER_EPOCH = -1
HEARTBEAT_VERSION = FETCH_VERSION = 1
# Kafka's share consumer defaults: fetch.max.wait.ms, fetch.min.bytes, fetch.max.bytes, max.poll.records.
FETCH_MAX_WAIT_MS = 500
FETCH_MIN_BYTES = 1
FETCH_MAX_BYTES = 52428800
MAX_POLL_RECORDS = 500
# A partition's errors that mean its leader is elsewhere now, or not known yet: Metadata is read again.
LEADER_MOVED = {errors.NotLeaderForPartitionError.errno, errors.UnknownTopicOrPartitionError.errno,
                errors.FencedLeaderEpochError.errno, errors.LeaderNotAvailableError.errno,
                errors.UnknownTopicIdError.errno, errors.KafkaStorageError.errno}
# The share session the leader knows is not this one (restarted broker, evicted session): open a new one.
SHARE_SESSION_LOST = {ErrorCode.SHARE_SESSION_NOT_FOUND, ErrorCode.INVALID_SHARE_SESSION_EPOCH}

TopicPartition = tuple[uuid.UUID, int]


def new_member_id() -> str:
    """A member id as Kafka's share consumer makes its own: a random UUID in Kafka's base64 form."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


@dataclass(frozen=True)
class ShareRecord:
    """A record handed to the member, with how many times it was delivered (1 the first time)."""
    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]]
    delivery_count: int


@dataclass
class _Session:
    """The member's share session with one leader: its epoch and the partitions it fetches."""
    epoch: int = INITIAL_EPOCH
    partitions: set[TopicPartition] = field(default_factory=set)
    # Acknowledgements to send with the next request: partition -> offset -> type.
    acks: dict[TopicPartition, dict[int, int]] = field(default_factory=dict)

    def advance(self) -> None:
        self.epoch = self.epoch + 1 if self.epoch < (1 << 31) - 1 else 1


class ShareGroupConsumer(GroupMember):
    """One member of share group `group_id` subscribed to `topics`. `poll()` heartbeats when due and fetches;
    `acknowledge()` records what to say of a delivered record; `close()` acknowledges the rest and leaves."""

    def __init__(self, group_id: str, topics: list[str], **client_configs: Any) -> None:
        super().__init__(group_id, new_member_id(), KafkaNetClient(**client_configs))
        self.topics = sorted(topics)
        self._client.check_version()  # bootstrap: the brokers and the API versions they serve
        self.assignment: set[TopicPartition] = set()
        self._joined = False
        self._names: dict[uuid.UUID, str] = {}
        self._ids: dict[str, uuid.UUID] = {}
        self._acquired_from: dict[TopicPartition, int] = {}  # the leader whose session last handed out records
        self._leaders: dict[TopicPartition, int] = {}
        self._sessions: dict[int, _Session] = {}
        self._stale_metadata = True

    # ---- membership ---------------------------------------------------------------------------------------------

    def _heartbeat(self) -> None:
        joining = self.member_epoch == 0
        request = ShareGroupHeartbeatRequest(
            group_id=self.group_id, member_id=self.member_id, member_epoch=self.member_epoch, rack_id=None,
            subscribed_topic_names=self.topics if joining else None,
            min_version=HEARTBEAT_VERSION, max_version=HEARTBEAT_VERSION)
        self._joined = True
        response = self._heartbeat_answer(request, f"ShareGroupHeartbeat of group {self.group_id!r}")
        if response is None:
            return
        if response.assignment is not None:
            self.assignment = {(t.topic_id, p) for t in response.assignment.topic_partitions for p in t.partitions}
            if any(tp not in self._leaders for tp in self.assignment):
                self._stale_metadata = True

    def _on_fenced(self) -> None:
        self.member_epoch, self.assignment, self._next_heartbeat = 0, set(), 0.0

    # ---- leaders ------------------------------------------------------------------------------------------------

    def _refresh_leaders(self) -> None:
        """The assigned partitions' topic names and leaders, from Metadata by topic id (v12)."""
        topic_ids = sorted({tid for tid, _p in self.assignment}, key=str)
        R = MetadataRequest
        request = R(topics=[R.MetadataRequestTopic(topic_id=tid, name=None) for tid in topic_ids],
                    allow_auto_topic_creation=False, include_topic_authorized_operations=False,
                    min_version=12, max_version=12)
        node = self._client.least_loaded_node(bootstrap_fallback=True)
        response = self._client.send_and_receive(node, request, timeout_ms=REQUEST_TIMEOUT_MS)
        self._client.cluster.update_metadata(response)  # the leaders' addresses, for the requests to them
        for topic in response.topics:
            if topic.error_code != 0:
                continue
            self._names[topic.topic_id] = topic.name
            self._ids[topic.name] = topic.topic_id
            for p in topic.partitions:
                tp = (topic.topic_id, p.partition_index)
                if p.error_code == 0 and p.leader_id >= 0:
                    self._leaders[tp] = p.leader_id
                else:
                    self._leaders.pop(tp, None)
        self._stale_metadata = False

    # ---- fetching -----------------------------------------------------------------------------------------------

    def poll(self) -> list[ShareRecord]:
        """Heartbeat if due, then one ShareFetch to each leader of the assigned partitions (carrying the
        acknowledgements pending for it): the records acquired."""
        if time.monotonic() >= self._next_heartbeat:
            self._heartbeat()
        if self._stale_metadata and self.assignment:
            try:
                self._refresh_leaders()
            except errors.KafkaError as exc:
                if not exc.retriable:
                    raise
                log.info("group %s: metadata not read: %s", self.group_id, exc)
        wanted: dict[int, set[TopicPartition]] = {}
        for tp in self.assignment:
            if tp in self._leaders:
                wanted.setdefault(self._leaders[tp], set()).add(tp)
        for node, session in self._sessions.items():
            if session.acks and node not in wanted:
                wanted[node] = set()
        if not wanted:
            time.sleep(min(FETCH_MAX_WAIT_MS / 1000, max(0.0, self._next_heartbeat - time.monotonic())))
            return []
        # One request at a time: with several leaders each waits less, so that none holds up the others.
        max_wait_ms = FETCH_MAX_WAIT_MS // len(wanted)
        records: list[ShareRecord] = []
        for node, partitions in sorted(wanted.items()):
            records += self._fetch(node, partitions, max_wait_ms)
        return records

    def _fetch(self, node: int, partitions: set[TopicPartition], max_wait_ms: int) -> list[ShareRecord]:
        session = self._sessions.setdefault(node, _Session())
        R = ShareFetchRequest
        P = R.FetchTopic.FetchPartition
        if session.epoch == INITIAL_EPOCH:
            session.partitions = set()
        # A partition no longer assigned stays in the session until its acknowledgements are sent.
        partitions = partitions | set(session.acks)
        added = partitions - session.partitions
        forgotten = session.partitions - partitions
        listed = added | set(session.acks)
        by_topic: dict[uuid.UUID, list] = {}
        for tp in sorted(listed, key=str):
            by_topic.setdefault(tp[0], []).append(P(partition_index=tp[1], acknowledgement_batches=[
                P.AcknowledgementBatch(first_offset=first, last_offset=last, acknowledge_types=types)
                for first, last, types in _batches(session.acks.get(tp, {}))]))
        forgotten_by_topic: dict[uuid.UUID, list[int]] = {}
        for tid, index in sorted(forgotten, key=str):
            forgotten_by_topic.setdefault(tid, []).append(index)
        request = R(group_id=self.group_id, member_id=self.member_id, share_session_epoch=session.epoch,
                    max_wait_ms=max_wait_ms, min_bytes=FETCH_MIN_BYTES, max_bytes=FETCH_MAX_BYTES,
                    max_records=MAX_POLL_RECORDS, batch_size=MAX_POLL_RECORDS,
                    topics=[R.FetchTopic(topic_id=tid, partitions=parts) for tid, parts in by_topic.items()],
                    forgotten_topics_data=[R.ForgottenTopic(topic_id=tid, partitions=indexes)
                                           for tid, indexes in forgotten_by_topic.items()],
                    min_version=FETCH_VERSION, max_version=FETCH_VERSION)
        try:
            response = self._client.send_and_receive(node, request, timeout_ms=REQUEST_TIMEOUT_MS + max_wait_ms)
        except errors.KafkaError as exc:
            if not exc.retriable:
                raise
            log.info("group %s: ShareFetch to broker %s failed: %s", self.group_id, node, exc)
            self._lose_session(node)
            return []
        error = errors.for_code(response.error_code)
        if response.error_code in SHARE_SESSION_LOST:
            log.info("group %s: share session with broker %s lost (%s)", self.group_id, node, error.__name__)
            self._lose_session(node)
            return []
        if error is not errors.NoError:
            raise failed(error, response.error_message, f"ShareFetch of group {self.group_id!r}")
        session.advance()
        session.partitions = (session.partitions | added) - forgotten
        session.acks = {}
        records: list[ShareRecord] = []
        for topic in response.responses:
            for p in topic.partitions:
                tp = (topic.topic_id, p.partition_index)
                for code in (p.error_code, p.acknowledge_error_code):
                    if code in LEADER_MOVED:
                        self._stale_metadata = True
                    elif code != 0:
                        log.info("group %s: %s-%s: %s", self.group_id, self._names.get(tp[0], tp[0]), tp[1],
                                 errors.for_code(code).__name__)
                records += self._acquired(tp, p, session)
                self._acquired_from[tp] = node
        return records

    def _acquired(self, tp: TopicPartition, partition: Any, session: _Session) -> Iterator[ShareRecord]:
        """The records of one partition's response inside its AcquiredRecords ranges (a batch may hold others,
        which are not this member's); acquired offsets without a record are acknowledged as GAP at once."""
        counts = {offset: a.delivery_count for a in partition.acquired_records
                  for offset in range(a.first_offset, a.last_offset + 1)}
        if not counts:
            return
        found: set[int] = set()
        batches = MemoryRecords(bytes(partition.records or b""))
        topic = self._names.get(tp[0], str(tp[0]))
        while (batch := batches.next_batch()) is not None:
            if batch.is_control_batch:
                continue
            for record in batch:
                if record.offset in counts and record.offset not in found:
                    found.add(record.offset)
                    yield ShareRecord(topic, tp[1], record.offset, record.timestamp, batch.timestamp_type,
                                      record.key, record.value, list(record.headers), counts[record.offset])
        for offset in counts.keys() - found:
            session.acks.setdefault(tp, {})[offset] = GAP

    # ---- acknowledging ------------------------------------------------------------------------------------------

    def acknowledge(self, record: ShareRecord, acknowledge_type: int = ACCEPT) -> None:
        """Say what was done with a delivered record; sent with the next request in the session it came from."""
        tp = (self._ids[record.topic], record.partition)
        session = self._sessions.get(self._acquired_from.get(tp, -1))
        if session is not None:  # else the session is gone, and with it the record's acquisition
            session.acks.setdefault(tp, {})[record.offset] = acknowledge_type

    def _lose_session(self, node: int) -> None:
        """The session with `node` is gone (and with it what it held, released by the broker): a new one opens at
        the next fetch; its leaders are read again."""
        self._sessions.pop(node, None)
        self._stale_metadata = True

    # ---- closing ------------------------------------------------------------------------------------------------

    def close(self) -> None:
        """Close each share session with its last acknowledgements (what is still acquired is released), leave
        the group, and close the connections. Errors are logged: the broker releases the records anyway when the
        member's session or membership ends."""
        try:
            for node, session in sorted(self._sessions.items()):
                if session.epoch != INITIAL_EPOCH:
                    try:
                        self._close_session(node, session)
                    except errors.KafkaError as exc:
                        log.info("group %s: share session with broker %s not closed: %s", self.group_id, node, exc)
            self._sessions = {}
            if self._joined and self.member_epoch > 0:
                try:
                    self._leave()
                except errors.KafkaError as exc:
                    log.info("group %s: leaving failed: %s", self.group_id, exc)
        finally:
            self._client.close()

    def _close_session(self, node: int, session: _Session) -> None:
        R = ShareAcknowledgeRequest
        P = R.AcknowledgeTopic.AcknowledgePartition
        by_topic: dict[uuid.UUID, list] = {}
        for tp, acks in sorted(session.acks.items(), key=str):
            by_topic.setdefault(tp[0], []).append(P(partition_index=tp[1], acknowledgement_batches=[
                P.AcknowledgementBatch(first_offset=first, last_offset=last, acknowledge_types=types)
                for first, last, types in _batches(acks)]))
        request = R(group_id=self.group_id, member_id=self.member_id, share_session_epoch=FINAL_EPOCH,
                    topics=[R.AcknowledgeTopic(topic_id=tid, partitions=parts) for tid, parts in by_topic.items()],
                    min_version=FETCH_VERSION, max_version=FETCH_VERSION)
        response = self._client.send_and_receive(node, request, timeout_ms=REQUEST_TIMEOUT_MS)
        error = errors.for_code(response.error_code)
        if error is not errors.NoError:
            raise failed(error, response.error_message, "ShareAcknowledge")
        for topic in response.responses:
            for p in topic.partitions:
                if p.error_code != 0:
                    log.info("group %s: acknowledging %s-%s: %s", self.group_id,
                             self._names.get(topic.topic_id, topic.topic_id), p.partition_index,
                             errors.for_code(p.error_code).__name__)

    def _leave(self) -> None:
        request = ShareGroupHeartbeatRequest(
            group_id=self.group_id, member_id=self.member_id, member_epoch=LEAVE_GROUP_MEMBER_EPOCH, rack_id=None,
            subscribed_topic_names=None, min_version=HEARTBEAT_VERSION, max_version=HEARTBEAT_VERSION)
        response = self._send_to_coordinator(request)
        error = errors.for_code(response.error_code)
        if error is not errors.NoError and error not in FENCED:
            raise failed(error, response.error_message, f"leaving group {self.group_id!r}")
        self.member_epoch, self.assignment = 0, set()


def _batches(acks: dict[int, int]) -> list[tuple[int, int, list[int]]]:
    """Acknowledgements (offset -> type) as AcknowledgementBatches: one per run of consecutive offsets, with one
    type for the run when all agree, else one per offset."""
    batches: list[tuple[int, int, list[int]]] = []
    for offset in sorted(acks):
        if batches and batches[-1][1] == offset - 1:
            first, _last, types = batches[-1]
            batches[-1] = (first, offset, types + [acks[offset]])
        else:
            batches.append((offset, offset, [acks[offset]]))
    return [(first, last, types[:1] if len(set(types)) == 1 else types) for first, last, types in batches]
