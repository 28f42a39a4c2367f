"""The connector's own Fetch path (spark_connector/fetch_reader.py) on an executor, against real brokers: a leader
killed mid-range, a task that stops early, connections reused by the next task, truncated partitions, an
unreachable cluster, and which options send a read through librdkafka instead."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("pyspark")

from confluent_kafka import Producer
from spark_helpers import create_topic, free_port

import minikafka
from minikafka.spark_connector import DataLossError, fetch_reader
from minikafka.spark_connector.kafka_client import shared_client
from minikafka.spark_connector.options import parse_source_options
from minikafka.spark_connector.ranges import OffsetRange

pytestmark = pytest.mark.spark


def _config(bootstrap: str, topic: str, **options: str):
    return parse_source_options({"kafka.bootstrap.servers": bootstrap, "subscribe": topic, **options},
                                streaming=False).read


def _produce(bootstrap: str, topic: str, count: int, **config) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **config})
    for i in range(count):
        producer.produce(topic, b"value-%d" % i, partition=0)
    assert producer.flush(60) == 0


def _offsets(batches) -> list[int]:
    return [o for batch in batches for o in batch.column("offset").to_pylist()]


def test_a_leader_killed_mid_range_loses_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(fetch_reader, "BATCH_ROWS", 200)
    with minikafka.Cluster(brokers=3, data_dir=tmp_path / "cluster") as cluster:
        cluster.state.create_topic("moving", partitions=1, replication_factor=3, config={"min.insync.replicas": 2})
        _produce(cluster.bootstrap_servers, "moving", 3000, acks="all", **{"batch.size": 4096})
        config = _config(cluster.bootstrap_servers, "moving", **{"kafka.max.partition.fetch.bytes": "8192",
                                                                  "kafkaConsumer.pollTimeoutMs": "60000"})
        batches = fetch_reader.read_range(config, OffsetRange("moving", 0, 0, 3000))
        first = next(batches)
        cluster.leader_of("moving", 0).kill()
        assert _offsets([first, *batches]) == list(range(3000))


def test_connections_outlive_a_task_and_an_early_stop(broker, unique_topic, monkeypatch):
    monkeypatch.setattr(fetch_reader, "BATCH_ROWS", 100)
    create_topic(broker.bootstrap_servers, unique_topic)
    _produce(broker.bootstrap_servers, unique_topic, 2000, **{"batch.size": 2048})
    config = _config(broker.bootstrap_servers, unique_topic, **{"kafka.max.partition.fetch.bytes": "4096"})
    assert config.direct_fetch
    batches = fetch_reader.read_range(config, OffsetRange(unique_topic, 0, 0, 2000))
    first = _offsets([next(batches)])
    assert first == list(range(len(first))) and 100 <= len(first) < 2000
    batches.close()  # a task stopped early (a limit): its Fetch sent ahead must not answer the next task
    client = shared_client(config.bootstrap_servers, config.client_id, config.request_timeout_ms / 1000)
    assert _offsets(fetch_reader.read_range(config, OffsetRange(unique_topic, 0, 1500, 2000))) == list(
        range(1500, 2000))
    connections = dict(client._connections)
    assert len(connections) == 1
    assert _offsets(fetch_reader.read_range(config, OffsetRange(unique_topic, 0, 10, 20))) == list(range(10, 20))
    assert client._connections == connections  # the same connection, reused


def test_a_range_past_the_end_is_data_loss(broker, unique_topic):
    create_topic(broker.bootstrap_servers, unique_topic)
    _produce(broker.bootstrap_servers, unique_topic, 10)
    past = OffsetRange(unique_topic, 0, 5, 20)
    with pytest.raises(DataLossError, match=r"\[10, 20\)"):
        list(fetch_reader.read_range(_config(broker.bootstrap_servers, unique_topic), past))
    kept = fetch_reader.read_range(_config(broker.bootstrap_servers, unique_topic, failOnDataLoss="false"), past)
    assert _offsets(kept) == list(range(5, 10))


def test_an_unreachable_cluster_fails_within_the_poll_timeout(unique_topic):
    config = _config(f"127.0.0.1:{free_port()}", unique_topic, **{"kafkaConsumer.pollTimeoutMs": "1500",
                                                                   "kafka.retry.backoff.ms": "50"})
    started = time.monotonic()
    with pytest.raises(TimeoutError, match="kafkaConsumer.pollTimeoutMs"):
        list(fetch_reader.read_range(config, OffsetRange(unique_topic, 0, 0, 10)))
    assert time.monotonic() - started < 30


@pytest.mark.parametrize(("options", "direct"), [
    ({}, True),
    ({"kafka.security.protocol": "plaintext", "kafka.client.id": "app", "kafka.fetch.max.wait.ms": "100"}, True),
    ({"fetcher": "librdkafka"}, False),
    ({"kafka.security.protocol": "SASL_SSL"}, False),
    ({"kafka.ssl.ca.location": "/ca.pem"}, False),
    ({"kafka.client.rack": "r1"}, False),
])  # fmt: skip
def test_options_that_need_librdkafka_read_through_it(options, direct):
    assert _config("127.0.0.1:9092", "t", **options).direct_fetch is direct


def test_an_unknown_fetcher_is_refused():
    with pytest.raises(ValueError, match="fetcher"):
        _config("127.0.0.1:9092", "t", fetcher="jvm")
