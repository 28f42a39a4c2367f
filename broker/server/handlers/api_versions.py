"""ApiVersions (v0-4): the truth about which API versions this broker serves.

Each API is advertised with the range its handler accepts (its schema's versions), or a module's wider VERSIONS
range where Kafka advertises more than it serves (Produce). A request newer than v4 is answered in v0 with
UNSUPPORTED_VERSION and the list, so the client can retry with a version both sides know (KIP-511); that answer
is made by kafka_apis, without a handler. v1+ carries the throttle time; v3+ is flexible and brings the
client's software name and version, which are read past; no features (KIP-584) are advertised.
"""
from __future__ import annotations

from kafka.protocol.api_message import ApiMessage
from kafka.protocol.metadata.api_versions import ApiVersionsRequest

from minikafka.broker.server.broker_services import RequestContext
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.errors import ErrorCode


async def handle_api_versions(ctx: RequestContext, request: ApiVersionsRequest) -> ApiMessage:
    return ctx.response(error_code=ErrorCode.NONE, api_keys=ctx.services.api_versions.api_version_list(ctx.version),
                        throttle_time_ms=0)


HANDLERS = {ApiKey.API_VERSIONS: handle_api_versions}
