"""The control API (private key 10000): fault injection and state inspection for tests and the CLI.

It is served on the Kafka listener but never advertised in ApiVersions. A request is a JSON object with an
"op"; the answer is {"ok": true, ...} or {"ok": false, "error": message}. Operations:
- describe: node, endpoints, log dirs, active faults, requests waiting in the purgatory, and per partition
  leader, leader epoch, replicas, ISR, high watermark, log start offset and each replica's log end offset;
- fault.add (kind error | latency | disk; error and latency rules may select a request source: "replica"
  or "client"), fault.clear (kind, id), fault.list;
- connections.close: close every other client connection;
- shutdown: a clean stop, as on SIGTERM.
"""
from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any

from minikafka.protocol.control import (
    CONTROL_API_KEY,
    CONTROL_API_VERSION,
    ControlFramingError,
    decode_request_body,
    encode_response,
)
from minikafka.protocol.request_header import RequestHeader

from ..faults.rules import FaultError
from ..server import CloseConnection, ConnectionInfo

if TYPE_CHECKING:
    from ..broker_server import BrokerServer

log = logging.getLogger("minikafka.control")


async def process_control(broker: BrokerServer, header: RequestHeader, frame: bytes, body_pos: int,
                          conn: ConnectionInfo) -> bytes:
    if header.api_version != CONTROL_API_VERSION:
        raise CloseConnection(f"unsupported version {header.api_version} of the control API")
    try:
        request = decode_request_body(frame, body_pos)
    except ControlFramingError as exc:
        raise CloseConnection(str(exc)) from None
    op = request.get("op")
    try:
        operation = OPERATIONS.get(op) if isinstance(op, str) else None
        if operation is None:
            raise FaultError(f"unknown control operation {op!r}; known: {', '.join(sorted(OPERATIONS))}")
        result = await operation(broker, request, conn)
        answer = {"ok": True, **result}
    except KeyError as exc:
        answer = {"ok": False, "error": f"control operation {op!r} needs field {exc}"}
    except (FaultError, TypeError, ValueError) as exc:
        log.info("control %s from %s refused: %s", op, conn.peer, exc)
        answer = {"ok": False, "error": str(exc)}
    return encode_response(header.correlation_id, answer)


def _optional_int(request: dict[str, Any], name: str) -> int | None:
    value = request.get(name)
    return None if value is None else int(value)


async def _describe(broker: BrokerServer, request: dict[str, Any], _conn: ConnectionInfo) -> dict[str, Any]:
    wanted = request.get("topics")
    topics = []
    for name, topic in sorted(broker.controller.topics.items()):
        if wanted is not None and name not in wanted:
            continue
        partitions = []
        for index, reg in sorted(topic.partitions.items()):
            state: dict[str, Any] = {"partition": index, "leader": reg.leader, "leader_epoch": reg.leader_epoch,
                                     "replicas": list(reg.replicas), "isr": list(reg.isr),
                                     "high_watermark": None, "log_start_offset": None, "log_end_offsets": {}}
            hosted = broker.replica_manager.get_partition(name, index)
            if hosted is not None:
                state.update(leader=hosted.leader_id, leader_epoch=hosted.leader_epoch,
                             replicas=list(hosted.replicas), isr=list(hosted.isr),
                             high_watermark=hosted.high_watermark, log_start_offset=hosted.log_start_offset)
                ends = {str(r): hosted.remote_log_end_offsets.get(r) for r in hosted.replicas if r != broker.node_id}
                ends[str(broker.node_id)] = hosted.log_end_offset
                state["log_end_offsets"] = ends
            partitions.append(state)
        topics.append({"name": name, "topic_id": topic.topic_id, "internal": topic.is_internal,
                       "configs": dict(topic.configs), "partitions": partitions})
    return {"node_id": broker.node_id, "cluster_id": broker.controller.cluster_id, "pid": os.getpid(),
            "endpoints": [{"host": e.host, "port": e.port} for e in broker.endpoints],
            "log_dirs": [str(d) for d in broker.config.log_dirs], "faults": broker.faults.describe(),
            "disk_usage_bytes": broker.disk_quota.used_bytes(),
            "delayed_operations": broker.purgatory.delayed_operations, "topics": topics}


async def _fault_add(broker: BrokerServer, request: dict[str, Any], _conn: ConnectionInfo) -> dict[str, Any]:
    faults = broker.faults
    kind = request.get("kind")
    if kind == "error":
        count = request.get("count", 1)
        rule = faults.add_error(request["api"], request["error"], None if count is None else int(count),
                                request.get("topic"), _optional_int(request, "partition"), request.get("source"))
        return {"fault": rule.describe()}
    if kind == "latency":
        count = request.get("count")
        latency = faults.add_latency(int(request["delay_ms"]), request.get("api"),
                                     None if count is None else int(count), request.get("source"))
        return {"fault": latency.describe()}
    if kind == "disk":
        return {"fault": broker.disk_quota.set(_optional_int(request, "quota_bytes"))}
    raise FaultError(f"unknown fault kind {kind!r}: expected error, latency or disk")


async def _fault_clear(broker: BrokerServer, request: dict[str, Any], _conn: ConnectionInfo) -> dict[str, Any]:
    return {"cleared": broker.faults.clear(request.get("kind"), _optional_int(request, "id"))}


async def _fault_list(broker: BrokerServer, _request: dict[str, Any], _conn: ConnectionInfo) -> dict[str, Any]:
    return {"faults": broker.faults.describe()}


async def _connections_close(broker: BrokerServer, _request: dict[str, Any], conn: ConnectionInfo) -> dict[str, Any]:
    others = [(cid, s) for cid, s in list(broker.socket_server.connections.items()) if cid != conn.connection_id]
    for _cid, stream in others:
        await stream.aclose()
    log.warning("fault: closed %d client connection(s)", len(others))
    return {"closed": len(others)}


async def _shutdown(broker: BrokerServer, _request: dict[str, Any], conn: ConnectionInfo) -> dict[str, Any]:
    log.info("shutdown requested through the control API by %s", conn.peer)
    broker.stop()  # a clean stop as on SIGTERM; the answer still goes out, since shutdown drains requests
    return {}


OPERATIONS = {
    "describe": _describe,
    "fault.add": _fault_add,
    "fault.clear": _fault_clear,
    "fault.list": _fault_list,
    "connections.close": _connections_close,
    "shutdown": _shutdown,
}

# Served by KafkaApis.process outside the Kafka API table: never advertised, raw frames in and out.
HANDLERS: dict = {}
PRIVATE_HANDLERS = {CONTROL_API_KEY: process_control}
