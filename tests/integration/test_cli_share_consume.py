"""`minikafka share-consume` against real broker processes: two members of one share group print every record of a
two-partition topic exactly once between them (ACCEPT); a record printed with --release comes again, its delivery
count (-f %d) raised each time, until group.share.delivery.count.limit archives it;
--reject archives at once, so that a later run prints nothing; -c stops after that many records and the records
acquired but not printed go to the next run; a member follows its partition's leader when it moves; SIGINT stops it
(exit 130) out of the group with its share session closed; share.version 0 is told as UNSUPPORTED_VERSION."""
from __future__ import annotations

import signal
import subprocess
import sys

from confluent_kafka.admin import AdminClient, NewTopic

import minikafka
from tests.clients.test_share_fetch import set_group_config
from tests.helpers import admin_create_topic, produce_acked, wait_until
from tests.share_consumer import describe_share_group, set_share_version, share_start_offsets

WAIT_S = 120.0  # a bound for a command on a loaded machine, not an expectation
TOPIC = "orders"
GROUP = "workers"
# Heartbeats every half second, so that members get their partitions soon after the share state is initialized.
FAST_SHARE_GROUPS = {"group.share.heartbeat.interval.ms": 500, "group.share.min.heartbeat.interval.ms": 100}
# How long a member prints nothing before it stops: long enough for joining and the share state's initialization.
IDLE_MS = "8000"


def share_consume(bootstrap: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "minikafka", "share-consume", "-b", bootstrap, "-t", TOPIC,
                             "-G", GROUP, "--timeout-ms", IDLE_MS, *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def finished(proc: subprocess.Popen) -> list[bytes]:
    """The values a share-consume printed, once it exited 0."""
    try:
        out, err = proc.communicate(timeout=WAIT_S)
    finally:
        if proc.returncode is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err.decode()
    return out.splitlines()


def acknowledged_up_to(handle: minikafka.Broker | minikafka.Cluster, offsets: dict[int, int]) -> bool:
    """Whether each partition's share-partition starts at the offset given: every record before it acknowledged."""
    partitions = handle.state.share_group(GROUP).partitions
    return all((TOPIC, p) in partitions and partitions[(TOPIC, p)].start_offset == offset
               for p, offset in offsets.items())


def ready(broker: minikafka.Broker, count: int) -> list[bytes]:
    """A two-partition topic with `count` records, the group reading share-partitions from the earliest."""
    bootstrap = broker.bootstrap_servers
    admin_create_topic(bootstrap, TOPIC, 2)
    acked = produce_acked(bootstrap, TOPIC, count, partitions=2)
    assert len(acked) == count
    set_group_config([bootstrap], GROUP, "share.auto.offset.reset", "earliest")
    return sorted(acked.values())


def test_two_members_print_every_record_once(broker_factory) -> None:
    broker = broker_factory(**FAST_SHARE_GROUPS)
    values = ready(broker, 200)
    members = [share_consume(broker.bootstrap_servers) for _ in range(2)]
    printed = [finished(member) for member in members]
    assert sorted(printed[0] + printed[1]) == values
    assert describe_share_group(broker.bootstrap_servers, GROUP).members == []  # both left the group
    # Every record acknowledged: each share-partition starts past its last record.
    assert share_start_offsets(broker.bootstrap_servers, GROUP, TOPIC, 2) == {0: 100, 1: 100}
    # Every record was accepted: a new member gets none.
    assert finished(share_consume(broker.bootstrap_servers, "--timeout-ms", "3000")) == []


def deliveries(lines: list[bytes]) -> list[tuple[bytes, int]]:
    """(value, delivery count) of each line printed with -f '%s %d\\n'."""
    return [(value, int(count)) for value, count in (line.split(b" ") for line in lines)]


def test_release_delivers_again_until_the_delivery_count_limit(broker_factory) -> None:
    broker = broker_factory(**FAST_SHARE_GROUPS)
    values = ready(broker, 20)
    # One record printed and released: it is available again, delivered once; the others acquired with it were
    # released when the session closed.
    (released,) = deliveries(finished(share_consume(broker.bootstrap_servers, "--release", "-c", "1",
                                                    "-f", "%s %d\\n")))
    assert released[0] in values and released[1] == 1
    # Released until the limit (group.share.delivery.count.limit, 5): each record printed at deliveries 1 to 5, the
    # first released one from 2, then archived.
    printed = deliveries(finished(share_consume(broker.bootstrap_servers, "--release", "-f", "%s %d\\n")))
    by_value: dict[bytes, list[int]] = {}
    for value, count in printed:
        by_value.setdefault(value, []).append(count)
    assert sorted(by_value) == values
    assert by_value[released[0]] == [2, 3, 4, 5]  # its first delivery counted: kept when it was released
    assert all(counts == list(range(counts[0], 6)) and counts[0] in (1, 2) for counts in by_value.values())
    assert share_start_offsets(broker.bootstrap_servers, GROUP, TOPIC, 2) == {0: 10, 1: 10}  # all archived
    assert finished(share_consume(broker.bootstrap_servers, "--timeout-ms", "3000")) == []


def test_reject_archives(broker_factory) -> None:
    broker = broker_factory(**FAST_SHARE_GROUPS)
    values = ready(broker, 20)
    assert sorted(finished(share_consume(broker.bootstrap_servers, "--reject"))) == values
    assert share_start_offsets(broker.bootstrap_servers, GROUP, TOPIC, 2) == {0: 10, 1: 10}  # all archived
    assert finished(share_consume(broker.bootstrap_servers, "--timeout-ms", "3000")) == []


def test_count_stops_and_releases_the_rest(broker_factory) -> None:
    broker = broker_factory(**FAST_SHARE_GROUPS)
    values = ready(broker, 20)
    first = finished(share_consume(broker.bootstrap_servers, "-c", "5"))
    assert len(first) == 5 and set(first) <= set(values)
    rest = finished(share_consume(broker.bootstrap_servers))
    assert sorted(first + rest) == values


def test_share_version_0_is_unsupported_version(broker_factory) -> None:
    broker = broker_factory()
    admin_create_topic(broker.bootstrap_servers, TOPIC, 1)
    set_share_version(broker.bootstrap_servers, 0, 2)
    proc = share_consume(broker.bootstrap_servers)
    out, err = proc.communicate(timeout=WAIT_S)
    assert proc.returncode == 1 and out == b""
    assert err.decode().startswith("Error: UNSUPPORTED_VERSION: The version of API is not supported."), err.decode()


def test_a_moved_leader_is_followed(tmp_path) -> None:
    """The member's next fetch from the old leader fails (NOT_LEADER_OR_FOLLOWER): it reads Metadata again and
    opens a share session with the new leader, which delivers what was written since."""
    config = {"share.coordinator.state.topic.num.partitions": 2, **FAST_SHARE_GROUPS}
    with minikafka.Cluster(brokers=2, data_dir=tmp_path / "cluster", config=config) as cluster:
        bootstrap = cluster.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 2)])[TOPIC].result(WAIT_S)
        cluster.wait_for_isr(TOPIC, 0, 2)
        produce_acked(bootstrap, TOPIC, 10, partitions=1)
        set_group_config(bootstrap.split(","), GROUP, "share.auto.offset.reset", "earliest")
        member = share_consume(bootstrap, "-c", "20", "--timeout-ms", str(int(WAIT_S * 1000)))
        try:
            # The first ten printed and acknowledged on the first leader; then the leader moves.
            wait_until(lambda: acknowledged_up_to(cluster, {0: 10}), WAIT_S, message="ten records acknowledged")
            old = cluster.wait_for_leader(TOPIC, 0)
            cluster.move_leader(TOPIC, 0, next(b for b in cluster.brokers if b.node_id != old.node_id))
            produce_acked(bootstrap, TOPIC, 10, partitions=1, start=10)
        finally:
            printed = finished(member)
    assert sorted(printed) == [b"value-%06d" % i for i in range(20)]


def test_sigint_leaves_the_group_and_exits_130(broker_factory) -> None:
    broker = broker_factory(**FAST_SHARE_GROUPS)
    values = ready(broker, 20)
    member = share_consume(broker.bootstrap_servers, "--timeout-ms", str(int(WAIT_S * 1000)))
    try:
        wait_until(lambda: acknowledged_up_to(broker, {0: 10, 1: 10}), WAIT_S, message="every record acknowledged")
        member.send_signal(signal.SIGINT)
        out, err = member.communicate(timeout=WAIT_S)
    finally:
        if member.returncode is None:
            member.kill()
            member.communicate()
    assert member.returncode == 128 + signal.SIGINT, err.decode()
    assert sorted(out.splitlines()) == values
    assert err.decode().splitlines()[-1] == f"% Consumed 20 messages from {TOPIC} (stopped by SIGINT)"
    assert describe_share_group(broker.bootstrap_servers, GROUP).members == []
    assert broker.state.share_group(GROUP).sessions == {}
