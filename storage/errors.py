"""Storage errors, each carrying the Kafka error code the broker answers with (`.code`)."""

from __future__ import annotations

from minikafka.protocol.record_batch import CorruptRecordError, InvalidRecordError

__all__ = [
    "CorruptRecordError",
    "InconsistentTopicIdError",
    "InvalidProducerEpochError",
    "InvalidRecordError",
    "InvalidTimestampError",
    "KafkaStorageError",
    "OffsetOutOfRangeError",
    "OutOfOrderSequenceError",
    "RecordBatchTooLargeError",
    "RecordTooLargeError",
    "StorageError",
    "UnexpectedAppendOffsetError",
]


class StorageError(Exception):
    """Base of the errors raised by the storage layer itself."""

    code = -1  # UNKNOWN_SERVER_ERROR


class OffsetOutOfRangeError(StorageError):
    """A fetch/ListOffsets/DeleteRecords offset outside [log start offset, log end offset]."""

    code = 1


class RecordTooLargeError(StorageError):
    """A batch larger than the topic's max.message.bytes."""

    code = 10


class RecordBatchTooLargeError(StorageError):
    """An append larger than segment.bytes: it could never fit in a segment."""

    code = 18


class InvalidTimestampError(StorageError):
    """A CreateTime timestamp outside message.timestamp.before/after.max.ms of broker time."""

    code = 32


class OutOfOrderSequenceError(StorageError):
    """An idempotent producer skipped or repeated sequence numbers."""

    code = 45


class InvalidProducerEpochError(StorageError):
    """A batch from a producer epoch older than the one already seen (a fenced producer)."""

    code = 47


class KafkaStorageError(StorageError):
    """An I/O failure on the log directory (disk full, unreadable checkpoint)."""

    code = 56


class InconsistentTopicIdError(StorageError):
    """The partition directory belongs to another incarnation of the topic (other topic id)."""

    code = 103


class UnexpectedAppendOffsetError(StorageError):
    """A follower append whose first offset is below the log end offset."""

    def __init__(self, message: str, first_offset: int, last_offset: int) -> None:
        super().__init__(message)
        self.first_offset = first_offset
        self.last_offset = last_offset
