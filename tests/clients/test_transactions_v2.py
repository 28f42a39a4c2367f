"""Transaction version 2 (KIP-890 part 2) over the wire, as the Java 4.x producer speaks it to a broker that
finalizes `transaction.version` 2: no AddPartitionsToTxn or AddOffsetsToTxn (Produce v12+ and TxnOffsetCommit v5
add their partitions at the coordinator), and every EndTxn v5 bumps the producer epoch, which the next transaction
uses. No Python client speaks version 2, so the requests are built here, field by field, as that producer sends
them."""
from __future__ import annotations

import pytest
from kafka.protocol.admin.transactions import DescribeTransactionsRequest
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.consumer.group import OffsetFetchRequest
from kafka.protocol.metadata.api_versions import ApiVersionsRequest
from kafka.protocol.producer import ProduceRequest
from kafka.protocol.producer.transaction import EndTxnRequest, InitProducerIdRequest, TxnOffsetCommitRequest

from minikafka.broker.coordinator.coordinator_log import partition_for
from minikafka.protocol.errors import ErrorCode
from tests.clients.test_transaction_markers import batch, batches
from tests.helpers import admin_create_topic, wait_until
from tests.raw_client import RawConnection

TOPIC, GROUP, TRANSACTIONAL_ID = "tv2", "tv2-group", "tv2-tx"
READ_COMMITTED = 1
E = ErrorCode


class Producer:
    """A transaction version 2 producer's state: its id and epoch, and the next sequence per partition."""

    def __init__(self, conn: RawConnection, transactional_id: str) -> None:
        self.conn, self.transactional_id = conn, transactional_id
        init = conn.request(InitProducerIdRequest[5](transactional_id=transactional_id, transaction_timeout_ms=60000,
                                                     producer_id=-1, producer_epoch=-1))
        assert init.error_code == E.NONE
        self.producer_id, self.epoch = init.producer_id, init.producer_epoch
        self.sequences: dict[int, int] = {}

    def produce(self, partition: int, values: list[bytes], *, version: int = 12, epoch: int | None = None) -> int:
        epoch = self.epoch if epoch is None else epoch
        sequence = self.sequences.get(partition, 0)
        response = self.conn.request(ProduceRequest[version](
            transactional_id=self.transactional_id, acks=-1, timeout_ms=5000,
            topic_data=[(TOPIC, [(partition, batch(self.producer_id, sequence, values, epoch=epoch))])]))
        error = response.responses[0].partition_responses[0].error_code
        if error == E.NONE:
            self.sequences[partition] = sequence + len(values)
        return error

    def commit_offsets(self, offsets: dict[int, int]) -> list[int]:
        R = TxnOffsetCommitRequest[5]
        T = R.TxnOffsetCommitRequestTopic
        response = self.conn.request(R(
            transactional_id=self.transactional_id, group_id=GROUP, producer_id=self.producer_id,
            producer_epoch=self.epoch, generation_id=-1, member_id="", group_instance_id=None,
            topics=[T(name=TOPIC, partitions=[T.TxnOffsetCommitRequestPartition(
                partition_index=p, committed_offset=o, committed_leader_epoch=-1, committed_metadata="")
                for p, o in offsets.items()])]))
        return [p.error_code for t in response.topics for p in t.partitions]

    def end(self, commit: bool, *, epoch: int | None = None) -> tuple[int, int, int]:
        """EndTxn v5: (error, producer id, epoch) as answered; the producer goes on with them, sequences anew."""
        response = self.conn.request(EndTxnRequest[5](transactional_id=self.transactional_id,
                                                      producer_id=self.producer_id,
                                                      producer_epoch=self.epoch if epoch is None else epoch,
                                                      committed=commit))
        if response.error_code == E.NONE:
            self.producer_id, self.epoch, self.sequences = response.producer_id, response.producer_epoch, {}
        return response.error_code, response.producer_id, response.producer_epoch


def offsets_partition_of(group: str) -> int:
    return partition_for(group, 50)


def describe(conn: RawConnection, transactional_id: str):
    [state] = conn.request(DescribeTransactionsRequest[0](transactional_ids=[transactional_id])).transaction_states
    return state


def committed_values(conn: RawConnection, partition: int) -> list[bytes]:
    response = conn.request(FetchRequest[12](
        replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=READ_COMMITTED, session_id=0,
        session_epoch=-1, topics=[(TOPIC, [(partition, -1, 0, -1, -1, 1 << 20)])], forgotten_topics_data=[],
        rack_id=""))
    answer = response.responses[0].partitions[0]
    aborted = {a.producer_id: a.first_offset for a in answer.aborted_transactions or []}
    out = []
    for base_offset, control, values in batches(bytes(answer.records or b"")):
        if not control and not any(base_offset >= first for first in aborted.values()):
            out.extend(v for v in values if v is not None)
    return out


def stable_offset(conn: RawConnection, partition: int) -> int | None:
    """The group's committed offset for `partition`, None while a transaction holds it pending."""
    R = OffsetFetchRequest[7]
    response = conn.request(R(group_id=GROUP, topics=[R.OffsetFetchRequestTopic(name=TOPIC,
                                                                                partition_indexes=[partition])],
                              require_stable=True))
    [p] = response.topics[0].partitions
    return None if p.error_code == E.UNSTABLE_OFFSET_COMMIT else p.committed_offset


@pytest.fixture
def conn(broker):
    admin_create_topic(broker.bootstrap_servers, TOPIC, 2)
    with RawConnection(broker.bootstrap_servers) as c:
        c.find_coordinator(GROUP)
        yield c


@pytest.mark.parametrize("version", [3, 4])
def test_the_cluster_finalizes_transaction_version_2(conn, version):
    response = conn.request(ApiVersionsRequest[version](client_software_name="t", client_software_version="1"))
    # Below v4 Kafka leaves out the supported features whose lowest level is 0, which older clients cannot read
    # (KAFKA-17492); the finalized level is there at both.
    assert [(f.name, f.min_version, f.max_version) for f in response.supported_features] == (
        [("transaction.version", 0, 2), ("group.version", 0, 1), ("share.version", 0, 1)] if version >= 4 else [])
    assert [(f.name, f.min_version_level, f.max_version_level) for f in response.finalized_features] == [
        ("transaction.version", 2, 2), ("group.version", 1, 1), ("share.version", 1, 1)]
    assert response.finalized_features_epoch >= 0  # a Java client ignores finalized features at epoch -1


def test_a_version_2_transaction_adds_its_partitions_and_bumps_the_epoch_at_its_end(conn):
    producer = Producer(conn, TRANSACTIONAL_ID)
    pid, first_epoch = producer.producer_id, producer.epoch
    assert producer.produce(0, [b"a-0", b"a-1"]) == E.NONE  # no AddPartitionsToTxn: Produce v12 adds it
    assert producer.produce(1, [b"a-2"]) == E.NONE
    assert producer.commit_offsets({0: 2, 1: 1}) == [E.NONE, E.NONE]  # no AddOffsetsToTxn either
    state = describe(conn, TRANSACTIONAL_ID)
    offsets_partition = offsets_partition_of(GROUP)
    assert state.transaction_state == "Ongoing"
    assert sorted((t.topic, p) for t in state.topics for p in t.partitions) == [
        ("__consumer_offsets", offsets_partition), (TOPIC, 0), (TOPIC, 1)]
    assert stable_offset(conn, 0) is None

    assert producer.end(commit=True) == (E.NONE, pid, first_epoch + 1)
    # The retry of an end whose answer was lost has the epoch before the bump: CONCURRENT_TRANSACTIONS while the
    # markers are being written, then answered as the first was.
    assert producer.end(commit=True, epoch=first_epoch)[0] in (E.CONCURRENT_TRANSACTIONS, E.NONE)
    wait_until(lambda: describe(conn, TRANSACTIONAL_ID).transaction_state == "CompleteCommit", timeout=10,
               message="the commit to complete")
    assert producer.end(commit=True, epoch=first_epoch) == (E.NONE, pid, first_epoch + 1)
    wait_until(lambda: committed_values(conn, 0) == [b"a-0", b"a-1"] and committed_values(conn, 1) == [b"a-2"],
               timeout=10, message="the committed records at read_committed")
    wait_until(lambda: stable_offset(conn, 0) == 2 and stable_offset(conn, 1) == 1, timeout=10,
               message="the offsets committed with the transaction")

    # The next transaction runs at the bumped epoch, from sequence 0; the old epoch is fenced at the partition.
    assert producer.produce(0, [b"b-0"]) == E.NONE
    assert producer.produce(1, [b"zombie"], epoch=first_epoch) == E.INVALID_PRODUCER_EPOCH
    assert producer.end(commit=False) == (E.NONE, pid, first_epoch + 2)
    wait_until(lambda: describe(conn, TRANSACTIONAL_ID).transaction_state == "CompleteAbort", timeout=10,
               message="the abort to complete")
    assert producer.end(commit=True, epoch=first_epoch + 1) == (E.INVALID_TXN_STATE, -1, -1)  # not what ended
    assert committed_values(conn, 0) == [b"a-0", b"a-1"]  # the aborted b-0 is not read

    # An abort with nothing added still ends (and bumps): the client may abort before its first send.
    assert producer.end(commit=False) == (E.NONE, pid, first_epoch + 3)
    assert producer.end(commit=True) == (E.INVALID_TXN_STATE, -1, -1)
    # An epoch from the future is fenced, as one from the past.
    assert producer.end(commit=False, epoch=first_epoch + 7) == (E.PRODUCER_FENCED, -1, -1)


def test_a_version_1_batch_for_a_partition_not_added_is_still_refused(conn):
    producer = Producer(conn, "tv1-tx")
    assert producer.produce(0, [b"x"], version=11) == E.TRANSACTION_ABORTABLE
    assert producer.produce(0, [b"x"], version=9) == E.INVALID_TXN_STATE
    assert producer.produce(0, [b"x"], version=12) == E.NONE
