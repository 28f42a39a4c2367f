"""df.write / writeStream .format("minikafka"), read back with kafka-python and with the source."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")

from spark_helpers import consume_all, create_topic, produce

pytestmark = pytest.mark.spark


def test_batch_write_then_read(spark, broker, unique_topic):
    create_topic(broker.bootstrap_servers, unique_topic, partitions=3)
    rows = [
        (f"k{i}" if i % 4 else None, bytes([i, 255 - i]) * i, i % 3, [("n", str(i).encode())] * (i % 2))
        for i in range(60)
    ]
    df = spark.createDataFrame(
        rows, "key string, value binary, partition int, headers array<struct<key:string,value:binary>>"
    )
    (
        df.write.format("minikafka")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("topic", unique_topic)
        .option("kafka.linger.ms", "5")
        .mode("append")
        .save()
    )
    expected = sorted(((k or "").encode(), v, p, h) for k, v, p, h in rows)
    stored = consume_all(broker.bootstrap_servers, unique_topic, expected=len(rows))
    assert sorted((r.key or b"", r.value, r.partition, list(r.headers)) for r in stored) == expected

    back = (
        spark.read.format("minikafka")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("subscribe", unique_topic)
        .option("includeHeaders", "true")
        .load()
        .collect()
    )
    got = sorted((r.key or b"", r.value, r.partition, [(h.key, h.value) for h in r.headers or ()]) for r in back)
    assert got == expected


def test_topic_column_routes_rows_and_schema_is_checked(spark, broker, unique_topic):
    topics = [unique_topic + "-a", unique_topic + "-b"]
    for topic in topics:
        create_topic(broker.bootstrap_servers, topic)
    df = spark.createDataFrame([(topics[i % 2], f"v{i}") for i in range(10)], "topic string, value string")
    df.write.format("minikafka").option("kafka.bootstrap.servers", broker.bootstrap_servers).mode("append").save()
    for n, topic in enumerate(topics):
        values = sorted(r.value for r in consume_all(broker.bootstrap_servers, topic, expected=5))
        assert values == [f"v{i}".encode() for i in range(n, 10, 2)]

    with pytest.raises(Exception, match="Required attribute 'value' not found"):
        spark.createDataFrame([("x",)], "key string").write.format("minikafka").option(
            "kafka.bootstrap.servers", broker.bootstrap_servers
        ).option("topic", unique_topic).mode("append").save()
    with pytest.raises(Exception, match="topic option required"):
        spark.createDataFrame([("x",)], "value string").write.format("minikafka").option(
            "kafka.bootstrap.servers", broker.bootstrap_servers
        ).mode("append").save()


def test_streaming_write_then_read(spark, broker, unique_topic, tmp_path, stop_queries):
    source, sink = unique_topic + "-in", unique_topic + "-out"
    create_topic(broker.bootstrap_servers, source, partitions=2)
    create_topic(broker.bootstrap_servers, sink, partitions=2)
    records = [
        {"key": b"k%d" % (i % 5), "value": b"v%d" % i, "headers": [("i", b"%d" % i)], "partition": i % 2}
        for i in range(80)
    ]
    produce(broker.bootstrap_servers, source, records)
    query = (
        spark.readStream.format("minikafka")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
        .option("maxOffsetsPerTrigger", "25")
        .load()
        .selectExpr("key", "UPPER(CAST(value AS STRING)) AS value", "headers", "partition")
        .writeStream.format("minikafka")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("topic", sink)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120)
    back = (
        spark.read.format("minikafka")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("subscribe", sink)
        .option("includeHeaders", "true")
        .load()
        .collect()
    )
    assert sorted((r.partition, r.key, r.value, [(h.key, h.value) for h in r.headers]) for r in back) == sorted(
        (r["partition"], r["key"], r["value"].upper(), r["headers"]) for r in records
    )
