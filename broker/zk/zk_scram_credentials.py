"""SCRAM credentials in ZooKeeper, where Kafka's ZooKeeper mode kept them: entries of the user's config znode
/config/users/<url-encoded name> (the znode that holds the user's quotas as well), one per mechanism, keyed
"SCRAM-SHA-256" / "SCRAM-SHA-512" with Kafka's text form of the credential (scram_credentials.credential_to_string).
Each change is announced by a config change notification naming the user's path (`users/<name>`), which the brokers
follow, as Kafka's admin client did.

Entries of the znode that are not credentials (the user's quotas) are kept as they are, as the quota writes keep the
credentials (zk_client_quotas): a user's quotas and credentials live side by side. One batch of records holds
either kind, never both (each comes from its own request), so each write reads the znode as the other left it.
"""
from __future__ import annotations

import json
from collections.abc import Sequence

from minikafka.broker.metadata.client_quota_entity import ZK_DEFAULT, ZK_USERS, desanitize, sanitize
from minikafka.broker.metadata.scram_credentials import (
    ScramCredential,
    ScramCredentialKey,
    ScramCredentials,
    config_credentials,
    credential_data,
    credentials_config,
    is_credential_key,
    users_credentials,
)
from minikafka.broker.zk.kafka_zk_client import CreateOp, KafkaZkClient, SetDataOp, ZkWrite
from minikafka.broker.zk.zk_data import CONFIG_CHANGES_PATH, CONFIG_PATH, decode_config, encode_config
from minikafka.protocol.metadata_records import (
    MetadataRecord,
    RemoveUserScramCredentialRecord,
    UserScramCredentialRecord,
)

CONFIG_CHANGE_PREFIX = f"{CONFIG_CHANGES_PATH}/config_change_"  # ZooKeeper appends the 10-digit sequence


def user_entity_path(user: str) -> str:
    """The user's path below /config, as a change notification names it."""
    return f"{ZK_USERS}/{sanitize(user)}"


async def _user_config(zk: KafkaZkClient, user: str) -> tuple[dict[str, str], bool]:
    """The user's config entries, and whether its znode exists."""
    data, stat = await zk.get_data_and_stat(f"{CONFIG_PATH}/{user_entity_path(user)}")
    return decode_config(ZK_USERS, sanitize(user), data), stat is not None


async def credential_writes(zk: KafkaZkClient, user: str,
                            credentials: dict[int, ScramCredential]) -> list[ZkWrite]:
    """The writes giving the user's config znode exactly these credentials (creating it when missing), its other
    entries kept."""
    config, exists = await _user_config(zk, user)
    kept = {key: value for key, value in config.items() if not is_credential_key(key)}
    data = encode_config({**kept, **credentials_config(credentials)})
    path = f"{CONFIG_PATH}/{user_entity_path(user)}"
    return [SetDataOp(path, data) if exists else CreateOp(path, data)]


async def scram_credential_record_writes(zk: KafkaZkClient, credentials: ScramCredentials,
                                         records: Sequence[MetadataRecord]) -> list[ZkWrite]:
    """The writes of a batch's credential records (applied to `credentials`, the state before them): each user's
    config znode, then one change notification per user."""
    changed: dict[str, dict[int, ScramCredential]] = {}
    for record in records:
        if isinstance(record, UserScramCredentialRecord):
            held = changed.setdefault(record.name, users_credentials(credentials, record.name))
            held[record.mechanism] = credential_data(record)
        elif isinstance(record, RemoveUserScramCredentialRecord):
            held = changed.setdefault(record.name, users_credentials(credentials, record.name))
            held.pop(record.mechanism, None)
    writes: list[ZkWrite] = []
    for user, user_credentials in changed.items():
        writes += await credential_writes(zk, user, user_credentials)
    for user in changed:
        notification = json.dumps({"version": 2, "entity_path": user_entity_path(user)}).encode()
        writes.append(CreateOp(CONFIG_CHANGE_PREFIX, notification, sequential=True))
    return writes


async def read_scram_credentials(zk: KafkaZkClient) -> dict[ScramCredentialKey, ScramCredential]:
    """Every user's credentials, as the controller rebuilds them when it takes over and a broker loads them at
    start."""
    found: dict[ScramCredentialKey, ScramCredential] = {}
    for child in sorted(await zk.get_children(f"{CONFIG_PATH}/{ZK_USERS}")):
        if child == ZK_DEFAULT:
            continue
        user = desanitize(child)
        for mechanism, credential in (await read_user_credentials(zk, user)).items():
            found[(user, mechanism)] = credential
    return found


async def read_user_credentials(zk: KafkaZkClient, user: str) -> dict[int, ScramCredential]:
    """One user's credentials by mechanism type, as its config znode holds them ({} when none, or no znode)."""
    config, _exists = await _user_config(zk, user)
    return config_credentials(config)
