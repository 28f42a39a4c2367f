"""Driver-side view of the cluster: the partitions a query reads and their offsets (ListOffsets)."""

from __future__ import annotations

from collections.abc import Iterable

from confluent_kafka import Consumer, KafkaException
from confluent_kafka import TopicPartition as ClientPartition

from .offsets import (
    EARLIEST,
    LATEST,
    Earliest,
    GlobalTimestamp,
    Latest,
    OffsetSpec,
    PartitionOffsets,
    SpecificOffsets,
    TopicPartition,
)
from .options import ReadConfig
from .subscription import Subscription

REQUEST_TIMEOUT_S = 30.0


class OffsetReader:
    """Answers "which partitions" and "which offsets" with one long-lived consumer.

    Offsets come from ListOffsets requests (librdkafka's offsets_for_times, where -2 and -1 ask
    for the earliest and the latest offset). They carry the consumer's isolation level, so under
    read_committed "latest" is the last stable offset (the first offset of the oldest open
    transaction), and a timestamp past it finds nothing. The consumer is created on first use, so
    objects holding an OffsetReader can be pickled before they talk to the cluster; `close` releases
    it.
    """

    def __init__(self, config: ReadConfig, subscription: Subscription) -> None:
        self._config = config
        self._subscription = subscription
        self._consumer: Consumer | None = None

    def _client(self) -> Consumer:
        if self._consumer is None:
            self._consumer = self._config.consumer()
        return self._consumer

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    def partitions(self) -> list[TopicPartition]:
        """The subscribed partitions that exist now, from fresh metadata."""
        metadata = self._client().list_topics(timeout=REQUEST_TIMEOUT_S)
        cluster = {
            name: set(topic.partitions) for name, topic in metadata.topics.items() if topic.error is None
        }
        return self._subscription.select(cluster)

    def _list_offsets(self, queries: dict[TopicPartition, int]) -> PartitionOffsets:
        if not queries:
            return {}
        request = [ClientPartition(tp.topic, tp.partition, ts) for tp, ts in sorted(queries.items())]
        answers = self._client().offsets_for_times(request, timeout=REQUEST_TIMEOUT_S)
        result = {}
        for answer in answers:
            if answer.error is not None:
                raise KafkaException(answer.error)
            result[TopicPartition(answer.topic, answer.partition)] = answer.offset
        return result

    def earliest(self, partitions: Iterable[TopicPartition]) -> PartitionOffsets:
        return self._list_offsets({tp: EARLIEST for tp in partitions})

    def latest(self, partitions: Iterable[TopicPartition]) -> PartitionOffsets:
        return self._list_offsets({tp: LATEST for tp in partitions})

    def by_timestamp(self, timestamps: dict[TopicPartition, int]) -> dict[TopicPartition, int | None]:
        """The first offset at or after each timestamp; None where no record is that recent."""
        found = self._list_offsets(timestamps)
        return {tp: (offset if offset >= 0 else None) for tp, offset in found.items()}

    def resolve(
        self,
        spec: OffsetSpec,
        partitions: list[TopicPartition],
        fail_on_no_match: bool,
        option: str,
    ) -> PartitionOffsets:
        """Concrete offsets for `partitions` from an offset specification.

        A timestamp that no record reaches resolves to the latest offset, unless `fail_on_no_match`
        (Spark's startingOffsetsByTimestampStrategy "error") asks for an error.
        """
        if isinstance(spec, Earliest):
            return self.earliest(partitions)
        if isinstance(spec, Latest):
            return self.latest(partitions)
        if isinstance(spec, SpecificOffsets):
            wanted = dict(spec.offsets)
            _check_covers(option, wanted, partitions)
            earliest = self.earliest(tp for tp, o in wanted.items() if o == EARLIEST)
            latest = self.latest(tp for tp, o in wanted.items() if o == LATEST)
            return {tp: earliest.get(tp, latest.get(tp, wanted[tp])) for tp in partitions}
        if isinstance(spec, GlobalTimestamp):
            stamps = {tp: spec.timestamp_ms for tp in partitions}
        else:
            stamps = dict(spec.timestamps)
            _check_covers(option, stamps, partitions)
        found = self.by_timestamp(stamps)
        missing = [tp for tp, offset in found.items() if offset is None]
        if missing and fail_on_no_match:
            tp = missing[0]
            raise ValueError(
                f"No offset matched from request of topic-partition {tp.topic}-{tp.partition} and "
                f"timestamp {stamps[tp]} (option {option}). Set 'startingOffsetsByTimestampStrategy' "
                "to 'latest' to start from the latest offset instead."
            )
        latest = self.latest(missing)
        return {tp: found[tp] if found[tp] is not None else latest[tp] for tp in partitions}


def _check_covers(option: str, given: dict[TopicPartition, int], partitions: list[TopicPartition]) -> None:
    """Spark asks per-partition specifications to name exactly the partitions the query reads."""
    if set(given) != set(partitions):
        named = sorted(f"{tp.topic}-{tp.partition}" for tp in given)
        assigned = sorted(f"{tp.topic}-{tp.partition}" for tp in partitions)
        raise ValueError(
            f"If {option} contains specific offsets, you must specify all TopicPartitions.\n"
            f"Use -1 for latest, -2 for earliest.\nSpecified: {named} Assigned: {assigned}"
        )
