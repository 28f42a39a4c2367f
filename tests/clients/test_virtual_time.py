"""Virtual time: a broker on a manual clock (`Broker(clock="manual")`) runs its timers on a clock the test advances,
so a session timeout, retention.ms, segment.ms or a transaction timeout passes in milliseconds of real time, and
exactly when the test says; and the clock-jump fault steps one broker's wall clock alone."""
from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from confluent_kafka import Producer
from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition
from kafka.protocol.consumer.group import JoinGroupRequest, SyncGroupRequest

import minikafka
from minikafka.control_client import ControlError
from minikafka.protocol.client_apis.messages import ConsumerGroupHeartbeatRequest
from minikafka.protocol.errors import ErrorCode as E
from tests.helpers import admin_create_topic, wait_until
from tests.raw_client import RawConnection

SESSION_TIMEOUT_MS = 30_000


@pytest.fixture
def manual_broker(tmp_path) -> Iterator[Callable[..., minikafka.Broker]]:
    """Starts brokers on a manual clock, with Kafka's properties (underscores for dots) over the handle's."""
    started: list[minikafka.Broker] = []

    def make(**properties: object) -> minikafka.Broker:
        base = tmp_path / f"broker-{len(started) + 1}"
        broker = minikafka.Broker(clock="manual", data_dir=base / "data", log_path=base / "broker.log",
                                  config={k.replace("_", "."): v for k, v in properties.items()})
        started.append(broker)
        return broker.start()

    yield make
    for broker in started:
        try:
            broker.kill()
        finally:
            broker.close()


def segment_bases(broker: minikafka.Broker, topic: str, partition: int = 0) -> list[int]:
    return sorted(int(p.name.split(".")[0]) for p in Path(broker.data_dir, f"{topic}-{partition}").glob("*.log"))


def produce_one_by_one(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=0)
    try:
        for value in values:
            producer.send(topic, value, partition=0).get(10)
    finally:
        producer.close()


def read_timestamps(bootstrap: str, topic: str, count: int) -> list[int]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False,
                             consumer_timeout_ms=10_000)
    try:
        consumer.assign([TopicPartition(topic, 0)])
        records = []
        for record in consumer:
            records.append(record)
            if len(records) == count:
                break
        assert len(records) == count, f"read {len(records)} of {count} records of {topic}"
        return [r.timestamp for r in records]
    finally:
        consumer.close()


def join_and_sync(raw: RawConnection, group: str) -> str:
    """A classic member joins alone (JoinGroup v3: its member id in one round trip), becomes leader and syncs its
    assignment: the group is Stable with it, its session timer running."""
    J = JoinGroupRequest[3]
    joined = raw.request(J(group_id=group, session_timeout_ms=SESSION_TIMEOUT_MS, rebalance_timeout_ms=60_000,
                           member_id="", protocol_type="consumer",
                           protocols=[J.JoinGroupRequestProtocol(name="range", metadata=b"m")]))
    assert joined.error_code == E.NONE and joined.leader == joined.member_id
    S = SyncGroupRequest[2]
    synced = raw.request(S(group_id=group, generation_id=joined.generation_id, member_id=joined.member_id,
                           assignments=[S.SyncGroupRequestAssignment(member_id=joined.member_id,
                                                                     assignment=b"")]))
    assert synced.error_code == E.NONE
    return joined.member_id


def test_a_member_that_stops_heartbeating_leaves_its_group_when_the_clock_passes_its_session_timeout(
        manual_broker):
    broker = manual_broker()
    with RawConnection(broker.bootstrap_servers) as raw:
        raw.find_coordinator("g")
        member_id = join_and_sync(raw, "g")
        group = broker.state.group("g")
        assert (group.state, [m.member_id for m in group.members]) == ("Stable", [member_id])

        # The member sends no heartbeat from here on. Short of its session timeout it stays in the group...
        broker.clock.advance(SESSION_TIMEOUT_MS - 15_000)
        group = broker.state.group("g")
        assert (group.state, [m.member_id for m in group.members]) == ("Stable", [member_id])

        # ... and once the clock passes it, the coordinator has expired it by the time advance returns.
        broker.clock.advance(15_001)
        group = broker.state.group("g")
        assert (group.state, group.members) == ("Empty", [])


def test_retention_ms_deletes_old_segments_when_the_clock_passes_it(manual_broker):
    broker = manual_broker(log_retention_check_interval_ms=10_000)
    admin_create_topic(broker.bootstrap_servers, "old", 1,
                       **{"retention.ms": "600000", "internal.segment.bytes": "1024"})
    produce_one_by_one(broker.bootstrap_servers, "old", [b"v%03d" % i + b"x" * 300 for i in range(12)])
    bases = segment_bases(broker, "old")
    assert len(bases) > 2 and broker.state.partition("old", 0).log_start_offset == 0

    broker.clock.advance(500_000)  # a retention check runs, but no record is older than retention.ms yet
    assert segment_bases(broker, "old") == bases
    assert broker.state.partition("old", 0).log_start_offset == 0

    # The next check finds every segment past retention.ms, the active one too (rolled first, as Kafka does):
    # the log is empty and starts at its end offset.
    broker.clock.advance(101_000)
    assert segment_bases(broker, "old") == [12]
    state = broker.state.partition("old", 0)
    assert (state.log_start_offset, state.high_watermark) == (12, 12)


def test_segment_ms_rolls_the_active_segment_when_the_clock_passes_it(manual_broker):
    broker = manual_broker(log_retention_check_interval_ms=10_000)
    admin_create_topic(broker.bootstrap_servers, "rolled", 1, **{"segment.ms": "600000"})
    produce_one_by_one(broker.bootstrap_servers, "rolled", [b"a", b"b", b"c"])
    broker.clock.advance(500_000)  # a check runs: the active segment is younger than segment.ms
    assert segment_bases(broker, "rolled") == [0]

    broker.clock.advance(101_000)  # the next check finds it older: it is rolled, the next append goes to the new one
    assert segment_bases(broker, "rolled") == [0, 3]
    produce_one_by_one(broker.bootstrap_servers, "rolled", [b"d"])
    assert segment_bases(broker, "rolled") == [0, 3]
    assert broker.state.partition("rolled", 0).high_watermark == 4


def test_an_open_transaction_is_aborted_when_the_clock_passes_its_timeout(manual_broker):
    broker = manual_broker(transaction_state_log_replication_factor=1, transaction_state_log_min_isr=1)
    admin_create_topic(broker.bootstrap_servers, "txn", 1)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": "slow",
                         "transaction.timeout.ms": 60_000})
    try:
        producer.init_transactions(30)
        producer.begin_transaction()
        for i in range(3):
            producer.produce("txn", value=b"open-%d" % i, partition=0)
        assert producer.flush(30) == 0
        broker.state.wait_for_offset("txn", 0, 3)
        assert broker.state.partition("txn", 0).last_stable_offset == 0  # the open transaction holds it

        # Past transaction.timeout.ms and the coordinator's check interval (10 s): the coordinator aborts it,
        # its abort marker is written, and the last stable offset moves past the marker.
        broker.clock.advance(60_000 + 10_000)
        assert broker.state.wait_for_offset("txn", 0, 4, offset="last_stable_offset", timeout=30) == 4
        assert broker.state.partition("txn", 0).high_watermark == 4
    finally:
        del producer


def test_log_append_time_comes_from_the_clock(manual_broker):
    broker = manual_broker()
    admin_create_topic(broker.bootstrap_servers, "stamped", 1, **{"message.timestamp.type": "LogAppendTime"})
    produce_one_by_one(broker.bootstrap_servers, "stamped", [b"before"])
    broker.clock.advance(300_000)
    earliest = broker.clock.now()
    assert earliest >= time.time() * 1000 + 290_000
    produce_one_by_one(broker.bootstrap_servers, "stamped", [b"after"])
    latest = broker.clock.now()
    before, after = read_timestamps(broker.bootstrap_servers, "stamped", 2)
    assert before < earliest - 299_000 and earliest <= after <= latest


def test_a_clock_jump_steps_one_brokers_wall_clock_and_clearing_it_steps_back(broker_factory):
    broker = broker_factory()
    admin_create_topic(broker.bootstrap_servers, "stepped", 1, **{"message.timestamp.type": "LogAppendTime"})
    hour_ms = 3_600_000
    jump = broker.faults.jump_clock(-hour_ms)
    assert jump.hits == 1 and jump.active
    assert [f for f in broker.faults.list() if f["kind"] == "clock-jump"] == [
        {"kind": "clock-jump", "id": jump.id, "ms": -hour_ms, "hits": 1}]
    real_before = time.time() * 1000
    produce_one_by_one(broker.bootstrap_servers, "stepped", [b"back"])
    real_after = time.time() * 1000
    jump.clear()
    assert jump.hits == 1 and not jump.active
    produce_one_by_one(broker.bootstrap_servers, "stepped", [b"now"])
    real_end = time.time() * 1000
    back, now = read_timestamps(broker.bootstrap_servers, "stepped", 2)
    assert real_before - hour_ms - 1 <= back <= real_after - hour_ms + 1  # from the stepped clock
    assert real_after - 1 <= now <= real_end + 1  # the clock back where it was


def test_a_manual_clock_is_for_tests_only(broker, tmp_path):
    with pytest.raises(ValueError, match="clock 'virtual'"):
        minikafka.Broker(clock="virtual")
    with pytest.raises(RuntimeError, match="system's clock"):
        broker.clock.advance(1000)
    with pytest.raises(ControlError, match="system's clock"):
        broker._control().call("clock.advance", ms=1000)
    assert broker._control().call("clock.now")["manual"] is False
    served = subprocess.run([sys.executable, "-m", "minikafka", "serve", "--clock", "manual", "--port", "0",
                             "--data-dir", str(tmp_path / "data")], capture_output=True, text=True, timeout=60)
    assert served.returncode == 2
    assert "--clock manual is for test harnesses" in served.stderr


def test_a_manual_clock_advances_forwards_only(manual_broker):
    broker = manual_broker()
    start = broker.clock.now()
    with pytest.raises(ValueError, match="forwards"):
        broker.clock.advance(-1)
    with pytest.raises(ControlError, match="forwards"):
        broker._control().call("clock.advance", ms=-1)
    assert broker.clock.advance(1_000_000) >= start + 1_000_000
    assert broker.clock.advanced_ms == 1_000_000


def minikafka_command(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "minikafka", *args], capture_output=True, text=True, timeout=60)


def test_the_command_line_reads_and_advances_the_clock_and_jumps_it(manual_broker):
    broker = manual_broker()
    advanced = minikafka_command("clock", "advance", "90000", "-b", broker.bootstrap_servers)
    assert advanced.returncode == 0, advanced.stderr
    assert "(manual clock, advanced 90000 ms)" in advanced.stdout
    assert int(advanced.stdout.split()[0]) >= time.time() * 1000 + 89_000
    jumped = minikafka_command("fault", "jump-clock", "--ms", "-100000", "-b", broker.bootstrap_servers)
    assert jumped.returncode == 0, jumped.stderr
    assert "wall clock stepped back by 100000 ms" in jumped.stdout
    now = minikafka_command("clock", "now", "-b", broker.bootstrap_servers)
    assert now.returncode == 0 and "advanced 90000 ms" in now.stdout
    assert int(now.stdout.split()[0]) <= time.time() * 1000 - 9_000  # 90 s on, 100 s back
    refused = minikafka_command("clock", "advance", "-5", "-b", broker.bootstrap_servers)
    assert refused.returncode == 1 and "forwards" in refused.stderr


def test_a_wait_at_the_broker_is_not_cut_short_by_an_advance(manual_broker):
    """The control API's waits are timed in real time: an advance while one waits does not time it out."""
    broker = manual_broker()
    admin_create_topic(broker.bootstrap_servers, "awaited", 1)
    control = broker._control().with_timeout(90)
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(control.call, "partition.wait", topic="awaited", partition=0, at_least=1,
                              timeout_ms=60_000)
        wait_until(lambda: broker._control().call("describe")["delayed_operations"] > 0,
                   message="the wait to be parked at the broker")
        broker.clock.advance(120_000)
        produce_one_by_one(broker.bootstrap_servers, "awaited", [b"v"])
        answer = waiting.result(timeout=90)
    assert (answer["reached"], answer["value"]) == (True, 1)


def test_a_consumer_protocol_member_is_fenced_when_the_clock_passes_its_session_timeout(manual_broker):
    broker = manual_broker()
    admin_create_topic(broker.bootstrap_servers, "t", 1)
    session_ms = 45_000  # group.consumer.session.timeout.ms
    R = ConsumerGroupHeartbeatRequest[1]
    with RawConnection(broker.bootstrap_servers) as raw:
        raw.find_coordinator("kip848")
        joined = raw.request(R(group_id="kip848", member_id="m-1", member_epoch=0, instance_id=None, rack_id=None,
                               rebalance_timeout_ms=60_000, subscribed_topic_names=["t"],
                               subscribed_topic_regex=None, server_assignor=None, topic_partitions=[]))
        assert joined.error_code == E.NONE and joined.member_epoch == 1
        group = broker.state.group("kip848")
        assert [m.member_id for m in group.members] == ["m-1"]

        broker.clock.advance(session_ms - 15_000)  # no heartbeat since: still a member
        assert [m.member_id for m in broker.state.group("kip848").members] == ["m-1"]

        broker.clock.advance(15_001)  # its session ran out: fenced and removed
        assert broker.state.group("kip848").members == []
        late = raw.request(R(group_id="kip848", member_id="m-1", member_epoch=1, instance_id=None, rack_id=None,
                             rebalance_timeout_ms=-1, subscribed_topic_names=None, subscribed_topic_regex=None,
                             server_assignor=None, topic_partitions=None))
        assert late.error_code == E.UNKNOWN_MEMBER_ID


def test_list_offsets_by_time_after_a_clock_step_back(broker_factory):
    """Records appended after the wall clock stepped back carry older LogAppendTimes than those before them; as in
    Kafka, a lookup by time finds the first record at or after the time, and the latest timestamp stays the
    largest."""
    broker = broker_factory()
    admin_create_topic(broker.bootstrap_servers, "stepped", 1, **{"message.timestamp.type": "LogAppendTime"})
    produce_one_by_one(broker.bootstrap_servers, "stepped", [b"before"])
    with broker.faults.jump_clock(-3_600_000):
        produce_one_by_one(broker.bootstrap_servers, "stepped", [b"stepped back"])
    produce_one_by_one(broker.bootstrap_servers, "stepped", [b"after"])
    first, back, after = read_timestamps(broker.bootstrap_servers, "stepped", 3)
    assert back < first - 3_500_000 and after > first  # a new producer and its connection take milliseconds
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers)
    try:
        tp = TopicPartition("stepped", 0)
        found = consumer.offsets_for_times({tp: back})[tp]
        assert (found.offset, found.timestamp) == (0, first)  # the first record at or after `back`
        found = consumer.offsets_for_times({tp: first + 1})[tp]
        assert (found.offset, found.timestamp) == (2, after)
    finally:
        consumer.close()


def test_the_group_coordinators_records_carry_the_clocks_time(manual_broker):
    broker = manual_broker()
    admin_create_topic(broker.bootstrap_servers, "t", 1)
    day_ms = 86_400_000
    broker.clock.advance(day_ms)
    floor = broker.clock.now()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id="dated", enable_auto_commit=False)
    try:
        consumer.assign([TopicPartition("t", 0)])
        consumer.commit({TopicPartition("t", 0): OffsetAndMetadata(0, "", -1)})
    finally:
        consumer.close()
    ceiling = broker.clock.now()
    reader = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest",
                           enable_auto_commit=False, consumer_timeout_ms=10_000)
    try:
        offsets = TopicPartition("__consumer_offsets", 0)  # offsets.topic.num.partitions=1 (the handle's)
        reader.assign([offsets])
        end = reader.end_offsets([offsets])[offsets]
        stamps = []
        for record in reader:
            stamps.append(record.timestamp)
            if record.offset >= end - 1:
                break
    finally:
        reader.close()
    assert stamps and all(floor <= ts <= ceiling for ts in stamps), (floor, stamps, ceiling)
    assert floor >= time.time() * 1000 + day_ms - 60_000


def test_a_live_consumer_loses_its_membership_to_an_advance_and_rejoins(manual_broker):
    """Client timers stay real: a kafka-python consumer heartbeating every second still misses the jump, is expired
    with the others' session timeouts, and rejoins under a new member id at its next heartbeat."""
    broker = manual_broker()
    admin_create_topic(broker.bootstrap_servers, "t", 1)
    consumer = KafkaConsumer("t", bootstrap_servers=broker.bootstrap_servers, group_id="live",
                             session_timeout_ms=10_000, heartbeat_interval_ms=1_000)
    try:
        # The topic's metadata before the first JoinGroup: kafka-python's leader assigns nothing of a topic it has
        # no metadata for yet, and the member then waits in a Stable group with no partition.
        consumer.topics()
        def joined() -> str | None:
            """The member id of the consumer once the group is Stable with it alone and it has its partition."""
            consumer.poll(timeout_ms=100)
            try:
                group = broker.state.group("live")
            except KeyError:  # the coordinator has not heard of the group yet
                return None
            members = [m.member_id for m in group.members]
            return members[0] if group.state == "Stable" and len(members) == 1 and consumer.assignment() else None

        def member_other_than(previous: str | None) -> str:
            found: list[str] = []

            def check() -> bool:
                member = joined()
                if member is not None and member != previous:
                    found.append(member)
                return bool(found)

            wait_until(check, message=f"the consumer to join its group (as another member than {previous})")
            return found[0]

        first = member_other_than(None)
        broker.clock.advance(10_001)
        # Expired by the time advance returns (the consumer may have rejoined already, under a new member id).
        assert first not in [m.member_id for m in broker.state.group("live").members]
        member_other_than(first)
        assert consumer.assignment() == {TopicPartition("t", 0)}
    finally:
        consumer.close()
