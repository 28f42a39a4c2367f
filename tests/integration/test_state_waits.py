"""The handles' offset waits: answered by the partition's leader when the offset moves (no sleep in the test, no
polling interval), following the leader when it moves, and a TimeoutError that says what was seen."""
from __future__ import annotations

import threading

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

import minikafka


def produce(bootstrap: str, topic: str, count: int, partition: int = 0, **config: object) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", **config})
    for i in range(count):
        producer.produce(topic, f"v{i}".encode(), partition=partition)
    return producer


def test_wait_for_high_watermark_returns_when_the_records_are_in(broker_factory, unique_topic):
    broker = broker_factory()
    broker.state.create_topic(unique_topic, partitions=1, replication_factor=1)
    with pytest.raises(TimeoutError, match=rf"the high_watermark of {unique_topic}-0 to reach 5; last seen: 0$"):
        broker.wait_for_high_watermark(unique_topic, 0, 5, timeout=0.3)
    writer = threading.Thread(target=lambda: produce(broker.bootstrap_servers, unique_topic, 5).flush(30))
    writer.start()
    try:
        assert broker.wait_for_high_watermark(unique_topic, 0, 5, timeout=30) == 5
    finally:
        writer.join(30)
    assert broker.state.partition(unique_topic, 0).high_watermark == 5


def test_wait_for_lso_waits_for_the_open_transaction(broker_factory, unique_topic):
    broker = broker_factory()
    broker.state.create_topic(unique_topic, partitions=1, replication_factor=1)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": f"tx-{unique_topic}"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(3):
        producer.produce(unique_topic, f"v{i}".encode(), partition=0)
    producer.flush(30)
    assert broker.wait_for_high_watermark(unique_topic, 0, 3) == 3
    # Open: read_committed readers stop at its first record.
    with pytest.raises(TimeoutError, match=rf"the last_stable_offset of {unique_topic}-0 to reach 1; last seen: 0$"):
        broker.wait_for_lso(unique_topic, 0, 1, timeout=0.3)
    producer.commit_transaction(30)
    assert broker.wait_for_lso(unique_topic, 0, 4) == 4  # the three records and the commit marker


def test_wait_for_high_watermark_follows_a_new_leader(tmp_path, unique_topic):
    with minikafka.Cluster(brokers=3, data_dir=tmp_path / "cluster") as cluster:
        cluster.state.create_topic(unique_topic, partitions=1, replication_factor=3)
        produce(cluster.bootstrap_servers, unique_topic, 3).flush(30)
        assert cluster.wait_for_high_watermark(unique_topic, 0, 3) == 3
        leader = cluster.wait_for_leader(unique_topic, 0)
        leader.kill()
        survivors = ",".join(b.bootstrap_servers for b in cluster.brokers if b.node_id != leader.node_id)
        writer = threading.Thread(target=lambda: produce(survivors, unique_topic, 2).flush(30))
        writer.start()
        try:
            assert cluster.wait_for_high_watermark(unique_topic, 0, 5, timeout=30) == 5
        finally:
            writer.join(30)
        assert cluster.wait_for_leader(unique_topic, 0).node_id != leader.node_id


def test_wait_for_committed_returns_when_the_group_commits(broker_factory, unique_topic):
    broker = broker_factory()
    broker.state.create_topic(unique_topic, partitions=1, replication_factor=1)
    produce(broker.bootstrap_servers, unique_topic, 4).flush(30)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "waited",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(unique_topic, 0, 0)])
        with pytest.raises(TimeoutError, match=rf"offset group 'waited' committed for {unique_topic}-0 to reach 4; "
                                               r"last seen: "):
            broker.wait_for_committed("waited", unique_topic, 0, 4, timeout=0.3)
        committer = threading.Thread(target=lambda: consumer.commit(
            offsets=[TopicPartition(unique_topic, 0, 4)], asynchronous=False))
        committer.start()
        try:
            assert broker.wait_for_committed("waited", unique_topic, 0, 4, timeout=30) == 4
        finally:
            committer.join(30)
    finally:
        consumer.close()


def test_wait_for_committed_sees_a_transactions_offsets_once_it_commits(tmp_path, unique_topic):
    with minikafka.Cluster(brokers=3, data_dir=tmp_path / "cluster") as cluster:
        cluster.state.create_topic(unique_topic, partitions=1, replication_factor=3)
        bootstrap = cluster.bootstrap_servers
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "copier", "enable.auto.commit": False})
        producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tx-{unique_topic}"})
        try:
            producer.init_transactions(30)
            producer.begin_transaction()
            producer.produce(unique_topic, b"v", partition=0)
            producer.send_offsets_to_transaction([TopicPartition(unique_topic, 0, 7)],
                                                 consumer.consumer_group_metadata(), 30)
            # Pending in the open transaction: not committed yet.
            with pytest.raises(TimeoutError, match="last seen: None"):
                cluster.wait_for_committed("copier", unique_topic, 0, 7, timeout=0.5)
            producer.commit_transaction(30)
            assert cluster.wait_for_committed("copier", unique_topic, 0, 7) == 7
        finally:
            consumer.close()


@pytest.mark.parametrize("zookeeper", [False, True], ids=["kraft", "zookeeper"])
def test_wait_for_topic_returns_once_every_broker_has_leaders_for_it(tmp_path, unique_topic, zookeeper):
    """A topic created without waiting (as a tool or an application does): wait_for_topic returns once each broker's
    metadata names a leader for every partition, so a client bootstrapping from any broker finds them all."""
    from confluent_kafka.admin import AdminClient, NewTopic

    with minikafka.Cluster(brokers=3, zookeeper=zookeeper, data_dir=tmp_path / "cluster") as cluster:
        with pytest.raises(TimeoutError, match=rf"topic {unique_topic!r}; the broker at .* last saw: no such topic$"):
            cluster.wait_for_topic(unique_topic, timeout=0.3)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        # Answered once the controller has created it: the brokers learn it after.
        admin.create_topics([NewTopic(unique_topic, num_partitions=6, replication_factor=3)],
                            operation_timeout=0)[unique_topic].result(30)
        cluster.wait_for_topic(unique_topic, partitions=6, timeout=60)
        for broker in cluster.brokers:
            metadata = AdminClient({"bootstrap.servers": broker.bootstrap_servers}).list_topics(unique_topic, 30)
            partitions = metadata.topics[unique_topic].partitions
            assert sorted(partitions) == list(range(6))
            assert all(p.leader >= 0 for p in partitions.values())
        with pytest.raises(TimeoutError, match=r"last saw: 6 partition\(s\)$"):
            cluster.wait_for_topic(unique_topic, partitions=8, timeout=0.3)


def test_wait_for_group_with_a_generation_follows_a_rebalance(broker_factory, unique_topic):
    """Classic group of kafka-python consumers: the coordinator answers the wait when the group changes; a second
    member's join is seen as a later generation."""
    from kafka import KafkaConsumer

    broker = broker_factory(group_initial_rebalance_delay_ms=0)
    broker.state.create_topic(unique_topic, partitions=2, replication_factor=1)
    group = f"g-{unique_topic}"
    with pytest.raises(TimeoutError, match=rf"group '{group}' to be Stable; last seen: unknown group '{group}'"):
        broker.wait_for_group(group, state="Stable", timeout=0.3)
    consumers = []
    stop = threading.Event()

    def poll(consumer):
        while not stop.is_set():
            consumer.poll(timeout_ms=100)

    threads = []
    try:
        for _ in range(2):
            consumer = KafkaConsumer(unique_topic, bootstrap_servers=broker.bootstrap_servers, group_id=group,
                                     session_timeout_ms=10000, heartbeat_interval_ms=200)
            consumers.append(consumer)
            threads.append(threading.Thread(target=poll, args=(consumer,)))
            threads[-1].start()
            if len(consumers) == 1:
                broker.wait_for_group(group, state="Stable", members=1, timeout=60)
                first = broker.state.describe()  # the broker still answers its control API while a wait parks
                assert first
        # The first member joined at generation 1; the second member's join makes a later one.
        stable = broker.wait_for_group(group, state="Stable", members=2, generation_at_least=2, timeout=60)
        assert sorted(tp for m in stable.members for tp in m.assignment) == [(unique_topic, 0), (unique_topic, 1)]
        with pytest.raises(TimeoutError, match=r"generation >= 99; last seen: Stable with 2 member\(s\), "
                                               r"generation \d+$"):
            broker.wait_for_group(group, generation_at_least=99, timeout=0.3)
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
def test_wait_for_records_counts_every_partition(broker_factory, unique_topic):
    broker = broker_factory()
    broker.state.create_topic(unique_topic, partitions=3, replication_factor=1)
    with pytest.raises(TimeoutError, match=rf"for 6 record\(s\) in topic '{unique_topic}'; last seen: 0$"):
        broker.wait_for_records(unique_topic, 6, timeout=0.3)
    produce(broker.bootstrap_servers, unique_topic, 2, partition=0).flush(30)
    writer = threading.Thread(target=lambda: [produce(broker.bootstrap_servers, unique_topic, 2, partition=p
                                                      ).flush(30) for p in (1, 2)])
    writer.start()
    try:
        assert broker.wait_for_records(unique_topic, 6, timeout=30) == 6
    finally:
        writer.join(30)
    with pytest.raises(TimeoutError, match=r"last seen: 6$"):
        broker.wait_for_records(unique_topic, 7, timeout=0.3)


def test_wait_for_records_sums_the_leaders_of_a_cluster(tmp_path, unique_topic):
    with minikafka.Cluster(brokers=3, data_dir=tmp_path / "cluster") as cluster:
        cluster.state.create_topic(unique_topic, partitions=3, replication_factor=2)
        cluster.wait_for_topic(unique_topic, 3)
        assert len({cluster.wait_for_leader(unique_topic, p).node_id for p in range(3)}) > 1  # counts to sum
        writer = threading.Thread(target=lambda: [produce(cluster.bootstrap_servers, unique_topic, 3, partition=p
                                                          ).flush(30) for p in range(3)])
        writer.start()
        try:
            assert cluster.wait_for_records(unique_topic, 9, timeout=30) == 9
        finally:
            writer.join(30)
        assert sum(cluster.state.partition(unique_topic, p).high_watermark for p in range(3)) == 9


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_wait_for_group_generation_at_least(broker_factory, unique_topic, protocol):
    broker = broker_factory()
    broker.state.create_topic(unique_topic, partitions=2, replication_factor=1)
    group, stop = f"gen-{protocol}", threading.Event()
    consumers: list[Consumer] = []

    def join() -> None:
        consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
                             "group.protocol": protocol, "auto.offset.reset": "earliest"})
        consumer.subscribe([unique_topic])
        consumers.append(consumer)

    def poll() -> None:
        while not stop.is_set():
            for consumer in list(consumers):
                consumer.poll(0.05)

    poller = threading.Thread(target=poll)
    join()
    poller.start()
    try:
        first = broker.wait_for_group(group, state="Stable", members=1, generation_at_least=1, timeout=30)
        assert first.group_type == protocol and len(first.members) == 1
        with pytest.raises(TimeoutError, match=rf"group '{group}' to be generation >= 2; last seen: Stable with 1 "
                                               r"member\(s\), generation 1$"):
            broker.wait_for_group(group, generation_at_least=2, timeout=0.3)
        join()
        both = broker.wait_for_group(group, state="Stable", members=2, generation_at_least=2, timeout=30)
        assert sorted(tp for m in both.members for tp in m.assignment) == [(unique_topic, 0), (unique_topic, 1)]
    finally:
        stop.set()
        poller.join(30)
        for consumer in consumers:
            consumer.close()
