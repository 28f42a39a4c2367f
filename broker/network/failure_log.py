"""One log line per run of failures of a retried action, not one per retry.

A broker cut off from a peer retries heartbeats, fetches and AlterPartition every few tens of milliseconds; a line
for each would bury everything else in the log. The first failure of a run is logged, then at most one line per
`every_s` seconds with the count so far, and the first success after a run says how long it lasted.
"""
from __future__ import annotations

import logging

import trio

SUMMARY_INTERVAL_S = 10.0


class FailureLog:
    def __init__(self, logger: logging.Logger, what: str, level: int = logging.WARNING,
                 every_s: float = SUMMARY_INTERVAL_S) -> None:
        self._logger = logger
        self._what = what
        self._level = level
        self._every_s = every_s
        self._failures = 0
        self._first_at = 0.0
        self._logged_at = 0.0

    @property
    def failures(self) -> int:
        """Failures in the current run (0 after a success)."""
        return self._failures

    def failed(self, reason: object) -> None:
        now = trio.current_time()
        self._failures += 1
        if self._failures == 1:
            self._first_at = self._logged_at = now
            self._logger.log(self._level, "%s failed: %s", self._what, reason)
        elif now - self._logged_at >= self._every_s:
            self._logged_at = now
            self._logger.log(self._level, "%s still failing (%d times in %.0f s): %s", self._what, self._failures,
                             now - self._first_at, reason)

    def succeeded(self) -> None:
        if self._failures:
            self._logger.info("%s works again after %d failure(s) in %.1f s", self._what, self._failures,
                              trio.current_time() - self._first_at)
            self._failures = 0
