"""What a consumer group's subscription regex resolved to (Kafka's ResolvedRegularExpression): the topic names it
matched, the metadata version it was resolved at and when."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ResolvedRegularExpression:
    """A regex's matching topics at metadata `version`, resolved at `timestamp` (ms)."""

    topics: frozenset[str]
    version: int
    timestamp: int
