"""Requests a hostile or broken client could send, for every request schema and version the broker serves: a null
wherever the wire can carry one (whatever the schema allows), integers at their limits, and names a test chooses
mixed with arbitrary ones, so that requests reach past the broker's first checks."""
from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping, Sequence

from hypothesis import strategies as st
from kafka.protocol.api_message import ApiMessage

from minikafka.broker.server import handlers
from minikafka.broker.server.api_version_manager import ApiVersionManager
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.codec import SCHEMAS

# What the broker decodes requests in, per API key: the schema versions of every key a handler serves.
SERVED = ApiVersionManager(handlers.MODULES).accepted_versions
SERVED_VERSIONS = [(ApiKey(key), version) for key, (lo, hi) in sorted(SERVED.items()) for version in range(lo, hi + 1)]

_INT_BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}


def _integers(bits: int) -> st.SearchStrategy[int]:
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return st.sampled_from([lo, lo + 1, -2, -1, 0, 1, 2, hi - 1, hi]) | st.integers(lo, hi) | st.integers(-3, 3)


class RequestValues:
    """How field values are drawn. `names` are mixed into every string, `topic_ids` into every uuid, `batches`
    into every records field, and `likely[name]` into the integers of the field so named (as kafka-python names
    it), so that requests get past a handler's first checks; a field named in `small` gets an integer in -2..3
    only: for amounts whose limits another test covers, such as partitions to create. With `nulls_anywhere` a null
    may be drawn for any string, bytes, array or nullable struct (an element of an array included); otherwise only
    where the schema allows one."""

    def __init__(self, names: Sequence[str] = (), topic_ids: Sequence[uuid.UUID] = (), batches: Sequence[bytes] = (),
                 likely: Mapping[str, Sequence[int]] | None = None, small: Collection[str] = (),
                 nulls_anywhere: bool = True) -> None:
        self.strings = st.text(max_size=12) | (st.sampled_from(list(names)) if names else st.nothing())
        self.uuids = st.uuids() | (st.sampled_from(list(topic_ids)) if topic_ids else st.nothing())
        self.records = st.binary(max_size=64) | (st.sampled_from(list(batches)) if batches else st.nothing())
        self.likely = {name: st.sampled_from(list(values)) for name, values in (likely or {}).items()}
        self.small = frozenset(small)
        self.nulls_anywhere = nulls_anywhere

    def _or_null(self, values: st.SearchStrategy, nullable: bool) -> st.SearchStrategy:
        return st.none() | values if nullable or self.nulls_anywhere else values

    def simple(self, field, type_str: str, nullable: bool) -> st.SearchStrategy:
        if type_str in _INT_BITS:
            if field.name in self.small:
                return st.integers(-2, 3)
            values = _integers(_INT_BITS[type_str])
            return self.likely[field.name] | values if field.name in self.likely else values
        return {
            "uint16": st.sampled_from([0, 1, 0xFFFF]) | st.integers(0, 0xFFFF),
            "float64": st.floats(allow_nan=False),
            "bool": st.booleans(),
            "uuid": st.none() | self.uuids,  # the zero uuid, which kafka-python reads as None
            "string": self._or_null(self.strings, nullable),
            "bytes": self._or_null(st.binary(max_size=24), nullable),
            "records": self._or_null(self.records, nullable),
        }[type_str]

    def field(self, field, version: int) -> st.SearchStrategy:
        nullable = field.nullable_for_version_q(version)
        if field.is_struct_array():
            return self._or_null(st.lists(self.struct(field.array_of, version), max_size=3), nullable)
        if field.is_array():
            elements = self.simple(field.array_of, field.array_of.type_str, False)
            return self._or_null(st.lists(elements, max_size=3), nullable)
        if field.is_struct():
            # Only a nullable struct has a null on the wire (a marker byte); a non-nullable one cannot be encoded as
            # null at all.
            values = self.struct(field, version)
            return st.none() | values if nullable else values
        return self.simple(field, field.type_str, nullable)

    def fields(self, struct, version: int) -> st.SearchStrategy[dict]:
        return st.fixed_dictionaries({f.name: self.field(f, version)
                                      for f in struct.fields.values() if f.for_version_q(version)})

    def struct(self, struct, version: int) -> st.SearchStrategy:
        return self.fields(struct, version).map(lambda values: struct.data_class(**values))

    def request(self, api_key: int, version: int) -> st.SearchStrategy[ApiMessage]:
        request_class = SCHEMAS[api_key].request
        return self.fields(request_class._struct, version).map(lambda values: request_class[version](**values))


def request_frame(request: ApiMessage, correlation_id: int = 7, client_id: str | None = "tester") -> bytes:
    """The request as a client sends it, without the size prefix (what the broker's frame decoder yields)."""
    request.with_header(correlation_id=correlation_id, client_id=client_id)
    return request.encode(header=True)


def refusals(struct, message, version: int, flexible: bool, path: str = "") -> list[str]:
    """Where `message` holds what Kafka's message reader refuses: a null in a field not nullable in `version`
    (or in an element of an array), or, in a flexible version, a string of more than 0x7fff bytes. A plain walk
    over the field specs, apart from the broker's generated checker."""
    found = []
    for field in struct.fields.values():
        if not field.for_version_q(version):
            continue
        if field.tagged_field_q(version) and field.name not in (message.tags or ()):
            continue
        value = getattr(message, field.name)
        where = path + field.name
        if value is None:
            if not field.nullable_for_version_q(version) and field.type_str != "uuid" and \
                    (field.is_array() or field.type_str in ("string", "bytes", "records")):
                found.append(where)
            continue
        if field.is_struct_array():
            for i, element in enumerate(value):
                found += refusals(field.array_of, element, version, flexible, f"{where}[{i}].")
        elif field.is_struct():
            found += refusals(field, value, version, flexible, f"{where}.")
        elif field.is_array():
            if field.array_of.type_str in ("string", "bytes"):
                found += [f"{where}[{i}]" for i, element in enumerate(value) if element is None]
            if flexible and field.array_of.type_str == "string":
                found += [f"{where}[{i}]" for i, element in enumerate(value)
                          if element is not None and len(element.encode()) > 0x7FFF]
        elif flexible and field.type_str == "string" and len(value.encode()) > 0x7FFF:
            found.append(where)
    return found
