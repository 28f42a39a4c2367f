"""The status page: a live web view of a `minikafka.Broker` or `minikafka.Cluster`, served by the process that owns
the handle (so its buttons can kill and restart the cluster's brokers).

An ASGI app (starlette) on trio (hypercorn's trio worker), on its own thread, bound to 127.0.0.1. The page is plain
HTML that polls the JSON endpoints below (documented in docs/status-page.md); they return what the handle's
`state` reads, so the page shows exactly what a test sees:

    GET  /api/cluster        brokers (running, controller) and the controller's node id
    GET  /api/topics         partitions: leader, replicas, ISR, HW, LEO per replica, LSO, size, under-replicated
    GET  /api/groups         groups: state, members, assignment, committed offset and lag per partition; a share
                             group's share-partitions (start and end offsets, in-flight records by state)
    GET  /api/transactions   transactional ids: state, producer id and epoch, partitions
    GET  /api/faults         each broker's active faults with their hit counts
    GET  /api/metrics        per broker: request counts and latency per API, bytes in and out
    POST /api/brokers/{id}/kill, /api/brokers/{id}/restart, /api/brokers/{id}/pause-fetching,
         /api/links/{a}/{b}/cut   (a cluster's buttons; each answers the action done)
    POST /api/faults/{id}/{fault id}/clear, /api/faults/clear   (heal one fault, or every fault of every broker)
"""
from __future__ import annotations

import os
import re
import threading
from importlib import resources
from typing import Any

# The handle is a minikafka.Broker or minikafka.Cluster (typed Any: the handles import this module).
Handle = Any

# The metrics the charts draw, by Kafka's Prometheus names (broker/server/metrics.py).
_REQUESTS = re.compile(r'^kafka_network_requestmetrics_requests_total\{request="(\w+)"')
_LATENCY_SUM = re.compile(r'^kafka_network_requestmetrics_totaltimems_sum\{request="(\w+)"')
_LATENCY_COUNT = re.compile(r'^kafka_network_requestmetrics_totaltimems_count\{request="(\w+)"')
_BYTES = {"bytes_in": "kafka_server_brokertopicmetrics_bytesin_total",
          "bytes_out": "kafka_server_brokertopicmetrics_bytesout_total"}


class ServedBroker:
    """The broker of this very process (`minikafka serve --ui-port`), as the page reads it: over its own plaintext
    listener, through the control API, as a Broker handle's State does."""

    running = True

    def __init__(self, host: str, port: int, node_id: int) -> None:
        self.host, self.port, self.node_id = host, port, node_id

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def faults(self) -> Any:
        from minikafka.control_client import ControlClient
        from minikafka.faults import Faults

        return Faults(ControlClient(self.bootstrap_servers))

    def new_state(self) -> Any:
        from minikafka.control_client import ControlClient
        from minikafka.state import State

        return State(lambda: self.bootstrap_servers, lambda: [ControlClient(self.bootstrap_servers)])


class StatusPageData:
    """The JSON documents of the page, read through a handle's `state` (and its brokers for the actions)."""

    def __init__(self, handle: Handle) -> None:
        self.handle = handle
        # A State of the page's own, used by one request at a time: the caller's thread keeps the handle's.
        self.state = handle.new_state()
        self.lock = threading.Lock()

    def _brokers(self) -> list[Any]:
        brokers = getattr(self.handle, "brokers", None)
        return list(brokers) if brokers is not None else [self.handle]

    def cluster(self) -> dict[str, Any]:
        descriptions = {d["node_id"]: d for d in self.state.describe([])}
        controller_ids = getattr(self.handle, "controller_ids", None)
        brokers = [{"node_id": b.node_id, "address": f"{b.host}:{b.port}", "running": b.running,
                    "answering": b.node_id in descriptions,
                    "disk_usage_bytes": descriptions.get(b.node_id, {}).get("disk_usage_bytes")}
                   for b in self._brokers()]
        return {"brokers": brokers, "controller_ids": controller_ids() if controller_ids else {},
                "can_kill": controller_ids is not None}

    def topics(self) -> dict[str, Any]:
        state = self.state
        topics = []
        for name in state.topics():
            try:
                partitions = state.partitions(name)
            except KeyError:  # deleted between the two calls
                continue
            topics.append({"name": name, "partitions": [{
                "partition": p.partition, "leader": p.leader, "leader_epoch": p.leader_epoch,
                "replicas": p.replicas, "isr": p.isr, "high_watermark": p.high_watermark,
                "log_start_offset": p.log_start_offset, "last_stable_offset": p.last_stable_offset,
                "log_end_offset": p.log_end_offset,
                "log_end_offsets": {str(r): end for r, end in p.log_end_offsets.items()},
                "size_bytes": p.size_bytes,
                "under_replicated": len(p.isr) < len(p.replicas)} for p in partitions]})
        return {"topics": topics}

    def groups(self) -> dict[str, Any]:
        state = self.state
        ends: dict[tuple[str, int], int | None] = {}
        groups = []
        for group_id in state.groups():
            group = state.group(group_id)
            offsets = []
            for (topic, partition), committed in sorted(group.offsets.items()):
                if (topic, partition) not in ends:
                    try:
                        ends[(topic, partition)] = state.partition(topic, partition).high_watermark
                    except KeyError:
                        ends[(topic, partition)] = None
                end = ends[(topic, partition)]
                offsets.append({"topic": topic, "partition": partition, "committed": committed,
                                "lag": None if end is None else max(end - committed, 0)})
            groups.append({"group_id": group.group_id, "state": group.state, "group_type": group.group_type,
                           "protocol": group.protocol, "offsets": offsets, "members": [{
                               "member_id": m.member_id, "client_id": m.client_id, "host": m.host,
                               "assignment": [list(tp) for tp in m.assignment]} for m in group.members],
                           "share_partitions": self._share_partitions(group_id) if group.group_type == "share"
                           else []})
        return {"groups": groups}

    def _share_partitions(self, group_id: str) -> list[dict[str, Any]]:
        """A share group's progress: per share-partition, its start and end offsets and its in-flight records by
        state (a share group commits no offsets)."""
        rows = []
        for (topic, partition), p in sorted(self.state.share_group(group_id).partitions.items()):
            by_state: dict[str, int] = {}
            for record in p.records:
                by_state[record.state] = by_state.get(record.state, 0) + 1
            rows.append({"topic": topic, "partition": partition, "start_offset": p.start_offset,
                         "end_offset": p.end_offset, "in_flight": by_state,
                         "max_delivery_count": max((r.delivery_count for r in p.records), default=0)})
        return rows

    def transactions(self) -> dict[str, Any]:
        return {"transactions": [{
            "transactional_id": t.transactional_id, "state": t.state, "producer_id": t.producer_id,
            "producer_epoch": t.producer_epoch, "partitions": [list(tp) for tp in t.partitions],
            "timeout_ms": t.timeout_ms} for t in self.state.transactions()]}

    def faults(self) -> dict[str, Any]:
        return {"faults": [{"node_id": b.node_id, **fault} for b in self._brokers() if b.running
                           for fault in b.faults.list()]}

    def metrics(self) -> dict[str, Any]:
        brokers = []
        for node_id, metrics in sorted(self.state.metrics().items()):
            requests: dict[str, float] = {}
            latency_sum: dict[str, float] = {}
            latency_count: dict[str, float] = {}
            for name, value in metrics.items():
                for pattern, into in ((_REQUESTS, requests), (_LATENCY_SUM, latency_sum),
                                      (_LATENCY_COUNT, latency_count)):
                    match = pattern.match(name)
                    if match:
                        into[match.group(1)] = into.get(match.group(1), 0.0) + value
            brokers.append({"node_id": node_id, "requests_total": requests,
                            "total_time_ms_sum": latency_sum, "total_time_ms_count": latency_count,
                            **{key: sum(v for n, v in metrics.items() if n.split("{")[0] == prom)
                               for key, prom in _BYTES.items()}})
        return {"brokers": brokers}

    def clear_fault(self, node_id: int, fault_id: int) -> dict[str, Any]:
        """A heal button: undo one active fault of a broker; KeyError when it has no such fault."""
        from minikafka.faults import Fault

        broker = next((b for b in self._brokers() if b.node_id == node_id), None)
        if broker is None:
            raise KeyError(f"no broker {node_id}")
        description = next((f for f in broker.faults.list() if f.get("id") == fault_id), None)
        if description is None:
            raise KeyError(f"broker {node_id} has no active fault {fault_id}")
        Fault(broker.faults, description).clear()
        return {"action": "clear-fault", "node_id": node_id, "fault": description}

    def heal(self) -> dict[str, Any]:
        """The heal-everything button: undo every fault of every running broker (cut links, paused fetching...)."""
        cleared = sum(b.faults.clear() for b in self._brokers() if b.running)
        return {"action": "heal", "cleared": cleared}

    def act(self, action: str, node_id: int, other: int | None = None) -> dict[str, Any]:
        """A button's action on a cluster's broker; KeyError for an unknown node, ValueError for a lone broker."""
        cluster = self.handle
        if not hasattr(cluster, "brokers"):
            raise ValueError("actions need a minikafka.Cluster")
        broker = cluster.broker(node_id)
        if action == "kill":
            broker.kill()
        elif action == "restart":
            if broker.running:
                broker.stop()
            broker.start()
        elif action == "pause-fetching":
            broker.faults.pause_fetching()
        elif action == "cut-link":
            assert other is not None
            cluster.cut_link(node_id, other)
        else:
            raise ValueError(f"unknown action {action!r}")
        return {"action": action, "node_id": node_id, "other": other}


def build_app(handle: Handle) -> Any:
    """The starlette app of the page for `handle`; the blocking reads run on worker threads."""
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import Request
    from starlette.responses import HTMLResponse, JSONResponse, Response
    from starlette.routing import Route

    data = StatusPageData(handle)
    assets = resources.files("minikafka") / "status_page_assets"

    def locked(method: Any, *args: Any) -> dict[str, Any]:
        with data.lock:
            result: dict[str, Any] = method(*args)
            return result

    def reader(method: str) -> Any:
        async def endpoint(request: Request) -> Response:
            return JSONResponse(await run_in_threadpool(locked, getattr(data, method)))
        return endpoint

    async def page(request: Request) -> Response:
        return HTMLResponse((assets / "index.html").read_text())

    async def chart_js(request: Request) -> Response:
        return Response((assets / "chart.js").read_text(), media_type="text/javascript")

    async def act(request: Request) -> Response:
        params = request.path_params
        try:
            if "b" in params:
                result = await run_in_threadpool(data.act, "cut-link", int(params["a"]), int(params["b"]))
            elif "fault_id" in params:
                result = await run_in_threadpool(data.clear_fault, params["node_id"], params["fault_id"])
            elif request.url.path == "/api/faults/clear":
                result = await run_in_threadpool(data.heal)
            else:
                result = await run_in_threadpool(data.act, params["action"], int(params["node_id"]))
        except (KeyError, ValueError) as e:
            return JSONResponse({"error": str(e)}, status_code=400)
        return JSONResponse(result)

    routes = [Route("/", page), Route("/chart.js", chart_js),
              *(Route(f"/api/{name}", reader(name)) for name in
                ("cluster", "topics", "groups", "transactions", "faults", "metrics")),
              Route("/api/brokers/{node_id:int}/{action}", act, methods=["POST"]),
              Route("/api/links/{a:int}/{b:int}/cut", act, methods=["POST"]),
              Route("/api/faults/{node_id:int}/{fault_id:int}/clear", act, methods=["POST"]),
              Route("/api/faults/clear", act, methods=["POST"])]
    app = Starlette(routes=routes)
    app.state.data = data
    return app


class StatusPage:
    """The page served on a thread of this process until `close()`; `url` says where."""

    def __init__(self, handle: Handle, port: int | None = None) -> None:
        import socket

        self._app = build_app(handle)
        self._socket = socket.socket()
        self._socket.bind(("127.0.0.1", port or 0))
        self._socket.listen()  # connections queue from now on, before the server's first accept: `url` is usable
        self.url = f"http://127.0.0.1:{self._socket.getsockname()[1]}/"
        self._stop: Any = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="minikafka-status-page", daemon=True)
        self._thread.start()
        self._ready.wait(30)

    def _run(self) -> None:
        import trio
        from hypercorn.config import Config
        from hypercorn.trio import serve

        config = Config()
        config.bind = [f"fd://{os.dup(self._socket.fileno())}"]  # hypercorn closes the fd it serves
        config.accesslog = None
        config.loglevel = "WARNING"

        async def main() -> None:
            self._stop = trio.Event()
            self._token = trio.lowlevel.current_trio_token()
            self._ready.set()
            await serve(self._app, config, shutdown_trigger=self._stop.wait)

        trio.run(main)

    def close(self) -> None:
        """Stop serving and free the port."""
        if self._stop is not None and self._thread.is_alive():
            self._token.run_sync_soon(self._stop.set)
            self._thread.join(30)
        self._socket.close()
        self._app.state.data.state.close()
