"""Offset ranges: the unit of parallel reading, how they are split, and per-trigger rate limits."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from pyspark.sql.datasource import InputPartition

from .offsets import TopicPartition


@dataclass(frozen=True)
class OffsetRange(InputPartition):
    """Records [start, end) of one topic-partition, read by one Spark task."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


def split_ranges(ranges: list[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """Split ranges into about `min_partitions` pieces, as Spark's KafkaOffsetRangeCalculator does.

    Empty ranges are dropped, and ranges are left alone when there are already at least `min_partitions` of them.
    Otherwise a range whose share of the records rounds to one piece stays whole, and the rest share out the
    remaining pieces in proportion to their sizes (Java's rounding, half up), each cut into pieces of equal size,
    the last ones taking what integer division leaves.
    """
    ranges = [r for r in ranges if r.size > 0]
    if not min_partitions or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.size for r in ranges)
    whole = {r for r in ranges if _part_count(r.size, total, min_partitions) == 1}
    split_total = total - sum(r.size for r in whole)
    split_min = max(min_partitions - len(whole), 1)
    pieces: list[OffsetRange] = []
    for r in ranges:
        parts = 1 if r in whole else _part_count(r.size, split_total, split_min)
        remaining, start = r.size, r.start
        for part in range(parts):
            this = remaining // (parts - part)
            remaining -= this
            end = min(start + this, r.end)
            if end > start:
                pieces.append(OffsetRange(r.topic, r.partition, start, end))
            start = end
    return pieces


def _part_count(size: int, total: int, min_parts: int) -> int:
    return max(math.floor(size / total * min_parts + 0.5), 1)


def rate_limit(
    start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int], max_records: int
) -> dict[TopicPartition, int]:
    """Move `end` back so that at most `max_records` records lie between `start` and it.

    Every partition with a backlog first gets one record (when the limit allows), so small
    partitions are not starved by big ones; the rest of the budget is shared in proportion to the
    remaining backlogs, and what rounding down leaves over goes to the largest remainders. A
    trigger thus takes exactly min(max_records, backlog) records.
    """
    backlog = {tp: end[tp] - start[tp] for tp in end if tp in start and end[tp] > start[tp]}
    if sum(backlog.values()) <= max_records:
        return dict(end)
    first = 1 if len(backlog) <= max_records else 0
    shares = {tp: first for tp in backlog}
    rest = {tp: size - first for tp, size in backlog.items()}
    budget = max_records - first * len(backlog)
    total = sum(rest.values())
    for tp, size in rest.items():
        shares[tp] += size * budget // total
    left = max_records - sum(shares.values())
    by_remainder = sorted(rest, key=lambda tp: (-(rest[tp] * budget % total), tp))
    for tp in by_remainder[:left]:
        shares[tp] += 1
    limited = dict(end)
    for tp, share in shares.items():
        limited[tp] = start[tp] + share
    return limited
