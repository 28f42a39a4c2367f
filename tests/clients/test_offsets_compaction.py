"""The coordinators' compacted topics stay bounded through the log cleaner: a group committing 100k times leaves
`__consumer_offsets` about a segment long, and a transactional id stored 12k times does the same to
`__transaction_state`; after a kill -9 the coordinators load the compacted partitions back to the same committed
offsets, group members and producer epochs, with a deleted group still gone; offsets committed in transactions are
cleaned as Kafka cleans them (an abort's at once, the last commit's kept where it was written)."""
from __future__ import annotations

import struct
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from kafka.protocol.admin.configs import DescribeConfigsRequest
from kafka.protocol.admin.groups import DeleteGroupsRequest, DescribeGroupsRequest
from kafka.protocol.admin.topics import CreateTopicsRequest
from kafka.protocol.consumer.group import JoinGroupRequest, OffsetCommitRequest, OffsetFetchRequest, SyncGroupRequest
from kafka.protocol.consumer.offsets import ListOffsetsRequest
from kafka.protocol.producer.transaction import InitProducerIdRequest

from minikafka.protocol.errors import ErrorCode
from tests.clients.test_compaction import consume_all
from tests.raw_client import RawConnection

OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_TOPIC = "__transaction_state"
TOPIC_RESOURCE, DYNAMIC_TOPIC_CONFIG = 2, 1  # DescribeConfigs' resource type of a topic, source of its overrides
SEGMENT_BYTES = 1024 * 1024  # the least segment.bytes Kafka allows
# No cleaner threads: all that was written stays on disk until the test's own pass (broker.clean_logs).
MANUAL_CLEANING = {"log_cleaner_enable": "false"}
TOPIC, PARTITIONS = "events", 100
COMMITS = 100_000  # 1000 OffsetCommit requests of 100 partitions each
METADATA_BYTES = 100  # per commit, so the log is many segments long
FILLER_PARTITIONS, FILLER_METADATA_BYTES = 100, 3000
# Epoch bumps of one transactional id, then of other ids (each bumped OTHER_BUMPS times) written after them.
BUSY_BUMPS, OTHER_IDS, OTHER_BUMPS = 12_000, 100, 100
# Record framing (length, attributes, deltas, header count: at most 20 bytes) and a batch header (61 bytes): the
# most a record kept alone in its batch costs besides its key and value.
RECORD_OVERHEAD = 20 + 61


def create(conn: RawConnection, name: str, partitions: int) -> None:
    R = CreateTopicsRequest[7]
    resp = conn.request(R(topics=[R.CreatableTopic(name=name, num_partitions=partitions, replication_factor=1,
                                                   assignments=[], configs=[])], timeout_ms=10000))
    assert resp.topics[0].error_code == 0


def commit(conn: RawConnection, group: str, offsets: dict[int, tuple[int, str]], member_id: str = "",
           generation: int = -1) -> None:
    R = OffsetCommitRequest[8]
    P = R.OffsetCommitRequestTopic.OffsetCommitRequestPartition
    resp = conn.request(R(group_id=group, generation_id_or_member_epoch=generation, member_id=member_id,
                          group_instance_id=None,
                          topics=[R.OffsetCommitRequestTopic(name=TOPIC, partitions=[
                              P(partition_index=p, committed_offset=o, committed_leader_epoch=-1,
                                committed_metadata=m) for p, (o, m) in offsets.items()])]))
    assert {p.error_code for p in resp.topics[0].partitions} == {0}


def fetch(conn: RawConnection, group: str) -> dict[int, tuple[int, str]]:
    """The group's committed offsets, once its coordinator has loaded them (a restarted broker may still be
    loading: COORDINATOR_LOAD_IN_PROGRESS)."""
    R = OffsetFetchRequest[7]
    deadline = time.monotonic() + 30
    while True:
        resp = conn.request(R(group_id=group, topics=None, require_stable=False))
        if resp.error_code != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert resp.error_code == 0
    return {p.partition_index: (p.committed_offset, p.metadata) for t in resp.topics for p in t.partitions}


def stable_member(conn: RawConnection, group: str) -> tuple[str, int]:
    """A classic group of one member that got its assignment: its member id and generation."""
    J, S = JoinGroupRequest[3], SyncGroupRequest[3]  # before v4 a member joins in one round trip
    joined = conn.request(J(group_id=group, session_timeout_ms=60000, rebalance_timeout_ms=60000, member_id="",
                            protocol_type="consumer", protocols=[J.JoinGroupRequestProtocol(name="range",
                                                                                           metadata=b"m")]))
    assert joined.error_code == 0
    synced = conn.request(S(group_id=group, generation_id=joined.generation_id, member_id=joined.member_id,
                            group_instance_id=None, assignments=[S.SyncGroupRequestAssignment(
                                member_id=joined.member_id, assignment=b"a")]))
    assert (synced.error_code, synced.assignment) == (0, b"a")
    return joined.member_id, joined.generation_id


def described(conn: RawConnection, group: str) -> tuple:
    (g,) = conn.request(DescribeGroupsRequest[3](groups=[group], include_authorized_operations=False)).groups
    return (g.error_code, g.group_state, g.protocol_type, g.protocol_data,
            [(m.member_id, m.member_metadata, m.member_assignment) for m in g.members])


def log_bounds(conn: RawConnection) -> tuple[int, int]:
    """The log start and end offsets of the only partition of `__consumer_offsets`."""
    R = ListOffsetsRequest[7]
    bounds = []
    for timestamp in (-2, -1):
        resp = conn.request(R(replica_id=-1, isolation_level=0, topics=[R.ListOffsetsTopic(
            name=OFFSETS_TOPIC, partitions=[R.ListOffsetsTopic.ListOffsetsPartition(
                partition_index=0, current_leader_epoch=-1, timestamp=timestamp)])]))
        bounds.append(resp.topics[0].partitions[0].offset)
    return bounds[0], bounds[1]


def log_bytes(broker) -> int:
    return sum(f.stat().st_size for f in Path(broker.data_dir, f"{OFFSETS_TOPIC}-0").glob("*.log"))


def offset_record_bytes(group: str, metadata_bytes: int) -> int:
    """Key and value of an OffsetCommit record: key v1 (group, topic, partition), value v3 (offset, leader epoch,
    metadata, commit time)."""
    return (2 + 2 + len(group) + 2 + len(TOPIC) + 4) + (2 + 8 + 4 + 2 + metadata_bytes + 8)


def test_a_group_committing_100k_times_keeps_a_bounded_log_that_reloads_after_a_crash(broker_factory):
    broker = broker_factory(offsets_topic_num_partitions=1, offsets_topic_segment_bytes=SEGMENT_BYTES,
                            group_initial_rebalance_delay_ms=0, **MANUAL_CLEANING)
    with RawConnection(broker.bootstrap_servers, timeout=60) as conn:
        conn.find_coordinator("busy")
        create(conn, TOPIC, max(PARTITIONS, FILLER_PARTITIONS))
        member, generation = stable_member(conn, "members")
        commit(conn, "members", {0: (7, "seven")}, member, generation)
        group = described(conn, "members")
        assert group == (0, "Stable", "consumer", "range", [(member, b"m", b"a")])
        commit(conn, "dead", {p: (p, "gone") for p in range(PARTITIONS)})
        assert conn.request(DeleteGroupsRequest[2](groups_names=["dead"])).results[0].error_code == 0
        for i in range(COMMITS // PARTITIONS):
            commit(conn, "busy", {p: (i * PARTITIONS + p, f"{i:0{METADATA_BYTES}d}") for p in range(PARTITIONS)})
        expected = fetch(conn, "busy")
        # Another group writes more than a segment, so every record of "busy" is behind the active segment and
        # thus cleanable.
        for i in range(SEGMENT_BYTES // (FILLER_PARTITIONS * FILLER_METADATA_BYTES) + 1):
            commit(conn, "filler", {p: (i, str(i) * FILLER_METADATA_BYTES) for p in range(FILLER_PARTITIONS)})
        filler = fetch(conn, "filler")
        bounds = log_bounds(conn)
    assert bounds[0] == 0
    last = COMMITS // PARTITIONS - 1
    assert expected == {p: (last * PARTITIONS + p, f"{last:0{METADATA_BYTES}d}") for p in range(PARTITIONS)}
    written = log_bytes(broker)
    assert written > COMMITS * offset_record_bytes("busy", METADATA_BYTES)

    broker.clean_logs(OFFSETS_TOPIC)
    # The active segment is never cleaned; behind it at most one record of each key stays, each at worst alone in
    # its batch: the offsets of "busy" and "filler", the tombstones of "dead" (its offsets and its group), and the
    # offset and group metadata of "members" (one member: well under 300 bytes).
    kept_at_most = (PARTITIONS * (offset_record_bytes("busy", METADATA_BYTES) + RECORD_OVERHEAD)
                    + FILLER_PARTITIONS * (offset_record_bytes("filler", FILLER_METADATA_BYTES) + RECORD_OVERHEAD)
                    + (PARTITIONS + 1) * (offset_record_bytes("dead", 0) + RECORD_OVERHEAD)
                    + offset_record_bytes("members", len("seven")) + RECORD_OVERHEAD + 300 + RECORD_OVERHEAD)
    cleaned = log_bytes(broker)
    assert cleaned <= SEGMENT_BYTES + kept_at_most
    assert cleaned < written / 10

    broker.kill()
    broker.start()
    with RawConnection(broker.bootstrap_servers, timeout=60) as conn:
        conn.find_coordinator("busy")
        assert fetch(conn, "busy") == expected
        assert fetch(conn, "filler") == filler
        assert fetch(conn, "dead") == {}
        assert fetch(conn, "members") == {0: (7, "seven")}
        assert described(conn, "members") == group
        # Kept records stay at their offsets: the log neither starts later nor grew.
        assert log_bounds(conn) == bounds


def init_producer_id(conn: RawConnection, transactional_id: str) -> tuple[int, int]:
    """InitProducerId without a producer id: the coordinator bumps the id's epoch and stores its new state (once it
    has loaded its partition: a restarted broker may still be loading, COORDINATOR_LOAD_IN_PROGRESS)."""
    R = InitProducerIdRequest[4]
    deadline = time.monotonic() + 30
    while True:
        resp = conn.request(R(transactional_id=transactional_id, transaction_timeout_ms=60000, producer_id=-1,
                              producer_epoch=-1))
        if resp.error_code != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert resp.error_code == 0
    return resp.producer_id, resp.producer_epoch


def transaction_log_bytes(broker) -> int:
    return sum(f.stat().st_size for f in Path(broker.data_dir, f"{TRANSACTION_TOPIC}-0").glob("*.log"))


def test_transaction_state_stored_many_times_stays_bounded_and_reloads_after_a_crash(broker_factory):
    broker = broker_factory(transaction_state_log_num_partitions=1,
                            transaction_state_log_segment_bytes=SEGMENT_BYTES, **MANUAL_CLEANING)
    with RawConnection(broker.bootstrap_servers, timeout=60) as conn:
        first = init_producer_id(conn, "busy-txn")
        for _ in range(BUSY_BUMPS - 1):
            last = init_producer_id(conn, "busy-txn")
        # Then other ids write more than a segment, so every record of "busy-txn" is behind the active segment.
        others = {}
        for _ in range(OTHER_BUMPS):
            others = {f"other-{i}": init_producer_id(conn, f"other-{i}") for i in range(OTHER_IDS)}
    assert last == (first[0], first[1] + BUSY_BUMPS - 1)
    written = transaction_log_bytes(broker)
    assert written > 2 * SEGMENT_BYTES

    broker.clean_logs(TRANSACTION_TOPIC)
    # The active segment is never cleaned; behind it at most one record of each transactional id stays, each at
    # worst alone in its batch (a state without partitions: well under 200 bytes with the batch header).
    cleaned = transaction_log_bytes(broker)
    assert cleaned <= SEGMENT_BYTES + (1 + OTHER_IDS) * 200
    assert cleaned < written / 2

    broker.kill()
    broker.start()
    with RawConnection(broker.bootstrap_servers, timeout=60) as conn:
        # The reloaded state bumps from the last epoch stored: the coordinator knows each id as it was.
        assert init_producer_id(conn, "busy-txn") == (last[0], last[1] + 1)
        for transactional_id, (producer_id, epoch) in others.items():
            assert init_producer_id(conn, transactional_id) == (producer_id, epoch + 1)


def test_the_offsets_topic_is_created_with_kafkas_configs(broker_factory):
    """As Kafka's groupMetadataTopicConfigs: compacted, the producer's compression, offsets.topic.segment.bytes
    segments; all topic overrides."""
    broker = broker_factory(offsets_topic_segment_bytes=10 * 1024 * 1024)
    R = DescribeConfigsRequest[4]
    with RawConnection(broker.bootstrap_servers) as conn:
        conn.find_coordinator("g")
        response = conn.request(R(resources=[R.DescribeConfigsResource(
            resource_type=TOPIC_RESOURCE, resource_name=OFFSETS_TOPIC, configuration_keys=None)],
            include_synonyms=False, include_documentation=False))
    (result,) = response.results
    assert result.error_code == 0
    assert {c.name: c.value for c in result.configs if c.config_source == DYNAMIC_TOPIC_CONFIG} == {
        "cleanup.policy": "compact", "compression.type": "producer", "segment.bytes": str(10 * 1024 * 1024)}


TXN_GROUP, TXN_PARTITIONS, TRANSACTIONS = "txn-group", 10, 30  # every third transaction aborts, the last one too


def group_offset_records(bootstrap: str, end_offset: int) -> list[tuple[int, int, int]]:
    """(log offset, partition, committed offset) of each offset record of TXN_GROUP in `__consumer_offsets`, read
    uncommitted (aborted records included, control batches not), with confluent-kafka."""
    records = []
    for offset, key, value in consume_all(bootstrap, OFFSETS_TOPIC, end_offset, isolation="read_uncommitted"):
        key_version, group_length = struct.unpack_from(">hh", key)
        if key_version > 1 or key[4:4 + group_length].decode() != TXN_GROUP:
            continue
        topic_length = struct.unpack_from(">h", key, 4 + group_length)[0]
        partition = struct.unpack_from(">i", key, 6 + group_length + topic_length)[0]
        records.append((offset, partition, struct.unpack_from(">q", value, 2)[0]))
    return records


def test_transactional_offset_commits_are_cleaned_as_kafka_cleans_them_and_reload_after_a_crash(broker_factory):
    """A transactional producer commits offsets in some transactions and aborts others. Cleaning
    `__consumer_offsets` drops the aborted transactions' offset records at once and keeps each partition's last
    committed offset record at its offset, and after a kill -9 the coordinator loads the compacted log to the last
    committed transaction's offsets."""
    broker = broker_factory(offsets_topic_num_partitions=1, offsets_topic_segment_bytes=SEGMENT_BYTES,
                            transaction_state_log_num_partitions=1, group_initial_rebalance_delay_ms=0,
                            **MANUAL_CLEANING)
    bootstrap = broker.bootstrap_servers
    with RawConnection(bootstrap, timeout=60) as conn:
        conn.find_coordinator(TXN_GROUP)
        create(conn, TOPIC, max(TXN_PARTITIONS, FILLER_PARTITIONS))
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": TXN_GROUP, "enable.auto.commit": False})
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "offsets-txn"})
    committed: dict[int, int] = {}
    try:
        producer.init_transactions(30)
        for t in range(TRANSACTIONS):
            producer.begin_transaction()
            offsets = [TopicPartition(TOPIC, p, 1000 * t + p) for p in range(TXN_PARTITIONS)]
            producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), 30)
            if t % 3 == 2:
                producer.abort_transaction(30)
            else:
                producer.commit_transaction(30)
                committed = {tp.partition: tp.offset for tp in offsets}
    finally:
        producer.flush(30)
        consumer.close()
    with RawConnection(bootstrap, timeout=60) as conn:
        conn.find_coordinator(TXN_GROUP)
        expected = fetch(conn, TXN_GROUP)
        # Another group writes more than a segment, so every transactional record is behind the active segment.
        for i in range(SEGMENT_BYTES // (FILLER_PARTITIONS * FILLER_METADATA_BYTES) + 1):
            commit(conn, "filler", {p: (i, str(i) * FILLER_METADATA_BYTES) for p in range(FILLER_PARTITIONS)})
        bounds = log_bounds(conn)
    assert expected == {p: (offset, "") for p, offset in committed.items()}
    written = group_offset_records(bootstrap, bounds[1])
    assert len(written) == TRANSACTIONS * TXN_PARTITIONS

    broker.clean_logs(OFFSETS_TOPIC)
    # Per partition, the record of the last committed transaction, where it was written; nothing of an abort.
    last_written = {}
    for offset, partition, committed_offset in written:
        if (committed_offset // 1000) % 3 != 2:
            last_written[partition] = (offset, partition, committed_offset)
    assert group_offset_records(bootstrap, bounds[1]) == sorted(last_written.values())

    broker.kill()
    broker.start()
    with RawConnection(bootstrap, timeout=60) as conn:
        conn.find_coordinator(TXN_GROUP)
        assert fetch(conn, TXN_GROUP) == expected
        assert log_bounds(conn) == bounds
