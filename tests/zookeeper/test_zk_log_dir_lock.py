"""A ZooKeeper-mode broker locks its log dirs as a KRaft one does: a second broker on the same data dir refuses to
start with Kafka's message, before it touches ZooKeeper's /brokers/ids, and the first serves on."""
from __future__ import annotations

import pytest
from kafka import KafkaProducer

import minikafka
from minikafka.subprocess_runner import BrokerStartError

KAFKA_SENTENCE = "A Kafka instance in another process or thread is using this directory."
PRODUCE_TIMEOUT_S = 30.0


def produce_one(bootstrap: str, value: bytes) -> int:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
    try:
        return producer.send("t", value, partition=0).get(timeout=PRODUCE_TIMEOUT_S).offset
    finally:
        producer.close()


def test_a_second_zookeeper_mode_broker_on_a_data_dir_fails_to_start(tmp_path, zk_connect, raw):
    data = tmp_path / "data"
    config = {"zookeeper.connect": zk_connect, "auto.create.topics.enable": True}
    with minikafka.Broker(data_dir=data, config=config) as first:
        assert produce_one(first.bootstrap_servers, b"before") == 0
        registered = raw.get("/brokers/ids/1")[1].czxid
        second = minikafka.Broker(data_dir=data, config=config, log_path=tmp_path / "second.log")
        try:
            with pytest.raises(BrokerStartError) as refused:
                second.start()
            assert f"Failed to acquire lock on file .lock in {data}. {KAFKA_SENTENCE}" in str(refused.value)
        finally:
            second.close()
        assert raw.get("/brokers/ids/1")[1].czxid == registered  # the first's registration stands
        assert produce_one(first.bootstrap_servers, b"after") == 1
