"""TxnOffsetCommit over the wire, against a broker process: offsets committed in a producer's transaction are not
returned by OffsetFetch, which with require_stable answers their partitions UNSTABLE_OFFSET_COMMIT, until the
transaction's marker in the group's `__consumer_offsets` partition commits them (COMMIT) or drops them (ABORT); a
broker loading that partition afterwards serves the same.

Each test opens a real transaction (InitProducerId, then AddOffsetsToTxn below v5, whose commit adds the partition
itself) and writes the marker by hand, as the coordinator would, to see the group's side alone."""
from __future__ import annotations

import pytest
from kafka.protocol.consumer.group import OffsetFetchRequest
from kafka.protocol.producer.transaction import (
    AddOffsetsToTxnRequest,
    InitProducerIdRequest,
    TxnOffsetCommitRequest,
    WriteTxnMarkersRequest,
)

from minikafka.broker.coordinator.coordinator_log import partition_for
from minikafka.protocol.errors import ErrorCode
from tests.helpers import create_topic
from tests.raw_client import RawConnection

OFFSETS_TOPIC, OFFSETS_PARTITIONS = "__consumer_offsets", 50
TOPIC = "input"
NO_OFFSET = -1
E = ErrorCode


Producer = tuple[str, int, int]  # transactional id, producer id, epoch


def begin(conn: RawConnection, transactional_id: str) -> Producer:
    """A transactional producer, from the coordinator (this broker)."""
    init = conn.request(InitProducerIdRequest[4](transactional_id=transactional_id, transaction_timeout_ms=600_000,
                                                 producer_id=-1, producer_epoch=-1))
    assert init.error_code == E.NONE
    return transactional_id, init.producer_id, init.producer_epoch


def add_offsets(conn: RawConnection, producer: Producer, group: str) -> None:
    transactional_id, producer_id, epoch = producer
    assert conn.request(AddOffsetsToTxnRequest[3](transactional_id=transactional_id, producer_id=producer_id,
                                                  producer_epoch=epoch, group_id=group)).error_code == E.NONE


def txn_offset_commit(conn: RawConnection, version: int, group: str, producer: Producer,
                      offsets: dict[tuple[str, int], int], *, generation: int = -1,
                      member: str = "") -> dict[tuple[str, int], int]:
    R = TxnOffsetCommitRequest[version]
    T = R.TxnOffsetCommitRequestTopic
    by_topic: dict[str, list] = {}
    for (topic, partition), offset in offsets.items():
        by_topic.setdefault(topic, []).append(T.TxnOffsetCommitRequestPartition(
            partition_index=partition, committed_offset=offset, committed_leader_epoch=-1, committed_metadata="m"))
    transactional_id, producer_id, epoch = producer
    response = conn.request(R(transactional_id=transactional_id, group_id=group, producer_id=producer_id,
                              producer_epoch=epoch, generation_id=generation, member_id=member, group_instance_id=None,
                              topics=[T(name=topic, partitions=parts) for topic, parts in by_topic.items()]))
    return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}


def offset_fetch(conn: RawConnection, version: int, group: str, partitions: list[int], *,
                 require_stable: bool = False) -> tuple[int, dict[int, tuple[int, int]]]:
    """(group's or top-level error, {partition: (committed offset, error)}) for partitions of TOPIC."""
    R = OffsetFetchRequest[version]
    if version >= 8:
        G = R.OffsetFetchRequestGroup
        response = conn.request(R(groups=[G(group_id=group, topics=[G.OffsetFetchRequestTopics(
            name=TOPIC, partition_indexes=partitions)])], require_stable=require_stable))
        [answer] = response.groups
        topics, error = answer.topics, answer.error_code
    else:
        response = conn.request(R(group_id=group, topics=[R.OffsetFetchRequestTopic(
            name=TOPIC, partition_indexes=partitions)], require_stable=require_stable))
        topics, error = response.topics, response.error_code if version >= 2 else E.NONE
    return error, {p.partition_index: (p.committed_offset, p.error_code) for t in topics for p in t.partitions}


def write_marker(conn: RawConnection, producer: Producer, commit: bool, group: str) -> None:
    """The transaction coordinator's marker for the group's partition of `__consumer_offsets`."""
    _, producer_id, epoch = producer
    partition = partition_for(group, OFFSETS_PARTITIONS)
    response = conn.request(WriteTxnMarkersRequest[1](markers=[
        (producer_id, epoch, commit, [(OFFSETS_TOPIC, [partition])], 0)]))
    assert [p.error_code for m in response.markers for t in m.topics for p in t.partitions] == [E.NONE]


def prepare(broker, group: str, version: int) -> Producer:
    """The group's transactional commit of offsets 10 and 11, pending, whatever OffsetFetch version asks."""
    with RawConnection(broker.bootstrap_servers) as conn:
        conn.find_coordinator(group)
        create_topic(conn, TOPIC, 2)
        producer = begin(conn, f"tx-{group}")
        if version < 5:
            add_offsets(conn, producer, group)
        assert txn_offset_commit(conn, version, group, producer, {
            (TOPIC, 0): 10, (TOPIC, 1): 11, (TOPIC, 7): 12, ("missing", 0): 13}) == {
            (TOPIC, 0): E.NONE, (TOPIC, 1): E.NONE,
            (TOPIC, 7): E.UNKNOWN_TOPIC_OR_PARTITION, ("missing", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
        pending = {0: (NO_OFFSET, E.UNSTABLE_OFFSET_COMMIT), 1: (NO_OFFSET, E.UNSTABLE_OFFSET_COMMIT)}
        for fetch_version in (1, 6, 7, 8):
            assert offset_fetch(conn, fetch_version, group, [0, 1]) == (
                E.NONE, {0: (NO_OFFSET, E.NONE), 1: (NO_OFFSET, E.NONE)})
        for fetch_version in (7, 8):
            assert offset_fetch(conn, fetch_version, group, [0, 1], require_stable=True) == (E.NONE, pending)
    return producer


@pytest.mark.parametrize("version", [0, 3, 5])
def test_offsets_committed_in_a_transaction_are_committed_by_its_marker(broker, version):
    group = f"committing-v{version}"
    producer = prepare(broker, group, version)
    committed = (E.NONE, {0: (10, E.NONE), 1: (11, E.NONE)})
    with RawConnection(broker.bootstrap_servers) as conn:
        write_marker(conn, producer, True, group)
        assert offset_fetch(conn, 8, group, [0, 1], require_stable=True) == committed  # the marker committed them

    broker.kill()
    broker.start()  # loading the partition replays the transactional batch and its COMMIT marker
    with RawConnection(broker.bootstrap_servers) as conn:
        assert offset_fetch(conn, 8, group, [0, 1]) == committed
        assert offset_fetch(conn, 7, group, [0, 1], require_stable=True) == committed


def test_offsets_committed_in_an_aborted_transaction_are_dropped(broker):
    group = "aborting"
    producer = prepare(broker, group, 3)
    nothing = (E.NONE, {0: (NO_OFFSET, E.NONE), 1: (NO_OFFSET, E.NONE)})
    with RawConnection(broker.bootstrap_servers) as conn:
        write_marker(conn, producer, False, group)
        assert offset_fetch(conn, 8, group, [0, 1], require_stable=True) == nothing  # the marker dropped them

    broker.kill()
    broker.start()
    with RawConnection(broker.bootstrap_servers) as conn:
        assert offset_fetch(conn, 8, group, [0, 1], require_stable=True) == nothing
        assert offset_fetch(conn, 7, group, [0, 1]) == nothing


def test_an_open_transaction_stays_pending_across_a_restart(broker):
    group = "still-open"
    producer = prepare(broker, group, 5)
    broker.kill()
    broker.start()
    with RawConnection(broker.bootstrap_servers) as conn:
        assert offset_fetch(conn, 7, group, [0, 1], require_stable=True) == (
            E.NONE, {0: (NO_OFFSET, E.UNSTABLE_OFFSET_COMMIT), 1: (NO_OFFSET, E.UNSTABLE_OFFSET_COMMIT)})
        # A commit with a generation needs the group's: this one has none (a simple group, generation 0).
        assert txn_offset_commit(conn, 3, group, producer, {(TOPIC, 0): 20}, generation=5, member="m") == {
            (TOPIC, 0): E.UNKNOWN_MEMBER_ID}
        add_offsets(conn, producer, "no-such-group")
        assert txn_offset_commit(conn, 3, "no-such-group", producer, {(TOPIC, 0): 20}, generation=5,
                                 member="m") == {(TOPIC, 0): E.ILLEGAL_GENERATION}
