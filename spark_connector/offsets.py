"""Offset specifications (startingOffsets, endingOffsets, timestamps) and Spark's offset JSON.

Spark's Kafka source writes offsets as ``{"topic": {"partition": offset}}``; per-partition
specifications use -2 for earliest and -1 for latest. The same JSON is used here so checkpoints and
options read the same as with Spark's own source.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

from minikafka.storage.special_timestamps import SpecialTimestamp

# Spark's -2 and -1 are ListOffsets' special timestamps, and reach the broker as such (offsets_for_times).
EARLIEST = int(SpecialTimestamp.EARLIEST_TIMESTAMP)
LATEST = int(SpecialTimestamp.LATEST_TIMESTAMP)


class TopicPartition(NamedTuple):
    """A partition of a topic; hashable and ordered, unlike the Kafka clients' own classes."""

    topic: str
    partition: int

PartitionOffsets = dict[TopicPartition, int]


@dataclass(frozen=True)
class Earliest:
    """The log start offset of every partition."""


@dataclass(frozen=True)
class Latest:
    """The end of every partition: its high watermark, or its last stable offset under read_committed."""


@dataclass(frozen=True)
class SpecificOffsets:
    """An offset per partition; EARLIEST (-2) and LATEST (-1) stand for the partition's bounds."""

    offsets: tuple[tuple[TopicPartition, int], ...]


@dataclass(frozen=True)
class GlobalTimestamp:
    """The first offset whose timestamp is at least `timestamp_ms`, in every partition."""

    timestamp_ms: int


@dataclass(frozen=True)
class PartitionTimestamps:
    """The first offset whose timestamp is at least the given one, per partition."""

    timestamps: tuple[tuple[TopicPartition, int], ...]


OffsetSpec = Earliest | Latest | SpecificOffsets | GlobalTimestamp | PartitionTimestamps


def offsets_to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """Spark's offset JSON object, topics and partitions sorted so equal offsets compare equal."""
    result: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        result.setdefault(tp.topic, {})[str(tp.partition)] = int(offsets[tp])
    return result


def offsets_from_json(value: Mapping[str, Mapping[str, int]]) -> PartitionOffsets:
    """The inverse of `offsets_to_json`."""
    return {
        TopicPartition(topic, int(partition)): int(offset)
        for topic, partitions in value.items()
        for partition, offset in partitions.items()
    }


def _partition_map(option: str, text: str) -> PartitionOffsets:
    example = '{"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}'
    try:
        value = json.loads(text)
        if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
            raise ValueError(text)
        return offsets_from_json(value)
    except (ValueError, TypeError):
        raise ValueError(f"Option {option!r}: expected e.g. {example}, got {text}") from None


def parse_offset_spec(option: str, text: str) -> OffsetSpec:
    """Parse startingOffsets / endingOffsets: "earliest", "latest" or per-partition JSON."""
    word = text.strip().lower()
    if word == "earliest":
        return Earliest()
    if word == "latest":
        return Latest()
    offsets = _partition_map(option, text)
    for tp, offset in offsets.items():
        if offset < EARLIEST:
            raise ValueError(f"Option {option!r}: offset {offset} for {tp.topic}-{tp.partition} is invalid")
    return SpecificOffsets(tuple(sorted(offsets.items())))


def parse_timestamp_spec(option: str, text: str) -> OffsetSpec:
    """Parse startingTimestamp (one number) or startingOffsetsByTimestamp (per-partition JSON)."""
    if option.lower().endswith("timestamp"):
        try:
            timestamp = int(text.strip())
        except ValueError:
            raise ValueError(f"Option {option!r} must be a timestamp in milliseconds, got {text!r}") from None
        if timestamp < 0:
            raise ValueError(f"Option {option!r} must not be negative, got {timestamp}")
        return GlobalTimestamp(timestamp)
    stamps = _partition_map(option, text)
    for tp, timestamp in stamps.items():
        if timestamp < 0:
            raise ValueError(f"Option {option!r}: timestamp {timestamp} for {tp.topic}-{tp.partition} is negative")
    return PartitionTimestamps(tuple(sorted(stamps.items())))
