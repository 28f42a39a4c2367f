"""SaslHandshake (v0-1) and SaslAuthenticate (v0-2) as the broker's APIs answer them: ILLEGAL_SASL_STATE.

On a SASL listener the connection's authenticator (broker/security) takes both while the client authenticates
and re-authenticates; what reaches the APIs is a SaslHandshake on a listener without SASL, or a SaslAuthenticate
after the authentication is over, which Kafka refuses this way. Both are advertised on every listener, as Kafka
does.
"""
from __future__ import annotations

from kafka.protocol.api_message import ApiMessage

from minikafka.broker.server.broker_services import RequestContext
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.errors import ErrorCode


async def handle_sasl_handshake(ctx: RequestContext, request: ApiMessage) -> ApiMessage:
    return ctx.response(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])


async def handle_sasl_authenticate(ctx: RequestContext, request: ApiMessage) -> ApiMessage:
    return ctx.response(error_code=ErrorCode.ILLEGAL_SASL_STATE,
                        error_message="SaslAuthenticate request received after successful authentication",
                        auth_bytes=b"", session_lifetime_ms=0)


HANDLERS = {ApiKey.SASL_HANDSHAKE: handle_sasl_handshake, ApiKey.SASL_AUTHENTICATE: handle_sasl_authenticate}
