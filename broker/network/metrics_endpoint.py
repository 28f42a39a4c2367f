"""A node's metrics endpoint for Prometheus (prometheus_client), shared by the broker's and the controller's metrics.

The HTTP server is prometheus_client's, on a thread of its own; a scrape asks the node's trio loop for the figures
(the loop owns all state and no lock guards it), so a scrape never reads state mid-change. The endpoint also serves
what prometheus_client serves by default, read on the HTTP thread: the process's CPU, memory and file descriptors
(`process_cpu_seconds_total`, `process_resident_memory_bytes`, `process_open_fds`, ...), `python_info` and
`python_gc_*`.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

import trio
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import start_http_server
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector, CollectorRegistry

log = logging.getLogger("minikafka.metrics")

# Makes a node's metric families from the figures read on its loop.
FamiliesBuilder = Callable[[], list[Metric]]


def gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)


def counter(name: str, doc: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(name, doc, value=value)


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
    the loop and the builder it returns on the HTTP thread; started with the bound address. A port that cannot be
    bound raises OSError, as a listener's would."""
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
