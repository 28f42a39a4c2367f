"""A request as the network layer hands it to the broker's APIs (Kafka's RequestChannel.Request): its frame parsed
once, here, into the header and the body decoded with the schema the server serves that API key with.

Which schema that is, and on which listeners, the server says (RequestSchemas, given by its wiring): its Kafka APIs
on every listener, in the versions of their schemas; a ZooKeeper-mode broker's control-plane APIs only on the
inter-broker listener; private APIs (the control API) handed over as raw frames. As in Kafka, a header or body that
does not parse, an API key not served, or a version outside the served range closes the connection, except that an
ApiVersions request of a newer version is handed over undecoded, to be answered in v0 with UNSUPPORTED_VERSION.
"""
from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

import trio
from kafka.protocol.api_message import ApiMessage

from minikafka.broker.network.socket_server import CloseConnection, ConnectionInfo
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.codec import ApiSchema, Response, decode_request
from minikafka.protocol.request_header import InvalidRequestError, RequestHeader


def parse_header_or_close(frame: bytes) -> tuple[RequestHeader, int]:
    """The request header and where the body starts; a header that does not parse closes the connection."""
    try:
        return RequestHeader.parse(frame)
    except InvalidRequestError as exc:
        raise CloseConnection(str(exc)) from None


def decode_or_close(schema: ApiSchema, header: RequestHeader, frame: bytes, body_pos: int) -> ApiMessage:
    """The request; one that does not parse closes the connection, as Kafka's parser does."""
    try:
        return decode_request(schema, header, frame, body_pos)
    except InvalidRequestError as exc:
        raise CloseConnection(str(exc)) from None


class RequestKind(enum.Enum):
    """How a request was taken in, which says how it is answered."""

    KAFKA = "kafka"  # a Kafka API, decoded
    CONTROL_PLANE = "control-plane"  # a ZooKeeper-mode control-plane API, decoded
    RAW = "raw"  # a private API: the frame as it came
    UNSUPPORTED_API_VERSIONS = "unsupported-api-versions"  # ApiVersions newer than served: answered in v0


@dataclass(frozen=True)
class RequestSchemas:
    """The schemas a server decodes requests with: per API key, and for the control plane, on which listener."""

    apis: Mapping[int, ApiSchema]
    control_plane: Mapping[int, ApiSchema] = field(default_factory=dict)
    control_plane_listener: str | None = None
    raw: frozenset[int] = frozenset()


@dataclass
class Request:
    """One request taken from a connection, parsed once (Kafka's RequestChannel.Request)."""

    kind: RequestKind
    header: RequestHeader
    schema: ApiSchema | None  # None for a raw request
    body: ApiMessage | None  # the decoded request; None for a raw or unsupported ApiVersions request
    context: ConnectionInfo
    frame: bytes
    body_pos: int
    # Whether the server has begun to drain for shutdown: a request waiting in a purgatory answers early.
    draining: Callable[[], bool]

    @property
    def size(self) -> int:
        """The request frame's bytes (what producer_byte_rate counts)."""
        return len(self.frame)

    @property
    def client(self) -> trio.SocketStream | None:
        """The connection's socket, which a waiting request watches for the client going."""
        return self.context.stream


# Answers a request: the framed response, or None (acks=0 produce); raises CloseConnection to close.
RequestHandler = Callable[[Request], Awaitable[Response | None]]


class RequestChannel:
    """Takes a connection's request frames to the broker's APIs as Requests."""

    def __init__(self, schemas: RequestSchemas, handle: RequestHandler, draining: Callable[[], bool]) -> None:
        self._schemas = schemas
        self._handle = handle
        self._draining = draining

    async def process(self, frame: bytes, conn: ConnectionInfo) -> Response | None:
        """The socket server's request processor: parse the frame, answer the request."""
        return await self._handle(self.parse(frame, conn))

    def parse(self, frame: bytes, conn: ConnectionInfo) -> Request:
        """The request in `frame`; CloseConnection where Kafka closes the connection instead of answering."""
        header, body_pos = parse_header_or_close(frame)
        schemas = self._schemas
        key, version = header.api_key, header.api_version
        schema = schemas.apis.get(key)
        if schema is not None:
            if not schema.min_version <= version <= schema.max_version:
                if key == ApiKey.API_VERSIONS:
                    return self._request(RequestKind.UNSUPPORTED_API_VERSIONS, header, schema, None, conn, frame,
                                         body_pos)
                raise CloseConnection(f"unsupported version {version} of API key {key} "
                                      f"(supported {schema.min_version}-{schema.max_version})")
            body = decode_or_close(schema, header, frame, body_pos)
            return self._request(RequestKind.KAFKA, header, schema, body, conn, frame, body_pos)
        schema = schemas.control_plane.get(key)
        if schema is not None:
            if conn.listener != schemas.control_plane_listener:
                raise CloseConnection(f"API key {key} is served only on the inter-broker listener")
            if not schema.min_version <= version <= schema.max_version:
                raise CloseConnection(f"unsupported version {version} of API key {key} "
                                      f"(supported {schema.min_version}-{schema.max_version})")
            body = decode_or_close(schema, header, frame, body_pos)
            return self._request(RequestKind.CONTROL_PLANE, header, schema, body, conn, frame, body_pos)
        if key in schemas.raw:
            return self._request(RequestKind.RAW, header, None, None, conn, frame, body_pos)
        raise CloseConnection(f"unsupported API key {key} (version {version})")

    def _request(self, kind: RequestKind, header: RequestHeader, schema: ApiSchema | None, body: ApiMessage | None,
                 conn: ConnectionInfo, frame: bytes, body_pos: int) -> Request:
        return Request(kind, header, schema, body, conn, frame, body_pos, self._draining)
