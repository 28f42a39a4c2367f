"""A TLS connection on trio, Python's `ssl` over memory BIOs, that decrypts everything that has arrived in one read.

trio's SSLStream returns one TLS record per receive_some, and Kafka clients write small records: librdkafka writes
one per message of a produce request, so a 1 MB request comes as hundreds of 1-2 KB records, and a receive per
record costs more than the decryption (a TLS listener took produce at a tenth of the plaintext rate). Here a read
takes what the socket holds and decrypts all of it before returning, as Kafka's SslTransportLayer fills its
application buffer. Outgoing data is encrypted in slices, each written before the next, so a large response is
never held twice.

Either end of a connection: a listener's (server side) or the broker's own to another node (client side, with the
server's host name to check). One task may receive while another sends (a client's response reader and its
requests): encrypted bytes go to the socket under a lock, in the order TLS made them, whichever task wrote them.
A TLS error (a bad handshake, plaintext bytes, a corrupt record) is a BrokenResourceError carrying it as the cause.
"""
from __future__ import annotations

import ssl
from typing import Any

import trio

RECEIVE_BYTES = 1 << 18  # read from the socket at once
WRITE_SLICE_BYTES = 1 << 18  # encrypted and sent at once
CLOSE_TIMEOUT_S = 1.0  # for close_notify to go out


class TlsStream(trio.abc.Stream):
    def __init__(self, transport: trio.SocketStream, context: ssl.SSLContext, *, server_side: bool = True,
                 server_hostname: str | None = None) -> None:
        self.transport = transport
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._ssl = context.wrap_bio(self._incoming, self._outgoing, server_side=server_side,
                                     server_hostname=server_hostname)
        self._eof = False
        self._sending = trio.StrictFIFOLock()  # what TLS wrote goes to the socket in order, one send at a time

    def getpeercert(self, binary_form: bool = False) -> Any:
        """The peer's certificate, as ssl.SSLObject.getpeercert gives it."""
        return self._ssl.getpeercert(binary_form)

    def version(self) -> str | None:
        return self._ssl.version()

    async def do_handshake(self) -> None:
        while True:
            try:
                self._ssl.do_handshake()
            except ssl.SSLWantReadError:
                await self._flush()
                if not await self._fill():
                    raise trio.BrokenResourceError("the peer closed the connection during the TLS handshake") \
                        from None
                continue
            except ssl.SSLError as exc:
                await self._flush_quietly()  # the alert that tells the peer why
                raise trio.BrokenResourceError(str(exc)) from exc
            await self._flush()
            return

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        """What the peer sent since the last call, decrypted: at least a byte, or b"" once it has closed."""
        limit = max_bytes or RECEIVE_BYTES
        while True:
            # Records are decrypted into one buffer: a read per record, no allocation per record.
            buffer = bytearray(limit)
            size = 0
            with memoryview(buffer) as view:
                try:
                    while size < limit:
                        # given a buffer, read returns a count (typeshed says bytes)
                        count: int = self._ssl.read(limit - size, view[size:])  # type: ignore[assignment]
                        if not count:
                            self._eof = True
                            break
                        size += count
                except ssl.SSLWantReadError:
                    pass
                except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                    self._eof = True
                except ssl.SSLError as exc:
                    raise trio.BrokenResourceError(str(exc)) from exc
            if self._outgoing.pending:  # TLS 1.3 post-handshake messages
                await self._flush()
            if size:
                del buffer[size:]
                return buffer
            if self._eof or not await self._fill():
                return b""

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        view = memoryview(data)
        for start in range(0, len(view), WRITE_SLICE_BYTES):
            try:
                self._ssl.write(view[start:start + WRITE_SLICE_BYTES])
            except ssl.SSLError as exc:
                raise trio.BrokenResourceError(str(exc)) from exc
            await self._flush()

    async def wait_send_all_might_not_block(self) -> None:
        await self.transport.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        """Send close_notify (for at most CLOSE_TIMEOUT_S; the peer's is not waited for) and close the socket."""
        try:
            self._ssl.unwrap()
        except ssl.SSLError:
            pass  # SSLWantReadError: the peer's close_notify, not waited for
        with trio.move_on_after(CLOSE_TIMEOUT_S):
            await self._flush_quietly()
        await self.transport.aclose()

    async def _fill(self) -> bool:
        """Read from the socket into the TLS layer; False at the end of the stream."""
        data = await self.transport.receive_some(RECEIVE_BYTES)
        if not data:
            self._incoming.write_eof()
            self._eof = True
            return False
        self._incoming.write(data)
        return True

    async def _flush(self) -> None:
        """Send what TLS has written. The lock is taken without a checkpoint when free (the usual case: one task at
        a time), so a connection used by one task pays nothing for it."""
        try:
            self._sending.acquire_nowait()
        except trio.WouldBlock:
            await self._sending.acquire()
        try:
            data = self._outgoing.read()
            if data:
                await self.transport.send_all(data)
        finally:
            self._sending.release()

    async def _flush_quietly(self) -> None:
        try:
            await self._flush()
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
