"""The znodes of a Kafka cluster in ZooKeeper mode (Kafka's ZkData): their paths and the JSON they hold, in Kafka's
own formats, so a Kafka tool or broker reading the same ensemble sees what it expects.

Sans-IO: paths, dataclasses and pure encode/decode functions. A znode whose data does not decode raises
ZNodeDecodeError (a ValueError) naming the path.
"""
from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from minikafka.broker.metadata.acls import ZK_EXTENDED_ACLS, ZK_EXTENDED_CHANGES, ZK_LITERAL_ACLS, ZK_LITERAL_CHANGES
from minikafka.broker.metadata.features import SupportedVersionRange
from minikafka.storage.partition_metadata import uuid_from_str, uuid_to_str

TopicPartition = tuple[str, int]

MATCH_ANY_VERSION = -1  # as an expected znode version: any (ZooKeeper's own value)
UNKNOWN_VERSION = -2  # the version of a znode that does not exist
INITIAL_CONTROLLER_EPOCH = 0
INITIAL_CONTROLLER_EPOCH_ZK_VERSION = 0
PRODUCER_ID_BLOCK_SIZE = 1000
NO_LEADER = -1
RECOVERED = 0  # leader recovery states (Kafka's LeaderRecoveryState)
RECOVERING = 1

# Config entity types (Kafka's ConfigType): the children of /config
TOPIC_CONFIG = "topics"
CLIENT_CONFIG = "clients"
USER_CONFIG = "users"
BROKER_CONFIG = "brokers"
IP_CONFIG = "ips"
CONFIG_TYPES = (TOPIC_CONFIG, CLIENT_CONFIG, USER_CONFIG, BROKER_CONFIG, IP_CONFIG)

# ---- paths ------------------------------------------------------------------------------------------------------

CONTROLLER_PATH = "/controller"
CONTROLLER_EPOCH_PATH = "/controller_epoch"
CLUSTER_PATH = "/cluster"
CLUSTER_ID_PATH = "/cluster/id"
BROKERS_PATH = "/brokers"
BROKER_IDS_PATH = "/brokers/ids"
TOPICS_PATH = "/brokers/topics"
BROKER_SEQUENCE_ID_PATH = "/brokers/seqid"
CONFIG_PATH = "/config"
CONFIG_CHANGES_PATH = "/config/changes"
ADMIN_PATH = "/admin"
DELETE_TOPICS_PATH = "/admin/delete_topics"
REASSIGN_PARTITIONS_PATH = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION_PATH = "/admin/preferred_replica_election"
ISR_CHANGE_NOTIFICATION_PATH = "/isr_change_notification"
LOG_DIR_EVENT_NOTIFICATION_PATH = "/log_dir_event_notification"
PRODUCER_ID_BLOCK_PATH = "/latest_producer_id_block"
CONSUMERS_PATH = "/consumers"  # the old consumers' path, which Kafka still creates
FEATURE_PATH = "/feature"  # the cluster's finalized features (KIP-584's FeatureZNode)
FEATURE_ZNODE_VERSION = 2
FEATURE_ZNODE_ENABLED = 1


def broker_id_path(broker_id: int) -> str:
    return f"{BROKER_IDS_PATH}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS_PATH}/{topic}"


def topic_partitions_path(topic: str) -> str:
    return f"{topic_path(topic)}/partitions"


def topic_partition_path(topic: str, partition: int) -> str:
    return f"{topic_partitions_path(topic)}/{partition}"


def topic_partition_state_path(topic: str, partition: int) -> str:
    return f"{topic_partition_path(topic, partition)}/state"


def config_entity_type_path(entity_type: str) -> str:
    return f"{CONFIG_PATH}/{entity_type}"


def config_entity_path(entity_type: str, entity_name: str) -> str:
    return f"{config_entity_type_path(entity_type)}/{entity_name}"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS_PATH}/{topic}"


# The persistent paths every broker makes sure of at start (Kafka's ZkData.PersistentZkPaths).
PERSISTENT_PATHS = (
    CONSUMERS_PATH,
    BROKER_IDS_PATH,
    TOPICS_PATH,
    CONFIG_CHANGES_PATH,
    DELETE_TOPICS_PATH,
    BROKER_SEQUENCE_ID_PATH,
    ISR_CHANGE_NOTIFICATION_PATH,
    PRODUCER_ID_BLOCK_PATH,
    LOG_DIR_EVENT_NOTIFICATION_PATH,
    *(config_entity_type_path(t) for t in CONFIG_TYPES),
    # As Kafka's AclAuthorizer makes them: the change paths must exist for the brokers' watches on their children.
    ZK_LITERAL_ACLS, ZK_EXTENDED_ACLS, ZK_LITERAL_CHANGES, ZK_EXTENDED_CHANGES,
)


# ---- decoding helpers -------------------------------------------------------------------------------------------

class ZNodeDecodeError(ValueError):
    """A znode's data is not what Kafka writes there."""

    def __init__(self, path: str, reason: str, data: bytes | None) -> None:
        shown = data if data is None or len(data) <= 200 else data[:200] + b"..."
        super().__init__(f"Malformed data in znode {path}: {reason}; data: {shown!r}")
        self.path = path


def _encode(value: Mapping[str, Any]) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode("utf-8")


def _json_object(path: str, data: bytes | None) -> dict[str, Any]:
    if data is None:
        raise ZNodeDecodeError(path, "no data", data)
    try:
        value = json.loads(data)
    except (UnicodeDecodeError, ValueError) as e:
        raise ZNodeDecodeError(path, f"not JSON ({e})", data) from None
    if not isinstance(value, dict):
        raise ZNodeDecodeError(path, "not a JSON object", data)
    return value


class _Fields:
    """Typed access to a decoded JSON object, every failure a ZNodeDecodeError naming the znode."""

    def __init__(self, path: str, data: bytes | None, value: dict[str, Any] | None = None) -> None:
        self.path = path
        self.data = data
        self.value = _json_object(path, data) if value is None else value

    def error(self, reason: str) -> ZNodeDecodeError:
        return ZNodeDecodeError(self.path, reason, self.data)

    def has(self, key: str) -> bool:
        return self.value.get(key) is not None

    def integer(self, key: str, default: int | None = None) -> int:
        value = self.value.get(key)
        if value is None and default is not None:
            return default
        if isinstance(value, str):  # Kafka writes some numbers as strings (timestamps, producer id bounds)
            try:
                return int(value)
            except ValueError:
                raise self.error(f"{key!r} is not a number") from None
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.error(f"{key!r} is missing or not a number")
        return value

    def string(self, key: str) -> str:
        value = self.value.get(key)
        if not isinstance(value, str):
            raise self.error(f"{key!r} is missing or not a string")
        return value

    def optional_string(self, key: str) -> str | None:
        value = self.value.get(key)
        if value is not None and not isinstance(value, str):
            raise self.error(f"{key!r} is not a string")
        return value

    def integers(self, key: str, value: Any = None) -> list[int]:
        value = self.value.get(key) if value is None else value
        if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            raise self.error(f"{key!r} is missing or not a list of integers")
        return value

    def obj(self, key: str) -> dict[str, Any]:
        value = self.value.get(key)
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.error(f"{key!r} is not a JSON object")
        return value


# ---- /controller and /controller_epoch --------------------------------------------------------------------------

@dataclass(frozen=True)
class ControllerRegistration:
    """/controller: the broker that won the election (ephemeral, owned by its session)."""

    broker_id: int
    timestamp_ms: int
    kraft_controller_epoch: int = -1


def encode_controller(registration: ControllerRegistration) -> bytes:
    return _encode({"version": 2, "brokerid": registration.broker_id, "timestamp": str(registration.timestamp_ms),
                    "kraftControllerEpoch": registration.kraft_controller_epoch})


def decode_controller(data: bytes | None) -> ControllerRegistration:
    fields = _Fields(CONTROLLER_PATH, data)
    return ControllerRegistration(broker_id=fields.integer("brokerid"), timestamp_ms=fields.integer("timestamp", -1),
                                  kraft_controller_epoch=fields.integer("kraftControllerEpoch", -1))


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode("ascii")


def decode_controller_epoch(data: bytes | None) -> int:
    try:
        return int((data or b"").decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        raise ZNodeDecodeError(CONTROLLER_EPOCH_PATH, "not an integer", data) from None


# ---- /cluster/id ------------------------------------------------------------------------------------------------

def encode_cluster_id(cluster_id: str) -> bytes:
    return _encode({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes | None) -> str:
    return _Fields(CLUSTER_ID_PATH, data).string("id")


# ---- /brokers/ids/<id> ------------------------------------------------------------------------------------------

BROKER_INFO_VERSION = 5
# The security protocol of a listener named after one, when a registration has no map (Kafka's default).
DEFAULT_LISTENER_SECURITY_PROTOCOLS = {name: name for name in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")}


@dataclass(frozen=True)
class EndPoint:
    """An advertised listener; `host` is "" when the listener binds every interface (Kafka's null host)."""

    listener_name: str
    host: str
    port: int
    security_protocol: str

    @property
    def connection_string(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener_name}://{host}:{self.port}"


@dataclass(frozen=True)
class BrokerRegistration:
    """/brokers/ids/<id>: a live broker's endpoints, rack and supported features (Kafka's BrokerInfo). Its
    creation zxid (czxid) is the broker epoch."""

    broker_id: int
    endpoints: tuple[EndPoint, ...]
    rack: str | None = None
    features: Mapping[str, SupportedVersionRange] = field(default_factory=dict)
    jmx_port: int = -1
    version: int = BROKER_INFO_VERSION

    def endpoint(self, listener_name: str) -> EndPoint | None:
        return next((e for e in self.endpoints if e.listener_name == listener_name), None)


def encode_broker_registration(registration: BrokerRegistration, timestamp_ms: int) -> bytes:
    # Older clients read the top-level host and port: those of the first PLAINTEXT listener, if any.
    plaintext = next((e for e in registration.endpoints if e.security_protocol == "PLAINTEXT"), None)
    value: dict[str, Any] = {
        "version": registration.version,
        "host": (plaintext.host or None) if plaintext is not None else None,
        "port": plaintext.port if plaintext is not None else -1,
        "endpoints": [e.connection_string for e in registration.endpoints],
        "jmx_port": registration.jmx_port,
        "timestamp": str(timestamp_ms),
    }
    if registration.rack is not None and registration.version >= 3:
        value["rack"] = registration.rack
    if registration.version >= 4:
        value["listener_security_protocol_map"] = {e.listener_name: e.security_protocol
                                                   for e in registration.endpoints}
    if registration.version >= 5:
        value["features"] = {name: {"min_version": r.min_version, "max_version": r.max_version}
                             for name, r in registration.features.items()}
    return _encode(value)


def _parse_endpoint(fields: _Fields, text: str, protocols: Mapping[str, str]) -> EndPoint:
    name, sep, address = text.partition("://")
    host, colon, port = address.rpartition(":")
    if not sep or not colon or not name:
        raise fields.error(f"endpoint {text!r} is not LISTENER://HOST:PORT")
    try:
        port_number = int(port)
    except ValueError:
        raise fields.error(f"endpoint {text!r} has no port number") from None
    protocol = protocols.get(name)
    if protocol is None:
        raise fields.error(f"endpoint {text!r} names a listener with no security protocol")
    return EndPoint(name, host.removeprefix("[").removesuffix("]"), port_number, protocol)


def decode_broker_registration(broker_id: int, data: bytes | None) -> BrokerRegistration:
    fields = _Fields(broker_id_path(broker_id), data)
    version = fields.integer("version")
    if version < 1:
        raise fields.error(f"unsupported version {version}")
    if version == 1:
        host = fields.optional_string("host") or ""
        endpoints: tuple[EndPoint, ...] = (EndPoint("PLAINTEXT", host, fields.integer("port"), "PLAINTEXT"),)
    else:
        protocols = fields.obj("listener_security_protocol_map") or DEFAULT_LISTENER_SECURITY_PROTOCOLS
        listed = fields.value.get("endpoints")
        if not isinstance(listed, list) or not all(isinstance(e, str) for e in listed):
            raise fields.error("'endpoints' is missing or not a list of strings")
        endpoints = tuple(_parse_endpoint(fields, e, protocols) for e in listed)
    features = {}
    for name, versions in fields.obj("features").items():
        if not isinstance(versions, dict):
            raise fields.error(f"feature {name!r} is not a JSON object")
        ranges = _Fields(fields.path, data, versions)
        features[name] = SupportedVersionRange(ranges.integer("min_version"), ranges.integer("max_version"))
    return BrokerRegistration(broker_id=broker_id, endpoints=endpoints, rack=fields.optional_string("rack"),
                              features=features, jmx_port=fields.integer("jmx_port", -1), version=version)


# ---- /brokers/topics/<topic> ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ReplicaAssignment:
    """A partition's replicas, with those being added and removed while a reassignment runs."""

    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()


@dataclass(frozen=True)
class TopicAssignment:
    """/brokers/topics/<topic>: the topic's id and each partition's replicas (Kafka's TopicIdReplicaAssignment).
    `topic_id` is None for a topic created before topic ids (the controller gives it one)."""

    topic: str
    topic_id: uuid.UUID | None
    partitions: Mapping[int, ReplicaAssignment]


def encode_topic(topic_id: uuid.UUID | None, partitions: Mapping[int, ReplicaAssignment]) -> bytes:
    value: dict[str, Any] = {
        "version": 3,
        "partitions": {str(p): list(a.replicas) for p, a in partitions.items()},
        "adding_replicas": {str(p): list(a.adding_replicas) for p, a in partitions.items() if a.adding_replicas},
        "removing_replicas": {str(p): list(a.removing_replicas) for p, a in partitions.items()
                              if a.removing_replicas},
    }
    if topic_id is not None:
        value["topic_id"] = uuid_to_str(topic_id.bytes)
    return _encode(value)


def decode_topic(topic: str, data: bytes | None) -> TopicAssignment:
    fields = _Fields(topic_path(topic), data)
    topic_id = None
    if fields.has("topic_id"):
        try:
            topic_id = uuid.UUID(bytes=uuid_from_str(fields.string("topic_id")))
        except ValueError as e:
            raise fields.error(f"'topic_id' is not a Kafka uuid ({e})") from None
    adding, removing = fields.obj("adding_replicas"), fields.obj("removing_replicas")
    partitions = {}
    for key, replicas in fields.obj("partitions").items():
        try:
            partition = int(key)
        except ValueError:
            raise fields.error(f"partition {key!r} is not a number") from None
        partitions[partition] = ReplicaAssignment(
            replicas=tuple(fields.integers(f"partitions.{key}", replicas)),
            adding_replicas=tuple(fields.integers(f"adding_replicas.{key}", adding.get(key, []))),
            removing_replicas=tuple(fields.integers(f"removing_replicas.{key}", removing.get(key, []))))
    return TopicAssignment(topic, topic_id, partitions)


# ---- /brokers/topics/<topic>/partitions/<p>/state ---------------------------------------------------------------

@dataclass(frozen=True)
class LeaderIsrAndControllerEpoch:
    """A partition's state znode: leader, leader epoch, ISR and the epoch of the controller that wrote it. The
    partition epoch is the znode's version (not in its data): every conditional update checks and bumps it."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    leader_recovery_state: int = RECOVERED
    partition_epoch: int = 0


def encode_topic_partition_state(state: LeaderIsrAndControllerEpoch) -> bytes:
    value: dict[str, Any] = {"version": 1, "leader": state.leader, "leader_epoch": state.leader_epoch,
                             "controller_epoch": state.controller_epoch, "isr": list(state.isr)}
    if state.leader_recovery_state != RECOVERED:
        value["leader_recovery_state"] = state.leader_recovery_state
    return _encode(value)


def decode_topic_partition_state(topic: str, partition: int, data: bytes | None,
                                 zk_version: int) -> LeaderIsrAndControllerEpoch:
    fields = _Fields(topic_partition_state_path(topic, partition), data)
    return LeaderIsrAndControllerEpoch(
        leader=fields.integer("leader"), leader_epoch=fields.integer("leader_epoch"), isr=tuple(fields.integers("isr")),
        controller_epoch=fields.integer("controller_epoch"),
        leader_recovery_state=fields.integer("leader_recovery_state", RECOVERED), partition_epoch=zk_version)


# ---- /config/<type>/<name> --------------------------------------------------------------------------------------

def encode_config(config: Mapping[str, str]) -> bytes:
    return _encode({"version": 1, "config": dict(config)})


def decode_config(entity_type: str, entity_name: str, data: bytes | None) -> dict[str, str]:
    """An entity's config overrides; empty for a znode without data, as Kafka reads it."""
    if not data:
        return {}
    fields = _Fields(config_entity_path(entity_type, entity_name), data)
    config = fields.obj("config")
    if not all(isinstance(v, str) for v in config.values()):
        raise fields.error("config values are not all strings")
    return config


# ---- /latest_producer_id_block ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class ProducerIdsBlock:
    """A range of producer ids, first and last inclusive, handed to one broker."""

    assigned_broker_id: int
    first_producer_id: int
    size: int

    @property
    def last_producer_id(self) -> int:
        return self.first_producer_id + self.size - 1

    @property
    def next_block_first_id(self) -> int:
        return self.first_producer_id + self.size


def encode_producer_id_block(block: ProducerIdsBlock) -> bytes:
    return _encode({"version": 1, "broker": block.assigned_broker_id,
                    "block_start": str(block.first_producer_id), "block_end": str(block.last_producer_id)})


def decode_producer_id_block(data: bytes | None) -> ProducerIdsBlock:
    fields = _Fields(PRODUCER_ID_BLOCK_PATH, data)
    start, end = fields.integer("block_start"), fields.integer("block_end")
    if end < start - 1:
        raise fields.error("block_end is before block_start")
    return ProducerIdsBlock(fields.integer("broker"), start, end - start + 1)



# ---- /feature ------------------------------------------------------------------------------------------------------

def encode_feature_znode(levels: Mapping[str, int]) -> bytes:
    """/feature: the finalized features (Kafka's FeatureZNode v2, status enabled); a feature at level 0 is left out,
    as Kafka's controller removes a feature it finalizes at 0."""
    return _encode({"version": FEATURE_ZNODE_VERSION, "status": FEATURE_ZNODE_ENABLED, "features": {
        name: {"min_version_level": level, "max_version_level": level}
        for name, level in sorted(levels.items()) if level > 0}})


def decode_feature_znode(data: bytes | None) -> dict[str, int]:
    """The finalized level of each feature /feature lists (its max version level)."""
    fields = _Fields(FEATURE_PATH, data, _json_object(FEATURE_PATH, data))
    levels = {}
    for name, levels_of in fields.obj("features").items():
        if not isinstance(levels_of, dict):
            raise fields.error(f"feature {name!r} is not a JSON object")
        levels[name] = _Fields(fields.path, data, levels_of).integer("max_version_level")
    return levels
