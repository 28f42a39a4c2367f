"""The clock of one node's trio run (Kafka's Time: SystemTime, or MockTime in a test): the monotonic time every
deadline of the node is on, and the wall clock it reads for Kafka's timestamps (LogAppendTime, retention and
segment.ms, group and transaction timestamps).

A node's run always has a BrokerClock. Started with `manual=True` (`minikafka serve --clock manual --testing`,
`minikafka.Broker(clock="manual")`) its time runs at the real rate and a test can `advance` it: both clocks jump
forwards together, so every timer due within the jump (session and rebalance timeouts, transaction timeouts,
retention and segment.ms checks, long polls, quota windows, replica lag) fires at once, in milliseconds of real
time. A `jump_wall_clock` (the clock-jump fault) steps the wall clock alone, forwards or back, as an operator's
clock step or an NTP correction does, while the node's timers go on.

Liveness between processes stays on real time (`real_time`, `move_on_at_real`, `fail_at_real`): whether a broker's
controller session has run out, whether a request to another node timed out, whether a connection idled out, are
matters of bytes crossing the network, which a jump of one node's clock does not delay.
"""
from __future__ import annotations

import time
from contextlib import AbstractContextManager
from types import TracebackType

import trio


class BrokerClock(trio.abc.Clock):
    """trio's clock for a node's run: the real monotonic time plus what `advance` added."""

    def __init__(self, manual: bool = False) -> None:
        self.manual = manual
        self.advanced_s = 0.0  # total of the advances: how far trio's time is ahead of the real one
        self.wall_offset_ms = 0  # advances and wall-clock jumps: how far the wall clock is off the system's
        self.real_time_scopes: set[trio.CancelScope] = set()  # deadlines an advance moves along (RealTimeDeadline)

    # ---- trio.abc.Clock ----------------------------------------------------------------------------------------

    def start_clock(self) -> None:
        pass

    def current_time(self) -> float:
        return time.perf_counter() + self.advanced_s

    def deadline_to_sleep_time(self, deadline: float) -> float:
        return deadline - self.current_time()

    # ---- the node's time -----------------------------------------------------------------------------------------

    def wall_clock_ms(self) -> int:
        """The wall clock in ms since the epoch, as this node reads it for Kafka's timestamps."""
        return time.time_ns() // 1_000_000 + self.wall_offset_ms

    def advance(self, ms: int) -> None:
        """Move both clocks forwards by `ms` (a manual clock only): the timers due by then are due now."""
        if not self.manual:
            raise ValueError("this node runs on the system's clock; only a manual clock (--clock manual) advances")
        if ms < 0:
            raise ValueError(f"a clock advances forwards, not by {ms} ms")
        self.advanced_s += ms / 1000
        self.wall_offset_ms += ms
        for scope in self.real_time_scopes:
            scope.deadline += ms / 1000

    def jump_wall_clock(self, ms: int) -> None:
        """Step the wall clock by `ms` (negative: back), the node's timers untouched."""
        self.wall_offset_ms += ms

    def real_time(self, trio_time: float) -> float:
        """A time of this run's clock as real (unadvanced) time."""
        return trio_time - self.advanced_s

    def trio_time(self, real_time: float) -> float:
        """A real time as a deadline on this run's clock."""
        return real_time + self.advanced_s


SYSTEM = BrokerClock()  # outside a node's run (a test's own trio clock, a worker thread): the system's time


def broker_clock() -> BrokerClock:
    """The clock of the node whose trio run this is."""
    try:
        clock = trio.lowlevel.current_clock()
    except RuntimeError:  # not in a trio run
        return SYSTEM
    return clock if isinstance(clock, BrokerClock) else SYSTEM


def wall_clock_ms() -> int:
    """This node's wall clock, in ms since the epoch."""
    return broker_clock().wall_clock_ms()


def real_time() -> float:
    """trio's current time as real time, for liveness between processes (controller sessions, idle
    connections): an advance of this node's clock does not make a peer look silent."""
    return broker_clock().real_time(trio.current_time())


class RealTimeDeadline:
    """trio's move_on_at (or fail_at) for a deadline in real time (see real_time) on a manual clock: an advance
    moves the deadline along, so a wait between processes is not cut short by the jump."""

    __slots__ = ("_clock", "_fail", "_real_deadline", "_scope")

    def __init__(self, clock: BrokerClock, real_deadline: float, fail: bool = False) -> None:
        self._clock = clock
        self._real_deadline = real_deadline
        self._fail = fail
        self._scope: trio.CancelScope | None = None

    def __enter__(self) -> trio.CancelScope:
        scope = self._scope = trio.CancelScope(deadline=self._clock.trio_time(self._real_deadline))
        scope.__enter__()
        self._clock.real_time_scopes.add(scope)
        return scope

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> bool:
        scope = self._scope
        assert scope is not None  # entered
        self._clock.real_time_scopes.discard(scope)
        handled = scope.__exit__(exc_type, exc, traceback)
        if self._fail and scope.cancelled_caught:
            raise trio.TooSlowError
        return handled


def move_on_at_real(real_deadline: float) -> AbstractContextManager[trio.CancelScope]:
    """trio.move_on_at with the deadline in real time: on the system's clock, trio's own (the times are the same)."""
    clock = broker_clock()
    return RealTimeDeadline(clock, real_deadline) if clock.manual else trio.move_on_at(real_deadline)


def fail_at_real(real_deadline: float) -> AbstractContextManager[trio.CancelScope]:
    """trio.fail_at with the deadline in real time: on the system's clock, trio's own (the times are the same)."""
    clock = broker_clock()
    return RealTimeDeadline(clock, real_deadline, fail=True) if clock.manual else trio.fail_at(real_deadline)
