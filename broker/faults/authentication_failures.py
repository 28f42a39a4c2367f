"""Failed authentications: the broker refuses one user's SASL authentications (or everyone's) until cleared.

The client is answered as for a wrong password (SASL_AUTHENTICATION_FAILED with the mechanism's message) and its
connection closed after the failed-authentication delay, so an application meets exactly what a revoked or
mistyped credential gives it.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("minikafka.faults")

KIND = "auth-failure"


@dataclass
class AuthenticationFailure:
    id: int
    user: str | None  # None: every user
    hits: int = 0  # authentications refused

    def describe(self) -> dict[str, Any]:
        return {"kind": KIND, "id": self.id, "user": self.user, "hits": self.hits}


class AuthenticationFailures:
    def __init__(self) -> None:
        self.failures: list[AuthenticationFailure] = []

    def add(self, fault_id: int, user: str | None) -> AuthenticationFailure:
        failure = AuthenticationFailure(fault_id, user)
        self.failures.append(failure)
        log.warning("fault added: %s", failure.describe())
        return failure

    def clear(self, rule_id: int | None = None) -> int:
        """End every failure (or the one with this fault id); returns how many ended."""
        kept = [f for f in self.failures if rule_id is not None and f.id != rule_id]
        cleared = len(self.failures) - len(kept)
        self.failures = kept
        return cleared

    def refuses(self, user: str) -> bool:
        """Whether `user`'s authentication must fail; the failure that refuses it counts a hit."""
        failure = next((f for f in self.failures if f.user is None or f.user == user), None)
        if failure is not None:
            failure.hits += 1
        return failure is not None

    def describe(self) -> list[dict[str, Any]]:
        return [f.describe() for f in self.failures]
