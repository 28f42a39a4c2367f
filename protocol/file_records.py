"""A slice of a segment file that a response carries as is (Kafka's FileRecords slice): sent with sendfile from
the file to the socket, never copied through Python.

The slice owns a duplicate of the file's descriptor, so the file stays readable while the slice is waiting to be
sent, whatever happens to the segment meanwhile: retention or topic deletion unlinking it, the log closing it. Its
size is fixed when it is read; a file truncated under it (a leader becoming a follower) can no longer give that
many bytes, which the sender must treat as a failed write of the whole connection, as Kafka does.
"""
from __future__ import annotations

import os
import weakref


class TruncatedFileError(Exception):
    """The file ends before the slice does: it was truncated after the slice was taken."""


class FileRecords:
    """`size` bytes of an open file from `position`."""

    __slots__ = ("__weakref__", "_close", "fd", "position", "size")

    def __init__(self, fd: int, position: int, size: int) -> None:
        """Takes a duplicate of `fd`, closed by `close()` or when the slice is dropped."""
        self.fd = os.dup(fd)
        self._close = weakref.finalize(self, os.close, self.fd)
        self.position = position
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        return f"FileRecords(fd={self.fd}, position={self.position}, size={self.size})"

    def read(self, offset: int = 0, length: int | None = None) -> bytes:
        """The slice's bytes from `offset` in it (all of the rest by default); raises TruncatedFileError if the
        file no longer holds them."""
        length = self.size - offset if length is None else length
        parts = []
        got = 0
        while got < length:
            data = os.pread(self.fd, length - got, self.position + offset + got)
            if not data:
                raise TruncatedFileError(f"file ends {length - got} bytes before the end of {self!r}")
            parts.append(data)
            got += len(data)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def close(self) -> None:
        self._close()
