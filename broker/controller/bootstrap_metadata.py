"""Formatting a controller's metadata dir with bootstrap records, as `kafka-storage.sh format` does (Kafka's
Formatter and BootstrapMetadata): meta.properties with the cluster id, and records committed before the controller
first starts — the SCRAM credentials of `--add-scram`, so a cluster whose listeners take only SCRAM has its first
admin.

A dir that holds meta.properties already is formatted: Kafka refuses it ("already formatted") unless told to
ignore it. The records go in the metadata log as any commit would, so the controller replays them at its first
start like everything it wrote itself.
"""
from __future__ import annotations

import base64
import re
from collections.abc import Sequence
from pathlib import Path

from minikafka.broker.metadata.scram_credentials import MECHANISM_TYPES, credential_record
from minikafka.broker.security.scram import ScramMechanism, generate_credential
from minikafka.config import ConfigError
from minikafka.protocol.metadata_records import MetadataRecord, UserScramCredentialRecord
from minikafka.storage.log_dir import LogDir, read_meta_properties
from minikafka.storage.metadata_log import MetadataLog

META_PROPERTIES = "meta.properties"
_SCRAM_ARGUMENT = re.compile(r"^(?P<mechanism>[A-Z0-9-]+)=\[(?P<body>.*)\]$")


def parse_add_scram(argument: str) -> UserScramCredentialRecord:
    """Kafka's ScramParser: `SCRAM-SHA-256=[name=alice,password=alice-secret]`, with optional `iterations=` (4096
    by default) and `salt=` (base64; random, as Kafka makes it, by default)."""
    match = _SCRAM_ARGUMENT.match(argument.strip())
    if match is None:
        raise ConfigError(f"Invalid --add-scram argument {argument!r}: expected MECHANISM=[name=...,password=...]")
    mechanism_name = match["mechanism"]
    if mechanism_name not in MECHANISM_TYPES:
        raise ConfigError(f"The add-scram mechanism {mechanism_name} is not supported.")
    options: dict[str, str] = {}
    for item in match["body"].split(","):
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"Invalid --add-scram entry {item!r}: expected KEY=VALUE")
        options[key.strip()] = value.strip().strip('"')
    if not options.get("name"):
        raise ConfigError("You must supply 'name' to add-scram")
    if "password" not in options:
        raise ConfigError("You must supply 'password' to add-scram")
    mechanism = ScramMechanism.for_mechanism_name(mechanism_name)
    assert mechanism is not None
    try:
        iterations = int(options.get("iterations", mechanism.min_iterations))
        salt = base64.b64decode(options["salt"], validate=True) if "salt" in options else None
    except ValueError as exc:
        raise ConfigError(f"Invalid --add-scram argument {argument!r}: {exc}") from None
    if not mechanism.min_iterations <= iterations <= mechanism.max_iterations:
        raise ConfigError(f"The number of iterations must be between {mechanism.min_iterations} and "
                          f"{mechanism.max_iterations}, not {iterations}")
    credential = generate_credential(mechanism, options["password"], iterations, salt=salt)
    return credential_record(options["name"], MECHANISM_TYPES[mechanism_name], credential)


def format_metadata_dir(metadata_dir: Path, node_id: int, cluster_id: str | None,
                        records: Sequence[MetadataRecord], *, ignore_formatted: bool = False) -> str | None:
    """Format the dir (its meta.properties, then the bootstrap records); the cluster id, or None for a dir left as
    it was with `ignore_formatted`. ConfigError for a dir formatted already."""
    if read_meta_properties(metadata_dir / META_PROPERTIES) is not None:
        if ignore_formatted:
            return None
        raise ConfigError(f"Log directory {metadata_dir} is already formatted. Use --ignore-formatted to ignore this "
                          "directory and format the others.")
    metadata_dir.mkdir(parents=True, exist_ok=True)
    try:
        formatted_id, _directory_id = LogDir(metadata_dir).load_or_create_meta(node_id, cluster_id)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if records:
        metadata_log = MetadataLog.open(metadata_dir)
        try:
            metadata_log.append(records)
        finally:
            metadata_log.close()
    return formatted_id
