"""Old and new versions of the group APIs, as older clients (and the newest kafka-python schemas) send them."""
from __future__ import annotations

from kafka.protocol.admin.groups import DescribeGroupsRequest, ListGroupsRequest
from kafka.protocol.admin.topics import CreateTopicsRequest
from kafka.protocol.consumer.group import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest

from minikafka.protocol.errors import ErrorCode as E
from tests.raw_client import RawConnection


def test_pre_kip394_join_sync_heartbeat_leave_and_v2_commit(broker_factory):
    broker = broker_factory(group_initial_rebalance_delay_ms=0)
    with RawConnection(broker.bootstrap_servers) as conn:
        found = conn.request(FindCoordinatorRequest[0](key="old"))
        assert found.error_code == 0 and found.node_id == 1
        R = CreateTopicsRequest[7]
        conn.request(R(topics=[R.CreatableTopic(name="t", num_partitions=1, replication_factor=1, assignments=[],
                                                configs=[])], timeout_ms=10000))
        J = JoinGroupRequest[3]
        # Before v4 a member joins directly with an empty member id: no MEMBER_ID_REQUIRED round trip.
        joined = conn.request(J(group_id="old", session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id="",
                                protocol_type="consumer",
                                protocols=[J.JoinGroupRequestProtocol(name="range", metadata=b"m")]))
        assert joined.error_code == 0 and joined.member_id and joined.leader == joined.member_id
        assert joined.protocol_name == "range" and joined.members[0].metadata == b"m"
        S = SyncGroupRequest[2]
        synced = conn.request(S(group_id="old", generation_id=joined.generation_id, member_id=joined.member_id,
                                assignments=[S.SyncGroupRequestAssignment(member_id=joined.member_id,
                                                                          assignment=b"a")]))
        assert synced.error_code == 0 and synced.assignment == b"a"
        H = HeartbeatRequest[2]
        assert conn.request(H(group_id="old", generation_id=joined.generation_id,
                              member_id=joined.member_id)).error_code == 0
        C = OffsetCommitRequest[2]
        committed = conn.request(C(group_id="old", generation_id_or_member_epoch=joined.generation_id,
                                   member_id=joined.member_id, retention_time_ms=60000,
                                   topics=[C.OffsetCommitRequestTopic(name="t", partitions=[
                                       C.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                                           partition_index=0, committed_offset=11, committed_metadata="v2")])]))
        assert committed.topics[0].partitions[0].error_code == 0
        F = OffsetFetchRequest[1]
        fetched = conn.request(F(group_id="old", topics=[F.OffsetFetchRequestTopic(name="t", partition_indexes=[0])]))
        partition = fetched.topics[0].partitions[0]
        assert (partition.committed_offset, partition.metadata, partition.error_code) == (11, "v2", 0)
        described = conn.request(DescribeGroupsRequest[0](groups=["old"]))
        assert described.groups[0].group_state == "Stable" and described.groups[0].protocol_data == "range"
        assert [g.group_id for g in conn.request(ListGroupsRequest[0]()).groups] == ["old"]
        L = LeaveGroupRequest[2]
        assert conn.request(L(group_id="old", member_id="ghost")).error_code == E.UNKNOWN_MEMBER_ID
        assert conn.request(L(group_id="old", member_id=joined.member_id)).error_code == 0
        assert conn.request(DescribeGroupsRequest[0](groups=["old"])).groups[0].group_state == "Empty"
        assert conn.request(H(group_id="old", generation_id=joined.generation_id,
                              member_id=joined.member_id)).error_code == E.UNKNOWN_MEMBER_ID


def test_offset_fetch_and_commit_by_topic_id_and_batched_groups(broker_factory):
    broker = broker_factory(group_initial_rebalance_delay_ms=0)
    with RawConnection(broker.bootstrap_servers) as conn:
        conn.find_coordinator("g")
        R = CreateTopicsRequest[7]
        created = conn.request(R(topics=[R.CreatableTopic(name="t", num_partitions=2, replication_factor=1,
                                                          assignments=[], configs=[])], timeout_ms=10000))
        topic_id = created.topics[0].topic_id
        C = OffsetCommitRequest[10]
        committed = conn.request(C(group_id="ids", generation_id_or_member_epoch=-1, member_id="",
                                   group_instance_id=None, topics=[C.OffsetCommitRequestTopic(
                                       topic_id=topic_id, partitions=[
                                           C.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                                               partition_index=1, committed_offset=5, committed_leader_epoch=0,
                                               committed_metadata=None)])]))
        assert committed.topics[0].topic_id == topic_id and committed.topics[0].partitions[0].error_code == 0
        F = OffsetFetchRequest[8]
        fetched = conn.request(F(groups=[
            F.OffsetFetchRequestGroup(group_id="ids", topics=None),
            F.OffsetFetchRequestGroup(group_id="nobody", topics=[
                F.OffsetFetchRequestGroup.OffsetFetchRequestTopics(name="t", partition_indexes=[0])]),
        ], require_stable=False))
        first, second = fetched.groups
        assert [(t.name, p.partition_index, p.committed_offset, p.committed_leader_epoch, p.metadata)
                for t in first.topics for p in t.partitions] == [("t", 1, 5, 0, "")]
        assert second.error_code == 0 and second.topics[0].partitions[0].committed_offset == -1
        F10 = OffsetFetchRequest[10]
        by_id = conn.request(F10(groups=[F10.OffsetFetchRequestGroup(group_id="ids", member_id=None,
                                                                     member_epoch=-1, topics=None)],
                                 require_stable=True))
        assert [(t.topic_id, p.committed_offset) for t in by_id.groups[0].topics for p in t.partitions] == [
            (topic_id, 5)]
