"""The counters behind Kafka's broker metrics as the data path moves them (three in-process brokers replicating on
loopback, see replication_cluster), purgatory sizes per delayed operation, and the name-and-labels keys of
state.metrics()."""
from __future__ import annotations

from pathlib import Path

import trio
import trio.testing
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, SummaryMetricFamily

from minikafka.broker.metrics import as_dict
from minikafka.broker.purgatory import Purgatory
from tests.unit.replication_cluster import eventually, produce, running_cluster

TOPIC = "metered"
WAIT_S = 10.0


async def test_produce_replication_and_isr_changes_move_the_counters(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster:
        cluster.controller.create_topic(TOPIC, {0: [1, 2, 3]})
        leader = cluster.replica_manager(1).metrics
        assert (await produce(cluster, 1, TOPIC, [b"a" * 100, b"b" * 100])).error_code == 0
        assert leader.messages_in == 2
        assert leader.bytes_in > 200  # the batch: records and their framing
        for follower in (2, 3):
            metrics = cluster.replica_manager(follower).metrics
            await eventually(lambda m=metrics: m.replication_bytes_in == leader.bytes_in,
                             f"broker {follower} to replicate the batch")
            assert metrics.bytes_in == metrics.messages_in == 0  # a follower's appends are not produce traffic
        assert leader.replication_bytes_out >= 2 * leader.bytes_in
        assert leader.bytes_out == 0  # no consumer fetched

        cluster.replica_manager(3).fetcher_manager.pause_fetching()
        assert (await produce(cluster, 1, TOPIC, [b"unseen"], acks=1)).error_code == 0
        await eventually(lambda: cluster.partition(1, TOPIC).isr == [1, 2], "broker 3 to leave the ISR")
        assert leader.isr_shrinks >= 1
        expands = leader.isr_expands
        cluster.replica_manager(3).fetcher_manager.resume_fetching()
        await eventually(lambda: cluster.partition(1, TOPIC).isr == [1, 2, 3], "broker 3 to rejoin the ISR")
        assert leader.isr_expands > expands


async def test_purgatory_sizes_by_delayed_operation() -> None:
    purgatory = Purgatory()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(purgatory.wait_any, [("produce", "t", 0)], WAIT_S)
        nursery.start_soon(purgatory.wait_any, [("fetch", "t", 0), ("fetch", "t", 1)], WAIT_S)
        nursery.start_soon(purgatory.wait_any, [("fetch", "t", 1)], WAIT_S)
        await trio.testing.wait_all_tasks_blocked()
        assert purgatory.delayed_operations_by_kind() == {"produce": 1, "fetch": 2}  # a request counts once
        purgatory.wake_all()
    assert purgatory.delayed_operations_by_kind() == {}


def test_samples_are_keyed_by_name_and_labels_as_the_text_format_writes_them() -> None:
    gauge = GaugeMetricFamily("kafka_server_replicamanager_leadercount", "led", value=3)
    requests = CounterMetricFamily("kafka_network_requestmetrics_requests", "answered", labels=["request", "version"])
    requests.add_metric(["Produce", "9"], 5)
    time = SummaryMetricFamily("kafka_network_requestmetrics_totaltimems", "ms", labels=["request"])
    time.add_metric(["Fetch"], 2, 12.5)
    assert as_dict([gauge, requests, time]) == {
        "kafka_server_replicamanager_leadercount": 3,
        'kafka_network_requestmetrics_requests_total{request="Produce",version="9"}': 5,
        'kafka_network_requestmetrics_totaltimems_count{request="Fetch"}': 2,
        'kafka_network_requestmetrics_totaltimems_sum{request="Fetch"}': 12.5,
    }
