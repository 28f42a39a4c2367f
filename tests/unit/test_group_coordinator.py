"""The coordinator's protocol flows on a virtual clock, with records kept in memory and replayed."""
from __future__ import annotations

from collections import defaultdict

import pytest
import trio

from minikafka.broker.coordinator.coordinator_log import java_string_hashcode, partition_for
from minikafka.broker.coordinator.group.coordinator_timer import CoordinatorTimer
from minikafka.broker.coordinator.group.group import GroupState, OffsetAndMetadata
from minikafka.broker.coordinator.group.group_coordinator import GroupCoordinator, JoinRequest
from minikafka.broker.coordinator.group.group_coordinator_config import GroupCoordinatorConfig
from minikafka.broker.coordinator.group.group_metadata_log import (
    GroupMetadataKey,
    GroupMetadataLog,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    decode_key,
    decode_value,
    group_metadata_record,
    offset_commit_record,
)
from minikafka.broker.coordinator.group.offset_manager import OffsetCommitEntry
from minikafka.broker.replication.delayed_produce import produce_key
from minikafka.broker.replication.purgatory import Purgatory
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.protocol.internal_topics import GROUP_METADATA_TOPIC

E = ErrorCode
PROTOCOLS = [("range", b"meta-range"), ("roundrobin", b"meta-rr")]


class MemoryLog:
    """The coordinator's record log, in memory: what was appended is exactly what replay returns."""

    def __init__(self) -> None:
        self.records: dict[int, list[tuple[bytes, bytes | None]]] = defaultdict(list)
        self.fail_with: ErrorCode | None = None
        self.replication_fails_with: ErrorCode | None = None

    def append(self, partition, records, now_ms):
        if self.fail_with is not None:
            return self.fail_with
        self.records[partition].extend(records)
        return E.NONE

    def replay(self, partition):
        for key, value in self.records.get(partition, []):
            decoded = decode_key(key)
            yield decoded, decode_value(decoded, value)

    def compact(self, partition):
        """What the log cleaner leaves once tombstones are past delete.retention.ms: the latest record of each key,
        in its place."""
        records = self.records[partition]
        latest = {key: i for i, (key, _) in enumerate(records)}
        self.records[partition] = [(k, v) for i, (k, v) in enumerate(records) if latest[k] == i and v is not None]

    async def wait_replicated(self, partition):
        return self.replication_fails_with or E.NONE

    def decoded(self):
        return [(decode_key(k), v is None) for recs in self.records.values() for k, v in recs]


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000_000

    def __call__(self) -> int:
        return self.now


def make(log: MemoryLog | None = None, clock: Clock | None = None, **overrides) -> GroupCoordinator:
    config = GroupCoordinatorConfig(num_partitions=5, initial_rebalance_delay_ms=overrides.pop("delay", 0),
                               min_session_timeout_ms=1000, **overrides)
    coordinator = GroupCoordinator(config, log or MemoryLog(), clock or Clock())
    coordinator.load()
    return coordinator


def request(group="g", member_id="", version=5, instance=None, protocols=PROTOCOLS, protocol_type="consumer",
            session=10000, rebalance=20000, client_id="c"):
    return JoinRequest(group, member_id, instance, client_id, "/127.0.0.1", session, rebalance, protocol_type,
                       list(protocols), version)


async def join_new(coordinator, **kw):
    """JoinGroup v4+ as clients do it: get a member id, then join with it (returns the pending completion)."""
    first = coordinator.join_group(request(**kw)).result
    assert first.error == E.MEMBER_ID_REQUIRED and first.member_id.startswith("c-")
    kw["member_id"] = first.member_id
    return coordinator.join_group(request(**kw))


@pytest.fixture
async def running(nursery):
    started = []

    async def start(coordinator):
        await nursery.start(coordinator.run)
        started.append(coordinator)
        return coordinator
    yield start


def test_partition_is_kafkas_abs_hashcode_mod_partitions():
    assert java_string_hashcode("polygenelubricants") == -2**31
    assert partition_for("polygenelubricants", 50) == 0
    assert java_string_hashcode("my-group") == -1906497762
    assert partition_for("my-group", 50) == 1906497762 % 50


async def test_two_members_join_and_sync(running):
    coordinator = await running(make())
    a = await join_new(coordinator)
    b = await join_new(coordinator)
    ra, rb = await a.wait(), await b.wait()
    assert ra.error == rb.error == E.NONE and ra.generation_id == rb.generation_id == 1
    assert ra.leader == rb.leader == ra.member_id
    assert ra.protocol_name == "range" and [m[0] for m in ra.members] == [ra.member_id, rb.member_id]
    assert ra.members[0][2] == b"meta-range" and rb.members == []
    follower = coordinator.sync_group("g", 1, rb.member_id, None, "consumer", "range", [])
    assert not follower.done
    leader = coordinator.sync_group("g", 1, ra.member_id, None, "consumer", "range",
                                    [(ra.member_id, b"A"), (rb.member_id, b"B")])
    assert leader.result.assignment == b"A" and (await follower.wait()).assignment == b"B"
    assert coordinator.groups["g"].state is GroupState.STABLE
    assert coordinator.heartbeat("g", 1, rb.member_id, None) == E.NONE


async def stable_group(coordinator, n=2, **kw):
    pending = [await join_new(coordinator, **kw) for _ in range(n)]
    results = [await p.wait() for p in pending]
    generation = results[0].generation_id
    syncs = [coordinator.sync_group("g", generation, r.member_id, None, None, None,
                                    [(x.member_id, x.member_id.encode()) for x in results] if r.members else [])
             for r in results]
    for s in syncs:
        assert (await s.wait()).error == E.NONE
    return [r.member_id for r in results], generation


async def test_new_member_triggers_rebalance_signalled_by_heartbeat(running):
    coordinator = await running(make())
    (a, b), generation = await stable_group(coordinator)
    c = await join_new(coordinator)
    assert coordinator.groups["g"].state is GroupState.PREPARING_REBALANCE
    assert coordinator.heartbeat("g", generation, a, None) == E.REBALANCE_IN_PROGRESS
    ja = coordinator.join_group(request(member_id=a))
    jb = coordinator.join_group(request(member_id=b))
    results = [await j.wait() for j in (ja, jb, c)]
    assert {r.generation_id for r in results} == {generation + 1}
    assert len([r for r in results if r.members]) == 1 and len(results[0].members) == 3


async def test_session_timeout_removes_a_silent_member(running, autojump_clock):
    coordinator = await running(make())
    (a, b), generation = await stable_group(coordinator, session=3000)
    for _ in range(2):  # a keeps heartbeating, b is silent
        await trio.sleep(1)
        assert coordinator.heartbeat("g", generation, a, None) == E.NONE
    await trio.sleep(1.5)
    assert b not in coordinator.groups["g"].members
    assert coordinator.heartbeat("g", generation, a, None) == E.REBALANCE_IN_PROGRESS
    rejoin = await coordinator.join_group(request(member_id=a)).wait()
    assert rejoin.generation_id == generation + 1 and [m[0] for m in rejoin.members] == [a]


async def test_leave_group_rebalances_and_last_leave_empties(running):
    log = MemoryLog()
    coordinator = await running(make(log))
    (a, b), generation = await stable_group(coordinator)
    top, results = coordinator.leave_group("g", [(b, None, "bye"), ("nobody", None, None)])
    assert top == E.NONE and results == [(b, None, E.NONE), ("nobody", None, E.UNKNOWN_MEMBER_ID)]
    rejoin = await coordinator.join_group(request(member_id=a)).wait()
    assert rejoin.generation_id == generation + 1
    coordinator.leave_group("g", [(a, None, None)])
    group = coordinator.groups["g"]
    assert group.state is GroupState.EMPTY and group.generation_id == generation + 2
    assert coordinator.leave_group("missing", [(a, None, None)]) == (E.UNKNOWN_MEMBER_ID, [])


async def test_static_member_rejoin_replaces_member_id_without_rebalance(running):
    coordinator = await running(make())
    first = await coordinator.join_group(request(instance="i-1")).wait()
    assert first.error == E.NONE  # static members join without MEMBER_ID_REQUIRED
    coordinator.sync_group("g", first.generation_id, first.member_id, "i-1", None, None, [(first.member_id, b"X")])
    again = await coordinator.join_group(request(instance="i-1", version=7)).wait()
    assert again.error == E.NONE and again.member_id != first.member_id
    assert again.generation_id == first.generation_id  # no rebalance
    assert coordinator.heartbeat("g", first.generation_id, first.member_id, "i-1") == E.FENCED_INSTANCE_ID
    sync = coordinator.sync_group("g", again.generation_id, again.member_id, "i-1", None, None, [])
    assert sync.result.assignment == b"X"


@pytest.mark.parametrize("kw,expected", [
    ({"protocols": []}, E.INCONSISTENT_GROUP_PROTOCOL),
    ({"protocol_type": ""}, E.INCONSISTENT_GROUP_PROTOCOL),
    ({"session": 10}, E.INVALID_SESSION_TIMEOUT),
    ({"session": 10**9}, E.INVALID_SESSION_TIMEOUT),
    ({"group": ""}, E.INVALID_GROUP_ID),
    ({"member_id": "made-up"}, E.UNKNOWN_MEMBER_ID),
])
async def test_join_errors(running, kw, expected):
    coordinator = await running(make())
    result = await coordinator.join_group(request(**kw)).wait()
    assert result.error == expected
    assert "g" not in coordinator.groups


async def test_inconsistent_protocols_against_an_existing_group(running):
    coordinator = await running(make())
    (a, _b), generation = await stable_group(coordinator)
    other_type = coordinator.join_group(request(protocol_type="connect")).result
    assert other_type.error == E.INCONSISTENT_GROUP_PROTOCOL
    no_common = coordinator.join_group(request(protocols=[("sticky", b"")])).result
    assert no_common.error == E.INCONSISTENT_GROUP_PROTOCOL
    assert coordinator.heartbeat("g", generation - 1, a, None) == E.ILLEGAL_GENERATION
    assert coordinator.heartbeat("g", generation, "ghost", None) == E.UNKNOWN_MEMBER_ID
    assert coordinator.sync_group("g", generation, a, None, "connect", None, []).result.error == \
        E.INCONSISTENT_GROUP_PROTOCOL
    assert coordinator.sync_group("g", generation + 5, a, None, None, None, []).result.error == \
        E.ILLEGAL_GENERATION
    assert coordinator.groups["g"].state is GroupState.STABLE


async def test_offsets_commit_fetch_and_survive_replay(running):
    log = MemoryLog()
    coordinator = await running(make(log))
    offsets = coordinator.offset_manager
    (a, _b), generation = await stable_group(coordinator)
    entries = [OffsetCommitEntry("t", 0, 10, 3, "meta"), OffsetCommitEntry("t", 1, 20, -1, None),
               OffsetCommitEntry("t", 2, 30, -1, "x" * 5000)]
    errors = await offsets.commit_offsets("g", a, None, generation, -1, entries, 8)
    assert errors == [E.NONE, E.NONE, E.OFFSET_METADATA_TOO_LARGE]
    with pytest.raises(KafkaError) as stale:
        await offsets.commit_offsets("g", a, None, generation - 1, -1, entries[:1], 8)
    assert stale.value.code == E.ILLEGAL_GENERATION
    with pytest.raises(KafkaError) as unknown:
        await offsets.commit_offsets("g", "ghost", None, generation, -1, entries[:1], 8)
    assert unknown.value.code == E.UNKNOWN_MEMBER_ID
    with pytest.raises(KafkaError) as no_membership:
        await offsets.commit_offsets("g", "", None, -1, -1, entries[:1], 8)
    assert no_membership.value.code == E.UNKNOWN_MEMBER_ID
    # A simple (assign()-only) consumer commits to a group that does not exist yet.
    simple = [OffsetCommitEntry("t", 0, 7, -1, "")]
    assert await offsets.commit_offsets("simple", "", None, -1, -1, simple, 8) == [E.NONE]
    with pytest.raises(KafkaError) as missing:
        await offsets.commit_offsets("nope", "m", None, 3, -1, entries[:1], 9)
    assert missing.value.code == E.GROUP_ID_NOT_FOUND

    restarted = make(log)
    fetched = dict(restarted.offset_manager.fetch_offsets("g", [("t", [0, 1, 2])]))["t"]
    assert [(p, v.offset if v else None, v.leader_epoch if v else None, v.metadata if v else None)
            for p, v in fetched] == [(0, 10, 3, "meta"), (1, 20, -1, ""), (2, None, None, None)]
    assert restarted.groups["g"].state is GroupState.STABLE and restarted.groups["g"].generation_id == generation
    assert dict(restarted.offset_manager.fetch_offsets("simple", None))["t"][0][1].offset == 7
    assert restarted.offset_manager.fetch_offsets("unknown", [("t", [0])]) == [("t", [(0, None)])]


async def test_failed_append_changes_nothing(running):
    log = MemoryLog()
    coordinator = await running(make(log))
    offsets = coordinator.offset_manager
    await offsets.commit_offsets("s", "", None, -1, -1, [OffsetCommitEntry("t", 0, 5, -1, "")], 8)
    log.fail_with = E.NOT_COORDINATOR
    with pytest.raises(KafkaError) as failed:
        await offsets.commit_offsets("s", "", None, -1, -1, [OffsetCommitEntry("t", 0, 99, -1, "")], 8)
    assert failed.value.code == E.NOT_COORDINATOR
    assert dict(offsets.fetch_offsets("s", [("t", [0])]))["t"][0][1].offset == 5


async def test_offsets_whose_records_fail_to_replicate_are_taken_back(running):
    log = MemoryLog()
    coordinator = await running(make(log))
    offsets = coordinator.offset_manager
    await offsets.commit_offsets("s", "", None, -1, -1, [OffsetCommitEntry("t", 0, 5, -1, "")], 8)
    log.replication_fails_with = E.REQUEST_TIMED_OUT
    assert await offsets.commit_offsets("s", "", None, -1, -1, [OffsetCommitEntry("t", 0, 99, -1, ""),
                                                                OffsetCommitEntry("t", 1, 7, -1, "")], 8) == [
        E.REQUEST_TIMED_OUT, E.REQUEST_TIMED_OUT]
    fetched = dict(offsets.fetch_offsets("s", [("t", [0, 1])]))["t"]
    assert [(index, committed.offset if committed else None) for index, committed, *_ in fetched] == [
        (0, 5), (1, None)]


async def test_delete_groups_only_when_empty(running):
    log = MemoryLog()
    coordinator = await running(make(log))
    offsets = coordinator.offset_manager
    (a, b), generation = await stable_group(coordinator)
    await offsets.commit_offsets("g", a, None, generation, -1, [OffsetCommitEntry("t", 0, 1, -1, "")], 8)
    assert coordinator.delete_groups(["g", "missing", None]) == [
        ("g", E.NON_EMPTY_GROUP), ("missing", E.GROUP_ID_NOT_FOUND), (None, E.INVALID_GROUP_ID)]
    coordinator.leave_group("g", [(a, None, None), (b, None, None)])
    assert coordinator.delete_groups(["g"]) == [("g", E.NONE)]
    assert "g" not in coordinator.groups
    assert (OffsetCommitKey("g", "t", 0), True) in log.decoded() and (GroupMetadataKey("g"), True) in log.decoded()
    assert "g" not in make(log).groups


async def test_offset_delete(running):
    coordinator = await running(make())
    offsets = coordinator.offset_manager
    await offsets.commit_offsets("s", "", None, -1, -1, [OffsetCommitEntry("t", 0, 5, -1, ""),
                                                   OffsetCommitEntry("t", 1, 6, -1, "")], 8)
    assert offsets.delete_offsets("s", [("t", [0])]) == [("t", [(0, E.NONE)])]
    assert dict(offsets.fetch_offsets("s", None)) == {"t": [(1, coordinator.groups["s"].offsets[("t", 1)])]}
    with pytest.raises(KafkaError) as missing:
        offsets.delete_offsets("nope", [("t", [0])])
    assert missing.value.code == E.GROUP_ID_NOT_FOUND


async def test_offsets_of_empty_groups_expire_after_retention(running):
    log, clock = MemoryLog(), Clock()
    coordinator = await running(make(log, clock, offsets_retention_ms=60_000))
    offsets = coordinator.offset_manager
    await offsets.commit_offsets("s", "", None, -1, -1, [OffsetCommitEntry("t", 0, 5, -1, "")], 8)
    clock.now += 59_999
    assert offsets.cleanup_group_metadata() == 0 and "s" in coordinator.groups
    clock.now += 1
    assert offsets.cleanup_group_metadata() == 1 and "s" not in coordinator.groups
    assert "s" not in make(log, clock).groups


async def test_initial_rebalance_delay_waits_for_more_members(running, autojump_clock):
    coordinator = await running(make(delay=3000))
    a = await join_new(coordinator, rebalance=60000)
    await trio.sleep(2)
    b = await join_new(coordinator, rebalance=60000)
    await trio.sleep(2)
    assert not a.done  # the delay restarted when b arrived
    ra, rb = await a.wait(), await b.wait()
    assert ra.generation_id == rb.generation_id == 1 and len(ra.members) == 2


async def test_describe_and_list(running):
    coordinator = await running(make())
    (a, b), _ = await stable_group(coordinator)
    described = coordinator.describe_group("g", 5)
    assert described.state == "Stable" and described.protocol_data == "range"
    assert [(m.member_id, metadata) for m, metadata in described.members] == [(a, b"meta-range"), (b, b"meta-range")]
    assert coordinator.describe_group("missing", 5).state == "Dead"
    assert coordinator.describe_group("missing", 6).error == E.GROUP_ID_NOT_FOUND
    assert [g.group_id for g in coordinator.list_groups(["STABLE"], [])] == ["g"]
    assert coordinator.list_groups(["empty"], []) == []
    assert coordinator.list_groups([], ["consumer"]) == []


async def test_shutdown_answers_parked_requests_not_coordinator(running):
    coordinator = await running(make(delay=10_000))
    a = await join_new(coordinator)
    coordinator.shutdown()
    assert (await a.wait()).error == E.NOT_COORDINATOR
    assert coordinator.heartbeat("g", 0, "x", None) == E.COORDINATOR_NOT_AVAILABLE


async def test_timer_replaces_cancels_and_defers_zero_delay_reschedules(autojump_clock):
    timer = CoordinatorTimer()
    fired: list[str] = []
    timer.schedule("a", 100, lambda: fired.append("a-old"))
    timer.schedule("a", 300, lambda: fired.append("a"))
    timer.schedule("b", 200, lambda: fired.append("b"))
    timer.schedule("c", 50, lambda: fired.append("c"))
    timer.cancel("c")
    await trio.sleep(0.35)
    assert timer.fire_due() == 2 and fired == ["b", "a"]

    def again() -> None:
        fired.append("again")
        timer.schedule("z", 0, again)
    timer.schedule("z", 0, again)
    assert timer.fire_due() == 1 and timer.is_scheduled("z")  # a zero-delay reschedule runs on the next pass


async def test_a_compacted_log_rebuilds_the_groups_and_their_offsets(running):
    log = MemoryLog()
    coordinator = await running(make(log))
    offsets = coordinator.offset_manager
    (a, b), generation = await stable_group(coordinator)
    for i in range(50):
        await offsets.commit_offsets("g", a, None, generation, -1,
                                     [OffsetCommitEntry("t", p, i, -1, f"m{i}") for p in range(4)], 8)
    await offsets.commit_offsets("dead", "", None, -1, -1, [OffsetCommitEntry("t", 0, 1, -1, None)], 8)
    partition = coordinator.group_manager.partition_for("g")
    assert partition == coordinator.group_manager.partition_for("dead")
    assert coordinator.delete_groups(["dead"]) == [("dead", E.NONE)]
    log.compact(partition)
    assert len(log.records[partition]) == 5  # the group's metadata and its four offsets; "dead" left nothing
    restarted = make(log)
    assert restarted.groups["g"].generation_id == generation and set(restarted.groups["g"].members) == {a, b}
    assert "dead" not in restarted.groups
    assert [(p, v.offset, v.metadata) for p, v in dict(restarted.offset_manager.fetch_offsets("g", None))["t"]] == [
        (p, 49, "m49") for p in range(4)]


async def test_deleting_a_topic_removes_its_committed_offsets(running):
    log = MemoryLog()
    coordinator = await running(make(log))
    offsets = coordinator.offset_manager
    await offsets.commit_offsets("s", "", None, -1, -1, [OffsetCommitEntry("dead", 0, 5, -1, ""),
                                                   OffsetCommitEntry("kept", 0, 6, -1, "")], 8)
    assert offsets.on_topic_deleted("dead") == 1
    assert dict(offsets.fetch_offsets("s", None)).keys() == {"kept"}
    assert dict(make(log).offset_manager.fetch_offsets("s", None)).keys() == {"kept"}


def test_a_stored_group_with_inconsistent_members_still_loads():
    log = MemoryLog()
    twice = MemberMetadata("m-1", "same", "c", "/h", 1000, 1000, b"", b"")
    again = MemberMetadata("m-2", "same", "c", "/h", 1000, 1000, b"", b"")
    log.records[0].append(group_metadata_record("broken", GroupMetadataValue("consumer", 4, "range", "m-1", 1,
                                                                             [twice, again])))
    log.records[0].append(offset_commit_record("broken", "t", 0, OffsetAndMetadata(3, -1, "", 1)))
    coordinator = GroupCoordinator(GroupCoordinatorConfig(num_partitions=5), log, Clock())
    coordinator.load()
    group = coordinator.groups["broken"]
    assert group.state is GroupState.EMPTY and group.generation_id == 4 and group.members == {}
    assert group.offsets[("t", 0)].offset == 3


async def test_rebalance_waits_for_known_members_up_to_the_rebalance_timeout(running, autojump_clock):
    coordinator = await running(make())
    (a, b), generation = await stable_group(coordinator, rebalance=20000)
    c = await join_new(coordinator, rebalance=20000)
    ja = coordinator.join_group(request(member_id=a, rebalance=20000))
    for _ in range(19):  # b keeps its session alive but never rejoins
        await trio.sleep(1)
        assert coordinator.heartbeat("g", generation, b, None) == E.REBALANCE_IN_PROGRESS
        assert not ja.done
    await trio.sleep(1.5)
    ra, rc = ja.result, c.result
    assert ra.error == rc.error == E.NONE and ra.generation_id == generation + 1
    assert sorted(m[0] for m in ra.members + rc.members) == sorted([a, rc.member_id])
    assert coordinator.heartbeat("g", generation, b, None) == E.UNKNOWN_MEMBER_ID


async def test_group_max_size(running):
    coordinator = await running(make(max_size=1))
    first = await join_new(coordinator)
    assert (await first.wait()).error == E.NONE
    second = coordinator.join_group(request(version=3)).result
    assert second.error == E.GROUP_MAX_SIZE_REACHED
    assert len(coordinator.groups["g"].members) == 1


class ReplicatingPartition:
    """A leader of a __consumer_offsets partition whose followers catch up when the test says."""

    def __init__(self, log_end_offset: int) -> None:
        self.log = type("Log", (), {"log_end_offset": log_end_offset, "log_start_offset": 0})()
        self.high_watermark = 0
        self.is_leader = True

    def check_enough_replicas_reach_offset(self, required_offset):
        if not self.is_leader:
            return True, E.NOT_LEADER_OR_FOLLOWER
        return self.high_watermark >= required_offset, E.NONE


class ReplicaManagerWithOnePartition:
    def __init__(self, partition: ReplicatingPartition) -> None:
        self.partition = partition
        self.purgatory = Purgatory()

    def get_partition(self, topic, index):
        return self.partition if (topic, index) == (GROUP_METADATA_TOPIC, 0) else None

    def unhosted_error(self, tp):
        return E.NOT_LEADER_OR_FOLLOWER

    def replicate(self, high_watermark: int) -> None:
        self.partition.high_watermark = high_watermark
        self.purgatory.check_and_complete(produce_key((GROUP_METADATA_TOPIC, 0)))


async def test_writes_answer_once_the_isr_has_them(autojump_clock, nursery):
    partition = ReplicatingPartition(log_end_offset=3)
    replicas = ReplicaManagerWithOnePartition(partition)
    metadata_log = GroupMetadataLog(replicas, commit_timeout_ms=5000)
    answers = []

    async def wait():
        answers.append(await metadata_log.wait_replicated(0))
    nursery.start_soon(wait)
    await trio.sleep(1)
    assert answers == []
    replicas.replicate(3)
    await trio.sleep(1)
    assert answers == [E.NONE]
    assert await metadata_log.wait_replicated(1) == E.NOT_COORDINATOR

    partition.log.log_end_offset = 4
    start = trio.current_time()
    assert await metadata_log.wait_replicated(0) == E.COORDINATOR_NOT_AVAILABLE
    assert trio.current_time() - start == pytest.approx(5)
    partition.is_leader = False
    assert await metadata_log.wait_replicated(0) == E.NOT_COORDINATOR
