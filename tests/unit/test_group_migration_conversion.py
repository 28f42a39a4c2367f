"""Online migration between the classic and consumer protocols on the coordinator, with the records kept in memory:
a classic group upgraded by a ConsumerGroupHeartbeat (members keeping their assignments, then served through
JoinGroup/SyncGroup/Heartbeat/LeaveGroup with the server's assignment), downgraded back when its last consumer
protocol member leaves, and both conversions rebuilt the same from the records; plus the consumer protocol bytes."""
from __future__ import annotations

import struct

import pytest
import trio

from minikafka.broker.coordinator.group.consumer.consumer_group_member import MemberState
from minikafka.broker.coordinator.group.group import GroupState
from minikafka.broker.coordinator.group.group_coordinator import GroupCoordinator, JoinRequest
from minikafka.broker.coordinator.group.group_metadata_log import GroupMetadataKey, decode_key
from minikafka.broker.coordinator.group.offset_manager import OffsetCommitEntry
from minikafka.protocol.consumer_protocol import (
    parse_assignment,
    parse_subscription,
    serialize_assignment,
)
from minikafka.protocol.errors import ErrorCode
from tests.unit.test_consumer_group_coordinator import MemoryLog, count, error_of, hb, make

E = ErrorCode


def subscription(topics: list[str], owned: dict[str, list[int]] | None = None, version: int = 1) -> bytes:
    """A consumer protocol Subscription as a classic client writes it (v0: topics and user data; v1+ owned)."""
    out = struct.pack(">hi", version, len(topics))
    for topic in topics:
        out += struct.pack(">h", len(topic)) + topic.encode()
    out += struct.pack(">i", -1)
    if version >= 1:
        owned = owned or {}
        out += struct.pack(">i", len(owned))
        for topic, ps in owned.items():
            out += struct.pack(">h", len(topic)) + topic.encode() + struct.pack(">i", len(ps))
            out += b"".join(struct.pack(">i", p) for p in ps)
    return out


def join(coordinator: GroupCoordinator, member_id: str, client: str, owned: dict[str, list[int]] | None = None,
         api_version: int = 3, protocols: tuple[str, ...] = ("range", "roundrobin")):
    metadata = subscription(["t1", "t2"], owned)
    return coordinator.join_group(JoinRequest("g", member_id, None, client, "/h", 10000, 30000, "consumer",
                                              [(name, metadata) for name in protocols], api_version))


def sync(coordinator: GroupCoordinator, member_id: str, generation: int, assignments=()):
    return coordinator.sync_group("g", generation, member_id, None, "consumer", "range", list(assignments))


def classic_group_of_two(coordinator: GroupCoordinator) -> tuple[str, str]:
    """A stable classic group: a owns t1-0,1 and t2-0; b owns t1-2,3 and t2-1."""
    ja, jb = join(coordinator, "", "ca"), join(coordinator, "", "cb")
    for _ in range(3):  # the initial rebalance delay (0 here), prolonged once for the second member
        coordinator.timer.fire_due()
    assert ja.result is not None and jb.result is not None and ja.result.generation_id == 1
    a, b = ja.result.member_id, jb.result.member_id
    leader = a if ja.result.leader == a else b
    assignments = [(a, serialize_assignment({"t1": [0, 1], "t2": [0]}, 1)),
                   (b, serialize_assignment({"t1": [2, 3], "t2": [1]}, 1))]
    sync(coordinator, leader, 1, assignments)
    follower = sync(coordinator, b if leader == a else a, 1)
    assert follower.result is not None and follower.result.error == E.NONE
    assert coordinator.groups["g"].is_in(GroupState.STABLE)
    return a, b


def partitions_of(assignment_bytes: bytes) -> set[tuple[str, int]]:
    return {(t, p) for t, ps in parse_assignment(assignment_bytes).partitions.items() for p in ps}


def classic_rejoin(coordinator: GroupCoordinator, member_id: str, client: str) -> tuple[int, set[tuple[str, int]]]:
    """An eager classic member rejoins (owning nothing) and syncs: its generation and assigned partitions."""
    joined = join(coordinator, member_id, client)
    assert joined.result is not None and joined.result.error == E.NONE, joined.result
    assert (joined.result.protocol_type, joined.result.protocol_name, joined.result.leader) == (
        "consumer", "range", "")
    synced = sync(coordinator, member_id, joined.result.generation_id)
    assert synced.result is not None and synced.result.error == E.NONE, synced.result
    return joined.result.generation_id, partitions_of(synced.result.assignment)


async def test_upgrade_serve_classic_members_and_downgrade_with_the_records_replayed_alike():
    log = MemoryLog()
    coordinator = make(log, initial_rebalance_delay_ms=0)
    a, b = classic_group_of_two(coordinator)
    await coordinator.offset_manager.commit_offsets("g", a, None, 1, -1, [OffsetCommitEntry("t1", 0, 7, -1, None)],
                                                    8)

    # A consumer protocol member joins: the classic group becomes a consumer group, its members keep their
    # assignments at the classic generation, and the group epoch is bumped for the newcomer.
    m = hb(coordinator, "m", 0, ["t1", "t2"])
    group = coordinator.consumer.groups["g"]
    assert set(group.members) == {a, b, "m"} and group.group_epoch == 2
    member_a = group.members[a]
    assert (member_a.member_epoch, member_a.use_classic_protocol, count(member_a.assigned_partitions)) == (1, True, 3)
    assert member_a.classic_member_metadata is not None
    assert member_a.classic_member_metadata.session_timeout_ms == 10000
    assert m.assignment == {}  # every partition is still a classic member's
    assert coordinator.groups["g"].offsets[("t1", 0)].offset == 7 and not coordinator.groups["g"].members
    partition = coordinator.group_manager.partition_for("g")
    group_records = [(decode_key(k), v) for k, v in log.records[partition] if decode_key(k) is not None]
    assert (GroupMetadataKey("g"), None) in group_records  # the classic group's tombstone

    # The classic members are told to rejoin and get the server's assignment in their protocol's bytes.
    assert coordinator.heartbeat("g", 1, a, None) == E.REBALANCE_IN_PROGRESS
    assert coordinator.heartbeat("g", 0, a, None) == E.ILLEGAL_GENERATION
    generation_a, owned_a = classic_rejoin(coordinator, a, "ca")
    generation_b, owned_b = classic_rejoin(coordinator, b, "cb")
    assert generation_a == generation_b == 2
    assert coordinator.heartbeat("g", 2, a, None) == E.NONE
    m2 = hb(coordinator, "m", 2, owned={})
    owned_m = {(coordinator.consumer.describe_topics().topic_name(t), p)
               for t, ps in m2.assignment.items() for p in ps}
    everything = {("t1", p) for p in range(4)} | {("t2", p) for p in range(2)}
    assert owned_a | owned_b | owned_m == everything
    assert len(owned_a) + len(owned_b) + len(owned_m) == 6 and owned_m
    # Offsets commit with the classic generation, which is the member epoch now.
    await coordinator.offset_manager.commit_offsets("g", a, None, 2, -1, [OffsetCommitEntry("t1", 1, 3, -1, None)],
                                                    8)

    # Reloaded from the records: the same mixed group.
    reloaded = make(log, initial_rebalance_delay_ms=0)
    again = reloaded.consumer.groups["g"]
    assert set(again.members) == {a, b, "m"} and again.members[a] == coordinator.consumer.groups["g"].members[a]
    assert reloaded.groups["g"].offsets[("t1", 0)].offset == 7

    # The consumer protocol member leaves: the group is classic again, rebalancing, with the classic members.
    assert hb(coordinator, "m", -1).member_epoch == -1
    assert "g" not in coordinator.consumer.groups
    classic = coordinator.groups["g"]
    assert set(classic.members) == {a, b} and classic.is_in(GroupState.PREPARING_REBALANCE)
    # At the group epoch before the leave, so a classic member's generation still matches, then rejoins.
    assert classic.generation_id == 2 and classic.protocol_name == "range"
    assert classic.offsets[("t1", 1)].offset == 3
    assert coordinator.heartbeat("g", 2, a, None) == E.REBALANCE_IN_PROGRESS
    restored = make(log, initial_rebalance_delay_ms=0)
    assert "g" not in restored.consumer.groups
    stored = restored.groups["g"]
    assert set(stored.members) == {a, b} and stored.generation_id == 2 and stored.offsets[("t1", 1)].offset == 3
    # Each keeps its target assignment until the rebalance gives out m's partitions.
    assert partitions_of(stored.members[a].assignment) == owned_a
    assert partitions_of(stored.members[b].assignment) == owned_b


async def test_classic_members_rejoining_without_revoking_wait_and_a_leave_fences():
    coordinator = make(initial_rebalance_delay_ms=0)
    a, b = classic_group_of_two(coordinator)
    hb(coordinator, "m", 0, ["t1", "t2"])
    # A cooperative member rejoins still owning its partitions: it must revoke first, at its old epoch.
    owned = {"t1": [0, 1], "t2": [0]}
    joined = join(coordinator, a, "ca", owned)
    assert joined.result is not None and joined.result.generation_id == 1
    member = coordinator.consumer.groups["g"].members[a]
    assert member.state is MemberState.UNREVOKED_PARTITIONS
    synced = sync(coordinator, a, 1)
    assert synced.result is not None and synced.result.error == E.NONE
    assert coordinator.heartbeat("g", 1, a, None) == E.REBALANCE_IN_PROGRESS
    # A sync at a generation the group has moved past, from a member with nothing to revoke, must rejoin.
    assert sync(coordinator, b, 1).result.error == E.REBALANCE_IN_PROGRESS
    assert sync(coordinator, "nobody", 1).result.error == E.UNKNOWN_MEMBER_ID
    assert sync(coordinator, "m", 1).result.error == E.UNKNOWN_MEMBER_ID  # not a classic member
    # LeaveGroup fences the classic member; unknown members get UNKNOWN_MEMBER_ID each.
    top, results = coordinator.leave_group("g", [(b, None, "bye"), ("nobody", None, None)])
    assert top == E.NONE and results == [(b, None, E.NONE), ("nobody", None, E.UNKNOWN_MEMBER_ID)]
    assert set(coordinator.consumer.groups["g"].members) == {a, "m"}


async def test_new_classic_members_join_a_consumer_group_as_kafka_answers_them():
    coordinator = make(initial_rebalance_delay_ms=0)
    classic_group_of_two(coordinator)
    hb(coordinator, "m", 0, ["t1", "t2"])
    required = join(coordinator, "", "new", api_version=5)
    assert required.result is not None and required.result.error == E.MEMBER_ID_REQUIRED
    new_id = required.result.member_id
    assert new_id not in coordinator.consumer.groups["g"].members
    joined = join(coordinator, new_id, "new", api_version=5)
    assert joined.result is not None and joined.result.error == E.NONE
    assert coordinator.consumer.groups["g"].members[new_id].use_classic_protocol
    # A protocol the classic members do not all support, or another protocol type, is refused.
    other = join(coordinator, "", "x", protocols=("sticky",))
    assert other.result is not None and other.result.error == E.INCONSISTENT_GROUP_PROTOCOL


@pytest.mark.parametrize("policy, downgraded", [("bidirectional", True), ("downgrade", True), ("upgrade", False)])
async def test_the_downgrade_follows_the_migration_policy(policy, downgraded):
    coordinator = make(initial_rebalance_delay_ms=0, consumer_migration_policy="bidirectional")
    classic_group_of_two(coordinator)
    hb(coordinator, "m", 0, ["t1", "t2"])
    coordinator.config.consumer_migration_policy = policy
    hb(coordinator, "m", -1)
    assert ("g" not in coordinator.consumer.groups) is downgraded
    assert bool(coordinator.groups["g"].members) is downgraded


async def test_an_upgrade_of_a_group_with_malformed_or_custom_assignor_bytes_is_refused():
    coordinator = make(initial_rebalance_delay_ms=0)
    ja = coordinator.join_group(JoinRequest("g", "", None, "c", "/h", 10000, 30000, "consumer",
                                            [("range", b"\x00")], 3))
    for _ in range(3):
        coordinator.timer.fire_due()
    assert ja.result is not None
    assert error_of(lambda: hb(coordinator, "m", 0, ["t1"])) == (
        E.GROUP_ID_NOT_FOUND, "Cannot upgrade classic group g to consumer group because the embedded consumer "
                              "protocol is malformed.")
    assert coordinator.groups["g"].members and "g" not in coordinator.consumer.groups


def test_consumer_protocol_bytes():
    sub = parse_subscription(subscription(["a", "b"], {"a": [1, 2]}, version=1))
    assert (sub.version, sub.topics, sub.owned_partitions, sub.generation_id) == (1, ("a", "b"), {"a": (1, 2)}, -1)
    v0 = parse_subscription(subscription(["a"], version=0))
    assert v0.owned_partitions == {} and v0.user_data is None
    encoded = serialize_assignment({"b": [3, 1], "a": [0]}, 7)
    assert encoded[:2] == b"\x00\x03"  # capped at the latest version
    assert parse_assignment(encoded).partitions == {"a": (0,), "b": (1, 3)}
    assert encoded == (b"\x00\x03" + struct.pack(">i", 2) + b"\x00\x01a" + struct.pack(">ii", 1, 0)
                       + b"\x00\x01b" + struct.pack(">iii", 2, 1, 3) + struct.pack(">i", -1))
    with pytest.raises(ValueError):
        parse_subscription(b"\x00\x01\x00")


async def test_a_static_classic_member_joins_and_is_replaced_in_a_consumer_group():
    coordinator = make(initial_rebalance_delay_ms=0)
    classic_group_of_two(coordinator)
    hb(coordinator, "m", 0, ["t1", "t2"])

    def static_join(member_id: str):
        return coordinator.join_group(JoinRequest("g", member_id, "instance-1", "s", "/h", 10000, 30000, "consumer",
                                                  [("range", subscription(["t1"]))], 5))

    first = static_join("").result
    assert first is not None and first.error == E.NONE  # a static member needs no member id round trip
    group = coordinator.consumer.groups["g"]
    assert group.static_member("instance-1").member_id == first.member_id
    assert static_join("someone-else").result.error == E.FENCED_INSTANCE_ID
    # The instance restarts without its member id: a new member takes the old one's place.
    second = static_join("").result
    assert second is not None and second.error == E.NONE and second.member_id != first.member_id
    assert group.static_member("instance-1").member_id == second.member_id
    assert first.member_id not in group.members
    assert coordinator.heartbeat("g", first.generation_id, first.member_id, "instance-1") == E.FENCED_INSTANCE_ID


async def test_sync_group_answers_in_the_consumer_protocol_version_of_the_members_subscription():
    coordinator = make(initial_rebalance_delay_ms=0)
    hb(coordinator, "m", 0, ["t2"])
    for version in (0, 1, 3):
        metadata = subscription(["t1"], version=version)
        joined = coordinator.join_group(JoinRequest("g", "", None, f"v{version}", "/h", 10000, 30000, "consumer",
                                                    [("range", metadata)], 3)).result
        assert joined is not None and joined.error == E.NONE
        synced = sync(coordinator, joined.member_id, joined.generation_id).result
        assert synced is not None and synced.error == E.NONE
        assert synced.assignment[:2] == struct.pack(">h", version)
        assert {t for t, _p in partitions_of(synced.assignment)} <= {"t1"}


async def test_timeouts_fence_classic_members_by_their_own_session_and_a_fenced_last_consumer_member_downgrades(
        autojump_clock):
    coordinator = make(initial_rebalance_delay_ms=0)
    async with trio.open_nursery() as nursery:
        await nursery.start(coordinator.run)
        a, b = classic_group_of_two(coordinator)
        hb(coordinator, "m", 0, ["t1", "t2"])  # the consumer protocol's session timeout is 4 s here
        # The classic members heartbeat within their 10 s session timeout, m does not: m is fenced after 4 s,
        # and the group, with classic members only, is classic again.
        await trio.sleep(3)
        assert coordinator.heartbeat("g", 1, a, None) == E.REBALANCE_IN_PROGRESS
        assert coordinator.heartbeat("g", 1, b, None) == E.REBALANCE_IN_PROGRESS
        await trio.sleep(1.5)
        assert "g" not in coordinator.consumer.groups and set(coordinator.groups["g"].members) == {a, b}
        nursery.cancel_scope.cancel()

    # In a consumer group, a silent classic member goes after its own session timeout (10 s), not the group's.
    coordinator = make(initial_rebalance_delay_ms=0)
    async with trio.open_nursery() as nursery:
        await nursery.start(coordinator.run)
        a, b = classic_group_of_two(coordinator)
        hb(coordinator, "m", 0, ["t1", "t2"])
        for _ in range(3):
            await trio.sleep(3)
            hb(coordinator, "m", 2, owned={})
            assert coordinator.heartbeat("g", 1, a, None) == E.REBALANCE_IN_PROGRESS
        assert set(coordinator.consumer.groups["g"].members) == {a, b, "m"}  # b silent for 9 s: still in
        await trio.sleep(1.5)
        assert set(coordinator.consumer.groups["g"].members) == {a, "m"}  # and fenced at 10 s
        nursery.cancel_scope.cancel()


async def test_a_static_classic_member_replacing_the_last_consumer_protocol_member_downgrades_the_group():
    coordinator = make(initial_rebalance_delay_ms=0)
    a, b = classic_group_of_two(coordinator)
    hb(coordinator, "m", 0, ["t1", "t2"], instance_id="instance-1")
    target = coordinator.consumer.groups["g"].target_assignment_of("m")
    joined = coordinator.join_group(JoinRequest("g", "", "instance-1", "s", "/h", 10000, 30000, "consumer",
                                                [("range", subscription(["t1", "t2"]))], 5)).result
    assert joined is not None and joined.error == E.NONE
    # Only classic members are left: a stable classic group (the subscription is the same, so no rebalance) in
    # which the newcomer holds the replaced member's target assignment.
    assert "g" not in coordinator.consumer.groups
    classic = coordinator.groups["g"]
    assert set(classic.members) == {a, b, joined.member_id} and classic.is_in(GroupState.STABLE)
    assert classic.static_member_id("instance-1") == joined.member_id
    names = coordinator.consumer.describe_topics()
    assert partitions_of(classic.members[joined.member_id].assignment) == {
        (names.topic_name(t), p) for t, ps in target.items() for p in ps}
    assert joined.generation_id == classic.generation_id == 2
    synced = sync(coordinator, joined.member_id, joined.generation_id).result
    assert synced is not None and synced.error == E.NONE


@pytest.mark.parametrize("case", ["full", "static", "regex"])
async def test_an_upgrading_heartbeat_that_fails_leaves_the_classic_group_as_it_was(case):
    """The joining member's errors in the converted group (group full, its instance id owned by a classic member, an
    invalid regex) are Kafka's, and as Kafka discards such a conversion, nothing is written: the group stays
    classic with its generation and members."""
    log = MemoryLog()
    coordinator = make(log, initial_rebalance_delay_ms=0, consumer_max_size=2 if case == "full" else 10)
    if case == "static":
        joined = coordinator.join_group(JoinRequest("g", "", "i1", "c", "/h", 10000, 30000, "consumer",
                                                    [("range", subscription(["t1"]))], 5))
        for _ in range(3):
            coordinator.timer.fire_due()
        assert joined.result is not None and joined.result.error == E.NONE
        owner = joined.result.member_id
        sync(coordinator, owner, joined.result.generation_id)
    else:
        owner = None
        classic_group_of_two(coordinator)
    classic = coordinator.groups["g"]
    before = (classic.generation_id, set(classic.members), sum(map(len, log.records.values())))
    fields, expected = {
        "full": ({}, (E.GROUP_MAX_SIZE_REACHED, "The consumer group has reached its maximum capacity of 2 members.")),
        "static": ({"instance_id": "i1"}, (E.UNRELEASED_INSTANCE_ID, "Static member m with instance id i1 cannot join "
                                           f"the group because the instance id is owned by {owner} member.")),
        "regex": ({"subscribed_topic_regex": "t("}, (E.INVALID_REGULAR_EXPRESSION, None)),
    }[case]
    code, message = error_of(lambda: hb(coordinator, "m", 0, None if case == "regex" else ["t1"], **fields))
    assert code == expected[0] and (expected[1] is None or message == expected[1])
    if case == "regex":
        assert message.startswith("SubscribedTopicRegex `t(` is not a valid regular expression: ")
    assert "g" not in coordinator.consumer.groups and coordinator.groups["g"] is classic
    assert (classic.generation_id, set(classic.members), sum(map(len, log.records.values()))) == before
    assert classic.is_in(GroupState.STABLE)
