"""SCRAM credentials on the controller (Kafka's ScramControlManager): validation of AlterUserScramCredentials and the
UserScramCredentialRecords / RemoveUserScramCredentialRecords that carry it (KIP-554).

The answer is one result per user, as Kafka's: a user named more than once in a request (deleted twice, upserted
twice, or deleted and upserted, whatever the mechanisms) fails with DUPLICATE_RESOURCE and nothing of it is written.
An empty user name is UNACCEPTABLE_CREDENTIAL, an unknown mechanism UNSUPPORTED_SASL_MECHANISM, iterations outside
4096-16384 UNACCEPTABLE_CREDENTIAL, the deletion of a credential the user does not have RESOURCE_NOT_FOUND. An
upsertion carries the client's salt and salted password; the controller keeps the keys derived from it
(scram_credentials.credential_from_salted_password), never the salted password. The accepted changes are committed
together. Results list the deleted users, then the upserted ones, then those refused (Kafka's grouping).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from minikafka.broker.metadata.scram_credentials import (
    MAX_ITERATIONS,
    MECHANISM_NAMES,
    MIN_ITERATIONS,
    ScramCredentials,
    credential_from_salted_password,
    credential_record,
)
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.protocol.metadata_records import MetadataRecord, RemoveUserScramCredentialRecord


@dataclass(frozen=True)
class ScramCredentialDeletion:
    name: str
    mechanism: int


@dataclass(frozen=True)
class ScramCredentialUpsertion:
    name: str
    mechanism: int
    iterations: int
    salt: bytes = field(repr=False)
    salted_password: bytes = field(repr=False)


def _duplicate() -> KafkaError:
    return KafkaError(ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request")


def validate_user_and_mechanism(name: str, mechanism: int) -> None:
    if not name:
        raise KafkaError(ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
    if mechanism not in MECHANISM_NAMES:
        raise KafkaError(ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")


def validate_upsertion(upsertion: ScramCredentialUpsertion) -> None:
    validate_user_and_mechanism(upsertion.name, upsertion.mechanism)
    if upsertion.iterations < MIN_ITERATIONS:
        raise KafkaError(ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
    if upsertion.iterations > MAX_ITERATIONS:
        raise KafkaError(ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations")


def validate_deletion(credentials: ScramCredentials, deletion: ScramCredentialDeletion) -> None:
    validate_user_and_mechanism(deletion.name, deletion.mechanism)
    if (deletion.name, deletion.mechanism) not in credentials:
        raise KafkaError(ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")


def alter_scram_credentials(credentials: ScramCredentials, deletions: Sequence[ScramCredentialDeletion],
                            upsertions: Sequence[ScramCredentialUpsertion]
                            ) -> tuple[list[MetadataRecord], list[tuple[str, KafkaError | None]]]:
    """The records of the accepted changes (to be committed together), and each user's result (None: accepted)."""
    to_delete: dict[str, ScramCredentialDeletion] = {}
    to_upsert: dict[str, ScramCredentialUpsertion] = {}
    errors: dict[str, KafkaError] = {}
    for deletion in deletions:
        if deletion.name in errors:
            continue
        if to_delete.pop(deletion.name, None) is not None:
            errors[deletion.name] = _duplicate()
            continue
        try:
            validate_deletion(credentials, deletion)
        except KafkaError as exc:
            errors[deletion.name] = exc
        else:
            to_delete[deletion.name] = deletion
    for upsertion in upsertions:
        if upsertion.name in errors:
            continue
        if to_delete.pop(upsertion.name, None) is not None or to_upsert.pop(upsertion.name, None) is not None:
            errors[upsertion.name] = _duplicate()
            continue
        try:
            validate_upsertion(upsertion)
        except KafkaError as exc:
            errors[upsertion.name] = exc
        else:
            to_upsert[upsertion.name] = upsertion
    records: list[MetadataRecord] = [RemoveUserScramCredentialRecord(name=d.name, mechanism=d.mechanism)
                                     for d in to_delete.values()]
    records += [credential_record(u.name, u.mechanism, credential_from_salted_password(
        u.mechanism, u.salt, u.salted_password, u.iterations)) for u in to_upsert.values()]
    results: list[tuple[str, KafkaError | None]] = [(name, None) for name in (*to_delete, *to_upsert)]
    results += list(errors.items())
    return records, results
