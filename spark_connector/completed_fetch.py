"""The record batches of one partition's Fetch response, decoded into columns as Kafka's consumer reads them.

Kafka's Java consumer (its CompletedFetch) checks each batch's CRC, skips control batches (transaction markers),
and under read_committed skips the batches of aborted transactions: the response lists each aborted
transaction's producer id and first offset, a transaction counts as aborted from its first offset until its abort
marker. The records of the batches kept go to RecordColumns in bulk, one call per batch; nothing here is per
record. The last batch of a response may be cut short by the fetch size and is read by the next fetch.
"""

from __future__ import annotations

import struct

from crc32c import crc32c

from minikafka.protocol.compression import NONE, decompress
from minikafka.protocol.end_transaction_marker import parse_marker
from minikafka.protocol.record_batch import (
    ATTRIBUTES_OFFSET,
    CURRENT_MAGIC,
    HEADER_SIZE,
    LOG_APPEND_TIME,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    CorruptRecordError,
    parse_header,
)
from minikafka.protocol.record_columns import RecordColumns

_LENGTH = struct.Struct(">qi")
# What a compressed batch may grow to: Arrow's 32-bit offsets bound a column anyway.
MAX_DECOMPRESSED_BYTES = 1 << 30
_CREATE_TIME_ROW = (0).to_bytes(4, "little")
_LOG_APPEND_TIME_ROW = (1).to_bytes(4, "little")


class FetchedColumns:
    """Rows decoded so far for one partition, with the per-row timestamp type Kafka keeps per batch."""

    def __init__(self, include_headers: bool) -> None:
        self.columns = RecordColumns(include_headers)
        self.timestamp_types = bytearray()

    def append_fetched(self, records: memoryview, aborted: list[tuple[int, int]], read_committed: bool,
                       position: int, end: int) -> int:
        """Decode the whole batches of `records` with offsets in [position, end); return the next offset to fetch.

        The next offset passes every whole batch read, kept or not, so markers, aborted transactions and
        compacted gaps move it on as they move a Kafka consumer's position.
        """
        aborted_queue = sorted((first, pid) for pid, first in aborted) if read_committed else []
        aborted_producers: set[int] = set()
        next_aborted = 0
        pos = 0
        size = len(records)
        while pos + LOG_OVERHEAD <= size and position < end:
            _base, length = _LENGTH.unpack_from(records, pos)
            batch_end = pos + LOG_OVERHEAD + length
            if batch_end > size:
                break  # cut short by the fetch size
            if length < HEADER_SIZE - LOG_OVERHEAD:
                raise CorruptRecordError(f"Record batch at position {pos} has a batch length of {length} bytes")
            if records[pos + MAGIC_OFFSET] != CURRENT_MAGIC:
                raise CorruptRecordError(
                    f"Record batch at position {pos} has magic {records[pos + MAGIC_OFFSET]}: only record batches "
                    f"of magic {CURRENT_MAGIC} (Kafka 0.11 and later) are read")
            header = parse_header(records, pos)
            if crc32c(records[pos + ATTRIBUTES_OFFSET:batch_end]) != header.crc:
                raise CorruptRecordError(f"Record batch at offset {header.base_offset} fails its CRC check")
            skip = header.is_control or header.last_offset < position  # before the range: only bookkeeping
            if read_committed and header.has_producer_id:
                while next_aborted < len(aborted_queue) and aborted_queue[next_aborted][0] <= header.last_offset:
                    aborted_producers.add(aborted_queue[next_aborted][1])
                    next_aborted += 1
                if header.is_control:
                    marker = parse_marker(records[pos:batch_end], header)
                    if marker is not None and marker.is_abort:
                        aborted_producers.discard(header.producer_id)
                elif header.is_transactional and header.producer_id in aborted_producers:
                    skip = True
            if not skip:
                self._append_batch(records, pos, batch_end, header, position, end)
            position = max(position, header.last_offset + 1)
            pos = batch_end
        return position

    def _append_batch(self, records: memoryview, pos: int, batch_end: int, header, position: int, end: int) -> None:
        body: memoryview | bytes = records[pos + HEADER_SIZE:batch_end]
        if header.compression != NONE:
            body = decompress(header.compression, body, MAX_DECOMPRESSED_BYTES)
        log_append_time = header.max_timestamp if header.timestamp_type == LOG_APPEND_TIME else None
        kept = self.columns.append(body, 0, len(body), header.records_count, header.base_offset,
                                   header.base_timestamp, log_append_time, position, end)
        self.timestamp_types += (_LOG_APPEND_TIME_ROW if log_append_time is not None else _CREATE_TIME_ROW) * kept

    def take_timestamp_types(self) -> bytearray:
        types, self.timestamp_types = self.timestamp_types, bytearray()
        return types
