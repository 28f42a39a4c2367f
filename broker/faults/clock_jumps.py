"""Clock jumps: the broker's wall clock stepped forwards or back, as an operator's `date -s` or an NTP step does,
while its timers (on the monotonic clock) go on undisturbed.

What a step shows is what reads the wall clock: LogAppendTime timestamps (a step back makes them go backwards,
and the time index keeps its largest timestamp), retention.ms and segment.ms (a step forwards ages every segment
at once), group and transaction timestamps. Clearing the fault steps the clock back by as much. A jump is applied
once, when added: its hits are 1.
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from minikafka.broker.clock.broker_clock import BrokerClock, broker_clock

log = logging.getLogger("minikafka.faults")

KIND = "clock-jump"


@dataclass(frozen=True)
class ClockJump:
    id: int
    ms: int  # how far the wall clock was stepped: forwards if positive, back if negative

    def describe(self) -> dict[str, Any]:
        return {"kind": KIND, "id": self.id, "ms": self.ms, "hits": 1}


class ClockJumps:
    def __init__(self, clock: Callable[[], BrokerClock] = broker_clock) -> None:
        self._clock = clock
        self.jumps: list[ClockJump] = []

    def jump(self, fault_id: int, ms: int) -> ClockJump:
        """Step the wall clock by `ms` now."""
        jump = ClockJump(fault_id, ms)
        self._clock().jump_wall_clock(ms)
        self.jumps.append(jump)
        log.warning("fault added: %s", jump.describe())
        return jump

    def undo(self, rule_id: int | None = None) -> int:
        """Step the clock back by every jump (or the one with this fault id); returns how many were undone."""
        undone = [j for j in self.jumps if rule_id is None or j.id == rule_id]
        for jump in undone:
            self._clock().jump_wall_clock(-jump.ms)
        self.jumps = [j for j in self.jumps if j not in undone]
        return len(undone)

    def describe(self) -> list[dict[str, Any]]:
        return [j.describe() for j in self.jumps]
