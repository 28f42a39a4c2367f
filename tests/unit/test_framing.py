import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minikafka.protocol.framing import FrameDecoder, FrameError, frame


def test_frames_split_across_reads_come_out_whole_and_in_order():
    payloads = [b"a" * 10, b"", b"bc" * 1000, b"z"]
    stream = b"".join(frame(p) for p in payloads)
    decoder = FrameDecoder(1 << 20)
    out = []
    for i in range(0, len(stream), 7):
        out += decoder.feed(stream[i:i + 7])
    assert out == payloads
    assert decoder.pending == 0


def test_oversize_frame_is_refused_before_its_body_arrives():
    decoder = FrameDecoder(100)
    with pytest.raises(FrameError, match="socket.request.max.bytes"):
        decoder.feed(struct.pack(">i", 101))


def test_negative_size_is_refused():
    with pytest.raises(FrameError):
        FrameDecoder(100).feed(struct.pack(">i", -5))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=64), max_size=20))
def test_random_bytes_either_frame_or_raise_frame_error(chunks):
    decoder = FrameDecoder(1000)
    try:
        for chunk in chunks:
            for f in decoder.feed(chunk):
                assert len(f) <= 1000
    except FrameError:
        pass


def test_frame_of_several_pieces_is_the_frame_of_their_join():
    assert frame(b"ab", b"", b"cde") == frame(b"abcde") == struct.pack(">i", 5) + b"abcde"
    assert frame() == struct.pack(">i", 0)
    assert FrameDecoder(10).feed(frame(b"x", b"yz")) == [b"xyz"]
