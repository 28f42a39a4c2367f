"""What injected faults do to the way a response travels: written after the next pipelined response (reordered),
at a bandwidth (bytes per second), or cut off with its connection once a connection's byte budget is spent, and
a Fetch response's records cut short.

The fault injector (broker/faults) decides, per request, which of these apply and leaves them on the connection
(`ConnectionInfo.response_faults`); the socket server carries them out when it writes the response. Each effect
reports back through a callback once it has actually happened, which is what the fault's `hits` count.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import trio

from minikafka.protocol.codec import Records

# A paced write sends at most this share of a second's bytes at a time.
PACING_STEPS_PER_S = 20


class ConnectionCut(Exception):
    """A connection's byte budget is spent: close it, the response cut off where the budget ended."""


@dataclass
class ByteBudget:
    """The response bytes a connection may still be written before it is closed."""

    remaining: int
    on_spent: Callable[[], None]  # told once, when the connection is closed for it


@dataclass
class ResponseFaults:
    """The faults on the response to the request being answered on one connection."""

    on_reordered: Callable[[], None] | None = None  # set: written after the next pipelined response, if there is one
    bytes_per_s: int | None = None  # set: written at this bandwidth
    budget: ByteBudget | None = None  # set: the connection is closed once this many response bytes are written
    # Set: the Fetch response's record bytes go through it (the last batch cut short).
    cut_records: Callable[[Records], Records] | None = None

    @property
    def shapes_writes(self) -> bool:
        return self.bytes_per_s is not None or self.budget is not None


class ShapedSendStream(trio.abc.SendStream):
    """A connection's send side with a bandwidth and a byte budget: paced writes, and ConnectionCut after writing
    exactly the budget's last byte."""

    def __init__(self, stream: trio.abc.SendStream, faults: ResponseFaults) -> None:
        self._stream = stream
        self._faults = faults

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        view = memoryview(data)
        budget = self._faults.budget
        cut = budget is not None and budget.remaining <= len(view)
        if budget is not None:
            view = view[:budget.remaining]
            budget.remaining -= len(view)
        rate = self._faults.bytes_per_s
        if rate is None:
            await self._stream.send_all(view)
        else:
            step = max(1, rate // PACING_STEPS_PER_S)
            for start in range(0, len(view), step):
                chunk = view[start:start + step]
                await trio.sleep(len(chunk) / rate)  # the time the chunk takes at the rate, before it arrives
                await self._stream.send_all(chunk)
        if cut:
            assert budget is not None
            budget.on_spent()
            raise ConnectionCut("closed after the fault's byte budget of response bytes was written")

    async def wait_send_all_might_not_block(self) -> None:
        await self._stream.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        await self._stream.aclose()
