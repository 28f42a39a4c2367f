"""Request recording against a broker process: what kafka-python and librdkafka sent (api, versions, fields,
software), the errors answered, waits answered by the broker, and the JSON lines dump."""
from __future__ import annotations

import json
import threading
import time

import pytest
from confluent_kafka import Consumer, Producer
from kafka import KafkaProducer
from kafka.protocol.metadata.metadata import MetadataRequest

import minikafka
from minikafka.control_client import ControlError
from tests.raw_client import RawConnection


def test_recording_sees_each_clients_requests_and_answers(broker_factory, unique_topic, tmp_path):
    broker = broker_factory()
    broker.state.create_topic(unique_topic, partitions=2, replication_factor=1)
    with broker.recording() as rec:
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "client.id": "rdk", "acks": "all"})
        producer.produce(unique_topic, b"v", partition=1)
        assert producer.flush(30) == 0
        produce = rec.wait_for(api="Produce", client_id="rdk", topic=unique_topic, earlier=True)
        assert produce["acks"] == -1 and produce["errors"] == []
        assert produce["partitions"] == [[unique_topic, 1, None]]  # a Produce carries no offset
        assert produce["client_software_name"] == "confluent-kafka-python"
        assert produce["version"] >= 3 and produce["latency_ms"] >= 0

        kp = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, client_id="kp", acks=1, retries=0)
        try:
            broker.faults.fail_requests("Produce", "NOT_ENOUGH_REPLICAS", when={"client_id": "kp"})
            with pytest.raises(Exception, match="NotEnoughReplicas"):
                kp.send(unique_topic, b"refused", partition=0).get(timeout=30)
        finally:
            kp.close()
        refused = rec.wait_for(api="Produce", client_id="kp", earlier=True)
        assert (refused["acks"], refused["errors"]) == (1, ["NOT_ENOUGH_REPLICAS"])
        assert refused["client_software_name"] == "kafka-python"
        assert {e["api"] for e in rec.filter(client_id="kp")} >= {"ApiVersions", "Metadata", "Produce"}
        assert rec.filter(api="Produce", topic="no-such-topic") == []
        with pytest.raises(TimeoutError, match=r"a new request with .*'api': 'DeleteRecords'.*recorded, the last: "):
            rec.wait_for(api="DeleteRecords", timeout=0.3)

        # wait_for is answered when the request arrives, from another thread here.
        late = threading.Thread(target=lambda: Producer({"bootstrap.servers": broker.bootstrap_servers,
                                                         "client.id": "late"}).list_topics(timeout=30))
        late.start()
        try:
            assert rec.wait_for(api="Metadata", client_id="late", timeout=30, earlier=True)["api"] == "Metadata"
        finally:
            late.join(30)
        path = tmp_path / "requests.jsonl"
        rec.dump_jsonl(path)
        dumped = [json.loads(line) for line in path.read_text().splitlines()]
        assert [d["sequence"] for d in dumped] == sorted(d["sequence"] for d in dumped)
        assert any(d["client_id"] == "kp" and d["errors"] == ["NOT_ENOUGH_REPLICAS"] for d in dumped)


def test_wait_for_takes_only_requests_recorded_after_the_call_unless_earlier(broker_factory):
    broker = broker_factory()
    with broker.recording() as rec, RawConnection(broker.bootstrap_servers) as conn:
        conn.request(MetadataRequest[1](topics=[]))
        first = rec.wait_for(api="Metadata", client_id="raw-test", earlier=True)
        assert rec.wait_for(api="Metadata", client_id="raw-test", earlier=True) == first  # the oldest, again
        with pytest.raises(TimeoutError, match="a new request"):
            rec.wait_for(api="Metadata", client_id="raw-test", timeout=0.3)  # nothing asked since
        stop = threading.Event()

        def keep_asking() -> None:
            for _ in range(600):  # bounded: stopped long before
                conn.request(MetadataRequest[1](topics=[]))
                if stop.wait(0.05):
                    return

        asking = threading.Thread(target=keep_asking)
        asking.start()
        try:
            second = rec.wait_for(api="Metadata", client_id="raw-test", timeout=30)
            third = rec.wait_for(api="Metadata", client_id="raw-test", timeout=30)
        finally:
            stop.set()
            asking.join(30)
        assert first["sequence"] < second["sequence"] < third["sequence"]  # each call a request of its own


def test_a_recording_keeps_the_last_size_requests_and_stops(broker_factory):
    broker = broker_factory()
    with broker.recording(size=3) as rec:
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "client.id": "ring"})
        for _ in range(5):
            producer.list_topics(timeout=30)
        rec.wait_for(api="Metadata", client_id="ring", earlier=True)
        kept = rec.entries
        assert len(kept) == 3  # the last 3 requests, in order
        assert [e["sequence"] for e in kept] == list(range(kept[0]["sequence"], kept[0]["sequence"] + 3))
        last = kept[-1]["sequence"]
    with pytest.raises(ControlError, match="at least 1"):
        broker.recording(size=0)
    with broker.recording() as again:  # a new recording starts after what the last one saw
        assert all(entry["sequence"] > last for entry in again.entries)


def test_cluster_recording_merges_every_brokers_requests(tmp_path, unique_topic):
    with minikafka.Cluster(brokers=2, data_dir=tmp_path / "cluster") as cluster:
        cluster.state.create_topic(unique_topic, partitions=2, replication_factor=2)
        cluster.wait_for_topic(unique_topic, 2)
        with cluster.recording() as rec:
            producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "client.id": "spread"})
            for p in (0, 1):
                producer.produce(unique_topic, b"v", partition=p)
            assert producer.flush(30) == 0
            consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "recorded-g",
                                 "client.id": "joiner", "auto.offset.reset": "earliest"})
            try:
                consumer.subscribe([unique_topic])
                joined = None
                deadline = time.monotonic() + 30
                while joined is None and time.monotonic() < deadline:
                    consumer.poll(0.1)
                    joined = next(iter(rec.filter(api="SyncGroup", client_id="joiner")), None)
                assert joined is not None, rec.entries[-5:]
                assert joined["group_id"] == "recorded-g" and joined["member_id"]
                assert joined["errors"] == []
            finally:
                consumer.close()
            produces = rec.filter(api="Produce", client_id="spread")
            leaders = {cluster.wait_for_leader(unique_topic, p).node_id for p in (0, 1)}
            # Each partition's Produce was recorded by the broker leading it; two leaders, two nodes.
            assert sorted(p[1] for e in produces for p in e["partitions"]) == [0, 1]
            assert len({e["node"] for e in produces}) == len(leaders)
