"""Kafka's broker metrics by their names, in the Prometheus text format (prometheus_client), for operators.

Names follow the JMX exporter's Kafka rules that Kafka's dashboards are written for: the MBean
`kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions` is the gauge
`kafka_server_replicamanager_underreplicatedpartitions`; a `...PerSec` meter is the counter of its Count,
`kafka_server_brokertopicmetrics_bytesin_total` (Prometheus' rate() gives Kafka's per-second rates); an MBean's
extra key becomes a label (`request="Produce"`, `delayedOperation="Fetch"`); the TotalTimeMs histogram is a summary
(`_count` and `_sum`, in ms).

The data path pays only integer increments on a BrokerMetrics; every gauge is computed from the broker's state at
scrape time. The HTTP server is prometheus_client's, on a thread of its own; a scrape asks the node's trio loop for
the figures (the loop owns all state and no lock guards it), so a scrape never reads state mid-change.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import trio
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric, SummaryMetricFamily
from prometheus_client.exposition import start_http_server
from prometheus_client.registry import Collector, CollectorRegistry

from .metadata_image import NO_LEADER, MetadataImage

if TYPE_CHECKING:
    from .broker_server import BrokerServer
    from .controller import ControllerServer

log = logging.getLogger("minikafka.metrics")

# The delayed operations of Kafka's DelayedOperationPurgatory metrics, by the first part of their purgatory keys.
DELAYED_OPERATIONS = {"produce": "Produce", "fetch": "Fetch"}


class RequestStats:
    """One API version's requests answered and the time they took, for RequestsPerSec and TotalTimeMs."""

    __slots__ = ("count", "total_time_ms")

    def __init__(self) -> None:
        self.count = 0
        self.total_time_ms = 0.0


class BrokerMetrics:
    """The counters a broker's data path moves; a Kafka meter's Count each (its rates come from rate())."""

    def __init__(self) -> None:
        self.bytes_in = 0  # produced by clients, as appended by leaders
        self.messages_in = 0
        self.bytes_out = 0  # fetched by consumers
        self.replication_bytes_in = 0  # fetched by this broker's followers
        self.replication_bytes_out = 0  # fetched from this broker's leaders by followers
        self.isr_shrinks = 0
        self.isr_expands = 0
        self.failed_isr_updates = 0
        self.requests: dict[tuple[str, int], RequestStats] = {}
        self.requests_in_flight = 0  # taken and not yet answered: RequestQueueSize, as no queue stands before them
        # A combined node's controller: its metrics are the node's, served with the broker's.
        self.local_controller: ControllerServer | None = None

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
    metrics = broker.metrics
    families: list[Metric] = []
    replica_manager = getattr(broker, "replica_manager", None)  # built once the broker has caught up
    partitions = list(replica_manager.partitions.values()) if replica_manager is not None else []
    leaders = [p for p in partitions if p.is_leader]
    families += [
        _gauge("kafka_server_replicamanager_underreplicatedpartitions",
               "Partitions led here whose ISR is smaller than their replica set",
               sum(1 for p in leaders if len(p.isr) < len(p.replicas))),
        _gauge("kafka_server_replicamanager_underminisrpartitioncount",
               "Partitions led here whose ISR is smaller than min.insync.replicas",
               sum(1 for p in leaders if len(p.isr) < p.log.config.min_insync_replicas)),
        _gauge("kafka_server_replicamanager_leadercount", "Partitions led here", len(leaders)),
        _gauge("kafka_server_replicamanager_partitioncount", "Partitions with a replica here", len(partitions)),
        _counter("kafka_server_replicamanager_isrshrinks", "ISR shrinks committed by the controller",
                 metrics.isr_shrinks),
        _counter("kafka_server_replicamanager_isrexpands", "ISR expansions committed by the controller",
                 metrics.isr_expands),
        _counter("kafka_server_replicamanager_failedisrupdates", "ISR changes the controller refused or failed",
                 metrics.failed_isr_updates),
        _counter("kafka_server_brokertopicmetrics_bytesin", "Bytes produced by clients", metrics.bytes_in),
        _counter("kafka_server_brokertopicmetrics_messagesin", "Records produced by clients", metrics.messages_in),
        _counter("kafka_server_brokertopicmetrics_bytesout", "Bytes fetched by consumers", metrics.bytes_out),
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
    return families


def node_families(broker: BrokerServer | None, controller: ControllerServer | None) -> list[Metric]:
    """A node's metrics now: its broker's (with those of a combined node's controller), or its controller's."""
    if broker is not None:
        return broker_families(broker)
    return controller_families(controller) if controller is not None else []


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
    """Collects on the node's trio loop, from the HTTP server's thread."""

    def __init__(self, families: Callable[[], list[Metric]], token: trio.lowlevel.TrioToken) -> None:
        self._families = families
        self._token = token

    def collect(self) -> Iterable[Metric]:
        try:
            return trio.from_thread.run_sync(self._families, trio_token=self._token)
        except trio.RunFinishedError:  # the node stopped while a scrape came in
            return []


async def serve_metrics(host: str, port: int, families: Callable[[], list[Metric]], *,
                        task_status: trio.TaskStatus[tuple[str, int]] = trio.TASK_STATUS_IGNORED) -> None:
    """Serve `families()` over HTTP (any path) on host:port until cancelled; started with the bound address. A
    port that cannot be bound raises OSError, as a listener's would."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_LoopCollector(families, trio.lowlevel.current_trio_token()))
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
