"""What Kafka's generated message readers refuse and kafka-python's decoders let through.

Kafka's readers throw on a null where a field's nullableVersions do not allow one, and on a string longer than
0x7fff bytes; the request then cannot be parsed and the connection is closed. kafka-python decodes both, so a
handler would meet a None it was promised never to get. Each schema and version gets one checker, generated as
flat Python code from the field specs (as kafka-python generates its decoders), so a request costs a few attribute
reads per field that can be null, and no walk over the schema.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .request_header import InvalidRequestError

Checker = Callable[[Any], None]

MAX_STRING_BYTES = 0x7FFF
# A string of more characters than this may be over MAX_STRING_BYTES in UTF-8 (at most 4 bytes a character).
_MAX_SAFE_STRING_CHARS = MAX_STRING_BYTES // 4

_CAN_BE_NULL = frozenset({"string", "bytes", "records"})


def _null(field: str) -> InvalidRequestError:
    return InvalidRequestError(f"non-nullable field {field} was serialized as null")


def _too_long(field: str, value: str) -> InvalidRequestError:
    return InvalidRequestError(f"string field {field} had invalid length {len(value.encode())}")


class _Source:
    """The lines of one checker function, and fresh local names for it."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._count = 0

    def name(self, prefix: str) -> str:
        self._count += 1
        return f"_{prefix}{self._count}"

    def emit(self, indent: int, line: str) -> None:
        self.lines.append("    " * indent + line)


def _emit_string_length(src: _Source, indent: int, value: str, path: str) -> None:
    src.emit(indent, f"if len({value}) > {_MAX_SAFE_STRING_CHARS} and len({value}.encode()) > {MAX_STRING_BYTES}:")
    src.emit(indent + 1, f"raise _too_long({path!r}, {value})")


def _emit_struct(src: _Source, indent: int, struct: Any, item: str, version: int, compact: bool,
                 path: str) -> None:
    for field in struct._fields:
        if not field.for_version_q(version):
            continue
        if not field.tagged_field_q(version):
            _emit_field(src, indent, field, item, version, compact, path)
            continue
        # A tagged field the request left out has its default, which is never null for a non-nullable field.
        start = len(src.lines)
        src.emit(indent, f"if {item}.tags is not None and {field.name!r} in {item}.tags:")
        _emit_field(src, indent + 1, field, item, version, compact, path)
        if len(src.lines) == start + 1:
            del src.lines[start:]


def _emit_field(src: _Source, indent: int, field: Any, item: str, version: int, compact: bool, path: str) -> None:
    where = f"{path}{field._name}"
    nullable = field.nullable_for_version_q(version)
    if field.is_struct_array():
        _emit_array(src, indent, f"{item}.{field.name}", where, nullable,
                    lambda i, element: _emit_struct(src, i, field.array_of, element, version, compact, f"{where}[]."))
    elif field.is_array():
        if field.array_of.type_str in _CAN_BE_NULL:
            _emit_array(src, indent, f"{item}.{field.name}", where, nullable,
                        lambda i, element: _emit_element(src, i, field.array_of, element, compact, f"{where}[]"))
        elif not nullable:
            _emit_not_null(src, indent, f"{item}.{field.name}", where)
    elif field.is_struct():
        start = len(src.lines)
        value = src.name("s")
        src.emit(indent, f"{value} = {item}.{field.name}")
        inner = indent
        if nullable:
            src.emit(indent, f"if {value} is not None:")
            inner += 1
        body = len(src.lines)
        _emit_struct(src, inner, field, value, version, compact, f"{where}.")
        if len(src.lines) == body:  # nothing in it can be refused
            del src.lines[start:]
    elif field.type_str in _CAN_BE_NULL:
        if not nullable:
            _emit_element(src, indent, field, f"{item}.{field.name}", compact, where)
        elif compact and field.type_str == "string":
            value = src.name("v")
            src.emit(indent, f"{value} = {item}.{field.name}")
            src.emit(indent, f"if {value} is not None:")
            _emit_string_length(src, indent + 1, value, where)


def _emit_not_null(src: _Source, indent: int, expression: str, path: str) -> str:
    value = src.name("v")
    src.emit(indent, f"{value} = {expression}")
    src.emit(indent, f"if {value} is None:")
    src.emit(indent + 1, f"raise _null({path!r})")
    return value


def _emit_element(src: _Source, indent: int, field: Any, expression: str, compact: bool, path: str) -> None:
    """A non-nullable string, bytes or records value: a field, or an element of an array (never nullable)."""
    value = _emit_not_null(src, indent, expression, path)
    if compact and field.type_str == "string":
        _emit_string_length(src, indent, value, path)


def _emit_array(src: _Source, indent: int, expression: str, path: str, nullable: bool,
                emit_element: Callable[[int, str], None]) -> None:
    start = len(src.lines)
    if nullable:
        value = src.name("a")
        src.emit(indent, f"{value} = {expression}")
        src.emit(indent, f"if {value} is not None:")
        indent += 1
    else:
        value = _emit_not_null(src, indent, expression, path)
    element = src.name("e")
    src.emit(indent, f"for {element} in {value}:")
    loop = len(src.lines)
    emit_element(indent + 1, element)
    if len(src.lines) == loop:  # nothing in an element can be refused: no loop (and for a nullable array, nothing)
        del src.lines[start if nullable else loop - 1:]


def build_checker(struct: Any, version: int, compact: bool, name: str) -> Checker | None:
    """A function that raises InvalidRequestError where a decoded `struct` of `version` holds what Kafka's reader
    refuses; None when nothing in that version can be refused."""
    src = _Source()
    _emit_struct(src, 1, struct, "message", version, compact, "")
    if not src.lines:
        return None
    source = "\n".join(["def check(message):", *src.lines])
    namespace: dict[str, Any] = {"_null": _null, "_too_long": _too_long}
    exec(compile(source, f"<schema check {name} v{version}>", "exec"), namespace)
    return namespace["check"]
