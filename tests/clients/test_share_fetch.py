"""Share groups' data path (KIP-932's ShareFetch and ShareAcknowledge) against real broker processes, through the
raw-protocol share consumer of tests/share_consumer.py: members share one partition's records (never one record to
two members while it is locked), RELEASE redelivers with the delivery count raised, REJECT and the delivery count
limit archive, an acquisition lock that runs out (its member paused with SIGSTOP) gives the records to another, the
end of a session or its connection releases what the member held, share.auto.offset.reset decides where a new
share-partition starts, and on three brokers a kill -9 of the partition's leader keeps what was acknowledged done and
what was released available; READ on the group and on the topic is needed. The share state is initialized as the
group coordinator does on assignment (InitializeShareGroupState at the share coordinator)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.metadata import MetadataRequest

import minikafka
from minikafka import Acl
from minikafka.protocol.errors import ErrorCode
from tests.clients.test_group_configs import SET, alter, describe
from tests.helpers import create_topic, produce_acked, run_transactions, wait_until
from tests.raw_client import RawConnection
from tests.share_consumer import (
    ACCEPT,
    REJECT,
    RELEASE,
    Fetched,
    ShareConsumer,
    acknowledge_errors,
    initialize_share_partitions,
    set_share_version,
    topic_id,
)

TOPIC = "queue"
GROUP = "workers"
REPO = Path(__file__).resolve().parents[2]
DEADLINE_S = 60.0


def set_group_config(addresses: list[str], group: str, name: str, value: str) -> None:
    """IncrementalAlterConfigs on the group, then until every broker applies it."""
    assert alter(addresses[0], group, (name, SET, value)) == (0, None)
    for address in addresses:
        wait_until(lambda address=address: describe(address, group, [name])[1][name][0] == value, DEADLINE_S)


def ready_topic(bootstrap: str, count: int, *, group: str = GROUP, reset: str = "earliest",
                partitions: int = 1, replication: int = 1, start_offset: int = -1) -> uuid.UUID:
    """A topic with `count` records in partition 0 and the group's share state initialized for it, reading from
    `reset` (the group config share.auto.offset.reset; `bootstrap` may list several brokers), or from
    `start_offset` when one is given (as an offsets reset initializes it)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, partitions, replication)])[TOPIC].result(DEADLINE_S)
    if count:
        produce_acked(bootstrap, TOPIC, count * partitions, partitions=partitions, acks="all")
    tid = topic_id(bootstrap.split(",")[0], TOPIC)
    if reset != "latest":
        set_group_config(bootstrap.split(","), group, "share.auto.offset.reset", reset)
    wait_until(lambda: initialize_share_partitions(bootstrap.split(",")[0], group, tid, list(range(partitions)),
                                                   start_offset) == [0] * partitions, DEADLINE_S)
    return tid


def fetch_until(consumer: ShareConsumer, tid: uuid.UUID, wanted: int, **kwargs: object) -> dict[int, tuple]:
    """Fetch (in the consumer's session) until `wanted` records were acquired in all, within a deadline."""
    got: dict[int, tuple] = {}
    deadline = time.monotonic() + DEADLINE_S
    while len(got) < wanted:
        assert time.monotonic() < deadline, f"acquired {sorted(got)} of {wanted}"
        fetched = consumer.fetch([(tid, 0)], max_wait_ms=500, **kwargs)  # type: ignore[arg-type]
        assert fetched.error_code == 0, fetched.response
        assert fetched.partition_errors.get((tid, 0), 0) in (0, ErrorCode.UNKNOWN_SERVER_ERROR), fetched.response
        got.update(fetched.records.get((tid, 0), {}))
    return got


def test_two_members_share_one_partition(broker) -> None:
    bootstrap = broker.bootstrap_servers
    tid = ready_topic(bootstrap, 30)
    tp = (tid, 0)
    with ShareConsumer(bootstrap, GROUP) as a, ShareConsumer(bootstrap, GROUP) as b:
        first = fetch_until(a, tid, 10, max_records=10)
        assert sorted(first) == list(range(10)) and {count for _, count in first.values()} == {1}
        assert first[3][0] == b"value-000003"
        second = fetch_until(b, tid, 20)
        assert sorted(second) == list(range(10, 30))  # a's locked records are not b's
        held = broker.state.share_group(GROUP)
        assert held.acquired(a.member_id) == [(TOPIC, 0, o) for o in range(10)]
        assert held.acquired(b.member_id) == [(TOPIC, 0, o) for o in range(10, 30)]
        share_partition = held.partitions[(TOPIC, 0)]
        assert (share_partition.start_offset, share_partition.end_offset) == (0, 30)
        assert set(held.sessions) == {a.member_id, b.member_id}
        nothing = b.fetch([tp], max_wait_ms=200)
        assert nothing.error_code == 0 and nothing.records == {}
        # b cannot acknowledge a's records; a acknowledges them, with a per-offset type list too.
        wrong = b.acknowledge({tp: [(0, 0, [ACCEPT])]})
        assert acknowledge_errors(wrong) == {tp: ErrorCode.INVALID_RECORD_STATE}
        assert acknowledge_errors(a.acknowledge({tp: [(0, 4, [ACCEPT]), (6, 6, [ACCEPT])]})) == {tp: 0}
        again = a.acknowledge({tp: [(6, 6, [ACCEPT])]})  # acknowledged already, and still in flight (5 is not)
        assert acknowledge_errors(again) == {tp: ErrorCode.INVALID_RECORD_STATE}
        assert acknowledge_errors(a.acknowledge({tp: [(5, 5, [ACCEPT]), (7, 9, [ACCEPT] * 3)]})) == {tp: 0}
        # Below the share-partition's start offset everything is done: nothing to say, as Kafka.
        assert acknowledge_errors(a.acknowledge({tp: [(0, 0, [ACCEPT])]})) == {tp: 0}
        # Acknowledgements that are not well formed fail their partition as a whole.
        malformed = ([(12, 11, [ACCEPT])], [(10, 12, [ACCEPT, ACCEPT])], [(10, 10, [4])],
                     [(12, 13, [ACCEPT]), (10, 11, [ACCEPT])])
        for bad in malformed:
            assert acknowledge_errors(b.acknowledge({tp: bad})) == {tp: ErrorCode.INVALID_REQUEST}
        # Piggybacked on b's next fetch: its acknowledgement error per partition.
        fetched = b.fetch([tp], {tp: [(10, 29, [ACCEPT])]}, max_wait_ms=200)
        assert fetched.acknowledge_errors == {tp: 0} and fetched.records == {}


def test_share_session_errors(broker) -> None:
    bootstrap = broker.bootstrap_servers
    tid = ready_topic(bootstrap, 5)
    tp = (tid, 0)
    with ShareConsumer(bootstrap, GROUP) as member:
        assert member.fetch([tp], epoch=3).error_code == ErrorCode.SHARE_SESSION_NOT_FOUND
        assert member.acknowledge({tp: [(0, 0, [ACCEPT])]}, epoch=-1).error_code == ErrorCode.SHARE_SESSION_NOT_FOUND
        assert member.fetch([tp], {tp: [(0, 0, [ACCEPT])]}).error_code == ErrorCode.INVALID_REQUEST  # epoch 0
        fetch_until(member, tid, 5)
        assert member.fetch([tp], epoch=member.epoch + 1).error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
        assert member.acknowledge({}, epoch=0).error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
        assert member.fetch([tp], max_wait_ms=0).error_code == 0  # the session goes on at its own epoch
    with ShareConsumer(bootstrap, GROUP, member_id="not-a-uuid") as bad:
        assert bad.fetch([tp], max_wait_ms=0).error_code == ErrorCode.UNKNOWN_SERVER_ERROR
    with ShareConsumer(bootstrap, GROUP) as member:
        unknown = member.fetch([(uuid.uuid4(), 0), (tid, 7)], max_wait_ms=0)
        assert set(unknown.partition_errors.values()) == {ErrorCode.UNKNOWN_TOPIC_ID,
                                                          ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}


def test_release_redelivers_and_reject_archives(broker) -> None:
    bootstrap = broker.bootstrap_servers
    tid = ready_topic(bootstrap, 10)
    tp = (tid, 0)
    with ShareConsumer(bootstrap, GROUP) as a, ShareConsumer(bootstrap, GROUP) as b:
        assert sorted(fetch_until(a, tid, 10)) == list(range(10))
        types = [ACCEPT, ACCEPT, RELEASE, RELEASE, REJECT, REJECT, ACCEPT, RELEASE, REJECT, ACCEPT]
        assert acknowledge_errors(a.acknowledge({tp: [(0, 9, types)]})) == {tp: 0}
        records = broker.state.share_group(GROUP).partitions[(TOPIC, 0)].records
        assert [(r.offset, r.state, r.delivery_count) for r in records] == [
            (2, "AVAILABLE", 1), (3, "AVAILABLE", 1), (4, "ARCHIVED", 1), (5, "ARCHIVED", 1), (6, "ACKNOWLEDGED", 1),
            (7, "AVAILABLE", 1), (8, "ARCHIVED", 1), (9, "ACKNOWLEDGED", 1)]
        redelivered = fetch_until(b, tid, 3)
        assert redelivered == {2: (b"value-000002", 2), 3: (b"value-000003", 2), 7: (b"value-000007", 2)}
        assert b.fetch([tp], max_wait_ms=300).records == {}  # the rejected ones are archived: never again
        fetched = b.fetch([tp], {tp: [(2, 3, [ACCEPT]), (7, 7, [ACCEPT])]}, max_wait_ms=300)
        assert fetched.acknowledge_errors == {tp: 0} and fetched.records == {}


def test_delivery_count_limit_archives(broker_factory) -> None:
    broker = broker_factory(group_share_delivery_count_limit=2)
    bootstrap = broker.bootstrap_servers
    tid = ready_topic(bootstrap, 3)
    tp = (tid, 0)
    with ShareConsumer(bootstrap, GROUP) as member:
        assert set(fetch_until(member, tid, 3).values()) == {(b"value-%06d" % i, 1) for i in range(3)}
        assert acknowledge_errors(member.acknowledge({tp: [(0, 2, [RELEASE])]})) == {tp: 0}
        second = fetch_until(member, tid, 3)
        assert {count for _, count in second.values()} == {2}
        assert acknowledge_errors(member.acknowledge({tp: [(0, 2, [RELEASE])]})) == {tp: 0}
        assert member.fetch([tp], max_wait_ms=300).records == {}  # delivered twice: archived
        produce_acked(bootstrap, TOPIC, 1, partitions=1, start=3)
        assert fetch_until(member, tid, 1) == {3: (b"value-000003", 1)}


def test_lock_timeout_releases_a_paused_members_records(broker_factory) -> None:
    broker = broker_factory(group_share_min_record_lock_duration_ms=1000)
    bootstrap = broker.bootstrap_servers
    tid = ready_topic(bootstrap, 6)
    set_group_config([bootstrap], GROUP, "share.record.lock.duration.ms", "2000")
    code = ("import json, sys, time, uuid\n"
            "from tests.share_consumer import ShareConsumer\n"
            "c = ShareConsumer(sys.argv[1], sys.argv[2])\n"
            "tid = uuid.UUID(sys.argv[3])\n"
            "got = {}\n"
            "while len(got) < 6:\n"
            "    f = c.fetch([(tid, 0)], max_wait_ms=500)\n"
            "    got.update(f.records.get((tid, 0), {}))\n"
            "print(json.dumps({'offsets': sorted(got), 'lock_ms': f.acquisition_lock_timeout_ms}), flush=True)\n"
            "time.sleep(600)\n")
    worker = subprocess.Popen([sys.executable, "-c", code, bootstrap, GROUP, str(tid)], cwd=REPO,
                              stdout=subprocess.PIPE, start_new_session=True)
    try:
        line = worker.stdout.readline() if worker.stdout else b""
        assert json.loads(line) == {"offsets": list(range(6)), "lock_ms": 2000}
        os.killpg(worker.pid, signal.SIGSTOP)
        with ShareConsumer(bootstrap, GROUP) as other:
            taken = fetch_until(other, tid, 6)
            records = broker.state.share_group(GROUP).partitions[(TOPIC, 0)].records
        assert taken == {i: (b"value-%06d" % i, 2) for i in range(6)}
        # Delivered twice each; the paused member holds none of them (the other may, or its lock ran out too).
        assert [(r.offset, r.delivery_count) for r in records] == [(i, 2) for i in range(6)]
        assert {r.member_id for r in records} <= {other.member_id, None}
    finally:
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(30)


def test_session_end_and_connection_close_release_records(broker) -> None:
    bootstrap = broker.bootstrap_servers
    tid = ready_topic(bootstrap, 8)
    tp = (tid, 0)
    with ShareConsumer(bootstrap, GROUP) as a:
        fetch_until(a, tid, 8)
        closed = a.close({tp: [(0, 3, [ACCEPT])]})  # the final request acknowledges, then ends the session
        assert closed.error_code == 0 and acknowledge_errors(closed) == {tp: 0}
        assert a.acknowledge({}, epoch=1).error_code == ErrorCode.SHARE_SESSION_NOT_FOUND
    with ShareConsumer(bootstrap, GROUP) as b:
        assert fetch_until(b, tid, 4) == {i: (b"value-%06d" % i, 2) for i in range(4, 8)}
    # b's connection closed while it held 4..7: they are released once the broker sees it.
    with ShareConsumer(bootstrap, GROUP) as c:
        assert fetch_until(c, tid, 4) == {i: (b"value-%06d" % i, 3) for i in range(4, 8)}


@pytest.mark.parametrize("reset", ["earliest", "latest", "by_duration:PT1H"])
def test_share_auto_offset_reset(broker, reset: str) -> None:
    bootstrap = broker.bootstrap_servers
    tid = ready_topic(bootstrap, 5, reset=reset)
    with ShareConsumer(bootstrap, GROUP) as member:
        first: Fetched = member.fetch([(tid, 0)], max_wait_ms=500)
        assert first.error_code == 0 and first.partition_errors == {(tid, 0): 0}
        produce_acked(bootstrap, TOPIC, 2, partitions=1, start=5)
        already = first.records.get((tid, 0), {})
        from_start = reset != "latest"  # every record was written within the last hour
        got = {**already, **fetch_until(member, tid, (7 if from_start else 2) - len(already))}
    assert sorted(got) == (list(range(7)) if from_start else [5, 6])


# A three-broker cluster for the failover test: the share state topic small, acknowledged state on two replicas.
FAILOVER_CONFIG = {"share.coordinator.state.topic.num.partitions": 3, "min.insync.replicas": 2}


def assert_a_leader_kill_keeps_share_state(cluster: minikafka.Cluster) -> None:
    """On a running three-broker cluster: a member acknowledges and releases some records, holds others, and the
    partition's leader is killed -9; the new leader delivers nothing acknowledged again and loses nothing
    released."""
    bootstrap = cluster.bootstrap_servers
    # Started at offset 0 by the initialization itself: ZooKeeper mode has no group configs to say earliest.
    tid = ready_topic(bootstrap, 20, replication=3, reset="latest", start_offset=0)
    tp = (tid, 0)
    cluster.wait_for_isr(TOPIC, 0, 3)
    leader = cluster.wait_for_leader(TOPIC, 0)
    with ShareConsumer(leader.bootstrap_servers, GROUP) as member:
        assert sorted(fetch_until(member, tid, 10, max_records=10)) == list(range(10))
        # 0-4 done, 5-6 released, 7-9 still held when the leader dies.
        assert acknowledge_errors(member.acknowledge({tp: [(0, 6, [ACCEPT] * 5 + [RELEASE] * 2)]})) == {tp: 0}
        leader.kill()
    new_leader = cluster.wait_for_leader(TOPIC, 0, not_on=leader, timeout=DEADLINE_S)
    got: dict[int, tuple] = {}
    with ShareConsumer(new_leader.bootstrap_servers, GROUP) as member:
        deadline = time.monotonic() + DEADLINE_S
        while len(got) < 15:
            assert time.monotonic() < deadline, f"acquired {sorted(got)}"
            fetched = member.fetch([tp], max_wait_ms=500)
            assert fetched.error_code == 0
            got.update(fetched.records.get(tp, {}))
    assert sorted(got) == list(range(5, 20))  # nothing acknowledged comes back, nothing released is lost
    # 5-6 were released (delivered once before); 7-9 were only acquired, which is never persisted.
    assert {o: count for o, (_, count) in got.items() if o < 10} == {5: 2, 6: 2, 7: 1, 8: 1, 9: 1}


def test_share_state_survives_a_leader_kill_9(tmp_path) -> None:
    with minikafka.Cluster(brokers=3, data_dir=tmp_path / "cluster", config=FAILOVER_CONFIG) as cluster:
        assert_a_leader_kill_keeps_share_state(cluster)


def test_share_fetch_needs_read_on_the_group_and_the_topic(tmp_path) -> None:
    users = {"alice": "alice-secret"}
    with minikafka.Broker(security="SASL_PLAINTEXT", users=users, acls=[], data_dir=tmp_path / "data") as broker:
        admin = broker.client_config(client="kafka-python")
        with RawConnection(broker.bootstrap_servers) as conn:
            conn.authenticate_plain(admin["sasl_plain_username"], admin["sasl_plain_password"])
            create_topic(conn, TOPIC)
            tid = conn.request(MetadataRequest[12](topics=[MetadataRequest[12].MetadataRequestTopic(
                topic_id=None, name=TOPIC)], allow_auto_topic_creation=False,
                include_topic_authorized_operations=False)).topics[0].topic_id
        tp = (tid, 0)
        with ShareConsumer(broker.bootstrap_servers, GROUP) as alice:
            alice.conn.authenticate_plain("alice", users["alice"])
            assert alice.fetch([tp], max_wait_ms=0).error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
            assert alice.acknowledge({}, epoch=1).error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
            broker.add_acls(Acl("User:alice", "READ", group=GROUP))
            fetched = alice.fetch([tp], max_wait_ms=0)
            assert fetched.error_code == 0
            assert fetched.partition_errors == {tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED}
            answered = alice.acknowledge({tp: [(0, 0, [ACCEPT])]})
            assert acknowledge_errors(answered) == {tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED}


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_share_isolation_level(broker, isolation: str) -> None:
    bootstrap = broker.bootstrap_servers
    tid = ready_topic(bootstrap, 0)
    set_group_config([bootstrap], GROUP, "share.isolation.level", isolation)
    run_transactions("confluent-kafka", bootstrap, "share-txn", TOPIC, 1,
                     [([b"c1", b"c2"], True), ([b"a1", b"a2"], False), ([b"c3"], True)])
    # Offsets: c1 c2 (commit marker) a1 a2 (abort marker) c3 (commit marker).
    with ShareConsumer(bootstrap, GROUP) as member:
        got: dict[int, tuple] = {}
        deadline = time.monotonic() + DEADLINE_S
        while 7 not in got:
            assert time.monotonic() < deadline, f"acquired {sorted(got)}"
            got.update(member.fetch([(tid, 0)], max_wait_ms=500).records.get((tid, 0), {}))
        values = [value for _, (value, _) in sorted(got.items()) if value is not None]
        states = {r.offset: r.state for r in broker.state.share_group(GROUP).partitions[(TOPIC, 0)].records}
    if isolation == "read_committed":
        # The aborted records are archived, never delivered; the markers are acquired as gaps would be.
        assert values == [b"c1", b"c2", b"c3"] and sorted(got) == [0, 1, 2, 5, 6, 7]
        assert (states[3], states[4]) == ("ARCHIVED", "ARCHIVED")
    else:
        assert values == [b"c1", b"c2", b"a1", b"a2", b"c3"] and sorted(got) == list(range(8))


def test_share_session_limit(broker_factory) -> None:
    broker = broker_factory(group_share_max_share_sessions=1)
    bootstrap = broker.bootstrap_servers
    tid = ready_topic(bootstrap, 2)
    with ShareConsumer(bootstrap, GROUP) as first, ShareConsumer(bootstrap, GROUP) as second:
        assert first.fetch([(tid, 0)], max_wait_ms=0).error_code == 0
        assert second.fetch([(tid, 0)], max_wait_ms=100).error_code == ErrorCode.SHARE_SESSION_LIMIT_REACHED
        assert first.close().error_code == 0  # its session ends: room for another
        assert second.fetch([(tid, 0)], max_wait_ms=0).error_code == 0


def test_a_moved_leader_sends_members_to_the_new_one(tmp_path) -> None:
    with minikafka.Cluster(brokers=2, data_dir=tmp_path / "cluster",
                           config={"share.coordinator.state.topic.num.partitions": 2}) as cluster:
        bootstrap = cluster.bootstrap_servers
        tid = ready_topic(bootstrap, 6, replication=2)
        tp = (tid, 0)
        cluster.wait_for_isr(TOPIC, 0, 2)
        old = cluster.wait_for_leader(TOPIC, 0)
        with ShareConsumer(old.bootstrap_servers, GROUP) as member:
            assert sorted(fetch_until(member, tid, 6)) == list(range(6))
            assert acknowledge_errors(member.acknowledge({tp: [(0, 2, [ACCEPT])]})) == {tp: 0}
            new = cluster.move_leader(TOPIC, 0, next(b for b in cluster.brokers if b.node_id != old.node_id))
            # Until the old leader has applied the move itself (it answers from its own metadata).
            deadline = time.monotonic() + DEADLINE_S
            while (moved := member.fetch([tp], max_wait_ms=0)).partition_errors.get(tp, 0) == 0:
                assert time.monotonic() < deadline and not moved.records, moved.response
            assert moved.partition_errors == {tp: ErrorCode.NOT_LEADER_OR_FOLLOWER}
            (partition,) = moved.response.responses[0].partitions  # type: ignore[union-attr]
            assert partition.current_leader.leader_id == new.node_id
            assert [(e.node_id, e.port) for e in moved.response.node_endpoints] == [  # type: ignore[union-attr]
                (new.node_id, new.port)]
        with ShareConsumer(new.bootstrap_servers, GROUP) as member:
            # 3-5 were held on the old leader, never persisted as delivered: the new one delivers them anew.
            assert fetch_until(member, tid, 3) == {i: (b"value-%06d" % i, 1) for i in range(3, 6)}


def test_a_share_partition_not_initialized_yet_is_not_served(broker) -> None:
    """Kafka 4.1's leader reads no state the group coordinator has not initialized: the read fails (an unknown
    server error for the member, which retries), and once initialized the records come."""
    bootstrap = broker.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(DEADLINE_S)
    produce_acked(bootstrap, TOPIC, 3, partitions=1)
    tid = topic_id(bootstrap, TOPIC)
    set_group_config([bootstrap], GROUP, "share.auto.offset.reset", "earliest")
    with ShareConsumer(bootstrap, GROUP) as member:
        deadline = time.monotonic() + DEADLINE_S
        while (fetched := member.fetch([(tid, 0)], max_wait_ms=500)).partition_errors.get((tid, 0), 0) == 0:
            assert time.monotonic() < deadline and not fetched.records, fetched.response
        assert fetched.partition_errors == {(tid, 0): ErrorCode.UNKNOWN_SERVER_ERROR}
        wait_until(lambda: initialize_share_partitions(bootstrap, GROUP, tid, [0]) == [0], DEADLINE_S)
        assert fetch_until(member, tid, 3) == {i: (b"value-%06d" % i, 1) for i in range(3)}


def test_at_share_version_0_share_fetch_and_acknowledge_answer_unsupported_version(broker_factory) -> None:
    """Kafka's gate on share groups: kafka-features.sh downgrade --feature share.version=0 (UpdateFeatures) turns
    ShareFetch and ShareAcknowledge away, and an upgrade to 1 serves them again."""
    bootstrap = broker_factory().bootstrap_servers
    tid = ready_topic(bootstrap, 2)
    with ShareConsumer(bootstrap, GROUP) as member:
        set_share_version(bootstrap, 0, 2)  # a safe downgrade
        try:
            refused = member.fetch([(tid, 0)], max_wait_ms=0)
            assert (refused.error_code, refused.response.error_message) == (  # type: ignore[union-attr]
                ErrorCode.UNSUPPORTED_VERSION, None)
            assert refused.partition_errors == {} and member.epoch == 0
            assert member.acknowledge({}, epoch=1).error_code == ErrorCode.UNSUPPORTED_VERSION
        finally:
            set_share_version(bootstrap, 1, 1)  # an upgrade
        assert fetch_until(member, tid, 2) == {0: (b"value-000000", 1), 1: (b"value-000001", 1)}
