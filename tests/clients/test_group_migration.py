"""Classic and consumer rebalance protocols side by side on a real broker: what group.coordinator.rebalance.protocols
and group.consumer.migration.policy permit, and the errors Kafka 4.1 gives when they forbid a client's protocol."""
from __future__ import annotations

import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError
from kafka import KafkaConsumer, KafkaProducer
from kafka.errors import CommitFailedError
from kafka.errors import KafkaError as KafkaPythonError
from kafka.protocol.admin.groups import DescribeGroupsRequest
from kafka.protocol.consumer.group import JoinGroupRequest

import minikafka
from minikafka.protocol.client_apis.messages import ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest
from minikafka.protocol.errors import ErrorCode as E
from tests.clients.test_consumer_group_protocol import (
    FAST_GROUPS,
    PARTITIONS,
    Member,
    coordinator,
    create_topic,
    describe,
    poll_until,
    produce,
)
from tests.helpers import wait_until
from tests.integration.test_cli_groups_consumer_protocol import cli, table
from tests.raw_client import RawConnection


def join_heartbeat(raw: RawConnection, group: str, topic: str, version: int = 1) -> object:
    """A new consumer-protocol member's first ConsumerGroupHeartbeat (epoch 0), as confluent-kafka sends it."""
    R = ConsumerGroupHeartbeatRequest[version]
    fields = dict(group_id=group, member_id=str(uuid.uuid4()), member_epoch=0, instance_id=None, rack_id=None,
                  rebalance_timeout_ms=30000, subscribed_topic_names=[topic], server_assignor=None,
                  topic_partitions=[])
    if version >= 1:
        fields["subscribed_topic_regex"] = None
    return raw.request(R(**fields))


def classic_join(raw: RawConnection, group: str, protocol_type: str) -> object:
    J = JoinGroupRequest[3]  # before v4 a member joins with an empty member id in one round trip
    return raw.request(J(group_id=group, session_timeout_ms=30000, rebalance_timeout_ms=30000, member_id="",
                         protocol_type=protocol_type,
                         protocols=[J.JoinGroupRequestProtocol(name="range", metadata=b"m")]))


def test_without_the_consumer_protocol_its_apis_answer_unsupported_version(broker_factory):
    broker = broker_factory(group_coordinator_rebalance_protocols="classic", group_initial_rebalance_delay_ms=0)
    with RawConnection(broker.bootstrap_servers) as raw:
        raw.find_coordinator("g")
        for version in (0, 1):
            response = join_heartbeat(raw, "g", "t", version)
            assert (response.error_code, response.error_message) == (E.UNSUPPORTED_VERSION, None)
        described = raw.request(ConsumerGroupDescribeRequest[1](group_ids=["g", "h"],
                                                                include_authorized_operations=False))
        assert [(g.group_id, g.error_code) for g in described.groups] == [
            ("g", E.UNSUPPORTED_VERSION), ("h", E.UNSUPPORTED_VERSION)]
        # The classic protocol is still served.
        joined = classic_join(raw, "g", "consumer")
        assert joined.error_code == E.NONE and joined.leader == joined.member_id


@pytest.mark.parametrize("policy, protocol_type, reason", [
    ("disabled", "consumer", "online upgrade is disabled."),
    ("downgrade", "consumer", "online upgrade is disabled."),
    ("upgrade", "connect", "the group does not use the consumer embedded protocol."),
])
def test_an_upgrade_the_policy_or_the_group_forbids_is_refused_and_the_classic_group_goes_on(
        broker_factory, policy, protocol_type, reason):
    broker = broker_factory(group_consumer_migration_policy=policy, group_initial_rebalance_delay_ms=0)
    with RawConnection(broker.bootstrap_servers) as raw:
        raw.find_coordinator("g")
        joined = classic_join(raw, "g", protocol_type)
        assert joined.error_code == E.NONE
        response = join_heartbeat(raw, "g", "t")
        assert (response.error_code, response.error_message) == (
            E.GROUP_ID_NOT_FOUND, f"Cannot upgrade classic group g to consumer group because {reason}")
        (group,) = raw.request(DescribeGroupsRequest[3](groups=["g"], include_authorized_operations=False)).groups
        assert (group.error_code, group.protocol_type) == (E.NONE, protocol_type)
        assert [m.member_id for m in group.members] == [joined.member_id]


def test_a_kafka_python_group_refuses_an_upgrade_when_the_policy_is_disabled_and_keeps_consuming(
        broker_factory, unique_topic):
    broker = broker_factory(group_consumer_migration_policy="disabled", group_initial_rebalance_delay_ms=0)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, acks="all")
    try:
        for i in range(10):
            producer.send(unique_topic, str(i).encode())
        producer.flush(30)
    finally:
        producer.close()
    consumer = KafkaConsumer(unique_topic, bootstrap_servers=broker.bootstrap_servers, group_id="g",
                             auto_offset_reset="earliest", enable_auto_commit=False)
    try:
        values: list[int] = []

        def consumed(count: int) -> bool:
            for records in consumer.poll(timeout_ms=200).values():
                values.extend(int(r.value) for r in records)
            return len(values) >= count

        wait_until(lambda: consumed(10), timeout=60, message="the first ten records")
        with RawConnection(broker.bootstrap_servers) as raw:
            raw.find_coordinator("g")
            response = join_heartbeat(raw, "g", unique_topic)
        assert (response.error_code, response.error_message) == (
            E.GROUP_ID_NOT_FOUND, "Cannot upgrade classic group g to consumer group because online upgrade is "
                                  "disabled.")
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, acks="all")
        try:
            for i in range(10, 20):
                producer.send(unique_topic, str(i).encode())
            producer.flush(30)
        finally:
            producer.close()
        wait_until(lambda: consumed(20), timeout=60, message="the next ten records")
        assert sorted(values) == list(range(20))
    finally:
        consumer.close()


@pytest.mark.parametrize("config, error", [
    ({"group.consumer.migration.policy": "disabled"}, E.GROUP_ID_NOT_FOUND),
    ({"group.coordinator.rebalance.protocols": "classic"}, E.UNSUPPORTED_VERSION),
])
def test_a_confluent_consumer_protocol_member_is_fatally_refused_where_kafka_refuses_it(
        broker_factory, unique_topic, config, error):
    broker = broker_factory(group_initial_rebalance_delay_ms=0, **{k.replace(".", "_"): v for k, v in config.items()})
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, acks="all")
    try:
        producer.send(unique_topic, b"0")
        producer.flush(30)
    finally:
        producer.close()
    classic = KafkaConsumer(unique_topic, bootstrap_servers=broker.bootstrap_servers, group_id="g",
                            auto_offset_reset="earliest", enable_auto_commit=False)
    consumer = None
    try:
        def assigned() -> bool:
            classic.poll(timeout_ms=200)
            return bool(classic.assignment())

        wait_until(assigned, timeout=60, message="the classic member's assignment")
        consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "g",
                             "group.protocol": "consumer", "auto.offset.reset": "earliest"})
        consumer.subscribe([unique_topic])
        deadline = time.monotonic() + 60
        while True:
            assert time.monotonic() < deadline, "no error from the consumer-protocol member"
            message = consumer.poll(0.5)
            classic.poll(timeout_ms=50)
            if message is not None and message.error() is not None:
                break
            assert message is None, "the consumer-protocol member was given records"
        # librdkafka stops the consumer on the heartbeat's error, as it does against Kafka; the classic member
        # keeps its partition.
        assert message.error().code() == KafkaError._FATAL
        assert f"ConsumerGroupHeartbeat fatal error: {KafkaError(error.value).str()}" in message.error().str()
        classic.poll(timeout_ms=50)
        assert {tp.partition for tp in classic.assignment()} == {0}
    finally:
        if consumer is not None:
            consumer.close()
        classic.close()


# ---- online migration with real clients ---------------------------------------------------------------------

FAST_CLASSIC = {"heartbeat_interval_ms": 500, "session_timeout_ms": 10000, "max_poll_interval_ms": 30000}
CLASSIC, CONSUMER = 0, 1  # ConsumerGroupDescribe v1's MemberType


class ClassicMember:
    """A kafka-python consumer of the group (the classic protocol), polled in its own thread as applications poll
    it. One thread polling several kafka-python consumers with short timeouts is not enough: kafka-python 3.0
    drops a JoinGroup/SyncGroup round that completed between two polls and joins again, and a leader that keeps
    missing its round rebalances the group without end."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        self.consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                      auto_offset_reset="earliest", enable_auto_commit=False, **FAST_CLASSIC)
        # The topic's metadata before the first JoinGroup: kafka-python's leader assigns nothing of a topic it has
        # no metadata for yet, and the group then stays Stable with the topic unassigned.
        self.consumer.topics()
        self.values: list[int] = []
        self.assigned: set[int] = set()
        self._error: Exception | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"classic-member-{group}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        """Consume and commit until closed; a commit refused by a rebalance leaves the records to be read again."""
        try:
            while not self._stop.is_set():
                batches = self.consumer.poll(timeout_ms=500)
                for records in batches.values():
                    self.values.extend(int(r.value) for r in records)
                if batches:
                    try:
                        self.consumer.commit()
                    except (CommitFailedError, KafkaPythonError):
                        pass
                self.assigned = {tp.partition for tp in self.consumer.assignment()}
        except Exception as exc:  # noqa: BLE001 - surfaced to the test by poll() and close()
            self._error = exc
        finally:
            self.consumer.close()

    def poll(self, timeout: float = 0.1) -> None:
        """The member's thread does the polling; the test's loop waits, and sees the thread's failure."""
        if self._error is not None:
            raise self._error
        time.sleep(timeout)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=60)
        assert not self._thread.is_alive(), "the classic member's thread did not stop"
        if self._error is not None:
            raise self._error


def settled(members: list) -> bool:
    """Every member owns partitions, and together they own each partition of the topic once."""
    owned = [m.assigned for m in members]
    return all(owned) and sum(map(len, owned)) == PARTITIONS and set().union(*owned) == set(range(PARTITIONS))


def consumed_all(members: list, count: int) -> bool:
    return set().union(*(m.values for m in members)) >= set(range(count))


def describe_classic(bootstrap: str, group: str) -> object:
    _node, address = coordinator(bootstrap, group)
    with RawConnection(address) as raw:
        (described,) = raw.request(DescribeGroupsRequest[5](groups=[group],
                                                            include_authorized_operations=False)).groups
    return described


def member_types(bootstrap: str, group: str) -> list[int]:
    return sorted(m.member_type for m in describe(bootstrap, group).members)


def test_a_classic_group_is_upgraded_member_by_member_and_downgraded_back(broker_factory, unique_topic):
    broker = broker_factory(group_initial_rebalance_delay_ms=0,
                            **{k.replace(".", "_"): v for k, v in FAST_GROUPS.items()})
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, unique_topic)
    group = f"g-{uuid.uuid4()}"
    produce(bootstrap, unique_topic, 40)
    classic = [ClassicMember(bootstrap, group, unique_topic) for _ in range(2)]
    upgraded: list[Member] = []
    everyone: list = list(classic)
    try:
        poll_until(everyone, lambda: settled(classic) and consumed_all(classic, 40),
                   what="the classic group to settle and consume")
        assert describe_classic(bootstrap, group).protocol_type == "consumer"
        produced = 40
        for joined in (1, 2):
            member = Member(bootstrap, group, unique_topic)
            upgraded.append(member)
            everyone.append(member)
            produce(bootstrap, unique_topic, 20, start=produced)
            produced += 20
            poll_until(everyone, lambda n=produced: settled(everyone) and consumed_all(everyone, n), timeout=90,
                       what=f"the group with {joined} consumer protocol member(s) to settle and consume")
            assert member_types(bootstrap, group) == [CLASSIC, CLASSIC] + [CONSUMER] * joined
        described = describe(bootstrap, group)
        assert described.error_code == E.NONE and described.group_state == "Stable"
        assert {m.member_epoch for m in described.members} == {described.group_epoch}
        # kafka-consumer-groups.sh's UPGRADED column, as `minikafka groups` prints it for a group in migration.
        rows = table(cli(bootstrap, "groups", "describe", "--group", group, "--members", "--verbose").stdout)
        assert {row["CONSUMER-ID"]: row["UPGRADED"] for row in rows} == {
            m.member_id: "true" if m.member_type == CONSUMER else "false" for m in described.members}
        classic_view = describe_classic(bootstrap, group)  # DescribeGroups describes classic groups only
        assert (classic_view.error_code, classic_view.group_state, classic_view.members) == (E.NONE, "Dead", [])

        # The consumer protocol members leave: with the last one the group is classic again, and rebalances.
        gone = [upgraded.pop(0)]
        gone[0].close()
        everyone = classic + upgraded
        poll_until(everyone, lambda: settled(everyone), timeout=90, what="the group to settle without the first")
        assert member_types(bootstrap, group) == [CLASSIC, CLASSIC, CONSUMER]
        gone.append(upgraded.pop())
        gone[-1].close()
        everyone = list(classic)
        wait_until(lambda: describe(bootstrap, group).error_code == E.GROUP_ID_NOT_FOUND, timeout=30,
                   message="the consumer group to be gone")
        assert describe(bootstrap, group).error_message == f"Group {group} is not a consumer group."
        produce(bootstrap, unique_topic, 20, start=produced)
        produced += 20
        # No record is lost over the conversions: what the members consumed together is everything produced.
        poll_until(everyone, lambda: settled(classic) and consumed_all(classic + gone, produced)
                   and describe_classic(bootstrap, group).group_state == "Stable", timeout=90,
                   what="the classic group to rebalance and consume")
        classic_view = describe_classic(bootstrap, group)
        assert (classic_view.error_code, classic_view.protocol_type) == (E.NONE, "consumer")
        assert len(classic_view.members) == 2 and classic_view.protocol_data == "range"
    finally:
        for member in upgraded:
            member.close()
        for member in classic:
            member.close()


def test_a_mixed_group_survives_a_coordinator_kill(tmp_path, unique_topic):
    """A classic group upgraded by a consumer protocol member, its coordinator killed (-9) on a 3-broker cluster:
    the new coordinator loads the mixed group from its records (classic members with their classic metadata), the
    members go on consuming, and the downgrade still happens there when the consumer protocol member leaves."""
    config = {**FAST_GROUPS, "group.initial.rebalance.delay.ms": 0}
    with minikafka.Cluster(brokers=3, data_dir=tmp_path / "cluster", config=config) as cluster:
        bootstrap = cluster.bootstrap_servers
        create_topic(bootstrap, unique_topic, replication=3)
        group = f"g-{uuid.uuid4()}"
        produce(bootstrap, unique_topic, 20)
        classic = [ClassicMember(bootstrap, group, unique_topic) for _ in range(2)]
        upgraded = Member(bootstrap, group, unique_topic)
        everyone: list = [*classic, upgraded]
        closed = False
        try:
            poll_until(everyone, lambda: settled(everyone) and consumed_all(everyone, 20), timeout=90,
                       what="the mixed group to settle and consume")
            before = describe(bootstrap, group)
            members = {(m.member_id, m.member_epoch, m.member_type) for m in before.members}
            assert sorted(t for _id, _epoch, t in members) == [CLASSIC, CLASSIC, CONSUMER]
            old, _address = coordinator(bootstrap, group)
            cluster.broker(old).kill()
            survivors = ",".join(b.bootstrap_servers for b in cluster.brokers if b.node_id != old)
            wait_until(lambda: coordinator(survivors, group)[0] != old, timeout=30, message="a new coordinator")
            produce(survivors, unique_topic, 20, start=20)
            poll_until(everyone, lambda: settled(everyone) and consumed_all(everyone, 40), timeout=90,
                       what="the members to consume through the new coordinator")
            after = describe(survivors, group)
            assert after.error_code == E.NONE and after.group_epoch == before.group_epoch
            assert {(m.member_id, m.member_epoch, m.member_type) for m in after.members} == members
            upgraded.close()
            closed = True
            everyone.remove(upgraded)
            wait_until(lambda: describe(survivors, group).error_code == E.GROUP_ID_NOT_FOUND, timeout=30,
                       message="the downgrade on the new coordinator")
            produce(survivors, unique_topic, 20, start=40)
            poll_until(classic, lambda: settled(classic) and consumed_all([*classic, upgraded], 60), timeout=90,
                       what="the classic group to rebalance and consume")
        finally:
            if not closed:
                upgraded.close()
            for member in classic:
                member.close()


def test_with_the_upgrade_policy_the_last_consumer_member_leaving_keeps_a_consumer_group(broker_factory,
                                                                                         unique_topic):
    """group.consumer.migration.policy=upgrade: classic members stay in the consumer group once the consumer
    protocol members are gone, still served through JoinGroup/SyncGroup/Heartbeat and consuming."""
    broker = broker_factory(group_initial_rebalance_delay_ms=0, group_consumer_migration_policy="upgrade",
                            **{k.replace(".", "_"): v for k, v in FAST_GROUPS.items()})
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, unique_topic)
    group = f"g-{uuid.uuid4()}"
    produce(bootstrap, unique_topic, 20)
    classic = [ClassicMember(bootstrap, group, unique_topic) for _ in range(2)]
    upgraded = Member(bootstrap, group, unique_topic)
    closed = False
    try:
        poll_until([*classic, upgraded], lambda: settled([*classic, upgraded]) and member_types(bootstrap, group) == [
            CLASSIC, CLASSIC, CONSUMER], timeout=90, what="the upgraded group to settle")
        upgraded.close()
        closed = True
        produce(bootstrap, unique_topic, 20, start=20)
        poll_until(classic, lambda: settled(classic) and consumed_all([*classic, upgraded], 40)
                   and member_types(bootstrap, group) == [CLASSIC, CLASSIC], timeout=90,
                   what="the classic members to take every partition in the consumer group")
        described = describe(bootstrap, group)
        assert described.error_code == E.NONE and len(described.members) == 2
    finally:
        if not closed:
            upgraded.close()
        for member in classic:
            member.close()


def test_a_new_classic_consumer_joins_a_consumer_group_in_migration(broker_factory, unique_topic):
    """A kafka-python consumer joining after the upgrade is a classic member of the consumer group from its first
    JoinGroup (MEMBER_ID_REQUIRED, then the join with its id), and gets its share of the partitions."""
    broker = broker_factory(group_initial_rebalance_delay_ms=0,
                            **{k.replace(".", "_"): v for k, v in FAST_GROUPS.items()})
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, unique_topic)
    group = f"g-{uuid.uuid4()}"
    produce(bootstrap, unique_topic, 20)
    first = ClassicMember(bootstrap, group, unique_topic)
    members: list = [first]
    try:
        poll_until(members, lambda: settled(members), what="the classic member's assignment")
        members.append(Member(bootstrap, group, unique_topic))
        poll_until(members, lambda: settled(members) and member_types(bootstrap, group) == [CLASSIC, CONSUMER],
                   timeout=90, what="the upgrade")
        members.append(ClassicMember(bootstrap, group, unique_topic))
        produce(bootstrap, unique_topic, 20, start=20)
        poll_until(members, lambda: settled(members) and consumed_all(members, 40)
                   and member_types(bootstrap, group) == [CLASSIC, CLASSIC, CONSUMER], timeout=90,
                   what="the new classic member to get partitions")
    finally:
        for member in members:
            member.close()
