"""One control-API call from this node to another: how a link cut both ways reaches, and heals, its other end.

A short connection per call, as the control client of tests and the CLI uses, secured as the listener it reaches
asks (TLS, then SASL before the call: a SASL listener takes nothing else from a connection that has not
authenticated). Control connections are client connections, so a cut link never stops them: the far end can always
be told to heal.
"""
from __future__ import annotations

import itertools
from typing import Any

import trio

from minikafka.broker.faults.rules import FaultError
from minikafka.broker.network.network_client import connect
from minikafka.broker.security.client_security import ClientChannelSecurity
from minikafka.broker.security.sasl_client_authenticator import AuthenticationError, SaslClientAuthenticator
from minikafka.protocol import codec
from minikafka.protocol.control import ControlFramingError, decode_response, encode_request
from minikafka.protocol.framing import FrameDecoder, FrameError

CALL_TIMEOUT_S = 10.0
RECEIVE_BYTES = 1 << 16
MAX_RESPONSE_BYTES = 1 << 24  # fault answers are small
CLIENT_ID = "minikafka-peer-control"

_correlation = itertools.count(1)


async def call_control(node_id: int, address: tuple[str, int], op: str,
                       security: ClientChannelSecurity | None = None, **fields: Any) -> dict[str, Any]:
    """Node `node_id`'s answer to `op`; FaultError when it cannot be reached in time or refuses."""
    correlation_id = next(_correlation) & 0x7FFFFFFF
    where = f"node {node_id} at {address[0]}:{address[1]}"
    frame = None
    try:
        with trio.move_on_after(CALL_TIMEOUT_S):
            stream, _ = await connect(*address, security.ssl_context if security else None)
            async with stream:
                decoder = FrameDecoder(MAX_RESPONSE_BYTES)
                authenticator = security.sasl_authenticator() if security else None
                if authenticator is not None:
                    await _authenticate(stream, decoder, authenticator, where)
                await stream.send_all(encode_request(correlation_id, CLIENT_ID, {"op": op, **fields}))
                frame = await _receive_frame(stream, decoder, where)
        if frame is None:
            raise FaultError(f"{where} did not answer {op} within {CALL_TIMEOUT_S:g} s")
        got_id, answer = decode_response(frame)
    except (OSError, trio.BrokenResourceError, FrameError, ControlFramingError) as exc:
        raise FaultError(f"cannot reach the control API of {where}: {exc.__cause__ or exc}") from None
    except AuthenticationError as exc:
        raise FaultError(f"cannot reach the control API of {where}: SASL authentication failed: {exc}") from None
    if got_id != correlation_id:
        raise FaultError(f"{where} answered control request {got_id}, not {correlation_id}")
    if not answer.get("ok"):
        raise FaultError(f"{where} refused {op}: {answer.get('error', 'no reason given')}")
    return answer


async def _authenticate(stream: trio.abc.Stream, decoder: FrameDecoder, authenticator: SaslClientAuthenticator,
                        where: str) -> None:
    """The SASL exchange, one request at a time, before the call."""
    request: Any = authenticator.handshake_request()
    while request is not None:
        schema, version = codec.SCHEMAS[request.API_KEY], request.API_VERSION
        correlation_id = next(_correlation) & 0x7FFFFFFF
        await stream.send_all(codec.encode_request(schema, version, correlation_id, CLIENT_ID, request))
        response = await _receive_frame(stream, decoder, where)
        if int.from_bytes(response[:4], "big", signed=True) != correlation_id:
            raise FaultError(f"{where} answered SASL request {correlation_id} with another response")
        request = authenticator.receive(codec.decode_response(schema, version, response))


async def _receive_frame(stream: trio.abc.Stream, decoder: FrameDecoder, where: str) -> bytes:
    while (frame := decoder.next_frame()) is None:
        data = await stream.receive_some(RECEIVE_BYTES)
        if not data:
            raise FaultError(f"{where} closed the control connection")
        decoder.append(data)
    return frame
