"""A partition leader's side of transactions, over the wire: transactional batches open a producer's transaction,
WriteTxnMarkers ends it, read_committed fetches stop at the last stable offset and learn the aborted transactions,
and real consumers at both isolation levels read what Kafka's would. The state survives kill -9. Here the test
plays the coordinator (transaction.partition.verification.enable=false); the last test checks that, verification
on, a leader refuses a transactional batch for a partition the coordinator has not added (KIP-890 part 1)."""
from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, TopicPartition
from kafka.protocol.admin.transactions import DescribeProducersRequest
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
from kafka.protocol.producer import ProduceRequest
from kafka.protocol.producer.transaction import AddPartitionsToTxnRequest, InitProducerIdRequest, WriteTxnMarkersRequest
from kafka.record.default_records import DefaultRecordBatch
from kafka.record.memory_records import MemoryRecordsBuilder

from minikafka.protocol.errors import ErrorCode
from tests.helpers import admin_create_topic, wait_until
from tests.raw_client import RawConnection

TOPIC = "txn"
READ_UNCOMMITTED, READ_COMMITTED = 0, 1


def batch(pid: int, seq: int, values: list[bytes], *, epoch: int = 0, transactional: bool = True) -> bytes:
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20, transactional=transactional,
                                   producer_id=pid, producer_epoch=epoch, base_sequence=seq)
    for value in values:
        builder.append(timestamp=None, key=None, value=value, headers=[])
    builder.close()
    return bytes(builder.buffer())


def produce(conn: RawConnection, records: bytes, *, transactional_id: str | None = "tx") -> tuple[int, int]:
    response = conn.request(ProduceRequest[9](transactional_id=transactional_id, acks=-1, timeout_ms=5000,
                                              topic_data=[(TOPIC, [(0, records)])]))
    part = response.responses[0].partition_responses[0]
    return part.error_code, part.base_offset


def write_marker(conn: RawConnection, pid: int, commit: bool, *, epoch: int = 0, coordinator_epoch: int = 5,
                 partitions: tuple[int, ...] = (0,)) -> dict[int, int]:
    response = conn.request(WriteTxnMarkersRequest[1](markers=[(pid, epoch, commit, [(TOPIC, list(partitions))],
                                                                coordinator_epoch)]))
    [marker] = response.markers
    assert marker.producer_id == pid
    return {p.partition_index: p.error_code for t in marker.topics for p in t.partitions}


def fetch(conn: RawConnection, offset: int, isolation: int, partition: int = 0):
    response = conn.request(FetchRequest[12](replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                                             isolation_level=isolation, session_id=0, session_epoch=-1,
                                             topics=[(TOPIC, [(partition, -1, offset, -1, -1, 1 << 20)])],
                                             forgotten_topics_data=[], rack_id=""))
    return response.responses[0].partitions[0]


def batches(records: bytes) -> list[tuple[int, bool, list[bytes | None]]]:
    out = []
    pos = 0
    while pos + 12 <= len(records):
        size = int.from_bytes(records[pos + 8:pos + 12], "big") + 12
        b = DefaultRecordBatch(records[pos:pos + size])
        out.append((b.base_offset, b.is_control_batch, [] if b.is_control_batch else [r.value for r in b]))
        pos += size
    return out


def latest(conn: RawConnection, isolation: int) -> int:
    response = conn.request(ListOffsetsRequest[5](replica_id=-1, isolation_level=isolation,
                                                  topics=[(TOPIC, [(0, -1, -1)])]))
    return response.topics[0].partitions[0].offset


@pytest.fixture
def setup(broker_factory):
    # The partition side alone: no coordinator ever hears of these transactions, so the leaders must not ask it.
    broker = broker_factory(transaction_partition_verification_enable="false")
    conn = RawConnection(broker.bootstrap_servers)
    pid = conn.request(InitProducerIdRequest[4](transactional_id=None, transaction_timeout_ms=60000,
                                                producer_id=-1, producer_epoch=-1)).producer_id
    admin_create_topic(broker.bootstrap_servers, TOPIC, 1)
    assert produce(conn, batch(999, 0, [b"plain"], transactional=False), transactional_id=None) == (0, 0)
    yield broker, conn, pid
    conn.close()


def test_open_transaction_holds_the_last_stable_offset_until_its_marker(setup):
    _broker, conn, pid = setup
    assert produce(conn, batch(pid, 0, [b"a1", b"a2"])) == (0, 1)
    uncommitted = fetch(conn, 0, READ_UNCOMMITTED)
    assert (uncommitted.high_watermark, uncommitted.last_stable_offset) == (3, 1)
    assert uncommitted.aborted_transactions is None
    assert [b[2] for b in batches(uncommitted.records)] == [[b"plain"], [b"a1", b"a2"]]
    committed = fetch(conn, 0, READ_COMMITTED)
    assert [b[2] for b in batches(committed.records)] == [[b"plain"]]
    assert committed.aborted_transactions == []
    assert (latest(conn, READ_COMMITTED), latest(conn, READ_UNCOMMITTED)) == (1, 3)

    assert write_marker(conn, pid, commit=False) == {0: ErrorCode.NONE}
    committed = fetch(conn, 0, READ_COMMITTED)
    assert committed.last_stable_offset == committed.high_watermark == 4
    assert [(o, control) for o, control, _ in batches(committed.records)] == [(0, False), (1, False), (3, True)]
    assert [(a.producer_id, a.first_offset) for a in committed.aborted_transactions] == [(pid, 1)]
    assert latest(conn, READ_COMMITTED) == 4

    # The next transaction commits: no aborted transaction overlaps a fetch from after the first one.
    assert produce(conn, batch(pid, 2, [b"b1"])) == (0, 4)
    assert write_marker(conn, pid, commit=True) == {0: ErrorCode.NONE}
    after = fetch(conn, 4, READ_COMMITTED)
    assert after.aborted_transactions == [] and after.last_stable_offset == 6
    assert [b[:2] for b in batches(after.records)] == [(4, False), (5, True)]


def partition_state(conn: RawConnection) -> tuple[int, int, list[tuple[int, ...]]]:
    """What a refused marker or write leaves as it was: the partition's high watermark, last stable offset and
    producers (DescribeProducers: id, epoch, last sequence, coordinator epoch, open transaction's first offset, last
    timestamp)."""
    answer = fetch(conn, 0, READ_UNCOMMITTED)
    response = conn.request(DescribeProducersRequest[0](topics=[(TOPIC, [0])]))
    [partition] = response.topics[0].partitions
    assert partition.error_code == ErrorCode.NONE
    return answer.high_watermark, answer.last_stable_offset, sorted(
        (p.producer_id, p.producer_epoch, p.last_sequence, p.coordinator_epoch, p.current_txn_start_offset,
         p.last_timestamp) for p in partition.active_producers)


def test_bad_markers_and_writes_get_kafkas_errors_and_change_nothing(setup):
    _broker, conn, pid = setup
    assert produce(conn, batch(pid, 0, [b"x"], epoch=2)) == (0, 1)
    assert write_marker(conn, pid, commit=True, epoch=2, coordinator_epoch=5) == {0: ErrorCode.NONE}
    assert produce(conn, batch(pid, 1, [b"y"], epoch=2)) == (0, 3)  # the producer's next transaction, open
    held = partition_state(conn)
    assert held[:2] == (4, 3)
    assert [p[:5] for p in held[2] if p[0] == pid] == [(pid, 2, 1, 5, 3)]

    def refused(answer: object, expected: object) -> None:
        assert answer == expected
        assert partition_state(conn) == held

    # A marker of an older producer epoch, or from an older coordinator than the partition has seen, ends nothing.
    refused(write_marker(conn, pid, commit=False, epoch=1), {0: ErrorCode.INVALID_PRODUCER_EPOCH})
    refused(write_marker(conn, pid, commit=False, epoch=2, coordinator_epoch=4),
            {0: ErrorCode.TRANSACTION_COORDINATOR_FENCED})
    # A transactional batch needs the request's transactional id; a plain one may not join an open transaction.
    refused(produce(conn, batch(pid, 2, [b"z"], epoch=2), transactional_id=None),
            (ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1))
    refused(produce(conn, batch(pid, 2, [b"z"], epoch=2, transactional=False)), (ErrorCode.INVALID_TXN_STATE, -1))
    # A marker for a partition this broker does not have is refused there alone.
    assert write_marker(conn, pid, commit=True, epoch=2, partitions=(0, 7)) == {
        0: ErrorCode.NONE, 7: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    committed = partition_state(conn)
    assert committed[:2] == (5, 5)
    assert [p[:5] for p in committed[2] if p[0] == pid] == [(pid, 2, 1, 5, -1)]


def consume(bootstrap: str, isolation: str, expected: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{isolation}", "enable.auto.commit": False,
                         "isolation.level": isolation})
    try:
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 20
        while len(got) < expected and time.monotonic() < deadline:
            for message in consumer.consume(100, timeout=0.5):
                assert message.error() is None, message.error()
                got.append(message.value())
        return got
    finally:
        consumer.close()


def test_real_consumers_skip_aborted_records_and_markers_after_kill_9(setup):
    broker, conn, pid = setup
    produce(conn, batch(pid, 0, [b"aborted-1", b"aborted-2"]))
    write_marker(conn, pid, commit=False)
    produce(conn, batch(pid, 2, [b"committed-1"]))
    write_marker(conn, pid, commit=True)
    produce(conn, batch(pid, 3, [b"open-1"]))
    conn.close()
    broker.kill()
    broker.start()
    committed = ["plain", "committed-1"]
    assert [v.decode() for v in consume(broker.bootstrap_servers, "read_committed", 2)] == committed
    everything = ["plain", "aborted-1", "aborted-2", "committed-1", "open-1"]
    assert [v.decode() for v in consume(broker.bootstrap_servers, "read_uncommitted", 5)] == everything
    with RawConnection(broker.bootstrap_servers) as again:
        wait_until(lambda: fetch(again, 0, READ_UNCOMMITTED).high_watermark == 7, timeout=10,
                   message="the high watermark after the restart")
        answer = fetch(again, 0, READ_COMMITTED)
        assert answer.last_stable_offset == 6  # the open transaction survived the restart
        assert [(a.producer_id, a.first_offset) for a in answer.aborted_transactions] == [(pid, 1)]


def test_verification_refuses_batches_for_partitions_outside_the_transaction(broker_factory):
    broker = broker_factory()
    admin_create_topic(broker.bootstrap_servers, TOPIC, 2)
    with RawConnection(broker.bootstrap_servers) as conn:
        init = conn.request(InitProducerIdRequest[4](transactional_id="verified", transaction_timeout_ms=60000,
                                                     producer_id=-1, producer_epoch=-1))
        pid, epoch = init.producer_id, init.producer_epoch
        add = conn.request(AddPartitionsToTxnRequest[3](v3_and_below_transactional_id="verified",
                                                        v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
                                                        v3_and_below_topics=[(TOPIC, [0])]))
        assert add.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0

        def produce_to(partition: int, version: int) -> int:
            response = conn.request(ProduceRequest[version](
                transactional_id="verified", acks=-1, timeout_ms=5000,
                topic_data=[(TOPIC, [(partition, batch(pid, 0, [b"v"], epoch=epoch))])]))
            return response.responses[0].partition_responses[0].error_code

        assert produce_to(1, 9) == ErrorCode.INVALID_TXN_STATE
        assert produce_to(1, 11) == ErrorCode.TRANSACTION_ABORTABLE
        assert fetch(conn, 0, READ_UNCOMMITTED, partition=1).high_watermark == 0  # nothing was appended
        assert produce_to(0, 9) == ErrorCode.NONE
