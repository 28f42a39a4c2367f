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


@dataclass
class MarkerHold:
    id: int
    to: int | None  # None: every broker
    hits: int = 0  # times markers were held back (a partition's marker routed, or a send to the broker)

    def describe(self) -> dict[str, Any]:
        return {"kind": KIND, "id": self.id, "to": self.to, "hits": self.hits}


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
        """Whether markers to `broker_id` must wait; the hold that keeps them counts a hit."""
        hold = next((h for h in self.holds if h.to is None or h.to == broker_id), None)
        if hold is not None:
            hold.hits += 1
        return hold is not None

    def describe(self) -> list[dict[str, Any]]:
        return [h.describe() for h in self.holds]
