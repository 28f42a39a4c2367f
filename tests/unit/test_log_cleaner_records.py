"""The cleaner's per-record work, compiled (protocol/_record_codec.c's put_records, retained and rewrite) and in
Python (storage/log_cleaner.py's references): the same offset map, the same records kept, the same errors, the same
re-encoded records, on every input; and a cleaning gives the same bytes with either, copying a batch whose records
all stay and rewriting one that loses some."""
from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minikafka.protocol.record_batch import HEADER_SIZE, batch_crc_ok, iter_batches
from minikafka.storage import log_cleaner
from minikafka.storage.log_cleaner import (
    CleanedTransactionMetadata,
    OffsetMap,
    _python_put_records,
    _python_retained,
    _python_rewrite,
    build_offset_map,
    filter_batches,
)
from tests.record_bytes import batch, record

try:
    from minikafka.protocol._record_codec import put_records, retained, rewrite
except ImportError:
    put_records = retained = rewrite = None

compiled = pytest.mark.skipif(put_records is None, reason="the compiled record codec (protocol/_record_codec.c) is "
                                                          "not built: `pip install -e .` builds it")
NOW = 1_700_000_000_000
RETENTION = 86_400_000
KEYS = [None, b"", b"a", b"b", b"key-1", b"k" * 55, b"k" * 56, b"k" * 64, b"k" * 119, b"k" * 300]
HEADERS = st.lists(st.tuples(st.binary(max_size=6), st.none() | st.binary(max_size=6)), max_size=2).map(tuple)


@st.composite
def record_sets(draw: st.DrawFn) -> tuple[bytes, int]:
    """The records of a batch, keys from a small pool (so that lookups hit), values null now and then; their
    count."""
    count = draw(st.integers(0, 12))
    data = b"".join(record(i, draw(st.none() | st.binary(max_size=20)), key=draw(st.sampled_from(KEYS)),
                           headers=draw(HEADERS), timestamp_delta=draw(st.integers(-(2**40), 2**40)))
                    for i in range(count))
    return data, count


@st.composite
def broken(draw: st.DrawFn, data: bytes) -> bytes:
    """`data` with a byte flipped, cut short or garbage spliced in."""
    out = bytearray(data)
    for _ in range(draw(st.integers(1, 3))):
        where = draw(st.integers(0, len(out)))
        kind = draw(st.sampled_from(["flip", "cut", "splice"]))
        if kind == "flip" and where < len(out):
            out[where] ^= 1 << draw(st.integers(0, 7))
        elif kind == "cut":
            del out[where:]
        elif kind == "splice":
            out[where:where] = draw(st.binary(min_size=1, max_size=8))
    return bytes(out)


def outcome(function, *args) -> object:
    try:
        return function(*args)
    except Exception as e:  # noqa: BLE001 - any exception is an outcome to compare
        return type(e), str(e)


def a_map(draw: st.DrawFn) -> dict[bytes, int]:
    return {hashlib.md5(key).digest(): draw(st.integers(-1, 40))
            for key in draw(st.lists(st.sampled_from(KEYS[1:]), unique=True))}


def assert_alike(data: bytes, count: int, base_offset: int, draw: st.DrawFn) -> None:
    start_offset = draw(st.integers(-1, 45))
    max_size = draw(st.integers(0, 12))
    initial = a_map(draw)
    by_c, by_python = dict(initial), dict(initial)
    args = (data, 3, 3 + len(data) - 6, count, base_offset)
    assert (outcome(put_records, *args, start_offset, by_c, max_size)
            == outcome(_python_put_records, *args, start_offset, by_python, max_size))
    assert list(by_c.items()) == list(by_python.items())
    latest, keep_tombstones = draw(st.integers(-1, 45)), draw(st.booleans())
    assert (outcome(retained, *args, initial, latest, keep_tombstones)
            == outcome(_python_retained, *args, initial, latest, keep_tombstones))


@compiled
@settings(max_examples=600, deadline=None)
@given(record_sets(), st.integers(0, 30), st.data())
def test_valid_records_map_and_filter_alike(records: tuple[bytes, int], base_offset: int,
                                            data: st.DataObject) -> None:
    payload, count = records
    assert_alike(b"pre" + payload + b"end", count, base_offset, data.draw)


@compiled
@settings(max_examples=800, deadline=None)
@given(record_sets(), st.integers(-2, 2), st.data())
def test_broken_records_and_wrong_counts_raise_alike(records: tuple[bytes, int], count_error: int,
                                                     data: st.DataObject) -> None:
    payload, count = records
    assert_alike(b"pre" + data.draw(broken(payload)) + b"end", count + count_error, 7, data.draw)


LONG = st.integers(-(2**63), 2**63 - 1)


@compiled
@settings(max_examples=800, deadline=None)
@given(record_sets(), st.data())
def test_kept_records_are_re_encoded_alike(records: tuple[bytes, int], data: st.DataObject) -> None:
    payload, count = records
    if not count:
        return
    flags = bytes(data.draw(st.lists(st.integers(0, 1), min_size=count, max_size=count)))
    if not any(flags):
        flags = b"\x01" + flags[1:]
    near = st.integers(-(2**41), 2**41).map(lambda t: 1_700_000_000_000 + t)
    any_long = data.draw(st.booleans())
    args = (b"pre" + payload + b"end", 3, 3 + len(payload), count, flags, data.draw(LONG if any_long else near),
            data.draw(st.none() | near), data.draw(st.none() | near))
    got = rewrite(*args)
    # None (the Python answering, as it always has) only where a timestamp may leave Java's long.
    assert got == _python_rewrite(*args) or (got is None and any_long)


@compiled
def test_the_map_holds_the_md5_digest_of_each_key() -> None:
    keys = [bytes(range(n % 256)) * (1 + n // 256) for n in range(0, 300, 7)]
    data = b"".join(record(i, b"v", key=key) for i, key in enumerate(keys))
    offsets: dict[bytes, int] = {}
    assert put_records(data, 0, len(data), len(keys), 100, 0, offsets, 1000) == (False, 100 + len(keys) - 1)
    assert offsets == {hashlib.md5(key).digest(): 100 + i for i, key in enumerate(keys)}


def keyed_batch(base_offset: int, keys: list[bytes | None], values: list[bytes | None] | None = None,
                codec: int = 0) -> bytes:
    values = values or [b"v%d" % (base_offset + i) for i in range(len(keys))]
    records = [record(i, value, key=key, timestamp_delta=i) for i, (key, value) in enumerate(zip(keys, values,
                                                                                                 strict=True))]
    return batch(records,
                 base_offset=base_offset, base_timestamp=NOW - 1000, max_timestamp=NOW - 1000 + len(keys) - 1,
                 codec=codec)


def cleaned(log: bytes, now: int = NOW) -> bytes:
    offset_map = OffsetMap(1 << 20)
    build_offset_map(log, offset_map, 0, [])
    return filter_batches(log, offset_map, CleanedTransactionMetadata([]), {}, now, RETENTION).output


@pytest.mark.parametrize("codec", [0, 1, 3, 4])
@pytest.mark.usefixtures("record_walk")
def test_a_batch_kept_whole_is_copied_and_one_that_loses_records_rewritten(codec: int) -> None:
    kept = keyed_batch(3, [b"c", b"d", b"e"], codec=codec)
    log = keyed_batch(0, [b"a", b"b", b"c"], codec=codec) + kept + keyed_batch(6, [b"a", None, b"f"], codec=codec)
    out = cleaned(log)
    batches = [(h.base_offset, out[pos : pos + h.size]) for pos, h in iter_batches(out)]
    assert [base for base, _ in batches] == [0, 3, 6]
    assert batches[1][1] == kept  # every record stays: the batch is copied byte for byte
    rewritten = batches[0][1]  # only b"b" stays, at its offset; the batch keeps its last offset delta
    [(pos, header)] = list(iter_batches(rewritten))
    assert batch_crc_ok(rewritten, pos, header)
    assert (header.records_count, header.last_offset_delta, header.base_timestamp) == (1, 2, NOW - 1000 + 1)
    if codec == 0:
        assert rewritten[HEADER_SIZE:] == record(1, b"v1", key=b"b", timestamp_delta=0)
    # The keyless record goes (Kafka's cleaner drops what it cannot key), the others of the last batch stay.
    assert iter_batches(batches[2][1]).__next__()[1].records_count == 2


def test_both_record_walks_clean_to_the_same_bytes(monkeypatch) -> None:
    if put_records is None:
        pytest.skip("the compiled record codec (protocol/_record_codec.c) is not built")
    log = b"".join(keyed_batch(base, [b"k%d" % ((base + i) * 7 % 13) if (base + i) % 11 else None
                                      for i in range(10)],
                               [None if (base + i) % 5 == 0 else b"x" * (base + i) for i in range(10)],
                               codec=base // 10 % 2 * 3)
                   for base in range(0, 200, 10))
    outputs = []
    for walk in ((put_records, retained, rewrite), (_python_put_records, _python_retained, _python_rewrite)):
        monkeypatch.setattr(log_cleaner, "_put_records", walk[0])
        monkeypatch.setattr(log_cleaner, "_retained", walk[1])
        monkeypatch.setattr(log_cleaner, "_rewrite", walk[2])
        first = cleaned(log)  # tombstones stay and get their delete horizon
        outputs.append((first, cleaned(first, NOW + RETENTION + 1)))  # past it they go
    assert outputs[0] == outputs[1]
    assert len(outputs[0][1]) < len(outputs[0][0]) < len(log)
