"""Request/response codec on kafka-python's schema-generated messages.

The request header is parsed here (not by kafka-python) because the API key and version must be known before
the body's class and flexibility are, and because an unsupported version must still yield the correlation id.
"""
import importlib
import os
import pkgutil
import struct
from collections.abc import Callable, Sequence
from typing import NamedTuple

from kafka.protocol.api_message import ApiMessage

from . import framing
from .api_keys import ApiKey
from .client_apis import CLIENT_API_MESSAGES
from .client_apis.share_fetch import SHARE_FETCH_MESSAGES
from .client_apis.share_state import SHARE_STATE_MESSAGES
from .file_records import FileRecords
from .request_header import InvalidRequestError, RequestHeader
from .schema_checks import Checker, build_checker
from .varint import VarintError, encode_uvarint, read_uvarint

_INT32 = struct.Struct(">i")


class ApiSchema(NamedTuple):
    request: type[ApiMessage]
    response: type[ApiMessage]
    min_version: int
    max_version: int

    def flexible(self, version: int) -> bool:
        return self.request.flexible_version_q(version)

    def response_header_version(self, version: int) -> int:
        """1 (with tagged fields) for flexible versions, except ApiVersions: its responses always use header v0,
        so clients can read them before knowing the broker's versions."""
        return 1 if self.flexible(version) and self.request.API_KEY != ApiKey.API_VERSIONS else 0


def _load_schemas() -> dict[int, ApiSchema]:
    import kafka.protocol as root
    for sub in ("admin", "consumer", "metadata", "producer"):
        pkg = importlib.import_module(f"{root.__name__}.{sub}")
        for mod in pkgutil.iter_modules(pkg.__path__):
            importlib.import_module(f"{pkg.__name__}.{mod.name}")
    found: dict[tuple[int, str], type[ApiMessage]] = {}
    stack = list(ApiMessage.__subclasses__())
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        # kafka-python's own client APIs only: the control plane's classes are never advertised to clients.
        from_client_schemas = cls.__module__.startswith("kafka.") and ".old" not in cls.__module__
        if getattr(cls, "_class_version", None) is None and from_client_schemas:
            found[(cls.API_KEY, cls.type)] = cls
    schemas = {}
    for (key, kind), req in found.items():
        if kind == "request" and (key, "response") in found:
            lo, hi = req.valid_versions
            schemas[key] = ApiSchema(req, found[(key, "response")], lo, hi)
    # Client, share-fetch and share-state APIs kafka-python lacks, from the project's own specs.
    for req, resp in CLIENT_API_MESSAGES + SHARE_FETCH_MESSAGES + SHARE_STATE_MESSAGES:
        lo, hi = req.valid_versions
        schemas[req.API_KEY] = ApiSchema(req, resp, lo, hi)
    return schemas


SCHEMAS: dict[int, ApiSchema] = _load_schemas()


def skip_tagged_fields(frame: bytes, pos: int) -> int:
    try:
        count, pos = read_uvarint(frame, pos)
        for _ in range(count):
            _tag, pos = read_uvarint(frame, pos)
            size, pos = read_uvarint(frame, pos)
            pos += size
            if pos > len(frame):
                raise InvalidRequestError("tagged field runs past the end of the request header")
    except VarintError as exc:
        raise InvalidRequestError(f"malformed request header: {exc}") from None
    return pos


Reader = Callable[[memoryview, int], tuple[ApiMessage, int]]

# Per request class and version: kafka-python's generated decoder, and what Kafka's reader refuses beyond it.
_READERS: dict[tuple[type[ApiMessage], int], tuple[Reader, Checker | None]] = {}


def _reader(request: type[ApiMessage], version: int, flexible: bool) -> tuple[Reader, Checker | None]:
    reader = _READERS.get((request, version))
    if reader is None:
        spec = request._struct
        decode = spec.compiled_decode_from(version, compact=flexible, tagged=flexible, data_class=request[None])
        reader = _READERS[(request, version)] = (decode, build_checker(spec, version, flexible, request.__name__))
    return reader


def decode_request(schema: ApiSchema, header: RequestHeader, frame: bytes, body_pos: int) -> ApiMessage:
    """Decode a request body of a version the caller has checked is supported, refusing what Kafka's parser
    refuses: a body that runs past the frame, a null where the field is not nullable, an overlong string."""
    version = header.api_version
    flexible = schema.flexible(version)
    if flexible:
        body_pos = skip_tagged_fields(frame, body_pos)
    decode, check = _reader(schema.request, version, flexible)
    try:
        request, end = decode(memoryview(frame), body_pos)
    except Exception as exc:  # the generated decoders raise assorted errors on garbage
        raise InvalidRequestError(f"cannot decode {schema.request.__name__} v{version}: {exc!r}") from exc
    if end > len(frame):
        raise InvalidRequestError(
            f"cannot decode {schema.request.__name__} v{version}: it runs {end - len(frame)} bytes past the frame")
    if check is not None:
        try:
            check(request)
        except InvalidRequestError as exc:
            raise InvalidRequestError(f"cannot decode {schema.request.__name__} v{version}: {exc}") from None
    return request


# What a `records` field holds: bytes, or a slice of a segment file to be sent as it is.
Records = bytes | FileRecords


class RecordsSplicer:
    """Keeps record bytes out of the schema encoder: the response is encoded with a small stand-in where each
    `records` field goes, and the records are put in their place once, when the frame is built.

    Fetch responses are mostly record bytes of segment files; the encoder would copy them into a growing buffer
    and out again. A stand-in is a random 12-byte token of this response plus a 4-byte index, so it cannot be
    confused with anything else in the encoded body.
    """

    SIZE = 16

    def __init__(self) -> None:
        self._token = os.urandom(12)
        self._records: list[Records] = []

    def stand_in(self, records: Records) -> bytes:
        """What to put in a `records` field instead of `records` (empty or tiny records need no stand-in)."""
        if isinstance(records, bytes) and len(records) <= self.SIZE:
            return records
        self._records.append(records)
        return self._token + (len(self._records) - 1).to_bytes(4, "big")

    def splice(self, body: bytes, flexible: bool) -> Sequence[Records]:
        """The body's pieces with every stand-in (and its length prefix) replaced by its records."""
        pieces: list[Records] = []
        start = 0
        prefix_size = 1 if flexible else 4  # compact: uvarint(16 + 1) is one byte; classic: int32
        while True:
            at = body.find(self._token, start)
            if at < 0:
                break
            index = int.from_bytes(body[at + 12:at + 16], "big")
            records = self._records[index]
            pieces.append(body[start:at - prefix_size])
            pieces.append(encode_uvarint(len(records) + 1) if flexible else _INT32.pack(len(records)))
            pieces.append(records)
            start = at + self.SIZE
        pieces.append(body[start:])
        return pieces


class RecordsSend:
    """A framed response whose records are partly file slices (Kafka's MultiRecordsSend): written piece by piece,
    bytes as they are and slices from their files. Its size, prefix included, is fixed when it is built."""

    __slots__ = ("pieces", "size")

    def __init__(self, pieces: list[Records]) -> None:
        self.pieces = pieces
        self.size = sum(len(piece) for piece in pieces)

    def __len__(self) -> int:
        return self.size

    def __bytes__(self) -> bytes:
        """The whole frame, the file slices read into it (for callers that want the response as bytes)."""
        return b"".join(piece.read() if isinstance(piece, FileRecords) else piece for piece in self.pieces)


# A framed response: bytes, or a RecordsSend when it carries file slices.
Response = bytes | RecordsSend


def encode_request(schema: ApiSchema, version: int, correlation_id: int, client_id: str | None,
                   request: ApiMessage) -> bytes:
    """Frame a request, as a client sends it: size, header (v2, with empty tagged fields, when flexible), body."""
    header = RequestHeader(request.API_KEY, version, correlation_id, client_id).encode()
    if schema.flexible(version):
        header += b"\x00"
    return framing.frame(header, request.encode(version=version))


def decode_response(schema: ApiSchema, version: int, frame: bytes) -> ApiMessage:
    """The body of a response frame, as a client reads it; the frame starts with the correlation id, which the
    caller has matched to its request. Raises what the decoders raise for a malformed body."""
    pos = 4
    if schema.response_header_version(version) >= 1:
        pos = skip_tagged_fields(frame, pos)
    return schema.response.decode(memoryview(frame)[pos:], version=version)


def encode_response_send(schema: ApiSchema, version: int, correlation_id: int, response: ApiMessage,
                         splicer: RecordsSplicer | None = None) -> Response:
    """Frame a response: size, header (v1 with empty tagged fields when flexible, except ApiVersions), body. With
    file slices spliced in, the frame is a RecordsSend of the bytes around them and the slices."""
    body = response.encode(version=version)
    header = _INT32.pack(correlation_id) + (b"\x00" if schema.response_header_version(version) >= 1 else b"")
    if splicer is None:
        return framing.frame(header, body)
    pieces = splicer.splice(body, schema.flexible(version))
    if not any(isinstance(piece, FileRecords) for piece in pieces):
        return framing.frame(header, *pieces)  # type: ignore[arg-type]  # bytes only, as just checked
    first = _INT32.pack(len(header) + sum(len(piece) for piece in pieces)) + header
    return RecordsSend([first, *pieces])


def encode_response(schema: ApiSchema, version: int, correlation_id: int, response: ApiMessage,
                    splicer: RecordsSplicer | None = None) -> bytes:
    """The framed response as bytes, any file slices read into it."""
    framed = encode_response_send(schema, version, correlation_id, response, splicer)
    return framed if isinstance(framed, bytes) else bytes(framed)
