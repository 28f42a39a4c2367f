"""spark.read.format("minikafka") against a real broker process."""

from __future__ import annotations

import json
import os
import random

import pytest

pytest.importorskip("pyspark")

from spark_helpers import create_topic, delete_records, produce

pytestmark = pytest.mark.spark

BASE_TS = 1_700_000_000_000
FETCHERS = ["auto", "librdkafka"]  # the connector's own Fetch client, librdkafka's consumer


def _records(n_partitions: int, per_partition: int) -> list[dict]:
    rng = random.Random(7)
    records = []
    for i in range(n_partitions * per_partition):
        headers = [(f"h{j}", os.urandom(j)) for j in range(i % 3)]
        records.append(
            {
                "partition": i % n_partitions,
                "key": None if i % 5 == 0 else f"key-{i % 7}".encode(),
                "value": bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 300))),
                "timestamp_ms": BASE_TS + i * 1000,
                "headers": headers,
            }
        )
    return records


def _read(spark, broker, **options):
    reader = spark.read.format("minikafka").option("kafka.bootstrap.servers", broker.bootstrap_servers)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


@pytest.mark.parametrize("fetcher", FETCHERS)
def test_batch_read_equals_what_was_produced(spark, broker, unique_topic, fetcher):
    create_topic(broker.bootstrap_servers, unique_topic, partitions=3)
    records = _records(3, 40)
    acks = produce(broker.bootstrap_servers, unique_topic, records)

    df = _read(spark, broker, subscribe=unique_topic, includeHeaders="true", fetcher=fetcher)
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,timestamp:timestamp,"
        "timestampType:int,headers:array<struct<key:string,value:binary>>>"
    )
    assert df.rdd.getNumPartitions() == 3
    rows = {(r.partition, r.offset): r for r in df.collect()}
    assert len(rows) == len(records)
    for record, ack in zip(records, acks, strict=True):
        row = rows[(ack.partition, ack.offset)]
        assert row.topic == unique_topic and row.partition == record["partition"]
        assert row.key == record["key"] and row.value == record["value"]
        assert int(row.timestamp.timestamp() * 1000) == record["timestamp_ms"]
        assert row.timestampType == 0
        assert [(h.key, h.value) for h in row.headers or ()] == record["headers"]
        assert (row.headers is None) == (not record["headers"])


def test_offset_bounds_timestamps_and_min_partitions(spark, broker, unique_topic):
    create_topic(broker.bootstrap_servers, unique_topic, partitions=2)
    produce(broker.bootstrap_servers, unique_topic, _records(2, 20))

    def offsets(df):
        return sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())

    bounded = _read(
        spark,
        broker,
        subscribe=unique_topic,
        startingOffsets=json.dumps({unique_topic: {"0": 5, "1": -2}}),
        endingOffsets=json.dumps({unique_topic: {"0": 8, "1": -1}}),
    )
    assert offsets(bounded) == [(0, 5), (0, 6), (0, 7)] + [(1, o) for o in range(20)]

    # Record i has timestamp BASE_TS + i s and sits in partition i % 2 at offset i // 2.
    pattern = unique_topic + "|nothing"
    from_time = _read(spark, broker, subscribePattern=pattern, startingTimestamp=str(BASE_TS + 30_000))
    assert offsets(from_time) == [(0, o) for o in range(15, 20)] + [(1, o) for o in range(15, 20)]
    late = _read(
        spark,
        broker,
        assign=json.dumps({unique_topic: [1]}),
        startingTimestamp=str(BASE_TS + 10_000_000),
        startingOffsetsByTimestampStrategy="latest",
    )
    assert late.count() == 0

    split = _read(spark, broker, assign=json.dumps({unique_topic: [0, 1]}), minPartitions="6")
    assert split.rdd.getNumPartitions() == 6
    assert offsets(split) == [(p, o) for p in (0, 1) for o in range(20)]


def test_missing_topic_reads_empty_and_bad_options_fail(spark, broker, unique_topic):
    assert _read(spark, broker, subscribe=unique_topic).count() == 0
    with pytest.raises(Exception, match="can't be latest for batch queries"):
        _read(spark, broker, subscribe=unique_topic, startingOffsets="latest").collect()
    with pytest.raises(Exception, match="fixed schema"):
        spark.read.format("minikafka").schema("value binary").option(
            "kafka.bootstrap.servers", broker.bootstrap_servers
        ).option("subscribe", unique_topic).load().collect()


@pytest.mark.parametrize("fetcher", FETCHERS)
def test_data_loss_after_delete_records(spark, broker, unique_topic, fetcher):
    create_topic(broker.bootstrap_servers, unique_topic)
    produce(broker.bootstrap_servers, unique_topic, [{"value": b"%d" % i} for i in range(10)])
    delete_records(broker.bootstrap_servers, unique_topic, 0, 4)
    from_zero = json.dumps({unique_topic: {"0": 0}})
    with pytest.raises(Exception, match="failOnDataLoss"):
        _read(spark, broker, subscribe=unique_topic, startingOffsets=from_zero, fetcher=fetcher).collect()
    kept = _read(spark, broker, subscribe=unique_topic, startingOffsets=from_zero, failOnDataLoss="false",
                 fetcher=fetcher)
    assert [r.offset for r in kept.collect()] == list(range(4, 10))


def test_both_fetchers_give_the_same_rows(spark, broker, unique_topic):
    """Every codec, LogAppendTime, null keys and values, headers with null values, values from empty to 100 KB:
    the connector's own Fetch client gives exactly librdkafka's rows."""
    from confluent_kafka import Producer
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    cases = {f"{unique_topic}-{codec}": codec for codec in ("none", "gzip", "snappy", "lz4", "zstd")}
    append_time = f"{unique_topic}-append-time"
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        admin.create_topics([NewTopic(t, num_partitions=2, replication_factor=1) for t in cases] + [
            NewTopic(append_time, num_partitions=2, replication_factor=1,
                     topic_configs={"message.timestamp.type": "LogAppendTime"})])
    finally:
        admin.close()
    rng = random.Random(11)
    sizes = [0, 1, 100, 1000, 100_000]
    for topic, codec in [*cases.items(), (append_time, "lz4")]:
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "compression.type": codec,
                             "linger.ms": 5, "batch.size": 65536})
        for i in range(600):
            value = None if i % 11 == 0 else rng.randbytes(rng.choice(sizes))
            headers = [("h", None), ("caf\u00e9", b"x" * (i % 4))] if i % 3 == 0 else None
            producer.produce(topic, value, key=None if i % 4 == 0 else b"k%d" % i, partition=i % 2,
                             headers=headers, timestamp=BASE_TS + i)
        assert producer.flush(30) == 0

    def rows(fetcher: str, topic: str) -> list[tuple]:
        df = _read(spark, broker, subscribe=topic, includeHeaders="true", fetcher=fetcher)
        return sorted((r.partition, r.offset, r.key, r.value, r.timestamp, r.timestampType,
                       None if r.headers is None else [(h.key, h.value) for h in r.headers]) for r in df.collect())

    for topic in [*cases, append_time]:
        direct, librdkafka = rows("auto", topic), rows("librdkafka", topic)
        assert len(direct) == 600, topic
        assert direct == librdkafka, topic
        assert {r[5] for r in direct} == ({1} if topic == append_time else {0})
