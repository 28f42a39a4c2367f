"""Offset ranges: the unit of parallel reading, how they are split, and per-trigger rate limits."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from itertools import pairwise

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
    """Split ranges into about `min_partitions` pieces, each range in proportion to its size.

    As in Spark, ranges are left alone when there are already at least `min_partitions` of them.
    """
    ranges = [r for r in ranges if r.size > 0]
    if not min_partitions or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.size for r in ranges)
    pieces: list[OffsetRange] = []
    for r in ranges:
        parts = min(r.size, max(1, round(r.size * min_partitions / total)))
        bounds = [r.start + r.size * i // parts for i in range(parts + 1)]
        pieces.extend(OffsetRange(r.topic, r.partition, lo, hi) for lo, hi in pairwise(bounds))
    return pieces


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
