"""Groups of both protocols as the user sees them: `minikafka groups` (types, states, epochs and assignments in
kafka-consumer-groups.sh's columns), `state.group()` and `wait_for_group`, and `minikafka consume
--group-protocol consumer`, a KIP-848 member that splits partitions with another, hands them over when it leaves,
and commits offsets a later member resumes from. Real broker processes; confluent-kafka consumers with
group.protocol=consumer beside a kafka-python classic group."""
from __future__ import annotations

import signal
import subprocess
import sys
import uuid
from contextlib import ExitStack

import pytest
from confluent_kafka import Consumer
from kafka import KafkaConsumer, KafkaProducer
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest

import minikafka
from tests.helpers import wait_until
from tests.integration.test_cli_stopping import STOP_BOUND_S, Command, command
from tests.raw_client import RawConnection

WAIT_S = 60.0  # a budget for members to join and reconcile on a loaded machine, not an expectation
PARTITIONS = 4
# Short heartbeats, so that members learn of their new assignments within a second or so.
FAST_GROUPS = {
    "group.consumer.heartbeat.interval.ms": 500,
    "group.consumer.min.heartbeat.interval.ms": 100,
}


def cli(bootstrap: str, *args: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "minikafka", *args, "--bootstrap-server", bootstrap],
                          capture_output=True, timeout=WAIT_S)
    assert proc.returncode == 0, proc.stderr.decode()
    return proc


def table(stdout: bytes) -> list[dict[str, str]]:
    """The rows of a Kafka tool's table by column name: each cell is cut at its header's column, so that an empty
    cell (a member without an instance id) is kept."""
    lines = [line for line in stdout.decode().splitlines() if line.strip()]
    header = lines[0].replace("COORDINATOR (ID)", "COORDINATOR-(ID)")  # one column's name, of the same width
    names = header.split()
    starts = [header.index(f" {name} ") + 1 if i else 0 for i, name in enumerate(names[:-1])]
    starts.append(header.rindex(names[-1]))
    bounds = list(zip(starts, [*starts[1:], None], strict=True))
    return [{name.replace("-(ID)", " (ID)"): line[a:b].strip() for name, (a, b) in zip(names, bounds, strict=True)}
            for line in lines[1:]]


def produce(bootstrap: str, topic: str, start: int, count: int) -> None:
    """Values start..start+count-1, value v to partition v % PARTITIONS."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    try:
        for value in range(start, start + count):
            producer.send(topic, str(value).encode(), partition=value % PARTITIONS)
        producer.flush(WAIT_S)
    finally:
        producer.close()


def assignment_cell(partitions: list[tuple[str, int]]) -> str:
    topic = partitions[0][0]
    return f"{topic}:{','.join(str(p) for _t, p in partitions)}"


def test_groups_and_state_show_both_protocols(broker_factory, unique_topic):
    broker = broker_factory(**FAST_GROUPS)
    bootstrap = broker.bootstrap_servers
    topic = unique_topic
    broker.state.create_topic(topic, partitions=PARTITIONS)
    group, classic = f"g-{uuid.uuid4().hex[:8]}", f"classic-{uuid.uuid4().hex[:8]}"
    members = [Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                         "client.id": client_id, "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         **extra})
               for client_id, extra in (("cg-dynamic", {}), ("cg-static", {"group.instance.id": "static-1"}))]
    classic_member = KafkaConsumer(bootstrap_servers=bootstrap, group_id=classic, client_id="classic-client",
                                   auto_offset_reset="earliest", enable_auto_commit=False)
    consumed: dict[str, list[int]] = {"cg-dynamic": [], "cg-static": []}
    try:
        for member in members:
            member.subscribe([topic])
        classic_member.subscribe([topic])
        classic_member.topics()  # the topic's metadata before the first JoinGroup (see test_cli.py)

        def poll_all() -> None:
            for client_id, member in zip(consumed, members, strict=True):
                message = member.poll(0.05)
                if message is not None and message.error() is None:
                    consumed[client_id].append(int(message.value()))
            classic_member.poll(timeout_ms=50)

        def both_stable() -> bool:
            poll_all()
            try:
                state = broker.state.group(group)
            except KeyError:  # no member has joined yet, or the coordinator is still loading
                return False
            return (state.state == "Stable" and len(state.members) == 2
                    and all(len(m.assignment) == 2 for m in state.members)
                    and bool(classic_member.assignment()))

        wait_until(both_stable, WAIT_S, interval=0, message="two consumer-protocol members and a classic one")
        # Records only now: no partition moves while they are read, so each is read once, by its owner.
        produce(bootstrap, topic, 0, 8)
        wait_until(lambda: poll_all() or sum(map(len, consumed.values())) == 8, WAIT_S, interval=0,
                   message="the 8 records through the consumer group")
        for member in members:
            member.commit(asynchronous=False)

        # state.group(): the consumer protocol's view, from ConsumerGroupDescribe.
        state = broker.wait_for_group(group, state="Stable", members=2)
        assert (state.group_type, state.protocol_type, state.assignor) == ("consumer", "consumer", "uniform")
        assert state.group_epoch == state.assignment_epoch and state.group_epoch >= 2
        by_client = {m.client_id: m for m in state.members}
        assert sorted(by_client) == ["cg-dynamic", "cg-static"]
        assert by_client["cg-static"].group_instance_id == "static-1"
        assert by_client["cg-dynamic"].group_instance_id is None
        for member in state.members:
            assert member.member_epoch == state.group_epoch
            assert member.target_assignment == member.assignment and len(member.assignment) == 2
            # Each member read exactly the records of the partitions it owns.
            assert sorted(v % PARTITIONS for v in consumed[member.client_id]) == sorted(
                p for _t, p in member.assignment for _ in range(2))
        assert sorted(tp for m in state.members for tp in m.assignment) == [(topic, p) for p in range(PARTITIONS)]
        assert state.offsets == {(topic, p): 2 for p in range(PARTITIONS)}

        # ...and the classic one's, from DescribeGroups: no epochs, no target assignment.
        classic_state = broker.wait_for_group(classic, state="Stable", members=1)
        assert (classic_state.group_type, classic_state.group_epoch, classic_state.assignment_epoch) == (
            "classic", None, None)
        (classic_only,) = classic_state.members
        assert classic_only.client_id == "classic-client" and classic_only.member_epoch is None
        assert classic_only.target_assignment is None
        assert classic_only.assignment == [(topic, p) for p in range(PARTITIONS)]
        assert classic_state.assignor == classic_state.protocol != ""

        # groups list: every type, Kafka's type and state names, and the --type / --state filters.
        assert cli(bootstrap, "groups", "list").stdout.decode().split() == sorted([group, classic])
        rows = [line.split() for line in cli(bootstrap, "groups", "list", "--type", "--state").stdout.decode()
                .splitlines()]
        assert rows == [["GROUP", "TYPE", "STATE"], *sorted([[group, "Consumer", "Stable"],
                                                             [classic, "Classic", "Stable"]])]
        rows = [line.split() for line in cli(bootstrap, "groups", "list", "--type", "consumer").stdout.decode()
                .splitlines()]
        assert rows == [["GROUP", "TYPE"], [group, "Consumer"]]
        rows = [line.split() for line in cli(bootstrap, "groups", "list", "--state", "stable", "--type",
                                             "Classic").stdout.decode().splitlines()]
        assert rows == [["GROUP", "TYPE", "STATE"], [classic, "Classic", "Stable"]]
        assert cli(bootstrap, "groups", "list", "--state", "Empty").stdout.decode().split() == ["GROUP", "STATE"]

        # describe --members --verbose: kafka-consumer-groups.sh's consumer-group columns.
        described = cli(bootstrap, "groups", "describe", "--group", group, "--members", "--verbose").stdout
        assert described.decode().splitlines()[1].split() == [
            "GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "CURRENT-EPOCH",
            "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT"]
        expected = [{"GROUP": group, "CONSUMER-ID": m.member_id, "GROUP-INSTANCE-ID": m.group_instance_id or "",
                     "HOST": m.host, "CLIENT-ID": m.client_id, "#PARTITIONS": "2",
                     "CURRENT-EPOCH": str(m.member_epoch), "CURRENT-ASSIGNMENT": assignment_cell(m.assignment),
                     "TARGET-EPOCH": str(state.assignment_epoch),
                     "TARGET-ASSIGNMENT": assignment_cell(m.target_assignment or [])}
                    for m in state.members]
        assert sorted(table(described), key=str) == sorted(expected, key=str)
        assert {row["HOST"] for row in expected} == {"/127.0.0.1"}

        # describe --state --verbose: assignor, state, group epoch, target assignment epoch, member count.
        state_view = table(cli(bootstrap, "groups", "describe", "--group", group, "--state", "--verbose").stdout)
        assert state_view == [{"GROUP": group, "COORDINATOR (ID)": f"127.0.0.1:{broker.port}  (1)",
                               "ASSIGNMENT-STRATEGY": "uniform", "STATE": "Stable",
                               "GROUP-EPOCH": str(state.group_epoch),
                               "TARGET-ASSIGNMENT-EPOCH": str(state.assignment_epoch), "#MEMBERS": "2"}]

        # The offsets view: each partition's committed offset and lag, and the member that owns it.
        owner = {tp: m for m in state.members for tp in m.assignment}
        offsets_view = table(cli(bootstrap, "groups", "describe", "--group", group).stdout)
        assert sorted(offsets_view, key=lambda row: int(row["PARTITION"])) == [
            {"GROUP": group, "TOPIC": topic, "PARTITION": str(p), "CURRENT-OFFSET": "2", "LOG-END-OFFSET": "2",
             "LAG": "0", "CONSUMER-ID": owner[(topic, p)].member_id, "HOST": "/127.0.0.1",
             "CLIENT-ID": owner[(topic, p)].client_id}
            for p in range(PARTITIONS)]

        # The classic group keeps its own layout.
        classic_rows = cli(bootstrap, "groups", "describe", "--group", classic, "--members").stdout.decode()
        assert classic_rows.splitlines()[1].split() == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
        assert classic_rows.splitlines()[2].split()[3:] == ["classic-client", str(PARTITIONS)]

        # A wait that does not come true names what it saw.
        with pytest.raises(TimeoutError, match=r"group '.*' to be Empty with 0 member\(s\).*Stable with 2 member"):
            broker.wait_for_group(group, state="Empty", members=0, timeout=0.5)
        with pytest.raises(TimeoutError, match="unknown group 'no-such-group'"):
            broker.wait_for_group("no-such-group", state="Stable", timeout=0.5)
    finally:
        for member in members:
            member.close()
        classic_member.close()
    # The dynamic member left for good; the static one only for now (epoch -2): it keeps its place until its
    # session times out, as Kafka's coordinator keeps a static member's.
    remaining = broker.wait_for_group(group, members=1)
    assert [m.group_instance_id for m in remaining.members] == ["static-1"]


def lines_of(*commands: Command) -> list[int]:
    for running in commands:
        running.drain()
    return sorted(int(v) for running in commands for v in running.stdout.split())


def test_cli_consumers_split_hand_over_and_resume(broker_factory, unique_topic):
    broker = broker_factory(**FAST_GROUPS)
    bootstrap = broker.bootstrap_servers
    topic, group = unique_topic, f"cli-{uuid.uuid4().hex[:8]}"
    broker.state.create_topic(topic, partitions=PARTITIONS)
    produce(bootstrap, topic, 0, 20)
    consume = ("consume", "-t", topic, "-G", group, "--group-protocol", "consumer")
    everything = [(topic, p) for p in range(PARTITIONS)]
    with ExitStack() as stack:
        first = stack.enter_context(command(bootstrap, *consume))
        first.wait_for("the first member to print every record", lambda: len(lines_of(first)) == 20)
        alone = broker.wait_for_group(group, state="Stable", members=1)
        (first_member,) = alone.members
        assert first_member.assignment == everything and first_member.client_id == "minikafka-consume"
        assert first.stderr.decode().splitlines()[0] == (
            f"% Group {group} rebalanced: assigned: " + ", ".join(f"{topic} [{p}]" for p in range(PARTITIONS)))

        second = stack.enter_context(command(bootstrap, *consume))
        wait_until(lambda: (lambda s: len(s.members) == 2 and s.state == "Stable"
                            and all(len(m.assignment) == 2 for m in s.members))(broker.state.group(group)),
                   WAIT_S, message="the two members to split the partitions")
        split = broker.state.group(group)
        owned = {m.member_id: m.assignment for m in split.members}
        second_id = next(member_id for member_id in owned if member_id != first_member.member_id)
        assert sorted(owned[first_member.member_id] + owned[second_id]) == everything
        # The first member gave up what the second took, committing where it stood: the second read none of it.
        assert {(topic, p) for p in range(PARTITIONS)} - set(owned[first_member.member_id]) == set(owned[second_id])
        assert split.offsets == {tp: 5 for tp in owned[second_id]}
        assert split.member(second_id).member_epoch == split.group_epoch == first_member.member_epoch + 1
        first.wait_for("the revocation report", lambda: b"rebalanced: revoked: " in first.stderr)

        produce(bootstrap, topic, 20, 20)
        wait_until(lambda: lines_of(first, second) == list(range(40)), WAIT_S,
                   message="the two members to print the 20 new records between them")
        second_values = [int(v) for v in second.stdout.split()]
        assert {(topic, v % PARTITIONS) for v in second_values} == set(owned[second_id])
        assert sorted(second_values) == [v for v in range(20, 40) if (topic, v % PARTITIONS) in owned[second_id]]

        # The first leaves (SIGTERM): its partitions go to the second at once, from the offsets it committed.
        first.proc.send_signal(signal.SIGTERM)
        assert first.finish(STOP_BOUND_S) == 143
        assert first.stderr.decode().splitlines()[-1] == (
            f"% Consumed {20 + 20 - len(second_values)} messages from {topic} (stopped by SIGTERM)")
        wait_until(lambda: (lambda s: s.state == "Stable" and [m.member_id for m in s.members] == [second_id]
                            and s.members[0].assignment == everything)(broker.state.group(group)),
                   WAIT_S, message="the second member to own every partition")
        produce(bootstrap, topic, 40, 8)
        wait_until(lambda: lines_of(first, second) == list(range(48)), WAIT_S,
                   message="the second member to print the records of every partition")
        second.proc.send_signal(signal.SIGINT)
        assert second.finish(STOP_BOUND_S) == 130
    assert broker.wait_for_group(group, state="Empty", members=0).offsets == {tp: 12 for tp in everything}

    # A later member resumes from the committed offsets: only what came since.
    produce(bootstrap, topic, 48, 4)
    later = cli(bootstrap, *consume, "-e")
    assert sorted(int(v) for v in later.stdout.split()) == [48, 49, 50, 51]
    assert broker.state.committed_offsets(group) == {tp: 13 for tp in everything}


def test_a_cli_member_keeps_its_partitions_over_a_coordinator_kill(tmp_path, unique_topic):
    with minikafka.Cluster(brokers=3, data_dir=tmp_path / "cluster", config=FAST_GROUPS) as cluster:
        topic, group = unique_topic, f"cli-{uuid.uuid4().hex[:8]}"
        cluster.state.create_topic(topic, partitions=PARTITIONS, replication_factor=3)
        produce(cluster.bootstrap_servers, topic, 0, 20)
        with command(cluster.bootstrap_servers, "consume", "-t", topic, "-G", group, "--group-protocol",
                     "consumer") as member:
            member.wait_for("the member to print every record", lambda: len(lines_of(member)) == 20)
            before = cluster.wait_for_group(group, state="Stable", members=1)
            coordinator = cluster.broker(coordinator_of(cluster.bootstrap_servers, group))
            coordinator.kill()
            after = cluster.wait_for_group(group, state="Stable", members=1)
            # The new coordinator loaded the group from its records: the same member, epoch and partitions.
            assert after.members == before.members and after.group_epoch == before.group_epoch
            produce(cluster.bootstrap_servers, topic, 20, 20)
            wait_until(lambda: lines_of(member) == list(range(40)), WAIT_S,
                       message="the member to print the new records through the new coordinator")
            member.proc.send_signal(signal.SIGTERM)
            assert member.finish(STOP_BOUND_S) == 143
            assert member.stderr.decode().splitlines()[:-1] == [
                f"% Group {group} rebalanced: {what}: " + ", ".join(f"{topic} [{p}]" for p in range(PARTITIONS))
                for what in ("assigned", "revoked")], member.stderr
        left = cluster.wait_for_group(group, state="Empty", members=0)
        assert left.offsets == {(topic, p): 10 for p in range(PARTITIONS)}


def coordinator_of(bootstrap: str, group: str) -> int:
    """The node id of the group's coordinator (FindCoordinator)."""
    with RawConnection(bootstrap.split(",")[0]) as raw:
        response = raw.request(FindCoordinatorRequest[3](key=group, key_type=0))
    assert response.error_code == 0, response
    return response.node_id


def test_a_cli_member_fenced_for_its_silence_loses_its_partitions_and_joins_again(broker_factory, unique_topic):
    # A member silent past its session timeout is fenced: the coordinator gives its partitions to the other one.
    broker = broker_factory(**FAST_GROUPS, **{"group.consumer.session.timeout.ms": 2000,
                                              "group.consumer.min.session.timeout.ms": 1000})
    bootstrap = broker.bootstrap_servers
    topic, group = unique_topic, f"cli-{uuid.uuid4().hex[:8]}"
    broker.state.create_topic(topic, partitions=PARTITIONS)
    consume = ("consume", "-t", topic, "-G", group, "--group-protocol", "consumer")
    everything = [(topic, p) for p in range(PARTITIONS)]

    def split_between(count: int) -> bool:
        """The group stable with `count` members owning every partition, evenly."""
        try:
            state = broker.state.group(group)
        except KeyError:  # not created yet
            return False
        return (state.state == "Stable" and len(state.members) == count
                and sorted(tp for m in state.members for tp in m.assignment) == everything
                and all(len(m.assignment) == PARTITIONS // count for m in state.members))

    with command(bootstrap, *consume) as silent, command(bootstrap, *consume) as other:
        wait_until(lambda: split_between(2), WAIT_S, message="the two members to split the partitions")
        silent.proc.send_signal(signal.SIGSTOP)
        try:
            wait_until(lambda: split_between(1), WAIT_S, message="the silent member to be fenced")
        finally:
            silent.proc.send_signal(signal.SIGCONT)
        # Back, its next heartbeat is refused (fenced): it drops its partitions without committing and joins
        # again with epoch 0, and the coordinator splits the partitions again.
        silent.wait_for("the fenced member to report its lost partitions",
                        lambda: b"rebalanced: lost: " in silent.stderr)
        wait_until(lambda: split_between(2), WAIT_S, message="the fenced member to join again and take its share")
        produce(bootstrap, topic, 0, 20)
        wait_until(lambda: lines_of(silent, other) == list(range(20)), WAIT_S,
                   message="the two members to print the records between them, each once")
        for running in (silent, other):
            running.proc.send_signal(signal.SIGTERM)
            assert running.finish(STOP_BOUND_S) == 143
    assert broker.wait_for_group(group, state="Empty", members=0).offsets == {tp: 5 for tp in everything}
