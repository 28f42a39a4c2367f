"""Writing a response's pieces to a connection: bytes with send_all, file slices with sendfile (Kafka's
TransferableRecords.writeTo), so record bytes go from the page cache to the socket without passing through Python.

sendfile runs on the connection's non-blocking socket and waits for writability when the socket buffer is full,
as trio's own send_all does. Where sendfile cannot serve (a stream that is not a plain socket, a platform without
it, a file or socket it refuses with EINVAL and the like) the rest of the slice is read and sent as bytes. A slice
whose file was truncated after it was read can no longer be sent whole: the frame would be malformed, so the
connection is given up (TruncatedFileError), as Kafka closes a channel whose FileRecords shrank during a write.
Small slices are read and sent with the bytes around them: one write costs less than a sendfile between two.
"""
from __future__ import annotations

import errno
import os

import trio

from minikafka.protocol.codec import Records
from minikafka.protocol.file_records import FileRecords, TruncatedFileError

# Slices smaller than this are copied into the write of the bytes around them.
SENDFILE_MIN_BYTES = 1 << 14
# The fallback's reads, each sent before the next is made.
COPY_CHUNK_BYTES = 1 << 18
# sendfile errors that mean "not for this file or socket" rather than a broken connection.
COPY_INSTEAD_ERRNOS = frozenset({errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSOCK, errno.ESPIPE,
                                 errno.EOVERFLOW})


async def send_pieces(stream: trio.abc.SendStream, pieces: list[Records]) -> None:
    """Write `pieces` in order, adjacent bytes (and small slices) in one write; every slice is closed after."""
    try:
        pending: list[bytes] = []
        for piece in pieces:
            if not isinstance(piece, FileRecords):
                pending.append(piece)
            elif piece.size < SENDFILE_MIN_BYTES:
                pending.append(piece.read())
            else:
                if pending:
                    await stream.send_all(pending[0] if len(pending) == 1 else b"".join(pending))
                    pending = []
                await send_file_records(stream, piece)
        if pending:
            await stream.send_all(pending[0] if len(pending) == 1 else b"".join(pending))
    finally:
        for piece in pieces:
            if isinstance(piece, FileRecords):
                piece.close()


async def send_file_records(stream: trio.abc.SendStream, records: FileRecords) -> None:
    """Write the whole slice: with sendfile where the stream is a socket that takes it, else by copying."""
    sent = 0
    if isinstance(stream, trio.SocketStream) and hasattr(os, "sendfile"):
        sent = await _sendfile(stream.socket, records)
    while sent < records.size:
        chunk = records.read(sent, min(COPY_CHUNK_BYTES, records.size - sent))
        await stream.send_all(chunk)
        sent += len(chunk)


async def _sendfile(sock: trio.socket.SocketType, records: FileRecords) -> int:
    """Bytes of the slice sent with sendfile: all of it, unless sendfile refused the file or socket. Each call is a
    checkpoint, as each send of trio's send_all is: a reader that keeps up does not hold the other connections."""
    sent = 0
    while sent < records.size:
        await trio.lowlevel.checkpoint()
        out = sock.fileno()
        if out < 0:
            raise trio.ClosedResourceError("the connection was closed while a response was being written")
        try:
            count = os.sendfile(out, records.fd, records.position + sent, records.size - sent)
        except BlockingIOError:
            await trio.lowlevel.wait_writable(sock)
            continue
        except ConnectionError as exc:
            raise trio.BrokenResourceError(f"the connection broke while a response was being written: {exc}") \
                from exc
        except OSError as exc:
            if exc.errno in COPY_INSTEAD_ERRNOS:
                return sent
            raise
        if count == 0:
            raise TruncatedFileError(f"file ends {records.size - sent} bytes before the end of {records!r}")
        sent += count
    return sent
