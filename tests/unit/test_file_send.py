"""Writing responses whose records are file slices: sendfile on the connection's socket, the copy where sendfile
cannot serve, slow and vanishing readers, and files deleted or truncated under a slice."""
from __future__ import annotations

import errno
import os
import socket
import struct
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
import trio
import trio.testing

from minikafka.broker.network import file_send
from minikafka.broker.network.file_send import send_pieces
from minikafka.broker.network.socket_server import SocketServer
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.codec import (
    SCHEMAS,
    RecordsSend,
    RecordsSplicer,
    Response,
    encode_response,
    encode_response_send,
)
from minikafka.protocol.file_records import FileRecords, TruncatedFileError
from minikafka.protocol.framing import FrameDecoder, frame
from minikafka.storage.log import Log
from minikafka.storage.log_config import LogConfig

from .test_storage_log import NOW, TOPIC_ID, make_batch

TIMEOUT_S = 30
LOOPBACK = "127.0.0.1"
DATA = os.urandom(3 << 20)  # far more than a socket buffer holds


@pytest.fixture
def data_file(tmp_path: Path):
    """An open file holding DATA, closed after the test."""
    path = tmp_path / "segment.log"
    path.write_bytes(DATA)
    fd = os.open(path, os.O_RDONLY)
    yield path, fd
    os.close(fd)


def _socket_pair() -> tuple[trio.SocketStream, socket.socket]:
    """A connection's stream (the broker's end) and a blocking socket for the client's end."""
    ours, theirs = socket.socketpair()
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 16)
    theirs.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 16)
    return trio.SocketStream(trio.socket.from_stdlib_socket(ours)), theirs


def _read_all(sock: socket.socket, size: int, chunk: int) -> bytes:
    """What the client reads, `chunk` bytes at a time (small chunks: a slow reader), until `size` or EOF."""
    parts = []
    got = 0
    while got < size:
        data = sock.recv(min(chunk, size - got))
        if not data:
            break
        parts.append(data)
        got += len(data)
    return b"".join(parts)


async def _send_and_read(pieces: list, size: int, chunk: int = 4096) -> bytes:
    """What a client reading up to `size` bytes gets; the connection is closed once the write ends or fails."""
    stream, client = _socket_pair()
    received: list[bytes] = []

    async def read() -> None:
        received.append(await trio.to_thread.run_sync(_read_all, client, size, chunk))

    failure: list[Exception] = []
    with trio.fail_after(TIMEOUT_S), client:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(read)
            async with stream:
                try:
                    await send_pieces(stream, pieces)
                except Exception as exc:  # noqa: BLE001 - raised as itself once the reader is done
                    failure.append(exc)
    if failure:
        raise failure[0]
    return received[0]


def _counting_sendfile(monkeypatch: pytest.MonkeyPatch, fail: Callable[[int], OSError | None] = lambda _: None,
                       most: int = 1 << 30) -> list[int]:
    """Patch os.sendfile to record each call's result; `fail(call number)` may make a call raise instead, and no
    call sends more than `most` bytes."""
    calls: list[int] = []
    real = os.sendfile

    def sendfile(out_fd: int, in_fd: int, offset: int, count: int) -> int:
        error = fail(len(calls))
        if error is not None:
            calls.append(-1)
            raise error
        sent = real(out_fd, in_fd, offset, min(count, most))
        calls.append(sent)
        return sent

    monkeypatch.setattr(os, "sendfile", sendfile)
    return calls


def test_a_slice_larger_than_the_socket_buffer_goes_by_sendfile_to_a_slow_reader(data_file, monkeypatch) -> None:
    _, fd = data_file
    calls = _counting_sendfile(monkeypatch)
    records = FileRecords(fd, 1000, len(DATA) - 2000)
    pieces = [b"head", records, b"tail"]
    received = trio.run(_send_and_read, pieces, 8 + records.size, 1000)
    assert received == b"head" + DATA[1000:-1000] + b"tail"
    assert sum(calls) == records.size  # all of it by sendfile


def test_sendfile_refused_falls_back_to_a_copy(data_file, monkeypatch) -> None:
    _, fd = data_file
    calls = _counting_sendfile(monkeypatch, lambda n: OSError(errno.EINVAL, "no") if n == 0 else None)
    records = FileRecords(fd, 0, len(DATA))
    assert trio.run(_send_and_read, [records], len(DATA)) == DATA
    assert calls == [-1]


def test_sendfile_refused_midway_is_finished_by_a_copy(data_file, monkeypatch) -> None:
    _, fd = data_file
    calls = _counting_sendfile(monkeypatch, lambda n: OSError(errno.EINVAL, "no") if n == 1 else None, 100_000)
    records = FileRecords(fd, 7, len(DATA) - 7)
    assert trio.run(_send_and_read, [b"x", records], len(DATA) - 6) == b"x" + DATA[7:]
    assert 0 < calls[0] < records.size and calls[1:] == [-1]


def test_a_stream_that_is_not_a_socket_gets_a_copy(data_file) -> None:
    _, fd = data_file
    records = FileRecords(fd, 5, 100_000)

    async def main() -> bytes:
        send, receive = trio.testing.memory_stream_pair()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(send_pieces, send, [b"a", records, b"b"])
            got = b""
            with trio.fail_after(TIMEOUT_S):
                while len(got) < 100_002:
                    got += await receive.receive_some()
        return got

    assert trio.run(main) == b"a" + DATA[5:100_005] + b"b"


def test_small_slices_are_written_with_the_bytes_around_them(data_file, monkeypatch) -> None:
    _, fd = data_file
    calls = _counting_sendfile(monkeypatch)
    pieces = [b"1", FileRecords(fd, 0, 100), b"2", FileRecords(fd, 200, 300), b"3"]
    assert trio.run(_send_and_read, pieces, 403) == b"1" + DATA[:100] + b"2" + DATA[200:500] + b"3"
    assert calls == []


def test_a_client_closing_midway_breaks_the_write_and_releases_the_slice(data_file) -> None:
    _, fd = data_file
    records = FileRecords(fd, 0, len(DATA))

    def read_some_then_close(client: socket.socket) -> None:
        with client:
            _read_all(client, 100_000, 4096)

    async def main() -> None:
        stream, client = _socket_pair()
        with trio.fail_after(TIMEOUT_S):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(trio.to_thread.run_sync, read_some_then_close, client)
                async with stream:
                    with pytest.raises(trio.BrokenResourceError):
                        await send_pieces(stream, [b"head", records])

    trio.run(main)
    with pytest.raises(OSError):
        records.read(0, 1)  # its descriptor is closed


def test_a_slice_outlives_its_file_being_deleted_and_closed(tmp_path: Path) -> None:
    path = tmp_path / "doomed.log"
    path.write_bytes(DATA)
    fd = os.open(path, os.O_RDONLY)
    records = FileRecords(fd, 10, len(DATA) - 10)
    os.close(fd)
    path.unlink()
    assert trio.run(_send_and_read, [records], records.size) == DATA[10:]


@pytest.mark.parametrize("sendfile", [True, False], ids=["sendfile", "copy"])
def test_a_file_truncated_under_a_slice_fails_the_write(data_file, monkeypatch, sendfile: bool) -> None:
    path, fd = data_file
    if not sendfile:
        _counting_sendfile(monkeypatch, lambda _: OSError(errno.EINVAL, "no"))
    records = FileRecords(fd, 0, len(DATA))
    os.truncate(path, len(DATA) // 2)

    with pytest.raises(TruncatedFileError):
        trio.run(_send_and_read, [records], len(DATA))


def _log(tmp_path: Path) -> Log:
    config = LogConfig.from_props({"internal.segment.bytes": "200000", "retention.ms": "1000"})
    return Log.open(tmp_path / "topic-0", "topic", 0, config, topic_id=TOPIC_ID, now_ms=NOW)


def test_retention_deleting_the_segment_of_a_fetch_being_sent_does_not_change_its_bytes(tmp_path: Path) -> None:
    log = _log(tmp_path)
    for _ in range(30):
        log.append_as_leader(make_batch(200, value_size=100), 0, NOW)
    expected = log.read(0, 1 << 20)
    records = log.read_records(0, 1 << 20)
    assert isinstance(records, FileRecords) and records.size == len(expected)
    assert log.delete_old_segments(NOW + 10_000, high_watermark=log.log_end_offset) > 0
    assert not (tmp_path / "topic-0" / "00000000000000000000.log").exists()
    log.close()
    assert trio.run(_send_and_read, [records], records.size) == expected


def test_topic_deletion_under_a_fetch_being_sent_does_not_change_its_bytes(tmp_path: Path) -> None:
    log = _log(tmp_path)
    for _ in range(5):
        log.append_as_leader(make_batch(20, value_size=100), 0, NOW)
    expected = log.read(0, 1 << 20)
    records = log.read_records(0, 1 << 20)
    log.close()
    log.delete()
    assert trio.run(_send_and_read, [records], len(expected)) == expected


def test_follower_truncation_under_a_fetch_being_sent_fails_it_instead_of_sending_other_bytes(tmp_path: Path) -> None:
    log = _log(tmp_path)
    for _ in range(5):
        log.append_as_leader(make_batch(200, value_size=100), 0, NOW)
    records = log.read_records(0, 1 << 20)
    assert isinstance(records, FileRecords) and records.size > file_send.SENDFILE_MIN_BYTES
    log.truncate_to(1)
    with pytest.raises(TruncatedFileError):
        trio.run(_send_and_read, [records], records.size)
    log.close()


async def test_the_server_writes_responses_with_file_slices_over_tcp_and_closes_a_connection_whose_file_shrank(
        data_file) -> None:
    path, fd = data_file
    cut_path = path.with_name("cut.log")
    cut_path.write_bytes(DATA)
    cut_fd = os.open(cut_path, os.O_RDONLY)

    async def process(request: bytes, _info) -> Response:
        if request == b"\x00\x01file":
            records = FileRecords(fd, 100, len(DATA) - 100)
            return RecordsSend([struct.pack(">i", 4 + records.size) + b"head", records])
        if request == b"\x00\x01cut":
            response = RecordsSend([struct.pack(">i", len(DATA)), FileRecords(cut_fd, 0, len(DATA))])
            os.truncate(cut_path, 1000)
            return response
        return frame(b"plain")

    async def exchange(port: int, *requests: bytes) -> list[bytes | None]:
        client = await trio.open_tcp_stream(LOOPBACK, port)
        async with client:
            await client.send_all(b"".join(frame(request) for request in requests))
            decoder = FrameDecoder(1 << 30)
            frames: list[bytes | None] = []
            while len(frames) < len(requests) and (data := await client.receive_some(1 << 16)):
                frames.extend(decoder.feed(data))
            return frames + [None] * (len(requests) - len(frames))

    try:
        server = SocketServer(process, 1 << 20, 60)
        with trio.fail_after(TIMEOUT_S):
            async with trio.open_nursery() as nursery:
                listeners = await trio.open_tcp_listeners(0, host=LOOPBACK)
                nursery.start_soon(server.serve, "PLAINTEXT", listeners)
                port = listeners[0].socket.getsockname()[1]
                assert await exchange(port, b"\x00\x01ok", b"\x00\x01file", b"\x00\x01ok") == [
                    b"plain", b"head" + DATA[100:], b"plain"]
                assert await exchange(port, b"\x00\x01ok", b"\x00\x01cut", b"\x00\x01ok") == [b"plain", None, None]
                assert await exchange(port, b"\x00\x01ok") == [b"plain"]
                nursery.cancel_scope.cancel()
    finally:
        os.close(cut_fd)


@pytest.mark.parametrize("version", [4, 12, 16])
def test_a_response_with_file_slices_frames_as_the_same_response_with_bytes(data_file, version: int) -> None:
    _, fd = data_file
    schema = SCHEMAS[ApiKey.FETCH]
    R = schema.response[version]
    PD = R.FetchableTopicResponse.PartitionData
    slices = [(0, 300), (1000, 200_000), (500, 17)]
    topic_id = uuid.uuid4()

    def response(records_of):
        parts = [PD(partition_index=i, error_code=0, high_watermark=10, last_stable_offset=10, log_start_offset=0,
                    aborted_transactions=None, preferred_read_replica=-1, records=records_of(position, size))
                 for i, (position, size) in enumerate(slices)]
        topic = R.FetchableTopicResponse(topic="t" if version < 13 else None,
                                         topic_id=topic_id if version >= 13 else None, partitions=parts)
        return R(throttle_time_ms=0, error_code=0, session_id=0, responses=[topic])

    splicer = RecordsSplicer()
    expected = response(lambda position, size: DATA[position:position + size])
    sent = encode_response_send(schema, version, 9, response(
        lambda position, size: splicer.stand_in(FileRecords(fd, position, size))), splicer)
    assert isinstance(sent, RecordsSend) and sum(isinstance(p, FileRecords) for p in sent.pieces) == len(slices)
    assert bytes(sent) == encode_response(schema, version, 9, expected)
    assert len(sent) == len(bytes(sent)) and int.from_bytes(bytes(sent)[:4], "big") == len(sent) - 4
