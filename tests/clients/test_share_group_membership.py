"""KIP-932 share group membership against real brokers, over the raw protocol (tests/share_consumer.py): members
join and are assigned the partitions whose share state the share coordinator initialized, epochs advance, a silent
member is fenced, a leaver's partitions go to the others, the group is described and listed as Kafka 4.1 answers,
and a coordinator killed on a 3-broker cluster hands the group over with its members and epochs."""
from __future__ import annotations

import subprocess
import sys
import uuid

from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.admin.groups import DeleteGroupsRequest, DescribeGroupsRequest, ListGroupsRequest
from kafka.protocol.consumer.group import JoinGroupRequest, OffsetCommitRequest, OffsetFetchRequest
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest

import minikafka
from minikafka.broker.coordinator.share.share_coordinator import coordinator_key
from minikafka.broker.coordinator.share.share_coordinator_shard import SharePartitionKey
from minikafka.protocol.client_apis.messages import ConsumerGroupHeartbeatRequest
from minikafka.protocol.client_apis.share_state import ReadShareGroupStateSummaryRequest
from tests.helpers import wait_until
from tests.raw_client import RawConnection
from tests.share_consumer import (
    ShareMember,
    describe_share_group,
    find_coordinator,
    heartbeat_until,
    set_share_version,
)

PARTITIONS = 4
# Kafka's bounds allow these once the minimums are lowered with them: a member heartbeats every 200 ms and a
# silent one is fenced after 3 s.
FAST_SHARE_GROUPS = {
    "group.share.session.timeout.ms": 3000,
    "group.share.min.session.timeout.ms": 1000,
    "group.share.heartbeat.interval.ms": 200,
    "group.share.min.heartbeat.interval.ms": 100,
}
GROUP_ID_NOT_FOUND, UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, INVALID_REQUEST = 69, 25, 110, 42
INCONSISTENT_GROUP_PROTOCOL, NON_EMPTY_GROUP, UNSUPPORTED_VERSION = 23, 68, 35


def create_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS, replication: int = 1) -> uuid.UUID:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, replication)])[topic].result(30)
    with RawConnection(bootstrap.split(",")[0]) as conn:
        response = conn.request(MetadataRequest[12](topics=[MetadataRequest[12].MetadataRequestTopic(
            topic_id=None, name=topic)], allow_auto_topic_creation=False, include_topic_authorized_operations=False))
    topic_id: uuid.UUID = response.topics[0].topic_id
    return topic_id


def owned(members: list[ShareMember], topic_id: uuid.UUID) -> list[int]:
    return sorted(p for m in members for p in m.assignment.get(topic_id, []))


def share_states(bootstrap: str, group: str, topic_id: uuid.UUID, partitions: int) -> dict[int, tuple[int, int]]:
    """Each partition's share state epoch and start offset as the share coordinator holds them
    (ReadShareGroupStateSummary, asked of the coordinator of each share partition); a partition without state
    answers the defaults (0, -1); partitions the coordinator cannot answer for are left out."""
    starts = {}
    for partition in range(partitions):
        key = coordinator_key(SharePartitionKey(group, topic_id, partition))
        with RawConnection(bootstrap.split(",")[0]) as conn:
            found = conn.request(FindCoordinatorRequest[6](key_type=2, coordinator_keys=[key])).coordinators[0]
        if found.error_code != 0:
            continue
        with RawConnection(f"{found.host}:{found.port}") as conn:
            R = ReadShareGroupStateSummaryRequest
            response = conn.request(R[0](group_id=group, topics=[R[0].ReadStateSummaryData(
                topic_id=topic_id, partitions=[R[0].ReadStateSummaryData.PartitionData(partition=partition,
                                                                                       leader_epoch=0)])]))
        result = response.results[0].partitions[0]
        if result.error_code == 0:
            starts[partition] = (result.state_epoch, result.start_offset)
    return starts


def test_share_groups_are_on_by_default(broker):
    """share.version finalized at 1 (Kafka's level once share groups are generally available) and the membership
    APIs advertised at the version Kafka 4.1 serves."""
    with RawConnection(broker.bootstrap_servers) as raw:
        response = raw.request(ApiVersionsRequest[4](client_software_name="t", client_software_version="1"))
    finalized = {f.name: f.max_version_level for f in response.finalized_features}
    supported = {f.name: (f.min_version, f.max_version) for f in response.supported_features}
    assert (finalized["share.version"], supported["share.version"]) == (1, (0, 1))
    ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert (ranges[76], ranges[77]) == ((1, 1), (1, 1))


def test_at_share_version_0_the_share_group_apis_answer_unsupported_version(broker_factory, unique_topic):
    """kafka-features.sh downgrade --feature share.version=0 (UpdateFeatures) switches share groups off, upgrade
    on again."""
    broker = broker_factory(**FAST_SHARE_GROUPS)
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, unique_topic)
    group = f"share-{uuid.uuid4()}"
    member = ShareMember(bootstrap, group, [unique_topic])

    try:
        set_share_version(bootstrap, 0, 2)  # a safe downgrade
        refused = member.heartbeat()
        assert (refused.error_code, refused.error_message, refused.member_epoch) == (UNSUPPORTED_VERSION, None, 0)
        assert describe_share_group(bootstrap, group).error_code == UNSUPPORTED_VERSION
        set_share_version(bootstrap, 1, 1)  # an upgrade
        joined = member.heartbeat()
        assert (joined.error_code, joined.member_epoch) == (0, 1)
        assert describe_share_group(bootstrap, group).group_state == "Stable"
    finally:
        member.close()


def test_two_members_share_a_topic_and_epochs_advance(broker_factory, unique_topic):
    broker = broker_factory(**FAST_SHARE_GROUPS)
    bootstrap = broker.bootstrap_servers
    topic_id = create_topic(bootstrap, unique_topic)
    group = f"share-{uuid.uuid4()}"
    a = ShareMember(bootstrap, group, [unique_topic])
    b = ShareMember(bootstrap, group, [unique_topic])
    try:
        first = a.heartbeat()
        # Joined at epoch 1 with nothing: the share state of the partitions is being initialized.
        assert (first.error_code, first.member_id, first.member_epoch, first.heartbeat_interval_ms) == (
            0, a.member_id, 1, 200)
        assert first.assignment is not None and first.assignment.topic_partitions == []
        heartbeat_until([a], lambda: owned([a], topic_id) == list(range(PARTITIONS)), what="a to get everything")
        assert a.member_epoch == 2
        # Every partition's share state is in __share_group_state, initialized at the group epoch that asked for it,
        # at the start offset share.auto.offset.reset decides (-1 until a first fetch).
        assert share_states(bootstrap, group, topic_id, PARTITIONS) == {p: (1, -1) for p in range(PARTITIONS)}
        heartbeat_until([a, b], lambda: len(a.assignment.get(topic_id, [])) == 2
                        and owned([a, b], topic_id) == list(range(PARTITIONS)), what="the partitions split")
        # Kafka 4.1's simple assignor: two each, none shared (the members do not outnumber the partitions).
        assert not set(a.assignment[topic_id]) & set(b.assignment[topic_id])
        assert a.member_epoch == b.member_epoch == 3
        described = describe_share_group(bootstrap, group, include_authorized_operations=True)
        assert (described.error_code, described.group_state, described.group_epoch, described.assignment_epoch,
                described.assignor_name) == (0, "Stable", 3, 3, "simple")
        members = {m.member_id: m for m in described.members}
        assert set(members) == {a.member_id, b.member_id}
        assert members[a.member_id].subscribed_topic_names == [unique_topic]
        assert members[a.member_id].client_host.startswith("/127.0.0.1")
        (tp,) = members[b.member_id].assignment.topic_partitions
        assert (tp.topic_id, tp.topic_name, sorted(tp.partitions)) == (topic_id, unique_topic, b.assignment[topic_id])
        assert described.authorized_operations > 0
        # The test tools' wait and state read a share group as they read the other types.
        waited = broker.wait_for_group(group, state="Stable", members=2, generation_at_least=3)
        assert (waited.group_type, waited.group_epoch, sorted(m.member_id for m in waited.members)) == (
            "share", 3, sorted([a.member_id, b.member_id]))
        # A stale epoch that is not the previous one is fenced; the previous one is accepted (a lost response).
        stale = a.send(1, None)
        assert stale.error_code == FENCED_MEMBER_EPOCH and "smaller member epoch (1)" in stale.error_message
        assert a.send(2, None).error_code == 0
        # b leaves: a gets its partitions back.
        assert (b.leave().error_code, b.last.error_code) == (0, 0)
        heartbeat_until([a], lambda: owned([a], topic_id) == list(range(PARTITIONS)), what="a to get b's partitions")
        assert a.member_epoch > 3 and a.epochs_seen == sorted(a.epochs_seen)
        assert b.send(3, None).error_code == UNKNOWN_MEMBER_ID
    finally:
        a.close()
        b.close()


def test_state_and_the_cli_show_share_groups(broker_factory, unique_topic):
    broker = broker_factory(**FAST_SHARE_GROUPS)
    bootstrap = broker.bootstrap_servers
    topic_id = create_topic(bootstrap, unique_topic)
    group = f"share-{uuid.uuid4()}"
    member = ShareMember(bootstrap, group, [unique_topic])
    try:
        heartbeat_until([member], lambda: owned([member], topic_id) == list(range(PARTITIONS)), what="the assignment")
        state = broker.state.group(group)
        assert (state.group_type, state.state, state.protocol_type, state.assignor) == ("share", "Stable", "share",
                                                                                        "simple")
        assert (state.group_epoch, state.assignment_epoch, state.offsets) == (member.member_epoch,
                                                                              member.member_epoch, {})
        (described,) = state.members
        assert (described.member_id, described.member_epoch) == (member.member_id, member.member_epoch)
        assert described.assignment == [(unique_topic, p) for p in range(PARTITIONS)]
        listed = subprocess.run([sys.executable, "-m", "minikafka", "groups", "list", "--type", "--state",
                                 "--bootstrap-server", bootstrap], capture_output=True, text=True, timeout=60)
        assert listed.returncode == 0, listed.stderr
        rows = [line.split() for line in listed.stdout.splitlines()]
        assert rows[0] == ["GROUP", "TYPE", "STATE"] and [group, "Share", "Stable"] in rows[1:], listed.stdout
    finally:
        member.close()


def test_a_silent_member_is_fenced_after_the_session_timeout(broker_factory, unique_topic):
    broker = broker_factory(**FAST_SHARE_GROUPS)
    bootstrap = broker.bootstrap_servers
    topic_id = create_topic(bootstrap, unique_topic)
    group = f"share-{uuid.uuid4()}"
    stays, silent = ShareMember(bootstrap, group, [unique_topic]), ShareMember(bootstrap, group, [unique_topic])
    try:
        heartbeat_until([stays, silent], lambda: owned([stays, silent], topic_id) == list(range(PARTITIONS))
                        and len(stays.assignment.get(topic_id, [])) == 2, what="two members sharing")
        # `silent` stops heartbeating; after the session timeout its partitions go to `stays`.
        heartbeat_until([stays], lambda: owned([stays], topic_id) == list(range(PARTITIONS)), timeout=30,
                        what="the silent member's partitions to move")
        described = describe_share_group(bootstrap, group)
        assert [m.member_id for m in described.members] == [stays.member_id]
        # The fenced member is told so, and rejoins from scratch.
        assert silent.send(silent.member_epoch, None).error_code == UNKNOWN_MEMBER_ID
    finally:
        stays.close()
        silent.close()


def test_describe_list_delete_and_type_conflicts_as_kafka(broker_factory, unique_topic):
    broker = broker_factory(**FAST_SHARE_GROUPS)
    bootstrap = broker.bootstrap_servers
    topic_id = create_topic(bootstrap, unique_topic)
    group = f"share-{uuid.uuid4()}"
    member = ShareMember(bootstrap, group, [unique_topic])
    try:
        assert member.heartbeat().error_code == 0
        _node, address = find_coordinator(bootstrap, group)
        with RawConnection(address) as raw:
            listed = raw.request(ListGroupsRequest[5](states_filter=[], types_filter=["share"]))
            assert [(g.group_id, g.protocol_type, g.group_state, g.group_type) for g in listed.groups] == [
                (group, "share", "Stable", "share")]
            assert raw.request(ListGroupsRequest[5](states_filter=["empty"], types_filter=["Share"])).groups == []
            (described,) = raw.request(DescribeGroupsRequest[5](groups=[group],
                                                                include_authorized_operations=False)).groups
            # DescribeGroups describes classic groups only: v5 answers Dead without an error.
            assert (described.error_code, described.group_state) == (0, "Dead")
            # A classic member may not join, nor a consumer-protocol one.
            J = JoinGroupRequest[5]
            join = raw.request(J(group_id=group, session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id="",
                                 group_instance_id=None, protocol_type="consumer",
                                 protocols=[J.JoinGroupRequestProtocol(name="range", metadata=b"")]))
            assert join.error_code == INCONSISTENT_GROUP_PROTOCOL
            consumer = raw.request(ConsumerGroupHeartbeatRequest[1](
                group_id=group, member_id=str(uuid.uuid4()), member_epoch=0, rebalance_timeout_ms=10000,
                subscribed_topic_names=[unique_topic], topic_partitions=[]))
            assert (consumer.error_code, consumer.error_message) == (GROUP_ID_NOT_FOUND,
                                                                     f"Group {group} is not a consumer group.")
            deleted = raw.request(DeleteGroupsRequest[2](groups_names=[group]))
            assert deleted.results[0].error_code == NON_EMPTY_GROUP
            # A share group has no committed offsets: OffsetCommit and OffsetFetch answer as Kafka's ShareGroup.
            C = OffsetCommitRequest[8]
            P = C.OffsetCommitRequestTopic.OffsetCommitRequestPartition
            committed = raw.request(C(group_id=group, generation_id_or_member_epoch=-1, member_id="",
                                      group_instance_id=None, topics=[C.OffsetCommitRequestTopic(
                                          name=unique_topic, partitions=[P(partition_index=0, committed_offset=1,
                                                                           committed_leader_epoch=-1,
                                                                           committed_metadata="")])]))
            assert committed.topics[0].partitions[0].error_code == GROUP_ID_NOT_FOUND
            F = OffsetFetchRequest[8]
            (fetched,) = raw.request(F(groups=[F.OffsetFetchRequestGroup(group_id=group, topics=None)],
                                       require_stable=False)).groups
            assert fetched.error_code == GROUP_ID_NOT_FOUND
        unknown = describe_share_group(bootstrap, "no-such-group")
        assert (unknown.error_code, unknown.error_message) == (GROUP_ID_NOT_FOUND, "Group no-such-group not found.")
        invalid = member.send(0, None)
        assert (invalid.error_code, invalid.error_message) == (INVALID_REQUEST,
                                                               "SubscribedTopicNames must be set in first request.")
        wait_until(lambda: share_states(bootstrap, group, topic_id, PARTITIONS) == {
            p: (1, -1) for p in range(PARTITIONS)}, timeout=30, message="the share state of every partition")
        assert member.leave().error_code == 0
        with RawConnection(address) as raw:
            assert raw.request(DeleteGroupsRequest[2](groups_names=[group])).results[0].error_code == 0
        assert describe_share_group(bootstrap, group).error_code == GROUP_ID_NOT_FOUND
        # Its share state went first (DeleteShareGroupState): the coordinator answers the defaults again.
        assert share_states(bootstrap, group, topic_id, PARTITIONS) == {p: (0, -1) for p in range(PARTITIONS)}
    finally:
        member.close()


def test_the_share_group_survives_a_coordinator_kill(tmp_path, unique_topic):
    with minikafka.Cluster(brokers=3, data_dir=tmp_path / "cluster", config=FAST_SHARE_GROUPS) as cluster:
        bootstrap = cluster.bootstrap_servers
        topic_id = create_topic(bootstrap, unique_topic, replication=3)
        group = f"share-{uuid.uuid4()}"
        members = [ShareMember(bootstrap, group, [unique_topic]) for _ in range(2)]
        try:
            heartbeat_until(members, lambda: owned(members, topic_id) == list(range(PARTITIONS))
                            and all(m.partitions() == 2 for m in members), what="the group to settle")
            before = describe_share_group(bootstrap, group)
            epochs = {m.member_id: m.member_epoch for m in before.members}
            assigned = [dict(m.assignment) for m in members]
            old, _address = find_coordinator(bootstrap, group)
            cluster.broker(old).kill()
            survivors = ",".join(b.bootstrap_servers for b in cluster.brokers if b.node_id != old)
            for m in members:
                m.bootstrap = survivors
                m.last = None
                m.close()
            wait_until(lambda: find_coordinator(survivors, group)[0] != old, timeout=30,
                       message="a new coordinator")
            heartbeat_until(members, lambda: all(m.last is not None and m.last.error_code == 0 and
                                                 m.epochs_seen[-1] == epochs[m.member_id] for m in members),
                            timeout=60,
                            what="the members to heartbeat with the new coordinator")
            after = describe_share_group(survivors, group)
            # The same members at the same epochs with the same partitions: the new coordinator loaded the group.
            assert {m.member_id: m.member_epoch for m in after.members} == epochs
            assert (after.group_epoch, after.assignment_epoch) == (before.group_epoch, before.assignment_epoch)
            assert [dict(m.assignment) for m in members] == assigned
        finally:
            for m in members:
                m.close()
