"""Held transaction markers: the transaction coordinator here sends no WriteTxnMarkers to one broker (or to any) until
the fault is cleared.

A commit or abort is then answered (the PrepareCommit or PrepareAbort is written) but its markers wait, so the
partitions' last stable offsets stay where the transaction began: read_committed consumers wait, read_uncommitted
ones read on, and a new producer of the transactional id gets CONCURRENT_TRANSACTIONS. Clearing the fault lets the
markers go, at the coordinator's next retry.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("minikafka.faults")

KIND = "txn-markers-hold"


@dataclass(frozen=True)
class MarkerHold:
    id: int
    to: int | None  # None: every broker

    def describe(self) -> dict[str, Any]:
        return {"kind": KIND, "id": self.id, "to": self.to}


class MarkerHolds:
    def __init__(self) -> None:
        self.holds: list[MarkerHold] = []

    def hold(self, fault_id: int, to: int | None) -> MarkerHold:
        hold = MarkerHold(fault_id, to)
        self.holds.append(hold)
        log.warning("fault added: %s", hold.describe())
        return hold

    def release(self, rule_id: int | None = None) -> int:
        """End every hold (or the one with this fault id); returns how many ended."""
        kept = [h for h in self.holds if rule_id is not None and h.id != rule_id]
        released = len(self.holds) - len(kept)
        self.holds = kept
        return released

    def is_held(self, broker_id: int) -> bool:
        return any(h.to is None or h.to == broker_id for h in self.holds)

    def describe(self) -> list[dict[str, Any]]:
        return [h.describe() for h in self.holds]
