"""What a share fetch answers of what it read: the batch headers of bytes and of file slices alike (a partial
batch at the end left out), and only the batches that hold acquired offsets, still as a slice of the segment file
when read from one."""
from __future__ import annotations

import os
import struct
from pathlib import Path

from minikafka.broker.server.share.share_partition import AcquiredRecords
from minikafka.broker.server.share.share_partition_manager import (
    _Read,
    batch_headers,
    iso_duration_ms,
    records_of,
    split_at_batches,
)
from minikafka.protocol.file_records import FileRecords
from tests.raw_client import record_batch


def batches(*spans: tuple[int, int]) -> bytes:
    """Batches of the given (base offset, record count), back to back as a log holds them."""
    out = b""
    for base, count in spans:
        batch = bytearray(record_batch([b"v%d" % (base + i) for i in range(count)]))
        struct.pack_into(">q", batch, 0, base)  # the base offset is outside the CRC, as the log rewrites it
        out += bytes(batch)
    return out


def test_batch_headers_of_bytes_and_of_a_file(tmp_path: Path) -> None:
    data = batches((10, 3), (13, 2), (15, 4))
    path = tmp_path / "segment.log"
    path.write_bytes(b"x" * 7 + data)
    fd = os.open(path, os.O_RDONLY)
    try:
        from_file = FileRecords(fd, 7, len(data) - 5)  # the last batch cut short: not a batch yet
        in_memory = [(pos, h.base_offset, h.last_offset) for pos, h in batch_headers(data)]
        assert [(pos, h.base_offset, h.last_offset) for pos, h in batch_headers(from_file)] == in_memory[:2]
        assert [(b, e) for _, b, e in in_memory] == [(10, 12), (13, 14), (15, 18)]
        whole = FileRecords(fd, 7, len(data))
        read = _Read(None, 14, whole, batch_headers(whole))  # type: ignore[arg-type]
        middle = records_of(read, [AcquiredRecords(14, 14, 1)])
        assert isinstance(middle, FileRecords) and middle.read() == data[in_memory[1][0]:in_memory[2][0]]
        tail = records_of(read, [AcquiredRecords(14, 14, 1), AcquiredRecords(16, 17, 2)])
        assert tail.read() == data[in_memory[1][0]:]  # type: ignore[union-attr]
        assert records_of(read, []) == b""
        in_bytes = _Read(None, 10, data, batch_headers(data))  # type: ignore[arg-type]
        assert records_of(in_bytes, [AcquiredRecords(10, 11, 1)]) == data[:in_memory[1][0]]
    finally:
        os.close(fd)


def test_share_auto_offset_reset_durations() -> None:
    assert iso_duration_ms("PT1H") == 3_600_000
    assert iso_duration_ms("P1DT2M3.5S") == 86_400_000 + 120_000 + 3_500
    assert iso_duration_ms("pt0.25s") == 250


def test_acquired_ranges_split_at_log_batches_by_batch_size() -> None:
    bases = [0, 3, 5, 9, 10, 20]  # log batches 0-2, 3-4, 5-8, 9, 10-19, 20-...
    assert split_at_batches([AcquiredRecords(0, 24, 1)], bases, 4) == [
        AcquiredRecords(0, 4, 1), AcquiredRecords(5, 8, 1), AcquiredRecords(9, 19, 1), AcquiredRecords(20, 24, 1)]
    assert split_at_batches([AcquiredRecords(4, 12, 2)], bases, 100) == [AcquiredRecords(4, 12, 2)]
    assert split_at_batches([AcquiredRecords(1, 1, 1), AcquiredRecords(3, 9, 1)], bases, 1) == [
        AcquiredRecords(1, 1, 1), AcquiredRecords(3, 4, 1), AcquiredRecords(5, 8, 1), AcquiredRecords(9, 9, 1)]
    assert split_at_batches([AcquiredRecords(0, 9, 1)], bases, 0) == [AcquiredRecords(0, 9, 1)]
