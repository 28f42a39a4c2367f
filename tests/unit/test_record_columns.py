"""Records decoded into column buffers (protocol/record_columns.py): the compiled decoder (protocol/_record_codec.c)
gives exactly the buffers of the Python one, its reference, or the same exception with the same message; both read
what kafka-python's own batch builder writes as Kafka's consumer reads it, in Arrow's layout; a corrupt batch, or
one that would pass the column data limit, leaves the columns as they were."""
from __future__ import annotations

import os
import struct
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from minikafka.protocol.record_batch import HEADER_SIZE, CorruptRecordError
from minikafka.protocol.record_columns import (
    MAX_DATA_BYTES,
    PURE_PYTHON_ENV,
    ColumnBuffers,
    CompiledRecordColumns,
    PythonRecordColumns,
    RecordColumns,
)
from tests.record_bytes import record, record_body, varint

LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
LONG = st.integers(LONG_MIN, LONG_MAX)
LONG_EDGES = st.sampled_from([LONG_MIN, LONG_MIN + 1, LONG_MAX - 1, LONG_MAX, -1, 0])
EVERYTHING = (LONG_MIN, LONG_MAX)
IMPLEMENTATIONS = [PythonRecordColumns] + ([CompiledRecordColumns] if CompiledRecordColumns else [])
BUFFER_TYPES = (bytes, bytearray, memoryview)
needs_compiled = pytest.mark.skipif(CompiledRecordColumns is None, reason="the compiled decoder is not built "
                                    "(`pip install -e .` builds protocol/_record_codec.c) or MINIKAFKA_PURE_PYTHON=1")

payloads = st.none() | st.binary(max_size=30) | st.binary(min_size=100, max_size=200)
header_keys = st.binary(max_size=8) | st.text(max_size=4).map(lambda s: s.encode("utf-8", "surrogatepass"))
headers = st.lists(st.tuples(header_keys, st.none() | st.binary(max_size=12)), max_size=3).map(tuple)


@st.composite
def batches(draw: st.DrawFn) -> tuple[bytes, int, int, int, int | None]:
    """Records of one batch (offset deltas with gaps, as compaction leaves them), its count and bases."""
    count = draw(st.integers(0, 6))
    deltas = sorted(draw(st.sets(st.integers(0, 40), min_size=count, max_size=count)))
    out = bytearray()
    for delta in deltas:
        out += record(delta, draw(payloads), key=draw(payloads), headers=draw(headers),
                      timestamp_delta=draw(st.integers(-1000, 1000) | LONG | LONG_EDGES))
    base_offset = draw(st.integers(0, 2**40) | st.just(LONG_MAX - 20))  # the latter wraps as Java's long does
    base_timestamp = draw(st.integers(0, 2**41) | LONG | LONG_EDGES)
    log_append_time = draw(st.none() | st.integers(0, 2**41) | LONG_EDGES)
    return bytes(out), count, base_offset, base_timestamp, log_append_time


def outcome(columns, data: bytes | bytearray | memoryview, count: int, base_offset: int, base_timestamp: int,
            log_append_time: int | None, window: tuple[int, int], pos: int = 0, end: int | None = None) -> object:
    """What an append returns, or the type and message of what it raises."""
    end = len(data) if end is None else end
    try:
        return columns.append(data, pos, end, count, base_offset, base_timestamp, log_append_time, *window)
    except Exception as e:  # noqa: BLE001 - any exception is an outcome to compare
        return type(e), str(e)


def check_layout(taken: ColumnBuffers, include_headers: bool) -> None:
    """Arrow's layout: buffer sizes follow the row (and header entry) counts, offsets start at 0 and end at the
    data's size, bitmap bits past the last row are 0; the header columns are empty without headers."""
    rows = taken.rows
    assert len(taken.offsets) == len(taken.timestamps) == 8 * rows
    bitmaps = [(taken.key_validity, rows), (taken.value_validity, rows)]
    binaries = [(taken.key_offsets, taken.key_data, rows), (taken.value_offsets, taken.value_data, rows)]
    if include_headers:
        entries = struct.unpack_from("<i", taken.header_offsets, 4 * rows)[0]
        assert len(taken.header_offsets) == 4 * (rows + 1) and taken.header_offsets[:4] == bytes(4)
        bitmaps += [(taken.header_validity, rows), (taken.header_value_validity, entries)]
        binaries += [(taken.header_key_offsets, taken.header_key_data, entries),
                     (taken.header_value_offsets, taken.header_value_data, entries)]
    else:
        assert not any(taken[9:])
    for bitmap, n in bitmaps:
        assert len(bitmap) == (n + 7) // 8
        if n % 8:
            assert bitmap[-1] >> (n % 8) == 0
    for offsets, data, n in binaries:
        assert len(offsets) == 4 * (n + 1) and offsets[:4] == bytes(4)
        assert struct.unpack_from("<i", offsets, 4 * n)[0] == len(data)


def bit(bitmap: bytearray, i: int) -> bool:
    return bool(bitmap[i >> 3] >> (i & 7) & 1)


def binary(offsets: bytearray, data: bytearray, validity: bytearray | None, i: int) -> bytes | None:
    if validity is not None and not bit(validity, i):
        return None
    start, stop = struct.unpack_from("<2i", offsets, 4 * i)
    return bytes(data[start:stop])


def read_rows(taken: ColumnBuffers, include_headers: bool) -> list[tuple]:
    """The rows back out of the buffers, by Arrow's layout rules alone: (offset, timestamp, key, value, headers)."""
    check_layout(taken, include_headers)
    rows = []
    for i in range(taken.rows):
        row_headers = None
        if include_headers and bit(taken.header_validity, i):
            first, stop = struct.unpack_from("<2i", taken.header_offsets, 4 * i)
            row_headers = [(binary(taken.header_key_offsets, taken.header_key_data, None, j),
                            binary(taken.header_value_offsets, taken.header_value_data, taken.header_value_validity,
                                   j)) for j in range(first, stop)]
        rows.append((struct.unpack_from("<q", taken.offsets, 8 * i)[0],
                     struct.unpack_from("<q", taken.timestamps, 8 * i)[0],
                     binary(taken.key_offsets, taken.key_data, taken.key_validity, i),
                     binary(taken.value_offsets, taken.value_data, taken.value_validity, i), row_headers))
    return rows


def test_record_columns_is_the_compiled_one_unless_not_built_or_not_wanted():
    assert RecordColumns is (CompiledRecordColumns or PythonRecordColumns)
    script = ("from minikafka.protocol.record_columns import RecordColumns, PythonRecordColumns, "
              "CompiledRecordColumns; assert RecordColumns is PythonRecordColumns and CompiledRecordColumns is None")
    subprocess.run([sys.executable, "-c", script], env={**os.environ, PURE_PYTHON_ENV: "1"}, check=True)


# ---- the compiled decoder against its Python reference


@needs_compiled
@settings(max_examples=120, deadline=None)
@given(st.lists(st.tuples(batches(), st.tuples(st.integers(-5, 30), st.integers(-5, 60)) | st.just(None),
                          st.booleans(), st.sampled_from(BUFFER_TYPES), st.integers(0, 3)), min_size=1, max_size=4),
       st.booleans(), st.sampled_from([MAX_DATA_BYTES, MAX_DATA_BYTES, 400]))
def test_compiled_gives_the_buffers_of_the_python_reference(appends, include_headers, max_data_bytes):
    python = PythonRecordColumns(include_headers, max_data_bytes)
    compiled = CompiledRecordColumns(include_headers, max_data_bytes)
    for (data, count, base_offset, base_timestamp, log_append_time), offsets, take, make, pad in appends:
        window = EVERYTHING if offsets is None else (
            min(base_offset + offsets[0], LONG_MAX), min(base_offset + offsets[0] + offsets[1], LONG_MAX))
        buf = make(b"\xee" * pad + data + b"\xee" * pad)  # the records within a larger buffer
        args = (buf, count, base_offset, base_timestamp, log_append_time, window, pad, pad + len(data))
        got = outcome(compiled, *args)
        assert got == outcome(python, *args)
        assert isinstance(got, int) or got[0] is OverflowError
        assert (compiled.rows, compiled.data_bytes) == (python.rows, python.data_bytes)
        if take:
            taken = compiled.take()
            assert taken == python.take()
            check_layout(taken, include_headers)
    assert compiled.take() == python.take()


@st.composite
def mutated(draw: st.DrawFn, data: bytes) -> bytes:
    """`data` with bytes changed, cut short, or garbage (long varints, negative lengths) spliced in."""
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
@settings(max_examples=150, deadline=None)
@given(st.data(), batches(), st.booleans())
def test_corrupt_records_raise_the_same_and_change_nothing(data, batch, include_headers):
    records, count, base_offset, base_timestamp, log_append_time = batch
    bad = data.draw(mutated(records))
    bad_count = data.draw(st.sampled_from([count, count + 1, max(0, count - 1), -1]))
    args = (bad, bad_count, base_offset, base_timestamp, log_append_time, EVERYTHING)
    python, compiled = PythonRecordColumns(include_headers), CompiledRecordColumns(include_headers)
    for columns in (python, compiled):
        assert outcome(columns, *GOOD) == 1
    got = outcome(compiled, *args)
    assert got == outcome(python, *args)
    if isinstance(got, tuple):
        assert got[0] is CorruptRecordError
        assert compiled.rows == python.rows == 1  # the good batch only
    assert compiled.take() == python.take()


# ---- against an independent encoder: kafka-python's batch builder


def built(written: list[tuple[int, int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]]) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for offset_delta, timestamp, key, value, hdrs in written:
        assert builder.append(offset_delta, timestamp, key, value, hdrs) is not None
    return bytes(builder.build())


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_reads_what_kafka_pythons_builder_writes(implementation):
    written = [
        (0, 1_700_000_000_000, b"k0", b"v0", []),
        (1, 1_700_000_000_005, None, b"", [("h", b"x"), ("empty", None)]),
        (2, 1_699_999_999_000, b"", None, [("caf\u00e9", b"\x00\x01")]),
        (3, 1_700_000_000_010, b"k3", b"v" * 1000, []),
    ]
    data = built(written)
    batch = DefaultRecordBatch(data)
    columns = implementation(True)
    assert columns.append(data, HEADER_SIZE, len(data), 4, 100, batch.first_timestamp, None, 101, 104) == 3
    taken = columns.take()
    check_layout(taken, True)
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


written_records = st.lists(
    st.tuples(st.integers(1, 1000), st.integers(-(2**40), 2**40), st.none() | st.binary(max_size=20),
              st.none() | st.binary(max_size=300),
              st.lists(st.tuples(st.text(st.characters(blacklist_categories=("Cs",)), max_size=5),
                                 st.none() | st.binary(max_size=10)), max_size=3)),
    min_size=1, max_size=8)


@settings(max_examples=60, deadline=None)
@given(written_records, st.integers(0, 2**50), st.integers(0, 2**42), st.booleans(), st.data())
def test_reads_any_batch_kafka_pythons_builder_writes(records, base_offset, first_timestamp, include_headers, data):
    """Offsets with gaps, timestamps on either side of the first, null and empty keys, values, header values."""
    written, offset_delta = [], -1
    for gap, timestamp_delta, key, value, hdrs in records:
        offset_delta += gap
        written.append((offset_delta, first_timestamp + timestamp_delta, key, value, hdrs))
    batch = built(written)
    offsets = [base_offset + w[0] for w in written]
    low = data.draw(st.integers(offsets[0] - 2, offsets[-1] + 1))
    high = data.draw(st.integers(low, offsets[-1] + 3))
    log_append_time = data.draw(st.none() | st.integers(0, 2**42))
    expected = [(base_offset + delta, timestamp if log_append_time is None else log_append_time, key, value,
                 [(k.encode(), v) for k, v in hdrs] or None if include_headers else None)
                for delta, timestamp, key, value, hdrs in written if low <= base_offset + delta < high]
    for implementation in IMPLEMENTATIONS:
        columns = implementation(include_headers)
        kept = columns.append(memoryview(batch), HEADER_SIZE, len(batch), len(written), base_offset,
                              DefaultRecordBatch(batch).first_timestamp, log_append_time, low, high)
        assert kept == columns.rows == len(expected)
        assert read_rows(columns.take(), include_headers) == expected


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_buffers_are_arrow_arrays(implementation):
    """pyarrow takes the buffers as they are (what the Spark connector does) and reads the same rows."""
    pa = pytest.importorskip("pyarrow")
    data = (record(0, b"v0", key=b"k0", headers=((b"a", b"1"), (b"b", None))) + record(2, None)
            + record(5, b"", key=b"", headers=((b"\xffx", b""),), timestamp_delta=-7))
    columns = implementation(True)
    assert columns.append(data, 0, len(data), 3, 40, 1000, None, *EVERYTHING) == 3
    t = columns.take()
    rows = t.rows
    key = pa.Array.from_buffers(pa.binary(), rows, [pa.py_buffer(t.key_validity), pa.py_buffer(t.key_offsets),
                                                    pa.py_buffer(t.key_data)])
    value = pa.Array.from_buffers(pa.binary(), rows, [pa.py_buffer(t.value_validity),
                                                      pa.py_buffer(t.value_offsets), pa.py_buffer(t.value_data)])
    entries = struct.unpack_from("<i", t.header_offsets, 4 * rows)[0]
    header_key = pa.Array.from_buffers(pa.string(), entries, [None, pa.py_buffer(t.header_key_offsets),
                                                              pa.py_buffer(t.header_key_data)])
    header_value = pa.Array.from_buffers(pa.binary(), entries, [pa.py_buffer(t.header_value_validity),
                                                                pa.py_buffer(t.header_value_offsets),
                                                                pa.py_buffer(t.header_value_data)])
    entry = pa.StructArray.from_arrays([header_key, header_value], ["key", "value"])
    header_type = pa.list_(entry.type)
    header = pa.Array.from_buffers(header_type, rows, [pa.py_buffer(t.header_validity),
                                                       pa.py_buffer(t.header_offsets)], children=[entry])
    offsets = pa.Array.from_buffers(pa.int64(), rows, [None, pa.py_buffer(t.offsets)])
    timestamps = pa.Array.from_buffers(pa.int64(), rows, [None, pa.py_buffer(t.timestamps)])
    for array in (key, value, header_key, header_value, header, offsets, timestamps):
        array.validate(full=True)
    assert key.to_pylist() == [b"k0", None, b""] and value.to_pylist() == [b"v0", None, b""]
    assert offsets.to_pylist() == [40, 42, 45] and timestamps.to_pylist() == [1000, 1000, 993]
    assert header.to_pylist() == [[{"key": "a", "value": b"1"}, {"key": "b", "value": None}], None,
                                  [{"key": "\ufffdx", "value": b""}]]


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_log_append_time_and_invalid_header_keys(implementation):
    data = record(0, b"v", headers=((b"\xff\xfeok", b"1"), (b"\xed\xa0\x80", None))) + record(3, None,
                                                                                               timestamp_delta=99)
    columns = implementation(True)
    assert columns.append(data, 0, len(data), 2, 10, 5, 777, 0, 100) == 2
    taken = columns.take()
    assert struct.unpack("<2q", taken.offsets) == (10, 13)
    assert struct.unpack("<2q", taken.timestamps) == (777, 777)
    # Java's new String(bytes, UTF_8): each invalid sequence a U+FFFD, surrogates too
    assert bytes(taken.header_key_data) == "\ufffd\ufffdok\ufffd\ufffd\ufffd".encode()


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_offsets_and_timestamps_wrap_as_javas_longs(implementation):
    data = record(0, b"a", timestamp_delta=1) + record(3, b"b", timestamp_delta=LONG_MIN)
    columns = implementation(False)
    assert columns.append(data, 0, len(data), 2, LONG_MAX - 1, LONG_MAX, None, *EVERYTHING) == 2
    taken = columns.take()
    assert struct.unpack("<2q", taken.offsets) == (LONG_MAX - 1, LONG_MIN + 1)
    assert struct.unpack("<2q", taken.timestamps) == (LONG_MIN, -1)


# ---- malformed input


def good_records() -> bytes:
    return (record(0, b"value", key=b"key", headers=((b"h", b"v"), (b"n", None)))
            + record(1, None, timestamp_delta=300)
            + record(4, b"x" * 200, key=None, headers=((b"", b""),), timestamp_delta=-(2**40)))


GOOD = (record(0, b"before", headers=((b"k", b"v"),)), 1, 5, 0, None, EVERYTHING)


def assert_same_failure(data: bytes, count: int, message: str | None = None) -> None:
    """Both decoders raise CorruptRecordError with the same message (`message` when given), after which a take
    gives what the append before it kept and nothing else."""
    outcomes = []
    for implementation in IMPLEMENTATIONS:
        for include_headers in (False, True):
            columns = implementation(include_headers)
            assert outcome(columns, *GOOD) == 1
            before = (columns.rows, columns.data_bytes)
            got = outcome(columns, data, count, 100, 0, None, EVERYTHING)
            assert (columns.rows, columns.data_bytes) == before
            reference = PythonRecordColumns(include_headers)
            outcome(reference, *GOOD)
            assert columns.take() == reference.take()
            outcomes.append(got)
    assert outcomes[0][0] is CorruptRecordError, outcomes[0]
    assert all(o == outcomes[0] for o in outcomes), outcomes
    if message is not None:
        assert outcomes[0][1] == message


def test_every_truncation_of_a_batch_is_corrupt():
    data = good_records()
    for end in range(len(data)):
        assert_same_failure(data[:end], 3)


def test_every_byte_changed_decodes_alike():
    data = good_records()
    for at in range(len(data)):
        for value in {0x00, 0x01, 0x02, 0x7F, 0x80, 0xFF, data[at] ^ 0x80, (data[at] + 2) % 256, data[at] - 1}:
            bad = data[:at] + bytes([value % 256]) + data[at + 1:]
            outcomes = []
            for implementation in IMPLEMENTATIONS:
                columns = implementation(True)
                outcomes.append((outcome(columns, bad, 3, 100, 0, None, EVERYTHING), columns.take()))
            assert all(o == outcomes[0] for o in outcomes), (at, value)


def body(offset_delta: int = 0, tail: bytes = b"") -> bytes:
    """A record body cut before its key, for hand-made fields after it: attributes, timestamp and offset delta."""
    return b"\x00" + varint(0) + varint(offset_delta) + tail


def sized(payload: bytes) -> bytes:
    return varint(len(payload)) + payload


MALFORMED = {
    "negative record count": (b"", -1, "Record batch has an invalid record count of -1"),
    "fewer records than the count": (record(0, b"v"), 2, "Record batch ends after 1 of its 2 records"),
    "bytes after the records": (record(0, b"v") + b"\x00", 1, "Record batch has 1 bytes after its 1 records"),
    "a record past the batch's end": (varint(20) + record_body(0, b"v"), 1,
                                      "Record 0 of the batch has a size of 20 bytes, but 7 bytes are left"),
    "a record of size 0": (varint(0) + record_body(0, b"v"), 1,
                           "Record 0 of the batch has a size of 0 bytes, but 7 bytes are left"),
    "a record of negative size": (varint(-2) + record_body(0, b"v"), 1,
                                  "Record 0 of the batch has a size of -2 bytes, but 7 bytes are left"),
    "a record length varint of 6 bytes": (b"\x80\x80\x80\x80\x80\x00" + record_body(0, b"v"), 1,
                                          "Found invalid record structure: a varint longer than 5 bytes"),
    "a timestamp delta varlong of 11 bytes": (sized(b"\x00" + b"\xff" * 10 + b"\x01" + b"\x00\x01\x01\x00"), 1,
                                              "Found invalid record structure: a varint longer than 10 bytes"),
    "an offset delta varint of 6 bytes": (sized(b"\x00\x00" + b"\xff" * 5 + b"\x01\x01\x01\x00"), 1,
                                          "Found invalid record structure: a varint longer than 5 bytes"),
    "a key length of -2": (sized(body(0, varint(-2) + b"\x01\x00")), 1,
                           "Record has a key of -2 bytes, but 2 bytes are left"),
    "a value length of -5": (sized(body(0, varint(-1) + varint(-5) + b"\x00")), 1,
                             "Record has a value of -5 bytes, but 1 bytes are left"),
    "a key past the record's end": (sized(body(0, varint(9) + b"k" * 3)), 1,
                                    "Record has a key of 9 bytes, but 3 bytes are left"),
    "a negative header count": (sized(body(0, b"\x01\x01" + varint(-1))), 1,
                                "Record has an invalid number of headers: -1"),
    "more headers than bytes left": (sized(body(0, b"\x01\x01" + varint(3) + b"\x00\x01")), 1,
                                     "Record has an invalid number of headers: 3"),
    "a null header key": (sized(body(0, b"\x01\x01" + varint(1) + varint(-1) + varint(-1))), 1,
                          "Record has a header with a null key"),
    "a negative header key length": (sized(body(0, b"\x01\x01" + varint(1) + varint(-3) + varint(-1))), 1,
                                     "Record has a header key of -3 bytes, but 1 bytes are left"),
    "a header value of -2": (sized(body(0, b"\x01\x01" + varint(1) + varint(1) + b"k" + varint(-2))), 1,
                             "Record has a header value of -2 bytes, but 0 bytes are left"),
    "a record cut in its headers": (sized(body(0, b"\x01\x01" + varint(2) + varint(0) + varint(-1))), 1,
                                    "Record field at byte 9 runs past the end of its record"),
    "a record longer than its fields": (sized(record_body(0, b"v") + b"\x00"), 1,
                                        "Record 0 of the batch has 1 bytes left after its last header"),
    "a varint cut by the record's end": (sized(b"\x00\x80"), 1,
                                         "Record field at byte 2 runs past the end of its record"),
    "the second record bad": (record(0, b"v") + sized(b"\x00"), 2,
                              "Record field at byte 10 runs past the end of its record"),
}


@pytest.mark.parametrize("case", MALFORMED)
def test_malformed_records_are_named(case):
    data, count, message = MALFORMED[case]
    assert_same_failure(data, count, message)


def test_record_lengths_off_by_some_bytes():
    """Each record's length varint made shorter or longer than its fields."""
    sizes = [record_body(0, b"value", key=b"key", headers=((b"h", b"v"),)), record_body(1, None),
             record_body(2, b"x" * 200)]
    for i in range(len(sizes)):
        for change in (-3, -1, 1, 2, 200, -len(sizes[i])):
            data = b"".join(varint(len(b) + (change if j == i else 0)) + b for j, b in enumerate(sizes))
            assert_same_failure(data, 3)


def test_java_int_varints_are_cut_to_32_bits():
    """A 5-byte varint carries 35 bits; Java's int keeps the low 32, and so do both decoders."""
    offset_delta = b"\x82\x80\x80\x80\x70"  # raw 2 + (0x70 << 28): 32 bits keep 2, zigzag 1
    data = sized(b"\x00\x00" + offset_delta + b"\x01\x01\x00")
    for implementation in IMPLEMENTATIONS:
        columns = implementation(False)
        assert columns.append(data, 0, len(data), 1, 10, 0, None, *EVERYTHING) == 1
        assert struct.unpack("<q", columns.take().offsets) == (11,)


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_records_outside_the_buffer_are_refused(implementation):
    data = record(0, b"v")
    columns = implementation(False)
    for pos, end in ((0, len(data) + 1), (-1, len(data)), (2, 1)):
        with pytest.raises(ValueError, match="not within"):
            columns.append(data, pos, end, 1, 0, 0, None, *EVERYTHING)
    assert columns.take().rows == 0


# ---- the column data limit (Arrow's int32 offsets)


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_column_data_is_bounded_by_arrows_offsets(implementation):
    data = record(0, b"x" * 50) + record(1, b"y" * 50)
    columns = implementation(False, 120)
    assert columns.append(data, 0, len(data), 2, 0, 0, None, 0, 10) == 2
    with pytest.raises(OverflowError, match="take"):
        columns.append(data, 0, len(data), 2, 2, 0, None, 0, 10)
    assert columns.rows == 2 and columns.data_bytes == 100
    small = record(0, b"z" * 20)
    assert columns.append(small, 0, len(small), 1, 2, 0, None, *EVERYTHING) == 1  # up to the limit exactly
    assert [row[3] for row in read_rows(columns.take(), False)] == [b"x" * 50, b"y" * 50, b"z" * 20]
    assert columns.append(data, 0, len(data), 2, 0, 0, None, 0, 10) == 2  # room again after a take


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_header_bytes_count_towards_the_limit_and_corruption_comes_first(implementation):
    data = record(0, b"v" * 10, key=b"k" * 10, headers=((b"key", b"value"),))
    columns = implementation(True, 27)
    with pytest.raises(OverflowError):
        columns.append(data, 0, len(data), 1, 0, 0, None, *EVERYTHING)
    assert columns.rows == columns.data_bytes == 0
    assert implementation(False, 27).append(data, 0, len(data), 1, 0, 0, None, *EVERYTHING) == 1  # headers left out
    with pytest.raises(CorruptRecordError):  # what a corrupt batch raises wins over the limit
        columns.append(data + b"\x00", 0, len(data) + 1, 1, 0, 0, None, *EVERYTHING)
    assert implementation(True, 28).append(data, 0, len(data), 1, 0, 0, None, *EVERYTHING) == 1
    assert check_layout(columns.take(), True) is None
    with pytest.raises(ValueError, match="int32"):
        implementation(True, MAX_DATA_BYTES + 1)


@needs_compiled
def test_the_compiled_decoder_holds_no_reference_to_its_input():
    data = bytearray(good_records())
    columns = CompiledRecordColumns(True)
    before = sys.getrefcount(data)
    for end in (len(data), len(data) - 1):
        outcome(columns, data, 3, 0, 0, None, EVERYTHING, 0, end)
        outcome(columns, memoryview(data), 3, 0, 0, None, EVERYTHING, 0, end)
    assert sys.getrefcount(data) == before
    data.append(0)  # no buffer export left behind either
