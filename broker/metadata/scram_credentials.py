"""SCRAM credentials as cluster metadata (KIP-554), shared by the metadata image, the controller, the ZooKeeper store
and the brokers: the mechanisms by Kafka's type ids, the iteration bounds, what a credential holds, how the controller
derives it from a client's salted password (Kafka's ScramFormatter), and its text form in ZooKeeper (Kafka's
ScramCredentialUtils).

A credential is keyed by (user name, mechanism type). No password is kept, nor the salted password: only the salt,
StoredKey = H(HMAC(SaltedPassword, "Client Key")), ServerKey = HMAC(SaltedPassword, "Server Key") and the iteration
count, with H and HMAC of the mechanism's hash. In ZooKeeper a user's credentials are entries of the user's config
znode (/config/users/<url-encoded name>, the one that holds the user's quotas too), one per mechanism, keyed by the
mechanism's name with the value `salt=<base64>,stored_key=<base64>,server_key=<base64>,iterations=<n>`.
"""
from __future__ import annotations

from collections.abc import Mapping

from minikafka.broker.metadata.client_quota_entity import ZK_DEFAULT, ZK_USERS, desanitize
from minikafka.broker.security.scram import (
    ScramCredential,
    ScramMechanism,
    client_key,
    credential_from_string,
    credential_to_string,
    server_key,
    stored_key,
)
from minikafka.protocol.metadata_records import UserScramCredentialRecord

UNKNOWN = 0  # Kafka's ScramMechanism.UNKNOWN: a type id no mechanism has
SCRAM_SHA_256 = ScramMechanism.SCRAM_SHA_256.type_id
SCRAM_SHA_512 = ScramMechanism.SCRAM_SHA_512.type_id
MECHANISMS = {m.type_id: m for m in ScramMechanism}
MECHANISM_NAMES = {m.type_id: m.mechanism_name for m in ScramMechanism}
MECHANISM_TYPES = {name: mechanism for mechanism, name in MECHANISM_NAMES.items()}
MIN_ITERATIONS = ScramMechanism.SCRAM_SHA_256.min_iterations  # Kafka's ScramMechanism.minIterations (both)
MAX_ITERATIONS = ScramMechanism.SCRAM_SHA_256.max_iterations  # the most AlterUserScramCredentials accepts


ScramCredentialKey = tuple[str, int]  # (user name, mechanism type)
# Every credential of the cluster, by user name and mechanism type.
ScramCredentials = Mapping[ScramCredentialKey, ScramCredential]


def mechanism_name(mechanism: int) -> str | None:
    """The name of a mechanism type ("SCRAM-SHA-256"), None for one that is not a mechanism."""
    return MECHANISM_NAMES.get(mechanism)


def credential_from_salted_password(mechanism: int, salt: bytes, salted_password: bytes,
                                    iterations: int) -> ScramCredential:
    """The credential of a salted password, as Kafka's controller derives it (ScramFormatter's clientKey, storedKey
    and serverKey); KeyError for a type that is not a mechanism."""
    scram = MECHANISMS[mechanism]
    return ScramCredential(salt=salt, stored_key=stored_key(scram, client_key(scram, salted_password)),
                           server_key=server_key(scram, salted_password), iterations=iterations)


def credential_data(record: UserScramCredentialRecord) -> ScramCredential:
    return ScramCredential(salt=bytes(record.salt), stored_key=bytes(record.stored_key),
                               server_key=bytes(record.server_key), iterations=record.iterations)


def credential_record(user: str, mechanism: int, credential: ScramCredential) -> UserScramCredentialRecord:
    return UserScramCredentialRecord(name=user, mechanism=mechanism, salt=credential.salt,
                                     stored_key=credential.stored_key, server_key=credential.server_key,
                                     iterations=credential.iterations)


def credential_records(credentials: ScramCredentials) -> list[UserScramCredentialRecord]:
    """The records that rebuild these credentials in an image, by user and mechanism."""
    return [credential_record(user, mechanism, credential)
            for (user, mechanism), credential in sorted(credentials.items())]


def users_credentials(credentials: ScramCredentials, user: str) -> dict[int, ScramCredential]:
    """One user's credentials by mechanism type."""
    return {mechanism: credential for (name, mechanism), credential in credentials.items() if name == user}


# ---- ZooKeeper: a user's config entries ----------------------------------------------------------------------------

def is_credential_key(key: str) -> bool:
    """Whether a user config entry is a SCRAM credential (keyed by a mechanism's name)."""
    return key in MECHANISM_TYPES


def config_credentials(config: Mapping[str, str]) -> dict[int, ScramCredential]:
    """The credentials a user's ZooKeeper config holds, by mechanism type; an entry that does not parse is left
    out (Kafka's broker fails to load it as well)."""
    found = {}
    for key, text in config.items():
        mechanism = MECHANISM_TYPES.get(key)
        if mechanism is None:
            continue
        try:
            found[mechanism] = credential_from_string(text)
        except ValueError:
            continue
    return found


def credentials_config(credentials: Mapping[int, ScramCredential]) -> dict[str, str]:
    """A user's credentials as ZooKeeper config entries."""
    return {MECHANISM_NAMES[mechanism]: credential_to_string(credential)
            for mechanism, credential in sorted(credentials.items())}


def user_of_zk_path(path: str) -> str | None:
    """The user whose config a path below /config names (`users/<url-encoded name>`); None for any other entity
    (a user's client, a default, a topic)."""
    parts = path.strip("/").split("/")
    if len(parts) != 2 or parts[0] != ZK_USERS or not parts[1] or parts[1] == ZK_DEFAULT:
        return None
    return desanitize(parts[1])
