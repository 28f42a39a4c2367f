"""The row layout of Spark's Kafka source, and building it as Arrow record batches.

Readers hand PySpark `pyarrow.RecordBatch` objects, so no Python object per row crosses into the
JVM. PySpark checks each batch's Arrow schema against the one it derives from the Spark schema, so
the Arrow schema is derived here with PySpark's own conversion.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import pyarrow as pa
from confluent_kafka import Message
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

from minikafka.protocol.record_columns import ColumnBuffers

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


@lru_cache(maxsize=2)
def arrow_schema(include_headers: bool) -> pa.Schema:
    """The Arrow schema PySpark expects for `source_schema(include_headers)`."""
    return to_arrow_schema(source_schema(include_headers), timezone="UTC")


def record_batch(topic: str, partition: int, messages: Sequence[Message], include_headers: bool) -> pa.RecordBatch:
    """One Arrow batch from consumed messages of one partition, column by column.

    librdkafka's timestamp types (0 none, 1 create time, 2 log append time) become Kafka's ids
    (-1, 0, 1) as Spark shows them. As in Spark, a record without headers has null headers.
    """
    schema = arrow_schema(include_headers)
    n = len(messages)
    stamps = [m.timestamp() for m in messages]
    millis = pa.array([ts for _, ts in stamps], pa.int64())
    columns = [
        pa.array([m.key() for m in messages], schema.field("key").type),
        pa.array([m.value() for m in messages], schema.field("value").type),
        pa.repeat(pa.scalar(topic, schema.field("topic").type), n),
        pa.repeat(pa.scalar(partition, schema.field("partition").type), n),
        pa.array([m.offset() for m in messages], pa.int64()),
        millis.cast(pa.timestamp("ms", tz="UTC")).cast(schema.field("timestamp").type),
        pa.array([kind - 1 for kind, _ in stamps], schema.field("timestampType").type),
    ]
    if include_headers:
        columns.append(pa.array([m.headers() for m in messages], schema.field("headers").type))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def columns_batch(topic: str, partition: int, buffers: ColumnBuffers, timestamp_types: bytearray,
                  include_headers: bool) -> pa.RecordBatch:
    """One Arrow batch over decoded column buffers, without copying them (pyarrow wraps the bytearrays)."""
    schema = arrow_schema(include_headers)
    n = buffers.rows

    def binary(validity: bytearray, offsets: bytearray, data: bytearray, kind: pa.DataType, rows: int) -> pa.Array:
        bitmap = pa.py_buffer(validity) if validity else None  # header keys are never null: no bitmap
        return pa.Array.from_buffers(kind, rows, [bitmap, pa.py_buffer(offsets), pa.py_buffer(data)])

    millis = pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(buffers.timestamps)])
    columns = [
        binary(buffers.key_validity, buffers.key_offsets, buffers.key_data, schema.field("key").type, n),
        binary(buffers.value_validity, buffers.value_offsets, buffers.value_data, schema.field("value").type, n),
        pa.repeat(pa.scalar(topic, schema.field("topic").type), n),
        pa.repeat(pa.scalar(partition, schema.field("partition").type), n),
        pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(buffers.offsets)]),
        millis.cast(pa.timestamp("ms", tz="UTC")).cast(schema.field("timestamp").type),
        pa.Array.from_buffers(schema.field("timestampType").type, n, [None, pa.py_buffer(timestamp_types)]),
    ]
    if include_headers:
        headers_type = schema.field("headers").type
        entry_type = headers_type.value_type
        entries = len(buffers.header_key_offsets) // 4 - 1  # Arrow offsets: one more than the entries
        keys = binary(bytearray(), buffers.header_key_offsets, buffers.header_key_data, entry_type.field("key").type,
                      entries)
        values = binary(buffers.header_value_validity, buffers.header_value_offsets, buffers.header_value_data,
                        entry_type.field("value").type, entries)
        entry = pa.StructArray.from_arrays([keys, values], fields=list(entry_type))
        columns.append(pa.Array.from_buffers(headers_type, n, [pa.py_buffer(buffers.header_validity),
                                                                pa.py_buffer(buffers.header_offsets)],
                                             children=[entry]))
    return pa.RecordBatch.from_arrays(columns, schema=schema)
