"""spark.read: plan one input partition per topic-partition offset range, read them in parallel."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition

from .offset_reader import OffsetReader
from .options import SourceOptions
from .partition_reader import read_range
from .ranges import OffsetRange, split_ranges


class KafkaBatchReader(DataSourceReader):
    """Reads [startingOffsets, endingOffsets) of every subscribed partition."""

    def __init__(self, options: SourceOptions) -> None:
        self._options = options

    def partitions(self) -> list[InputPartition]:
        """Resolve both bounds on the driver, then split by minPartitions."""
        options = self._options
        reader = OffsetReader(options.read, options.subscription)
        try:
            tps = reader.partitions()
            start = reader.resolve(options.starting, tps, options.fail_on_no_timestamp_match, "startingOffsets")
            end = reader.resolve(options.ending, tps, False, "endingOffsets")
        finally:
            reader.close()
        ranges = []
        for tp in tps:
            if end[tp] < start[tp]:
                raise ValueError(
                    f"Beginning offset {start[tp]} is after the ending offset {end[tp]} for topic "
                    f"{tp.topic} partition {tp.partition}. You either provided an invalid fromOffset, "
                    "or the Kafka topic has been damaged"
                )
            ranges.append(OffsetRange(tp.topic, tp.partition, start[tp], end[tp]))
        return list(split_ranges(ranges, options.min_partitions))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Runs on an executor; an empty plan gives PySpark's placeholder partition, read as nothing."""
        if isinstance(partition, OffsetRange):
            yield from read_range(self._options.read, partition)
