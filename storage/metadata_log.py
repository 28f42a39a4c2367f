"""The controller's durable state: KRaft's metadata log, the partition `__cluster_metadata-0`.

Every change to cluster state is one record batch whose record values are metadata records (see
`minikafka.protocol.metadata_records`), appended with the controller epoch as the batch's partition leader epoch
and fsynced before `append` returns: a change is durable before the controller acts on it, and nothing is ever
rewritten. On start the controller replays the log to rebuild its state. The directory is an ordinary partition
directory in Kafka's layout (segments, indexes, leader-epoch-checkpoint), so Kafka's tools can read it.

An append that fails (a full disk) leaves the log as it was: whatever it wrote is cut off again and made durable,
so a change the controller reports as failed is never replayed later. Should even that fail, the log refuses
every further append, and reads never go past the last append that succeeded.

Plain synchronous file I/O like the rest of storage: a caller on an event loop runs each call on a worker thread
(`trio.to_thread`), one call at a time.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import NamedTuple

from kafka.record.default_records import DefaultRecordBatch
from kafka.record.memory_records import MemoryRecordsBuilder

from minikafka.protocol.errors import ErrorCode
from minikafka.protocol.internal_topics import METADATA_TOPIC
from minikafka.protocol.metadata_records import MetadataRecord, MetadataRecordError, decode_record, encode_record
from minikafka.protocol.record_batch import iter_batches

from .checkpoint import fsync_dir
from .errors import CorruptRecordError, KafkaStorageError, StorageError
from .log import Log
from .log_config import LogConfig

logger = logging.getLogger(__name__)

METADATA_PARTITION = 0
READ_CHUNK_BYTES = 1 << 20

# Kafka's cap on one batch of metadata records is 8 MiB. Snapshots, not retention, bound the metadata log, so
# retention never deletes from it.
METADATA_LOG_CONFIG = LogConfig(max_message_bytes=8 * 1024 * 1024, retention_bytes=-1, retention_ms=-1)


class StaleControllerEpochError(StorageError):
    """An append under a controller epoch older than the newest one already in the log: a deposed controller."""

    CODE = ErrorCode.STALE_CONTROLLER_EPOCH


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class MetadataEntry(NamedTuple):
    """A metadata record with its offset and the controller epoch its batch was written under."""

    offset: int
    controller_epoch: int
    record: MetadataRecord


def decode_entries(data: bytes | bytearray | memoryview, source: str) -> Iterator[MetadataEntry]:
    """The records of the whole batches in `data` (as the log holds them, or as a Fetch of `__cluster_metadata`
    answers them), in offset order. Control batches are skipped; a record that does not decode raises
    MetadataRecordError naming its offset and `source`, since state rebuilt without it would be wrong."""
    for position, header in iter_batches(data):
        if header.is_control:
            continue
        for record in DefaultRecordBatch(bytes(data[position : position + header.size])):
            yield MetadataEntry(record.offset, header.partition_leader_epoch,
                                _decode(source, record.offset, record.value))


def _decode(source: str, offset: int, value: bytes | None) -> MetadataRecord:
    if value is None:
        raise MetadataRecordError(f"record at offset {offset} of {source} has no value")
    try:
        return decode_record(value)
    except MetadataRecordError as exc:
        raise MetadataRecordError(f"record at offset {offset} of {source}: {exc}") from None


class MetadataLog:
    """Appends batches of metadata records durably, and replays them in offset order."""

    def __init__(self, log: Log, controller_epoch: int) -> None:
        self._log = log
        self._controller_epoch = controller_epoch
        self._end_offset = log.log_end_offset  # one past the last record of the last append that succeeded
        self._failure: str | None = None  # why appends are refused, once a failed one could not be undone

    @classmethod
    def open(cls, log_dir: Path, *, controller_epoch: int | None = None, now_ms: int | None = None) -> MetadataLog:
        """Open (or create) `<log_dir>/__cluster_metadata-0` to append under `controller_epoch`.

        Without one, the epoch is one past the newest in the log (0 for a new log), as a quorum of one elects
        itself in a new epoch each time it starts. Every segment is re-validated, as Kafka opens its metadata log
        from recovery point 0: a tail torn by a crash is cut off, so replay sees whole batches only.
        """
        log = Log.open(
            Path(log_dir) / f"{METADATA_TOPIC}-{METADATA_PARTITION}",
            METADATA_TOPIC,
            METADATA_PARTITION,
            METADATA_LOG_CONFIG,
            recovery_point=0,
            now_ms=_now_ms() if now_ms is None else now_ms,
        )
        latest = log.leader_epoch_cache.latest_epoch
        if controller_epoch is None:
            controller_epoch = 0 if latest is None else latest + 1
        elif latest is not None and controller_epoch < latest:
            log.close()
            raise StaleControllerEpochError(
                f"Controller epoch {controller_epoch} is older than epoch {latest} already in {log.name}"
            )
        return cls(log, controller_epoch)

    @property
    def controller_epoch(self) -> int:
        """The epoch appends are written under (each batch's partition leader epoch)."""
        return self._controller_epoch

    @property
    def log_end_offset(self) -> int:
        """The offset the next record gets; after a replay, one past the last record applied."""
        return self._end_offset

    @property
    def dir(self) -> Path:
        return self._log.dir

    def append(self, records: Sequence[MetadataRecord], now_ms: int | None = None) -> int:
        """Append `records` as one batch (all or nothing, as a change to cluster state must be), fsync it, and
        return the offset of its last record.

        Raises RecordTooLargeError for a batch over 8 MiB and KafkaStorageError for an I/O failure, after which
        the log holds what it held before (see the module doc).
        """
        if not records:
            raise ValueError("a metadata log batch needs at least one record")
        if self._failure is not None:
            raise KafkaStorageError(f"The metadata log {self.dir} refuses appends: {self._failure}")
        now = _now_ms() if now_ms is None else now_ms
        values = [encode_record(record) for record in records]
        builder = MemoryRecordsBuilder(
            magic=2, compression_type=0, batch_size=sum(len(v) + 32 for v in values) + 128
        )
        for value in values:
            if builder.append(timestamp=now, key=None, value=value, headers=[]) is None:
                raise ValueError("the record batch builder refused a metadata record")
        builder.close()
        try:
            info = self._log.append_as_leader(bytearray(builder.buffer()), self._controller_epoch, now)
            self._log.flush()
        except (KafkaStorageError, OSError) as exc:
            self._undo_append(exc)
            if isinstance(exc, KafkaStorageError):
                raise
            raise KafkaStorageError(f"Error while appending to the metadata log {self.dir}: {exc}") from exc
        self._end_offset = info.last_offset + 1
        return info.last_offset

    def _undo_append(self, cause: Exception) -> None:
        """Cut the log back to the end of the last append that succeeded, durably."""
        try:
            self._log.truncate_to(self._end_offset)
            self._log.active_segment.flush()
            fsync_dir(self.dir)
        except (KafkaStorageError, OSError) as exc:
            self._failure = f"a failed append ({cause}) could not be undone: {exc}"
            logger.error("%s: %s; restart the controller once the disk is repaired", self.dir, self._failure)

    @property
    def log_start_offset(self) -> int:
        return self._log.log_start_offset

    def replay(self) -> Iterator[MetadataRecord]:
        """Every metadata record in offset order. Control batches (Kafka's KRaft leader changes) carry no cluster
        state and are skipped; a record that does not decode raises MetadataRecordError naming its offset, since
        state rebuilt without it would be wrong."""
        return (entry.record for entry in self.entries())

    def entries(self) -> Iterator[MetadataEntry]:
        """Every metadata record in offset order with its offset and controller epoch, as `replay`."""
        log = self._log
        offset = log.log_start_offset
        end = self._end_offset
        while offset < end:
            data = log.read(offset, READ_CHUNK_BYTES, max_offset=end, min_one_message=True)
            next_offset = offset
            for _position, header in iter_batches(data):
                next_offset = header.last_offset + 1
            if next_offset <= offset:
                raise CorruptRecordError(f"{log.name} holds no whole batch at offset {offset}")
            yield from decode_entries(data, log.name)
            offset = next_offset

    def read(self, offset: int, max_bytes: int) -> bytes:
        """Whole batches from the one holding `offset`, at most `max_bytes` except that the first batch always
        comes whole: what a Fetch of `__cluster_metadata` answers. Empty at the log end offset; raises
        OffsetOutOfRangeError outside [log start offset, log end offset]."""
        return self._log.read(offset, max_bytes, max_offset=self._end_offset, min_one_message=True)

    def close(self) -> None:
        """Flush and close; on a full or failing disk, log it and let go of the files (the next open recovers)."""
        try:
            self._log.close()
        except (KafkaStorageError, OSError) as exc:
            logger.error("%s not closed cleanly, the next start recovers it: %s", self.dir, exc)
            self._log.abandon()

    def __repr__(self) -> str:
        return f"MetadataLog({self._log!r}, controller_epoch={self._controller_epoch})"
