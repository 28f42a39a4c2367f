"""A member of a KIP-848 consumer group (`group.protocol=consumer`) for kafka-python, which speaks only the classic
protocol: what Kafka's Java consumer calls its membership manager and heartbeat request manager.

The coordinator assigns the partitions. The member joins with epoch 0, heartbeats (ConsumerGroupHeartbeat) at the
interval the coordinator answers, and reconciles each new assignment as Kafka's consumer does: it first gives up the
partitions it no longer has (committing their positions), then takes the new ones (from their committed offsets,
else by the reset policy), and acknowledges what it owns in its next heartbeat, sent at once. Offsets are committed
and fetched with its member id and epoch (OffsetCommit and OffsetFetch v9), and it leaves with epoch -1.

Records are fetched by a kafka-python KafkaConsumer without a group, which this member drives with assign() and
seek(): it owns the partitions the consumer reads. Requests go over a kafka-python network client of its own,
one at a time, from the caller's thread: `poll()` between the consumer's polls.
"""
from __future__ import annotations

import base64
import logging
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from minikafka.protocol.schema_loading import quiet_schema_loading

with quiet_schema_loading():
    import kafka.errors as errors
    from kafka import TopicPartition
    from kafka.net.compat import KafkaNetClient
    from kafka.protocol.consumer import OffsetCommitRequest, OffsetFetchRequest
    from kafka.protocol.metadata import MetadataRequest

from minikafka.group_member import (
    COORDINATOR_MOVED,
    FENCED,
    REQUEST_TIMEOUT_MS,
    RETRY_BACKOFF_S,
    GroupMember,
)
from minikafka.protocol.client_apis.messages import ConsumerGroupHeartbeatRequest

if TYPE_CHECKING:
    from kafka import KafkaConsumer

log = logging.getLogger(__name__)

# Kafka's consumer defaults: max.poll.interval.ms (sent as the rebalance timeout), auto.commit.interval.ms,
# retry.backoff.ms.
REBALANCE_TIMEOUT_MS = 300000
AUTO_COMMIT_INTERVAL_S = 5.0
# The member epochs of a heartbeat that leaves the group: for good (-1), or a static member for now (-2).
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


class RebalanceListener(Protocol):
    """Told of the partitions the member takes (all it owns then), gives up, or lost by being fenced."""

    def on_partitions_assigned(self, assigned: set) -> None: ...

    def on_partitions_revoked(self, revoked: set) -> None: ...

    def on_partitions_lost(self, lost: set) -> None: ...


def new_member_id() -> str:
    """A member id as Kafka's consumer makes its own from ConsumerGroupHeartbeat v1 (KIP-1082): a random UUID in
    Kafka's base64 form."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


class ConsumerMembershipManager(GroupMember):
    """One member of `group_id`, subscribed to `topics`, owning the partitions `consumer` reads."""

    def __init__(self, consumer: KafkaConsumer, group_id: str, topics: list[str], *,
                 listener: RebalanceListener | None = None, auto_offset_reset: str = "earliest",
                 group_instance_id: str | None = None, **client_configs: Any) -> None:
        super().__init__(group_id, "", KafkaNetClient(**client_configs))
        self.consumer = consumer
        self.topics = sorted(topics)
        self.listener = listener
        self.auto_offset_reset = auto_offset_reset
        self.group_instance_id = group_instance_id
        self._client.check_version()  # bootstrap: the brokers and the API versions they serve
        self.heartbeat_version = self._client.api_version(ConsumerGroupHeartbeatRequest,
                                                          max_version=ConsumerGroupHeartbeatRequest.max_version)
        if self.heartbeat_version >= 1:
            self.member_id = new_member_id()
        self.owned: set[TopicPartition] = set()
        self._pending: list[tuple[uuid.UUID, int]] | None = None  # a target assignment not reconciled yet
        self._joined = False  # a heartbeat was sent: the coordinator may know the member
        self._topic_ids: dict[str, uuid.UUID] = {}
        self._topic_names: dict[uuid.UUID, str] = {}
        self._next_commit = time.monotonic() + AUTO_COMMIT_INTERVAL_S
        self.left = False

    # ---- heartbeats ---------------------------------------------------------------------------------------------

    def poll(self) -> None:
        """Heartbeat if one is due (at once while joining or to acknowledge a reconciled assignment), reconcile
        what the coordinator assigned, and commit the owned positions every AUTO_COMMIT_INTERVAL_S."""
        if self._pending is not None:
            self._reconcile()
        if time.monotonic() >= self._next_heartbeat:
            self._heartbeat()
            if self._pending is not None:
                self._reconcile()
        if self.owned and time.monotonic() >= self._next_commit:
            self._next_commit = time.monotonic() + AUTO_COMMIT_INTERVAL_S
            try:
                self.commit()
            except errors.KafkaError as exc:  # retried at the next interval, and on revocation and closing
                log.info("group %s: offsets not committed: %s", self.group_id, exc)

    def _heartbeat(self) -> None:
        request = ConsumerGroupHeartbeatRequest(
            group_id=self.group_id, member_id=self.member_id, member_epoch=self.member_epoch,
            instance_id=self.group_instance_id, rebalance_timeout_ms=REBALANCE_TIMEOUT_MS,
            subscribed_topic_names=self.topics, topic_partitions=self._owned_by_topic_id(),
            min_version=self.heartbeat_version, max_version=self.heartbeat_version)
        self._joined = True
        response = self._heartbeat_answer(request, f"ConsumerGroupHeartbeat of group {self.group_id!r}")
        if response is None:
            return
        if response.member_id:
            self.member_id = response.member_id
        if response.assignment is not None:
            self._pending = [(t.topic_id, p) for t in response.assignment.topic_partitions for p in t.partitions]

    def _owned_by_topic_id(self) -> list:
        by_topic: dict[str, list[int]] = {}
        for tp in self.owned:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        topic_partitions = ConsumerGroupHeartbeatRequest.TopicPartitions
        return [topic_partitions(topic_id=self._topic_ids[topic], partitions=sorted(parts))
                for topic, parts in sorted(by_topic.items())]

    def _on_fenced(self) -> None:
        self._lose_partitions()

    def _lose_partitions(self) -> None:
        """Fenced: the partitions are another member's already, so they are dropped without a commit; the member
        joins again with epoch 0 at once."""
        lost, self.owned, self._pending = self.owned, set(), None
        self.consumer.assign([])
        if lost and self.listener is not None:
            self.listener.on_partitions_lost(lost)
        self.member_epoch = 0
        self._next_heartbeat = 0.0

    # ---- reconciliation -----------------------------------------------------------------------------------------

    def _reconcile(self) -> None:
        """Revoke first (commit, stop reading), then take the new partitions from their committed offsets, and
        acknowledge by heartbeat at once. An assignment of a topic whose name is not known yet waits for the
        next heartbeat."""
        assert self._pending is not None
        try:
            if any(topic_id not in self._topic_names for topic_id, _p in self._pending):
                self._refresh_topic_ids()
            if any(topic_id not in self._topic_names for topic_id, _p in self._pending):
                return
            target = {TopicPartition(self._topic_names[topic_id], p) for topic_id, p in self._pending}
            self._reconcile_to(target)
        except errors.KafkaError as exc:  # the coordinator or a broker unreachable for now: again at the next poll
            if not exc.retriable and not isinstance(exc, errors.StaleMemberEpochError):
                raise
            log.info("group %s: reconciliation postponed: %s", self.group_id, exc)
            self._coordinator = None

    def _reconcile_to(self, target: set[TopicPartition]) -> None:
        revoked = self.owned - target
        if revoked:
            try:
                self.commit({tp: self.consumer.position(tp) for tp in revoked})
            except errors.KafkaError as exc:  # the partitions go anyway; the next owner reads from the last commit
                log.info("group %s: offsets of revoked partitions not committed: %s", self.group_id, exc)
            self.owned -= revoked
            self.consumer.assign(sorted(self.owned))
            self._next_heartbeat = 0.0  # acknowledged at once, even if taking the new partitions must wait
            if self.listener is not None:
                self.listener.on_partitions_revoked(revoked)
        added = target - self.owned
        if added:
            committed = self.committed(added)
            self.consumer.assign(sorted(self.owned | added))
            for tp in sorted(added):
                if tp in committed:
                    self.consumer.seek(tp, committed[tp])
                elif self.auto_offset_reset == "latest":
                    self.consumer.seek_to_end(tp)
                else:
                    self.consumer.seek_to_beginning(tp)
            self.owned |= added
        self._pending = None
        if added:
            if self.listener is not None:
                self.listener.on_partitions_assigned(set(self.owned))
            self._next_heartbeat = 0.0

    def _refresh_topic_ids(self) -> None:
        """The ids of the subscribed topics (Metadata v10+), which the heartbeats name partitions by."""
        request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=t) for t in self.topics],
                                  allow_auto_topic_creation=False, min_version=10)
        node = self._client.least_loaded_node(bootstrap_fallback=True)
        response = self._client.send_and_receive(node, request, timeout_ms=REQUEST_TIMEOUT_MS)
        for topic in response.topics:
            if topic.error_code == 0 and topic.name is not None:
                self._topic_ids[topic.name] = topic.topic_id
                self._topic_names[topic.topic_id] = topic.name

    # ---- offsets ------------------------------------------------------------------------------------------------

    def commit(self, offsets: dict[TopicPartition, int] | None = None, deadline: float | None = None) -> None:
        """Commit `offsets` (by default the positions of every owned partition) with the member's id and epoch;
        the coordinator refuses them (STALE_MEMBER_EPOCH, UNKNOWN_MEMBER_ID...) from a member behind its group.
        With a `deadline` (monotonic time), an unreachable or moving coordinator is found and asked again until
        then."""
        if offsets is None:
            offsets = {tp: self.consumer.position(tp) for tp in self.owned}
        if offsets:
            chosen = offsets
            self._retrying(lambda timeout_ms: self._commit(chosen, timeout_ms), deadline)

    def _commit(self, offsets: dict[TopicPartition, int], timeout_ms: int) -> None:
        R = OffsetCommitRequest
        by_topic: dict[str, list] = {}
        for tp, offset in sorted(offsets.items()):
            by_topic.setdefault(tp.topic, []).append(R.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                partition_index=tp.partition, committed_offset=offset, committed_leader_epoch=-1,
                committed_metadata=""))
        request = R(group_id=self.group_id, generation_id_or_member_epoch=self.member_epoch,
                    member_id=self.member_id, group_instance_id=self.group_instance_id,
                    topics=[R.OffsetCommitRequestTopic(name=t, partitions=p) for t, p in by_topic.items()],
                    min_version=9, max_version=9)
        response = self._send_to_coordinator(request, timeout_ms)
        for topic in response.topics:
            for partition in topic.partitions:
                error = errors.for_code(partition.error_code)
                if error is not errors.NoError:
                    if error in COORDINATOR_MOVED:
                        self._coordinator = None
                    raise error(f"OffsetCommit of {topic.name}-{partition.partition_index} in group "
                                f"{self.group_id!r} (member epoch {self.member_epoch})")

    def committed(self, partitions: set[TopicPartition]) -> dict[TopicPartition, int]:
        """The group's committed offsets of `partitions` (OffsetFetch v9 with the member's id and epoch); a
        partition with none is left out."""
        R = OffsetFetchRequest
        by_topic: dict[str, list[int]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        group = R.OffsetFetchRequestGroup
        request = R(groups=[group(group_id=self.group_id, member_id=self.member_id, member_epoch=self.member_epoch,
                                  topics=[group.OffsetFetchRequestTopics(name=t, partition_indexes=sorted(p))
                                          for t, p in sorted(by_topic.items())])],
                    require_stable=True, min_version=9, max_version=9)
        response = self._send_to_coordinator(request)
        (answer,) = response.groups
        error = errors.for_code(answer.error_code)
        if error is not errors.NoError:
            raise error(f"OffsetFetch of group {self.group_id!r}")
        found: dict[TopicPartition, int] = {}
        for topic in answer.topics:
            for partition in topic.partitions:
                error = errors.for_code(partition.error_code)
                if error is not errors.NoError:
                    raise error(f"OffsetFetch of {topic.name}-{partition.partition_index}")
                if partition.committed_offset >= 0:
                    found[TopicPartition(topic.name, partition.partition_index)] = partition.committed_offset
        return found

    # ---- the coordinator ----------------------------------------------------------------------------------------

    def _retrying(self, call: Callable[[int], None], deadline: float | None) -> None:
        """`call(timeout_ms)` once, or with a `deadline` again after each retriable error until then."""
        while True:
            remaining_ms = REQUEST_TIMEOUT_MS if deadline is None else int(1000 * (deadline - time.monotonic()))
            try:
                call(max(1, min(REQUEST_TIMEOUT_MS, remaining_ms)))
                return
            except errors.KafkaError as exc:
                if deadline is None or not exc.retriable or time.monotonic() + RETRY_BACKOFF_S >= deadline:
                    raise
                log.info("group %s: %s; trying again", self.group_id, exc)
            time.sleep(RETRY_BACKOFF_S)

    # ---- leaving ------------------------------------------------------------------------------------------------

    def leave(self, deadline: float | None = None) -> None:
        """Give up every partition and leave the group (heartbeat with epoch -1, or -2 for a static member), so
        that the coordinator assigns the partitions to the other members at once; with a `deadline`, trying
        again after retriable errors until then."""
        if self.left:
            return
        self.left = True
        revoked, self.owned, self._pending = self.owned, set(), None
        self.consumer.assign([])
        if revoked and self.listener is not None:
            self.listener.on_partitions_revoked(revoked)
        if not self._joined:
            return
        epoch = LEAVE_GROUP_STATIC_MEMBER_EPOCH if self.group_instance_id else LEAVE_GROUP_MEMBER_EPOCH

        def send(timeout_ms: int) -> None:
            request = ConsumerGroupHeartbeatRequest(
                group_id=self.group_id, member_id=self.member_id, member_epoch=epoch,
                instance_id=self.group_instance_id, min_version=self.heartbeat_version,
                max_version=self.heartbeat_version)
            response = self._send_to_coordinator(request, timeout_ms)
            error = errors.for_code(response.error_code)
            if error in COORDINATOR_MOVED:
                self._coordinator = None
            if error is not errors.NoError and error not in FENCED:  # fenced already: out of the group anyway
                raise error(response.error_message or f"leaving group {self.group_id!r}")

        self._retrying(send, deadline)
        self.member_epoch = epoch

    def close(self) -> None:
        self._client.close()
