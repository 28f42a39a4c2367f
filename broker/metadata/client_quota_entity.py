"""Client quota entities and keys (Kafka's ClientQuotaEntity and QuotaConfig), shared by the metadata image, the
controller, the ZooKeeper store and the brokers' quota managers.

An entity is a user, a client id, a user and a client id together, or an ip; a None name is that entity type's
default. It is kept as a tuple of (entity type, name) pairs sorted by type, so equal entities are equal keys
however a request ordered them. In ZooKeeper an entity is a config znode (Kafka's paths: /config/users/<user>,
/config/clients/<client>, /config/users/<user>/clients/<client>, /config/ips/<ip>), its names sanitized as
Kafka's Sanitizer does (URL encoding) and the default named "<default>".
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from urllib.parse import quote, unquote

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"
ENTITY_TYPES = (USER, CLIENT_ID, IP)

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
IP_CONNECTION_RATE = "connection_creation_rate"

# Kafka's QuotaConfig: the keys an entity of users and client ids may hold, and whether each is integral (a LONG
# there: no fraction allowed) or a DOUBLE.
USER_AND_CLIENT_KEYS = {PRODUCER_BYTE_RATE: True, CONSUMER_BYTE_RATE: True, REQUEST_PERCENTAGE: False,
                        CONTROLLER_MUTATION_RATE: False}
IP_KEYS = {IP_CONNECTION_RATE: True}

ZK_DEFAULT = "<default>"  # Kafka's ZooKeeper name of an entity type's default
ZK_USERS = "users"
ZK_CLIENTS = "clients"
ZK_IPS = "ips"

ClientQuotaEntity = tuple[tuple[str, str | None], ...]
# Quota values by key, of every entity that has any.
ClientQuotas = Mapping[ClientQuotaEntity, Mapping[str, float]]


def quota_entity(pairs: Iterable[tuple[str, str | None]]) -> ClientQuotaEntity:
    """The entity of these (type, name) pairs, in its canonical order; pairs must not repeat a type."""
    return tuple(sorted(pairs, key=lambda pair: pair[0]))


def describe_entity(entity: ClientQuotaEntity) -> str:
    return "{" + ", ".join(f"{t}={'<default>' if n is None else n}" for t, n in entity) + "}"


def sanitize(name: str) -> str:
    """Kafka's Sanitizer.sanitize: URL encoding (space as %20, '*' as %2A), so any name is one znode name."""
    return quote(name, safe="").replace("*", "%2A")


def desanitize(name: str) -> str:
    return unquote(name)


def _zk_name(name: str | None) -> str:
    return ZK_DEFAULT if name is None else sanitize(name)


def _entity_name(zk_name: str) -> str | None:
    return None if zk_name == ZK_DEFAULT else desanitize(zk_name)


def zk_entity_path(entity: ClientQuotaEntity) -> str:
    """The entity's path below /config, as a config change notification names it: `users/<u>`, `clients/<c>`,
    `users/<u>/clients/<c>` or `ips/<ip>`."""
    names = dict(entity)
    if USER in names and CLIENT_ID in names:
        return f"{ZK_USERS}/{_zk_name(names[USER])}/{ZK_CLIENTS}/{_zk_name(names[CLIENT_ID])}"
    if USER in names:
        return f"{ZK_USERS}/{_zk_name(names[USER])}"
    if CLIENT_ID in names:
        return f"{ZK_CLIENTS}/{_zk_name(names[CLIENT_ID])}"
    return f"{ZK_IPS}/{_zk_name(names[IP])}"


def entity_of_zk_path(path: str) -> ClientQuotaEntity | None:
    """The entity a path below /config (as `zk_entity_path` writes it) names; None for any other config."""
    parts = path.strip("/").split("/")
    if len(parts) == 4 and parts[0] == ZK_USERS and parts[2] == ZK_CLIENTS:
        return quota_entity([(USER, _entity_name(parts[1])), (CLIENT_ID, _entity_name(parts[3]))])
    if len(parts) == 2 and parts[0] in (ZK_USERS, ZK_CLIENTS, ZK_IPS):
        entity_type = {ZK_USERS: USER, ZK_CLIENTS: CLIENT_ID, ZK_IPS: IP}[parts[0]]
        return quota_entity([(entity_type, _entity_name(parts[1]))])
    return None


def quota_values(config: Mapping[str, str]) -> dict[str, float]:
    """The quota keys of an entity's ZooKeeper config, as numbers (entries that are not quotas are left out)."""
    values = {}
    for key, text in config.items():
        if key in USER_AND_CLIENT_KEYS or key in IP_KEYS:
            try:
                values[key] = float(text)
            except ValueError:
                continue
    return values


def quota_config(values: Mapping[str, float]) -> dict[str, str]:
    """An entity's quotas as ZooKeeper config strings (integral keys without a fraction, as Kafka writes them)."""
    return {key: str(int(value)) if USER_AND_CLIENT_KEYS.get(key, IP_KEYS.get(key)) else str(value)
            for key, value in sorted(values.items())}
