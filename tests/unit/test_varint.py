import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.schemas.fields.codecs.types import UnsignedVarInt32

from minikafka.protocol.varint import MAX_UVARINT, VarintError, encode_uvarint, read_uvarint


@pytest.mark.parametrize(("value", "encoded"), [(0, b"\x00"), (1, b"\x01"), (127, b"\x7f"), (128, b"\x80\x01"),
                                                (300, b"\xac\x02"), (MAX_UVARINT, b"\xff\xff\xff\xff\x0f")])
def test_known_encodings(value, encoded):
    assert encode_uvarint(value) == encoded
    assert read_uvarint(b"\xaa" + encoded + b"\xbb", 1) == (value, 1 + len(encoded))


@settings(max_examples=300, deadline=None)
@given(st.integers(0, MAX_UVARINT))
def test_round_trip_and_agreement_with_kafka_python(value):
    encoded = encode_uvarint(value)
    assert encoded == UnsignedVarInt32.encode(value)
    assert read_uvarint(encoded) == (value, len(encoded))


@pytest.mark.parametrize("value", [-1, MAX_UVARINT + 1])
def test_values_outside_32_unsigned_bits_are_refused(value):
    with pytest.raises(ValueError):
        encode_uvarint(value)


@pytest.mark.parametrize("data", [b"", b"\x80", b"\xff\xff", b"\x80" * 5, b"\xff" * 5 + b"\x01"])
def test_cut_short_or_longer_than_five_bytes_is_malformed(data):
    with pytest.raises(VarintError):
        read_uvarint(data)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=8), st.integers(0, 8))
def test_any_bytes_read_as_a_varint_or_raise_varint_error(data, pos):
    try:
        value, end = read_uvarint(data, pos)
    except VarintError:
        return
    assert pos < end <= min(len(data), pos + 5) and 0 <= value < 1 << 35
