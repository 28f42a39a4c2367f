"""DescribeProducers is answered by any replica of a partition, as Kafka's: `kafka-transactions.sh
describe-producers --broker-id` asks the broker it is told to, leader or follower, and every replica keeps the same
producer state (followers build it from the batches and markers they fetch). A broker with no replica of the
partition answers NOT_LEADER_OR_FOLLOWER, and a partition's errors carry no message, as Kafka's do."""
from __future__ import annotations

from confluent_kafka import Producer
from kafka.protocol.admin.transactions import DescribeProducersRequest

import minikafka
from minikafka.protocol.errors import ErrorCode
from tests.helpers import wait_until
from tests.raw_client import RawConnection

TOPIC = "described"
SINGLE = "single-replica"
WAIT_S = 30.0


def describe_producers(broker: minikafka.Broker, topics: dict[str, list[int]]) -> dict[tuple[str, int], tuple]:
    """Per partition: (error, message, producers as (id, epoch, last sequence, coordinator epoch, open transaction's
    first offset)) as `broker` answers."""
    with RawConnection(broker.bootstrap_servers, timeout=WAIT_S) as conn:
        response = conn.request(DescribeProducersRequest[0](topics=list(topics.items())))
    return {(t.name, p.partition_index): (p.error_code, p.error_message, sorted(
        (s.producer_id, s.producer_epoch, s.last_sequence, s.coordinator_epoch, s.current_txn_start_offset)
        for s in p.active_producers)) for t in response.topics for p in t.partitions}


def test_followers_describe_the_producers_of_the_partitions_they_replicate(tmp_path):
    with minikafka.Cluster(brokers=3, data_dir=tmp_path / "cluster") as cluster:
        cluster.state.create_topic(TOPIC, partitions=1, replication_factor=3)
        cluster.state.create_topic(SINGLE, partitions=1, replication_factor=1)
        cluster.wait_for_isr(TOPIC, 0, 3, timeout=WAIT_S)
        leader = cluster.leader_of(TOPIC, 0)
        followers = [b for b in cluster.brokers if b is not leader]
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": "described-tx"})
        producer.init_transactions(WAIT_S)
        producer.begin_transaction()
        for i in range(3):
            producer.produce(TOPIC, value=b"open-%d" % i, partition=0)
        producer.flush(WAIT_S)
        cluster.wait_for_replicas_caught_up(TOPIC, timeout=WAIT_S)

        open_txn = describe_producers(leader, {TOPIC: [0]})[(TOPIC, 0)]
        error, message, [(_pid, _epoch, last_sequence, _coordinator_epoch, first_offset)] = open_txn
        assert (error, message, last_sequence, first_offset) == (ErrorCode.NONE, None, 2, 0)
        for follower in followers:
            assert describe_producers(follower, {TOPIC: [0]})[(TOPIC, 0)] == open_txn

        producer.commit_transaction(WAIT_S)
        wait_until(lambda: all(describe_producers(b, {TOPIC: [0]})[(TOPIC, 0)][2][0][4] == -1
                               for b in cluster.brokers), timeout=WAIT_S,
                   message="every replica to see the transaction's marker")
        committed = describe_producers(leader, {TOPIC: [0]})[(TOPIC, 0)]
        assert committed[2][0][3] >= 0  # the marker's coordinator epoch
        for follower in followers:
            assert describe_producers(follower, {TOPIC: [0]})[(TOPIC, 0)] == committed

        # Errors: a broker without a replica, a partition the topic does not have (no message: the partition's
        # errors), a topic the cluster does not have (the topic's error, with Kafka's message).
        host = cluster.leader_of(SINGLE, 0)
        for broker in cluster.brokers:
            answer = describe_producers(broker, {SINGLE: [0, 7], "no-such-topic": [0]})
            assert answer[(SINGLE, 0)] == ((ErrorCode.NONE, None, []) if broker is host
                                           else (ErrorCode.NOT_LEADER_OR_FOLLOWER, None, []))
            assert answer[(SINGLE, 7)] == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None, [])
            assert answer[("no-such-topic", 0)] == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                                    "This server does not host this topic-partition.", [])
