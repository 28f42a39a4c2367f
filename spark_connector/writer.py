"""df.write / writeStream: produce rows to Kafka, with the columns of Spark's Kafka sink.

Columns: value (required), key, topic, partition and headers (optional); other columns are ignored.
The `topic` option, when given, overrides the topic column. Delivery is at least once, as with
Spark's sink: every task flushes its producer and fails if any record was not acknowledged.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from itertools import repeat

import pyarrow as pa
from confluent_kafka import KafkaError, KafkaException
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import BinaryType, DataType, IntegerType, StringType, StructType

from .options import SinkOptions
from .schema import HEADERS_TYPE

FLUSH_TIMEOUT_S = 300.0


@dataclass
class WrittenRecords(WriterCommitMessage):
    """How many records one task produced."""

    count: int


def validate_sink_schema(schema: StructType, options: SinkOptions) -> None:
    """Refuse, on the driver and before any task runs, data the sink cannot write (as Spark does)."""
    types: dict[str, DataType] = {f.name: f.dataType for f in schema.fields}
    if options.topic is None:
        if "topic" not in types:
            raise ValueError(
                "topic option required when no 'topic' attribute is present. "
                "Use the topic option for setting a topic."
            )
        if not isinstance(types["topic"], StringType):
            raise ValueError(f"Topic type must be a string, got {types['topic'].simpleString()}")
    if "value" not in types:
        raise ValueError("Required attribute 'value' not found")
    for name in ("key", "value"):
        if name in types and not isinstance(types[name], (StringType, BinaryType)):
            raise ValueError(f"{name} attribute type must be a string or binary, got {types[name].simpleString()}")
    if "partition" in types and not isinstance(types["partition"], IntegerType):
        raise ValueError(f"partition attribute type must be an int, got {types['partition'].simpleString()}")
    if "headers" in types and types["headers"] != HEADERS_TYPE:
        raise ValueError(
            f"headers attribute type must be an {HEADERS_TYPE.simpleString()}, got {types['headers'].simpleString()}"
        )


def _column(batch: pa.RecordBatch, name: str, as_bytes: bool = False) -> list | None:
    index = batch.schema.get_field_index(name)
    if index < 0:
        return None
    column = batch.column(index)
    if as_bytes and (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
        column = column.cast(pa.binary())
    return column.to_pylist()


def _headers(entries: list[dict] | None) -> list[tuple[str, bytes | None]] | None:
    return [(entry["key"], entry["value"]) for entry in entries] if entries else None


def produce(options: SinkOptions, batches: Iterator[pa.RecordBatch]) -> WrittenRecords:
    """Send every row of `batches`; fail if any record is not acknowledged.

    The loop is the one cost per row: the producer's delivery callback is set once (not per record), arguments go
    positionally, and columns a batch does not have are constants rather than lists.
    """
    errors: list[KafkaError] = []

    def delivered(error: KafkaError | None, _message: object) -> None:
        if error is not None:
            errors.append(error)

    producer = options.producer(delivered)
    send = producer.produce
    count = 0
    for batch in batches:
        n = batch.num_rows
        values = _column(batch, "value", as_bytes=True) or []
        keys = _column(batch, "key", as_bytes=True) or repeat(None)
        partitions = _column(batch, "partition") or repeat(None)
        headers = _column(batch, "headers") or repeat(None)
        topics = repeat(options.topic) if options.topic else _column(batch, "topic") or []  # repeats end with values
        for topic, key, value, partition, header in zip(topics, keys, values, partitions, headers, strict=False):
            if topic is None:
                raise ValueError("null topic present in the data. Use the topic option for setting a default topic.")
            args = (topic, value, key, -1 if partition is None else partition)
            extra = {"headers": _headers(header)} if header else {}
            try:
                send(*args, **extra)
            except BufferError:  # the producer's queue is full: wait for deliveries, then send again
                while True:
                    producer.poll(0.1)
                    try:
                        send(*args, **extra)
                        break
                    except BufferError:
                        continue
        count += n
        producer.poll(0)
        if errors:
            break
    left = producer.flush(FLUSH_TIMEOUT_S)
    if errors:
        raise KafkaException(errors[0])
    if left:
        raise TimeoutError(f"{left} records were not acknowledged within {FLUSH_TIMEOUT_S} s")
    return WrittenRecords(count)


class KafkaBatchWriter(DataSourceArrowWriter):
    """Writer for df.write.format("minikafka")."""

    def __init__(self, options: SinkOptions) -> None:
        self._options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WrittenRecords:
        return produce(self._options, iterator)


class KafkaStreamWriter(DataSourceStreamArrowWriter):
    """Writer for writeStream.format("minikafka"); every micro-batch is produced as it comes."""

    def __init__(self, options: SinkOptions) -> None:
        self._options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WrittenRecords:
        return produce(self._options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Records are already acknowledged by Kafka when a task ends."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Acknowledged records stay in the topic: the sink is at least once, like Spark's."""
