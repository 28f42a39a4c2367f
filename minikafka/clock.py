"""Virtual time for tests: the manual clock of a broker (`Broker(clock="manual").clock`) or of every node of a
cluster together (`Cluster(clock="manual").clock`).

    with minikafka.Broker(clock="manual") as broker:
        ...                                   # a consumer joins a group, then stops heartbeating
        broker.clock.advance(45_000)          # its session timeout passes: it is out of the group
        broker.clock.now()                    # the broker's wall clock, in ms since the epoch

A manual clock runs at the real rate, and `advance(ms)` makes it jump forwards: every broker timer due within the
jump (session and rebalance timeouts, transaction timeouts, retention and segment.ms checks, long polls, quota
windows, replica lag) fires at once, and the timestamps the broker assigns (LogAppendTime, its coordinators' records)
come from the moved clock. `advance` returns once the broker has run what became due and gone idle. Client-side
timers stay real. See docs/virtual-time.md for which behaviours follow the clock.
"""
from __future__ import annotations

from collections.abc import Callable

from minikafka.control_client import ControlClient


class Clock:
    """The manual clock of one node, or of several moved together (a cluster's, controller first)."""

    def __init__(self, controls: Callable[[], list[ControlClient]]) -> None:
        self._controls = controls

    def advance(self, ms: int) -> int:
        """Move the clock forwards by `ms` milliseconds, on every node, and return the (first) node's wall clock
        once each has run the timers that became due."""
        if ms < 0:
            raise ValueError(f"a clock advances forwards, not by {ms} ms (broker.faults.jump_clock steps it back)")
        answers = [control.call("clock.advance", ms=ms) for control in self._controls()]
        return int(answers[0]["now_ms"])

    def now(self) -> int:
        """The (first) node's wall clock, in ms since the epoch: the system's time plus what was advanced."""
        return int(self._controls()[0].call("clock.now")["now_ms"])

    @property
    def advanced_ms(self) -> int:
        """How far the clock was advanced in all since the (first) node started."""
        return int(self._controls()[0].call("clock.now")["advanced_ms"])
