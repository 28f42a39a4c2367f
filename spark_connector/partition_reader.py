"""Executor side: read one offset range of one partition into Arrow record batches."""

from __future__ import annotations

import time
from typing import Iterator

import pyarrow as pa
from kafka import KafkaConsumer, TopicPartition
from kafka.errors import OffsetOutOfRangeError

from .data_loss import report_data_loss
from .options import ReadConfig
from .ranges import OffsetRange
from .schema import RecordBatchBuilder

BATCH_ROWS = 10_000
BATCH_BYTES = 8 * 1024 * 1024
POLL_MS = 1000


def read_range(config: ReadConfig, rng: OffsetRange) -> Iterator[pa.RecordBatch]:
    """Yield the records of `rng` in offset order, as batches of at most BATCH_ROWS rows.

    Offsets that are missing without an error (compaction, transaction markers) are simply not
    there. Offsets that are gone (below the log start offset after retention or DeleteRecords, or
    past the end after truncation) are data loss, reported as Spark's source does.
    """
    if rng.size <= 0:
        return
    tp = TopicPartition(rng.topic, rng.partition)
    consumer = config.consumer()
    try:
        consumer.assign([tp])
        consumer.seek(tp, rng.start)
        builder = RecordBatchBuilder(rng.topic, rng.partition, config.include_headers)
        position = rng.start
        last_progress = time.monotonic()
        while position < rng.end:
            try:
                polled = consumer.poll(timeout_ms=POLL_MS, max_records=BATCH_ROWS)
            except OffsetOutOfRangeError:
                position = _skip_lost(consumer, tp, position, rng, config.fail_on_data_loss)
                last_progress = time.monotonic()
                continue
            for record in polled.get(tp, ()):
                if record.offset >= rng.end:
                    break
                builder.add(
                    record.key,
                    record.value,
                    record.offset,
                    record.timestamp,
                    record.timestamp_type,
                    record.headers,
                )
            if len(builder) >= BATCH_ROWS or builder.size >= BATCH_BYTES:
                yield builder.build()
            moved = consumer.position(tp)
            if moved > position:
                position = moved
                last_progress = time.monotonic()
            elif _truncated(consumer, tp, position, rng, config.fail_on_data_loss):
                break
            elif (time.monotonic() - last_progress) * 1000 > config.poll_timeout_ms:
                raise TimeoutError(
                    f"Cannot fetch records in [{position}, {rng.end}) of {rng.topic}-{rng.partition} "
                    f"within {config.poll_timeout_ms} ms (option kafkaConsumer.pollTimeoutMs)"
                )
        if len(builder):
            yield builder.build()
    finally:
        consumer.close()


def _skip_lost(
    consumer: KafkaConsumer, tp: TopicPartition, position: int, rng: OffsetRange, fail: bool
) -> int:
    """After OffsetOutOfRange: report the lost offsets and return where reading goes on."""
    earliest = consumer.beginning_offsets([tp])[tp]
    if position < earliest:
        report_data_loss(
            f"Cannot fetch offset {position} of {tp.topic}-{tp.partition}: the earliest offset "
            f"available is {earliest}; records in [{position}, {min(earliest, rng.end)}) are skipped.",
            fail,
        )
        if earliest >= rng.end:
            return rng.end
        consumer.seek(tp, earliest)
        return earliest
    latest = consumer.end_offsets([tp])[tp]
    report_data_loss(
        f"Cannot fetch offset {position} of {tp.topic}-{tp.partition}: the partition ends at "
        f"{latest}; records in [{position}, {rng.end}) are skipped.",
        fail,
    )
    return rng.end


def _truncated(consumer: KafkaConsumer, tp: TopicPartition, position: int, rng: OffsetRange, fail: bool) -> bool:
    """True (after reporting) when the partition now ends before the range does."""
    latest = consumer.end_offsets([tp])[tp]
    if latest > position:
        return False
    report_data_loss(
        f"Could not read records in offset [{position}, {rng.end}) of {tp.topic}-{tp.partition}: "
        f"the partition now ends at offset {latest}.",
        fail,
    )
    return True
