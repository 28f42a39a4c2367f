"""Request dispatch: one handler per API key, faults applied around it, client quotas, response encoding.

Requests come parsed from the network layer (request_channel), which closes the connection for an API key the
broker does not serve or a version outside its range (clients learn the ranges from ApiVersions first), and hands
over an ApiVersions request of a newer version undecoded: it is answered here in v0 with UNSUPPORTED_VERSION so the
client can retry. The request schemas the network layer decodes with are the ones this module's tables name.

Client quotas are applied here once a handler has answered (client_quota_manager): the request's handling time
against request_percentage, with what a handler found of the byte rates (Produce, Fetch); the larger throttle goes
into the response's throttle_time_ms and tells the connection how long to stay muted.

A ZooKeeper-mode broker also serves the control-plane APIs a controller and other brokers send it (its module's
CONTROL_PLANE_HANDLERS, decoded with the control-plane schemas): only on the inter-broker listener, and never
advertised in ApiVersions. Private APIs (minikafka's control API) get their raw frames.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from types import ModuleType

from kafka.protocol.api_message import ApiMessage

from minikafka.broker.network.request_channel import Request, RequestKind, RequestSchemas
from minikafka.broker.network.request_metrics import RequestMetrics, fetch_request_name
from minikafka.broker.server.api_version_manager import ApiVersionManager
from minikafka.broker.server.broker_services import BrokerServices, RequestContext
from minikafka.broker.server.client_quota_manager import client_throttles
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.codec import SCHEMAS, RequestHeader, Response, encode_response, encode_response_send
from minikafka.protocol.control_plane import CONTROL_PLANE_SCHEMAS
from minikafka.protocol.errors import ErrorCode

log = logging.getLogger("minikafka.apis")

Handler = Callable[[RequestContext, ApiMessage], Awaitable[ApiMessage | None]]
# A private API's handler: the raw request in, the framed response out.
PrivateHandler = Callable[[BrokerServices, Request], Awaitable[bytes]]


class KafkaApis:
    def __init__(self, services: BrokerServices, api_versions: ApiVersionManager, handler_modules: list[ModuleType],
                 control_plane_module: ModuleType | None = None, metrics: RequestMetrics | None = None) -> None:
        self._services = services
        self._api_versions = api_versions
        self.metrics = metrics or RequestMetrics()
        self._handlers: dict[int, Handler] = {k: h for m in handler_modules for k, h in m.HANDLERS.items()}
        self._control_plane: dict[int, Handler] = dict(getattr(control_plane_module, "CONTROL_PLANE_HANDLERS", {}))
        # Private APIs (minikafka's control API): raw frames, never advertised in ApiVersions.
        self._private: dict[int, PrivateHandler] = {
            k: h for m in handler_modules for k, h in getattr(m, "PRIVATE_HANDLERS", {}).items()}
        # Kafka's names of the APIs (ProduceRequest is "Produce"), as RequestMetrics labels them.
        self.request_names = {key: SCHEMAS[key].request.__name__.removesuffix("Request") for key in self._handlers}

    def request_schemas(self, inter_broker_listener: str) -> RequestSchemas:
        """What the network layer decodes requests with: the Kafka APIs served here, the control plane's on the
        inter-broker listener, the private APIs' frames as they come."""
        return RequestSchemas({key: SCHEMAS[key] for key in self._handlers},
                              {key: CONTROL_PLANE_SCHEMAS[key] for key in self._control_plane},
                              inter_broker_listener, frozenset(self._private))

    async def handle(self, request: Request) -> Response | None:
        """Answer one request the network layer took in."""
        header = request.header
        if request.kind is RequestKind.RAW:
            return await self._private[header.api_key](self._services, request)
        if request.kind is RequestKind.UNSUPPORTED_API_VERSIONS:
            return self._unsupported_api_versions(header)
        if request.kind is RequestKind.CONTROL_PLANE:
            return await self._process_control_plane(request)
        handler = self._handlers[header.api_key]
        ctx = RequestContext(self._services, request)
        ctx.start_handling()
        started = time.monotonic()
        metrics = self.metrics
        metrics.requests_in_flight += 1

        async def dispatch(taken: Request) -> ApiMessage | None:
            assert taken.body is not None  # a Kafka API's request is decoded
            return await handler(ctx, taken.body)

        recorder = self._services.recorder
        recorded = recorder.begin(request, self._services.metadata_cache, ctx.conn.connection_id, ctx.conn.peer) \
            if recorder.active else None
        try:
            response = await self._services.faults.handle(request, dispatch)
        finally:
            metrics.requests_in_flight -= 1
        took_ms = 1000 * (time.monotonic() - started)
        if recorded is not None:
            recorder.finish(recorded, response, took_ms)
        metrics.request_answered(self.request_names[header.api_key], header.api_version, took_ms)
        if header.api_key == ApiKey.FETCH:
            metrics.request_answered(fetch_request_name(request.body, header.api_version), header.api_version,
                                     took_ms)
        if log.isEnabledFor(logging.DEBUG):
            log.debug("%s v%d from %s (%s) took %.1f ms", ctx.schema.request.__name__, header.api_version,
                      ctx.conn.peer, header.client_id, took_ms)
        throttle_time_ms = max(ctx.throttle_time_ms, ctx.request_throttle_time_ms())
        if throttle_time_ms > 0:
            ctx.conn.throttle(throttle_time_ms,
                              delay_response=not client_throttles(header.api_key, header.api_version))
            if response is not None and hasattr(response, "throttle_time_ms"):
                response.throttle_time_ms = throttle_time_ms
        if response is None:
            return None
        return encode_response_send(ctx.schema, header.api_version, header.correlation_id, response, ctx.splicer)

    async def _process_control_plane(self, request: Request) -> bytes:
        ctx = RequestContext(self._services, request)
        assert request.body is not None  # a control-plane request is decoded
        response = await self._control_plane[request.header.api_key](ctx, request.body)
        assert response is not None  # every control-plane request is answered
        return encode_response(ctx.schema, ctx.version, ctx.header.correlation_id, response)

    def _unsupported_api_versions(self, header: RequestHeader) -> bytes:
        schema = SCHEMAS[ApiKey.API_VERSIONS]
        response = schema.response[0](error_code=ErrorCode.UNSUPPORTED_VERSION,
                                      api_keys=self._api_versions.api_version_list(0))
        return encode_response(schema, 0, header.correlation_id, response)
