"""Storage errors: members of the one Kafka error family, each class with the code the broker answers with."""

from __future__ import annotations

from minikafka.protocol.errors import ErrorCode, FixedCodeError
from minikafka.protocol.record_batch import CorruptRecordError, InvalidRecordError

__all__ = [
    "CorruptRecordError",
    "InconsistentTopicIdError",
    "InvalidProducerEpochError",
    "InvalidRecordError",
    "InvalidTimestampError",
    "InvalidTxnStateError",
    "KafkaStorageError",
    "OffsetOutOfRangeError",
    "OutOfOrderSequenceError",
    "RecordBatchTooLargeError",
    "RecordTooLargeError",
    "StorageError",
    "TransactionCoordinatorFencedError",
    "UnexpectedAppendOffsetError",
]


class StorageError(FixedCodeError):
    """Base of the errors raised by the storage layer itself."""

    CODE = ErrorCode.UNKNOWN_SERVER_ERROR


class OffsetOutOfRangeError(StorageError):
    """A fetch/ListOffsets/DeleteRecords offset outside [log start offset, log end offset]."""

    CODE = ErrorCode.OFFSET_OUT_OF_RANGE


class RecordTooLargeError(StorageError):
    """A batch larger than the topic's max.message.bytes."""

    CODE = ErrorCode.MESSAGE_TOO_LARGE


class RecordBatchTooLargeError(StorageError):
    """An append larger than segment.bytes: it could never fit in a segment."""

    CODE = ErrorCode.RECORD_LIST_TOO_LARGE


class InvalidTimestampError(StorageError):
    """A CreateTime timestamp outside message.timestamp.before/after.max.ms of broker time."""

    CODE = ErrorCode.INVALID_TIMESTAMP


class OutOfOrderSequenceError(StorageError):
    """An idempotent producer skipped or repeated sequence numbers."""

    CODE = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


class InvalidProducerEpochError(StorageError):
    """A batch from a producer epoch older than the one already seen (a fenced producer)."""

    CODE = ErrorCode.INVALID_PRODUCER_EPOCH


class InvalidTxnStateError(StorageError):
    """A non-transactional batch from a producer whose transaction in this partition is still open."""

    CODE = ErrorCode.INVALID_TXN_STATE


class TransactionCoordinatorFencedError(StorageError):
    """An end-transaction marker from a coordinator epoch older than one this partition has seen (a zombie
    coordinator)."""

    CODE = ErrorCode.TRANSACTION_COORDINATOR_FENCED


class KafkaStorageError(StorageError):
    """An I/O failure on the log directory (disk full, unreadable checkpoint)."""

    CODE = ErrorCode.KAFKA_STORAGE_ERROR


class InconsistentTopicIdError(StorageError):
    """The partition directory belongs to another incarnation of the topic (other topic id)."""

    CODE = ErrorCode.INCONSISTENT_TOPIC_ID


class UnexpectedAppendOffsetError(StorageError):
    """A follower append whose first offset is below the log end offset."""

    def __init__(self, message: str, first_offset: int, last_offset: int) -> None:
        super().__init__(message)
        self.first_offset = first_offset
        self.last_offset = last_offset
