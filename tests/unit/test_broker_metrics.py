"""The counters behind Kafka's broker metrics as the data path moves them (three in-process brokers replicating on
loopback, see replication_cluster), all-topics and per topic, purgatory sizes per delayed operation, and the
name-and-labels keys of state.metrics()."""
from __future__ import annotations

from pathlib import Path

import trio
import trio.testing
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, SummaryMetricFamily

from minikafka.broker.network.metrics_endpoint import as_dict
from minikafka.broker.replication.purgatory import Purgatory
from minikafka.protocol.errors import ErrorCode
from tests.helpers import wait_until_async
from tests.unit.replication_cluster import fetch_request, produce, running_cluster

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
            await wait_until_async(lambda m=metrics: m.replication_bytes_in == leader.bytes_in,
                                   message=f"broker {follower} to replicate the batch")
            assert metrics.bytes_in == metrics.messages_in == 0  # a follower's appends are not produce traffic
        assert leader.replication_bytes_out >= 2 * leader.bytes_in
        assert leader.bytes_out == 0  # no consumer fetched

        cluster.replica_manager(3).fetcher_manager.pause_fetching()
        assert (await produce(cluster, 1, TOPIC, [b"unseen"], acks=1)).error_code == 0
        await wait_until_async(lambda: cluster.partition(1, TOPIC).isr == [1, 2], message="broker 3 to leave the ISR")
        assert leader.isr_shrinks >= 1
        expands = leader.isr_expands
        cluster.replica_manager(3).fetcher_manager.resume_fetching()
        await wait_until_async(lambda: cluster.partition(1, TOPIC).isr == [1, 2, 3],
                               message="broker 3 to rejoin the ISR")
        assert leader.isr_expands > expands


async def test_topic_meters_count_beside_the_all_topics_ones(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster:
        cluster.controller.create_topic("a", {0: [1, 2, 3]}, {"min.insync.replicas": "3"})
        b_id = cluster.controller.create_topic("b", {0: [1, 2, 3]})
        leader = cluster.replica_manager(1).metrics
        assert set(leader.topics) == {"a", "b"}  # each topic with a replica here, from the start
        assert (await produce(cluster, 1, "a", [b"x" * 10, b"y" * 10])).error_code == ErrorCode.NONE
        assert (await produce(cluster, 1, "b", [b"z" * 30])).error_code == ErrorCode.NONE
        a, b = leader.topics["a"], leader.topics["b"]
        assert (a.messages_in, b.messages_in, leader.messages_in) == (2, 1, 3)
        assert a.bytes_in == cluster.log(1, "a").size_in_bytes and b.bytes_in == cluster.log(1, "b").size_in_bytes
        assert a.bytes_in + b.bytes_in == leader.bytes_in
        assert (a.total_produce_requests, b.total_produce_requests, leader.total_produce_requests) == (1, 1, 2)

        client = await cluster.client(1)
        try:
            response = await client.request(fetch_request("b", 0))
        finally:
            await client.aclose()
        assert response.responses[0].partitions[0].error_code == ErrorCode.NONE
        assert (b.bytes_out, a.bytes_out, leader.bytes_out) == (b.bytes_in, 0, b.bytes_in)
        assert b.total_fetch_requests >= 1  # the consumer's read, and the followers'

        # A follower asked to append sends the producer to the leader: asked of it, not failed.
        follower = cluster.replica_manager(2).metrics
        answer = await produce(cluster, 2, "a", [b"elsewhere"])
        assert answer.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert follower.topics["a"].total_produce_requests == 1
        assert follower.topics["a"].failed_produce_requests == follower.failed_produce_requests == 0
        # An acks=all append refused for want of in-sync replicas failed.
        cluster.replica_manager(3).fetcher_manager.pause_fetching()
        assert (await produce(cluster, 1, "a", [b"unseen"], acks=1)).error_code == ErrorCode.NONE
        await wait_until_async(lambda: cluster.partition(1, "a").isr == [1, 2],
                               message="broker 3 to leave the ISR of a-0")
        assert (await produce(cluster, 1, "a", [b"refused"])).error_code == ErrorCode.NOT_ENOUGH_REPLICAS
        assert (a.failed_produce_requests, b.failed_produce_requests, leader.failed_produce_requests) == (1, 0, 1)
        cluster.replica_manager(3).fetcher_manager.resume_fetching()

        # A deleted topic's meters go with it.
        cluster.replica_manager(1).apply_partition_state("b", b_id, 0, None, {}, dict(cluster.broker_epochs))
        assert set(leader.topics) == {"a"}


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
