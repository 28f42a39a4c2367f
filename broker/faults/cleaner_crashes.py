"""Cleaner crashes: the broker dies as on kill -9 when its log cleaner reaches a point of a segment swap, so that a
test sees the log its next start recovers (Kafka's LogLoader finishing or dropping a half-done swap).

The points, in a swap's order: "before-swap" (the cleaned segment written as `.cleaned` files: a restart drops them
and keeps the old segments), "mid-swap" (renamed to `.swap`, the old segments not yet deleted: a restart completes
the swap), "after-swap" (swapped in, the cleaner checkpoint not yet written: a restart cleans again from the old
checkpoint). A crash may be limited to one topic.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("minikafka.faults")

KIND = "cleaner-crash"
POINTS = ("before-swap", "mid-swap", "after-swap")


@dataclass(frozen=True)
class CleanerCrash:
    id: int
    at: str
    topic: str | None  # None: any topic

    def describe(self) -> dict[str, Any]:
        return {"kind": KIND, "id": self.id, "at": self.at, "topic": self.topic}


class CleanerCrashes:
    def __init__(self) -> None:
        self.crashes: list[CleanerCrash] = []

    def arm(self, fault_id: int, at: str, topic: str | None) -> CleanerCrash:
        if at not in POINTS:
            raise ValueError(f"unknown cleaner crash point {at!r}: expected {', '.join(POINTS)}")
        crash = CleanerCrash(fault_id, at, topic)
        self.crashes.append(crash)
        log.warning("fault added: %s", crash.describe())
        return crash

    def disarm(self, rule_id: int | None = None) -> int:
        """Remove every crash (or the one with this fault id); returns how many went."""
        kept = [c for c in self.crashes if rule_id is not None and c.id != rule_id]
        removed = len(self.crashes) - len(kept)
        self.crashes = kept
        return removed

    def due(self, topic: str, point: str) -> bool:
        """Whether the cleaner is to crash at `point` while cleaning a log of `topic`."""
        return any(c.at == point and (c.topic is None or c.topic == topic) for c in self.crashes)

    def describe(self) -> list[dict[str, Any]]:
        return [c.describe() for c in self.crashes]
