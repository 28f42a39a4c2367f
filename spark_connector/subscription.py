"""Which topic-partitions a query reads: Spark's subscribe, subscribePattern and assign options."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

from .offsets import TopicPartition


@dataclass(frozen=True)
class Subscribe:
    """Every partition of the named topics that exist."""

    topics: tuple[str, ...]

    def select(self, cluster: Mapping[str, set[int]]) -> list[TopicPartition]:
        return sorted(TopicPartition(t, p) for t in self.topics for p in cluster.get(t, ()))


INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


@dataclass(frozen=True)
class SubscribePattern:
    """Every partition of every topic whose whole name matches the regular expression.

    Kafka's internal topics are left out, as a Java consumer's pattern subscription does.
    """

    pattern: str

    def select(self, cluster: Mapping[str, set[int]]) -> list[TopicPartition]:
        regex = re.compile(self.pattern)
        return sorted(
            TopicPartition(t, p)
            for t, parts in cluster.items()
            if t not in INTERNAL_TOPICS and regex.fullmatch(t)
            for p in parts
        )


@dataclass(frozen=True)
class Assign:
    """Exactly the listed partitions, once they exist."""

    partitions: tuple[TopicPartition, ...]

    def select(self, cluster: Mapping[str, set[int]]) -> list[TopicPartition]:
        return sorted(tp for tp in self.partitions if tp.partition in cluster.get(tp.topic, ()))


Subscription = Subscribe | SubscribePattern | Assign

STRATEGY_OPTIONS = ("subscribe", "subscribePattern", "assign")


def parse_subscription(options: Mapping[str, str]) -> Subscription:
    """Exactly one of subscribe, subscribePattern and assign must be given, as in Spark.

    `options` has lower-case keys, as Spark's option names are case-insensitive.
    """
    given = [name for name in STRATEGY_OPTIONS if name.lower() in options]
    if not given:
        raise ValueError(
            "One of the following options must be specified for Kafka source: "
            + ", ".join(STRATEGY_OPTIONS)
            + ". See the docs for more details."
        )
    if len(given) > 1:
        raise ValueError(
            "Only one of the following options can be specified for Kafka source: "
            + ", ".join(STRATEGY_OPTIONS)
            + ". See the docs for more details."
        )
    name = given[0]
    value = options[name.lower()]
    if name == "subscribe":
        topics = tuple(t.strip() for t in value.split(",") if t.strip())
        if not topics:
            raise ValueError(f"No topics to subscribe to as specified value for option 'subscribe' is '{value}'")
        return Subscribe(topics)
    if name == "subscribePattern":
        if not value.strip():
            raise ValueError("Pattern to subscribe is empty as specified value for option 'subscribePattern' is ''")
        re.compile(value)
        return SubscribePattern(value.strip())
    return Assign(_parse_assign(value))


def _parse_assign(text: str) -> tuple[TopicPartition, ...]:
    try:
        value = json.loads(text)
        partitions = tuple(
            sorted(TopicPartition(str(t), int(p)) for t, parts in value.items() for p in parts)
        )
    except (ValueError, TypeError, AttributeError):
        raise ValueError(f'Option \'assign\': expected e.g. {{"topicA":[0,1],"topicB":[0,1]}}, got {text}') from None
    if not partitions:
        raise ValueError(f"No topic-partitions to assign as specified value for option 'assign' is '{text}'")
    return partitions
