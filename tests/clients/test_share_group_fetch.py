"""Membership and the data path together: members join a share group with ShareGroupHeartbeat, the group
coordinator assigns the partitions and initializes their share state (no test setup does), and the members fetch
and acknowledge their records with ShareFetch / ShareAcknowledge, each record delivered to one member."""
from __future__ import annotations

import time

from confluent_kafka.admin import AdminClient, NewTopic

from tests.clients.test_share_fetch import set_group_config
from tests.helpers import produce_acked
from tests.share_consumer import ACCEPT, ShareConsumer, ShareMember, heartbeat_until, new_member_id, topic_id

TOPIC = "jobs"
GROUP = "crew"
DEADLINE_S = 60.0


def test_members_assigned_by_heartbeat_fetch_their_records(broker) -> None:
    bootstrap = broker.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result(DEADLINE_S)
    set_group_config([bootstrap], GROUP, "share.auto.offset.reset", "earliest")
    produce_acked(bootstrap, TOPIC, 20, partitions=2)
    tid = topic_id(bootstrap, TOPIC)
    members = [ShareMember(bootstrap, GROUP, [TOPIC], member_id=new_member_id()) for _ in range(2)]
    heartbeat_until(members, lambda: all(m.assignment.get(tid) for m in members), DEADLINE_S, "both assigned")
    got: dict[tuple[int, int], str] = {}
    consumers = [ShareConsumer(bootstrap, GROUP, member_id=m.member_id) for m in members]
    try:
        deadline = time.monotonic() + DEADLINE_S
        while len(got) < 20:
            assert time.monotonic() < deadline, sorted(got)
            for member, consumer in zip(members, consumers, strict=True):
                if member.due():
                    member.heartbeat()
                fetched = consumer.fetch([(tid, p) for p in member.assignment.get(tid, [])], max_wait_ms=200)
                assert fetched.error_code == 0, fetched.response
                acks = {}
                for (t, partition), records in fetched.records.items():
                    for offset in records:
                        assert (partition, offset) not in got, "delivered twice"
                        got[(partition, offset)] = member.member_id
                    acks[(t, partition)] = [(min(records), max(records), [ACCEPT])]
                if acks:
                    answered = consumer.acknowledge(acks)
                    assert all(p.error_code == 0 for t in answered.responses for p in t.partitions), answered
    finally:
        for consumer in consumers:
            consumer.close()
            consumer.conn.close()
    assert sorted(got) == sorted((p, o) for p in range(2) for o in range(10))
