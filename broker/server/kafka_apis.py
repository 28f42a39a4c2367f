"""Request dispatch: header parsing, version checks, one handler per API key, response encoding.

As in Kafka's KafkaApis and SocketServer: an API key the broker does not serve, or a version outside its
advertised range, closes the connection (clients learn the ranges from ApiVersions first), except that an
ApiVersions request of a newer version is answered in v0 with UNSUPPORTED_VERSION so the client can retry.

Client quotas are applied here once a handler has answered (client_quota_manager): the request's handling time
against request_percentage, with what a handler found of the byte rates (Produce, Fetch); the larger throttle goes
into the response's throttle_time_ms and tells the connection how long to stay muted.

A ZooKeeper-mode broker also serves the control-plane APIs a controller and other brokers send it (its module's
CONTROL_PLANE_HANDLERS, decoded with the control-plane schemas): only on the inter-broker listener, and never
advertised in ApiVersions.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from types import ModuleType
from typing import TYPE_CHECKING

from kafka.protocol.api_message import ApiMessage

from minikafka.broker.network.socket_server import (
    CloseConnection,
    ConnectionInfo,
    decode_or_close,
    parse_header_or_close,
)
from minikafka.broker.server.client_quota_manager import ANONYMOUS, client_throttles, handling_time_percent
from minikafka.broker.server.metrics import BrokerMetrics, fetch_request_name
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.codec import (
    SCHEMAS,
    ApiSchema,
    Records,
    RecordsSplicer,
    RequestHeader,
    Response,
    encode_response,
    encode_response_send,
)
from minikafka.protocol.control_plane import CONTROL_PLANE_SCHEMAS
from minikafka.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from minikafka.broker.server.broker_server import BrokerServer

log = logging.getLogger("minikafka.apis")

Handler = Callable[["RequestContext", ApiMessage], Awaitable[ApiMessage | None]]


class RequestContext:
    """One request in flight: who sent it, which version, and how to build its response."""

    def __init__(self, broker: BrokerServer, header: RequestHeader, schema: ApiSchema, conn: ConnectionInfo) -> None:
        self.broker = broker
        self.header = header
        self.version = header.api_version
        self.schema = schema
        self.conn = conn
        self.response_class = schema.response[header.api_version]
        self.splicer: RecordsSplicer | None = None
        self.request_size = 0  # the request frame's bytes (what producer_byte_rate counts)
        self.throttle_time_ms = 0  # a byte-rate quota's throttle, as the handler found it (Produce, Fetch)
        self._request_time_recorded = False
        self._request_quota = False  # whether a request_percentage applies: then the handler time is counted

    @property
    def user(self) -> str:
        """The client's user principal: every listener is PLAINTEXT."""
        return ANONYMOUS

    @property
    def client_id(self) -> str:
        return self.header.client_id or ""

    def start_handling(self) -> None:
        """Count the handler's time, when a request_percentage quota applies to the client."""
        quotas = self.broker.client_quotas
        if quotas.request.quota(self.user, self.client_id) is not None:
            self._request_quota = True
            quotas.handler_time.start()

    def request_throttle_time_ms(self, *, exempt: bool = False) -> int:
        """request_percentage: this request's handling time so far (CPU time of its own task's steps), recorded
        once; the throttle that calls for. Exempt requests (a follower's fetch, acks=0 produce) record nothing."""
        if self._request_time_recorded or not self._request_quota:
            return 0
        self._request_time_recorded = True
        quotas = self.broker.client_quotas
        seconds = quotas.handler_time.stop()
        if exempt:
            return 0
        return quotas.request.record_and_get_throttle_time_ms(self.user, self.client_id,
                                                              handling_time_percent(seconds))

    def response(self, **fields: object) -> ApiMessage:
        return self.response_class(**fields)

    def records(self, data: Records) -> bytes:
        """Record bytes for a response field, spliced in at encoding time rather than copied through it."""
        if self.splicer is None:
            self.splicer = RecordsSplicer()
        return self.splicer.stand_in(data)


class KafkaApis:
    def __init__(self, broker: BrokerServer, handler_modules: list[ModuleType],
                 control_plane_module: ModuleType | None = None, metrics: BrokerMetrics | None = None) -> None:
        self._broker = broker
        self.metrics = metrics or BrokerMetrics()
        self._handlers: dict[int, Handler] = {}
        self._control_plane: dict[int, Handler] = dict(getattr(control_plane_module, "CONTROL_PLANE_HANDLERS", {}))
        # Private APIs (minikafka's control API): raw frames, never advertised in ApiVersions.
        self._private = {k: h for m in handler_modules for k, h in getattr(m, "PRIVATE_HANDLERS", {}).items()}
        # The versions requests are decoded in (the schema's), whatever ApiVersions advertises.
        self.accepted_versions: dict[int, tuple[int, int]] = {}
        # What ApiVersions advertises; a module's VERSIONS may widen it where Kafka advertises more than it serves.
        self.versions: dict[int, tuple[int, int]] = {}
        for module in handler_modules:
            for api_key, handler in module.HANDLERS.items():
                schema = SCHEMAS[api_key]
                self._handlers[api_key] = handler
                self.accepted_versions[api_key] = (schema.min_version, schema.max_version)
                self.versions[api_key] = getattr(module, "VERSIONS", {}).get(api_key, self.accepted_versions[api_key])
        # Kafka's names of the APIs (ProduceRequest is "Produce"), as RequestMetrics labels them.
        self.request_names = {key: SCHEMAS[key].request.__name__.removesuffix("Request") for key in self._handlers}

    async def process(self, frame: bytes, conn: ConnectionInfo) -> Response | None:
        header, body_pos = parse_header_or_close(frame)
        handler = self._handlers.get(header.api_key)
        if handler is None and header.api_key in self._control_plane:
            return await self._process_control_plane(header, frame, body_pos, conn)
        if handler is None and header.api_key in self._private:
            return await self._private[header.api_key](self._broker, header, frame, body_pos, conn)
        if handler is None:
            raise CloseConnection(f"unsupported API key {header.api_key} (version {header.api_version})")
        schema = SCHEMAS[header.api_key]
        lo, hi = self.accepted_versions[header.api_key]
        if not lo <= header.api_version <= hi:
            if header.api_key == ApiKey.API_VERSIONS:
                return self._unsupported_api_versions(header)
            raise CloseConnection(
                f"unsupported version {header.api_version} of API key {header.api_key} (supported {lo}-{hi})")
        request = decode_or_close(schema, header, frame, body_pos)
        ctx = RequestContext(self._broker, header, schema, conn)
        ctx.request_size = len(frame)
        ctx.start_handling()
        started = time.monotonic()
        metrics = self.metrics
        metrics.requests_in_flight += 1
        try:
            response = await self._broker.faults.handle(ctx, request, handler)
        finally:
            metrics.requests_in_flight -= 1
        took_ms = 1000 * (time.monotonic() - started)
        metrics.request_answered(self.request_names[header.api_key], header.api_version, took_ms)
        if header.api_key == ApiKey.FETCH:
            metrics.request_answered(fetch_request_name(request, header.api_version), header.api_version, took_ms)
        if log.isEnabledFor(logging.DEBUG):
            log.debug("%s v%d from %s (%s) took %.1f ms", schema.request.__name__, header.api_version,
                      conn.peer, header.client_id, took_ms)
        throttle_time_ms = max(ctx.throttle_time_ms, ctx.request_throttle_time_ms())
        if throttle_time_ms > 0:
            conn.throttle(throttle_time_ms, delay_response=not client_throttles(header.api_key, header.api_version))
            if response is not None and hasattr(response, "throttle_time_ms"):
                response.throttle_time_ms = throttle_time_ms
        if response is None:
            return None
        return encode_response_send(schema, header.api_version, header.correlation_id, response, ctx.splicer)

    async def _process_control_plane(self, header: RequestHeader, frame: bytes, body_pos: int,
                                     conn: ConnectionInfo) -> bytes:
        if conn.listener != self._broker.config.inter_broker_listener_name:
            raise CloseConnection(f"API key {header.api_key} is served only on the inter-broker listener")
        schema = CONTROL_PLANE_SCHEMAS[header.api_key]
        if not schema.min_version <= header.api_version <= schema.max_version:
            raise CloseConnection(f"unsupported version {header.api_version} of API key {header.api_key} "
                                  f"(supported {schema.min_version}-{schema.max_version})")
        request = decode_or_close(schema, header, frame, body_pos)
        ctx = RequestContext(self._broker, header, schema, conn)
        response = await self._control_plane[header.api_key](ctx, request)
        assert response is not None  # every control-plane request is answered
        return encode_response(schema, header.api_version, header.correlation_id, response)

    def _unsupported_api_versions(self, header: RequestHeader) -> bytes:
        schema = SCHEMAS[ApiKey.API_VERSIONS]
        response = schema.response[0](error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=self.api_version_list(0))
        return encode_response(schema, 0, header.correlation_id, response)

    def api_version_list(self, version: int) -> list:
        cls = SCHEMAS[ApiKey.API_VERSIONS].response[version]
        return [cls.ApiVersion(api_key=k, min_version=lo, max_version=hi)
                for k, (lo, hi) in sorted(self.versions.items())]
