"""Consumer groups as applications use them, with kafka-python, confluent-kafka and aiokafka consumers.

Every consumer is a real process (tests/group_worker.py) committing synchronously; the tests
account for every record across all members of a group.
"""
from __future__ import annotations

import pytest

from tests.group_worker import (
    GROUP_BROKER,
    LIBRARIES,
    GroupWorker,
    assert_exactly_once,
    committed_offsets,
    create_topic,
    produce,
    stop_all,
    wait_consumed,
    wait_members,
)

PARTITIONS = 6


@pytest.fixture
def workers():
    started: list[GroupWorker] = []
    yield started
    stop_all(started)


def start(workers, tmp_path, library, broker, topic, group, name, instance_id=None) -> GroupWorker:
    worker = GroupWorker(library, broker.bootstrap_servers, topic, group, tmp_path / f"{name}.out", instance_id)
    workers.append(worker)
    return worker


@pytest.mark.parametrize("library", LIBRARIES)
def test_three_consumers_share_six_partitions(library, broker_factory, unique_topic, tmp_path, workers):
    broker = broker_factory(**GROUP_BROKER)
    create_topic(broker.bootstrap_servers, unique_topic, PARTITIONS)
    members = [start(workers, tmp_path, library, broker, unique_topic, "share", f"w{i}") for i in range(3)]
    description = wait_members(broker, "share", 3, members)
    assert description["protocol_type"] == "consumer"
    expected = produce(broker.bootstrap_servers, unique_topic, "v", 600, PARTITIONS)
    wait_consumed(members, expected)
    assert_exactly_once(members, expected)
    owned = [w.partitions() for w in members]
    assert all(owned), f"a member got no partition: {owned}"
    assert set().union(*owned) == set(range(PARTITIONS))
    assert sum(len(p) for p in owned) == PARTITIONS, f"a partition was read by two members: {owned}"
    assert committed_offsets(broker.bootstrap_servers, "share") == {
        (unique_topic, p): 100 for p in range(PARTITIONS)}


@pytest.mark.parametrize("library", LIBRARIES)
def test_join_close_and_kill_each_rebalance_with_exactly_once_consumption(
        library, broker_factory, unique_topic, tmp_path, workers):
    broker = broker_factory(**GROUP_BROKER)
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, unique_topic, PARTITIONS)
    group = "changing"
    members = [start(workers, tmp_path, library, broker, unique_topic, group, f"w{i}") for i in range(3)]
    wait_members(broker, group, 3, members)
    expected = produce(bootstrap, unique_topic, "a", 300, PARTITIONS)
    wait_consumed(members, expected)

    # A fourth member joins: the group rebalances and it takes over some partitions.
    fourth = start(workers, tmp_path, library, broker, unique_topic, group, "w3")
    members.append(fourth)
    wait_members(broker, group, 4, members)
    batch = produce(bootstrap, unique_topic, "b", 300, PARTITIONS)
    expected |= batch
    wait_consumed(members, expected)
    assert {v for _, _, v in fourth.records()} and {v for _, _, v in fourth.records()} <= batch

    # One leaves cleanly: the others take its partitions at once.
    leaving = members[0]
    assert leaving.stop() == 0
    wait_members(broker, group, 3, members)
    batch = produce(bootstrap, unique_topic, "c", 300, PARTITIONS)
    expected |= batch
    wait_consumed(members, expected)
    assert not {v for _, _, v in leaving.records()} & batch

    # One is killed while idle: only its session timeout tells the coordinator.
    victim = members[1]
    victim.kill()
    wait_members(broker, group, 2, members, timeout=45)
    batch = produce(bootstrap, unique_topic, "d", 300, PARTITIONS)
    expected |= batch
    survivors = members[2:]
    wait_consumed(members, expected)
    assert {v for w in survivors for _, _, v in w.records()} >= batch
    assert {p for w in survivors for p, _, v in w.records() if v in batch} == set(range(PARTITIONS))
    assert_exactly_once(members, expected)
    assert committed_offsets(bootstrap, group) == {(unique_topic, p): 200 for p in range(PARTITIONS)}


@pytest.mark.parametrize("library", LIBRARIES)
def test_group_resumes_from_committed_offsets_across_consumer_and_broker_restarts(
        library, broker_factory, unique_topic, tmp_path, workers):
    broker = broker_factory(**GROUP_BROKER)
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, unique_topic, PARTITIONS)
    group = "resuming"
    rounds: list[GroupWorker] = []
    expected: set[str] = set()
    for phase, restart in enumerate([None, None, "clean", "kill -9"]):
        if restart == "clean":
            assert broker.stop() == 0
            broker.start()
        elif restart == "kill -9":
            broker.kill()
            broker.start()
        batch = produce(bootstrap, unique_topic, f"p{phase}", 120, PARTITIONS)
        expected |= batch
        worker = start(workers, tmp_path, library, broker, unique_topic, group, f"round{phase}")
        rounds.append(worker)
        wait_consumed(rounds, expected)
        # Each restarted consumer starts exactly where the group's committed offsets left off.
        assert {v for _, _, v in worker.records()} == batch, f"after restart={restart}"
        assert worker.stop() == 0
    assert_exactly_once(rounds, expected)
    assert committed_offsets(bootstrap, group) == {(unique_topic, p): 80 for p in range(PARTITIONS)}


@pytest.mark.parametrize("library", LIBRARIES)
def test_two_groups_on_one_topic_are_independent(library, broker_factory, unique_topic, tmp_path, workers):
    broker = broker_factory(**GROUP_BROKER)
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, unique_topic, PARTITIONS)
    first = start(workers, tmp_path, library, broker, unique_topic, "first", "first")
    second = start(workers, tmp_path, library, broker, unique_topic, "second", "second")
    expected = produce(bootstrap, unique_topic, "x", 120, PARTITIONS)
    wait_consumed([first], expected)
    wait_consumed([second], expected)
    assert_exactly_once([first], expected)
    assert_exactly_once([second], expected)

    # The first group stops; the second keeps consuming; the first's offsets do not move.
    assert first.stop() == 0
    more = produce(bootstrap, unique_topic, "y", 60, PARTITIONS)
    wait_consumed([second], expected | more)
    assert committed_offsets(bootstrap, "first") == {(unique_topic, p): 20 for p in range(PARTITIONS)}
    assert committed_offsets(bootstrap, "second") == {(unique_topic, p): 30 for p in range(PARTITIONS)}
    again = start(workers, tmp_path, library, broker, unique_topic, "first", "first-again")
    wait_consumed([again], more)
    assert {v for _, _, v in again.records()} == more


@pytest.mark.parametrize("library", LIBRARIES)
def test_static_member_restarting_within_its_session_keeps_its_place(
        library, broker_factory, unique_topic, tmp_path, workers):
    broker = broker_factory(**GROUP_BROKER)
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, unique_topic, PARTITIONS)
    group = "static"
    first = start(workers, tmp_path, library, broker, unique_topic, group, "i1-a", instance_id="i-1")
    other = start(workers, tmp_path, library, broker, unique_topic, group, "i2", instance_id="i-2")
    before = {m["group_instance_id"]: m["member_id"]
              for m in wait_members(broker, group, 2, workers)["members"]}
    expected = produce(bootstrap, unique_topic, "s", 120, PARTITIONS)
    wait_consumed([first, other], expected)
    partitions_of_other = other.partitions()

    first.kill()  # no LeaveGroup: the coordinator keeps instance i-1's place for its session timeout
    again = start(workers, tmp_path, library, broker, unique_topic, group, "i1-b", instance_id="i-1")
    batch = produce(bootstrap, unique_topic, "t", 120, PARTITIONS)
    expected |= batch
    wait_consumed([first, other, again], expected)
    after = {m["group_instance_id"]: m["member_id"]
             for m in wait_members(broker, group, 2, workers)["members"]}
    assert set(after) == {"i-1", "i-2"}
    assert after["i-1"] != before["i-1"], "the restarted instance must get a new member id"
    assert after["i-2"] == before["i-2"]
    assert other.partitions() == partitions_of_other, "the other member's assignment must not move"
    assert_exactly_once([first, other, again], expected)
