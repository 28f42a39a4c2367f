"""Log compaction on a 3-broker cluster: every replica runs its own cleaner over its own log, through a leader kill,
and the replicas still agree on every key's latest value and on the record at every offset they both hold."""
from __future__ import annotations

from pathlib import Path

from kafka import KafkaProducer
from kafka.record.memory_records import MemoryRecords

import minikafka

TOPIC = "table"
WAIT_S = 30.0
CONFIG = {"cleanup.policy": "compact", "internal.segment.bytes": "16384", "min.cleanable.dirty.ratio": "0.01",
          "min.insync.replicas": "2"}


def produce(bootstrap: str, pairs: list[tuple[bytes, bytes]]) -> dict[int, tuple[bytes, bytes]]:
    """Produce with acks=all; the record acknowledged at each offset."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5, batch_size=4096, retries=10)
    try:
        futures = [(producer.send(TOPIC, key=k, value=v, partition=0), k, v) for k, v in pairs]
        producer.flush(timeout=30)
        return {f.get(timeout=30).offset: (k, v) for f, k, v in futures}
    finally:
        producer.close(timeout=10)


def replica_records(broker: minikafka.Broker) -> dict[int, tuple[bytes, bytes | None]]:
    """The records of the replica's log files as they are on its disk, by offset."""
    records = {}
    for path in sorted(Path(broker.data_dir, f"{TOPIC}-0").glob("*.log")):
        batches = MemoryRecords(path.read_bytes())
        while batches.has_next():
            batch = batches.next_batch()
            if batch is None:
                break
            for record in batch:
                records[record.offset] = (record.key, record.value)
    return records


def latest(records: dict[int, tuple[bytes, bytes | None]]) -> dict[bytes, bytes | None]:
    return {key: value for _offset, (key, value) in sorted(records.items())}


def test_every_replica_compacts_on_its_own_and_the_replicas_agree(tmp_path):
    with minikafka.Cluster(brokers=3, data_dir=tmp_path / "cluster", config={"log.cleaner.enable": "false"}) \
            as cluster:
        cluster.state.create_topic(TOPIC, partitions=1, replication_factor=3, config=CONFIG)
        cluster.wait_for_isr(TOPIC, 0, 3, timeout=WAIT_S)
        keys = [b"key-%02d" % i for i in range(40)]
        acked = produce(cluster.bootstrap_servers, [(k, b"one-%04d-" % i + b"x" * 150)
                                                    for i, k in enumerate(keys * 25)])
        cluster.wait_for_replicas_caught_up(TOPIC, timeout=WAIT_S)
        first = cluster.clean_logs(TOPIC)
        assert sorted(first) == [1, 2, 3]
        assert all(len(cleaned) == 1 for cleaned in first.values()), first

        leader = cluster.leader_of(TOPIC, 0)
        leader.kill()
        cluster.wait_for_leader(TOPIC, 0, not_on=leader, timeout=WAIT_S)
        acked.update(produce(cluster.bootstrap_servers, [(k, b"two-%04d-" % i + b"y" * 150)
                                                         for i, k in enumerate(keys[:20] * 20)]))
        # The two live replicas clean again while the third is down.
        during = cluster.clean_logs(TOPIC)
        assert len(during) == 2 and all(len(cleaned) == 1 for cleaned in during.values()), during
        leader.start()
        cluster.wait_for_isr(TOPIC, 0, 3, timeout=WAIT_S)
        cluster.wait_for_replicas_caught_up(TOPIC, timeout=WAIT_S)
        cluster.clean_logs(TOPIC)

        expected_latest = latest(dict(acked.items()))
        replicas = {b.node_id: replica_records(b) for b in cluster.brokers}
        for node, records in replicas.items():
            assert latest(records) == expected_latest, f"replica {node} disagrees on a key's latest value"
            assert all(acked[o] == r for o, r in records.items()), f"replica {node} holds a record never produced"
            assert len(records) < len(acked), f"replica {node} was never compacted"
        state = cluster.state.partition(TOPIC, 0)
        end = max(acked) + 1
        assert state.log_end_offsets == {1: end, 2: end, 3: end}
        assert all(checkpoint is not None for checkpoint in state.cleaner_checkpoints.values())
