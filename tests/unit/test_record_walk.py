"""The compiled record walk (protocol/_record_codec.c) answers exactly as the Python one in log_validator, its
reference, on every input: the same result, or the same exception with the same message.

Valid record sets of every shape, the same mutated (bytes flipped, cut, garbage spliced in), plain garbage, and
walk bounds a caller never passes (past the buffer, negative), over bytes, bytearray and memoryview."""
from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from minikafka.storage.log_validator import _python_walk
from tests.record_bytes import record, varint

try:
    from minikafka.protocol._record_codec import walk
except ImportError:
    pytest.skip("the compiled record walk (protocol/_record_codec.c) is not built: `pip install -e .` builds it",
                allow_module_level=True)

BUFFER_TYPES = (bytes, bytearray, memoryview)
LONG = st.integers(-(2**63), 2**63 - 1)


def outcome(function, buf: bytes | bytearray | memoryview, pos: int, end: int, delta: int) -> object:
    """What a walk returns, or the type and message of what it raises."""
    try:
        return function(buf, pos, end, delta)
    except Exception as e:  # noqa: BLE001 - any exception is an outcome to compare
        return type(e), str(e)


def assert_same(data: bytes, pos: int, end: int, delta: int) -> None:
    for make in BUFFER_TYPES:
        buf = make(data)
        assert outcome(walk, buf, pos, end, delta) == outcome(_python_walk, buf, pos, end, delta), make


payloads = st.none() | st.binary(max_size=40) | st.binary(min_size=100, max_size=300)
headers = st.lists(st.tuples(st.binary(max_size=10), st.none() | st.binary(max_size=20)), max_size=3).map(tuple)
timestamp_deltas = st.integers(-1000, 1000) | st.integers(-(2**40), 2**40) | LONG


@st.composite
def record_sets(draw: st.DrawFn) -> tuple[bytes, int]:
    """Records as producers write them, offset deltas from `delta` on, now and then one out of step; and `delta`."""
    delta = draw(st.sampled_from([0, 0, 0, 1, 7]))
    count = draw(st.integers(0, 8))
    out = bytearray()
    for i in range(count):
        offset_delta = delta + i if draw(st.integers(0, 9)) else draw(st.integers(-(2**31), 2**31 - 1))
        out += record(offset_delta, draw(payloads), key=draw(payloads), headers=draw(headers),
                      timestamp_delta=draw(timestamp_deltas))
    return bytes(out), delta


@st.composite
def mutated(draw: st.DrawFn, data: bytes) -> bytes:
    """`data` with bytes flipped or replaced, cut short, or garbage (long varints among it) spliced in."""
    out = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        where = draw(st.integers(0, len(out)))
        kind = draw(st.sampled_from(["flip", "replace", "cut", "splice", "varint"]))
        if kind == "flip" and where < len(out):
            out[where] ^= 1 << draw(st.integers(0, 7))
        elif kind == "replace" and where < len(out):
            out[where] = draw(st.integers(0, 255))
        elif kind == "cut":
            del out[where:]
        elif kind == "splice":
            out[where:where] = draw(st.binary(min_size=1, max_size=12))
        elif kind == "varint":  # any length, any value, often past what Java's int or long keeps
            out[where:where] = b"\xff" * draw(st.integers(0, 11)) + bytes([draw(st.integers(0, 0x7F))])
    return bytes(out)


@settings(max_examples=1000, deadline=None)
@given(record_sets(), st.binary(max_size=3))
def test_valid_record_sets_walk_alike(records: tuple[bytes, int], prefix: bytes) -> None:
    data, delta = records
    assert_same(prefix + data + b"\x00\x01", len(prefix), len(prefix) + len(data), delta)


@settings(max_examples=1500, deadline=None)
@given(st.data())
def test_mutated_record_sets_walk_alike(data: st.DataObject) -> None:
    records, delta = data.draw(record_sets())
    broken = data.draw(mutated(records))
    end = data.draw(st.sampled_from([len(broken), len(broken) + 5, len(records)]) | st.integers(0, len(broken)))
    assert_same(broken, 0, end, delta)


@settings(max_examples=2000, deadline=None)
@given(st.binary(max_size=64), st.integers(-80, 80), st.integers(-80, 80), st.integers(-3, 2**31))
@example(b"\x0a\x00\x00\x00\x01\x01", 0, 6, 0)  # a record whose fields end at its end, with no header count
@example(b"\x1e\x00" + b"\xff" * 9 + b"\x01\x00\x01\x00\x00", 0, 16, 0)  # varlong with bit 63 set
@example(b"\x1e\x00" + b"\x80" * 10 + b"\x00\x00\x01\x00\x00", 0, 16, 0)  # varlong of 11 bytes
@example(b"\x0c\x00\x00\x00\x01\x01\x00", -7, 0, 0)  # a negative position counts from the end, as in Python
def test_garbage_and_any_bounds_walk_alike(data: bytes, pos: int, end: int, delta: int) -> None:
    assert_same(data, pos, end, delta)


@pytest.mark.parametrize("delta", [-(2**63), -1, 2**62, 2**63 - 1])
def test_offset_deltas_no_record_can_have(delta: int) -> None:
    assert_same(record(0, b"v"), 0, len(record(0, b"v")), delta)


def test_each_header_shape_walks_alike() -> None:
    body = b"\x00\x00\x00\x01\x02a"
    for tail in (varint(-2), varint(40), varint(1) + varint(-3) + varint(-1), varint(1) + varint(1) + b"h"
                 + varint(90), varint(2) + varint(1) + b"h" + varint(-1) + varint(0) + varint(1) + b"x", b"\x00junk"):
        data = varint(len(body + tail)) + body + tail
        assert_same(data, 0, len(data), 0)
