"""Source and sink options, with the names and meanings of Spark's Kafka source and sink.

`kafka.<property>` options are Kafka client properties. The connector's client is librdkafka
(confluent-kafka), whose property names are those of the Java client, so they are passed on as
they are, after the properties the connector owns have been refused as Spark refuses them.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, Message, Producer

from .offsets import (
    EARLIEST,
    LATEST,
    Earliest,
    Latest,
    OffsetSpec,
    SpecificOffsets,
    parse_offset_spec,
    parse_timestamp_spec,
)
from .subscription import Subscription, parse_subscription

BOOTSTRAP = "kafka.bootstrap.servers"
ISOLATION_LEVEL = "kafka.isolation.level"
READ_COMMITTED = "read_committed"
READ_UNCOMMITTED = "read_uncommitted"

_CONSUMER_REFUSED = {
    "auto.offset.reset": "set the source option 'startingOffsets' to 'earliest' or 'latest' instead",
    "key.deserializer": "keys are always read as bytes; convert them with DataFrame operations",
    "value.deserializer": "values are always read as bytes; convert them with DataFrame operations",
    "enable.auto.commit": "the connector does not commit offsets to Kafka; the checkpoint tracks them",
    "interceptor.classes": "interceptors are not supported",
}
_PRODUCER_REFUSED = {
    "key.serializer": "keys are always written as bytes (string keys as UTF-8)",
    "value.serializer": "values are always written as bytes (string values as UTF-8)",
}


def lower_keys(options: Mapping[str, str]) -> dict[str, str]:
    """Spark's option names are case-insensitive; everything below looks names up in lower case."""
    return {str(k).lower(): str(v) for k, v in options.items()}


def client_properties(options: Mapping[str, str], refused: Mapping[str, str]) -> dict[str, str]:
    """The `kafka.*` options without their prefix, bootstrap.servers included."""
    properties = {}
    for key, value in options.items():
        if key.startswith("kafka."):
            name = key[len("kafka."):]
            if name in refused:
                raise ValueError(f"Kafka option '{name}' is not supported: {refused[name]}.")
            properties[name] = value
    return properties


def _require_bootstrap(options: Mapping[str, str], role: str) -> None:
    if not options.get(BOOTSTRAP, "").strip():
        raise ValueError(f"Option '{BOOTSTRAP}' must be specified for configuring Kafka {role}")


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    text = options.get(name.lower())
    if text is None:
        return default
    if text.strip().lower() not in ("true", "false"):
        raise ValueError(f"Option '{name}' must be 'true' or 'false', got {text!r}")
    return text.strip().lower() == "true"


def _positive_int(options: Mapping[str, str], name: str) -> int | None:
    text = options.get(name.lower())
    if text is None:
        return None
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise ValueError(f"Option '{name}' must be a positive integer, got {text!r}")
    return value


# Kafka consumer properties (the Java client's names and defaults) the connector's own Fetch client honours; with
# any other kafka.* property (TLS, SASL, client.rack, librdkafka's own ...) an executor reads through librdkafka.
FETCH_DEFAULTS = {
    "fetch.max.bytes": 52_428_800,
    "max.partition.fetch.bytes": 8 * 1024 * 1024,  # Kafka's 1 MiB is sized for many partitions per request
    "fetch.min.bytes": 1,
    "fetch.max.wait.ms": 500,
    "request.timeout.ms": 30_000,
    "retry.backoff.ms": 100,
}
FETCH_IGNORED = frozenset({
    "bootstrap.servers", "client.id", "group.id", "allow.auto.create.topics", "check.crcs", "client.dns.lookup",
    "connections.max.idle.ms", "metadata.max.age.ms", "reconnect.backoff.ms", "reconnect.backoff.max.ms",
    "retry.backoff.max.ms", "receive.buffer.bytes", "send.buffer.bytes", "socket.connection.setup.timeout.ms",
    "socket.connection.setup.timeout.max.ms", "default.api.timeout.ms", "session.timeout.ms",
    "heartbeat.interval.ms", "max.poll.records", "max.poll.interval.ms", "auto.commit.interval.ms",
})  # fmt: skip
FETCHERS = ("auto", "librdkafka")


@dataclass(frozen=True)
class FetchSettings:
    """Kafka's consumer fetch properties, as the Java client names them."""

    isolation_level: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    partition_max_bytes: int


@dataclass(frozen=True)
class ReadConfig:
    """What an executor needs to read an offset range; small and picklable."""

    properties: tuple[tuple[str, str], ...]
    include_headers: bool
    fail_on_data_loss: bool
    poll_timeout_ms: int
    isolation_level: str
    fetcher: str = "auto"

    @property
    def direct_fetch(self) -> bool:
        """Whether executors read with the connector's own Fetch client (see FETCH_DEFAULTS), not librdkafka."""
        if self.fetcher != "auto":
            return False
        for name, value in self.properties:
            if name == "security.protocol" and value.strip().upper() == "PLAINTEXT":
                continue
            if name not in FETCH_DEFAULTS and name not in FETCH_IGNORED:
                return False
        return True

    def _property(self, name: str) -> str | None:
        return dict(self.properties).get(name)

    def _int(self, name: str) -> int:
        text = self._property(name)
        if text is None:
            return FETCH_DEFAULTS[name]
        try:
            return int(text)
        except ValueError:
            raise ValueError(f"Kafka option '{name}' must be an integer, got {text!r}") from None

    @property
    def bootstrap_servers(self) -> str:
        return self._property("bootstrap.servers") or ""

    @property
    def client_id(self) -> str:
        return self._property("client.id") or "minikafka-spark"

    @property
    def request_timeout_ms(self) -> int:
        return self._int("request.timeout.ms")

    @property
    def retry_backoff_ms(self) -> int:
        return self._int("retry.backoff.ms")

    def fetch_settings(self) -> FetchSettings:
        return FetchSettings(
            isolation_level=1 if self.isolation_level == READ_COMMITTED else 0,
            max_wait_ms=self._int("fetch.max.wait.ms"),
            min_bytes=self._int("fetch.min.bytes"),
            max_bytes=self._int("fetch.max.bytes"),
            partition_max_bytes=self._int("max.partition.fetch.bytes"),
        )

    def consumer(self) -> Consumer:
        """A consumer that reads assigned partitions and never commits or resets offsets itself.

        librdkafka requires a group id even without group membership; a fresh one keeps
        consumers apart. The isolation level decides what "latest" means (the high watermark, or
        the last stable offset under read_committed) as well as which records come. The end of a
        partition is reported as an event, so a reader can tell that offsets it is still missing
        hold no record for it (transaction markers, aborted records).
        """
        config = {
            "group.id": f"minikafka-spark-{uuid.uuid4().hex}",
            "max.partition.fetch.bytes": str(8 * 1024 * 1024),
            "allow.auto.create.topics": "false",
        }
        config.update(self.properties)
        config.update(
            {
                "isolation.level": self.isolation_level,
                "enable.auto.commit": "false",
                "auto.offset.reset": "error",
                "enable.partition.eof": "true",
            }
        )
        return Consumer(config)


@dataclass(frozen=True)
class SourceOptions:
    """Everything the driver needs to plan reads."""

    read: ReadConfig
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec
    fail_on_no_timestamp_match: bool
    max_offsets_per_trigger: int | None
    min_partitions: int | None


def _isolation_level(options: Mapping[str, str]) -> str:
    """kafka.isolation.level, checked here rather than by the client on an executor.

    The values are those of the Java client, which Spark's source hands the option to, and are
    just as case-sensitive; read_uncommitted is its default.
    """
    value = options.get(ISOLATION_LEVEL, READ_UNCOMMITTED)
    if value not in (READ_COMMITTED, READ_UNCOMMITTED):
        raise ValueError(
            f"Invalid value {value} for configuration isolation.level (option '{ISOLATION_LEVEL}'): "
            f"String must be one of: {READ_COMMITTED}, {READ_UNCOMMITTED}"
        )
    return value


def _fetcher(options: Mapping[str, str]) -> str:
    """`fetcher`: "auto" reads with the connector's own Fetch client where the kafka.* options allow it,
    "librdkafka" always through librdkafka's consumer."""
    value = options.get("fetcher", "auto").strip().lower()
    if value not in FETCHERS:
        raise ValueError(f"Option 'fetcher' must be one of {', '.join(FETCHERS)}, got {value!r}")
    return value


def _starting_spec(options: Mapping[str, str], default: OffsetSpec) -> OffsetSpec:
    """startingTimestamp wins over startingOffsetsByTimestamp, which wins over startingOffsets."""
    for name in ("startingTimestamp", "startingOffsetsByTimestamp"):
        if name.lower() in options:
            return parse_timestamp_spec(name, options[name.lower()])
    if "startingoffsets" in options:
        return parse_offset_spec("startingOffsets", options["startingoffsets"])
    return default


def _ending_spec(options: Mapping[str, str]) -> OffsetSpec:
    for name in ("endingTimestamp", "endingOffsetsByTimestamp"):
        if name.lower() in options:
            return parse_timestamp_spec(name, options[name.lower()])
    if "endingoffsets" in options:
        return parse_offset_spec("endingOffsets", options["endingoffsets"])
    return Latest()


def _check_batch_bounds(starting: OffsetSpec, ending: OffsetSpec) -> None:
    """Spark refuses a batch that starts at latest or ends at earliest."""
    if isinstance(starting, Latest):
        raise ValueError("starting offset can't be latest for batch queries on Kafka")
    if isinstance(ending, Earliest):
        raise ValueError("ending offset can't be earliest for batch queries on Kafka")
    for spec, bad, word, which in ((starting, LATEST, "latest", "starting"), (ending, EARLIEST, "earliest", "ending")):
        if isinstance(spec, SpecificOffsets):
            for tp, offset in spec.offsets:
                if offset == bad:
                    raise ValueError(
                        f"{which} offset for {tp.topic}-{tp.partition} can't be {word} for batch queries on Kafka"
                    )


def parse_source_options(options: Mapping[str, str], streaming: bool) -> SourceOptions:
    """Validate the reader options as Spark's Kafka source does."""
    options = lower_keys(options)
    starting = _starting_spec(options, Latest() if streaming else Earliest())
    ending_names = ("endingoffsets", "endingtimestamp", "endingoffsetsbytimestamp")
    if streaming:
        given = [n for n in ending_names if n in options]
        if given:
            raise ValueError(f"Option '{given[0]}' is not valid in streaming queries")
        ending: OffsetSpec = Latest()
    else:
        ending = _ending_spec(options)
        _check_batch_bounds(starting, ending)
    strategy = options.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise ValueError(f"Option 'startingOffsetsByTimestampStrategy' must be 'error' or 'latest', got {strategy!r}")
    _require_bootstrap(options, "consumer")
    properties = client_properties(options, _CONSUMER_REFUSED)
    properties.pop("isolation.level", None)
    read = ReadConfig(
        properties=tuple(sorted(properties.items())),
        include_headers=_bool(options, "includeHeaders", False),
        fail_on_data_loss=_bool(options, "failOnDataLoss", True),
        poll_timeout_ms=_positive_int(options, "kafkaConsumer.pollTimeoutMs") or 120_000,
        isolation_level=_isolation_level(options),
        fetcher=_fetcher(options),
    )
    return SourceOptions(
        read=read,
        subscription=parse_subscription(options),
        starting=starting,
        ending=ending,
        fail_on_no_timestamp_match=strategy == "error",
        max_offsets_per_trigger=_positive_int(options, "maxOffsetsPerTrigger"),
        min_partitions=_positive_int(options, "minPartitions"),
    )


@dataclass(frozen=True)
class SinkOptions:
    """What a writer task needs: producer properties and the default topic."""

    topic: str | None
    properties: tuple[tuple[str, str], ...]

    def producer(self, on_delivery: Callable[[KafkaError | None, Message], None]) -> Producer:
        """A producer that reports only failed deliveries, to `on_delivery`, and partitions keys as the Java
        client does."""
        config: dict[str, object] = {"partitioner": "murmur2_random"}
        config.update(self.properties)
        config["delivery.report.only.error"] = True
        config["on_delivery"] = on_delivery
        return Producer(config)


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    """Validate the writer options as Spark's Kafka sink does."""
    options = lower_keys(options)
    _require_bootstrap(options, "producer")
    topic = options.get("topic", "").strip()
    return SinkOptions(
        topic=topic or None,
        properties=tuple(sorted(client_properties(options, _PRODUCER_REFUSED).items())),
    )
