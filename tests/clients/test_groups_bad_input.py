"""Group APIs given bad input over a raw connection: Kafka's error codes, and committed offsets left intact."""
from __future__ import annotations

import struct

from kafka.protocol.admin.groups import DeleteGroupsRequest, DescribeGroupsRequest, ListGroupsRequest
from kafka.protocol.admin.topics import CreateTopicsRequest
from kafka.protocol.consumer.group import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest

from minikafka.protocol.codec import SCHEMAS
from minikafka.protocol.errors import ErrorCode as E
from tests.helpers import wait_until
from tests.raw_client import RawConnection

TOPIC = "orders"
GOOD_METADATA = "checkpoint-1"


def subscription(topics: list[str]) -> bytes:
    """A consumer protocol Subscription v0: what a Java consumer puts in JoinGroup metadata."""
    body = struct.pack(">hi", 0, len(topics)) + b"".join(struct.pack(">h", len(t)) + t.encode() for t in topics)
    return body + struct.pack(">i", -1)


def join(conn, group="g", member_id="", protocols=None, protocol_type="consumer", session=10000, version=5):
    R = JoinGroupRequest[version]
    protocols = [("range", subscription([TOPIC]))] if protocols is None else protocols
    return conn.request(R(group_id=group, session_timeout_ms=session, rebalance_timeout_ms=10000,
                          member_id=member_id, group_instance_id=None, protocol_type=protocol_type,
                          protocols=[R.JoinGroupRequestProtocol(name=n, metadata=m) for n, m in protocols]))


def commit(conn, generation, member_id, offsets, group="g", version=8):
    R = OffsetCommitRequest[version]
    by_topic: dict[str, list] = {}
    for (topic, partition), (offset, metadata) in offsets.items():
        by_topic.setdefault(topic, []).append(R.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
            partition_index=partition, committed_offset=offset, committed_leader_epoch=-1,
            committed_metadata=metadata))
    resp = conn.request(R(group_id=group, generation_id_or_member_epoch=generation, member_id=member_id,
                          group_instance_id=None, topics=[R.OffsetCommitRequestTopic(name=t, partitions=ps)
                                                          for t, ps in by_topic.items()]))
    return {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}


def fetch(conn, group="g"):
    R = OffsetFetchRequest[7]
    resp = conn.request(R(group_id=group, topics=None, require_stable=True))
    assert resp.error_code == 0
    return {(t.name, p.partition_index): (p.committed_offset, p.metadata, p.error_code)
            for t in resp.topics for p in t.partitions}


def stable_member(conn):
    first = join(conn)
    assert first.error_code == E.MEMBER_ID_REQUIRED and first.member_id
    joined = join(conn, member_id=first.member_id)
    assert joined.error_code == E.NONE and joined.leader == first.member_id
    assert [m.member_id for m in joined.members] == [first.member_id]
    R = SyncGroupRequest[5]
    synced = conn.request(R(group_id="g", generation_id=joined.generation_id, member_id=joined.member_id,
                            group_instance_id=None, protocol_type="consumer", protocol_name="range",
                            assignments=[R.SyncGroupRequestAssignment(member_id=joined.member_id,
                                                                      assignment=b"\x00\x00asg")]))
    assert synced.error_code == E.NONE and synced.assignment == b"\x00\x00asg"
    return joined.member_id, joined.generation_id


def test_find_coordinator_for_groups_and_transactions(broker):
    host, port = broker.bootstrap_servers.split(":")
    with RawConnection(broker.bootstrap_servers) as conn:
        single = conn.request(FindCoordinatorRequest[3](key="any-group", key_type=0))
        assert (single.error_code, single.node_id, single.host, single.port) == (0, 1, host, int(port))
        R = FindCoordinatorRequest[4]
        batched = conn.request(R(key_type=0, coordinator_keys=["a", "b"]))
        assert [(c.key, c.error_code, c.port) for c in batched.coordinators] == [("a", 0, int(port)),
                                                                                 ("b", 0, int(port))]
        # Transaction keys find this broker (the only one); transactions themselves are refused later, at
        # InitProducerId (tests/clients/test_transactions.py).
        txn = conn.request(R(key_type=1, coordinator_keys=["txn"]))
        assert [(c.key, c.error_code, c.port) for c in txn.coordinators] == [("txn", 0, int(port))]
        share = conn.request(FindCoordinatorRequest[3](key="x", key_type=2))
        assert share.error_code == E.INVALID_REQUEST


def test_bad_group_requests_get_kafka_errors_and_leave_offsets_intact(broker_factory):
    broker = broker_factory(group_initial_rebalance_delay_ms=0)
    with RawConnection(broker.bootstrap_servers) as conn:
        conn.find_coordinator("g")
        R = CreateTopicsRequest[7]
        created = conn.request(R(topics=[R.CreatableTopic(name=TOPIC, num_partitions=2, replication_factor=1,
                                                          assignments=[], configs=[])], timeout_ms=10000))
        assert created.topics[0].error_code == 0
        member, generation = stable_member(conn)
        assert commit(conn, generation, member, {(TOPIC, 0): (5, GOOD_METADATA), (TOPIC, 1): (7, "")}) == {
            (TOPIC, 0): E.NONE, (TOPIC, 1): E.NONE}

        # JoinGroup: empty protocol list, inconsistent protocol type, unknown member id, bad session timeout.
        assert join(conn, protocols=[]).error_code == E.INCONSISTENT_GROUP_PROTOCOL
        assert join(conn, group="fresh", protocols=[]).error_code == E.INCONSISTENT_GROUP_PROTOCOL
        assert join(conn, group="fresh", protocol_type="").error_code == E.INCONSISTENT_GROUP_PROTOCOL
        assert join(conn, protocol_type="connect").error_code == E.INCONSISTENT_GROUP_PROTOCOL
        assert join(conn, protocols=[("sticky", b"")]).error_code == E.INCONSISTENT_GROUP_PROTOCOL
        assert join(conn, member_id="ghost").error_code == E.UNKNOWN_MEMBER_ID
        assert join(conn, group="never-seen", member_id="ghost").error_code == E.UNKNOWN_MEMBER_ID
        assert join(conn, session=1).error_code == E.INVALID_SESSION_TIMEOUT
        assert join(conn, group="").error_code == E.INVALID_GROUP_ID

        # Heartbeat and SyncGroup: unknown members and stale generations.
        H = HeartbeatRequest[4]
        assert conn.request(H(group_id="g", generation_id=generation, member_id="ghost",
                              group_instance_id=None)).error_code == E.UNKNOWN_MEMBER_ID
        assert conn.request(H(group_id="g", generation_id=generation - 1, member_id=member,
                              group_instance_id=None)).error_code == E.ILLEGAL_GENERATION
        assert conn.request(H(group_id="nope", generation_id=1, member_id=member,
                              group_instance_id=None)).error_code == E.UNKNOWN_MEMBER_ID
        S = SyncGroupRequest[5]
        assert conn.request(S(group_id="g", generation_id=generation + 3, member_id=member, group_instance_id=None,
                              protocol_type="consumer", protocol_name="range",
                              assignments=[])).error_code == E.ILLEGAL_GENERATION
        assert conn.request(S(group_id="g", generation_id=generation, member_id=member, group_instance_id=None,
                              protocol_type=None, protocol_name="range",
                              assignments=[])).error_code == E.INCONSISTENT_GROUP_PROTOCOL

        # OffsetCommit: stale generation, unknown member, no membership, oversize metadata, unknown topic.
        assert set(commit(conn, generation - 1, member, {(TOPIC, 0): (99, "")}).values()) == {E.ILLEGAL_GENERATION}
        assert set(commit(conn, generation, "ghost", {(TOPIC, 0): (99, "")}).values()) == {E.UNKNOWN_MEMBER_ID}
        assert set(commit(conn, -1, "", {(TOPIC, 0): (99, "")}).values()) == {E.UNKNOWN_MEMBER_ID}
        assert commit(conn, generation, member, {(TOPIC, 0): (99, "x" * 4097), (TOPIC, 1): (9, "")}) == {
            (TOPIC, 0): E.OFFSET_METADATA_TOO_LARGE, (TOPIC, 1): E.NONE}
        assert commit(conn, generation, member, {("no-such-topic", 0): (1, ""), (TOPIC, 7): (1, "")}) == {
            ("no-such-topic", 0): E.UNKNOWN_TOPIC_OR_PARTITION, (TOPIC, 7): E.UNKNOWN_TOPIC_OR_PARTITION}
        assert set(commit(conn, 3, "m", {(TOPIC, 0): (1, "")}, group="nope").values()) == {E.ILLEGAL_GENERATION}
        assert set(commit(conn, 3, "m", {(TOPIC, 0): (1, "")}, group="nope",
                          version=9).values()) == {E.GROUP_ID_NOT_FOUND}

        # LeaveGroup of an unknown member; DeleteGroups and OffsetDelete of a group that has members.
        L = LeaveGroupRequest[4]
        left = conn.request(L(group_id="g", members=[L.MemberIdentity(member_id="ghost", group_instance_id=None)]))
        assert left.error_code == 0 and left.members[0].error_code == E.UNKNOWN_MEMBER_ID
        deleted = conn.request(DeleteGroupsRequest[2](groups_names=["g", "nope"]))
        assert [(r.group_id, r.error_code) for r in deleted.results] == [("g", E.NON_EMPTY_GROUP),
                                                                         ("nope", E.GROUP_ID_NOT_FOUND)]
        D = OffsetDeleteRequest[0]
        refused = conn.request(D(group_id="g", topics=[D.OffsetDeleteRequestTopic(
            name=TOPIC, partitions=[D.OffsetDeleteRequestTopic.OffsetDeleteRequestPartition(partition_index=0)])]))
        assert refused.topics[0].partitions[0].error_code == E.GROUP_SUBSCRIBED_TO_TOPIC

        intact = {(TOPIC, 0): (5, GOOD_METADATA, 0), (TOPIC, 1): (9, "", 0)}
        assert fetch(conn) == intact
        described = conn.request(DescribeGroupsRequest[5](groups=["g"], include_authorized_operations=False))
        assert described.groups[0].group_state == "Stable"
        assert [m.member_id for m in described.groups[0].members] == [member]

    broker.stop()
    broker.start()
    with RawConnection(broker.bootstrap_servers) as conn:
        assert fetch(conn) == intact
    broker.kill()
    broker.start()
    with RawConnection(broker.bootstrap_servers) as conn:
        assert fetch(conn) == intact
        listed = conn.request(ListGroupsRequest[4](states_filter=["Stable"]))
        assert [(g.group_id, g.group_state) for g in listed.groups] == [("g", "Stable")]


def test_admin_operations_on_an_empty_group(broker_factory):
    broker = broker_factory(group_initial_rebalance_delay_ms=0)
    with RawConnection(broker.bootstrap_servers) as conn:
        conn.find_coordinator("g")
        R = CreateTopicsRequest[7]
        conn.request(R(topics=[R.CreatableTopic(name=TOPIC, num_partitions=2, replication_factor=1,
                                                assignments=[], configs=[])], timeout_ms=10000))
        # An assign()-only consumer commits with generation -1 and no member id: a group without members.
        assert commit(conn, -1, "", {(TOPIC, 0): (3, ""), (TOPIC, 1): (4, "")}, group="simple") == {
            (TOPIC, 0): E.NONE, (TOPIC, 1): E.NONE}
        listed = conn.request(ListGroupsRequest[5](states_filter=[], types_filter=["classic"]))
        assert [(g.group_id, g.protocol_type, g.group_state, g.group_type) for g in listed.groups] == [
            ("simple", "", "Empty", "classic")]
        described = conn.request(DescribeGroupsRequest[6](groups=["simple", "absent"],
                                                          include_authorized_operations=True))
        assert [(g.group_id, g.error_code, g.group_state) for g in described.groups] == [
            ("simple", E.NONE, "Empty"), ("absent", E.GROUP_ID_NOT_FOUND, "Dead")]
        D = OffsetDeleteRequest[0]
        removed = conn.request(D(group_id="simple", topics=[D.OffsetDeleteRequestTopic(
            name=TOPIC, partitions=[D.OffsetDeleteRequestTopic.OffsetDeleteRequestPartition(partition_index=0)])]))
        assert removed.error_code == 0 and removed.topics[0].partitions[0].error_code == 0
        assert fetch(conn, "simple") == {(TOPIC, 1): (4, "", 0)}
        deleted = conn.request(DeleteGroupsRequest[2](groups_names=["simple"]))
        assert deleted.results[0].error_code == E.NONE
        assert fetch(conn, "simple") == {}
    broker.kill()
    broker.start()
    with RawConnection(broker.bootstrap_servers) as conn:
        assert fetch(conn, "simple") == {}
        assert conn.request(ListGroupsRequest[4](states_filter=[])).groups == []


def test_clean_stop_answers_a_parked_join_with_not_coordinator(broker_factory):
    broker = broker_factory(group_initial_rebalance_delay_ms=60000)
    conn = RawConnection(broker.bootstrap_servers, timeout=30)
    try:
        J = JoinGroupRequest[5]
        conn.send(J(group_id="parked", session_timeout_ms=10000, rebalance_timeout_ms=60000, member_id="",
                    group_instance_id="i", protocol_type="consumer",
                    protocols=[J.JoinGroupRequestProtocol(name="range", metadata=b"")]))
        with RawConnection(broker.bootstrap_servers) as other:
            def parked() -> list[str]:  # the join is parked in the initial rebalance delay
                listed = other.request(ListGroupsRequest[4](states_filter=["PreparingRebalance"])).groups
                return [g.group_id for g in listed]

            wait_until(lambda: parked() == ["parked"], timeout=20, message="the JoinGroup to be parked")
        assert broker.stop() == 0
        frame = conn.read_frame()
        assert frame is not None, "the parked JoinGroup was never answered"
        response = SCHEMAS[JoinGroupRequest.API_KEY].response.decode(frame[4:], version=5)  # v5: no tagged header
        assert response.error_code == E.NOT_COORDINATOR
    finally:
        conn.close()
