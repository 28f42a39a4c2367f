"""Reporting lost data the way Spark's Kafka source does: fail the query, or warn and skip."""

from __future__ import annotations

import logging

log = logging.getLogger("minikafka.spark_connector")

_LOST = (
    "Some data may have been lost because they are not available in Kafka any more; either the data "
    "was aged out by Kafka or the topic may have been deleted before all the data in the topic was "
    "processed."
)
_HOW_TO_IGNORE = (
    'If you don\'t want your streaming query to fail on such cases, set the source option '
    '"failOnDataLoss" to "false".'
)
_HOW_TO_FAIL = (
    'If you want your streaming query to fail on such cases, set the source option '
    '"failOnDataLoss" to "true".'
)


class DataLossError(RuntimeError):
    """Offsets the query needs are no longer in the topic (retention, DeleteRecords, truncation)."""


def report_data_loss(reason: str, fail_on_data_loss: bool) -> None:
    """Raise `DataLossError` when failing on data loss is asked for, otherwise log a warning.

    Callers go on to skip the missing range when this returns.
    """
    if fail_on_data_loss:
        raise DataLossError(f"{_LOST} {_HOW_TO_IGNORE}\nReason: {reason}")
    log.warning("%s %s\nReason: %s", _LOST, _HOW_TO_FAIL, reason)


def report_gone(name: str, position: int, end: int, earliest: int, latest: int, fail_on_data_loss: bool) -> int:
    """Offsets from `position` are out of the partition's range [earliest, latest): report the loss, and return
    where reading goes on (the earliest offset, or `end` when nothing of the range is left)."""
    if position < earliest:
        report_data_loss(
            f"Cannot fetch offset {position} of {name}: the earliest offset available is {earliest}; "
            f"records in [{position}, {min(earliest, end)}) are skipped.",
            fail_on_data_loss,
        )
        return min(earliest, end)
    report_data_loss(
        f"Cannot fetch offset {position} of {name}: the partition ends at {latest}; "
        f"records in [{position}, {end}) are skipped.",
        fail_on_data_loss,
    )
    return end


def report_truncated(name: str, position: int, end: int, latest: int, fail_on_data_loss: bool) -> None:
    """The partition now ends at `latest`, before the range does (a leader truncated it)."""
    report_data_loss(
        f"Could not read records in offset [{position}, {end}) of {name}: the partition now ends at offset "
        f"{latest}.",
        fail_on_data_loss,
    )
