"""ApiVersions: the truth about which API versions this broker serves."""
from __future__ import annotations

from minikafka.protocol.errors import ErrorCode

from ..kafka_apis import RequestContext


async def handle_api_versions(ctx: RequestContext, request) -> object:
    return ctx.response(error_code=ErrorCode.NONE, api_keys=ctx.broker.apis.api_version_list(ctx.version),
                        throttle_time_ms=0)


HANDLERS = {18: handle_api_versions}
