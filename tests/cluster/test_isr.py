"""ISR shrink and expansion by the leader's lag check, with followers frozen by SIGSTOP.

The topic has three replicas and min.insync.replicas=2. A frozen follower fetches nothing, so once the leader has a
record it lacks, the leader takes it out of the ISR when it has not caught up for replica.lag.time.max.ms (checked
every half of it): within 1.5 times the lag time. (As in Kafka, a follower that already holds everything the leader
has counts as caught up however long it is silent; only fencing takes a silent broker out then.) acks=all writes
succeed while the ISR has at least min.insync.replicas members. Below it the high watermark stands still (KIP-966):
a write appended before the second follower left waits out its timeout, and a new one is refused with
NOT_ENOUGH_REPLICAS before it is appended. Resumed, the followers catch up and rejoin, and the high watermark passes
the waiting write. The brokers' controller sessions (ZooKeeper sessions in ZooKeeper mode) are longer than the test
keeps a broker frozen, so the ISR changes come from the leader's lag check (AlterPartition), not from fencing. In
ZooKeeper mode the controller is one of the brokers, and a frozen controller holds up every ISR change until its
session expires, so there the controller is made the partition's leader and only followers are frozen.
"""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.protocol.producer.produce import ProduceRequest

import minikafka
from minikafka.cluster_handle import cluster_test_defaults
from minikafka.protocol.errors import ErrorCode
from tests.cluster.cluster_modes import CLUSTER_MODES, session_settings
from tests.cluster.replication_checks import assert_acknowledged_exactly_once, assert_replicas_identical
from tests.raw_client import RawConnection, record_batch

TOPIC = "isr"
LAG_S = int(cluster_test_defaults(3)["replica.lag.time.max.ms"]) / 1000
SESSION_TIMEOUT_MS = 8000  # longer than any follower stays frozen here
PRODUCE_TIMEOUT_MS = 8000
# From SIGSTOP to seeing the ISR change, beyond the leader's decision: the AlterPartition round trip and this test's
# polling of the brokers.
OBSERVATION_ALLOWANCE_S = 0.25
STUCK_PRODUCE_TIMEOUT_MS = 3000  # for the write that waits below min.insync.replicas: longer than a shrink takes
WAIT_S = 20.0


def produce_acks_all(conn: RawConnection, value: bytes,
                     timeout_ms: int = PRODUCE_TIMEOUT_MS) -> tuple[ErrorCode, int]:
    """One acks=all Produce of one record to partition 0: (error, base offset)."""
    R = ProduceRequest[9]
    response = conn.request(R(transactional_id=None, acks=-1, timeout_ms=timeout_ms, topic_data=[
        R.TopicProduceData(name=TOPIC, partition_data=[R.TopicProduceData.PartitionProduceData(
            index=0, records=record_batch([value]))])]))
    partition = response.responses[0].partition_responses[0]
    return ErrorCode(partition.error_code), partition.base_offset


@pytest.mark.parametrize("zookeeper", CLUSTER_MODES)
def test_frozen_followers_leave_the_isr_and_acks_all_holds_down_to_min_insync_replicas(tmp_path, zookeeper):
    config = session_settings(zookeeper, SESSION_TIMEOUT_MS)
    with minikafka.Cluster(brokers=3, data_dir=tmp_path / "cluster", config=config, zookeeper=zookeeper) as cluster:
        if zookeeper:
            controller = cluster.wait_for_controller(timeout=WAIT_S).node_id
            replicas = [controller, *(b.node_id for b in cluster.brokers if b.node_id != controller)]
            admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers, request_timeout_ms=10000)
            try:
                admin.create_topics([NewTopic(TOPIC, -1, replica_assignments={0: replicas},
                                              topic_configs={"min.insync.replicas": "2"})])
            finally:
                admin.close()
        else:
            cluster.state.create_topic(TOPIC, partitions=1, replication_factor=3, config={"min.insync.replicas": 2})
        state = cluster.wait_for_isr(TOPIC, 0, 3, timeout=WAIT_S)
        leader = cluster.broker(state.leader)
        first, second = (b for b in cluster.brokers if b is not leader)
        acknowledged: dict[int, bytes] = {}
        with RawConnection(leader.bootstrap_servers, timeout=WAIT_S) as conn:
            def write(value: bytes, expected: ErrorCode = ErrorCode.NONE) -> int:
                error, offset = produce_acks_all(conn, value)
                assert error == expected, f"acks=all write of {value!r}: {error.name}, expected {expected.name}"
                if error == ErrorCode.NONE:
                    acknowledged[offset] = value
                return offset

            write(b"three in sync")
            cluster.wait_for_replicas_caught_up(TOPIC, timeout=WAIT_S)

            paused_at = time.monotonic()
            first.pause()
            write(b"two in sync")  # waits for the frozen follower until it leaves the ISR
            first_out_s = time.monotonic() - paused_at
            shrunk = cluster.state.partition(TOPIC, 0)
            assert sorted(shrunk.isr) == sorted([leader.node_id, second.node_id]), shrunk

            stuck_offset = shrunk.log_end_offset
            assert stuck_offset is not None
            paused_at = time.monotonic()
            second.pause()
            with ThreadPoolExecutor(1) as pool:
                stuck = pool.submit(produce_acks_all, conn, b"appended below min.insync.replicas",
                                    STUCK_PRODUCE_TIMEOUT_MS)
                alone = cluster.wait_for_isr(TOPIC, 0, 1, timeout=WAIT_S)
                second_out_s = time.monotonic() - paused_at
                error, stuck_base = stuck.result(timeout=WAIT_S)
            assert (error, stuck_base) == (ErrorCode.REQUEST_TIMED_OUT, stuck_offset)  # appended, not replicated
            after = cluster.state.partition(TOPIC, 0)
            assert alone.isr == [leader.node_id] and after.log_end_offset == stuck_offset + 1
            assert after.high_watermark == stuck_offset, f"the high watermark moved under min.insync.replicas: {after}"
            error, _ = produce_acks_all(conn, b"refused")
            assert error == ErrorCode.NOT_ENOUGH_REPLICAS, error.name
            assert cluster.state.partition(TOPIC, 0).log_end_offset == stuck_offset + 1, "a refused write was appended"

            resumed_at = time.monotonic()
            first.resume()
            second.resume()
            rejoined = cluster.wait_for_isr(TOPIC, 0, 3, timeout=WAIT_S)
            rejoin_s = time.monotonic() - resumed_at
            write(b"three in sync again")

        print(f"frozen followers left the ISR after {first_out_s:.3f} s and {second_out_s:.3f} s "
              f"(replica.lag.time.max.ms {LAG_S * 1000:.0f}); both rejoined {rejoin_s:.3f} s after SIGCONT")
        for out_s in (first_out_s, second_out_s):
            assert out_s <= 1.5 * LAG_S + OBSERVATION_ALLOWANCE_S, f"a frozen follower left the ISR after {out_s:.3f} s"
        assert sorted(rejoined.isr) == sorted(rejoined.replicas)
        cluster.wait_for_replicas_caught_up(TOPIC, timeout=WAIT_S)
        records = cluster.state.records(TOPIC, 0)
        assert_acknowledged_exactly_once(records, acknowledged, TOPIC)
        # The write that timed out stays in the log and is replicated once the followers are back, as in Kafka;
        # the refused one was never written.
        assert [r.value for r in records] == [b"three in sync", b"two in sync", b"appended below min.insync.replicas",
                                              b"three in sync again"]
        assert_replicas_identical(cluster, TOPIC)
