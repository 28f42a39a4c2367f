"""Node configuration (the broker and controller roles) by Kafka's own property names and defaults.

Values come from a `server.properties` file, CLI flags and the Python API, in that order of increasing
precedence; everything is kept as Kafka property strings so a value means what it means in Kafka. A node's roles,
listeners and controller quorum are checked together as Kafka checks them, before anything starts.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from minikafka.storage.properties import read_properties

# name -> (type, default). Only properties minikafka acts on; others are accepted and logged as unknown.
BROKER_PROPERTIES: dict[str, tuple[type, object]] = {
    "process.roles": (str, ""),
    "node.id": (int, 1),
    "broker.rack": (str, None),
    "cluster.id": (str, ""),
    "listeners": (str, "PLAINTEXT://127.0.0.1:9092"),
    "advertised.listeners": (str, ""),
    "inter.broker.listener.name": (str, "PLAINTEXT"),
    "controller.listener.names": (str, "CONTROLLER"),
    "controller.quorum.voters": (str, ""),
    "controller.quorum.bootstrap.servers": (str, ""),
    "zookeeper.connect": (str, ""),
    "zookeeper.session.timeout.ms": (int, 18000),
    "zookeeper.connection.timeout.ms": (int, None),
    "log.dirs": (str, "./minikafka-data"),
    "log.dir": (str, ""),
    "num.partitions": (int, 1),
    "default.replication.factor": (int, 1),
    "auto.create.topics.enable": (bool, True),
    "delete.topic.enable": (bool, True),
    "socket.request.max.bytes": (int, 104857600),
    "message.max.bytes": (int, 1048588),
    "fetch.max.bytes": (int, 57671680),
    "log.segment.bytes": (int, 1073741824),
    "log.roll.ms": (int, None),
    "log.roll.hours": (int, 168),
    "log.retention.ms": (int, None),
    "log.retention.minutes": (int, None),
    "log.retention.hours": (int, 168),
    "log.retention.bytes": (int, -1),
    "log.retention.check.interval.ms": (int, 300000),
    "log.index.interval.bytes": (int, 4096),
    "log.cleaner.enable": (bool, True),
    "log.cleaner.threads": (int, 1),
    "log.cleaner.dedupe.buffer.size": (int, 134217728),
    "log.cleaner.io.buffer.size": (int, 524288),
    "log.cleaner.io.buffer.load.factor": (float, 0.9),
    "log.cleaner.io.max.bytes.per.second": (float, 1.7976931348623157e308),
    "log.cleaner.backoff.ms": (int, 15000),
    "log.index.size.max.bytes": (int, 10485760),
    "log.flush.interval.messages": (int, 9223372036854775807),
    "log.flush.interval.ms": (int, None),
    "log.flush.scheduler.interval.ms": (int, 9223372036854775807),
    "log.flush.offset.checkpoint.interval.ms": (int, 60000),
    "log.flush.start.offset.checkpoint.interval.ms": (int, 60000),
    "log.message.timestamp.type": (str, "CreateTime"),
    "min.insync.replicas": (int, 1),
    "replica.lag.time.max.ms": (int, 30000),
    "num.replica.fetchers": (int, 1),
    "quota.window.num": (int, 11),
    "quota.window.size.seconds": (int, 1),
    "replica.fetch.backoff.ms": (int, 1000),
    "replica.fetch.max.bytes": (int, 1048576),
    "replica.fetch.response.max.bytes": (int, 10485760),
    "replica.fetch.wait.max.ms": (int, 500),
    "replica.fetch.min.bytes": (int, 1),
    "replica.socket.timeout.ms": (int, 30000),
    "replication.quota.window.num": (int, 11),
    "replication.quota.window.size.seconds": (int, 1),
    "max.incremental.fetch.session.cache.slots": (int, 1000),
    "unclean.leader.election.enable": (bool, False),
    "metadata.log.dir": (str, ""),
    "broker.heartbeat.interval.ms": (int, 2000),
    "broker.session.timeout.ms": (int, 9000),
    "controlled.shutdown.enable": (bool, True),
    "controlled.shutdown.max.retries": (int, 3),
    "controlled.shutdown.retry.backoff.ms": (int, 5000),
    "initial.broker.registration.timeout.ms": (int, 60000),
    "auto.leader.rebalance.enable": (bool, True),
    "leader.imbalance.check.interval.seconds": (int, 300),
    "leader.imbalance.per.broker.percentage": (int, 10),
    "offsets.topic.num.partitions": (int, 50),
    "offsets.topic.replication.factor": (int, 1),
    "offsets.topic.segment.bytes": (int, 104857600),
    "offsets.retention.minutes": (int, 10080),
    "offsets.retention.check.interval.ms": (int, 600000),
    "offsets.commit.timeout.ms": (int, 5000),
    "offset.metadata.max.bytes": (int, 4096),
    "group.min.session.timeout.ms": (int, 6000),
    "group.max.session.timeout.ms": (int, 1800000),
    "group.initial.rebalance.delay.ms": (int, 3000),
    "group.max.size": (int, 2147483647),
    "group.consumer.session.timeout.ms": (int, 45000),
    "group.consumer.min.session.timeout.ms": (int, 45000),
    "group.consumer.max.session.timeout.ms": (int, 60000),
    "group.consumer.heartbeat.interval.ms": (int, 5000),
    "group.consumer.min.heartbeat.interval.ms": (int, 5000),
    "group.consumer.max.heartbeat.interval.ms": (int, 15000),
    "group.consumer.max.size": (int, 2147483647),
    "group.consumer.assignors": (str, "uniform,range"),
    "group.consumer.migration.policy": (str, "bidirectional"),
    "group.coordinator.rebalance.protocols": (str, "classic,consumer,streams"),
    # Share and streams groups: the defaults and bounds of their per-group configs (resource type GROUP).
    "group.share.session.timeout.ms": (int, 45000),
    "group.share.min.session.timeout.ms": (int, 45000),
    "group.share.max.session.timeout.ms": (int, 60000),
    "group.share.heartbeat.interval.ms": (int, 5000),
    "group.share.min.heartbeat.interval.ms": (int, 5000),
    "group.share.max.heartbeat.interval.ms": (int, 15000),
    "group.share.record.lock.duration.ms": (int, 30000),
    "group.share.min.record.lock.duration.ms": (int, 15000),
    "group.share.max.record.lock.duration.ms": (int, 60000),
    "group.share.max.size": (int, 200),
    "group.share.initialize.retry.interval.ms": (int, 30000),
    "group.share.delivery.count.limit": (int, 5),
    "group.share.partition.max.record.locks": (int, 2000),
    "group.share.max.share.sessions": (int, 2000),
    "group.streams.min.session.timeout.ms": (int, 45000),
    "group.streams.max.session.timeout.ms": (int, 60000),
    "group.streams.min.heartbeat.interval.ms": (int, 5000),
    "group.streams.max.heartbeat.interval.ms": (int, 15000),
    "group.streams.max.standby.replicas": (int, 2),
    "connections.max.idle.ms": (int, 600000),
    "request.timeout.ms": (int, 30000),
    "reconnect.backoff.ms": (int, 50),
    "reconnect.backoff.max.ms": (int, 1000),
    "socket.connection.setup.timeout.ms": (int, 10000),
    "transactional.id.expiration.ms": (int, 604800000),
    "transaction.max.timeout.ms": (int, 900000),
    "transaction.state.log.num.partitions": (int, 50),
    "transaction.state.log.replication.factor": (int, 3),
    "transaction.state.log.min.isr": (int, 2),
    "transaction.state.log.segment.bytes": (int, 104857600),
    "transaction.state.log.load.buffer.size": (int, 5242880),
    "share.coordinator.state.topic.num.partitions": (int, 50),
    "share.coordinator.state.topic.replication.factor": (int, 3),
    "share.coordinator.state.topic.min.isr": (int, 2),
    "share.coordinator.state.topic.segment.bytes": (int, 104857600),
    "share.coordinator.snapshot.update.records.per.snapshot": (int, 500),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": (int, 10000),
    "transaction.remove.expired.transaction.cleanup.interval.ms": (int, 3600000),
    "transaction.partition.verification.enable": (bool, True),
    "add.partitions.to.txn.retry.backoff.ms": (int, 20),
    "add.partitions.to.txn.retry.backoff.max.ms": (int, 100),
    "producer.id.expiration.ms": (int, 86400000),
    "producer.id.expiration.check.interval.ms": (int, 600000),
    # The port of the Prometheus metrics endpoint (0: a free one); none by default.
    "metrics.port": (int, None),
    # Security: each may also be set for one listener as listener.name.<listener lower-case>.<property>.
    "listener.security.protocol.map": (str, ""),
    "security.inter.broker.protocol": (str, None),
    "sasl.enabled.mechanisms": (str, "GSSAPI"),
    "sasl.mechanism.inter.broker.protocol": (str, "GSSAPI"),
    "sasl.mechanism.controller.protocol": (str, "GSSAPI"),
    "connections.max.reauth.ms": (int, 0),
    "connection.failed.authentication.delay.ms": (int, 100),
    "sasl.server.max.receive.size": (int, 524288),
    "ssl.keystore.type": (str, "JKS"),
    "ssl.keystore.location": (str, None),
    "ssl.keystore.password": (str, None),
    "ssl.keystore.certificate.chain": (str, None),
    "ssl.keystore.key": (str, None),
    "ssl.key.password": (str, None),
    "ssl.truststore.type": (str, "JKS"),
    "ssl.truststore.location": (str, None),
    "ssl.truststore.password": (str, None),
    "ssl.truststore.certificates": (str, None),
    "ssl.client.auth": (str, "none"),
    "ssl.principal.mapping.rules": (str, "DEFAULT"),
    "ssl.enabled.protocols": (str, "TLSv1.2,TLSv1.3"),
    "ssl.protocol": (str, "TLSv1.3"),
    "ssl.cipher.suites": (str, ""),
    "ssl.endpoint.identification.algorithm": (str, "https"),
    # Authorization: Kafka's StandardAuthorizer (or AclAuthorizer) class name turns it on; none by default.
    "authorizer.class.name": (str, ""),
    "super.users": (str, ""),
    "allow.everyone.if.no.acl.found": (bool, False),
}

# Kafka's authorizer classes: `authorizer.class.name` naming either turns on its ACL rules (StandardAuthorizer's).
AUTHORIZER_CLASS_NAMES = frozenset({"org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                                    "kafka.security.authorizer.AclAuthorizer"})

# Kafka's SecurityProtocol, by name, with the ids its registrations carry.
SECURITY_PROTOCOLS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
LISTENER_PREFIX = "listener.name."


class ConfigError(ValueError):
    """A property has a value Kafka would refuse; the message names the property."""


def _parse(name: str, kind: type, raw: object) -> object:
    if raw is None or not isinstance(raw, str):
        return raw
    text = raw.strip()
    try:
        if kind is bool:
            if text.lower() not in ("true", "false"):
                raise ValueError(text)
            return text.lower() == "true"
        return kind(text)
    except ValueError:
        raise ConfigError(f"Invalid value {raw!r} for configuration {name}: expected {kind.__name__}") from None


def typed_value(name: str, text: str | None) -> Any:
    """A property's value typed as its entry in BROKER_PROPERTIES says; Kafka's default when unset."""
    kind, default = BROKER_PROPERTIES[name]
    return _parse(name, kind, text) if text is not None else default


@dataclass(frozen=True)
class Endpoint:
    listener: str
    host: str
    port: int


def parse_listeners(value: str) -> list[Endpoint]:
    endpoints = []
    for item in filter(None, (v.strip() for v in value.split(","))):
        name, sep, rest = item.partition("://")
        host, colon, port = rest.rpartition(":")
        if not sep or not colon or not port.isdigit():
            raise ConfigError(f"Invalid listener {item!r}: expected NAME://HOST:PORT")
        endpoints.append(Endpoint(name, host.strip("[]") or "0.0.0.0", int(port)))
    if not endpoints:
        raise ConfigError("listeners must name at least one NAME://HOST:PORT")
    return endpoints


BROKER_ROLE = "broker"
CONTROLLER_ROLE = "controller"


@dataclass(frozen=True)
class ControllerAddress:
    """Where a broker finds the controller: a voter of controller.quorum.voters (with its node id), or one of
    controller.quorum.bootstrap.servers (node id unknown, -1)."""

    node_id: int
    host: str
    port: int


def _host_port(item: str, name: str, expected: str) -> tuple[str, int]:
    host, colon, port = item.rpartition(":")
    if not colon or not host or not port.isdigit():
        raise ConfigError(f"Invalid value {item!r} in configuration {name}: expected {expected}")
    return host.strip("[]"), int(port)


def parse_quorum_voters(value: str) -> list[ControllerAddress]:
    """controller.quorum.voters: `{id}@{host}:{port}`, comma-separated."""
    voters = []
    for item in filter(None, (v.strip() for v in value.split(","))):
        node, at, address = item.partition("@")
        if not at or not node.strip().lstrip("-").isdigit():
            raise ConfigError(f"Invalid value {item!r} in configuration controller.quorum.voters: "
                              "expected {id}@{host}:{port}")
        host, port = _host_port(address, "controller.quorum.voters", "{id}@{host}:{port}")
        voters.append(ControllerAddress(int(node), host, port))
    return voters


def parse_bootstrap_servers(value: str) -> list[ControllerAddress]:
    """controller.quorum.bootstrap.servers: `{host}:{port}`, comma-separated."""
    return [ControllerAddress(-1, *_host_port(item, "controller.quorum.bootstrap.servers", "{host}:{port}"))
            for item in filter(None, (v.strip() for v in value.split(",")))]


def _names(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


@dataclass
class BrokerConfig:
    """The broker's properties; `get` returns the typed value or Kafka's default."""

    props: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.props = {k: str(v) for k, v in self.props.items()}
        for name, (kind, _default) in BROKER_PROPERTIES.items():
            if name in self.props:
                _parse(name, kind, self.props[name])
        parse_listeners(self.get("listeners"))
        self._validate_roles()
        self._validate_security()
        self._validate_authorizer()

    def _validate_roles(self) -> None:
        """Kafka's checks of a KRaft node's roles, listeners and quorum, made before anything starts."""
        if self.zookeeper_mode:
            self._validate_zookeeper_mode()
            return
        roles = _names(self.get("process.roles"))
        for role in roles:
            if role not in (BROKER_ROLE, CONTROLLER_ROLE):
                raise ConfigError(f"Unknown process role {role!r} in process.roles: expected broker, controller "
                                  "or both")
        if len(set(roles)) != len(roles):
            raise ConfigError(f"Duplicate role names found in process.roles={self.get('process.roles')}")
        voters = self.quorum_voters
        bootstrap = parse_bootstrap_servers(self.get("controller.quorum.bootstrap.servers"))
        if not roles:  # a node of its own: combined, and its controller listener (if any) is optional
            return
        if "node.id" not in self.props:
            raise ConfigError("Missing required configuration node.id, which has no default value when "
                              "process.roles is set")
        controller_names = self.controller_listener_names
        if not controller_names:
            raise ConfigError("controller.listener.names must not be empty when process.roles is set")
        listener_names = [e.listener for e in self.listeners]
        controller_listeners = [n for n in listener_names if n in controller_names]
        voter_ids = {v.node_id for v in voters}
        if CONTROLLER_ROLE in roles:
            if not controller_listeners:
                raise ConfigError(f"A node with the controller role needs a listener named in "
                                  f"controller.listener.names ({', '.join(controller_names)}) in listeners "
                                  f"({self.get('listeners')})")
            if voters and self.node_id not in voter_ids:
                raise ConfigError(f"With the controller role, node.id={self.node_id} must be one of the voters in "
                                  f"controller.quorum.voters={self.get('controller.quorum.voters')}")
        if roles == [CONTROLLER_ROLE]:
            others = [n for n in listener_names if n not in controller_names]
            if others:
                raise ConfigError(f"With process.roles=controller, listeners may only hold the controller "
                                  f"listeners named in controller.listener.names; found {', '.join(others)}")
            return
        # the broker role, alone or combined
        if CONTROLLER_ROLE not in roles:
            if controller_listeners:
                raise ConfigError(f"With process.roles=broker, listeners must not hold a controller listener "
                                  f"({', '.join(controller_listeners)}): clients could not use it")
            if self.node_id in voter_ids:
                raise ConfigError(f"With process.roles=broker, node.id={self.node_id} must not be one of the voters "
                                  f"in controller.quorum.voters={self.get('controller.quorum.voters')}")
            if not voters and not bootstrap:
                raise ConfigError("A node with process.roles=broker needs controller.quorum.voters or "
                                  "controller.quorum.bootstrap.servers to find its controller")
        broker_names = [n for n in listener_names if n not in controller_names]
        if not broker_names:
            raise ConfigError("A node with the broker role needs a listener that is not a controller listener")
        if self.inter_broker_listener_name not in broker_names:
            raise ConfigError(f"inter.broker.listener.name={self.inter_broker_listener_name} must be one of the "
                              f"broker's listeners: {', '.join(broker_names)}")

    def _validate_authorizer(self) -> None:
        name = self.get("authorizer.class.name")
        if name and name not in AUTHORIZER_CLASS_NAMES:
            raise ConfigError(f"authorizer.class.name={name} is not supported: minikafka authorizes as Kafka's "
                              f"{' or '.join(sorted(AUTHORIZER_CLASS_NAMES))}, or not at all when it is empty")

    @property
    def authorizer_enabled(self) -> bool:
        return bool(self.get("authorizer.class.name"))

    def _validate_security(self) -> None:
        """Every listener has a security protocol; security.inter.broker.protocol and inter.broker.listener.name
        are not both set, and a SASL inter-broker listener enables the mechanism brokers log in to it with, as
        Kafka requires."""
        for endpoint in self.listeners:
            self.security_protocol(endpoint.listener)
        inter_broker = self.get("security.inter.broker.protocol")
        if inter_broker is not None:
            if "inter.broker.listener.name" in self.props:
                raise ConfigError("Only one of inter.broker.listener.name and security.inter.broker.protocol should "
                                  "be set.")
            if inter_broker.upper() not in SECURITY_PROTOCOLS:
                raise ConfigError(f"Invalid value {inter_broker!r} for configuration security.inter.broker.protocol")
        listener = self.inter_broker_listener_name
        if BROKER_ROLE not in self.process_roles or listener not in [e.listener for e in self.listeners] or \
                self.security_protocol(listener) not in ("SASL_PLAINTEXT", "SASL_SSL"):
            return
        mechanism = self.get("sasl.mechanism.inter.broker.protocol")
        enabled = _names(self.listener_props(listener).get("sasl.enabled.mechanisms", "GSSAPI"))
        if mechanism not in enabled:
            raise ConfigError(f"sasl.mechanism.inter.broker.protocol must be included in sasl.enabled.mechanisms when "
                              f"SASL is used for inter-broker communication: {mechanism} is not among the mechanisms "
                              f"of the inter-broker listener {listener} ({', '.join(enabled)})")

    def _validate_zookeeper_mode(self) -> None:
        """A ZooKeeper-mode broker (zookeeper.connect set): no KRaft roles, no controller listener."""
        if self.props.get("process.roles", "").strip():
            raise ConfigError("process.roles must not be set with zookeeper.connect: a ZooKeeper-mode node is a "
                              "broker whose controller is elected through ZooKeeper")
        if self.get("zookeeper.session.timeout.ms") <= 0:
            raise ConfigError("zookeeper.session.timeout.ms must be positive")
        controller_listeners = [e.listener for e in self.controller_listeners]
        if controller_listeners:
            raise ConfigError(f"With zookeeper.connect, listeners must not hold a controller listener "
                              f"({', '.join(controller_listeners)}): the controller runs inside a broker")
        if self.inter_broker_listener_name not in [e.listener for e in self.broker_listeners]:
            raise ConfigError(f"inter.broker.listener.name={self.inter_broker_listener_name} must be one of the "
                              f"broker's listeners: {', '.join(e.listener for e in self.broker_listeners)}")

    @property
    def zookeeper_mode(self) -> bool:
        """Whether zookeeper.connect selects ZooKeeper mode (Kafka's ZooKeeper-era broker)."""
        return bool(str(self.props.get("zookeeper.connect", "")).strip())

    @classmethod
    def from_sources(cls, file: str | Path | None = None, overrides: dict[str, object] | None = None) -> BrokerConfig:
        try:
            props = read_properties(file) if file else {}
        except ValueError as exc:
            raise ConfigError(f"{file}: {exc}") from None
        props.update({k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in (overrides or {}).items()})
        return cls(props)

    def get(self, name: str) -> Any:
        """Typed as the property's entry in BROKER_PROPERTIES says, so callers know the type by the name."""
        return typed_value(name, self.props.get(name))

    def unknown_properties(self) -> list[str]:
        return sorted(k for k in self.props if k not in BROKER_PROPERTIES and not k.startswith(LISTENER_PREFIX))

    def listener_props(self, listener: str) -> dict[str, str]:
        """The properties as `listener` sees them: listener.name.<listener lower-case>.<property> over <property>
        (Kafka's per-listener overrides). Keys that stay prefixed by a mechanism (`plain.sasl.jaas.config`) are
        the listener's per-mechanism settings."""
        prefix = f"{LISTENER_PREFIX}{listener.lower()}."
        props = {k: v for k, v in self.props.items() if not k.startswith(LISTENER_PREFIX)}
        props.update((k[len(prefix):], v) for k, v in self.props.items() if k.startswith(prefix))
        return props

    def security_protocol(self, listener: str) -> str:
        """The listener's security protocol from listener.security.protocol.map. Unmapped, a listener named after a
        protocol has that protocol, and so does any other while the map is not set (every listener was plaintext
        before security came); with a map, an unmapped listener is an error, as in Kafka."""
        mapping = self.security_protocol_map
        if listener in mapping:
            return mapping[listener]
        if listener in SECURITY_PROTOCOLS:
            return listener
        if not self.get("listener.security.protocol.map"):
            return "PLAINTEXT"
        raise ConfigError(f"No security protocol defined for listener {listener} in "
                          f"listener.security.protocol.map={self.get('listener.security.protocol.map')}")

    @property
    def security_protocol_map(self) -> dict[str, str]:
        mapping = {}
        for item in _names(self.get("listener.security.protocol.map")):
            name, colon, protocol = item.partition(":")
            if not colon or protocol.strip().upper() not in SECURITY_PROTOCOLS:
                raise ConfigError(f"Invalid value {item!r} in configuration listener.security.protocol.map: expected "
                                  f"LISTENER:PROTOCOL with PROTOCOL one of {', '.join(SECURITY_PROTOCOLS)}")
            mapping[name.strip()] = protocol.strip().upper()
        return mapping

    @property
    def node_id(self) -> int:
        return self.get("node.id")

    @property
    def process_roles(self) -> frozenset[str]:
        """The roles this node runs; none configured means both, a cluster of one node. A ZooKeeper-mode node runs
        the broker only (its controller is part of it)."""
        if self.zookeeper_mode:
            return frozenset((BROKER_ROLE,))
        return frozenset(_names(self.get("process.roles")) or (BROKER_ROLE, CONTROLLER_ROLE))

    @property
    def controller_listener_names(self) -> list[str]:
        return _names(self.get("controller.listener.names"))

    @property
    def quorum_voters(self) -> list[ControllerAddress]:
        return parse_quorum_voters(self.get("controller.quorum.voters"))

    @property
    def controller_addresses(self) -> list[ControllerAddress]:
        """Where this node's broker finds the controller: the voters, else the bootstrap servers."""
        return self.quorum_voters or parse_bootstrap_servers(self.get("controller.quorum.bootstrap.servers"))

    @property
    def controller_listeners(self) -> list[Endpoint]:
        names = self.controller_listener_names
        return [e for e in self.listeners if e.listener in names]

    @property
    def broker_listeners(self) -> list[Endpoint]:
        names = self.controller_listener_names
        return [e for e in self.listeners if e.listener not in names]

    @property
    def inter_broker_listener_name(self) -> str:
        """The listener other brokers reach this one on. A node with no roles configured may name its listeners
        freely: its first broker listener serves."""
        name: str = self.get("inter.broker.listener.name")
        inter_broker = self.get("security.inter.broker.protocol")
        if inter_broker is not None:  # the listener named after it, as in Kafka
            name = inter_broker.upper()
        if not self.props.get("process.roles", "").strip():
            names = [e.listener for e in self.broker_listeners]
            if names and name not in names:
                return names[0]
        return name

    @property
    def listeners(self) -> list[Endpoint]:
        return parse_listeners(self.get("listeners"))

    @property
    def advertised_listeners(self) -> list[Endpoint]:
        return parse_listeners(self.get("advertised.listeners") or self.get("listeners"))

    @property
    def log_dirs(self) -> list[Path]:
        value = self.props.get("log.dirs") or self.props.get("log.dir") or self.get("log.dirs")
        return [Path(p.strip()) for p in value.split(",") if p.strip()]

    @property
    def metadata_log_dir(self) -> Path:
        """Where a controller keeps its metadata log: metadata.log.dir, else the first log dir (as in Kafka)."""
        return Path(self.get("metadata.log.dir") or self.log_dirs[0])
