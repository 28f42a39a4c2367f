"""KIP-932 share group membership on the coordinator: the simple assignor's exact outputs, ShareGroupHeartbeat's
epochs, errors and share-state initialization flow, and a reload that rebuilds the groups from their records."""
from __future__ import annotations

import uuid
from collections import defaultdict

import pytest
import trio

from minikafka.broker.coordinator.group.assignor.assignor_spec import (
    GroupSpec,
    MemberSubscription,
    SubscribedTopicDescriber,
    SubscriptionType,
    TopicMetadata,
)
from minikafka.broker.coordinator.group.assignor.simple_assignor import SimpleAssignor
from minikafka.broker.coordinator.group.group_coordinator import GroupCoordinator, JoinRequest
from minikafka.broker.coordinator.group.group_coordinator_config import GroupCoordinatorConfig
from minikafka.broker.coordinator.group.group_metadata_log import decode_key, decode_value
from minikafka.broker.coordinator.group.share.share_group import ShareGroupState
from minikafka.broker.coordinator.group.share_group_coordinator import ShareHeartbeatRequest
from minikafka.broker.coordinator.share.share_coordinator_shard import SharePartitionKey
from minikafka.config import BrokerConfig, ConfigError
from minikafka.protocol.coordinator_records import consumer_group_records
from minikafka.protocol.coordinator_records.consumer_group_records import (
    CONSUMER_GROUP_RECORD_TYPES,
    SHARE_GROUP_RECORD_TYPES,
    CoordinatorRecordType,
)
from minikafka.protocol.errors import ErrorCode, KafkaError

E = ErrorCode
T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)


class MemoryLog:
    """`__consumer_offsets` in memory, replayed as GroupMetadataLog replays it (group records of both kinds)."""

    def __init__(self) -> None:
        self.records: dict[int, list[tuple[bytes, bytes | None]]] = defaultdict(list)

    def append(self, partition, records, now_ms, **_):
        self.records[partition].extend(records)
        return E.NONE

    def replay(self, partition):
        for key, value in self.records.get(partition, []):
            decoded = decode_key(key)
            if decoded is None:
                record_type = consumer_group_records.record_type_of(key)
                if record_type in CONSUMER_GROUP_RECORD_TYPES:
                    yield consumer_group_records.decode_record(key, value)
                elif record_type in SHARE_GROUP_RECORD_TYPES:
                    yield consumer_group_records.decode_share_record(key, value)
                continue
            yield decoded, decode_value(decoded, value)

    def compact(self, partition):
        """What the log cleaner leaves once tombstones are past delete.retention.ms: the latest record of each key,
        in its place."""
        records = self.records[partition]
        latest = {key: i for i, (key, _) in enumerate(records)}
        self.records[partition] = [(k, v) for i, (k, v) in enumerate(records) if latest[k] == i and v is not None]

    async def wait_replicated(self, partition):
        return E.NONE

    def types(self) -> list[CoordinatorRecordType]:
        return [CoordinatorRecordType(consumer_group_records.record_type_of(k))
                for records in self.records.values() for k, _ in records]


class Result:
    def __init__(self, error: ErrorCode) -> None:
        self.error = error


class Persister:
    """The share coordinator as the group coordinator reaches it: what was initialized and deleted."""

    def __init__(self, error: ErrorCode = E.NONE) -> None:
        self.error = error
        self.initialized: list[tuple[SharePartitionKey, int, int]] = []
        self.deleted: list[SharePartitionKey] = []

    async def initialize_state(self, key, state_epoch, start_offset):
        self.initialized.append((key, state_epoch, start_offset))
        return Result(self.error)

    async def delete_state(self, key):
        self.deleted.append(key)
        return Result(self.error)


TOPICS = {"t1": TopicMetadata(T1, "t1", 4), "t2": TopicMetadata(T2, "t2", 2)}


def topics() -> SubscribedTopicDescriber:
    return SubscribedTopicDescriber(TOPICS.values())


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000_000

    def __call__(self) -> int:
        return self.now


def make(log: MemoryLog | None = None, clock: Clock | None = None, group_configs=lambda _g: {},
         **overrides) -> GroupCoordinator:
    config = GroupCoordinatorConfig(num_partitions=3, share_session_timeout_ms=4000, share_heartbeat_interval_ms=500,
                                    **overrides)
    coordinator = GroupCoordinator(config, log or MemoryLog(), clock or Clock(), describe_topics=topics,
                                   group_configs=group_configs)
    coordinator.load()
    return coordinator


def hb(coordinator: GroupCoordinator, member_id: str, epoch: int, names: list[str] | None = None, group: str = "g"):
    result, initialize = coordinator.share.heartbeat(ShareHeartbeatRequest(group, member_id, epoch,
                                                                           subscribed_topic_names=names))
    return result, initialize


def error_of(call) -> tuple[ErrorCode, str | None]:
    with pytest.raises(KafkaError) as info:
        call()
    return info.value.code, info.value.message


def initialize_all(coordinator: GroupCoordinator, request) -> None:
    coordinator.share.initialize_share_group_state(request.group_id, request.partitions)


def spec(members: dict[str, tuple[set[uuid.UUID], dict]], kind=SubscriptionType.HOMOGENEOUS) -> GroupSpec:
    return GroupSpec({m: MemberSubscription(frozenset(t), {k: frozenset(v) for k, v in a.items()})
                      for m, (t, a) in members.items()}, kind)


def plain(assignment) -> dict:
    return {m: {t: sorted(ps) for t, ps in a.items() if ps} for m, a in assignment.items()}


# ---- the simple assignor ------------------------------------------------------------------------------------------

def test_simple_assignor_splits_partitions_and_shares_only_when_members_outnumber_them():
    assignor = SimpleAssignor()
    two = assignor.assign(spec({"a": ({T1}, {}), "b": ({T1}, {})}), topics())
    # Four partitions, two members: two each, none shared, handed out in turn in the order of Kafka's HashMap of
    # TopicIdPartition (hash 31 * 1 + p over 8 buckets: partitions 1, 2, 3, then 0).
    assert plain(two) == {"a": {T1: [1, 3]}, "b": {T1: [0, 2]}}
    six = assignor.assign(spec({m: ({T2}, {}) for m in "abcdef"}), topics())
    # Six members, two partitions: each partition goes to three members, each member has one.
    per_partition = defaultdict(list)
    for member, assignment in plain(six).items():
        assert list(assignment) == [T2] and len(assignment[T2]) == 1
        per_partition[assignment[T2][0]].append(member)
    assert sorted(map(len, per_partition.values())) == [3, 3]


def test_simple_assignor_is_sticky_and_keeps_only_assignable_partitions():
    assignor = SimpleAssignor()
    before = {"a": ({T1}, {T1: {0, 1, 2, 3}}), "b": ({T1}, {})}
    after = plain(assignor.assign(spec(before), topics()))
    assert len(after["a"][T1]) == 2 and set(after["a"][T1]) < {0, 1, 2, 3}
    assert sorted(after["a"][T1] + after["b"][T1]) == [0, 1, 2, 3]
    # Only initialized partitions are assignable.
    only_two = SimpleAssignor(lambda t, p: p < 2).assign(spec({"a": ({T1}, {}), "b": ({T1}, {})}), topics())
    assert sorted(sum((a.get(T1, []) for a in plain(only_two).values()), [])) == [0, 1]
    # Heterogeneous: each topic among its own subscribers.
    mixed = plain(assignor.assign(spec({"a": ({T1}, {}), "b": ({T1, T2}, {})}, SubscriptionType.HETEROGENEOUS),
                                  topics()))
    assert mixed["b"][T2] == [0, 1] and T2 not in mixed["a"]
    assert sorted(mixed["a"][T1] + mixed["b"][T1]) == [0, 1, 2, 3]


def test_simple_assignor_gives_the_same_assignment_for_the_same_input():
    members = {m: ({T1, T2}, {}) for m in ("m-1", "m-2", "m-3")}
    assert plain(SimpleAssignor().assign(spec(members), topics())) == plain(
        SimpleAssignor().assign(spec(members), topics()))


# ---- heartbeats -------------------------------------------------------------------------------------------------

async def test_partitions_are_assigned_once_their_share_state_is_initialized():
    coordinator = make()
    result, initialize = hb(coordinator, "a", 0, ["t1"])
    # Joined at group epoch 1 with nothing yet: the share state of t1's partitions is not initialized.
    assert (result.member_epoch, result.assignment, result.heartbeat_interval_ms) == (1, {}, 500)
    assert initialize is not None and initialize.partitions == {T1: frozenset(range(4))}
    group = coordinator.share.groups["g"]
    assert group.state_metadata is not None and set(group.state_metadata.initializing_topics) == {T1}
    # The same heartbeat again does not initialize them twice while they are initializing.
    assert hb(coordinator, "a", 1)[1] is None
    initialize_all(coordinator, initialize)
    assert group.state_metadata.initialized_topics[T1].partitions == frozenset(range(4))
    assert not group.state_metadata.initializing_topics
    result, _ = hb(coordinator, "a", 1)
    assert result.member_epoch == 2 and result.assignment == {T1: frozenset(range(4))}
    assert group.state is ShareGroupState.STABLE and group.target_assignment_epoch == 2


async def test_two_members_split_the_partitions_and_a_leaver_gives_them_back():
    coordinator = make()
    _, initialize = hb(coordinator, "a", 0, ["t1"])
    initialize_all(coordinator, initialize)
    a, _ = hb(coordinator, "a", 1)
    b, none = hb(coordinator, "b", 0, ["t1"])
    assert none is None  # already initialized
    assert b.member_epoch == 3 and len(b.assignment[T1]) == 2
    a2, _ = hb(coordinator, "a", a.member_epoch)
    assert a2.member_epoch == 3 and a2.assignment[T1] | b.assignment[T1] == frozenset(range(4))
    assert not a2.assignment[T1] & b.assignment[T1]
    assert hb(coordinator, "b", -1)[0].member_epoch == -1
    a3, _ = hb(coordinator, "a", 3)
    # The leave bumped the group epoch to 4; as in Kafka, the initialized partitions b's target held being
    # unassigned bump it once more before the new target assignment (initializedAssignmentPending).
    assert a3.member_epoch == 5 and a3.assignment == {T1: frozenset(range(4))}
    assert list(coordinator.share.groups["g"].members) == ["a"]


async def test_heartbeat_errors_are_kafkas():
    coordinator = make(share_max_size=1)
    assert error_of(lambda: hb(coordinator, "", 0, ["t1"])) == (E.INVALID_REQUEST, "MemberId can't be empty.")
    assert error_of(lambda: hb(coordinator, "a", 0)) == (E.INVALID_REQUEST,
                                                         "SubscribedTopicNames must be set in first request.")
    assert error_of(lambda: hb(coordinator, "a", -2)) == (E.INVALID_REQUEST, "MemberEpoch is invalid.")
    assert error_of(lambda: hb(coordinator, "a", 1))[0] == E.GROUP_ID_NOT_FOUND
    hb(coordinator, "a", 0, ["t1"])
    code, message = error_of(lambda: hb(coordinator, "a", 5))
    assert code == E.FENCED_MEMBER_EPOCH and "greater member epoch (5)" in message
    # The group's size is checked first, as in Kafka: a full group refuses an unknown member that way.
    assert error_of(lambda: hb(coordinator, "x", 1))[0] == E.GROUP_MAX_SIZE_REACHED
    roomy = make()
    hb(roomy, "a", 0, ["t1"])
    assert error_of(lambda: hb(roomy, "x", 1)) == (E.UNKNOWN_MEMBER_ID, "Member x is not a member of group g.")
    assert error_of(lambda: hb(coordinator, "b", 0, ["t1"])) == (
        E.GROUP_MAX_SIZE_REACHED, "The share group has reached its maximum capacity of 1 members.")


async def test_group_types_do_not_mix():
    coordinator = make()
    hb(coordinator, "a", 0, ["t1"], group="shared")
    join = coordinator.join_group(JoinRequest("shared", "", None, "c", "h", 10000, 10000, "consumer",
                                              [("range", b"")], 5))
    assert join.result is not None and join.result.error == E.INCONSISTENT_GROUP_PROTOCOL
    from minikafka.broker.coordinator.group.consumer_group_coordinator import HeartbeatRequest
    code, message = error_of(lambda: coordinator.consumer.heartbeat(HeartbeatRequest(
        "shared", "c", 0, rebalance_timeout_ms=1000, subscribed_topic_names=["t1"], owned_partitions={})))
    assert (code, message) == (E.GROUP_ID_NOT_FOUND, "Group shared is not a consumer group.")
    coordinator.consumer.heartbeat(HeartbeatRequest("consumers", "c", 0, rebalance_timeout_ms=1000,
                                                    subscribed_topic_names=["t1"], owned_partitions={}))
    assert error_of(lambda: hb(coordinator, "a", 0, ["t1"], group="consumers")) == (
        E.GROUP_ID_NOT_FOUND, "Group consumers is not a share group.")
    assert coordinator.describe_group("shared", 6).message == "Group shared is not a classic group."
    listed = {(g.group_id, g.group_type, g.state) for g in coordinator.list_groups([], [])}
    assert ("shared", "share", "Stable") in listed
    assert [g.group_id for g in coordinator.list_groups(["empty"], ["share"])] == []


async def test_a_silent_member_is_fenced_after_the_session_timeout():
    coordinator = make()
    hb(coordinator, "a", 0, ["t1"])
    hb(coordinator, "b", 0, ["t1"])
    assert coordinator.timer.is_scheduled("share-session-g-a")
    coordinator.share._fence_on_timeout("g", "a")
    group = coordinator.share.groups["g"]
    assert list(group.members) == ["b"] and group.group_epoch == 3
    assert not coordinator.timer.is_scheduled("share-session-g-a")


async def test_a_reloaded_coordinator_has_the_same_groups():
    log = MemoryLog()
    coordinator = make(log)
    _, initialize = hb(coordinator, "a", 0, ["t1", "t2"])
    initialize_all(coordinator, initialize)
    hb(coordinator, "a", 1)
    hb(coordinator, "b", 0, ["t1"])
    before = coordinator.share.groups["g"]
    assert {CoordinatorRecordType.SHARE_GROUP_STATE_PARTITION_METADATA,
            CoordinatorRecordType.SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT} <= set(log.types())
    reloaded = make(log)
    after = reloaded.share.groups["g"]
    assert (after.group_epoch, after.target_assignment_epoch, after.target_assignment) == (
        before.group_epoch, before.target_assignment_epoch, before.target_assignment)
    assert after.members == before.members
    assert after.state_metadata == before.state_metadata
    assert reloaded.timer.is_scheduled("share-session-g-b")
    # The partition compacted to the latest record of each key rebuilds the same group.
    partition = coordinator.group_manager.partition_for("g")
    written = len(log.records[partition])
    log.compact(partition)
    assert len(log.records[partition]) < written
    assert make(log).share.groups["g"].members == before.members


async def test_the_initializer_task_initializes_through_the_persister_and_retries_on_reload():
    log = MemoryLog()
    coordinator = make(log)
    persister = coordinator.share.state_initializer = Persister()
    async with trio.open_nursery() as nursery:
        await nursery.start(coordinator.share.run_initializer)
        _, initialize = hb(coordinator, "a", 0, ["t2"])
        initialized = trio.Event()
        coordinator.group_manager.groups_changed = initialized.set
        coordinator.share.request_initialize(initialize)
        with trio.fail_after(5):
            await initialized.wait()
        nursery.cancel_scope.cancel()
    assert coordinator.share.groups["g"].initialized_partitions() == {T2: frozenset({0, 1})}
    assert sorted((k.topic_id, k.partition, epoch, offset) for k, epoch, offset in persister.initialized) == [
        (T2, 0, 1, -1), (T2, 1, 1, -1)]
    # Partitions left initializing are handed over again when a coordinator loads the group.
    log2 = MemoryLog()
    first = make(log2)
    hb(first, "a", 0, ["t2"])
    second = make(log2)
    request = second.share._receive_initialize.receive_nowait()
    assert request.partitions == {T2: frozenset({0, 1})}


async def test_a_failed_initialization_takes_the_partitions_out_of_initializing():
    coordinator = make()
    coordinator.share.state_initializer = Persister(E.COORDINATOR_NOT_AVAILABLE)
    _, initialize = hb(coordinator, "a", 0, ["t2"])
    await coordinator.share._initialize(initialize)
    metadata = coordinator.share.groups["g"].state_metadata
    assert metadata is not None and not metadata.initializing_topics and not metadata.initialized_topics
    # The next heartbeat asks again.
    assert hb(coordinator, "a", 1)[1] is not None


async def test_a_deleted_and_recreated_topic_is_initialized_again(monkeypatch):
    coordinator = make()
    _, initialize = hb(coordinator, "a", 0, ["t2"])
    initialize_all(coordinator, initialize)
    a, _ = hb(coordinator, "a", 1)
    assert a.assignment == {T2: frozenset({0, 1})}
    t3 = uuid.UUID(int=3)
    monkeypatch.setitem(TOPICS, "t2", TopicMetadata(t3, "t2", 2))
    coordinator.share.on_topic_deleted("t2")
    group = coordinator.share.groups["g"]
    assert group.state_metadata is not None and not group.state_metadata.initialized_topics
    again, initialize = hb(coordinator, "a", a.member_epoch)
    # The new topic's partitions are initialized, and meanwhile the old ones are no longer assigned.
    assert initialize is not None and initialize.partitions == {t3: frozenset({0, 1})}
    assert again.assignment == {}
    epoch = again.member_epoch
    assert hb(coordinator, "a", epoch)[0].member_epoch == epoch  # no epoch bump while nothing changes
    initialize_all(coordinator, initialize)
    assert hb(coordinator, "a", epoch)[0].assignment == {t3: frozenset({0, 1})}


async def test_partitions_still_initializing_after_the_retry_interval_are_initialized_again():
    clock = Clock()
    coordinator = make(clock=clock, share_initialize_retry_interval_ms=30000)
    assert hb(coordinator, "a", 0, ["t2"])[1] is not None
    clock.now += 29999
    assert hb(coordinator, "a", 1)[1] is None
    clock.now += 1
    retried = hb(coordinator, "a", 1)[1]
    assert retried is not None and retried.partitions == {T2: frozenset({0, 1})}


async def test_a_groups_own_share_configs_take_the_place_of_the_brokers():
    configs = {"g": {"share.heartbeat.interval.ms": "250", "share.session.timeout.ms": "1500"}}
    coordinator = make(group_configs=lambda g: configs.get(g, {}))
    assert hb(coordinator, "a", 0, ["t1"])[0].heartbeat_interval_ms == 250
    assert hb(coordinator, "a", 0, ["t1"], group="other")[0].heartbeat_interval_ms == 500
    assert coordinator.share.session_timeout_ms("g") == 1500


async def test_a_share_group_has_no_committed_offsets():
    coordinator = make()
    hb(coordinator, "a", 0, ["t1"])
    offsets = coordinator.offset_manager
    assert error_of(lambda: offsets.fetch_offsets("g", None)) == (E.GROUP_ID_NOT_FOUND,
                                                                  "Group g is not a consumer group.")
    assert error_of(lambda: offsets.delete_offsets("g", [("t1", [0])]))[0] == E.GROUP_ID_NOT_FOUND
    with pytest.raises(KafkaError) as info:
        await offsets.commit_offsets("g", "", None, -1, -1, [], 8)
    assert info.value.code == E.GROUP_ID_NOT_FOUND


async def test_delete_groups_deletes_an_empty_share_group_only():
    coordinator = make()
    _, initialize = hb(coordinator, "a", 0, ["t2"])
    initialize_all(coordinator, initialize)
    assert coordinator.delete_groups(["g"]) == [("g", E.NON_EMPTY_GROUP)]
    hb(coordinator, "a", -1)
    assert coordinator.share.share_partitions_to_delete(["g"]) == {"g": {T2: frozenset({0, 1})}}
    # Recorded as deleting first: a deletion of the share state that fails is asked for again.
    metadata = coordinator.share.groups["g"].state_metadata
    assert metadata is not None and (metadata.initialized_topics, metadata.deleting_topics) == ({}, {T2: "t2"})
    assert coordinator.share.share_partitions_to_delete(["g"]) == {"g": {T2: frozenset({0, 1})}}
    assert coordinator.delete_groups(["g"]) == [("g", E.NONE)]
    assert "g" not in coordinator.share.groups


def test_share_group_settings_are_checked_as_kafka():
    config = BrokerConfig({"group.share.max.size": "1001"})
    with pytest.raises(ConfigError, match="group.share.max.size"):
        GroupCoordinatorConfig.from_broker_config(config)
    config = BrokerConfig({"group.share.session.timeout.ms": "1000"})
    with pytest.raises(ConfigError, match="group.share.session.timeout.ms"):
        GroupCoordinatorConfig.from_broker_config(config)
    for name, value, message in (("group.share.delivery.count.limit", "11", "no more than 10"),
                                 ("group.share.delivery.count.limit", "1", "at least 2"),
                                 ("group.share.partition.max.record.locks", "99", "at least 100"),
                                 ("group.share.max.share.sessions", "0", "at least 1")):
        with pytest.raises(ConfigError, match=f"Invalid value {value} for configuration {name}: Value must be "
                                              f"{message}"):
            GroupCoordinatorConfig.from_broker_config(BrokerConfig({name: value}))
    ok = GroupCoordinatorConfig.from_broker_config(BrokerConfig({"group.share.max.size": "3"}))
    assert (ok.share_max_size, ok.share_session_timeout_ms, ok.share_heartbeat_interval_ms) == (3, 45000, 5000)
