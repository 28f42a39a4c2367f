"""A small KIP-932 share consumer over the raw protocol, for tests (no Python client ships one yet): membership
through ShareGroupHeartbeat with the coordinator FindCoordinator names, following the coordinator when it moves.

Plain functions and one class, so a test drives each member's heartbeats itself: `ShareMember.heartbeat()` sends
one, `heartbeat_until(members, predicate)` keeps a set of members heartbeating at the interval the coordinator gave
them until the predicate holds (bounded by a deadline).

The fetch side, ShareConsumer (ShareFetch and ShareAcknowledge, v1): a share session with one broker (open at epoch
0, continued, closed at epoch -1), records acquired with their delivery counts, and acknowledgements ACCEPT /
RELEASE / REJECT."""
from __future__ import annotations

import base64
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest
from kafka.record import MemoryRecords

from minikafka.broker.coordinator.share.share_coordinator import coordinator_key
from minikafka.broker.coordinator.share.share_coordinator_shard import SharePartitionKey
from minikafka.protocol.client_apis.messages import (
    ShareGroupDescribeRequest,
    ShareGroupHeartbeatRequest,
)
from minikafka.protocol.client_apis.share_fetch import (
    ShareAcknowledgeRequest,
    ShareAcknowledgeResponse,
    ShareFetchRequest,
    ShareFetchResponse,
)
from minikafka.protocol.client_apis.share_state import InitializeShareGroupStateRequest
from tests.raw_client import RawConnection

HEARTBEAT_VERSION = 1
NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS = 16, 15, 14
_RETRIABLE = (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS)


def find_coordinator(bootstrap: str, group: str) -> tuple[int, str]:
    """The group's coordinator (node id, host:port), asked of the brokers of `bootstrap` in turn."""
    last: object = None
    for address in bootstrap.split(","):
        try:
            with RawConnection(address, timeout=5) as raw:
                response = raw.request(FindCoordinatorRequest[3](key=group, key_type=0))
        except OSError as exc:
            last = exc
            continue
        if response.error_code == 0:
            return response.node_id, f"{response.host}:{response.port}"
        last = response
    raise LookupError(f"no coordinator for {group}: {last}")


def share_start_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """Each share-partition's start offset as the share coordinator keeps it (DescribeShareGroupOffsets v0, asked of
    the group's coordinator): what survives the share-partitions' leaders dropping them from memory when the
    group's last member leaves; -1 where there is no state."""
    from minikafka.protocol.client_apis.messages import DescribeShareGroupOffsetsRequest as R

    G = R.DescribeShareGroupOffsetsRequestGroup
    _node, address = find_coordinator(bootstrap, group)
    with RawConnection(address) as raw:
        response = raw.request(R[0](groups=[G(group_id=group, topics=[G.DescribeShareGroupOffsetsRequestTopic(
            topic_name=topic, partitions=list(range(partitions)))])]))
    (described,) = response.groups  # type: ignore[attr-defined]
    return {p.partition_index: p.start_offset for t in described.topics for p in t.partitions}


def describe_share_group(bootstrap: str, group: str, include_authorized_operations: bool = False) -> object:
    """ShareGroupDescribe v1 of the group, asked of its coordinator."""
    _node, address = find_coordinator(bootstrap, group)
    with RawConnection(address) as raw:
        response = raw.request(ShareGroupDescribeRequest[1](
            group_ids=[group], include_authorized_operations=include_authorized_operations))
    (described,) = response.groups
    return described


class ShareMember:
    """One share group member: its id (made up here, as a KIP-932 consumer does), epoch, assignment and the last
    heartbeat's response."""

    def __init__(self, bootstrap: str, group: str, topics: Iterable[str], member_id: str | None = None) -> None:
        self.bootstrap = bootstrap
        self.group = group
        self.topics = sorted(topics)
        self.member_id = member_id or str(uuid.uuid4())
        self.member_epoch = 0
        self.heartbeat_interval_ms = 0
        self.assignment: dict[uuid.UUID, list[int]] = {}
        self.last: object = None
        self.epochs_seen: list[int] = []
        self._conn: RawConnection | None = None
        self._next_heartbeat = 0.0

    def _connection(self) -> RawConnection:
        if self._conn is None:
            _node, address = find_coordinator(self.bootstrap, self.group)
            self._conn = RawConnection(address)
        return self._conn

    def _drop_connection(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def send(self, member_epoch: int, topics: list[str] | None) -> object:
        """One ShareGroupHeartbeat as given; the response (a lost coordinator connection is looked up again)."""
        request = ShareGroupHeartbeatRequest[HEARTBEAT_VERSION](
            group_id=self.group, member_id=self.member_id, member_epoch=member_epoch, rack_id=None,
            subscribed_topic_names=topics)
        try:
            response = self._connection().request(request)
        except (OSError, AssertionError):
            self._drop_connection()
            raise
        if response.error_code in _RETRIABLE:
            self._drop_connection()
        return response

    def heartbeat(self) -> object:
        """The next heartbeat: a full one when joining, else only the epoch. Its response updates the member."""
        joining = self.member_epoch == 0
        try:
            response = self.send(self.member_epoch, self.topics if joining else None)
        except (OSError, AssertionError):
            return None
        self.last = response
        if response.error_code == 0:
            self.member_epoch = response.member_epoch
            self.heartbeat_interval_ms = response.heartbeat_interval_ms
            if response.assignment is not None:
                self.assignment = {tp.topic_id: sorted(tp.partitions)
                                   for tp in response.assignment.topic_partitions}
            if not self.epochs_seen or self.epochs_seen[-1] != self.member_epoch:
                self.epochs_seen.append(self.member_epoch)
        elif response.error_code in (22, 25):  # FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID: rejoin from scratch
            self.member_epoch = 0
            self.assignment = {}
        self._next_heartbeat = time.monotonic() + max(self.heartbeat_interval_ms, 50) / 1000
        return response

    def due(self) -> bool:
        return time.monotonic() >= self._next_heartbeat

    def partitions(self) -> int:
        return sum(len(ps) for ps in self.assignment.values())

    def leave(self) -> object:
        """Leave the group (member epoch -1)."""
        response = self.send(-1, None)
        self.member_epoch = 0
        self.assignment = {}
        return response

    def close(self) -> None:
        self._drop_connection()


def heartbeat_until(members: list[ShareMember], predicate: Callable[[], object], timeout: float = 60,
                    what: str = "the condition") -> None:
    """Keep the members heartbeating, each at its interval, until `predicate()` holds; AssertionError on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        for member in members:
            if member.due():
                member.heartbeat()
        if predicate():
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}: "
                                 f"{[(m.member_id[:8], m.member_epoch, m.assignment, m.last) for m in members]}")
        next_due = min(m._next_heartbeat for m in members) if members else time.monotonic() + 0.05
        time.sleep(min(max(next_due - time.monotonic(), 0.01), 0.2))


GAP, ACCEPT, RELEASE, REJECT = 0, 1, 2, 3
INITIAL_EPOCH, FINAL_EPOCH = 0, -1
SHARE_KEY_TYPE = 2

TopicPartition = tuple[uuid.UUID, int]
# Acknowledgements of one partition: (first offset, last offset, one type for the range or one per offset).
Acks = dict[TopicPartition, list[tuple[int, int, list[int]]]]


def set_share_version(bootstrap: str, level: int, upgrade_type: int) -> None:
    """kafka-features.sh upgrade (upgrade_type 1) or downgrade (2: safe) of share.version to `level`."""
    from kafka.protocol.admin.cluster import UpdateFeaturesRequest

    R = UpdateFeaturesRequest[1]
    with RawConnection(bootstrap) as raw:
        response = raw.request(R(timeout_ms=30000, validate_only=False, feature_updates=[R.FeatureUpdateKey(
            feature="share.version", max_version_level=level, upgrade_type=upgrade_type)]))
    assert response.error_code == 0, response


def new_member_id() -> str:
    """A member id as Kafka's clients make them: a random UUID in URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def topic_id(bootstrap: str, topic: str) -> uuid.UUID:
    with RawConnection(bootstrap) as conn:
        response = conn.request(MetadataRequest[12](topics=[MetadataRequest[12].MetadataRequestTopic(
            topic_id=None, name=topic)], allow_auto_topic_creation=False, include_topic_authorized_operations=False))
    tid: uuid.UUID = response.topics[0].topic_id
    return tid


def initialize_share_partitions(bootstrap: str, group: str, tid: uuid.UUID, partitions: list[int],
                                start_offset: int = -1) -> list[int]:
    """InitializeShareGroupState for each partition at its share coordinator, as the group coordinator does when it
    first assigns a share-partition (start offset -1: share.auto.offset.reset decides at the first fetch); the
    error code per partition."""
    errors = []
    for partition in partitions:
        with RawConnection(bootstrap) as conn:
            found = conn.request(FindCoordinatorRequest[6](key_type=SHARE_KEY_TYPE,
                                                           coordinator_keys=[coordinator_key(
                                                               SharePartitionKey(group, tid, partition))]))
        coordinator = found.coordinators[0]
        if coordinator.error_code != 0:
            errors.append(coordinator.error_code)
            continue
        R = InitializeShareGroupStateRequest
        D = R.InitializeStateData
        with RawConnection(f"{coordinator.host}:{coordinator.port}") as conn:
            response = conn.request(R(version=0, group_id=group, topics=[D(topic_id=tid, partitions=[
                D.PartitionData(partition=partition, state_epoch=0, start_offset=start_offset)])]))
        errors.append(response.results[0].partitions[0].error_code)
    return errors


@dataclass
class Fetched:
    """What one ShareFetch gave: records acquired (offset -> (value, delivery count); the value None at a
    transaction marker's offset, which is acquired like a record) and the errors."""
    error_code: int
    records: dict[TopicPartition, dict[int, tuple[bytes | None, int]]] = field(default_factory=dict)
    partition_errors: dict[TopicPartition, int] = field(default_factory=dict)
    acknowledge_errors: dict[TopicPartition, int] = field(default_factory=dict)
    acquisition_lock_timeout_ms: int = 0
    response: ShareFetchResponse | None = None

    def offsets(self, tp: TopicPartition) -> list[int]:
        return sorted(self.records.get(tp, {}))


def acquired_records(response: ShareFetchResponse) -> Fetched:
    """The records of a ShareFetch response the member acquired: those of the returned batches inside the
    AcquiredRecords ranges (a batch may hold others, which are not the member's)."""
    fetched = Fetched(response.error_code, acquisition_lock_timeout_ms=response.acquisition_lock_timeout_ms,
                      response=response)
    for topic in response.responses:
        for p in topic.partitions:
            tp = (topic.topic_id, p.partition_index)
            fetched.partition_errors[tp] = p.error_code
            fetched.acknowledge_errors[tp] = p.acknowledge_error_code
            counts = {offset: a.delivery_count for a in p.acquired_records
                      for offset in range(a.first_offset, a.last_offset + 1)}
            values: dict[int, bytes | None] = {}
            records = MemoryRecords(bytes(p.records or b""))
            while (batch := records.next_batch()) is not None:
                if batch.is_control_batch:
                    continue  # a transaction marker: its offset is acquired, but it is no record (a gap)
                for record in batch:
                    values[record.offset] = record.value
            if counts:
                fetched.records[tp] = {offset: (values.get(offset), count) for offset, count in counts.items()}
    return fetched


class ShareConsumer:
    """One member's share session with one broker (the leader of the partitions it fetches)."""

    def __init__(self, bootstrap: str, group: str, member_id: str | None = None, timeout: float = 30.0) -> None:
        self.conn = RawConnection(bootstrap, timeout=timeout)
        self.group = group
        self.member_id = member_id or new_member_id()
        self.epoch = INITIAL_EPOCH

    def __enter__(self) -> ShareConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.conn.close()

    def _advance(self, error_code: int) -> None:
        if error_code == 0 and self.epoch != FINAL_EPOCH:
            self.epoch = self.epoch + 1 if self.epoch < (1 << 31) - 1 else 1

    def fetch(self, partitions: list[TopicPartition], acks: Acks | None = None, *, max_wait_ms: int = 5000,
              min_bytes: int = 1, max_bytes: int = 1 << 20, max_records: int = 500,
              forget: list[TopicPartition] | None = None, epoch: int | None = None) -> Fetched:
        """One ShareFetch in the session (epoch 0 opens it with `partitions`; later ones add them)."""
        R = ShareFetchRequest
        P = R.FetchTopic.FetchPartition
        acks = acks or {}
        by_topic: dict[uuid.UUID, dict[int, list]] = {}
        for tid, index in list(partitions) + [tp for tp in acks if tp not in partitions]:
            by_topic.setdefault(tid, {})[index] = [P.AcknowledgementBatch(first_offset=first, last_offset=last,
                                                                          acknowledge_types=types)
                                                   for first, last, types in acks.get((tid, index), [])]
        forgotten: dict[uuid.UUID, list[int]] = {}
        for tid, index in forget or []:
            forgotten.setdefault(tid, []).append(index)
        request = R(version=1, group_id=self.group, member_id=self.member_id,
                    share_session_epoch=self.epoch if epoch is None else epoch, max_wait_ms=max_wait_ms,
                    min_bytes=min_bytes, max_bytes=max_bytes, max_records=max_records, batch_size=max_records,
                    topics=[R.FetchTopic(topic_id=tid, partitions=[
                        P(partition_index=index, acknowledgement_batches=batches) for index, batches in parts.items()])
                        for tid, parts in by_topic.items()],
                    forgotten_topics_data=[R.ForgottenTopic(topic_id=tid, partitions=indexes)
                                           for tid, indexes in forgotten.items()])
        response = self.conn.request(request)
        if epoch is None:
            self._advance(response.error_code)
        return acquired_records(response)

    def acknowledge(self, acks: Acks, *, epoch: int | None = None) -> ShareAcknowledgeResponse:
        """One ShareAcknowledge in the session."""
        R = ShareAcknowledgeRequest
        P = R.AcknowledgeTopic.AcknowledgePartition
        by_topic: dict[uuid.UUID, list] = {}
        for (tid, index), batches in acks.items():
            by_topic.setdefault(tid, []).append(P(partition_index=index, acknowledgement_batches=[
                P.AcknowledgementBatch(first_offset=first, last_offset=last, acknowledge_types=types)
                for first, last, types in batches]))
        response = self.conn.request(R(version=1, group_id=self.group, member_id=self.member_id,
                                       share_session_epoch=self.epoch if epoch is None else epoch,
                                       topics=[R.AcknowledgeTopic(topic_id=tid, partitions=parts)
                                               for tid, parts in by_topic.items()]))
        if epoch is None:
            self._advance(response.error_code)
        return response

    def close(self, acks: Acks | None = None) -> ShareAcknowledgeResponse:
        """End the session (epoch -1) with these last acknowledgements; what it still holds is released."""
        self.epoch = FINAL_EPOCH
        return self.acknowledge(acks or {})


def acknowledge_errors(response: ShareAcknowledgeResponse) -> dict[TopicPartition, int]:
    return {(t.topic_id, p.partition_index): p.error_code for t in response.responses for p in t.partitions}
