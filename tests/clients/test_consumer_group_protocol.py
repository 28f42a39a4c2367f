"""KIP-848 consumer groups with a real client: confluent-kafka consumers with group.protocol=consumer, the broker
assigning partitions through ConsumerGroupHeartbeat, on one broker and on a 3-broker cluster whose coordinator is
killed."""
from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
import uuid

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.admin.groups import DescribeGroupsRequest, ListGroupsRequest

import minikafka
from minikafka.protocol.client_apis.messages import ConsumerGroupDescribeRequest
from tests.helpers import wait_until
from tests.raw_client import RawConnection

PARTITIONS = 4
# Kafka's bounds allow a session timeout this short once the minimum is lowered with it; a member heartbeats
# every half second, so a killed one is noticed within a few seconds.
FAST_GROUPS = {
    "group.consumer.session.timeout.ms": 4000,
    "group.consumer.min.session.timeout.ms": 1000,
    "group.consumer.heartbeat.interval.ms": 500,
    "group.consumer.min.heartbeat.interval.ms": 100,
}


def create_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS, replication: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, replication)])[topic].result(30)


def produce(bootstrap: str, topic: str, count: int, start: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(start, start + count):
        producer.produce(topic, str(i).encode(), partition=i % PARTITIONS)
    assert producer.flush(30) == 0


class Member:
    """One consumer of the group, polled by the test; it records what it consumed and every assignment change."""

    def __init__(self, bootstrap: str, group: str, topic: str, **config: object) -> None:
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                                  "auto.offset.reset": "earliest", "enable.auto.commit": False, **config})
        self.values: list[int] = []
        self.revoked: set[int] = set()
        self.assigned: set[int] = set()
        self.consumer.subscribe([topic], on_assign=self._on_assign, on_revoke=self._on_revoke)

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.assigned |= {tp.partition for tp in partitions}

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.revoked |= {tp.partition for tp in partitions}
        self.assigned -= {tp.partition for tp in partitions}

    def poll(self, timeout: float = 0.1) -> None:
        """Consume a record and commit it; it counts as consumed once committed. A commit sent with the member
        epoch the coordinator has just moved past (a heartbeat's new epoch not yet seen by the client) is refused
        STALE_MEMBER_EPOCH, as Kafka refuses it: the record is read again and committed with the new epoch."""
        message = self.consumer.poll(timeout)
        if message is None or message.error() is not None:
            return
        try:
            self.consumer.commit(message, asynchronous=False)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.STALE_MEMBER_EPOCH:
                raise
            if message.partition() in self.assigned:
                self.consumer.seek(TopicPartition(message.topic(), message.partition(), message.offset()))
            return
        self.values.append(int(message.value()))

    def close(self) -> None:
        self.consumer.close()


def poll_until(members: list[Member], predicate, timeout: float = 60, what: str = "the condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        for member in members:
            member.poll()


def coordinator(bootstrap: str, group: str) -> tuple[int, str]:
    """The group's coordinator (node id, host:port), asked of the first broker of `bootstrap`."""
    from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest

    with RawConnection(bootstrap.split(",")[0]) as raw:
        response = raw.request(FindCoordinatorRequest[3](key=group, key_type=0))
    assert response.error_code == 0, response
    return response.node_id, f"{response.host}:{response.port}"


def describe(bootstrap: str, group: str) -> object:
    """ConsumerGroupDescribe v1 of the group, asked of its coordinator."""
    _node, address = coordinator(bootstrap, group)
    with RawConnection(address) as raw:
        response = raw.request(ConsumerGroupDescribeRequest[1](group_ids=[group],
                                                               include_authorized_operations=True))
    (described,) = response.groups
    return described


def test_members_share_partitions_and_move_them_without_stopping(broker_factory, unique_topic):
    broker = broker_factory(**FAST_GROUPS)
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, unique_topic)
    group = f"g-{uuid.uuid4()}"
    produce(bootstrap, unique_topic, 40)
    first = Member(bootstrap, group, unique_topic)
    try:
        poll_until([first], lambda: len(first.values) == 40, what="the first member to consume everything")
        assert first.assigned == set(range(PARTITIONS)) and not first.revoked
        described = describe(bootstrap, group)
        assert described.error_code == 0 and described.group_state == "Stable"
        assert described.assignor_name == "uniform"
        (member,) = described.members
        assert member.member_epoch == described.group_epoch == described.assignment_epoch
        assert sorted(p for t in member.assignment.topic_partitions for p in t.partitions) == list(range(PARTITIONS))
        assert member.assignment.topic_partitions[0].topic_name == unique_topic
        assert member.subscribed_topic_names == [unique_topic] and member.member_type == 1

        second = Member(bootstrap, group, unique_topic)
        try:
            poll_until([first, second], lambda: len(first.assigned) == 2 and len(second.assigned) == 2,
                       what="the partitions to be split")
            # Only what moved was revoked: the first member kept its other partitions all along.
            assert first.revoked == second.assigned and not first.assigned & second.assigned
            produce(bootstrap, unique_topic, 40, start=40)
            poll_until([first, second], lambda: len(first.values) + len(second.values) == 80,
                       what="both members to consume the new records")
            assert sorted(first.values + second.values) == list(range(80))
            assert {v % PARTITIONS for v in second.values} == second.assigned
            described = describe(bootstrap, group)
            assert described.group_state == "Stable" and len(described.members) == 2
        finally:
            second.close()
        # The second member left: its partitions come back to the first.
        poll_until([first], lambda: first.assigned == set(range(PARTITIONS)), what="the partitions to come back")
        produce(bootstrap, unique_topic, 8, start=80)
        poll_until([first], lambda: sorted(first.values)[-8:] == list(range(80, 88)),
                   what="the first member to consume every partition again")
        assert len(describe(bootstrap, group).members) == 1
    finally:
        first.close()


def test_committed_offsets_survive_and_a_new_member_resumes(broker, unique_topic):
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, unique_topic)
    group = f"g-{uuid.uuid4()}"
    produce(bootstrap, unique_topic, 20)
    member = Member(bootstrap, group, unique_topic)
    try:
        poll_until([member], lambda: len(member.values) == 20, what="the first member to consume")
    finally:
        member.close()
    assert describe(bootstrap, group).group_state == "Empty"
    _node, address = coordinator(bootstrap, group)
    with RawConnection(address) as raw:
        listed = raw.request(ListGroupsRequest[5](states_filter=["empty"], types_filter=["consumer"])).groups
        assert [(g.group_id, g.protocol_type, g.group_state, g.group_type) for g in listed] == [
            (group, "consumer", "Empty", "consumer")]
        assert raw.request(ListGroupsRequest[5](states_filter=[], types_filter=["classic"])).groups == []
        # DescribeGroups describes classic groups only, as Kafka.
        (described,) = raw.request(DescribeGroupsRequest[6](groups=[group], include_authorized_operations=False)
                                   ).groups
        assert (described.error_code, described.error_message, described.group_state) == (
            69, f"Group {group} is not a classic group.", "Dead")
    produce(bootstrap, unique_topic, 20, start=20)
    resumed = Member(bootstrap, group, unique_topic)
    try:
        poll_until([resumed], lambda: len(resumed.values) == 20, what="the new member to consume")
        # Nothing is read twice: the new member starts from the committed offsets.
        assert sorted(resumed.values) == list(range(20, 40))
        committed = resumed.consumer.committed([TopicPartition(unique_topic, p) for p in range(PARTITIONS)], 10)
        assert sum(tp.offset for tp in committed) == 40
    finally:
        resumed.close()


KILLED_MEMBER = textwrap.dedent("""
    import sys
    from confluent_kafka import Consumer
    consumer = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2], "group.protocol": "consumer",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([sys.argv[3]], on_assign=lambda c, ps: print("assigned", len(ps), flush=True))
    while True:
        consumer.poll(0.1)
""")


def test_a_killed_member_loses_its_partitions_after_the_session_timeout(broker_factory, unique_topic):
    broker = broker_factory(**FAST_GROUPS)
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, unique_topic)
    group = f"g-{uuid.uuid4()}"
    stays = Member(bootstrap, group, unique_topic)
    killed = subprocess.Popen([sys.executable, "-c", KILLED_MEMBER, bootstrap, group, unique_topic],
                              stdout=subprocess.PIPE, text=True)
    try:
        poll_until([stays], lambda: len(describe(bootstrap, group).members) == 2 and len(stays.assigned) == 2,
                   what="two members sharing the partitions")
        killed.send_signal(signal.SIGKILL)
        killed.wait(10)
        started = time.monotonic()
        poll_until([stays], lambda: len(stays.assigned) == PARTITIONS, timeout=30,
                   what="the killed member's partitions to move")
        # Not before the session timeout (4 s, less the time since the last heartbeat of the killed member).
        assert time.monotonic() - started > 2
        described = describe(bootstrap, group)
        assert len(described.members) == 1 and described.group_state == "Stable"
    finally:
        if killed.poll() is None:
            killed.kill()
            killed.wait()
        stays.close()


def test_consumer_group_describe_of_unknown_and_classic_groups(broker, unique_topic):
    bootstrap = broker.bootstrap_servers
    described = describe(bootstrap, "no-such-group")
    assert described.error_code == 69  # GROUP_ID_NOT_FOUND
    assert described.error_message == "Group no-such-group not found."


def test_the_group_survives_a_coordinator_kill(tmp_path, unique_topic):
    with minikafka.Cluster(brokers=3, data_dir=tmp_path / "cluster", config=FAST_GROUPS) as cluster:
        bootstrap = cluster.bootstrap_servers
        create_topic(bootstrap, unique_topic, replication=3)
        group = f"g-{uuid.uuid4()}"
        produce(bootstrap, unique_topic, 20)
        members = [Member(bootstrap, group, unique_topic) for _ in range(2)]
        try:
            poll_until(members, lambda: all(len(m.assigned) == 2 for m in members) and
                       sum(len(m.values) for m in members) == 20, what="the group to settle and consume")
            before = describe(bootstrap, group)
            epochs = {m.member_id: m.member_epoch for m in before.members}
            assigned = [set(m.assigned) for m in members]
            for member in members:
                member.revoked.clear()
            old, _address = coordinator(bootstrap, group)
            cluster.broker(old).kill()
            survivors = ",".join(b.bootstrap_servers for b in cluster.brokers if b.node_id != old)
            wait_until(lambda: coordinator(survivors, group)[0] != old, timeout=30, message="a new coordinator")
            produce(survivors, unique_topic, 20, start=20)
            poll_until(members, lambda: sum(len(m.values) for m in members) == 40,
                       what="the members to consume through the new coordinator")
            after = describe(survivors, group)
            # The same members at the same epochs: the new coordinator loaded the group from its records.
            assert {m.member_id: m.member_epoch for m in after.members} == epochs
            assert after.group_epoch == before.group_epoch
            # Nobody gave up a partition over the failover.
            assert [m.assigned for m in members] == assigned and not any(m.revoked for m in members)
        finally:
            for member in members:
                member.close()


def test_a_regex_subscription_follows_the_topics_it_matches(broker_factory, unique_topic):
    broker = broker_factory(**FAST_GROUPS)
    bootstrap = broker.bootstrap_servers
    prefix = unique_topic[:40]
    create_topic(bootstrap, f"{prefix}-a", 2)
    group = f"g-{uuid.uuid4()}"
    member = Member(bootstrap, group, f"^{prefix}-.*")
    try:
        poll_until([member], lambda: len(member.assigned) == 2, what="the matching topic's partitions")
        create_topic(bootstrap, f"{prefix}-b", 3)
        produce(bootstrap, f"{prefix}-b", 3)
        poll_until([member], lambda: len(member.values) == 3, what="the new topic to be consumed")
        (described,) = describe(bootstrap, group).members
        assert described.subscribed_topic_regex == f"(^{prefix}-.*)"  # as librdkafka joins its regexes
        assert sorted(t.topic_name for t in described.assignment.topic_partitions) == [f"{prefix}-a", f"{prefix}-b"]
    finally:
        member.close()


def test_a_consumer_protocol_member_commits_its_offsets_in_a_transaction(broker_factory, unique_topic):
    """send_offsets_to_transaction from a KIP-848 member: TxnOffsetCommit carries its member id and epoch, which
    the coordinator checks as Kafka's does, and the offsets count once the transaction commits."""
    broker = broker_factory(**{k.replace(".", "_"): v for k, v in FAST_GROUPS.items()})
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, unique_topic)
    produce(bootstrap, unique_topic, 20)
    group = f"g-{uuid.uuid4()}"
    member = Member(bootstrap, group, unique_topic)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"copier-{group}"})
    try:
        producer.init_transactions(30)
        poll_until([member], lambda: len(member.assigned) == PARTITIONS, what="the member's assignment")
        consumed: list = []
        deadline = time.monotonic() + 60
        while len(consumed) < 20:
            assert time.monotonic() < deadline, f"consumed {len(consumed)} of 20"
            message = member.consumer.poll(0.2)
            if message is not None and message.error() is None:
                consumed.append(message)
        producer.begin_transaction()
        positions = member.consumer.position([TopicPartition(unique_topic, p) for p in range(PARTITIONS)])
        producer.send_offsets_to_transaction(positions, member.consumer.consumer_group_metadata(), 30)
        producer.commit_transaction(30)
        committed = member.consumer.committed([TopicPartition(unique_topic, p) for p in range(PARTITIONS)], 30)
        assert {tp.partition: tp.offset for tp in committed} == {p: 5 for p in range(PARTITIONS)}
    finally:
        member.close()
