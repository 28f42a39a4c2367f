"""State inspection of running brokers (and arranging topics for a test), through the network only.

Topics, partitions, leaders, ISR, high watermark, last stable offset and each replica's log end offset come from the
brokers' control API (the one place a replica's log end offset is visible), asked of every broker running at the
time of the call, so a view is never stale after restarts. Brokers disagree while a change travels: the leader with
the highest leader epoch speaks for leader, ISR, HW and LSO, and each replica for its own log end offset. Records
come from a kafka-python consumer, and groups (members, assignments, committed offsets) and transactions from
kafka-python's admin client, i.e. DescribeGroups, OffsetFetch, ListTransactions and DescribeTransactions, exactly
what a Kafka client would see.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from minikafka.control_client import ControlClient, ControlError
from minikafka.protocol.schema_loading import quiet_schema_loading
from minikafka.request_recording import DEFAULT_RECORDING_SIZE, Recording

DEFAULT_TIMEOUT_S = 15.0
# An offset wait asks the leader to hold the answer this long at most, so a leader that moves is followed; the
# control call's own limit is that plus a margin. With no leader, the next try is this much later.
OFFSET_WAIT_SLICE_S = 5.0
CONTROL_MARGIN_S = 5.0
LEADER_RETRY_S = 0.05
# With several brokers a records wait asks each in turn, for this long at most.
RECORDS_WAIT_SLICE_S = 0.1


T = TypeVar("T")

@dataclass(frozen=True)
class PartitionState:
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    high_watermark: int | None  # None while no running broker leads the partition
    log_start_offset: int | None
    # replica id -> the log end offset that replica reports (None: its broker is not running or not answering)
    log_end_offsets: dict[int, int | None] = field(default_factory=dict)
    # Where read_committed readers stop: the first offset of the oldest open transaction, else the HW (None as for
    # the HW)
    last_stable_offset: int | None = None
    # replica id -> the bytes of that replica's log on its broker's disk (None as for `log_end_offsets`)
    sizes: dict[int, int | None] = field(default_factory=dict)
    # replica id -> where that replica's next log cleaning starts (its cleaner-offset-checkpoint entry; None: never
    # cleaned, or not a compacted topic)
    cleaner_checkpoints: dict[int, int | None] = field(default_factory=dict)
    # replica id -> that replica's cleanable ratio now (dirty bytes over all bytes; None: not a compacted topic)
    dirty_ratios: dict[int, float | None] = field(default_factory=dict)

    @property
    def cleaner_checkpoint(self) -> int | None:
        """Where the leader's next log cleaning starts."""
        return self.cleaner_checkpoints.get(self.leader)

    @property
    def dirty_ratio(self) -> float | None:
        """The leader's cleanable ratio, as the cleaner compares it with min.cleanable.dirty.ratio."""
        return self.dirty_ratios.get(self.leader)

    @property
    def log_end_offset(self) -> int | None:
        """The leader's log end offset."""
        return self.log_end_offsets.get(self.leader)

    @property
    def size_bytes(self) -> int | None:
        """The bytes of the leader's log."""
        return self.sizes.get(self.leader)

    @property
    def caught_up(self) -> bool:
        """Every replica holds what the leader holds, and the HW has reached it (nothing left to replicate)."""
        end = self.log_end_offset
        return (end is not None and self.high_watermark == end
                and all(self.log_end_offsets.get(r) == end for r in self.replicas))


@dataclass(frozen=True)
class Record:
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]] = field(default_factory=list)
    timestamp_type: int = 0  # 0 CreateTime, 1 LogAppendTime


@dataclass(frozen=True)
class TransactionState:
    """A transactional id as its transaction coordinator describes it (DescribeTransactions)."""

    transactional_id: str
    state: str  # Kafka's name: Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort, ...
    producer_id: int
    producer_epoch: int
    partitions: list[tuple[str, int]]  # those the transaction wrote to (or has markers still to write in), sorted
    timeout_ms: int
    start_time_ms: int | None  # when the current (or last) transaction began; None if none ever did


@dataclass(frozen=True)
class GroupMember:
    member_id: str
    client_id: str
    host: str
    group_instance_id: str | None
    assignment: list[tuple[str, int]]  # the partitions the member owns now, sorted
    # Consumer (KIP-848) and share (KIP-932) protocols only, None in a classic group: the member's epoch, and (consumer
    # protocol only) the partitions the coordinator's target assignment gives it (those it owns once reconciled).
    member_epoch: int | None = None
    target_assignment: list[tuple[str, int]] | None = None
    # Consumer protocol groups only: whether the member speaks the consumer protocol (True) or joined with the
    # classic one (False), as Kafka's MemberDescription.upgraded; None in a classic group.
    upgraded: bool | None = None


@dataclass(frozen=True)
class GroupState:
    group_id: str
    state: str  # Kafka's name: classic Empty, PreparingRebalance, CompletingRebalance, Stable, Dead; consumer
    # protocol Empty, Assigning, Reconciling, Stable; share Empty, Stable
    protocol_type: str  # "consumer" for consumer groups of either protocol (DescribeGroups' protocol type), "share"
    protocol: str  # the classic group's chosen assignor (e.g. "range"), or a consumer group's server assignor
    members: list[GroupMember]
    offsets: dict[tuple[str, int], int]  # committed offset per (topic, partition)
    # Which group protocol, as ListGroups v5 types it: "classic" (JoinGroup/SyncGroup), "consumer" (KIP-848) or
    # "share" (KIP-932).
    group_type: str = "classic"
    # Consumer and share protocols only, None in a classic group: the group epoch, the epoch of its target
    # assignment (the group epoch the assignor last ran at) and the server-side assignor (`uniform`, `range`,
    # `simple`).
    group_epoch: int | None = None
    assignment_epoch: int | None = None
    assignor: str | None = None

    def member(self, member_id: str) -> GroupMember:
        """The member with this id; KeyError if the group has none."""
        for member in self.members:
            if member.member_id == member_id:
                return member
        raise KeyError(f"group {self.group_id!r} has no member {member_id!r}")


@dataclass(frozen=True)
class InFlightRecord:
    """One offset of a share-partition between its start and end offsets (KIP-932)."""
    offset: int
    state: str  # Kafka's RecordState: AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED
    delivery_count: int
    member_id: str | None  # the member holding it, while ACQUIRED


@dataclass(frozen=True)
class SharePartitionState:
    """One share-partition as its leader holds it: what the group has done with the partition's records."""
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    start_offset: int  # every record before it is acknowledged or archived
    end_offset: int  # the records from here on were never delivered
    records: list[InFlightRecord]  # the in-flight offsets, start_offset to end_offset

    def record(self, offset: int) -> InFlightRecord:
        for record in self.records:
            if record.offset == offset:
                return record
        raise KeyError(f"offset {offset} is not in flight in {self.topic}-{self.partition}")


@dataclass(frozen=True)
class ShareGroupState:
    group_id: str
    partitions: dict[tuple[str, int], SharePartitionState]  # those loaded on their leaders
    sessions: dict[str, int]  # the share sessions open on the partitions' leaders: member id -> session epoch

    def acquired(self, member_id: str) -> list[tuple[str, int, int]]:
        """The (topic, partition, offset)s the member holds now."""
        return [(p.topic, p.partition, r.offset) for p in self.partitions.values() for r in p.records
                if r.state == "ACQUIRED" and r.member_id == member_id]


class State:
    """What a set of brokers holds, read over the network. Cheap to make; `close()` ends its client connections.

    `bootstrap_servers` and `controls` are asked at each call for the brokers running then.
    """

    def __init__(self, bootstrap_servers: Callable[[], str], controls: Callable[[], list[ControlClient]],
                 timeout_s: float = DEFAULT_TIMEOUT_S, client_settings: dict[str, Any] | None = None) -> None:
        self._bootstrap_servers = bootstrap_servers
        # kafka-python's security settings for a secured listener (security_protocol, ssl_cafile, sasl_...).
        self._client_settings = {k: v for k, v in (client_settings or {}).items() if k != "bootstrap_servers"}
        self._controls = controls
        self.timeout_s = timeout_s
        self._admin = None

    @property
    def bootstrap_servers(self) -> str:
        return self._bootstrap_servers()

    # ---- topics and partitions (control API) ----------------------------------------------------------------------

    def describe(self, topics: list[str] | None = None) -> list[dict[str, Any]]:
        """Each broker's own description (node, endpoints, faults, hosted partitions), as raw dicts."""
        return [control.call("describe", topics=topics) for control in self._controls()]

    def topics(self, include_internal: bool = False) -> list[str]:
        names = {t["name"] for d in self.describe() for t in d["topics"] if include_internal or not t["internal"]}
        return sorted(names)

    def partitions(self, topic: str) -> list[PartitionState]:
        """Every partition of `topic`, with leader, ISR and the HW as the leader reports it, and each replica's own
        log end offset."""
        views: dict[int, list[tuple[int, dict[str, Any]]]] = {}
        for description in self.describe([topic]):
            for t in description["topics"]:
                for p in t["partitions"]:
                    views.setdefault(p["partition"], []).append((description["node_id"], p))
        if not views:
            raise KeyError(f"unknown topic {topic!r}")
        return [self._merge(topic, index, views[index]) for index in sorted(views)]

    def partition(self, topic: str, partition: int) -> PartitionState:
        for state in self.partitions(topic):
            if state.partition == partition:
                return state
        raise KeyError(f"unknown partition {topic}-{partition}")

    @staticmethod
    def _merge(topic: str, index: int, views: list[tuple[int, dict[str, Any]]]) -> PartitionState:
        # A broker that leads the partition (it hosts it as leader, so it reports a HW) speaks for leader, ISR and
        # HW; after an election the newest leader epoch wins. With no leader running, the metadata of the broker
        # that knows the newest epoch tells leader and ISR, and the HW is unknown.
        leading = [p for node, p in views if node == p["leader"] and p["high_watermark"] is not None]
        if leading:
            view = max(leading, key=lambda p: p["leader_epoch"])
        else:
            view = {**max((p for _node, p in views), key=lambda p: p["leader_epoch"]), "high_watermark": None,
                    "last_stable_offset": None, "log_start_offset": None}
        replicas = list(view["replicas"])
        ends: dict[int, int | None] = dict.fromkeys(replicas)
        sizes: dict[int, int | None] = dict.fromkeys(replicas)
        checkpoints: dict[int, int | None] = dict.fromkeys(replicas)
        ratios: dict[int, float | None] = dict.fromkeys(replicas)
        for node, p in views:
            own = p["log_end_offsets"].get(str(node))
            if own is not None and node in ends:  # a broker the partition moved away from may still hold a log
                ends[node] = own
                sizes[node] = p.get("size_bytes")
                checkpoints[node] = p.get("cleaner_checkpoint")
                ratios[node] = p.get("dirty_ratio")
        return PartitionState(topic, index, view["leader"], view["leader_epoch"], replicas, list(view["isr"]),
                              view["high_watermark"], view["log_start_offset"], ends, view["last_stable_offset"],
                              sizes, checkpoints, ratios)

    def delayed_operations(self) -> int:
        """Requests the brokers hold back now (long-poll fetches, injected latency), e.g. to know a fetch is parked."""
        return sum(control.call("describe", topics=[])["delayed_operations"] for control in self._controls())

    # ---- metrics (control API) --------------------------------------------------------------------------------

    def metrics(self) -> dict[int, dict[str, float]]:
        """Each running broker's metrics by node id: Kafka's broker metrics by the names and labels its Prometheus
        endpoint gives them, e.g. `kafka_server_replicamanager_underreplicatedpartitions` or
        `kafka_network_requestmetrics_requests_total{request="Produce",version="9"}`, whether or not metrics.port
        serves them over HTTP."""
        answers = [control.call("metrics") for control in self._controls()]
        return {answer["node_id"]: answer["metrics"] for answer in answers}

    # ---- records (a kafka-python consumer) ----------------------------------------------------------------------

    def records(self, topic: str, partition: int | None = None, *, start_offset: int = 0,
                from_timestamp: int | None = None, max_records: int | None = None,
                timeout_s: float | None = None,
                isolation_level: Literal["read_uncommitted", "read_committed"] = "read_uncommitted") -> list[Record]:
        """The records of one partition (or all of the topic's), from an offset or timestamp up to the HW now, or
        with `isolation_level="read_committed"` up to the last stable offset, leaving out aborted records, as a
        read_committed consumer sees them. Transaction markers are never records: their offsets are gaps.

        Sorted by partition then offset. Raises TimeoutError if that end is not reached in time.
        """
        with quiet_schema_loading():
            from kafka import KafkaConsumer, TopicPartition

        timeout_s = self.timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout_s
        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap_servers, group_id=None,
                                 enable_auto_commit=False, auto_offset_reset="earliest",
                                 isolation_level=isolation_level, client_id="minikafka-state",
                                 request_timeout_ms=int(timeout_s * 1000) + 1000, **self._client_settings)
        try:
            if partition is None:
                indexes = sorted(consumer.partitions_for_topic(topic) or ())
                if not indexes:
                    raise KeyError(f"unknown topic {topic!r}")
            else:
                indexes = [partition]
            tps = [TopicPartition(topic, i) for i in indexes]
            consumer.assign(tps)
            ends = consumer.end_offsets(tps)
            starts = consumer.beginning_offsets(tps)
            if from_timestamp is not None:
                found = consumer.offsets_for_times({tp: from_timestamp for tp in tps})
                positions = {tp: ends[tp] if found[tp] is None else found[tp].offset for tp in tps}
            else:
                positions = {tp: max(start_offset, starts[tp]) for tp in tps}
            pending = {tp for tp in tps if positions[tp] < ends[tp]}
            for tp in tps:
                consumer.seek(tp, min(positions[tp], ends[tp]))
            out: list[Record] = []
            while pending and (max_records is None or len(out) < max_records):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    got = {f"{tp.topic}-{tp.partition}": consumer.position(tp) for tp in pending}
                    ends_are = "last stable offsets" if isolation_level == "read_committed" else "high watermarks"
                    raise TimeoutError(f"read to positions {got} of {ends_are} "
                                       f"{ {f'{tp.topic}-{tp.partition}': ends[tp] for tp in pending} } "
                                       f"in {timeout_s} s")
                batches = consumer.poll(timeout_ms=int(min(remaining, 0.5) * 1000))
                for tp, messages in batches.items():
                    for m in messages:
                        if m.offset < ends[tp]:
                            out.append(Record(m.topic, m.partition, m.offset, m.timestamp, m.key, m.value,
                                              [(k, v) for k, v in (m.headers or [])], m.timestamp_type))
                for tp in list(pending):
                    if consumer.position(tp) >= ends[tp]:
                        pending.discard(tp)
                        consumer.pause(tp)
            out.sort(key=lambda r: (r.partition, r.offset))
            return out if max_records is None else out[:max_records]
        finally:
            consumer.close()

    # ---- groups (kafka-python admin: ListGroups, DescribeGroups, OffsetFetch) --------------------------------------

    def _with_admin(self, call: Callable[[Any], T]) -> T:
        """`call` with the admin client kept between calls; one whose broker restarted since (kill and start) has a
        dead connection, so it is replaced once and the call made again. A coordinator still loading its partition
        after a restart, or one that moved, is asked again (found again), as Kafka's admin client does, for at most
        the state's timeout."""
        with quiet_schema_loading():
            from kafka.errors import (
                CoordinatorLoadInProgressError,
                CoordinatorNotAvailableError,
                KafkaConnectionError,
                NodeNotReadyError,
                NotCoordinatorError,
            )

        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                try:
                    return call(self._admin_client())
                except (KafkaConnectionError, NodeNotReadyError):
                    self.close()
                    return call(self._admin_client())
            except CoordinatorLoadInProgressError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
            except (NotCoordinatorError, CoordinatorNotAvailableError):
                # The coordinator moved, or its partition has no leader yet (just created, or failing over);
                # kafka-python's admin client keeps the coordinator it found, so a new one looks it up again.
                self.close()
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def _admin_client(self):
        if self._admin is None:
            with quiet_schema_loading():
                from kafka import KafkaAdminClient

            self._admin = KafkaAdminClient(bootstrap_servers=self.bootstrap_servers, client_id="minikafka-state",
                                           request_timeout_ms=int(self.timeout_s * 1000), **self._client_settings)
        return self._admin

    def create_topic(self, name: str, partitions: int = -1, replication_factor: int = -1,
                     config: dict[str, object] | None = None) -> None:
        """Create a topic (CreateTopics), e.g. to arrange a test before its clients start; as in Kafka, -1 takes
        the broker's num.partitions / default.replication.factor."""
        spec = {"num_partitions": partitions, "replication_factor": replication_factor,
                "configs": {k: str(v) for k, v in (config or {}).items()}}
        self._with_admin(lambda admin: admin.create_topics({name: spec}))

    def delete_topic(self, name: str) -> None:
        self._with_admin(lambda admin: admin.delete_topics([name]))

    def groups(self) -> list[str]:
        return sorted({g["group_id"] for g in self._with_admin(lambda admin: admin.list_groups())})

    def coordinator(self, group_id: str) -> int:
        """The node id of the group's coordinator now (FindCoordinator), waiting while its partition of
        __consumer_offsets has no leader (for at most the state's timeout)."""
        with quiet_schema_loading():
            import kafka.errors as errors
            from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest

        def find(admin: Any) -> int:
            # Asked afresh each time: kafka-python's own lookup keeps a coordinator it found, even a dead one.
            response = admin._manager.run(admin._manager.send, FindCoordinatorRequest[3](key=group_id, key_type=0))
            error = errors.for_code(response.error_code)
            if error is not errors.NoError:
                raise error(response.error_message or f"FindCoordinator of group {group_id!r}")
            return int(response.node_id)

        return self._with_admin(find)

    def committed_offsets(self, group_id: str) -> dict[tuple[str, int], int]:
        offsets = self._with_admin(lambda admin: admin.list_group_offsets({group_id: None})).get(group_id, {})
        return {(tp.topic, tp.partition): meta.offset for tp, meta in offsets.items() if meta.offset >= 0}

    def group(self, group_id: str) -> GroupState:
        """The group as its coordinator describes it, whichever its protocol: ConsumerGroupDescribe for a KIP-848
        consumer group (epochs, assignments and target assignments), ShareGroupDescribe for a KIP-932 share group
        (epochs and assignments; no committed offsets), else DescribeGroups for a classic one; with the group's
        committed offsets (OffsetFetch). KeyError if the coordinator knows no such group."""
        consumer_groups = self._with_admin(lambda admin: describe_consumer_groups(admin, [group_id]))
        if group_id not in consumer_groups:
            share_groups = self._with_admin(lambda admin: describe_share_groups(admin, [group_id]))
            if group_id in share_groups:
                return share_group_state(share_groups[group_id])
        offsets = self.committed_offsets(group_id)
        if group_id in consumer_groups:
            return consumer_group_state(consumer_groups[group_id], offsets)
        described = self._with_admin(lambda admin: admin.describe_groups([group_id]))[group_id]
        if described.get("error"):
            if "GroupIdNotFound" in described["error"]:
                raise KeyError(f"unknown group {group_id!r}")
            raise RuntimeError(f"DescribeGroups {group_id!r}: {described['error']}")
        return classic_group_state(group_id, described, offsets)

    def share_group(self, group_id: str) -> ShareGroupState:
        """A share group's in-flight records, as the leaders of its share-partitions hold them (each running
        broker's control API; the newest leader epoch wins where an old leader has not let go yet), with the
        delivery count of every record and the member holding each acquired one."""
        partitions: dict[tuple[str, int], SharePartitionState] = {}
        sessions: dict[str, int] = {}
        for control in self._controls():
            answer = control.call("share_group.describe", group=group_id)
            for p in answer["partitions"]:
                key = (p["topic"], p["partition"])
                if key in partitions and partitions[key].leader_epoch >= p["leader_epoch"]:
                    continue
                partitions[key] = SharePartitionState(
                    p["topic"], p["partition"], answer["node_id"], p["leader_epoch"], p["start_offset"],
                    p["end_offset"], [InFlightRecord(r["offset"], r["state"], r["delivery_count"], r["member_id"])
                                      for r in p["records"]])
            for session in answer["sessions"]:
                sessions[session["member_id"]] = session["epoch"]
        return ShareGroupState(group_id, dict(sorted(partitions.items())), sessions)

    def wait_for_committed(self, group_id: str, topic: str, partition: int, offset: int,
                           timeout: float = DEFAULT_TIMEOUT_S) -> int:
        """Until the group's committed offset of the partition is at `offset` or past it; returns it then. The
        group's coordinator answers when its offsets change (a commit, a transaction's end, a failover's load); a
        coordinator that moves is followed. TimeoutError naming what was last seen otherwise."""
        return self._wait_at_leader("group.wait_committed", "offset", dict(group=group_id, topic=topic,
                                    partition=partition), offset, timeout,
                                    f"the offset group {group_id!r} committed for {topic}-{partition}")

    def wait_for_offset(self, topic: str, partition: int, at_least: int, offset: str = "high_watermark",
                        timeout: float = DEFAULT_TIMEOUT_S) -> int:
        """Until the partition's `offset` ("high_watermark" or "last_stable_offset") is at or past `at_least`, as
        its leader tells it; returns the offset then. The leader answers when it changes (the broker pushes, the
        test does not poll); a leader that moves is followed. TimeoutError naming what was last seen otherwise."""
        return self._wait_at_leader("partition.wait", "value", dict(topic=topic, partition=partition, offset=offset),
                                    at_least, timeout, f"the {offset} of {topic}-{partition}")

    def wait_for_topic(self, topic: str, partitions: int | None = None, timeout: float = DEFAULT_TIMEOUT_S) -> None:
        """Until every broker's metadata has the topic (with at least `partitions` partitions, if given) and a leader
        for each partition: a client bootstrapping from any of them can use it then. Each broker answers when its
        metadata changes. TimeoutError naming what was last seen otherwise."""
        deadline = time.monotonic() + timeout
        for control in self._controls():
            while True:
                remaining = max(0.0, deadline - time.monotonic())
                wait_s = min(remaining, OFFSET_WAIT_SLICE_S)
                try:
                    answer = control.with_timeout(wait_s + CONTROL_MARGIN_S).call(
                        "topic.wait", topic=topic, partitions=partitions, timeout_ms=int(wait_s * 1000))
                    seen: object = answer["seen"]
                    if answer["reached"]:
                        break
                except (ControlError, OSError) as exc:  # a broker going down or not up yet
                    seen = exc
                if time.monotonic() >= deadline:
                    raise TimeoutError(f"waited {timeout:g} s for topic {topic!r}; the broker at "
                                       f"{control.address[0]}:{control.address[1]} last saw: {seen}")
                if not isinstance(seen, str):
                    time.sleep(min(remaining, LEADER_RETRY_S))

    def recording(self, size: int = DEFAULT_RECORDING_SIZE) -> Recording:
        """Record the requests every broker answers from now on, keeping the last `size` of them (see
        minikafka.request_recording)."""
        return Recording(self._controls, size)

    def wait_for_records(self, topic: str, count: int, timeout: float = DEFAULT_TIMEOUT_S) -> int:
        """Until the topic holds at least `count` readable records (high watermark minus log start offset, summed
        over its partitions; transaction markers count, as they take offsets); returns that number then. Each
        broker counts the partitions it leads and answers when that reaches its share (what the others lack) or
        its slice ends; with several brokers each is asked in turn in short slices. TimeoutError naming what was
        last seen otherwise."""
        deadline = time.monotonic() + timeout
        # Per broker address, the records of the partitions it leads, and those partitions.
        seen: dict[tuple[str, int], tuple[int, list[int]]] = {}
        failures: dict[tuple[str, int], object] = {}
        while True:
            controls = self._controls()
            for control in controls:
                others = sum(n for address, (n, _) in seen.items() if address != control.address)
                remaining = max(0.0, deadline - time.monotonic())
                wait_s = min(remaining, OFFSET_WAIT_SLICE_S if len(controls) == 1 else RECORDS_WAIT_SLICE_S)
                try:
                    answer = control.with_timeout(wait_s + CONTROL_MARGIN_S).call(
                        "topic.wait_records", topic=topic, at_least=count - others, timeout_ms=int(wait_s * 1000))
                except (ControlError, OSError) as exc:  # a broker going down or not up yet
                    seen.pop(control.address, None)
                    failures[control.address] = exc
                    continue
                failures.pop(control.address, None)
                seen[control.address] = (int(answer["records"]), answer["partitions"])
            total = sum(n for n, _ in seen.values())
            led = [p for _, partitions in seen.values() for p in partitions]
            if total >= count and len(led) == len(set(led)):  # no partition counted twice as its leader moved
                return total
            if time.monotonic() >= deadline:
                down = "".join(f"; {address[0]}:{address[1]} failed: {exc}" for address, exc in failures.items())
                raise TimeoutError(f"waited {timeout:g} s for {count} record(s) in topic {topic!r}; last seen: "
                                   f"{total}{down}")
            if not seen:
                time.sleep(min(max(0.0, deadline - time.monotonic()), LEADER_RETRY_S))  # no broker answering now

    def _wait_at_leader(self, op: str, field: str, fields: dict[str, object], at_least: int, timeout: float,
                        what: str) -> int:
        """Run a waiting control operation on whichever broker takes it (the partition's leader, the group's
        coordinator: the others refuse), in slices, until it answers "reached"."""
        deadline = time.monotonic() + timeout
        seen: object = "nobody answering for it"
        while True:
            remaining = deadline - time.monotonic()
            for control in self._controls():
                wait_s = max(0.0, min(remaining, OFFSET_WAIT_SLICE_S))
                try:
                    answer = control.with_timeout(wait_s + CONTROL_MARGIN_S).call(
                        op, **fields, at_least=at_least, timeout_ms=int(wait_s * 1000))
                except (ControlError, OSError) as exc:  # not the one to ask, or a broker going down
                    seen = seen if "does not" in str(exc) else exc
                    continue
                if answer["reached"]:
                    return int(answer[field])
                seen = answer[field]
                break
            else:
                time.sleep(min(max(0.0, remaining), LEADER_RETRY_S))  # nobody to ask now: an election is under way
            if time.monotonic() >= deadline:
                raise TimeoutError(f"waited {timeout:g} s for {what} to reach {at_least}; last seen: {seen}")

    def wait_for_group(self, group_id: str, state: str | None = None, members: int | None = None,
                       timeout: float = DEFAULT_TIMEOUT_S, generation_at_least: int | None = None) -> GroupState:
        """Until the group is in `state` (Kafka's name, e.g. "Stable") with `members` members and a generation (a
        consumer group's group epoch) of at least `generation_at_least`, each left out to accept any; returns the
        group then. The group's coordinator answers when the group changes (the wait is parked there; a coordinator
        that moves is followed). TimeoutError naming what was last seen otherwise (an unknown group is seen as such
        until it exists)."""
        with quiet_schema_loading():
            from kafka.errors import KafkaError

        deadline = time.monotonic() + timeout
        seen: object = f"unknown group {group_id!r} (no broker coordinates it yet)"
        while True:
            remaining = deadline - time.monotonic()
            answered = False
            for control in self._controls():
                wait_s = max(0.0, min(remaining, OFFSET_WAIT_SLICE_S))
                try:
                    answer = control.with_timeout(wait_s + CONTROL_MARGIN_S).call(
                        "group.wait", group=group_id, state=state, members=members,
                        generation_at_least=generation_at_least, timeout_ms=int(wait_s * 1000))
                except (ControlError, OSError) as exc:  # not its coordinator, or a broker going down
                    seen = seen if "does not" in str(exc) else exc
                    continue
                answered = True
                seen = (f"{answer['state']} with {answer['members']} member(s), generation {answer['generation']}"
                        if answer["exists"] else f"unknown group {group_id!r}")
                if answer["reached"]:
                    try:  # described as the coordinator answers clients; it may have moved on meanwhile
                        group = self.group(group_id)
                    except (OSError, LookupError) as exc:
                        seen = exc
                    except KafkaError as exc:  # a coordinator moving or loading the group
                        if not exc.retriable:
                            raise
                        self.close()  # a new admin client, with the cluster's metadata as it is now
                        seen = exc
                    else:
                        if (state is None or group.state == state) and (
                                members is None or len(group.members) == members):
                            return group
                        seen = f"{group.group_type} group {group.state} with {len(group.members)} member(s)"
                break
            if time.monotonic() >= deadline:
                wanted = " with ".join(w for w in (
                    state, None if members is None else f"{members} member(s)",
                    None if generation_at_least is None else f"generation >= {generation_at_least}") if w)
                raise TimeoutError(f"waited {timeout:g} s for group {group_id!r} to be {wanted or 'described'}; "
                                   f"last seen: {seen}")
            if not answered:
                time.sleep(min(max(0.0, deadline - time.monotonic()), LEADER_RETRY_S))  # an election is under way

    # ---- transactions (kafka-python admin: ListTransactions, DescribeTransactions) -----------------------------

    def transactions(self) -> list[TransactionState]:
        """Every transactional id the transaction coordinators know, in any state, sorted by id: what
        `kafka-transactions.sh list` finds, described as `describe` does."""
        listings = self._with_admin(lambda admin: admin.list_transactions())
        ids = sorted({t.transactional_id for listed in listings.values() for t in listed})
        described = self._with_admin(lambda admin: admin.describe_transactions(ids)) if ids else {}
        return [_transaction_state(i, described[i]) for i in ids]

    def transaction(self, transactional_id: str) -> TransactionState:
        """One transactional id's state; KeyError if its coordinator does not know it."""
        with quiet_schema_loading():
            from kafka.errors import TransactionalIdNotFoundError

        try:
            described = self._with_admin(lambda admin: admin.describe_transactions([transactional_id]))
        except TransactionalIdNotFoundError:
            raise KeyError(f"unknown transactional id {transactional_id!r}") from None
        return _transaction_state(transactional_id, described[transactional_id])

    def close(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None


def assigned_partitions(assignment: Any) -> list[tuple[str, int]]:
    """(topic, partition) pairs of a consumer-protocol assignment, decoded or as kafka-python's dict form."""
    if not assignment or isinstance(assignment, (bytes, bytearray)):
        return []
    if hasattr(assignment, "partitions"):
        return sorted((tp.topic, tp.partition) for tp in assignment.partitions())
    pairs: list[tuple[str, int]] = []
    for entry in assignment.get("assigned_partitions", []):
        topic = entry["topic"] if isinstance(entry, dict) else entry[0]
        parts = entry["partitions"] if isinstance(entry, dict) else entry[1]
        pairs.extend((topic, p) for p in parts)
    return sorted(pairs)


def describe_consumer_groups(admin: Any, group_ids: list[str]) -> dict[str, Any]:
    """ConsumerGroupDescribe of each group at its coordinator, through a kafka-python admin client: the described
    groups (ConsumerGroupDescribeResponse's DescribedGroup) by id. A group the coordinator does not know as a
    consumer group (GROUP_ID_NOT_FOUND: a classic group, or none) is left out; other errors are raised."""
    from minikafka.protocol.client_apis.messages import ConsumerGroupDescribeRequest

    return _describe_modern_groups(admin, group_ids, ConsumerGroupDescribeRequest)


def describe_share_groups(admin: Any, group_ids: list[str]) -> dict[str, Any]:
    """ShareGroupDescribe of each group at its coordinator, as describe_consumer_groups: groups that are not share
    groups are left out, and so is every group while share groups are off (share.version 0)."""
    from minikafka.protocol.client_apis.messages import ShareGroupDescribeRequest

    return _describe_modern_groups(admin, group_ids, ShareGroupDescribeRequest, share_groups_may_be_off=True)


def _describe_modern_groups(admin: Any, group_ids: list[str], request_class: Any,
                            share_groups_may_be_off: bool = False) -> dict[str, Any]:
    with quiet_schema_loading():
        import kafka.errors as errors

    async def describe() -> dict[str, Any]:
        coordinators = await admin._find_coordinator_ids(group_ids)  # kafka-python has no public call for these
        by_coordinator: dict[int, list[str]] = {}
        for group_id, node_id in coordinators.items():
            by_coordinator.setdefault(node_id, []).append(group_id)
        found: dict[str, Any] = {}
        for node_id, ids in by_coordinator.items():
            request = request_class(group_ids=ids, include_authorized_operations=False)
            response = await admin._manager.send(request, node_id=node_id)
            for group in response.groups:
                error = errors.for_code(group.error_code)
                if error is errors.GroupIdNotFoundError or (share_groups_may_be_off
                                                            and error is errors.UnsupportedVersionError):
                    continue
                if error is not errors.NoError:
                    raise error(group.error_message or f"{request_class.__name__} of group {group.group_id!r}")
                found[group.group_id] = group
        return found

    return admin._manager.run(describe)


def described_partitions(assignment: Any) -> list[tuple[str, int]]:
    """(topic, partition) pairs of a ConsumerGroupDescribe assignment, sorted."""
    return sorted((t.topic_name, p) for t in assignment.topic_partitions for p in t.partitions)


def _upgraded(member: Any) -> bool | None:
    """ConsumerGroupDescribe v1's MemberType as Kafka's admin client reads it: 1 (consumer) is upgraded, 0
    (classic) is not, -1 (or a v0 answer) unknown."""
    member_type = getattr(member, "member_type", -1)
    return None if member_type == -1 else member_type == 1


def consumer_group_state(described: Any, offsets: dict[tuple[str, int], int]) -> GroupState:
    """A GroupState from ConsumerGroupDescribe's description of a consumer group."""
    members = [GroupMember(m.member_id, m.client_id, m.client_host, m.instance_id,
                           described_partitions(m.assignment), m.member_epoch,
                           described_partitions(m.target_assignment), _upgraded(m))
               for m in described.members]
    return GroupState(described.group_id, described.group_state, "consumer", described.assignor_name, members,
                      offsets, "consumer", described.group_epoch, described.assignment_epoch,
                      described.assignor_name)


def share_group_state(described: Any) -> GroupState:
    """A GroupState from ShareGroupDescribe's description of a share group (no committed offsets: a share group's
    progress is its share partitions' state)."""
    members = [GroupMember(m.member_id, m.client_id, m.client_host, None, described_partitions(m.assignment),
                           m.member_epoch)
               for m in described.members]
    return GroupState(described.group_id, described.group_state, "share", described.assignor_name, members, {},
                      "share", described.group_epoch, described.assignment_epoch, described.assignor_name)


def classic_group_state(group_id: str, described: dict[str, Any], offsets: dict[tuple[str, int], int]) -> GroupState:
    """A GroupState from kafka-python's DescribeGroups description of a classic group."""
    members = [GroupMember(m["member_id"], m["client_id"], m["client_host"], m.get("group_instance_id"),
                           assigned_partitions(m.get("member_assignment")))
               for m in described.get("members", [])]
    return GroupState(group_id, described["group_state"], described["protocol_type"], described["protocol_data"],
                      members, offsets, assignor=described["protocol_data"] or None)


def _transaction_state(transactional_id: str, description: Any) -> TransactionState:
    """A TransactionState from kafka-python's TransactionDescription (the wire's -1 start time as None)."""
    start = description.transaction_start_time_ms
    return TransactionState(transactional_id, str(description.state.value), description.producer_id,
                            description.producer_epoch,
                            sorted((tp.topic, tp.partition) for tp in description.topic_partitions),
                            description.transaction_timeout_ms, None if start < 0 else start)
