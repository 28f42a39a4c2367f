"""The node's clock: an advance makes trio's timers due at once and moves the wall clock with them, while waits timed
in real time (move_on_at_real, fail_at_real) are carried along; a wall-clock jump moves no timer."""
from __future__ import annotations

import time

import pytest
import trio
import trio.testing

from minikafka.broker.clock.broker_clock import (
    SYSTEM,
    BrokerClock,
    broker_clock,
    fail_at_real,
    move_on_at_real,
    real_time,
    wall_clock_ms,
)

HOUR_S = 3600.0


def run_on(clock: BrokerClock, main) -> object:
    return trio.run(main, clock=clock)


def test_an_advance_makes_a_sleep_of_an_hour_due_at_once():
    clock = BrokerClock(manual=True)
    woke: list[float] = []

    async def main() -> None:
        async def sleeper() -> None:
            await trio.sleep(HOUR_S)
            woke.append(trio.current_time())

        with fail_at_real(real_time() + 60):  # a bound in real time, should the sleep not become due
            async with trio.open_nursery() as nursery:
                nursery.start_soon(sleeper)
                await trio.testing.wait_all_tasks_blocked()
                assert broker_clock() is clock
                wall_before = wall_clock_ms()
                clock.advance(int(HOUR_S * 1000))
                assert wall_clock_ms() - wall_before >= HOUR_S * 1000
        assert woke

    run_on(clock, main)


def test_a_real_time_deadline_is_carried_along_by_an_advance():
    clock = BrokerClock(manual=True)

    async def main() -> None:
        event = trio.Event()
        outcome: list[str] = []

        async def waiter() -> None:
            with move_on_at_real(real_time() + HOUR_S) as scope:
                await event.wait()
            outcome.append("timed out" if scope.cancelled_caught else "woken")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(waiter)
            await trio.testing.wait_all_tasks_blocked()
            clock.advance(int(2 * HOUR_S * 1000))  # past the deadline on trio's clock, not in real time
            await trio.testing.wait_all_tasks_blocked()
            assert outcome == []
            assert clock.real_time_scopes  # the waiter's deadline is kept for the next advance
            event.set()
        assert outcome == ["woken"]
        assert not clock.real_time_scopes

    run_on(clock, main)


def test_fail_at_real_raises_too_slow_once_real_time_passes():
    async def main() -> None:
        with pytest.raises(trio.TooSlowError):
            with fail_at_real(real_time() + 0.01):
                await trio.sleep_forever()

    run_on(BrokerClock(manual=True), main)


def test_a_system_clock_does_not_advance_and_a_wall_clock_jump_moves_no_timer():
    clock = BrokerClock()
    with pytest.raises(ValueError, match="system's clock"):
        clock.advance(1000)
    manual = BrokerClock(manual=True)
    with pytest.raises(ValueError, match="forwards"):
        manual.advance(-1)

    async def main() -> None:
        before_trio, before_wall = trio.current_time(), wall_clock_ms()
        clock.jump_wall_clock(-int(HOUR_S * 1000))
        assert wall_clock_ms() <= before_wall - HOUR_S * 1000 + 1000
        assert trio.current_time() - before_trio < HOUR_S / 2
        clock.jump_wall_clock(int(HOUR_S * 1000))
        assert abs(wall_clock_ms() - time.time() * 1000) < HOUR_S * 1000 / 2

    run_on(clock, main)


def test_outside_a_nodes_run_the_clock_is_the_systems():
    assert broker_clock() is SYSTEM  # not in a trio run

    async def main() -> None:
        assert broker_clock() is SYSTEM  # a run on trio's own clock (a test's)

    trio.run(main)
    assert abs(wall_clock_ms() - time.time() * 1000) < 1000
