"""spark.readStream: micro-batches of offset ranges, with rate limits, checkpoints and data loss."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from .data_loss import report_data_loss
from .offset_reader import OffsetReader
from .offsets import PartitionOffsets, TopicPartition, offsets_from_json, offsets_to_json
from .options import SourceOptions
from .partition_reader import read_range
from .ranges import OffsetRange, rate_limit, split_ranges


def _name(tp: TopicPartition) -> str:
    return f"{tp.topic}-{tp.partition}"


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets are Spark's JSON, {"topic": {"partition": next offset}}; Spark checkpoints them.

    One instance lives in the driver's planning process for the whole query and keeps a consumer
    for metadata; `read` runs on executors from a pickled copy that never opened it.
    """

    def __init__(self, options: SourceOptions) -> None:
        self._options = options
        self._offsets = OffsetReader(options.read, options.subscription)
        self._available_now: PartitionOffsets | None = None
        self._latest_seen: dict | None = None

    def __getstate__(self) -> dict:
        return {"_options": self._options}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["_options"])

    def initialOffset(self) -> dict:
        """Where a new query starts; a restarted query resumes from its checkpoint instead."""
        options = self._options
        tps = self._offsets.partitions()
        start = self._offsets.resolve(options.starting, tps, options.fail_on_no_timestamp_match, "startingOffsets")
        return offsets_to_json(start)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self._options.max_offsets_per_trigger:
            return ReadMaxRows(self._options.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        """Trigger.AvailableNow reads up to the offsets that exist now and then stops."""
        self._available_now = self._offsets.latest(self._offsets.partitions())

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        """The end of the next micro-batch: the latest offsets, cut down by the read limit."""
        if self._available_now is not None:
            latest = dict(self._available_now)
        else:
            latest = self._offsets.latest(self._offsets.partitions())
        self._latest_seen = offsets_to_json(latest)
        if isinstance(limit, ReadMaxRows):
            latest = rate_limit(self._effective_start(offsets_from_json(start), latest), latest, limit.max_rows)
        return offsets_to_json(latest)

    def _effective_start(self, start: PartitionOffsets, latest: PartitionOffsets) -> PartitionOffsets:
        """Where each partition's next records really begin, for sharing out a read limit.

        New partitions begin at their earliest offset; when data loss is tolerated, so do
        partitions whose next offset has already been removed.
        """
        new = [tp for tp in latest if tp not in start]
        known = [tp for tp in latest if tp in start]
        effective = dict(self._offsets.earliest(new))
        if self._options.read.fail_on_data_loss:
            effective.update((tp, start[tp]) for tp in known)
        else:
            earliest = self._offsets.earliest(known)
            effective.update((tp, max(start[tp], earliest[tp])) for tp in known)
        return effective

    def reportLatestOffset(self) -> dict | None:
        return self._latest_seen

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        """Plan the ranges between two checkpointed offsets, reporting partitions that lost data."""
        begin, finish = offsets_from_json(start), offsets_from_json(end)
        fail = self._options.read.fail_on_data_loss
        gone = sorted(set(begin) - set(finish))
        if gone:
            report_data_loss(f"Partitions {[_name(tp) for tp in gone]} are gone.", fail)
        added = self._offsets.earliest(tp for tp in finish if tp not in begin)
        for tp, offset in sorted(added.items()):
            if offset != 0:
                report_data_loss(f"Added partition {_name(tp)} starts from {offset} instead of 0.", fail)
        ranges = []
        for tp in sorted(finish):
            first = begin.get(tp, added.get(tp))
            if finish[tp] < first:
                report_data_loss(f"Partition {_name(tp)}'s offset was changed from {first} to {finish[tp]}.", fail)
                continue
            ranges.append(OffsetRange(tp.topic, tp.partition, first, finish[tp]))
        return list(split_ranges(ranges, self._options.min_partitions))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, OffsetRange)
        return read_range(self._options.read, partition)

    def commit(self, end: dict) -> None:
        """Nothing to do: Spark's checkpoint, not Kafka, records what has been processed."""

    def stop(self) -> None:
        self._offsets.close()
