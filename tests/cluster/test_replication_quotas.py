"""Replication throttling (leader.replication.throttled.rate / follower.replication.throttled.rate with the topic's
throttled-replicas configs), set as kafka-configs.sh and kafka-reassign-partitions.sh --throttle set it: dynamic
broker configs and topic configs through the AdminClient.

A follower that was down while a backlog was written catches up while its partition is throttled: no faster than
the throttle allows (Kafka's rate windows admit a burst of about ten windows' worth, so the bound allows that
plus some margin), and the in-sync replicas, never throttled, keep acknowledging acks=all produces as fast as
before the follower came back.
"""
from __future__ import annotations

import statistics
import threading
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)
from kafka.protocol.admin.configs import DescribeConfigsRequest, IncrementalAlterConfigsRequest

import minikafka
from tests.cluster.cluster_modes import CLUSTER_MODES
from tests.helpers import wait_until
from tests.raw_client import RawConnection

TOPIC = "throttled"
RATE = 200_000  # bytes/s, each side
RECORD = b"r" * 10_000
BACKLOG_RECORDS = 500  # 5 MB: about 25 s of throttle, a second or two without
WINDOWS = 11  # replication.quota.window.num, windows of 1 s
RATE_MARGIN = 1.5
FETCH_BYTES = 65_536  # replica.fetch.max.bytes: what one fetch may add past the bound
CATCH_UP_LIMIT_S = 120.0
BASELINE_PRODUCES = 50
WAIT_S = 30.0


class LatencyProducer(threading.Thread):
    """acks=all produces of small records, one at a time, each one's time to acknowledgement noted."""

    def __init__(self, bootstrap_servers: str) -> None:
        super().__init__(name="latency-producer", daemon=True)
        self.latencies: list[tuple[float, float]] = []  # (sent at, seconds to acknowledgement)
        self.errors: list[object] = []
        self._stop_requested = threading.Event()
        self._producer = Producer({"bootstrap.servers": bootstrap_servers, "acks": "all", "linger.ms": 0,
                                   "message.timeout.ms": 30000})

    def run(self) -> None:
        for _ in range(100_000):
            if self._stop_requested.is_set():
                break
            sent = time.monotonic()
            done = threading.Event()

            def delivered(err: object, _msg: object, sent: float = sent, done: threading.Event = done) -> None:
                if err is None:
                    self.latencies.append((sent, time.monotonic() - sent))
                else:
                    self.errors.append(err)
                done.set()

            self._producer.produce(TOPIC, b"latency", partition=0, on_delivery=delivered)
            for _ in range(3000):  # each poll waits at most 10 ms: 30 s in all
                if done.is_set():
                    break
                self._producer.poll(0.01)
            self._stop_requested.wait(0.02)
        self._producer.flush(10)

    def stop(self) -> None:
        self._stop_requested.set()
        self.join(30)

    def between(self, start: float, end: float) -> list[float]:
        return [latency for sent, latency in self.latencies if start <= sent < end]


def alter(admin: AdminClient, resource: ConfigResource) -> None:
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=WAIT_S)


def described(admin: AdminClient, resource: ConfigResource) -> dict[str, ConfigEntry]:
    return admin.describe_configs([resource])[resource].result(timeout=WAIT_S)


def set_cluster_default(address: str, name: str, value: str) -> None:
    """kafka-configs.sh --entity-default: the BROKER resource "" (confluent-kafka and kafka-python refuse that
    name, so the request is sent as the Java admin sends it)."""
    R = IncrementalAlterConfigsRequest[1]
    with RawConnection(address) as connection:
        response = connection.request(R(resources=[R.AlterConfigsResource(
            resource_type=ResourceType.BROKER.value, resource_name="", configs=[
                R.AlterConfigsResource.AlterableConfig(name=name, config_operation=0, value=value)])],
            validate_only=False))
    assert [(r.resource_name, r.error_code) for r in response.responses] == [("", 0)], response


def describe_cluster_default(address: str) -> dict[str, str]:
    R = DescribeConfigsRequest[4]
    with RawConnection(address) as connection:
        response = connection.request(R(resources=[R.DescribeConfigsResource(
            resource_type=ResourceType.BROKER.value, resource_name="", configuration_keys=None)],
            include_synonyms=False, include_documentation=False))
    (result,) = response.results
    assert result.error_code == 0, result
    assert {c.config_source for c in result.configs} <= {ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value}
    return {c.name: c.value for c in result.configs}


def produce_backlog(bootstrap_servers: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap_servers, "acks": "all", "linger.ms": 5,
                        "message.timeout.ms": 60000})
    failures: list[object] = []
    for _ in range(BACKLOG_RECORDS):
        producer.produce(TOPIC, RECORD, partition=0,
                         on_delivery=lambda err, _msg: failures.append(err) if err is not None else None)
        producer.poll(0)
    assert producer.flush(60) == 0
    assert not failures, failures


@pytest.mark.parametrize("zookeeper", CLUSTER_MODES)
def test_a_follower_catches_up_throttled_while_the_isr_keeps_its_latency(zookeeper: bool) -> None:
    config = {"replica.fetch.max.bytes": FETCH_BYTES, "min.insync.replicas": 2,
              "auto.leader.rebalance.enable": "false"}
    with minikafka.Cluster(brokers=3, zookeeper=zookeeper, config=config) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        created = admin.create_topics([NewTopic(TOPIC, 1, replica_assignment=[[1, 2, 3]])])
        created[TOPIC].result(timeout=WAIT_S)
        cluster.wait_for_isr(TOPIC, 0, 3)
        # kafka-reassign-partitions.sh --throttle: the topic's throttled replicas, the brokers' rates
        alter(admin, ConfigResource(ResourceType.TOPIC, TOPIC, incremental_configs=[
            ConfigEntry("leader.replication.throttled.replicas", "0:1,0:2",
                        incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("follower.replication.throttled.replicas", "0:3",
                        incremental_operation=AlterConfigOpType.SET)]))
        set_cluster_default(cluster.broker(1).address, "follower.replication.throttled.rate", str(RATE))
        for broker_id in (1, 2):
            alter(admin, ConfigResource(ResourceType.BROKER, str(broker_id), incremental_configs=[
                ConfigEntry("leader.replication.throttled.rate", str(RATE),
                            incremental_operation=AlterConfigOpType.SET)]))
        # ZooKeeper mode applies a broker's dynamic config when its config-change notification arrives, after the
        # answer (as Kafka's DynamicConfigManager does): describe until it has.
        rates = []
        wait_until(lambda: rates.append(described(admin, ConfigResource(ResourceType.BROKER, "1"))[
            "leader.replication.throttled.rate"]) or rates[-1].value == str(RATE), WAIT_S,
            message="broker 1 to apply its leader.replication.throttled.rate")
        leader_rate = rates[-1]
        assert not leader_rate.is_read_only
        assert getattr(leader_rate.source, "value", leader_rate.source) == ConfigSource.DYNAMIC_BROKER_CONFIG.value
        wait_until(lambda: describe_cluster_default(cluster.broker(2).address) == {
            "follower.replication.throttled.rate": str(RATE)}, WAIT_S, message="the default reaching broker 2")

        # broker 3 learns the default when it comes back; the admin client never needs it meanwhile
        follower = cluster.broker(3)
        follower.stop()
        cluster.wait_for_isr(TOPIC, 0, 2)
        produce_backlog(cluster.bootstrap_servers)

        latency = LatencyProducer(cluster.bootstrap_servers)
        latency.start()
        try:
            baseline_start = time.monotonic()
            # acks=all latency with the two in-sync replicas alone, to compare with
            wait_until(lambda: len(latency.latencies) >= BASELINE_PRODUCES, WAIT_S, message="baseline produces")
            restarted = time.monotonic()
            follower.start()
            state = cluster.wait_for_isr(TOPIC, 0, 3, timeout=CATCH_UP_LIMIT_S)
            caught_up = time.monotonic()
        finally:
            latency.stop()
        assert not latency.errors, latency.errors
        assert sorted(state.isr) == [1, 2, 3]

        elapsed = caught_up - restarted
        backlog = BACKLOG_RECORDS * len(RECORD)
        # At most the throttle over the catch-up, plus the burst the young rate windows admit and a fetch each way.
        allowed = RATE * RATE_MARGIN * (elapsed + WINDOWS) + 2 * FETCH_BYTES
        print(f"caught up {backlog} bytes in {elapsed:.1f} s: {backlog / elapsed:.0f} B/s, throttle {RATE} B/s")
        assert backlog <= allowed, f"{backlog} bytes caught up in {elapsed:.1f} s: faster than the throttle"

        before = latency.between(baseline_start, restarted)
        during = latency.between(restarted, caught_up)
        assert len(before) >= 5 and len(during) >= 5, (len(before), len(during))
        median_before, median_during = statistics.median(before), statistics.median(during)
        print(f"acks=all latency: median {1000 * median_before:.1f} ms before, {1000 * median_during:.1f} ms "
              f"while the follower caught up ({len(before)} and {len(during)} produces)")
        assert median_during <= max(3 * median_before, median_before + 0.25)
