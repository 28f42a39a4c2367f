"""Broker configuration by Kafka's own property names and defaults.

Values come from a `server.properties` file, CLI flags and the Python API, in that order of increasing
precedence; everything is kept as Kafka property strings so a value means what it means in Kafka.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from minikafka.storage.properties import read_properties

# name -> (type, default). Only properties minikafka acts on; others are accepted and logged as unknown.
BROKER_PROPERTIES: dict[str, tuple[type, object]] = {
    "node.id": (int, 1),
    "cluster.id": (str, ""),
    "listeners": (str, "PLAINTEXT://127.0.0.1:9092"),
    "advertised.listeners": (str, ""),
    "log.dirs": (str, "./minikafka-data"),
    "log.dir": (str, ""),
    "num.partitions": (int, 1),
    "default.replication.factor": (int, 1),
    "auto.create.topics.enable": (bool, True),
    "delete.topic.enable": (bool, True),
    "socket.request.max.bytes": (int, 104857600),
    "message.max.bytes": (int, 1048588),
    "log.segment.bytes": (int, 1073741824),
    "log.roll.ms": (int, None),
    "log.roll.hours": (int, 168),
    "log.retention.ms": (int, None),
    "log.retention.minutes": (int, None),
    "log.retention.hours": (int, 168),
    "log.retention.bytes": (int, -1),
    "log.retention.check.interval.ms": (int, 300000),
    "log.index.interval.bytes": (int, 4096),
    "log.index.size.max.bytes": (int, 10485760),
    "log.flush.interval.messages": (int, 9223372036854775807),
    "log.flush.interval.ms": (int, None),
    "log.flush.scheduler.interval.ms": (int, 9223372036854775807),
    "log.flush.offset.checkpoint.interval.ms": (int, 60000),
    "log.flush.start.offset.checkpoint.interval.ms": (int, 60000),
    "log.message.timestamp.type": (str, "CreateTime"),
    "min.insync.replicas": (int, 1),
    "replica.lag.time.max.ms": (int, 30000),
    "unclean.leader.election.enable": (bool, False),
    "offsets.topic.num.partitions": (int, 50),
    "offsets.topic.replication.factor": (int, 1),
    "offsets.retention.minutes": (int, 10080),
    "offsets.retention.check.interval.ms": (int, 600000),
    "offsets.commit.timeout.ms": (int, 5000),
    "offset.metadata.max.bytes": (int, 4096),
    "group.min.session.timeout.ms": (int, 6000),
    "group.max.session.timeout.ms": (int, 1800000),
    "group.initial.rebalance.delay.ms": (int, 3000),
    "group.max.size": (int, 2147483647),
    "connections.max.idle.ms": (int, 600000),
    "transactional.id.expiration.ms": (int, 604800000),
    "producer.id.expiration.ms": (int, 86400000),
}


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
        kind, default = BROKER_PROPERTIES[name]
        return _parse(name, kind, self.props[name]) if name in self.props else default

    def unknown_properties(self) -> list[str]:
        return sorted(k for k in self.props if k not in BROKER_PROPERTIES)

    @property
    def node_id(self) -> int:
        return self.get("node.id")

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
