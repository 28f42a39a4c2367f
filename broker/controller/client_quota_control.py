"""Client quotas on the controller (Kafka's ClientQuotaControlManager): validation of AlterClientQuotas entries and
the ClientQuotaRecords that carry them.

Each entry is answered on its own: an invalid entity (empty, a repeated or unknown entity type, an empty name, an
ip with a user or client id, an ip that does not resolve), a key the entity cannot hold, a value not above zero or
a fraction for an integral key fails that entry only (INVALID_REQUEST), and nothing of it is written. An entity
named twice in one request fails both times, and a key repeated within an entry fails that entry. A removal of a
key the entity does not hold, or a value it already has, writes nothing.
"""
from __future__ import annotations

import ipaddress
import socket
from collections.abc import Sequence
from dataclasses import dataclass

from minikafka.broker.metadata.client_quota_entity import (
    CLIENT_ID,
    ENTITY_TYPES,
    IP,
    IP_KEYS,
    USER,
    USER_AND_CLIENT_KEYS,
    ClientQuotaEntity,
    ClientQuotas,
    describe_entity,
    quota_entity,
)
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.protocol.metadata_records import ClientQuotaRecord

MAX_INTEGRAL_VALUE = float(2**63 - 1)  # a LONG quota's largest value
FRACTION_TOLERANCE = 1e-6


@dataclass(frozen=True)
class ClientQuotaOp:
    """One op of an AlterClientQuotas entry: set `key` to `value`, or remove it."""

    key: str
    value: float
    remove: bool


@dataclass(frozen=True)
class ClientQuotaAlteration:
    entity: list[tuple[str, str | None]]  # as the request listed it
    ops: list[ClientQuotaOp]


def _invalid(message: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_REQUEST, message)


def validate_entity(pairs: Sequence[tuple[str, str | None]]) -> ClientQuotaEntity:
    if not pairs:
        raise _invalid("Invalid empty client quota entity")
    seen: set[str] = set()
    for entity_type, name in pairs:
        if entity_type in seen:
            raise _invalid(f"Invalid client quota entity, duplicate entity entry {entity_type}")
        if entity_type not in ENTITY_TYPES:
            raise _invalid(f"Unhandled client quota entity type: {entity_type}")
        if name is not None and not name:
            raise _invalid(f"Empty {entity_type} not supported")
        seen.add(entity_type)
    return quota_entity(pairs)


def _resolvable(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        pass
    try:
        socket.getaddrinfo(host, None)
        return True
    except (OSError, UnicodeError):
        return False


def valid_keys(entity: ClientQuotaEntity) -> dict[str, bool]:
    """The keys `entity` may hold, each with whether it is integral."""
    names = dict(entity)
    if IP in names:
        if USER in names or CLIENT_ID in names:
            raise _invalid("Invalid quota entity combination, IP entity should not be combined with User or ClientId")
        ip = names[IP]
        if ip is not None and not _resolvable(ip):
            raise _invalid(f"{ip} is not a valid IP or resolvable host.")
        return IP_KEYS
    return USER_AND_CLIENT_KEYS


def validate_value(keys: dict[str, bool], key: str, value: float) -> None:
    integral = keys.get(key)
    if integral is None:
        raise _invalid(f"Invalid configuration key {key}")
    if value <= 0.0:
        raise _invalid(f"Quota {key} must be greater than 0")
    if integral:
        if value > MAX_INTEGRAL_VALUE:
            raise _invalid(f"Proposed value for {key} is too large for a LONG.")
        if abs(value % 1.0) > FRACTION_TOLERANCE:
            raise _invalid(f"{key} cannot be a fractional value.")


def _entity_records(entity: ClientQuotaEntity, ops: Sequence[ClientQuotaOp],
                    current: dict[str, float]) -> list[ClientQuotaRecord]:
    keys = valid_keys(entity)
    data = [ClientQuotaRecord.EntityData(entity_type=t, entity_name=n) for t, n in entity]
    records = []
    for op in ops:
        if op.remove:
            if op.key in current:
                records.append(ClientQuotaRecord(entity=data, key=op.key, value=0.0, remove=True))
            continue
        validate_value(keys, op.key, op.value)
        if current.get(op.key) != op.value:
            records.append(ClientQuotaRecord(entity=data, key=op.key, value=op.value, remove=False))
    return records


def alter_client_quotas(quotas: ClientQuotas, alterations: Sequence[ClientQuotaAlteration]
                        ) -> tuple[list[ClientQuotaRecord], list[KafkaError | None]]:
    """The records of the valid entries, and each entry's error (None when it is applied)."""
    validated: list[ClientQuotaEntity | KafkaError] = []
    for alteration in alterations:
        try:
            validated.append(validate_entity(alteration.entity))
        except KafkaError as exc:
            validated.append(exc)
    named = [e for e in validated if not isinstance(e, KafkaError)]
    records: list[ClientQuotaRecord] = []
    results: list[KafkaError | None] = []
    for alteration, entity in zip(alterations, validated, strict=True):
        if isinstance(entity, KafkaError):
            results.append(entity)
            continue
        try:
            if named.count(entity) > 1:
                raise _invalid(f"Ignoring duplicate entity {describe_entity(entity)}")
            op_keys = [op.key for op in alteration.ops]
            duplicate = next((k for i, k in enumerate(op_keys) if k in op_keys[:i]), None)
            if duplicate is not None:
                raise _invalid(f"Duplicate quota key {duplicate} not updating quota for this entity "
                               f"{describe_entity(entity)}")
            records += _entity_records(entity, alteration.ops, dict(quotas.get(entity, {})))
            results.append(None)
        except KafkaError as exc:
            results.append(exc)
    return records, results
