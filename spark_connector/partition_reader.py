"""Executor side: read one offset range of one partition into Arrow record batches."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, Message
from confluent_kafka import TopicPartition as ClientPartition

from .data_loss import log, report_data_loss
from .options import ReadConfig
from .ranges import OffsetRange
from .schema import record_batch

BATCH_ROWS = 10_000
POLL_S = 1.0
WATERMARK_TIMEOUT_S = 30.0


def read_range(config: ReadConfig, rng: OffsetRange) -> Iterator[pa.RecordBatch]:
    """Yield the records of `rng` in offset order, as batches of at most BATCH_ROWS rows.

    Offsets that are missing without an error (compaction, transaction markers) are simply not
    there. Offsets that are gone (below the log start offset after retention or DeleteRecords, or
    past the end after truncation) are data loss, reported as Spark's source does.
    """
    if rng.size <= 0:
        return
    consumer = config.consumer()
    try:
        consumer.assign([ClientPartition(rng.topic, rng.partition, rng.start)])
        position = rng.start
        last_progress = time.monotonic()
        while position < rng.end:
            messages = consumer.consume(BATCH_ROWS, POLL_S)
            failed = next((i for i, m in enumerate(messages) if m.error() is not None), None)
            records = messages if failed is None else messages[:failed]
            kept = _before(records, rng.end)
            if kept:
                yield record_batch(rng.topic, rng.partition, kept, config.include_headers)
                position = kept[-1].offset() + 1
            if len(kept) < len(records):
                break
            if failed is not None:
                position = _after_error(consumer, messages[failed], position, rng, config.fail_on_data_loss)
                last_progress = time.monotonic()
                continue
            moved = _consumer_position(consumer, rng)
            if moved > position or kept:
                position = max(position, moved)
                last_progress = time.monotonic()
            elif _truncated(consumer, position, rng, config.fail_on_data_loss):
                break
            elif (time.monotonic() - last_progress) * 1000 > config.poll_timeout_ms:
                raise TimeoutError(
                    f"Cannot fetch records in [{position}, {rng.end}) of {rng.topic}-{rng.partition} "
                    f"within {config.poll_timeout_ms} ms (option kafkaConsumer.pollTimeoutMs)"
                )
    finally:
        consumer.close()


def _before(records: list[Message], end: int) -> list[Message]:
    """The leading records with offsets below `end` (offsets grow within a partition)."""
    if not records or records[-1].offset() < end:
        return records
    cut = len(records)
    while cut and records[cut - 1].offset() >= end:
        cut -= 1
    return records[:cut]


def _consumer_position(consumer: Consumer, rng: OffsetRange) -> int:
    """The consumer's next offset, which also moves past records it never hands out."""
    (current,) = consumer.position([ClientPartition(rng.topic, rng.partition)])
    return current.offset


def _watermarks(consumer: Consumer, rng: OffsetRange) -> tuple[int, int]:
    return consumer.get_watermark_offsets(
        ClientPartition(rng.topic, rng.partition), timeout=WATERMARK_TIMEOUT_S, cached=False
    )


def _after_error(consumer: Consumer, message: Message, position: int, rng: OffsetRange, fail: bool) -> int:
    """Handle an error event: report offsets gone out of range and return where reading goes on.

    Other errors are fatal or librdkafka retries on its own (it reports them for information).
    """
    error = message.error()
    if error.code() != KafkaError._AUTO_OFFSET_RESET:
        if error.fatal():
            raise KafkaException(error)
        log.info("Reading %s-%s: %s", rng.topic, rng.partition, error)
        return position
    earliest, latest = _watermarks(consumer, rng)
    name = f"{rng.topic}-{rng.partition}"
    if position < earliest:
        report_data_loss(
            f"Cannot fetch offset {position} of {name}: the earliest offset available is {earliest}; "
            f"records in [{position}, {min(earliest, rng.end)}) are skipped.",
            fail,
        )
        if earliest >= rng.end:
            return rng.end
        consumer.assign([ClientPartition(rng.topic, rng.partition, earliest)])
        return earliest
    report_data_loss(
        f"Cannot fetch offset {position} of {name}: the partition ends at {latest}; "
        f"records in [{position}, {rng.end}) are skipped.",
        fail,
    )
    return rng.end


def _truncated(consumer: Consumer, position: int, rng: OffsetRange, fail: bool) -> bool:
    """True (after reporting) when the partition now ends before the range does."""
    _, latest = _watermarks(consumer, rng)
    if latest > position:
        return False
    report_data_loss(
        f"Could not read records in offset [{position}, {rng.end}) of {rng.topic}-{rng.partition}: "
        f"the partition now ends at offset {latest}.",
        fail,
    )
    return True
