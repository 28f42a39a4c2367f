"""Kafka's BrokerTopicStats and the ReplicaManager's meters: the counters a broker's data path moves.

Each is a Kafka meter's Count (its rates come from Prometheus' rate()); the data path pays only integer increments,
per batch or partition read, on the BrokerMetrics and on the topic's TopicMetrics (one dict lookup). The server's
collectors make metrics of them at scrape time.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from minikafka.broker.network.request_metrics import RequestMetrics

if TYPE_CHECKING:
    from minikafka.broker.metadata.metadata_image import MetadataImage
    from minikafka.broker.replication.delayed_fetch import FetchPartitionRequest, FetchPartitionResult


class TopicMetrics:
    """One topic's BrokerTopicMetrics meters (each its Count), counted beside the all-topics ones of BrokerMetrics."""

    __slots__ = ("bytes_in", "bytes_out", "failed_fetch_requests", "failed_produce_requests", "messages_in",
                 "total_fetch_requests", "total_produce_requests")

    def __init__(self) -> None:
        self.bytes_in = 0
        self.messages_in = 0
        self.bytes_out = 0
        self.total_produce_requests = 0
        self.failed_produce_requests = 0
        self.total_fetch_requests = 0
        self.failed_fetch_requests = 0


class BrokerMetrics(RequestMetrics):
    """The broker's counters: its request path's (RequestMetrics) and its replica manager's, in one object the
    broker hands to both."""

    def __init__(self) -> None:
        super().__init__()
        self.bytes_in = 0  # produced by clients, as appended by leaders
        self.messages_in = 0
        self.bytes_out = 0  # fetched by consumers
        # Partition appends and reads asked of a replica here, and those that failed unexpectedly (Kafka does not
        # count the answers that send a client elsewhere or refuse its records as failed).
        self.total_produce_requests = 0
        self.failed_produce_requests = 0
        self.total_fetch_requests = 0
        self.failed_fetch_requests = 0
        # The per-topic meters of every topic with a replica here, kept by the replica manager.
        self.topics: dict[str, TopicMetrics] = {}
        self.replication_bytes_in = 0  # fetched by this broker's followers
        self.replication_bytes_out = 0  # fetched from this broker's leaders by followers
        self.isr_shrinks = 0
        self.isr_expands = 0
        self.failed_isr_updates = 0
        # A combined node's controller: the image it holds while active, so that KafkaController's gauges are the
        # node's, served with the broker's (one metrics registry per node, as in Kafka).
        self.local_controller_image: Callable[[], MetadataImage | None] | None = None

    def topic(self, name: str) -> TopicMetrics:
        """The topic's meters, made on first use."""
        topic_metrics = self.topics.get(name)
        if topic_metrics is None:
            topic_metrics = self.topics[name] = TopicMetrics()
        return topic_metrics

    def update_bytes_out(self, is_from_follower: bool, requests: list[FetchPartitionRequest],
                         results: list[FetchPartitionResult]) -> None:
        """Kafka's updateBytesOut: BytesOut (a consumer's fetch, per topic too) or ReplicationBytesOut (a
        follower's) of the records a fetch answers with."""
        if is_from_follower:
            self.replication_bytes_out += sum(len(r.records) for r in results)
            return
        for request, result in zip(requests, results, strict=True):
            size = len(result.records)
            if size:
                self.bytes_out += size
                topic_metrics = self.topics.get(request.topic_partition[0])
                if topic_metrics is not None:
                    topic_metrics.bytes_out += size
