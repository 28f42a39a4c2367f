"""Committed offsets live in `__consumer_offsets` as Kafka's own records, readable by any consumer of that topic."""
from __future__ import annotations

import struct

from kafka import KafkaConsumer, TopicPartition
from kafka.protocol.admin.topics import CreateTopicsRequest
from kafka.protocol.consumer.group import OffsetCommitRequest

from minikafka.broker.coordinator.group.group_metadata_manager import partition_for
from tests.raw_client import RawConnection

OFFSETS_TOPIC = "__consumer_offsets"
PARTITIONS = 50


def create(conn, name, partitions):
    R = CreateTopicsRequest[7]
    resp = conn.request(R(topics=[R.CreatableTopic(name=name, num_partitions=partitions, replication_factor=1,
                                                   assignments=[], configs=[])], timeout_ms=10000))
    assert resp.topics[0].error_code == 0


def commit(conn, group, topic, offsets: dict[int, int], metadata=""):
    R = OffsetCommitRequest[8]
    P = R.OffsetCommitRequestTopic.OffsetCommitRequestPartition
    resp = conn.request(R(group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                          topics=[R.OffsetCommitRequestTopic(name=topic, partitions=[
                              P(partition_index=p, committed_offset=o, committed_leader_epoch=-1,
                                committed_metadata=metadata) for p, o in offsets.items()])]))
    assert {p.error_code for p in resp.topics[0].partitions} == {0}


def test_commits_are_kafka_offset_commit_records_in_consumer_offsets(broker_factory):
    broker = broker_factory()
    with RawConnection(broker.bootstrap_servers) as conn:
        conn.find_coordinator("g")
        create(conn, "orders", 1)
        commit(conn, "billing", "orders", {0: 42}, metadata="md")
    partition = partition_for("billing", PARTITIONS)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest",
                             enable_auto_commit=False, group_id=None)
    try:
        tp = TopicPartition(OFFSETS_TOPIC, partition)
        consumer.assign([tp])
        records = []
        for _ in range(50):
            records += consumer.poll(timeout_ms=200).get(tp, [])
            if records:
                break
    finally:
        consumer.close()
    assert len(records) == 1
    key, value = records[0].key, records[0].value
    # OffsetCommitKey v1: group, topic, partition; OffsetCommitValue v3: offset, leader epoch, metadata, commit time.
    assert key == struct.pack(">hh", 1, 7) + b"billing" + struct.pack(">h", 6) + b"orders" + struct.pack(">i", 0)
    version, offset, epoch, md_len = struct.unpack_from(">hqih", value)
    assert (version, offset, epoch, value[16:16 + md_len]) == (3, 42, -1, b"md")
    (commit_time,) = struct.unpack_from(">q", value, 16 + md_len)
    assert abs(commit_time - records[0].timestamp) < 1000
