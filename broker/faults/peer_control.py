"""One control-API call from this node to another: how a link cut both ways reaches, and heals, its other end.

A short connection per call, as the control client of tests and the CLI uses. Control connections are client
connections, so a cut link never stops them: the far end can always be told to heal.
"""
from __future__ import annotations

import itertools
from typing import Any

import trio

from minikafka.broker.faults.rules import FaultError
from minikafka.protocol.control import ControlFramingError, decode_response, encode_request
from minikafka.protocol.framing import FrameDecoder, FrameError

CALL_TIMEOUT_S = 10.0
RECEIVE_BYTES = 1 << 16
MAX_RESPONSE_BYTES = 1 << 24  # fault answers are small

_correlation = itertools.count(1)


async def call_control(node_id: int, address: tuple[str, int], op: str, **fields: Any) -> dict[str, Any]:
    """Node `node_id`'s answer to `op`; FaultError when it cannot be reached in time or refuses."""
    correlation_id = next(_correlation) & 0x7FFFFFFF
    where = f"node {node_id} at {address[0]}:{address[1]}"
    frame = None
    try:
        with trio.move_on_after(CALL_TIMEOUT_S):
            stream = await trio.open_tcp_stream(*address)
            async with stream:
                await stream.send_all(encode_request(correlation_id, "minikafka-peer-control", {"op": op, **fields}))
                decoder = FrameDecoder(MAX_RESPONSE_BYTES)
                while frame is None:
                    data = await stream.receive_some(RECEIVE_BYTES)
                    if not data:
                        raise FaultError(f"{where} closed the control connection")
                    frame = next(iter(decoder.feed(data)), None)
        if frame is None:
            raise FaultError(f"{where} did not answer {op} within {CALL_TIMEOUT_S:g} s")
        got_id, answer = decode_response(frame)
    except (OSError, trio.BrokenResourceError, FrameError, ControlFramingError) as exc:
        raise FaultError(f"cannot reach the control API of {where}: {exc}") from None
    if got_id != correlation_id:
        raise FaultError(f"{where} answered control request {got_id}, not {correlation_id}")
    if not answer.get("ok"):
        raise FaultError(f"{where} refused {op}: {answer.get('error', 'no reason given')}")
    return answer
