"""spark.readStream.format("minikafka"): micro-batches, checkpoints, rate limits and data loss."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")

from spark_helpers import create_topic, delete_records, produce, wait_until

pytestmark = pytest.mark.spark

ONCE = {"availableNow": True}


def _stream(spark, broker, topic, **options):
    reader = (
        spark.readStream.format("minikafka")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("subscribe", topic)
    )
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load().selectExpr("partition", "offset", "CAST(value AS STRING) AS value")


def _to_files(df, out, checkpoint, **trigger):
    return (
        df.writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
        .trigger(**trigger)
        .start()
    )


def _sink_rows(spark, out):
    if not (out / "_spark_metadata").exists():
        return []
    return spark.read.schema("partition int, offset long, value string").parquet(str(out)).collect()


def _values(prefix, n):
    return [{"value": f"{prefix}-{i}".encode(), "partition": i % 2} for i in range(n)]


def test_stream_with_restart_reads_every_record_exactly_once(spark, broker, unique_topic, tmp_path, stop_queries):
    create_topic(broker.bootstrap_servers, unique_topic, partitions=2)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    produced = []

    def send(prefix, n):
        records = _values(prefix, n)
        produce(broker.bootstrap_servers, unique_topic, records)
        produced.extend(r["value"].decode() for r in records)

    def start():
        df = _stream(spark, broker, unique_topic, startingOffsets="earliest")
        return _to_files(df, out, checkpoint, processingTime="500 milliseconds")

    send("before", 30)
    query = start()
    for burst in range(3):
        send(f"running{burst}", 20)
    wait_until(lambda: len(_sink_rows(spark, out)) >= len(produced), 90, message="the first run to catch up")
    query.stop()

    send("stopped", 25)
    query = start()
    send("restarted", 25)
    wait_until(lambda: len(_sink_rows(spark, out)) >= len(produced), 90, message="the second run to catch up")
    query.stop()

    rows = _sink_rows(spark, out)
    assert len({(r.partition, r.offset) for r in rows}) == len(rows)
    assert sorted(r.value for r in rows) == sorted(produced)


def test_max_offsets_per_trigger_spreads_over_micro_batches(spark, broker, unique_topic, tmp_path, stop_queries):
    create_topic(broker.bootstrap_servers, unique_topic, partitions=2)
    produce(broker.bootstrap_servers, unique_topic, _values("v", 100))
    query = (
        _stream(spark, broker, unique_topic, startingOffsets="earliest", maxOffsetsPerTrigger="30")
        .writeStream.format("memory")
        .queryName("rate_limited")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120)
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert sizes == [30, 30, 30, 10]
    rows = spark.table("rate_limited").collect()
    assert sorted(r.value for r in rows) == sorted(f"v-{i}" for i in range(100))


def test_stream_data_loss_fails_or_skips(spark, broker, unique_topic, tmp_path, stop_queries):
    create_topic(broker.bootstrap_servers, unique_topic)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    produce(broker.bootstrap_servers, unique_topic, [{"value": b"%d" % i} for i in range(10)])
    first = _to_files(_stream(spark, broker, unique_topic, startingOffsets="earliest"), out, checkpoint, **ONCE)
    assert first.awaitTermination(120)
    assert len(_sink_rows(spark, out)) == 10

    produce(broker.bootstrap_servers, unique_topic, [{"value": b"%d" % i} for i in range(10, 20)])
    delete_records(broker.bootstrap_servers, unique_topic, 0, 15)
    failing = _to_files(_stream(spark, broker, unique_topic), out, checkpoint, **ONCE)
    with pytest.raises(Exception, match="failOnDataLoss"):
        failing.awaitTermination(120)

    skipping = _to_files(_stream(spark, broker, unique_topic, failOnDataLoss="false"), out, checkpoint, **ONCE)
    assert skipping.awaitTermination(120)
    assert sorted(r.offset for r in _sink_rows(spark, out)) == list(range(10)) + list(range(15, 20))


def test_stream_reports_a_recreated_topic_as_data_loss(spark, broker, unique_topic, tmp_path, stop_queries):
    from kafka import KafkaAdminClient

    create_topic(broker.bootstrap_servers, unique_topic)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    produce(broker.bootstrap_servers, unique_topic, [{"value": b"old"}] * 10)
    first = _to_files(_stream(spark, broker, unique_topic, startingOffsets="earliest"), out, checkpoint, **ONCE)
    assert first.awaitTermination(120)

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        admin.delete_topics([unique_topic])
        wait_until(lambda: unique_topic not in admin.list_topics(), 30, message="the topic to be deleted")
    finally:
        admin.close()
    create_topic(broker.bootstrap_servers, unique_topic)
    produce(broker.bootstrap_servers, unique_topic, [{"value": b"new"}] * 3)
    failing = _to_files(_stream(spark, broker, unique_topic), out, checkpoint, **ONCE)
    with pytest.raises(Exception, match="offset was changed from 10 to 3"):
        failing.awaitTermination(120)


def test_pattern_subscription_picks_up_new_topics_from_their_start(spark, broker, unique_topic, tmp_path, stop_queries):
    first_topic, second_topic = unique_topic + "-1", unique_topic + "-2"
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    create_topic(broker.bootstrap_servers, first_topic)
    produce(broker.bootstrap_servers, first_topic, [{"value": b"a%d" % i} for i in range(5)])

    def run():
        df = (
            spark.readStream.format("minikafka")
            .option("kafka.bootstrap.servers", broker.bootstrap_servers)
            .option("subscribePattern", unique_topic + "-[0-9]+")
            .option("startingOffsets", "earliest")
            .load()
            .selectExpr("partition", "offset", "CAST(value AS STRING) AS value")
        )
        assert _to_files(df, out, checkpoint, **ONCE).awaitTermination(120)
        return sorted(r.value for r in _sink_rows(spark, out))

    assert run() == [f"a{i}" for i in range(5)]
    create_topic(broker.bootstrap_servers, second_topic, partitions=2)
    produce(broker.bootstrap_servers, second_topic, [{"value": b"b%d" % i, "partition": i % 2} for i in range(6)])
    assert run() == [f"a{i}" for i in range(5)] + [f"b{i}" for i in range(6)]
