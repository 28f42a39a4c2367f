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
