"""Executor side, the fast path: one offset range read with Kafka's Fetch API, record batches decoded into Arrow.

No Python object per record: each Fetch response's batches go to RecordColumns (compiled) in one call per batch,
and the column buffers become Arrow arrays without a copy. While one response is decoded the next is already on
its way: the next offset is known from the batch headers alone, so the request for it is sent first.

Rows, offsets and data-loss behaviour are those of the librdkafka path (consumer_reader.py) and of Spark's source:
offsets without a record for this reader (compacted away, markers, aborted records under read_committed) are
passed by the position as Kafka's consumer passes them; offsets gone below the log start offset or past the end of
a truncated partition are data loss; a range that makes no progress for kafkaConsumer.pollTimeoutMs fails.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pyarrow as pa

from minikafka.protocol.errors import ErrorCode
from minikafka.protocol.record_batch import iter_batches

from .completed_fetch import FetchedColumns
from .data_loss import log, report_gone, report_truncated
from .kafka_client import (
    LEADER_ERRORS,
    BrokerConnection,
    FetchedPartition,
    KafkaClient,
    KafkaRequestError,
    RetriableError,
    fetched_partition,
    shared_client,
)
from .options import ReadConfig
from .ranges import OffsetRange
from .schema import columns_batch

# An Arrow batch is handed to Spark at about this size: big enough that per-batch costs vanish, small enough
# that a task's memory stays a few of them.
BATCH_BYTES = 16 << 20
BATCH_ROWS = 65_536
EARLIEST, LATEST = -2, -1


def read_range(config: ReadConfig, rng: OffsetRange) -> Iterator[pa.RecordBatch]:
    """Yield the records of `rng` in offset order, as Arrow batches of about BATCH_BYTES."""
    if rng.size <= 0:
        return
    reader = _RangeReader(config, rng)
    try:
        yield from reader.batches()
    finally:
        reader.close()


class _RangeReader:
    def __init__(self, config: ReadConfig, rng: OffsetRange) -> None:
        self.config = config
        self.rng = rng
        self.name = f"{rng.topic}-{rng.partition}"
        self.settings = config.fetch_settings()
        self.read_committed = self.settings.isolation_level == 1
        self.client: KafkaClient = shared_client(config.bootstrap_servers, config.client_id,
                                                 config.request_timeout_ms / 1000)
        self.fetched = FetchedColumns(config.include_headers)
        # A Fetch sent ahead: the connection, the request and the offset it asks for.
        self.in_flight: tuple[BrokerConnection, object, int] | None = None

    def batches(self) -> Iterator[pa.RecordBatch]:
        rng, config = self.rng, self.config
        position = rng.start
        last_progress = time.monotonic()
        while position < rng.end:
            try:
                data = self._fetch(position)
            except RetriableError as exc:
                log.info("Reading %s at offset %d: %s", self.name, position, exc)
                self._give_up_if_stalled(position, last_progress)
                time.sleep(config.retry_backoff_ms / 1000)
                continue
            if data.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                position = self._out_of_range(position)
                last_progress = time.monotonic()
                continue
            if data.error_code in LEADER_ERRORS:
                log.info("Reading %s at offset %d: %s", self.name, position, ErrorCode(data.error_code).name)
                self.client.forget(None, rng.topic, rng.partition)
                self._give_up_if_stalled(position, last_progress)
                time.sleep(config.retry_backoff_ms / 1000)
                continue
            if data.error_code:
                raise KafkaRequestError(data.error_code, f"Fetch of {self.name} at offset {position}")
            ahead = _next_offset(data.records, position)
            if rng.end > ahead > position:
                self._send_ahead(ahead)
            before = position
            position = self.fetched.append_fetched(data.records, data.aborted_transactions, self.read_committed,
                                                   position, rng.end)
            columns = self.fetched.columns
            if columns.rows >= BATCH_ROWS or columns.data_bytes >= BATCH_BYTES:
                yield self._take()
            if position > before:
                last_progress = time.monotonic()
                continue
            end_of_partition = data.last_stable_offset if self.read_committed else data.high_watermark
            if 0 <= end_of_partition <= position:
                report_truncated(self.name, position, rng.end, end_of_partition, config.fail_on_data_loss)
                break
            self._give_up_if_stalled(position, last_progress)
        if self.fetched.columns.rows:
            yield self._take()

    def _take(self) -> pa.RecordBatch:
        types = self.fetched.take_timestamp_types()
        return columns_batch(self.rng.topic, self.rng.partition, self.fetched.columns.take(), types,
                             self.config.include_headers)

    def _fetch(self, position: int) -> FetchedPartition:
        """The Fetch response for `position`: the one sent ahead when it asked for that, else a new one."""
        in_flight, self.in_flight = self.in_flight, None
        if in_flight is not None:
            connection, request, offset = in_flight
            if offset != position:
                self.client.forget(connection)  # its answer is of no use: drop the connection rather than wait
            else:
                return self._receive(connection, request)
        connection = self.client.leader(self.rng.topic, self.rng.partition)
        request = self.client.fetch_request(connection, self.rng.topic, self.rng.partition, position, self.settings)
        try:
            connection.send(request)
        except RetriableError:
            self.client.forget(connection, self.rng.topic, self.rng.partition)
            raise
        return self._receive(connection, request)

    def _send_ahead(self, offset: int) -> None:
        try:
            connection = self.client.leader(self.rng.topic, self.rng.partition)
            request = self.client.fetch_request(connection, self.rng.topic, self.rng.partition, offset,
                                                self.settings)
            connection.send(request)
        except RetriableError:
            return  # the next fetch asks again and handles it
        self.in_flight = (connection, request, offset)

    def _receive(self, connection: BrokerConnection, request: object) -> FetchedPartition:
        timeout_s = self.client.timeout_s + self.settings.max_wait_ms / 1000
        try:
            return fetched_partition(connection.receive(request, timeout_s))
        except RetriableError:
            self.client.forget(connection, self.rng.topic, self.rng.partition)
            raise

    def _out_of_range(self, position: int) -> int:
        """Offsets gone: report, and go on from the earliest offset or give the rest of the range up."""
        topic, partition, isolation = self.rng.topic, self.rng.partition, self.settings.isolation_level
        for attempt in range(3):
            try:
                earliest = self.client.list_offset(topic, partition, EARLIEST, isolation)
                latest = self.client.list_offset(topic, partition, LATEST, isolation)
                break
            except RetriableError:
                if attempt == 2:
                    raise
                time.sleep(self.config.retry_backoff_ms / 1000)
        if earliest <= position < latest:
            return position  # in range again (a new leader caught up): fetch again
        return report_gone(self.name, position, self.rng.end, earliest, latest, self.config.fail_on_data_loss)

    def _give_up_if_stalled(self, position: int, last_progress: float) -> None:
        if (time.monotonic() - last_progress) * 1000 > self.config.poll_timeout_ms:
            raise TimeoutError(
                f"Cannot fetch records in [{position}, {self.rng.end}) of {self.name} within "
                f"{self.config.poll_timeout_ms} ms (option kafkaConsumer.pollTimeoutMs)"
            )

    def close(self) -> None:
        """A Fetch still in flight (the task ended early) takes its connection with it."""
        if self.in_flight is not None:
            self.client.forget(self.in_flight[0])
            self.in_flight = None


def _next_offset(records: memoryview, position: int) -> int:
    """The offset after the last whole batch of `records` (`position` when there is none), from headers alone."""
    for _, header in iter_batches(records):
        position = max(position, header.last_offset + 1)
    return position
