"""The private control API's request cycle (key 10000), shared by a broker's listener and a controller's.

Both answer the same way: a JSON request naming an "op", the operation run against the node, and {"ok": true, ...}
or {"ok": false, "error": message} back; a frame that is not a control request closes the connection. Only the
operations differ (see server/handlers/control.py and controller/controller_control.py). An operation refuses
with ControlRefused (whose message is the whole answer), a KafkaError (answered as its code and message), or a
TypeError or ValueError from a malformed field.
"""
from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from minikafka.broker.network.socket_server import CloseConnection, ConnectionInfo
from minikafka.protocol.control import CONTROL_API_VERSION, ControlFramingError, decode_request_body, encode_response
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.protocol.request_header import RequestHeader

log = logging.getLogger("minikafka.control")

Node = TypeVar("Node")
Operation = Callable[[Node, dict[str, Any], ConnectionInfo], Awaitable[dict[str, Any]]]


class ControlRefused(KafkaError):
    """A control operation that cannot be done as asked; the message says why, and is the answer's error."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.INVALID_REQUEST, message)


async def answer_control(operations: Mapping[str, Operation[Node]], node: Node, header: RequestHeader,
                         frame: bytes, body_pos: int, conn: ConnectionInfo, *,
                         super_users: frozenset[str] | None = None) -> bytes:
    """Run the operation a control frame asks for and frame its answer; a refusal is an answer, not an error.
    With an authorizer (`super_users` given) the control API, which can do anything to the node, is the super
    users' alone: any other principal's request, whatever its operation, is CLUSTER_AUTHORIZATION_FAILED."""
    if header.api_version != CONTROL_API_VERSION:
        raise CloseConnection(f"unsupported version {header.api_version} of the control API")
    try:
        request = decode_request_body(frame, body_pos)
    except ControlFramingError as exc:
        raise CloseConnection(str(exc)) from None
    op = request.get("op")
    try:
        if super_users is not None and conn.principal not in super_users:
            raise KafkaError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                             f"the control API is for super users (super.users) only, and {conn.principal} is not one")
        operation = operations.get(op) if isinstance(op, str) else None
        if operation is None:
            raise ControlRefused(f"unknown control operation {op!r}; known: {', '.join(sorted(operations))}")
        answer = {"ok": True, **await operation(node, request, conn)}
    except KeyError as exc:
        answer = {"ok": False, "error": f"control operation {op!r} needs field {exc}"}
    except ControlRefused as exc:
        log.info("control %s from %s refused: %s", op, conn.peer, exc)
        answer = {"ok": False, "error": str(exc)}
    except KafkaError as exc:
        log.info("control %s from %s refused: %s %s", op, conn.peer, exc.code.name, exc.message or "")
        answer = {"ok": False, "error": f"{exc.code.name}: {exc.message}" if exc.message else exc.code.name}
    except (TypeError, ValueError) as exc:
        log.info("control %s from %s refused: %s", op, conn.peer, exc)
        answer = {"ok": False, "error": str(exc)}
    return encode_response(header.correlation_id, answer)
