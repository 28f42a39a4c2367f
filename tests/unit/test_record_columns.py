"""Records decoded into column buffers (protocol/record_columns.py): the compiled decoder (protocol/_record_codec.c)
gives exactly the buffers of the Python one, its reference, or the same exception with the same message; both read
what kafka-python's own batch builder writes as Kafka's consumer reads it; a corrupt batch leaves the columns as
they were."""
from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from minikafka.protocol.record_batch import HEADER_SIZE, CorruptRecordError
from minikafka.protocol.record_columns import CompiledRecordColumns, PythonRecordColumns
from tests.record_bytes import record, varint

LONG = st.integers(-(2**63), 2**63 - 1)
IMPLEMENTATIONS = [PythonRecordColumns] + ([CompiledRecordColumns] if CompiledRecordColumns else [])
needs_compiled = pytest.mark.skipif(CompiledRecordColumns is None, reason="protocol/_record_codec.c is not built "
                                    "(`pip install -e .` builds it)")

payloads = st.none() | st.binary(max_size=30) | st.binary(min_size=100, max_size=200)
header_keys = st.binary(max_size=8) | st.text(max_size=4).map(str.encode)  # invalid UTF-8 among the binary ones
headers = st.lists(st.tuples(header_keys, st.none() | st.binary(max_size=12)), max_size=3).map(tuple)


@st.composite
def batches(draw: st.DrawFn) -> tuple[bytes, int, int, int, int | None]:
    """Records of one batch (offset deltas with gaps, as compaction leaves them), its count and bases."""
    count = draw(st.integers(0, 6))
    deltas = sorted(draw(st.sets(st.integers(0, 40), min_size=count, max_size=count)))
    out = bytearray()
    for delta in deltas:
        out += record(delta, draw(payloads), key=draw(payloads), headers=draw(headers),
                      timestamp_delta=draw(st.integers(-1000, 1000) | LONG))
    base_offset = draw(st.integers(0, 2**40) | st.just(2**63 - 20))
    base_timestamp = draw(st.integers(0, 2**41) | LONG)
    log_append_time = draw(st.none() | st.integers(0, 2**41))
    return bytes(out), count, base_offset, base_timestamp, log_append_time


def outcome(columns, data: bytes, count: int, base_offset: int, base_timestamp: int, log_append_time: int | None,
            window: tuple[int, int], pos: int = 0, end: int | None = None) -> object:
    end = len(data) if end is None else end
    try:
        return columns.append(data, pos, end, count, base_offset, base_timestamp, log_append_time, *window)
    except Exception as e:  # noqa: BLE001 - any exception is an outcome to compare
        return type(e), str(e)


@needs_compiled
@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(batches(), st.tuples(st.integers(0, 30), st.integers(0, 60)), st.booleans()),
                min_size=1, max_size=4), st.booleans())
def test_compiled_gives_the_buffers_of_the_python_reference(appends, include_headers):
    python, compiled = PythonRecordColumns(include_headers), CompiledRecordColumns(include_headers)
    for (data, count, base_offset, base_timestamp, log_append_time), (lo, span), take in appends:
        window = (min(base_offset + lo, 2**63 - 1), min(base_offset + lo + span, 2**63 - 1))
        args = (data, count, base_offset, base_timestamp, log_append_time, window)
        assert outcome(compiled, *args) == outcome(python, *args)
        assert (compiled.rows, compiled.data_bytes) == (python.rows, python.data_bytes)
        if take:
            assert compiled.take() == python.take()
    assert compiled.take() == python.take()


@st.composite
def mutated(draw: st.DrawFn, data: bytes) -> bytes:
    out = bytearray(data)
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["flip", "cut", "splice"]))
        at = draw(st.integers(0, max(0, len(out) - 1)))
        if kind == "flip" and out:
            out[at] = draw(st.integers(0, 255))
        elif kind == "cut":
            del out[at:]
        else:
            out[at:at] = draw(st.sampled_from([b"\xff" * 11, b"\x01", b"\x7f", varint(-3), varint(2**20)]))
    return bytes(out)


@needs_compiled
@settings(max_examples=400, deadline=None)
@given(st.data(), batches(), st.booleans())
def test_corrupt_records_raise_the_same_and_change_nothing(data, batch, include_headers):
    records, count, base_offset, base_timestamp, log_append_time = batch
    bad = data.draw(mutated(records))
    bad_count = data.draw(st.sampled_from([count, count + 1, max(0, count - 1), -1]))
    window = (0, 2**63 - 1)
    good = (b"".join([record(0, b"before", headers=((b"k", b"v"),))]), 1, 5, 0, None, window)
    for columns in (PythonRecordColumns(include_headers), CompiledRecordColumns(include_headers)):
        assert outcome(columns, *good) == 1
    python, compiled = PythonRecordColumns(include_headers), CompiledRecordColumns(include_headers)
    for columns in (python, compiled):
        outcome(columns, *good)
    args = (bad, bad_count, base_offset, base_timestamp, log_append_time, window)
    got = outcome(compiled, *args)
    assert got == outcome(python, *args)
    if isinstance(got, tuple):
        assert got[0] is CorruptRecordError
        assert compiled.rows == python.rows == 1  # the good batch only
    assert compiled.take() == python.take()


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_reads_what_kafka_pythons_builder_writes(implementation):
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    written = [
        (0, 1_700_000_000_000, b"k0", b"v0", []),
        (1, 1_700_000_000_005, None, b"", [("h", b"x"), ("empty", None)]),
        (2, 1_699_999_999_000, b"", None, [("caf\u00e9", b"\x00\x01")]),
        (3, 1_700_000_000_010, b"k3", b"v" * 1000, []),
    ]
    for offset, timestamp, key, value, hdrs in written:
        builder.append(offset, timestamp, key, value, hdrs)
    data = bytes(builder.build())
    batch = DefaultRecordBatch(data)
    columns = implementation(True)
    assert columns.append(data, HEADER_SIZE, len(data), 4, 100, batch.first_timestamp, None, 101, 104) == 3
    taken = columns.take()
    assert taken.rows == 3
    assert struct.unpack("<3q", taken.offsets) == (101, 102, 103)
    assert struct.unpack("<3q", taken.timestamps) == tuple(t for _, t, *_ in written[1:])
    assert taken.key_validity == bytearray([0b110]) and taken.value_validity == bytearray([0b101])
    assert struct.unpack("<4i", taken.key_offsets) == (0, 0, 0, 2) and taken.key_data == b"k3"
    assert struct.unpack("<4i", taken.value_offsets) == (0, 0, 0, 1000) and taken.value_data == b"v" * 1000
    assert taken.header_validity == bytearray([0b011])
    assert struct.unpack("<4i", taken.header_offsets) == (0, 2, 3, 3)
    assert taken.header_key_data == "hemptycaf\u00e9".encode()
    assert struct.unpack("<4i", taken.header_key_offsets) == (0, 1, 6, 11)
    assert taken.header_value_validity == bytearray([0b101]) and taken.header_value_data == b"x\x00\x01"
    assert columns.rows == 0 and columns.take().rows == 0


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_log_append_time_and_invalid_header_keys(implementation):
    data = record(0, b"v", headers=((b"\xff\xfeok", b"1"),)) + record(3, None, timestamp_delta=99)
    columns = implementation(True)
    assert columns.append(data, 0, len(data), 2, 10, 5, 777, 0, 100) == 2
    taken = columns.take()
    assert struct.unpack("<2q", taken.offsets) == (10, 13)
    assert struct.unpack("<2q", taken.timestamps) == (777, 777)
    assert bytes(taken.header_key_data) == b"\xff\xfeok".decode("utf-8", "replace").encode()


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_column_data_is_bounded_by_arrows_offsets(implementation):
    data = record(0, b"x" * 50) + record(1, b"y" * 50)
    columns = implementation(False, 120)
    assert columns.append(data, 0, len(data), 2, 0, 0, None, 0, 10) == 2
    with pytest.raises(OverflowError, match="take"):
        columns.append(data, 0, len(data), 2, 2, 0, None, 0, 10)
    assert columns.rows == 2 and columns.data_bytes == 100
    with pytest.raises(ValueError, match="not within"):
        columns.append(data, 0, len(data) + 1, 2, 0, 0, None, 0, 10)
