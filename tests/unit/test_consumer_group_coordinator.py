"""ConsumerGroupHeartbeat on the coordinator: joins, reconciliation, leaves, fencing on timeouts, Kafka's errors, and
groups reloaded from their records, with the records kept in memory and timers on trio's mock clock."""
from __future__ import annotations

import uuid
from collections import defaultdict

import pytest
import trio

from minikafka.broker.coordinator.group.assignor.assignor_spec import SubscribedTopicDescriber, TopicMetadata
from minikafka.broker.coordinator.group.consumer.consumer_group import ConsumerGroupState
from minikafka.broker.coordinator.group.consumer_group_coordinator import HeartbeatRequest, HeartbeatResult
from minikafka.broker.coordinator.group.group_coordinator import GroupCoordinator, JoinRequest
from minikafka.broker.coordinator.group.group_coordinator_config import GroupCoordinatorConfig
from minikafka.broker.coordinator.group.group_metadata_log import decode_key, decode_value
from minikafka.broker.coordinator.group.offset_manager import OffsetCommitEntry
from minikafka.config import BrokerConfig, ConfigError
from minikafka.protocol.coordinator_records import consumer_group_records
from minikafka.protocol.coordinator_records.consumer_group_records import CONSUMER_GROUP_RECORD_TYPES
from minikafka.protocol.errors import ErrorCode, KafkaError

E = ErrorCode
T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)


class MemoryLog:
    """`__consumer_offsets` in memory, replayed as GroupMetadataLog replays it (consumer group records included)."""

    def __init__(self) -> None:
        self.records: dict[int, list[tuple[bytes, bytes | None]]] = defaultdict(list)

    def append(self, partition, records, now_ms, **_):
        self.records[partition].extend(records)
        return E.NONE

    def replay(self, partition):
        for key, value in self.records.get(partition, []):
            decoded = decode_key(key)
            if decoded is None:
                if consumer_group_records.record_type_of(key) in CONSUMER_GROUP_RECORD_TYPES:
                    yield consumer_group_records.decode_record(key, value)
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


class Topics:
    def __init__(self) -> None:
        self.topics = {"t1": TopicMetadata(T1, "t1", 4), "t2": TopicMetadata(T2, "t2", 2)}

    def __call__(self) -> SubscribedTopicDescriber:
        return SubscribedTopicDescriber(self.topics.values())


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000_000

    def __call__(self) -> int:
        return self.now


def make(log: MemoryLog | None = None, topics: Topics | None = None, clock: Clock | None = None,
         **overrides) -> GroupCoordinator:
    config = GroupCoordinatorConfig(num_partitions=3, consumer_session_timeout_ms=4000,
                                    consumer_heartbeat_interval_ms=500, **overrides)
    coordinator = GroupCoordinator(config, log or MemoryLog(), clock or Clock(), describe_topics=topics or Topics())
    coordinator.load()
    return coordinator


def hb(coordinator: GroupCoordinator, member_id: str, epoch: int, topics: list[str] | None = None,
       owned: dict | None = None, **fields) -> HeartbeatResult:
    if epoch == 0:
        fields.setdefault("rebalance_timeout_ms", 30000)
        owned = {} if owned is None else owned
    request = HeartbeatRequest("g", member_id, epoch, subscribed_topic_names=topics, owned_partitions=owned,
                               **fields)
    return coordinator.consumer.heartbeat(request)


def error_of(call) -> tuple[ErrorCode, str | None]:
    with pytest.raises(KafkaError) as info:
        call()
    return info.value.code, info.value.message


def count(assignment) -> int:
    return sum(map(len, assignment.values()))


def as_owned(assignment) -> dict:
    return {t: sorted(ps) for t, ps in assignment.items()}


async def test_members_join_share_and_leave():
    coordinator = make()
    a = hb(coordinator, "a", 0, ["t1", "t2"])
    assert (a.member_epoch, count(a.assignment), a.heartbeat_interval_ms) == (1, 6, 500)
    b = hb(coordinator, "b", 0, ["t1", "t2"])
    assert b.member_epoch == 2 and b.assignment == {}  # its partitions are still a's
    a2 = hb(coordinator, "a", 1, owned=as_owned(a.assignment))
    assert a2.member_epoch == 1 and count(a2.assignment) == 3  # revoke first, at the same epoch
    a3 = hb(coordinator, "a", 1, owned=as_owned(a2.assignment))
    assert a3.member_epoch == 2 and a3.assignment is None  # unchanged: not sent again
    b2 = hb(coordinator, "b", 2, owned={})
    assert count(b2.assignment) == 3
    group = coordinator.consumer.groups["g"]
    assert group.state is ConsumerGroupState.STABLE
    # b leaves: a gets everything back at a new epoch.
    assert hb(coordinator, "b", -1).member_epoch == -1
    a4 = hb(coordinator, "a", 2, owned=as_owned(a2.assignment))
    assert a4.member_epoch == 3 and count(a4.assignment) == 6
    assert list(coordinator.consumer.groups["g"].members) == ["a"]


async def test_a_reloaded_coordinator_has_the_same_groups_and_timers():
    log = MemoryLog()
    coordinator = make(log)
    a = hb(coordinator, "a", 0, ["t1"])
    hb(coordinator, "b", 0, ["t1"])
    hb(coordinator, "a", 1, owned=as_owned(a.assignment))
    reloaded = make(log)
    before, after = coordinator.consumer.groups["g"], reloaded.consumer.groups["g"]
    assert after.members == before.members and after.target_assignment == before.target_assignment
    assert (after.group_epoch, after.target_assignment_epoch) == (before.group_epoch, before.target_assignment_epoch)
    assert all(reloaded.timer.is_scheduled(f"consumer-session-g-{m}") for m in ("a", "b"))
    # Members carry on at their epochs with the new coordinator.
    assert hb(reloaded, "b", 2, owned={}).member_epoch == 2


async def test_request_validation_and_member_errors():
    coordinator = make(consumer_max_size=2)
    invalid = [
        (HeartbeatRequest("g", "", 0, rebalance_timeout_ms=1, subscribed_topic_names=[], owned_partitions={}),
         "MemberId can't be empty."),
        (HeartbeatRequest("", "m", 0, rebalance_timeout_ms=1, subscribed_topic_names=[], owned_partitions={}),
         "GroupId can't be empty."),
        (HeartbeatRequest("g", "m", 0, subscribed_topic_names=[], owned_partitions={}),
         "RebalanceTimeoutMs must be provided in first request."),
        (HeartbeatRequest("g", "m", 0, rebalance_timeout_ms=1, subscribed_topic_names=[]),
         "TopicPartitions must be empty when (re-)joining."),
        (HeartbeatRequest("g", "m", 0, rebalance_timeout_ms=1, owned_partitions={}),
         "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."),
        (HeartbeatRequest("g", "m", -2), "InstanceId can't be null."),
        (HeartbeatRequest("g", "m", -3), "MemberEpoch is invalid."),
    ]
    for request, message in invalid:
        assert error_of(lambda r=request: coordinator.consumer.heartbeat(r)) == (E.INVALID_REQUEST, message)
    code, message = error_of(lambda: hb(coordinator, "m", 0, ["t1"], server_assignor="sticky"))
    assert code == E.UNSUPPORTED_ASSIGNOR
    assert message == "ServerAssignor sticky is not supported. Supported assignors: uniform, range."
    assert error_of(lambda: hb(coordinator, "m", 1))[0] == E.GROUP_ID_NOT_FOUND
    a = hb(coordinator, "a", 0, ["t1"], server_assignor="range")
    assert coordinator.consumer.assignor_name(coordinator.consumer.groups["g"]) == "range"
    assert error_of(lambda: hb(coordinator, "x", 1))[0] == E.UNKNOWN_MEMBER_ID
    assert error_of(lambda: hb(coordinator, "a", 5))[0] == E.FENCED_MEMBER_EPOCH
    # The previous epoch with a subset of the assignment is accepted (the response moving it on was lost).
    assert a.member_epoch == 1 and hb(coordinator, "a", 0, ["t1"]).member_epoch == 1
    hb(coordinator, "b", 0, ["t1"])
    code, message = error_of(lambda: hb(coordinator, "c", 0, ["t1"]))
    assert (code, message) == (E.GROUP_MAX_SIZE_REACHED,
                               "The consumer group has reached its maximum capacity of 2 members.")


async def test_a_classic_group_with_members_is_not_a_consumer_group():
    coordinator = make()
    coordinator.join_group(JoinRequest("g", "", None, "c", "/h", 10000, 10000, "consumer", [("range", b"")], 3))
    assert coordinator.groups["g"].members
    # Only a join (epoch 0) may upgrade it (tests/unit/test_group_migration_conversion.py).
    assert error_of(lambda: hb(coordinator, "m", 3)) == (E.GROUP_ID_NOT_FOUND, "Group g is not a consumer group.")
    # An empty consumer group becomes a classic group with its offsets.
    log = MemoryLog()
    other = make(log)
    a = hb(other, "m", 0, ["t1"])
    await other.offset_manager.commit_offsets("g", "m", None, a.member_epoch, -1,
                                              [OffsetCommitEntry("t1", 0, 5, -1, None)], 9)
    hb(other, "m", -1)
    joined = other.join_group(JoinRequest("g", "", None, "c", "/h", 10000, 10000, "consumer", [("range", b"")], 3))
    assert joined.result is None and len(other.groups["g"].members) == 1  # waiting out the rebalance delay
    assert "g" not in other.consumer.groups and other.groups["g"].offsets[("t1", 0)].offset == 5
    reloaded = make(log)
    assert "g" not in reloaded.consumer.groups and reloaded.groups["g"].offsets[("t1", 0)].offset == 5


@pytest.mark.parametrize("policy, protocol_type, consumer_max_size, reason", [
    ("disabled", "consumer", 10, "online upgrade is disabled."),
    ("downgrade", "consumer", 10, "online upgrade is disabled."),
    ("upgrade", "connect", 10, "the group does not use the consumer embedded protocol."),
    ("bidirectional", "connect", 10, "the group does not use the consumer embedded protocol."),
    ("bidirectional", "consumer", 1, "the group size exceeds the consumer group maximum size."),
])
async def test_an_online_upgrade_the_policy_or_the_group_forbids_is_refused_with_kafkas_reason(
        policy, protocol_type, consumer_max_size, reason):
    coordinator = make(consumer_migration_policy=policy, consumer_max_size=consumer_max_size)
    for client in ("c1", "c2"):
        coordinator.join_group(JoinRequest("g", "", None, client, "/h", 10000, 10000, protocol_type,
                                           [("range", b"")], 3))
    assert len(coordinator.groups["g"].members) == 2
    assert error_of(lambda: hb(coordinator, "m", 0, ["t1"])) == (
        E.GROUP_ID_NOT_FOUND, f"Cannot upgrade classic group g to consumer group because {reason}")
    # The refused heartbeat leaves the classic group as it was.
    assert len(coordinator.groups["g"].members) == 2 and "g" not in coordinator.consumer.groups


async def test_a_classic_member_joining_a_full_consumer_group_is_told_the_group_is_full():
    coordinator = make(consumer_max_size=1)
    hb(coordinator, "m", 0, ["t1"])
    full = coordinator.join_group(JoinRequest("g", "", None, "c", "/h", 10000, 10000, "consumer", [("range", b"")], 5))
    assert full.result is not None and full.result.error == E.GROUP_MAX_SIZE_REACHED
    assert list(coordinator.consumer.groups["g"].members) == ["m"] and "g" not in coordinator.groups


async def test_session_timeout_fences_a_silent_member(autojump_clock):
    coordinator = make()
    async with trio.open_nursery() as nursery:
        await nursery.start(coordinator.run)
        hb(coordinator, "a", 0, ["t1"])
        hb(coordinator, "b", 0, ["t1"])
        await trio.sleep(3)
        hb(coordinator, "b", 2, owned={})  # b heartbeats, a does not
        await trio.sleep(1.5)
        group = coordinator.consumer.groups["g"]
        assert list(group.members) == ["b"] and group.group_epoch == 3
        b = hb(coordinator, "b", 2, owned={})
        assert b.member_epoch == 3 and count(b.assignment) == 4
        nursery.cancel_scope.cancel()


async def test_a_member_that_does_not_revoke_in_time_is_fenced(autojump_clock):
    coordinator = make()
    async with trio.open_nursery() as nursery:
        await nursery.start(coordinator.run)
        a = hb(coordinator, "a", 0, ["t1"], rebalance_timeout_ms=1000)
        hb(coordinator, "b", 0, ["t1"])
        a = hb(coordinator, "a", 1, owned=as_owned(a.assignment))
        group = coordinator.consumer.groups["g"]
        assert group.members["a"].partitions_pending_revocation  # a is to revoke, and keeps heartbeating
        for _ in range(3):
            await trio.sleep(0.4)
            hb(coordinator, "b", 2, owned={})
            if "a" in group.members:
                hb(coordinator, "a", 1, owned={T1: [0, 1, 2, 3]})
        assert list(group.members) == ["b"]
        assert error_of(lambda: hb(coordinator, "a", 1, owned={T1: [0, 1, 2, 3]}))[0] == E.UNKNOWN_MEMBER_ID
        nursery.cancel_scope.cancel()


async def test_static_member_leaves_temporarily_and_comes_back():
    coordinator = make()
    a = hb(coordinator, "a", 0, ["t1"], instance_id="i1")
    assert hb(coordinator, "a", -2, instance_id="i1").member_epoch == -2
    group = coordinator.consumer.groups["g"]
    assert group.members["a"].member_epoch == -2 and group.static_members["i1"] == "a"
    back = hb(coordinator, "a2", 0, ["t1"], instance_id="i1")
    assert back.assignment == a.assignment and list(group.members) == ["a2"]
    assert group.group_epoch == 1  # the same subscription: no rebalance
    code, message = error_of(lambda: hb(coordinator, "a3", 0, ["t1"], instance_id="i1"))
    assert code == E.UNRELEASED_INSTANCE_ID
    assert message == ("Static member a3 with instance id i1 cannot join the group because the instance id is owned "
                       "by a2 member.")
    assert error_of(lambda: hb(coordinator, "zz", 1, instance_id="i1"))[0] == E.FENCED_INSTANCE_ID


async def test_new_partitions_and_regex_topics_bump_the_group_epoch():
    topics = Topics()
    coordinator = make(topics=topics)
    a = hb(coordinator, "a", 0, None, subscribed_topic_regex="t.*")
    assert a.member_epoch == 1 and count(a.assignment) == 6
    topics.topics["t3"] = TopicMetadata(uuid.UUID(int=3), "t3", 1)
    a = hb(coordinator, "a", 1, owned=as_owned(a.assignment))
    assert a.member_epoch == 2 and count(a.assignment) == 7
    topics.topics["t1"] = TopicMetadata(T1, "t1", 6)
    a = hb(coordinator, "a", 2, owned=as_owned(a.assignment))
    assert a.member_epoch == 3 and count(a.assignment) == 9
    assert coordinator.consumer.groups["g"].resolved_regular_expressions["t.*"].topics == {"t1", "t2", "t3"}
    assert error_of(lambda: hb(coordinator, "b", 0, None, subscribed_topic_regex="("))[0] == \
        E.INVALID_REGULAR_EXPRESSION
    # What Python's re takes and RE2 (Kafka's RE2/J) does not: refused as Kafka refuses it, and nothing written.
    for regex in ("t(?=1)", "(t)\\1", "(?<!x)t.*", "t.*+"):
        assert error_of(lambda r=regex: hb(coordinator, "b", 0, None, subscribed_topic_regex=r))[0] == \
            E.INVALID_REGULAR_EXPRESSION, regex
    assert set(coordinator.consumer.groups["g"].members) == {"a"}


async def test_offset_commit_and_fetch_check_the_member_epoch():
    coordinator = make()
    a = hb(coordinator, "a", 0, ["t1"])
    offsets = coordinator.offset_manager
    entry = [OffsetCommitEntry("t1", 0, 5, -1, None)]
    assert await offsets.commit_offsets("g", "a", None, a.member_epoch, -1, entry, 9) == [E.NONE]
    code, _ = await _commit_error(offsets, "g", "a", 7)
    assert code == E.STALE_MEMBER_EPOCH
    code, _ = await _commit_error(offsets, "g", "x", 1)
    assert code == E.UNKNOWN_MEMBER_ID
    assert offsets.fetch_offsets("g", [("t1", [0])], False, "a", 1)[0][1][0][1].offset == 5
    assert error_of(lambda: offsets.fetch_offsets("g", [("t1", [0])], False, "a", 3))[0] == E.STALE_MEMBER_EPOCH
    assert [g.group_type for g in coordinator.list_groups([], [])] == ["consumer"]
    assert coordinator.list_groups([], ["classic"]) == []
    assert coordinator.describe_group("g", 6).error == E.GROUP_ID_NOT_FOUND


async def test_transactional_offset_commits_check_a_consumer_protocol_members_epoch():
    coordinator = make()
    a = hb(coordinator, "a", 0, ["t1"])
    offsets = coordinator.offset_manager
    entry = [OffsetCommitEntry("t1", 0, 5, -1, None)]

    async def commit(member: str, epoch: int) -> list[ErrorCode]:
        return await offsets.commit_transactional_offsets("g", 7, 0, member, None, epoch, entry, 4)

    assert await commit("a", a.member_epoch) == [E.NONE]
    assert offsets.group_manager.groups["g"].pending_txn_offsets[7][("t1", 0)].offset == 5
    # The transactional API's own rule: without member id and generation nothing is checked.
    assert await commit("", -1) == [E.NONE]
    for member, epoch, code in [("a", a.member_epoch + 1, E.ILLEGAL_GENERATION), ("a", 0, E.ILLEGAL_GENERATION),
                                ("x", a.member_epoch, E.UNKNOWN_MEMBER_ID)]:
        assert (await error_of_async(commit(member, epoch)))[0] == code, (member, epoch)


async def error_of_async(call) -> tuple[ErrorCode, str | None]:
    with pytest.raises(KafkaError) as info:
        await call
    return info.value.code, info.value.message


async def _commit_error(offsets, group, member, epoch) -> tuple[ErrorCode, str | None]:
    with pytest.raises(KafkaError) as info:
        await offsets.commit_offsets(group, member, None, epoch, -1, [OffsetCommitEntry("t1", 0, 6, -1, None)], 9)
    return info.value.code, info.value.message


async def test_delete_groups_and_offsets_of_a_consumer_group():
    log = MemoryLog()
    coordinator = make(log)
    a = hb(coordinator, "a", 0, ["t1"])
    offsets = coordinator.offset_manager
    entries = [OffsetCommitEntry("t1", 0, 5, -1, None), OffsetCommitEntry("t2", 0, 3, -1, None)]
    assert await offsets.commit_offsets("g", "a", None, a.member_epoch, -1, entries, 9) == [E.NONE, E.NONE]
    assert offsets.delete_offsets("g", [("t1", [0]), ("t2", [0])]) == [
        ("t1", [(0, E.GROUP_SUBSCRIBED_TO_TOPIC)]), ("t2", [(0, E.NONE)])]
    assert coordinator.delete_groups(["g"]) == [("g", E.NON_EMPTY_GROUP)]
    hb(coordinator, "a", -1)
    assert coordinator.list_groups(["empty"], ["consumer"])[0].group_id == "g"
    assert coordinator.delete_groups(["g"]) == [("g", E.NONE)]
    assert "g" not in coordinator.consumer.groups and "g" not in coordinator.groups
    assert offsets.fetch_offsets("g", [("t1", [0])]) == [("t1", [(0, None)])]
    reloaded = make(log)
    assert reloaded.consumer.groups == {} and reloaded.groups == {}


async def test_a_compacted_partition_keeps_the_consumer_groups():
    log = MemoryLog()
    coordinator = make(log)
    a = hb(coordinator, "a", 0, None, subscribed_topic_regex="t1")
    hb(coordinator, "b", 0, ["t1", "t2"], instance_id="i")
    hb(coordinator, "a", 1, owned=as_owned(a.assignment))
    partition = coordinator.group_manager.partition_for("g")
    written = len(log.records[partition])
    log.compact(partition)
    assert len(log.records[partition]) < written
    before, after = coordinator.consumer.groups["g"], make(log).consumer.groups["g"]
    assert after.members == before.members and after.target_assignment == before.target_assignment
    assert after.resolved_regular_expressions == before.resolved_regular_expressions
    assert (after.group_epoch, after.target_assignment_epoch, after.metadata_hash) == (
        before.group_epoch, before.target_assignment_epoch, before.metadata_hash)


async def test_offsets_of_subscribed_topics_do_not_expire_and_an_empty_group_goes():
    clock = Clock()
    coordinator = make(clock=clock, offsets_retention_ms=1000)
    a = hb(coordinator, "a", 0, ["t1"])
    offsets = coordinator.offset_manager
    entries = [OffsetCommitEntry("t1", 0, 5, -1, None), OffsetCommitEntry("t2", 0, 3, -1, None)]
    await offsets.commit_offsets("g", "a", None, a.member_epoch, -1, entries, 9)
    clock.now += 2000
    assert offsets.cleanup_group_metadata() == 1  # t2's: the group does not subscribe to it
    assert list(coordinator.groups["g"].offsets) == [("t1", 0)]
    hb(coordinator, "a", -1)
    assert offsets.cleanup_group_metadata() == 1
    assert "g" not in coordinator.consumer.groups and "g" not in coordinator.groups
    # An empty consumer group that never committed goes too.
    hb(coordinator, "b", 0, ["t1"])
    hb(coordinator, "b", -1)
    offsets.cleanup_group_metadata()
    assert "g" not in coordinator.consumer.groups


def test_the_migration_policy_and_rebalance_protocols_are_read_as_kafka_validates_them():
    def read(**props: str) -> GroupCoordinatorConfig:
        properties = {k.replace("_", "."): v for k, v in props.items()}
        return GroupCoordinatorConfig.from_broker_config(
            BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:0", **properties}))

    default = read()
    assert (default.consumer_migration_policy, default.upgrade_enabled, default.downgrade_enabled) == (
        "bidirectional", True, True)
    assert default.rebalance_protocols == {"classic", "consumer", "streams"} and default.consumer_protocol_enabled
    upgrade = read(group_consumer_migration_policy="UPGRADE")
    assert (upgrade.upgrade_enabled, upgrade.downgrade_enabled) == (True, False)
    downgrade = read(group_consumer_migration_policy="Downgrade")
    assert (downgrade.upgrade_enabled, downgrade.downgrade_enabled) == (False, True)
    disabled = read(group_consumer_migration_policy="disabled")
    assert (disabled.upgrade_enabled, disabled.downgrade_enabled) == (False, False)
    classic_only = read(group_coordinator_rebalance_protocols="classic")
    assert classic_only.rebalance_protocols == {"classic"} and not classic_only.consumer_protocol_enabled
    with pytest.raises(ConfigError, match="group.consumer.migration.policy"):
        read(group_consumer_migration_policy="sideways")
    with pytest.raises(ConfigError, match="group.coordinator.rebalance.protocols"):
        read(group_coordinator_rebalance_protocols="classic,eager")
    with pytest.raises(ConfigError, match="group.coordinator.rebalance.protocols"):
        read(group_coordinator_rebalance_protocols="CLASSIC,consumer")
    with pytest.raises(ConfigError, match="Disabling the 'classic' protocol is not supported."):
        read(group_coordinator_rebalance_protocols="consumer")
    with pytest.raises(ConfigError, match="Empty list"):
        read(group_coordinator_rebalance_protocols=" ")
