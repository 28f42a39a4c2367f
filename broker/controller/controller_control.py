"""The control API (private key 10000) on a controller's listener: cut links to brokers and move leaderships.

A test reaches the controller the way it reaches a broker, with the same framing and answers. Operations:
- describe: node id, active faults, and the registered brokers (broker epoch, fenced, in controlled shutdown);
- fault.add (kind link: to node "to", both ways unless "both_ways" is false), fault.clear (kind, id), fault.list;
- leader.move: make replica "to" of "topic"-"partition" its leader (see leader_move);
- metrics: the controller's metrics, by their Prometheus names (see metrics);
- clock.now, clock.advance: the node's clock, a manual one moved forwards (see network/clock_control.py).

A broker cut off from the controller has its control-plane requests refused here unanswered (`admit`), its
connection closed. Closing a broker's controller connection normally fences it at once, as when the broker was
killed; a cut link is silence instead, so the broker keeps its session until the session times out, exactly as a
partitioned Kafka broker does.
"""
from __future__ import annotations

import itertools
import logging
from collections.abc import Callable
from typing import Any

from minikafka.broker.controller.quorum_controller import QuorumController
from minikafka.broker.faults.link_faults import LinkFaults
from minikafka.broker.faults.rules import FaultError
from minikafka.broker.network.clock_control import CLOCK_OPERATIONS
from minikafka.broker.network.control_api import Operation, answer_control
from minikafka.broker.network.socket_server import CloseConnection, ConnectionInfo
from minikafka.protocol.request_header import RequestHeader

log = logging.getLogger("minikafka.controller")

LINK = "link"


class ControllerControl:
    """Holds the controller server's links, its quorum controller (opened when the server runs) and its metrics,
    not the server itself, which builds this."""

    def __init__(self, links: LinkFaults, controller: Callable[[], QuorumController],
                 metrics: Callable[[], dict[str, Any]]) -> None:
        self.links = links
        self._controller = controller
        self._metrics = metrics
        self._ids = itertools.count(1)
        self.super_users: frozenset[str] | None = None  # with an authorizer: the only principals served

    @property
    def controller(self) -> QuorumController:
        return self._controller()

    def metrics(self) -> dict[str, Any]:
        """The controller's metrics, by their Prometheus names."""
        return self._metrics()

    async def process(self, header: RequestHeader, frame: bytes, body_pos: int, conn: ConnectionInfo) -> bytes:
        return await answer_control(OPERATIONS, self, header, frame, body_pos, conn, super_users=self.super_users)

    def admit(self, api_key: int, request: Any, conn: ConnectionInfo) -> None:
        """Refuse (CloseConnection) a request from a broker whose link to this controller is cut."""
        refusal = self.links.refusal(api_key, request)
        if refusal is None:
            return
        for session in self.controller.heartbeats.sessions.values():
            if session.connection_id == conn.connection_id:
                session.connection_id = None  # its close is the cut's doing, not the broker's end
        log.debug("%s (connection from %s closed)", refusal, conn.peer)
        raise CloseConnection(refusal)

    def next_fault_id(self) -> int:
        return next(self._ids)


async def _describe(control: ControllerControl, _request: dict[str, Any], _conn: ConnectionInfo) -> dict[str, Any]:
    image = control.controller.image
    brokers = [{"broker_id": b.broker_id, "broker_epoch": b.broker_epoch, "fenced": b.fenced,
                "in_controlled_shutdown": b.in_controlled_shutdown} for _, b in sorted(image.brokers.items())]
    return {"node_id": control.controller.node_id, "role": "controller",
            "faults": control.links.describe(), "brokers": brokers}


async def _fault_add(control: ControllerControl, request: dict[str, Any], _conn: ConnectionInfo) -> dict[str, Any]:
    kind = request.get("kind")
    if kind != LINK:
        raise FaultError(f"a controller takes only link faults, not {kind!r}")
    to = int(request["to"])
    own_id = control.controller.node_id
    if to == own_id:
        raise FaultError(f"node {to} is this controller: a link joins two nodes")
    broker = control.controller.image.brokers.get(to)
    if broker is None or not broker.endpoints:
        raise FaultError(f"node {to} is not a registered broker")
    endpoint = broker.endpoints[0]
    link = await control.links.cut(control.next_fault_id(), own_id, to, (endpoint.host, endpoint.port),
                                          bool(request.get("both_ways", True)))
    return {"fault": link.describe()}


async def _fault_clear(control: ControllerControl, request: dict[str, Any], _conn: ConnectionInfo) -> dict[str, Any]:
    kind = request.get("kind")
    if kind not in (None, LINK):
        raise FaultError(f"a controller has only link faults, not {kind!r}")
    rule_id = request.get("id")
    return {"cleared": await control.links.heal(None if rule_id is None else int(rule_id))}


async def _fault_list(control: ControllerControl, _request: dict[str, Any], _conn: ConnectionInfo) -> dict[str, Any]:
    return {"faults": control.links.describe()}


async def _leader_move(control: ControllerControl, request: dict[str, Any], _conn: ConnectionInfo) -> dict[str, Any]:
    topic, index, to = str(request["topic"]), int(request["partition"]), int(request["to"])
    state = await control.controller.move_leader(topic, index, to)
    return {"topic": topic, "partition": index, "leader": state.leader, "leader_epoch": state.leader_epoch,
            "isr": list(state.isr)}


async def _metrics(control: ControllerControl, _request: dict[str, Any], _conn: ConnectionInfo) -> dict[str, Any]:
    return {"node_id": control.controller.node_id, "metrics": control.metrics()}


OPERATIONS: dict[str, Operation[ControllerControl]] = {
    "describe": _describe,
    "fault.add": _fault_add,
    "fault.clear": _fault_clear,
    "fault.list": _fault_list,
    "leader.move": _leader_move,
    "metrics": _metrics,
    **CLOCK_OPERATIONS,
}
