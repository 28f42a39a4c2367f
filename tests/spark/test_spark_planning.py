"""Planning pieces without a broker: options, offset JSON, range splitting, rate limits, jars."""

from __future__ import annotations

from itertools import pairwise

import pytest

pytest.importorskip("pyspark")


from minikafka.spark_connector import jvm_kafka_options
from minikafka.spark_connector.jvm import JARS_MISSING
from minikafka.spark_connector.offsets import (
    Earliest,
    GlobalTimestamp,
    Latest,
    SpecificOffsets,
    offsets_from_json,
    offsets_to_json,
)
from minikafka.spark_connector.offsets import TopicPartition as TP
from minikafka.spark_connector.options import parse_sink_options, parse_source_options
from minikafka.spark_connector.ranges import OffsetRange, rate_limit, split_ranges
from minikafka.spark_connector.subscription import Assign, Subscribe, SubscribePattern

pytestmark = pytest.mark.spark

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def test_defaults_follow_spark():
    batch = parse_source_options({**BASE, "subscribe": "a, b"}, streaming=False)
    assert batch.subscription == Subscribe(("a", "b"))
    assert batch.starting == Earliest() and batch.ending == Latest()
    assert batch.read.fail_on_data_loss and not batch.read.include_headers
    stream = parse_source_options({**BASE, "subscribePattern": "t-.*"}, streaming=True)
    assert stream.subscription == SubscribePattern("t-.*") and stream.starting == Latest()


def test_option_names_are_case_insensitive_and_kafka_properties_pass_through():
    options = parse_source_options(
        {
            "KAFKA.BOOTSTRAP.SERVERS": "h:1",
            "ASSIGN": '{"a":[0,2]}',
            "STARTINGOFFSETS": '{"a":{"0":5,"2":-2}}',
            "includeheaders": "TRUE",
            "kafka.fetch.max.bytes": "7000",
            "maxoffsetspertrigger": "10",
        },
        streaming=True,
    )
    assert options.subscription == Assign((TP("a", 0), TP("a", 2)))
    assert options.starting == SpecificOffsets(((TP("a", 0), 5), (TP("a", 2), -2)))
    assert options.read.include_headers
    assert dict(options.read.properties) == {"bootstrap.servers": "h:1", "fetch.max.bytes": "7000"}
    assert options.max_offsets_per_trigger == 10


def test_isolation_level_defaults_to_read_uncommitted_and_reaches_the_consumer_only_as_checked():
    assert parse_source_options({**BASE, "subscribe": "a"}, streaming=False).read.isolation_level == "read_uncommitted"
    read = parse_source_options(
        {**BASE, "subscribe": "a", "KAFKA.ISOLATION.LEVEL": "read_committed"}, streaming=True
    ).read
    assert read.isolation_level == "read_committed"
    assert "isolation.level" not in dict(read.properties)


def test_starting_timestamp_wins_over_starting_offsets():
    options = parse_source_options(
        {**BASE, "subscribe": "a", "startingOffsets": "earliest", "startingTimestamp": "1000"}, streaming=True
    )
    assert options.starting == GlobalTimestamp(1000)


@pytest.mark.parametrize(
    "extra, streaming, message",
    [
        ({}, False, "One of the following options must be specified"),
        ({"subscribe": "a", "assign": '{"a":[0]}'}, False, "Only one of the following options"),
        ({"subscribe": " , "}, False, "No topics to subscribe to"),
        ({"assign": "[1]"}, False, "expected e.g."),
        ({"subscribe": "a", "startingOffsets": "latest"}, False, "can't be latest for batch"),
        ({"subscribe": "a", "endingOffsets": '{"a":{"0":-2}}'}, False, "can't be earliest for batch"),
        ({"subscribe": "a", "endingOffsets": "latest"}, True, "not valid in streaming"),
        ({"subscribe": "a", "minPartitions": "0"}, False, "positive integer"),
        ({"subscribe": "a", "failOnDataLoss": "maybe"}, False, "'true' or 'false'"),
        ({"subscribe": "a", "kafka.auto.offset.reset": "earliest"}, False, "startingOffsets"),
        ({"subscribe": "a", "kafka.isolation.level": "READ_COMMITTED"}, False, "one of: read_committed, read_"),
    ],
)
def test_invalid_source_options(extra, streaming, message):
    with pytest.raises(ValueError, match=message):
        parse_source_options({**BASE, **extra}, streaming=streaming)


def test_missing_bootstrap_servers():
    with pytest.raises(ValueError, match="kafka.bootstrap.servers"):
        parse_source_options({"subscribe": "a"}, streaming=False)


def test_sink_options():
    sink = parse_sink_options({**BASE, "topic": "out", "kafka.linger.ms": "5", "kafka.acks": "all"})
    assert sink.topic == "out"
    assert dict(sink.properties) == {"acks": "all", "bootstrap.servers": "127.0.0.1:9092", "linger.ms": "5"}
    with pytest.raises(ValueError, match="value.serializer"):
        parse_sink_options({**BASE, "kafka.value.serializer": "x"})


def test_subscription_selects_existing_partitions():
    cluster = {"a": {0, 1}, "ab": {0}, "b": {0}, "__consumer_offsets": {0}}
    assert Subscribe(("a", "missing")).select(cluster) == [TP("a", 0), TP("a", 1)]
    assert SubscribePattern("a.*").select(cluster) == [TP("a", 0), TP("a", 1), TP("ab", 0)]
    assert SubscribePattern("b").select(cluster) == [TP("b", 0)]
    assert SubscribePattern(".*").select(cluster) == [TP("a", 0), TP("a", 1), TP("ab", 0), TP("b", 0)]
    assert Assign((TP("a", 1), TP("b", 3))).select(cluster) == [TP("a", 1)]


def test_offset_json_is_sparks_and_canonical():
    offsets = {TP("b", 10): 3, TP("a", 2): 7, TP("a", 0): 1}
    as_json = offsets_to_json(offsets)
    assert list(as_json) == ["a", "b"] and list(as_json["a"]) == ["0", "2"]
    assert offsets_from_json(as_json) == offsets


def test_split_ranges_by_min_partitions():
    ranges = [OffsetRange("t", 0, 0, 90), OffsetRange("t", 1, 5, 15), OffsetRange("t", 2, 3, 3)]
    assert split_ranges(ranges, None) == ranges[:2]
    pieces = split_ranges(ranges, 10)
    assert len(pieces) == 10
    for p in (0, 1):
        mine = [r for r in pieces if r.partition == p]
        assert mine[0].start == ranges[p].start and mine[-1].end == ranges[p].end
        assert all(a.end == b.start for a, b in pairwise(mine))
    assert split_ranges(ranges, 2) == ranges[:2]
    # Spark's pieces: the small partition's share rounds to one piece and stays whole; the big one takes the rest.
    assert pieces == [OffsetRange("t", 0, 10 * i, 10 * i + 10) for i in range(9)] + [ranges[1]]
    skewed = [OffsetRange("t", 0, 0, 1000), OffsetRange("t", 1, 0, 5), OffsetRange("t", 2, 0, 7)]
    assert split_ranges(skewed, 4) == [OffsetRange("t", 0, 0, 500), OffsetRange("t", 0, 500, 1000), *skewed[1:]]
    uneven = split_ranges([OffsetRange("t", 0, 0, 10)], 3)
    assert [(r.start, r.end) for r in uneven] == [(0, 3), (3, 6), (6, 10)]


def test_rate_limit_takes_exactly_the_limit_without_starving():
    start = {TP("t", 0): 0, TP("t", 1): 10, TP("t", 2): 4}
    end = {TP("t", 0): 1000, TP("t", 1): 13, TP("t", 2): 4}
    limited = rate_limit(start, end, 100)
    assert sum(limited[tp] - start[tp] for tp in start) == 100
    assert limited[TP("t", 1)] > 10 and limited[TP("t", 2)] == 4
    assert all(start[tp] <= limited[tp] <= end[tp] for tp in start)
    assert rate_limit(start, end, 10_000) == end


def test_jvm_kafka_options(tmp_path, monkeypatch):
    jars = [tmp_path / "spark-sql-kafka-0-10_2.13.jar", tmp_path / "kafka-clients.jar"]
    for jar in jars:
        jar.write_bytes(b"PK")
    monkeypatch.setenv("SPARK_KAFKA_JARS", ",".join(map(str, jars)))
    settings = jvm_kafka_options("127.0.0.1:9092")
    assert settings.options == {"kafka.bootstrap.servers": "127.0.0.1:9092"}
    assert settings.spark_jars == ",".join(map(str, jars))
    options, spark_jars = jvm_kafka_options("h:1", jars=[str(jars[0])])
    assert spark_jars == str(jars[0])
    with pytest.raises(FileNotFoundError):
        jvm_kafka_options("h:1", jars=str(tmp_path / "missing.jar"))
    monkeypatch.delenv("SPARK_KAFKA_JARS")
    with pytest.raises(LookupError, match=JARS_MISSING):
        jvm_kafka_options("h:1")
