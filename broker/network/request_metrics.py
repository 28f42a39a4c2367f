"""Kafka's RequestMetrics: the requests a broker answered, by API and version, and the time they took.

The request path pays an increment per request; the figures become metrics only at scrape time.
"""
from __future__ import annotations

from typing import Any


class RequestStats:
    """One API version's requests answered and the time they took, for RequestsPerSec and TotalTimeMs."""

    __slots__ = ("count", "total_time_ms")

    def __init__(self) -> None:
        self.count = 0
        self.total_time_ms = 0.0


class RequestMetrics:
    """The request path's counters: each API version's stats, and RequestQueueSize."""

    def __init__(self) -> None:
        self.requests: dict[tuple[str, int], RequestStats] = {}
        self.requests_in_flight = 0  # taken and not yet answered: RequestQueueSize, as no queue stands before them

    def request_answered(self, api: str, version: int, time_ms: float) -> None:
        stats = self.requests.get((api, version))
        if stats is None:
            stats = self.requests[(api, version)] = RequestStats()
        stats.count += 1
        stats.total_time_ms += time_ms


def fetch_request_name(request: Any, version: int) -> str:
    """Kafka's RequestMetrics count a Fetch also as FetchFollower or FetchConsumer, by who sent it."""
    if version >= 15:
        state = request.replica_state
        replica_id = state.replica_id if state is not None else -1
    else:
        replica_id = request.replica_id
    return "FetchFollower" if replica_id >= 0 else "FetchConsumer"
