"""Kafka's broker metrics by their names, in the Prometheus text format (prometheus_client), for operators.

Names follow the JMX exporter's Kafka rules that Kafka's dashboards are written for: the MBean
`kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions` is the gauge
`kafka_server_replicamanager_underreplicatedpartitions`; a `...PerSec` meter is the counter of its Count,
`kafka_server_brokertopicmetrics_bytesin_total` (Prometheus' rate() gives Kafka's per-second rates); an MBean's
extra key becomes a label (`request="Produce"`, `delayedOperation="Fetch"`, `topic="t"`, `partition="0"`); the
TotalTimeMs histogram is a summary (`_count` and `_sum`, in ms). As in Kafka's BrokerTopicMetrics, a meter of client
traffic has its all-topics series (no label) and one per topic hosted here (`topic`), a replication meter only the
former; Kafka's Log and Partition MBeans give one series per partition hosted here
(`kafka_log_log_size{partition="0",topic="t"}`).

The counters are the data path's (BrokerMetrics); every gauge is computed from the broker's state at scrape time,
from the collaborators the collectors are given. The endpoint that serves them is metrics_endpoint's.
"""
from __future__ import annotations

from typing import NamedTuple

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric, SummaryMetricFamily

from minikafka.broker.controller.controller_metrics import kafka_controller_families
from minikafka.broker.log.log_cleaner import LogCleaner
from minikafka.broker.metadata.metadata_source import MetadataSource
from minikafka.broker.network.metrics_endpoint import FamiliesBuilder, counter, gauge
from minikafka.broker.network.request_metrics import RequestMetrics, RequestStats
from minikafka.broker.replication.broker_topic_stats import BrokerMetrics
from minikafka.broker.replication.fetch_session import FetchSessionCache
from minikafka.broker.replication.partition import Partition
from minikafka.broker.replication.purgatory import Purgatory
from minikafka.broker.replication.replica_manager import ReplicaManager

# The delayed operations of Kafka's DelayedOperationPurgatory metrics, by the first part of their purgatory keys.
DELAYED_OPERATIONS = {"produce": "Produce", "fetch": "Fetch"}


def broker_families(metrics: BrokerMetrics, purgatory: Purgatory, fetch_sessions: FetchSessionCache,
                    metadata: MetadataSource, replica_manager: ReplicaManager | None,
                    log_cleaner: LogCleaner | None = None) -> list[Metric]:
    """The broker's metrics now, with the controller's of its node (KRaft combined, or ZooKeeper mode)."""
    return read_broker(metrics, purgatory, fetch_sessions, metadata, replica_manager, log_cleaner)()


def read_broker(metrics: BrokerMetrics, purgatory: Purgatory, fetch_sessions: FetchSessionCache,
                metadata: MetadataSource, replica_manager: ReplicaManager | None,
                log_cleaner: LogCleaner | None = None) -> FamiliesBuilder:
    """Read the broker's figures now, on its loop; the builder returned makes them into metric families anywhere, so
    that the per-partition series, most of a scrape's work on a broker of many partitions, are made off the loop.
    `replica_manager` is None until the broker has caught up with the metadata and built it."""
    families: list[Metric] = []
    partitions = list(replica_manager.partitions.values()) if replica_manager is not None else []
    figures = [PartitionFigures.of(p) for p in partitions]
    families += [
        gauge("kafka_server_replicamanager_underreplicatedpartitions",
              "Partitions led here whose ISR is smaller than their replication factor",
              sum(1 for f in figures if f.under_replicated)),
        gauge("kafka_server_replicamanager_underminisrpartitioncount",
              "Partitions led here whose ISR is smaller than min.insync.replicas (or their replica count)",
              sum(1 for f in figures if f.under_min_isr)),
        gauge("kafka_server_replicamanager_leadercount", "Partitions led here",
              sum(1 for p in partitions if p.is_leader)),
        gauge("kafka_server_replicamanager_partitioncount", "Partitions with a replica here", len(partitions)),
        counter("kafka_server_replicamanager_isrshrinks", "ISR shrinks committed by the controller",
                metrics.isr_shrinks),
        counter("kafka_server_replicamanager_isrexpands", "ISR expansions committed by the controller",
                metrics.isr_expands),
        counter("kafka_server_replicamanager_failedisrupdates", "ISR changes the controller refused or failed",
                metrics.failed_isr_updates),
    ]
    families += _broker_topic_families(metrics)
    families += [
        counter("kafka_server_brokertopicmetrics_replicationbytesin", "Bytes this broker's followers fetched",
                metrics.replication_bytes_in),
        counter("kafka_server_brokertopicmetrics_replicationbytesout", "Bytes followers fetched from here",
                metrics.replication_bytes_out),
    ]
    max_lag = GaugeMetricFamily("kafka_server_replicafetchermanager_maxlag",
                                "The largest lag, in records, of a partition this broker follows",
                                labels=["clientId"])
    max_lag.add_metric(["Replica"], _max_lag(replica_manager))
    families.append(max_lag)
    families += _request_families(metrics)
    families.append(gauge("kafka_network_requestchannel_requestqueuesize", "Requests taken and not yet answered",
                          metrics.requests_in_flight))
    sizes = purgatory.delayed_operations_by_kind()
    purgatory_size = GaugeMetricFamily("kafka_server_delayedoperationpurgatory_purgatorysize",
                                       "Requests waiting in the purgatory", labels=["delayedOperation"])
    for kind, operation in DELAYED_OPERATIONS.items():
        purgatory_size.add_metric([operation], sizes.get(kind, 0))
    families.append(purgatory_size)
    families.append(gauge("kafka_server_fetchsessioncache_numincrementalfetchsessions",
                          "Incremental fetch sessions in the cache", len(fetch_sessions)))
    if log_cleaner is not None:
        families += log_cleaner_families(log_cleaner)
    if metrics.local_controller_image is not None:
        families += kafka_controller_families(metrics.local_controller_image())
    else:
        zk_controller = getattr(metadata, "kafka_controller", None)  # ZooKeeper mode, once ready
        quorum = zk_controller.quorum if zk_controller is not None and zk_controller.is_active else None
        families += kafka_controller_families(quorum.image if quorum is not None else None)
    return lambda: families + _partition_families(figures)


# Kafka's BrokerTopicMetrics meters counted per topic as well: Prometheus name, TopicMetrics attribute, help.
BROKER_TOPIC_METERS = [
    ("bytesin", "bytes_in", "Bytes produced by clients"),
    ("messagesin", "messages_in", "Records produced by clients"),
    ("bytesout", "bytes_out", "Bytes fetched by consumers"),
    ("totalproducerequests", "total_produce_requests", "Partition appends asked of a replica here"),
    ("failedproducerequests", "failed_produce_requests", "Partition appends that failed unexpectedly"),
    ("totalfetchrequests", "total_fetch_requests", "Partition reads asked of a replica here"),
    ("failedfetchrequests", "failed_fetch_requests", "Partition reads that failed unexpectedly"),
]


def _broker_topic_families(metrics: BrokerMetrics) -> list[Metric]:
    """Each meter's all-topics series (no label) and one per topic hosted here, in one family as the JMX exporter
    gives them."""
    topics = sorted(metrics.topics.items())
    families: list[Metric] = []
    for name, attribute, doc in BROKER_TOPIC_METERS:
        family = CounterMetricFamily(f"kafka_server_brokertopicmetrics_{name}", doc, labels=["topic"])
        family.add_metric([], getattr(metrics, attribute))
        for topic, topic_metrics in topics:
            family.add_metric([topic], getattr(topic_metrics, attribute))
        families.append(family)
    return families


class PartitionFigures(NamedTuple):
    """What Kafka's Log and Partition gauges say of one replica here; the Partition ones are zero unless it leads."""

    topic: str
    partition: int
    size: int
    log_end_offset: int
    log_start_offset: int
    segments: int
    under_replicated: bool
    under_min_isr: bool
    isr_count: int
    replicas_count: int

    @classmethod
    def of(cls, p: Partition) -> PartitionFigures:
        the_log = p.log
        leader = p.is_leader
        return cls(p.topic, p.index, the_log.size_in_bytes, the_log.log_end_offset, the_log.log_start_offset,
                   len(the_log.segments), p.is_under_replicated, p.is_under_min_isr, len(p.isr) if leader else 0,
                   p.replication_factor if leader else 0)


def _partition_families(partitions: list[PartitionFigures]) -> list[Metric]:
    """Kafka's Log gauges of each replica here, and its Partition gauges."""
    labels = ["topic", "partition"]
    size = GaugeMetricFamily("kafka_log_log_size", "Bytes of the partition's log segments", labels=labels)
    end = GaugeMetricFamily("kafka_log_log_logendoffset", "The offset the next record appended gets", labels=labels)
    start = GaugeMetricFamily("kafka_log_log_logstartoffset", "The first offset the log holds", labels=labels)
    segments = GaugeMetricFamily("kafka_log_log_numlogsegments", "Segments of the partition's log", labels=labels)
    under_replicated = GaugeMetricFamily("kafka_cluster_partition_underreplicated",
                                         "1 if led here with an ISR smaller than the replication factor",
                                         labels=labels)
    under_min_isr = GaugeMetricFamily("kafka_cluster_partition_underminisr",
                                      "1 if led here with an ISR smaller than min.insync.replicas", labels=labels)
    isr_count = GaugeMetricFamily("kafka_cluster_partition_insyncreplicascount", "The ISR's size, where led here",
                                  labels=labels)
    replicas_count = GaugeMetricFamily("kafka_cluster_partition_replicascount",
                                       "The replication factor, where led here", labels=labels)
    for p in partitions:
        key = [p.topic, str(p.partition)]
        size.add_metric(key, p.size)
        end.add_metric(key, p.log_end_offset)
        start.add_metric(key, p.log_start_offset)
        segments.add_metric(key, p.segments)
        under_replicated.add_metric(key, 1 if p.under_replicated else 0)
        under_min_isr.add_metric(key, 1 if p.under_min_isr else 0)
        isr_count.add_metric(key, p.isr_count)
        replicas_count.add_metric(key, p.replicas_count)
    return [size, end, start, segments, under_replicated, under_min_isr, isr_count, replicas_count]


def _max_lag(replica_manager: ReplicaManager | None) -> int:
    if replica_manager is None:
        return 0
    return max((state.lag for fetcher in replica_manager.fetcher_manager.fetchers.values()
                for state in fetcher.partition_states.values()), default=0)


def _request_families(metrics: RequestMetrics) -> list[Metric]:
    requests = CounterMetricFamily("kafka_network_requestmetrics_requests", "Requests answered",
                                   labels=["request", "version"])
    total_time = SummaryMetricFamily("kafka_network_requestmetrics_totaltimems",
                                     "Time from a request's arrival to its answer, in ms", labels=["request"])
    by_api: dict[str, RequestStats] = {}
    for (api, version), stats in sorted(metrics.requests.items()):
        requests.add_metric([api, str(version)], stats.count)
        total = by_api.setdefault(api, RequestStats())  # Kafka's TotalTimeMs is per API, of every version
        total.count += stats.count
        total.total_time_ms += stats.total_time_ms
    for api, stats in by_api.items():
        total_time.add_metric([api], stats.count, stats.total_time_ms)
    return [requests, total_time]


def log_cleaner_families(cleaner: LogCleaner) -> list[Metric]:
    """Kafka's kafka.log:type=LogCleaner and type=LogCleanerManager gauges."""
    manager = cleaner.manager
    uncleanable_count = GaugeMetricFamily("kafka_log_logcleanermanager_uncleanable_partitions_count",
                                          "Partitions of the log dir whose cleaning failed, skipped until restart",
                                          labels=["logDirectory"])
    uncleanable_bytes = GaugeMetricFamily("kafka_log_logcleanermanager_uncleanable_bytes",
                                          "Cleanable bytes of the log dir's uncleanable partitions",
                                          labels=["logDirectory"])
    for path, partitions in cleaner.uncleanable_by_dir().items():
        uncleanable_count.add_metric([str(path)], len(partitions))
        uncleanable_bytes.add_metric([str(path)], cleaner.uncleanable_bytes(partitions))
    return [
        gauge("kafka_log_logcleaner_max_clean_time_secs", "The longest last cleaning of the cleaner threads, seconds",
              cleaner.max_clean_time_secs),
        gauge("kafka_log_logcleaner_cleaner_recopy_percent",
              "Bytes written over bytes read by the cleaner threads' last cleanings, percent",
              cleaner.cleaner_recopy_percent),
        gauge("kafka_log_logcleaner_max_compaction_delay_secs",
              "How far past max.compaction.lag.ms the most overdue compacted log was at the last look, seconds",
              manager.max_compaction_delay_ms / 1000),
        gauge("kafka_log_logcleanermanager_max_dirty_percent",
              "The cleanable ratio of the dirtiest compacted log at the last look, percent",
              100 * manager.dirtiest_cleanable_ratio),
        gauge("kafka_log_logcleanermanager_time_since_last_run_ms", "Milliseconds since the cleaner last looked",
              cleaner.time_since_last_run_ms),
        uncleanable_count, uncleanable_bytes,
    ]
