"""Records of the coordinators' internal topics in Kafka's own format: `__transaction_state`'s keys and values."""
from .transaction_log import (
    HIGHEST_VALUE_VERSION,
    KEY_VERSION,
    LOWEST_VALUE_VERSION,
    PartitionsSchema,
    TransactionLogRecordError,
    TransactionLogValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)

__all__ = [
    "HIGHEST_VALUE_VERSION",
    "KEY_VERSION",
    "LOWEST_VALUE_VERSION",
    "PartitionsSchema",
    "TransactionLogRecordError",
    "TransactionLogValue",
    "decode_key",
    "decode_value",
    "encode_key",
    "encode_value",
]
