"""The row layout of Spark's Kafka source, and building it as Arrow record batches.

Readers hand PySpark `pyarrow.RecordBatch` objects, so no Python object per row crosses into the
JVM. PySpark checks each batch's Arrow schema against the one it derives from the Spark schema, so
the Arrow schema is derived here with PySpark's own conversion.
"""

from __future__ import annotations

from typing import Optional, Sequence

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

HEADERS_TYPE = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))


def source_schema(include_headers: bool) -> StructType:
    """key, value, topic, partition, offset, timestamp, timestampType [, headers] as in Spark."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE))
    return StructType(fields)


def arrow_schema(include_headers: bool) -> pa.Schema:
    """The Arrow schema PySpark expects for `source_schema(include_headers)`."""
    return to_arrow_schema(source_schema(include_headers), timezone="UTC")


class RecordBatchBuilder:
    """Collects the records of one topic-partition and turns them into Arrow record batches."""

    def __init__(self, topic: str, partition: int, include_headers: bool) -> None:
        self._topic = topic
        self._partition = partition
        self._schema = arrow_schema(include_headers)
        self._headers: Optional[list] = [] if include_headers else None
        self._clear()

    def _clear(self) -> None:
        self._keys: list[Optional[bytes]] = []
        self._values: list[Optional[bytes]] = []
        self._offsets: list[int] = []
        self._timestamps: list[int] = []
        self._timestamp_types: list[int] = []
        if self._headers is not None:
            self._headers = []
        self.size = 0

    def __len__(self) -> int:
        return len(self._offsets)

    def add(
        self,
        key: Optional[bytes],
        value: Optional[bytes],
        offset: int,
        timestamp_ms: int,
        timestamp_type: int,
        headers: Sequence[tuple[str, Optional[bytes]]],
    ) -> None:
        self._keys.append(key)
        self._values.append(value)
        self._offsets.append(offset)
        self._timestamps.append(timestamp_ms)
        self._timestamp_types.append(timestamp_type)
        if self._headers is not None:
            self._headers.append(headers)
        self.size += (len(key) if key else 0) + (len(value) if value else 0)

    def build(self) -> pa.RecordBatch:
        """The collected rows as one batch; the builder is empty afterwards."""
        n = len(self._offsets)
        fields = self._schema
        millis = pa.array(self._timestamps, pa.int64())
        columns = [
            pa.array(self._keys, fields.field("key").type),
            pa.array(self._values, fields.field("value").type),
            pa.repeat(pa.scalar(self._topic, fields.field("topic").type), n),
            pa.repeat(pa.scalar(self._partition, fields.field("partition").type), n),
            pa.array(self._offsets, pa.int64()),
            millis.cast(pa.timestamp("ms", tz="UTC")).cast(fields.field("timestamp").type),
            pa.array(self._timestamp_types, fields.field("timestampType").type),
        ]
        if self._headers is not None:
            columns.append(pa.array(self._headers, fields.field("headers").type))
        batch = pa.RecordBatch.from_arrays(columns, schema=fields)
        self._clear()
        return batch
