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

The data path pays only integer increments, per batch or partition read, on a BrokerMetrics and on the topic's
TopicMetrics (one dict lookup); every gauge is computed from the broker's state at scrape time. The HTTP server is
prometheus_client's, on a thread of its own; a scrape asks the node's trio loop for the figures (the loop owns all
state and no lock guards it), so a scrape never reads state mid-change. The endpoint also serves what
prometheus_client serves by default, read on the HTTP thread: the process's CPU, memory and file descriptors
(`process_cpu_seconds_total`, `process_resident_memory_bytes`, `process_open_fds`, ...), `python_info` and
`python_gc_*`.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, NamedTuple

import trio
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric, SummaryMetricFamily
from prometheus_client.exposition import start_http_server
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector, CollectorRegistry

from minikafka.broker.metadata.metadata_image import NO_LEADER, MetadataImage

if TYPE_CHECKING:
    from minikafka.broker.controller import ControllerServer
    from minikafka.broker.replication.partition import Partition
    from minikafka.broker.server.broker_server import BrokerServer

log = logging.getLogger("minikafka.metrics")

# The delayed operations of Kafka's DelayedOperationPurgatory metrics, by the first part of their purgatory keys.
DELAYED_OPERATIONS = {"produce": "Produce", "fetch": "Fetch"}
# Makes a node's metric families from the figures read on its loop.
FamiliesBuilder = Callable[[], list[Metric]]


class RequestStats:
    """One API version's requests answered and the time they took, for RequestsPerSec and TotalTimeMs."""

    __slots__ = ("count", "total_time_ms")

    def __init__(self) -> None:
        self.count = 0
        self.total_time_ms = 0.0


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


class BrokerMetrics:
    """The counters a broker's data path moves; a Kafka meter's Count each (its rates come from rate())."""

    def __init__(self) -> None:
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
        self.requests: dict[tuple[str, int], RequestStats] = {}
        self.requests_in_flight = 0  # taken and not yet answered: RequestQueueSize, as no queue stands before them
        # A combined node's controller: its metrics are the node's, served with the broker's.
        self.local_controller: ControllerServer | None = None

    def topic(self, name: str) -> TopicMetrics:
        """The topic's meters, made on first use."""
        topic_metrics = self.topics.get(name)
        if topic_metrics is None:
            topic_metrics = self.topics[name] = TopicMetrics()
        return topic_metrics

    def request_answered(self, api: str, version: int, time_ms: float) -> None:
        stats = self.requests.get((api, version))
        if stats is None:
            stats = self.requests[(api, version)] = RequestStats()
        stats.count += 1
        stats.total_time_ms += time_ms


def fetch_request_name(request: Any, version: int) -> str:
    """Kafka's RequestMetrics count a Fetch also as FetchFollower or FetchConsumer, by who sent it."""
    if version >= 15:
        state = request.replica_state
        replica_id = state.replica_id if state is not None else -1
    else:
        replica_id = request.replica_id
    return "FetchFollower" if replica_id >= 0 else "FetchConsumer"


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)


def _counter(name: str, doc: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(name, doc, value=value)


def broker_families(broker: BrokerServer) -> list[Metric]:
    """The broker's metrics now, with the controller's of its node (KRaft combined, or ZooKeeper mode)."""
    return read_broker(broker)()


def read_broker(broker: BrokerServer) -> FamiliesBuilder:
    """Read the broker's figures now, on its loop; the builder returned makes them into metric families anywhere, so
    that the per-partition series, most of a scrape's work on a broker of many partitions, are made off the loop."""
    metrics = broker.metrics
    families: list[Metric] = []
    replica_manager = getattr(broker, "replica_manager", None)  # built once the broker has caught up
    partitions = list(replica_manager.partitions.values()) if replica_manager is not None else []
    figures = [PartitionFigures.of(p) for p in partitions]
    families += [
        _gauge("kafka_server_replicamanager_underreplicatedpartitions",
               "Partitions led here whose ISR is smaller than their replication factor",
               sum(1 for f in figures if f.under_replicated)),
        _gauge("kafka_server_replicamanager_underminisrpartitioncount",
               "Partitions led here whose ISR is smaller than min.insync.replicas (or their replica count)",
               sum(1 for f in figures if f.under_min_isr)),
        _gauge("kafka_server_replicamanager_leadercount", "Partitions led here",
               sum(1 for p in partitions if p.is_leader)),
        _gauge("kafka_server_replicamanager_partitioncount", "Partitions with a replica here", len(partitions)),
        _counter("kafka_server_replicamanager_isrshrinks", "ISR shrinks committed by the controller",
                 metrics.isr_shrinks),
        _counter("kafka_server_replicamanager_isrexpands", "ISR expansions committed by the controller",
                 metrics.isr_expands),
        _counter("kafka_server_replicamanager_failedisrupdates", "ISR changes the controller refused or failed",
                 metrics.failed_isr_updates),
    ]
    families += _broker_topic_families(metrics)
    families += [
        _counter("kafka_server_brokertopicmetrics_replicationbytesin", "Bytes this broker's followers fetched",
                 metrics.replication_bytes_in),
        _counter("kafka_server_brokertopicmetrics_replicationbytesout", "Bytes followers fetched from here",
                 metrics.replication_bytes_out),
    ]
    max_lag = GaugeMetricFamily("kafka_server_replicafetchermanager_maxlag",
                                "The largest lag, in records, of a partition this broker follows",
                                labels=["clientId"])
    max_lag.add_metric(["Replica"], _max_lag(broker))
    families.append(max_lag)
    families += _request_families(metrics)
    families.append(_gauge("kafka_network_requestchannel_requestqueuesize", "Requests taken and not yet answered",
                           metrics.requests_in_flight))
    sizes = broker.purgatory.delayed_operations_by_kind()
    purgatory = GaugeMetricFamily("kafka_server_delayedoperationpurgatory_purgatorysize",
                                  "Requests waiting in the purgatory", labels=["delayedOperation"])
    for kind, operation in DELAYED_OPERATIONS.items():
        purgatory.add_metric([operation], sizes.get(kind, 0))
    families.append(purgatory)
    families.append(_gauge("kafka_server_fetchsessioncache_numincrementalfetchsessions",
                           "Incremental fetch sessions in the cache", len(broker.fetch_sessions)))
    if metrics.local_controller is not None:
        families += controller_families(metrics.local_controller)
    else:
        zk_controller = getattr(broker.metadata, "kafka_controller", None)  # ZooKeeper mode, once ready
        quorum = zk_controller.quorum if zk_controller is not None and zk_controller.is_active else None
        families += _kafka_controller_families(quorum.image if quorum is not None else None)
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


def read_node(broker: BrokerServer | None, controller: ControllerServer | None) -> FamiliesBuilder:
    """A node's figures now (see read_broker): its broker's (with those of a combined node's controller), or its
    controller's."""
    if broker is not None:
        return read_broker(broker)
    families = controller_families(controller) if controller is not None else []
    return lambda: families


def controller_families(controller: ControllerServer) -> list[Metric]:
    """A KRaft controller's metrics: it is the active controller once it runs (the quorum has one voter)."""
    quorum = getattr(controller, "controller", None)  # opened when the controller starts
    return _kafka_controller_families(quorum.image if quorum is not None else None)


def _kafka_controller_families(active_image: MetadataImage | None) -> list[Metric]:
    """KafkaController's gauges; only the active controller (with the cluster's image) counts."""
    offline = 0
    if active_image is not None:
        offline = sum(1 for _topic, _index, p in active_image.partitions() if p.leader == NO_LEADER)
    return [_gauge("kafka_controller_kafkacontroller_activecontrollercount", "1 on the active controller",
                   1 if active_image is not None else 0),
            _gauge("kafka_controller_kafkacontroller_offlinepartitionscount", "Partitions with no leader", offline)]


def _max_lag(broker: BrokerServer) -> int:
    replica_manager = getattr(broker, "replica_manager", None)
    if replica_manager is None:
        return 0
    return max((state.lag for fetcher in replica_manager.fetcher_manager.fetchers.values()
                for state in fetcher.partition_states.values()), default=0)


def _request_families(metrics: BrokerMetrics) -> list[Metric]:
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


def as_dict(families: Iterable[Metric]) -> dict[str, float]:
    """Each sample by its name and labels as the text format writes them, e.g.
    `kafka_network_requestmetrics_requests_total{request="Produce",version="9"}`."""
    values: dict[str, float] = {}
    for family in families:
        for sample in family.samples:
            if sample.name.endswith("_created"):
                continue
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
            values[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
    return values


class _LoopCollector(Collector):
    """Reads the figures on the node's trio loop, from the HTTP server's thread, and makes the families there."""

    def __init__(self, read: Callable[[], FamiliesBuilder], token: trio.lowlevel.TrioToken) -> None:
        self._read = read
        self._token = token

    def collect(self) -> Iterable[Metric]:
        try:
            build = trio.from_thread.run_sync(self._read, trio_token=self._token)
        except trio.RunFinishedError:  # the node stopped while a scrape came in
            return []
        return build()


async def serve_metrics(host: str, port: int, read: Callable[[], FamiliesBuilder], *,
                        task_status: trio.TaskStatus[tuple[str, int]] = trio.TASK_STATUS_IGNORED) -> None:
    """Serve the node's metrics over HTTP (any path) on host:port until cancelled, each scrape calling `read()` on
    the loop (see read_broker); started with the bound address. A port that cannot be bound raises OSError, as a
    listener's would."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_LoopCollector(read, trio.lowlevel.current_trio_token()))
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    server, thread = start_http_server(port, addr=host, registry=registry)
    try:
        bound = (host, server.server_port)
        log.info("metrics served on http://%s:%d/metrics", *bound)
        task_status.started(bound)
        await trio.sleep_forever()
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(server.shutdown)
        server.server_close()
        thread.join()
