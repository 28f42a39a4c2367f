"""Records of `__transaction_state`, the transaction coordinator's log (Kafka's TransactionLog serde).

A record's key is a big-endian int16, 0, then a TransactionLogKey: the transactional id. Its value is a big-endian
int16 version, then a TransactionLogValue of that version: the transactional id's transaction state after a
transition; a null value is a tombstone (the transactional id expired). Value version 1 is flexible (compact strings
and arrays, tagged fields); Kafka writes it when the cluster's transaction.version feature is 1 or more and version 0
below that, and reads both, as this module does. The specs are the JSON files beside this module, loaded by
kafka-python's `ApiData`, so the bytes are Kafka's both ways.
"""
from __future__ import annotations

import types
from dataclasses import dataclass
from typing import Any

from kafka.protocol.api_data import ApiData

from minikafka.protocol.coordinator_records.record_decoding import decode_message, split_version
from minikafka.protocol.record_batch import NO_PRODUCER_ID
from minikafka.protocol.schema_checks import Checker, build_checker

KEY_VERSION = 0
LOWEST_VALUE_VERSION = 0
HIGHEST_VALUE_VERSION = 1


class TransactionLogRecordError(ValueError):
    """Bytes that are not a `__transaction_state` record this broker reads: an unknown key or value version, or a
    body that is cut short, malformed, or followed by extra bytes."""


@dataclass(frozen=True)
class PartitionsSchema:
    """A topic's partitions in a transaction (the spec's PartitionsSchema)."""

    topic: str
    partition_ids: tuple[int, ...]


@dataclass(frozen=True, kw_only=True)
class TransactionLogValue:
    """A transactional id's transaction state as the coordinator logs it: the fields of every version, so a
    version 0 value reads with the tagged fields of version 1 at their defaults."""

    producer_id: int
    previous_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_status: int
    transaction_partitions: tuple[PartitionsSchema, ...] | None
    transaction_last_update_timestamp_ms: int
    transaction_start_timestamp_ms: int
    client_transaction_version: int = 0


def _message_class(name: str) -> Any:
    """kafka-python's message class for the spec `<name>.json` beside this module.

    Its metaclass finds the spec by the class's name, so the class carries Kafka's generated name; it stays private
    under another binding because this module's dataclasses are its public face.
    """
    return types.new_class(name, (ApiData,), {"load_json": __package__})


_KEY_MESSAGE = _message_class("TransactionLogKey")
_VALUE_MESSAGE = _message_class("TransactionLogValue")

# kafka-python decodes a null where the spec allows none (a null transactional id or topic); Kafka's readers refuse it.
_KEY_CHECK = build_checker(_KEY_MESSAGE._struct, KEY_VERSION, False, "TransactionLogKey")
_VALUE_CHECKS: dict[int, Checker | None] = {
    version: build_checker(_VALUE_MESSAGE._struct, version, _VALUE_MESSAGE.flexible_version_q(version),
                           "TransactionLogValue")
    for version in range(LOWEST_VALUE_VERSION, HIGHEST_VALUE_VERSION + 1)
}


def encode_key(transactional_id: str) -> bytes:
    """The key bytes of the records about `transactional_id`."""
    key: bytes = _KEY_MESSAGE(transactional_id=transactional_id).encode(version=KEY_VERSION, header=True)
    return key


def decode_key(data: bytes | bytearray | memoryview) -> str:
    """The transactional id in a record's key bytes."""
    version, body = split_version(bytes(data), "transaction log key", TransactionLogRecordError)
    if version != KEY_VERSION:
        raise TransactionLogRecordError(f"unknown transaction log key version {version}")
    message = decode_message(_KEY_MESSAGE, body, version, _KEY_CHECK, "TransactionLogKey", TransactionLogRecordError)
    transactional_id: str = message.transactional_id
    return transactional_id


def encode_value(value: TransactionLogValue, version: int) -> bytes:
    """The value bytes of `value` at `version`; version 0 has no room for the tagged fields, so it drops them."""
    if not LOWEST_VALUE_VERSION <= version <= HIGHEST_VALUE_VERSION:
        raise ValueError(f"transaction log value version {version} is outside "
                         f"{LOWEST_VALUE_VERSION}-{HIGHEST_VALUE_VERSION}")
    partitions = None if value.transaction_partitions is None else [
        _VALUE_MESSAGE.PartitionsSchema(topic=p.topic, partition_ids=list(p.partition_ids))
        for p in value.transaction_partitions
    ]
    message = _VALUE_MESSAGE(
        producer_id=value.producer_id,
        previous_producer_id=value.previous_producer_id,
        next_producer_id=value.next_producer_id,
        producer_epoch=value.producer_epoch,
        transaction_timeout_ms=value.transaction_timeout_ms,
        transaction_status=value.transaction_status,
        transaction_partitions=partitions,
        transaction_last_update_timestamp_ms=value.transaction_last_update_timestamp_ms,
        transaction_start_timestamp_ms=value.transaction_start_timestamp_ms,
        client_transaction_version=value.client_transaction_version,
    )
    encoded: bytes = message.encode(version=version, header=True)
    return encoded


def decode_value(data: bytes | bytearray | memoryview | None) -> TransactionLogValue | None:
    """The transaction state in a record's value bytes; None for a tombstone."""
    if data is None:
        return None
    version, body = split_version(bytes(data), "transaction log value", TransactionLogRecordError)
    if not LOWEST_VALUE_VERSION <= version <= HIGHEST_VALUE_VERSION:
        raise TransactionLogRecordError(f"unknown transaction log value version {version}")
    message = decode_message(_VALUE_MESSAGE, body, version, _VALUE_CHECKS[version], "TransactionLogValue",
                             TransactionLogRecordError)
    partitions = None if message.transaction_partitions is None else tuple(
        PartitionsSchema(p.topic, tuple(p.partition_ids)) for p in message.transaction_partitions
    )
    return TransactionLogValue(
        producer_id=message.producer_id,
        previous_producer_id=message.previous_producer_id,
        next_producer_id=message.next_producer_id,
        producer_epoch=message.producer_epoch,
        transaction_timeout_ms=message.transaction_timeout_ms,
        transaction_status=message.transaction_status,
        transaction_partitions=partitions,
        transaction_last_update_timestamp_ms=message.transaction_last_update_timestamp_ms,
        transaction_start_timestamp_ms=message.transaction_start_timestamp_ms,
        client_transaction_version=message.client_transaction_version,
    )
