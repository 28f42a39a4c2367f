"""What every coordinator record's decoding shares: the leading int16 (the key's type or the value's version) and a
body decoded whole, exactly one message of that version, raising the record kind's own error otherwise."""
from __future__ import annotations

import io
import struct
from typing import Any

from minikafka.protocol.request_header import InvalidRequestError
from minikafka.protocol.schema_checks import Checker

_I16 = struct.Struct(">h")


def split_version(data: bytes, what: str, error: type[Exception]) -> tuple[int, bytes]:
    """The leading int16 of a record's key or value, and the rest; `error` when there is none."""
    if len(data) < _I16.size:
        raise error(f"{what} of {len(data)} bytes has no version")
    (version,) = _I16.unpack_from(data)
    return version, data[_I16.size:]


def decode_message(message_class: Any, body: bytes, version: int, check: Checker | None, name: str,
                   error: type[Exception]) -> Any:
    """`body` as one `message_class` message of `version`, checked; `error` if malformed or followed by bytes."""
    buffer = io.BytesIO(body)
    try:
        message = message_class.decode(buffer, version=version, header=False)
        if check is not None:
            check(message)
    except (struct.error, ValueError, TypeError, IndexError, InvalidRequestError) as exc:
        raise error(f"{name} v{version} is malformed: {exc}") from None
    extra = len(body) - buffer.tell()
    if extra:
        raise error(f"{extra} unexpected bytes after {name} v{version}")
    return message
