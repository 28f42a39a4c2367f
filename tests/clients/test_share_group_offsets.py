"""A share group's offsets, as kafka-share-groups.sh sees and changes them: DescribeShareGroupOffsets (--describe)
gives each share-partition's start offset, the next record not yet delivered for good; AlterShareGroupOffsets
(--reset-offsets) sets it while the group is empty, so a new member receives the records again from there;
DeleteShareGroupOffsets (--delete-offsets) deletes the share state of a topic."""
from __future__ import annotations

import subprocess
import sys
import time
import uuid

from confluent_kafka.admin import AdminClient, NewTopic

import minikafka
from minikafka import Acl
from minikafka.protocol.client_apis.messages import (
    AlterShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequest,
)
from minikafka.protocol.errors import ErrorCode
from tests.clients.test_share_fetch import set_group_config
from tests.helpers import create_topic, produce_acked
from tests.raw_client import RawConnection
from tests.share_consumer import (
    ACCEPT,
    ShareConsumer,
    ShareMember,
    find_coordinator,
    heartbeat_until,
    new_member_id,
    set_share_version,
    topic_id,
)

TOPIC = "orders"
GROUP = "billing"
DEADLINE_S = 60.0
RECORDS = 10


def coordinator_request(bootstrap: str, request: object, user: tuple[str, str] | None = None) -> object:
    _node, address = find_coordinator(bootstrap, GROUP) if user is None else (0, bootstrap)
    with RawConnection(address) as raw:
        if user is not None:
            raw.authenticate_plain(*user)
        return raw.request(request)


def describe_offsets(bootstrap: str, topics: dict[str, list[int]] | None = None, group: str = GROUP,
                     user: tuple[str, str] | None = None) -> object:
    """DescribeShareGroupOffsets v0 of one group: of `topics`, or of every initialized share-partition (None)."""
    R = DescribeShareGroupOffsetsRequest
    G = R.DescribeShareGroupOffsetsRequestGroup
    asked = None if topics is None else [G.DescribeShareGroupOffsetsRequestTopic(topic_name=t, partitions=ps)
                                         for t, ps in topics.items()]
    response = coordinator_request(bootstrap, R[0](groups=[G(group_id=group, topics=asked)]), user)
    (described,) = response.groups  # type: ignore[attr-defined]
    assert described.group_id == group
    return described


def start_offsets(described: object) -> dict[tuple[str, int], tuple[int, int]]:
    """(topic, partition) -> (start offset, partition error) of a described group."""
    return {(t.topic_name, p.partition_index): (p.start_offset, p.error_code)
            for t in described.topics for p in t.partitions}  # type: ignore[attr-defined]


def alter_offsets(bootstrap: str, offsets: dict[str, dict[int, int]], group: str = GROUP,
                  user: tuple[str, str] | None = None) -> object:
    R = AlterShareGroupOffsetsRequest
    T = R.AlterShareGroupOffsetsRequestTopic
    return coordinator_request(bootstrap, R[0](group_id=group, topics=[T(topic_name=t, partitions=[
        T.AlterShareGroupOffsetsRequestPartition(partition_index=p, start_offset=o) for p, o in ps.items()])
        for t, ps in offsets.items()]), user)


def altered(response: object) -> dict[tuple[str, int], int]:
    return {(t.topic_name, p.partition_index): p.error_code
            for t in response.responses for p in t.partitions}  # type: ignore[attr-defined]


def delete_offsets(bootstrap: str, topics: list[str], group: str = GROUP,
                   user: tuple[str, str] | None = None) -> object:
    R = DeleteShareGroupOffsetsRequest
    return coordinator_request(bootstrap, R[0](group_id=group, topics=[
        R.DeleteShareGroupOffsetsRequestTopic(topic_name=t) for t in topics]), user)


def consume_all(bootstrap: str, tid: uuid.UUID, expected: int) -> list[int]:
    """A new member joins, fetches and accepts until it has `expected` records of partition 0, then leaves and
    closes its share session and connection; the offsets it received, in order."""
    member = ShareMember(bootstrap, GROUP, [TOPIC], member_id=new_member_id())
    consumer = ShareConsumer(bootstrap, GROUP, member_id=member.member_id)
    received: list[int] = []
    try:
        heartbeat_until([member], lambda: member.assignment.get(tid) == [0], DEADLINE_S, "the partition assigned")
        deadline = time.monotonic() + DEADLINE_S
        while len(received) < expected:
            assert time.monotonic() < deadline, received
            if member.due():
                member.heartbeat()
            fetched = consumer.fetch([(tid, 0)], max_wait_ms=200)
            assert fetched.error_code == 0, fetched.response
            offsets = fetched.offsets((tid, 0))
            if offsets:
                received += offsets
                answered = consumer.acknowledge({(tid, 0): [(min(offsets), max(offsets), [ACCEPT])]})
                assert all(p.error_code == 0 for t in answered.responses for p in t.partitions), answered
        consumer.close()
        assert member.leave().error_code == 0  # type: ignore[attr-defined]
    finally:
        consumer.conn.close()
        member.close()
    return received


def ready(bootstrap: str) -> uuid.UUID:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(DEADLINE_S)
    set_group_config([bootstrap], GROUP, "share.auto.offset.reset", "earliest")
    produce_acked(bootstrap, TOPIC, RECORDS, partitions=1)
    return topic_id(bootstrap, TOPIC)


def test_describe_alter_and_delete_share_group_offsets(broker) -> None:
    bootstrap = broker.bootstrap_servers
    tid = ready(bootstrap)
    assert consume_all(bootstrap, tid, RECORDS) == list(range(RECORDS))

    # Every record was accepted: the start offset is the next one, past them all.
    described = describe_offsets(bootstrap)
    assert described.error_code == 0  # type: ignore[attr-defined]
    assert [(t.topic_name, t.topic_id) for t in described.topics] == [(TOPIC, tid)]  # type: ignore[attr-defined]
    assert start_offsets(described) == {(TOPIC, 0): (RECORDS, 0)}
    # As kafka-share-groups.sh --describe prints them.
    cli = subprocess.run([sys.executable, "-m", "minikafka", "groups", "describe", "--group", GROUP,
                          "--bootstrap-server", bootstrap], capture_output=True, text=True, timeout=DEADLINE_S)
    assert cli.returncode == 0, cli.stderr
    assert [line.split() for line in cli.stdout.splitlines() if line] == [
        ["GROUP", "TOPIC", "PARTITION", "START-OFFSET"], [GROUP, TOPIC, "0", str(RECORDS)]], cli.stdout
    assert f"Share group '{GROUP}' has no active members." in cli.stderr
    # Asked by name, with a topic that does not exist: that one has no offset (-1), and no error.
    described = describe_offsets(bootstrap, {TOPIC: [0], "nowhere": [0, 1]})
    assert start_offsets(described) == {(TOPIC, 0): (RECORDS, 0), ("nowhere", 0): (-1, 0), ("nowhere", 1): (-1, 0)}
    # The zero topic id, which kafka-python decodes as None.
    assert {t.topic_name: t.topic_id for t in described.topics}["nowhere"] is None  # type: ignore[attr-defined]

    # While a member is in the group, its offsets cannot change.
    member = ShareMember(bootstrap, GROUP, [TOPIC], member_id=new_member_id())
    try:
        heartbeat_until([member], lambda: member.assignment.get(tid) == [0], DEADLINE_S, "the member assigned")
        refused = alter_offsets(bootstrap, {TOPIC: {0: 0}})
        assert (refused.error_code, refused.responses) == (ErrorCode.NON_EMPTY_GROUP, [])  # type: ignore[attr-defined]
        refused = delete_offsets(bootstrap, [TOPIC])
        assert (refused.error_code, refused.responses) == (ErrorCode.NON_EMPTY_GROUP, [])  # type: ignore[attr-defined]
        assert member.leave().error_code == 0  # type: ignore[attr-defined]
    finally:
        member.close()
    assert start_offsets(describe_offsets(bootstrap)) == {(TOPIC, 0): (RECORDS, 0)}

    # The offsets reset: the empty group goes back to offset 0, and a new member receives every record again.
    answer = alter_offsets(bootstrap, {TOPIC: {0: 0, 5: 0}, "nowhere": {0: 0}})
    assert answer.error_code == 0, answer  # type: ignore[attr-defined]
    assert altered(answer) == {(TOPIC, 0): 0, (TOPIC, 5): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                               ("nowhere", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert start_offsets(describe_offsets(bootstrap)) == {(TOPIC, 0): (0, 0)}
    assert consume_all(bootstrap, tid, RECORDS) == list(range(RECORDS))
    assert start_offsets(describe_offsets(bootstrap)) == {(TOPIC, 0): (RECORDS, 0)}

    # Deleting the topic's offsets deletes its share state: nothing to describe, -1 when asked by name.
    answer = delete_offsets(bootstrap, [TOPIC, "nowhere"])
    assert answer.error_code == 0, answer  # type: ignore[attr-defined]
    assert {t.topic_name: (t.topic_id, t.error_code) for t in answer.responses} == {  # type: ignore[attr-defined]
        TOPIC: (tid, 0), "nowhere": (None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)}
    assert describe_offsets(bootstrap).topics == []  # type: ignore[attr-defined]
    assert start_offsets(describe_offsets(bootstrap, {TOPIC: [0]})) == {(TOPIC, 0): (-1, 0)}
    again = delete_offsets(bootstrap, [TOPIC])
    assert [(t.topic_name, t.error_code, t.error_message) for t in again.responses] == [  # type: ignore[attr-defined]
        (TOPIC, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "There is no offset information to delete.")]


def test_unknown_group_and_share_version_0(broker) -> None:
    bootstrap = broker.bootstrap_servers
    ready(bootstrap)
    # A group that does not exist has no offsets to describe, and none to alter or delete.
    described = describe_offsets(bootstrap, group="nobody")
    assert (described.error_code, described.topics) == (0, [])  # type: ignore[attr-defined]
    assert start_offsets(describe_offsets(bootstrap, {TOPIC: [0]}, group="nobody")) == {(TOPIC, 0): (-1, 0)}
    assert alter_offsets(bootstrap, {TOPIC: {0: 0}}, group="nobody").error_code == (  # type: ignore[attr-defined]
        ErrorCode.GROUP_ID_NOT_FOUND)
    assert delete_offsets(bootstrap, [TOPIC], group="nobody").error_code == (  # type: ignore[attr-defined]
        ErrorCode.GROUP_ID_NOT_FOUND)

    set_share_version(bootstrap, 0, 2)  # a safe downgrade: share groups are turned away
    try:
        assert describe_offsets(bootstrap).error_code == ErrorCode.UNSUPPORTED_VERSION  # type: ignore[attr-defined]
        assert alter_offsets(bootstrap, {TOPIC: {0: 0}}).error_code == (  # type: ignore[attr-defined]
            ErrorCode.UNSUPPORTED_VERSION)
        assert delete_offsets(bootstrap, [TOPIC]).error_code == ErrorCode.UNSUPPORTED_VERSION  # type: ignore[attr-defined]
    finally:
        set_share_version(bootstrap, 1, 1)


def test_authorization_of_the_share_group_offsets_apis(tmp_path) -> None:
    """Describe needs DESCRIBE on the group and on each topic, Alter READ on the group, Delete DELETE on it."""
    alice = ("alice", "alice-secret")
    with minikafka.Broker(security="SASL_PLAINTEXT", users=dict([alice]), acls=[],
                          data_dir=tmp_path / "data") as broker:
        bootstrap = broker.bootstrap_servers
        admin = broker.client_config(client="kafka-python")
        with RawConnection(bootstrap) as conn:
            conn.authenticate_plain(admin["sasl_plain_username"], admin["sasl_plain_password"])
            create_topic(conn, TOPIC)
        denied = ErrorCode.GROUP_AUTHORIZATION_FAILED
        assert describe_offsets(bootstrap, {TOPIC: [0]}, user=alice).error_code == denied  # type: ignore[attr-defined]
        assert alter_offsets(bootstrap, {TOPIC: {0: 0}}, user=alice).error_code == denied  # type: ignore[attr-defined]
        assert delete_offsets(bootstrap, [TOPIC], user=alice).error_code == denied  # type: ignore[attr-defined]

        broker.add_acls(Acl("User:alice", "DESCRIBE", group=GROUP), Acl("User:alice", "READ", group=GROUP),
                        Acl("User:alice", "DELETE", group=GROUP))
        described = describe_offsets(bootstrap, {TOPIC: [0]}, user=alice)
        assert described.error_code == 0  # type: ignore[attr-defined]
        assert start_offsets(described) == {(TOPIC, 0): (-1, ErrorCode.TOPIC_AUTHORIZATION_FAILED)}
        # With the group allowed, the group itself is looked at: there is no share group of that name.
        assert alter_offsets(bootstrap, {TOPIC: {0: 0}}, user=alice).error_code == (  # type: ignore[attr-defined]
            ErrorCode.GROUP_ID_NOT_FOUND)
        assert delete_offsets(bootstrap, [TOPIC], user=alice).error_code == (  # type: ignore[attr-defined]
            ErrorCode.GROUP_ID_NOT_FOUND)
        broker.add_acls(Acl("User:alice", "DESCRIBE", topic=TOPIC))
        assert start_offsets(describe_offsets(bootstrap, {TOPIC: [0]}, user=alice)) == {(TOPIC, 0): (-1, 0)}
