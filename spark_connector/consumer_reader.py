"""Executor side, through librdkafka's consumer: read one offset range of one partition into Arrow record batches."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, Message
from confluent_kafka import TopicPartition as ClientPartition

from .data_loss import log, report_gone, report_truncated
from .options import ReadConfig
from .ranges import OffsetRange
from .schema import record_batch

BATCH_ROWS = 10_000
POLL_S = 1.0
WATERMARK_TIMEOUT_S = 30.0


def read_range(config: ReadConfig, rng: OffsetRange) -> Iterator[pa.RecordBatch]:
    """Yield the records of `rng` in offset order, as batches of at most BATCH_ROWS rows.

    Offsets that hold no record for this reader are simply not there: compacted ones, transaction
    markers (control batches), and aborted transactions' records under read_committed. A range may
    end with such offsets, so the reader does not wait for a record at its last offset; it is done
    when the consumer's position, or its end-of-partition event, reaches the end of the range.
    Offsets that are gone (below the log start offset after retention or DeleteRecords, or past the
    end after truncation) are data loss, reported as Spark's source does.
    """
    if rng.size <= 0:
        return
    consumer = config.consumer()
    try:
        consumer.assign([ClientPartition(rng.topic, rng.partition, rng.start)])
        position = rng.start
        last_progress = time.monotonic()
        while position < rng.end:
            before = position
            for records, event in _runs(consumer.consume(BATCH_ROWS, POLL_S)):
                kept = _before(records, rng.end)
                if kept:
                    yield record_batch(rng.topic, rng.partition, kept, config.include_headers)
                    position = _offset(kept[-1]) + 1
                if len(kept) < len(records):
                    return
                if event is not None:
                    position, stale = _after_event(consumer, event, position, rng, config.fail_on_data_loss)
                    if stale:
                        break
            position = max(position, _consumer_position(consumer, rng))
            if position > before:
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


def _runs(messages: list[Message]) -> Iterator[tuple[list[Message], Message | None]]:
    """Consumed messages as runs of records, each followed by the event (error or partition end) after it.

    Events come in order with the records, so the records after an event are read too.
    """
    run: list[Message] = []
    for message in messages:
        if message.error() is None:
            run.append(message)
        else:
            yield run, message
            run = []
    if run:
        yield run, None


def _offset(message: Message) -> int:
    """A record's offset, or where the partition ends for its end event: both always have one."""
    offset = message.offset()
    assert offset is not None, message
    return offset


def _before(records: list[Message], end: int) -> list[Message]:
    """The leading records with offsets below `end` (offsets grow within a partition)."""
    if not records or _offset(records[-1]) < end:
        return records
    cut = len(records)
    while cut and _offset(records[cut - 1]) >= end:
        cut -= 1
    return records[:cut]


def _consumer_position(consumer: Consumer, rng: OffsetRange) -> int:
    """The consumer's next offset, which also moves past records it never hands out.

    Spark's source relies on this (its "offset after poll"); librdkafka moves it past markers and
    aborted records since 1.4. Where it does not, the end-of-partition event still ends the range.
    """
    (current,) = consumer.position([ClientPartition(rng.topic, rng.partition)])
    return current.offset


def _watermarks(consumer: Consumer, rng: OffsetRange) -> tuple[int, int]:
    return consumer.get_watermark_offsets(
        ClientPartition(rng.topic, rng.partition), timeout=WATERMARK_TIMEOUT_S, cached=False
    )


def _after_event(
    consumer: Consumer, event: Message, position: int, rng: OffsetRange, fail: bool
) -> tuple[int, bool]:
    """Where reading goes on after an event, and whether to drop what was consumed after it.

    The end of the partition at offset N means every record before N has been handed out, so
    offsets up to N that did not come hold none. Offsets gone out of range are data loss: the
    consumer is assigned anew or the range given up, so what follows the event is stale. Other
    errors are fatal, or librdkafka retries on its own (it reports them for information).
    """
    error = event.error()
    assert error is not None, event
    if error.code() == KafkaError._PARTITION_EOF:
        return max(position, _offset(event)), False
    if error.code() == KafkaError._AUTO_OFFSET_RESET:
        return _out_of_range(consumer, position, rng, fail), True
    if error.fatal():
        raise KafkaException(error)
    log.info("Reading %s-%s: %s", rng.topic, rng.partition, error)
    return position, False


def _out_of_range(consumer: Consumer, position: int, rng: OffsetRange, fail: bool) -> int:
    """Report the offsets that are gone, then go on from the earliest offset, or give the range up."""
    earliest, latest = _watermarks(consumer, rng)
    resumed = report_gone(f"{rng.topic}-{rng.partition}", position, rng.end, earliest, latest, fail)
    if resumed < rng.end:
        consumer.assign([ClientPartition(rng.topic, rng.partition, resumed)])
    return resumed


def _truncated(consumer: Consumer, position: int, rng: OffsetRange, fail: bool) -> bool:
    """True (after reporting) when the partition now ends before the range does."""
    _, latest = _watermarks(consumer, rng)
    if latest > position:
        return False
    report_truncated(f"{rng.topic}-{rng.partition}", position, rng.end, latest, fail)
    return True
