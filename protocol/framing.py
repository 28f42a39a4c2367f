"""Kafka's size-prefixed framing as a sans-IO state machine: feed bytes in, take whole frames out."""
import struct

_SIZE = struct.Struct(">i")


class FrameError(Exception):
    """The byte stream cannot be framed; Kafka closes the connection on this."""


class FrameDecoder:
    """Splits a byte stream into frames of at most `max_size` bytes (socket.request.max.bytes for requests)."""

    def __init__(self, max_size: int, limit_name: str = "socket.request.max.bytes") -> None:
        self._max_size = max_size
        self._limit_name = limit_name
        self._buffer = bytearray()
        self._need: int | None = None

    def feed(self, data: bytes | bytearray) -> list[bytes]:
        """Add received bytes; return every frame now complete, in order."""
        self.append(data)
        frames = []
        while (complete := self.next_frame()) is not None:
            frames.append(complete)
        return frames

    def limit(self, max_size: int, limit_name: str) -> None:
        """Frames not yet begun may be at most `max_size` bytes, the property `limit_name` (a SASL connection's
        frames are bounded by sasl.server.max.receive.size until it has authenticated)."""
        self._max_size = max_size
        self._limit_name = limit_name

    def append(self, data: bytes | bytearray) -> None:
        """Add received bytes, to be taken one frame at a time with `next_frame` (a server splits a read of many
        pipelined requests only as it answers them)."""
        self._buffer += data

    def next_frame(self) -> bytes | None:
        """The next complete frame, or None until more bytes come."""
        if self._need is None:
            if len(self._buffer) < 4:
                return None
            (size,) = _SIZE.unpack_from(self._buffer, 0)
            if size < 0:
                raise FrameError(f"negative frame size {size}")
            if size > self._max_size:
                raise FrameError(f"frame of {size} bytes is larger than {self._limit_name} ({self._max_size})")
            self._need = size
            del self._buffer[:4]
        if len(self._buffer) < self._need:
            return None
        whole = bytes(self._buffer[:self._need])
        del self._buffer[:self._need]
        self._need = None
        return whole

    @property
    def has_frame(self) -> bool:
        """Whether a whole frame is buffered: the next `next_frame` returns one."""
        if self._need is not None:
            return len(self._buffer) >= self._need
        return len(self._buffer) >= 4 and len(self._buffer) - 4 >= max(0, _SIZE.unpack_from(self._buffer, 0)[0])

    @property
    def pending(self) -> int:
        """Bytes received that are not yet part of a whole frame."""
        return len(self._buffer) + (4 if self._need is not None else 0)


def frame(*pieces: bytes) -> bytes:
    """One frame: the size of the pieces together, then the pieces (joined once, however many there are)."""
    return b"".join([_SIZE.pack(sum(len(piece) for piece in pieces)), *pieces])
