"""LogConfig: Kafka names, defaults, validation, DescribeConfigs listing, broker defaults."""

from __future__ import annotations

import pytest

from minikafka.storage.log_config import (
    LONG_MAX,
    SOURCE_DEFAULT_CONFIG,
    SOURCE_STATIC_BROKER_CONFIG,
    SOURCE_TOPIC_CONFIG,
    TOPIC_CONFIG_DEFAULTS,
    LogConfig,
    topic_defaults_from_broker_props,
)


def test_defaults_are_kafkas() -> None:
    config = LogConfig()
    assert config.segment_bytes == 1073741824
    assert config.segment_ms == 604800000
    assert config.retention_ms == 604800000
    assert config.retention_bytes == -1
    assert config.index_interval_bytes == 4096
    assert config.segment_index_bytes == 10485760
    assert config.message_timestamp_type == "CreateTime"
    assert config.max_message_bytes == 1048588
    assert config.flush_messages == LONG_MAX and config.flush_ms == LONG_MAX
    assert config.cleanup_policy == "delete" and config.delete_enabled
    assert config.min_insync_replicas == 1
    assert config.segment_jitter_ms == 0
    assert config.file_delete_delay_ms == 60000
    assert config.message_timestamp_before_max_ms == LONG_MAX
    assert config.message_timestamp_after_max_ms == 3600000
    assert config.compression_type == "producer"
    assert TOPIC_CONFIG_DEFAULTS["flush.messages"] == "9223372036854775807"
    assert TOPIC_CONFIG_DEFAULTS["unclean.leader.election.enable"] == "false"
    assert TOPIC_CONFIG_DEFAULTS["min.cleanable.dirty.ratio"] == "0.5"


def test_from_props_parses_and_records_overrides() -> None:
    config = LogConfig.from_props(
        {
            "segment.bytes": "1048576",
            "retention.ms": "-1",
            "message.timestamp.type": "LogAppendTime",
            "cleanup.policy": "compact, delete",
            "preallocate": "TRUE",
            "min.cleanable.dirty.ratio": "0.25",
        }
    )
    assert config.segment_bytes == config.segment_size == 1048576 and config.retention_ms == -1
    assert config.log_append_time and config.preallocate
    assert config.cleanup_policy == "compact,delete" and config.delete_enabled
    assert config.min_cleanable_dirty_ratio == 0.25
    assert config.overrides == {
        "segment.bytes",
        "retention.ms",
        "message.timestamp.type",
        "cleanup.policy",
        "preallocate",
        "min.cleanable.dirty.ratio",
    }
    assert config.override_props()["cleanup.policy"] == "compact,delete"
    assert not LogConfig.from_props({"cleanup.policy": "compact"}).delete_enabled


def test_from_props_layers_on_defaults() -> None:
    broker = LogConfig.from_props({"retention.ms": "1000"})
    topic = LogConfig.from_props({"segment.bytes": "2097152"}, broker)
    assert topic.retention_ms == 1000 and topic.segment_bytes == 2097152
    assert topic.overrides == {"segment.bytes"}


def test_internal_segment_bytes_is_the_tests_way_to_small_segments() -> None:
    """As Kafka 4.1: segment.bytes is at least 1 MiB; internal.segment.bytes, unchecked and listed only where set,
    overrides it for the roll."""
    with pytest.raises(ValueError, match="segment.bytes: Value must be at least 1048576"):
        LogConfig.from_props({"segment.bytes": "1048575"})
    small = LogConfig.from_props({"internal.segment.bytes": "2048"})
    assert (small.segment_size, small.segment_bytes) == (2048, 1073741824)
    described = {entry.name: entry for entry in small.describe()}
    assert described["internal.segment.bytes"].value == "2048"
    assert described["internal.segment.bytes"].source == SOURCE_TOPIC_CONFIG
    assert described["segment.bytes"].value == "1073741824"
    assert "internal.segment.bytes" not in {entry.name for entry in LogConfig().describe()}
    assert LogConfig().segment_size == 1073741824


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("segment.bytes", "abc", "Not a number of type INT"),
        ("segment.bytes", "1024", "at least 1048576"),
        ("segment.bytes", str(2**31), "Not a number of type INT"),
        ("retention.ms", "-2", "at least -1"),
        ("message.timestamp.type", "Whenever", "one of"),
        ("cleanup.policy", "delete,shred", "shred"),
        ("compression.type", "brotli", "one of"),
        ("preallocate", "yes", "true or false"),
        ("min.cleanable.dirty.ratio", "1.5", "no more than"),
        ("min.insync.replicas", "0", "at least 1"),
        ("no.such.config", "1", "Unknown topic config name"),
        ("segment.ms", None, "null"),
    ],
)
def test_from_props_rejects_bad_values(name: str, value: str | None, message: str) -> None:
    with pytest.raises(ValueError, match=message) as excinfo:
        LogConfig.from_props({name: value})
    assert name in str(excinfo.value)


def test_describe_lists_every_config_with_source() -> None:
    broker = topic_defaults_from_broker_props({"log.retention.hours": "1"})
    config = LogConfig.from_props({"segment.bytes": "4194304"}, broker)
    entries = {entry.name: entry for entry in config.describe()}
    assert set(entries) == set(TOPIC_CONFIG_DEFAULTS)
    assert entries["segment.bytes"].value == "4194304"
    assert entries["segment.bytes"].source == SOURCE_TOPIC_CONFIG and not entries["segment.bytes"].is_default
    assert entries["retention.ms"].value == "3600000"
    assert entries["retention.ms"].source == SOURCE_STATIC_BROKER_CONFIG
    assert entries["segment.ms"].is_default and entries["segment.ms"].source == SOURCE_DEFAULT_CONFIG
    assert entries["preallocate"].value == "false"
    assert not any(entry.read_only or entry.is_sensitive for entry in entries.values())


def test_topic_defaults_from_broker_props() -> None:
    config = topic_defaults_from_broker_props(
        {
            "log.segment.bytes": "1048576",
            "log.retention.minutes": "10",
            "log.retention.hours": "5",
            "log.retention.bytes": "123",
            "log.roll.hours": "2",
            "log.index.interval.bytes": "100",
            "log.flush.interval.messages": "1",
            "log.flush.interval.ms": "50",
            "message.max.bytes": "2000000",
            "log.message.timestamp.type": "LogAppendTime",
            "min.insync.replicas": "2",
            "log.cleanup.policy": "compact",
            "unrelated.broker.setting": "x",
        }
    )
    assert config.segment_bytes == 1048576
    assert config.retention_ms == 600000  # minutes win over hours
    assert config.retention_bytes == 123
    assert config.segment_ms == 7200000
    assert config.index_interval_bytes == 100
    assert config.flush_messages == 1 and config.flush_ms == 50
    assert config.max_message_bytes == 2000000
    assert config.log_append_time
    assert config.min_insync_replicas == 2
    assert config.cleanup_policy == "compact"
    assert config.overrides == frozenset()
    assert topic_defaults_from_broker_props({"log.retention.ms": "5", "log.retention.hours": "1"}).retention_ms == 5
    assert topic_defaults_from_broker_props({"log.retention.hours": "-1"}).retention_ms == -1
    assert topic_defaults_from_broker_props({"log.roll.ms": "77"}).segment_ms == 77
    with pytest.raises(ValueError, match="log.retention.hours"):
        topic_defaults_from_broker_props({"log.retention.hours": "soon"})
    with pytest.raises(ValueError, match="segment.bytes"):
        topic_defaults_from_broker_props({"log.segment.bytes": "1"})
