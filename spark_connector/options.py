"""Source and sink options, with the names and meanings of Spark's Kafka source and sink.

`kafka.<setting>` options are Kafka client settings. They are handed to kafka-python with dots
turned into underscores (``kafka.max.poll.records`` becomes ``max_poll_records``), after the
settings the connector owns have been refused as Spark refuses them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional

from kafka import KafkaConsumer, KafkaProducer

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

_CONSUMER_REFUSED = {
    "group.id": "the connector reads with assigned partitions and no consumer group",
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


def _convert(name: str, text: str, default: Any) -> Any:
    """Give a string option the type of kafka-python's default for that setting."""
    if name == "api_version":
        return tuple(int(part) for part in text.split("."))
    lowered = text.strip().lower()
    if isinstance(default, bool) or (default is None and lowered in ("true", "false")):
        return lowered == "true"
    for kind in (int, float):
        if isinstance(default, kind) or default is None:
            try:
                return kind(text)
            except ValueError:
                continue
    return text


def client_params(options: Mapping[str, str], client: type, refused: Mapping[str, str]) -> dict[str, Any]:
    """kafka-python keyword arguments from the `kafka.*` options (bootstrap servers excluded)."""
    params: dict[str, Any] = {}
    for key, text in options.items():
        if not key.startswith("kafka.") or key == BOOTSTRAP:
            continue
        setting = key[len("kafka."):]
        if setting in refused:
            raise ValueError(f"Kafka option '{setting}' is not supported: {refused[setting]}.")
        name = setting.replace(".", "_")
        if name not in client.DEFAULT_CONFIG:
            raise ValueError(
                f"Kafka option '{setting}' is not a setting of kafka-python's {client.__name__}, "
                "which this connector uses."
            )
        params[name] = _convert(name, text, client.DEFAULT_CONFIG[name])
    return params


def _bootstrap(options: Mapping[str, str], role: str) -> str:
    servers = options.get(BOOTSTRAP, "").strip()
    if not servers:
        raise ValueError(f"Option '{BOOTSTRAP}' must be specified for configuring Kafka {role}")
    return servers


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    text = options.get(name.lower())
    if text is None:
        return default
    if text.strip().lower() not in ("true", "false"):
        raise ValueError(f"Option '{name}' must be 'true' or 'false', got {text!r}")
    return text.strip().lower() == "true"


def _positive_int(options: Mapping[str, str], name: str) -> Optional[int]:
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


@dataclass(frozen=True)
class ReadConfig:
    """What an executor needs to read an offset range; small and picklable."""

    bootstrap_servers: str
    kafka_params: tuple[tuple[str, Any], ...]
    include_headers: bool
    fail_on_data_loss: bool
    poll_timeout_ms: int

    def consumer(self) -> KafkaConsumer:
        """A consumer with no group that reads raw bytes and never resets offsets on its own."""
        params: dict[str, Any] = {
            "group_id": None,
            "enable_auto_commit": False,
            "auto_offset_reset": "none",
            "allow_auto_create_topics": False,
            "max_partition_fetch_bytes": 8 * 1024 * 1024,
        }
        params.update(self.kafka_params)
        return KafkaConsumer(bootstrap_servers=self.bootstrap_servers, **params)


@dataclass(frozen=True)
class SourceOptions:
    """Everything the driver needs to plan reads."""

    read: ReadConfig
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec
    fail_on_no_timestamp_match: bool
    max_offsets_per_trigger: Optional[int]
    min_partitions: Optional[int]


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
    read = ReadConfig(
        bootstrap_servers=_bootstrap(options, "consumer"),
        kafka_params=tuple(sorted(client_params(options, KafkaConsumer, _CONSUMER_REFUSED).items())),
        include_headers=_bool(options, "includeHeaders", False),
        fail_on_data_loss=_bool(options, "failOnDataLoss", True),
        poll_timeout_ms=_positive_int(options, "kafkaConsumer.pollTimeoutMs") or 120_000,
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
    """What a writer task needs: where to produce, the default topic, producer settings."""

    bootstrap_servers: str
    topic: Optional[str]
    producer_params: tuple[tuple[str, Any], ...]

    def producer(self) -> KafkaProducer:
        return KafkaProducer(bootstrap_servers=self.bootstrap_servers, **dict(self.producer_params))


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    """Validate the writer options as Spark's Kafka sink does."""
    options = lower_keys(options)
    topic = options.get("topic")
    return SinkOptions(
        bootstrap_servers=_bootstrap(options, "producer"),
        topic=topic.strip() if topic and topic.strip() else None,
        producer_params=tuple(sorted(client_params(options, KafkaProducer, _PRODUCER_REFUSED).items())),
    )
