"""Windowed counts per key: records of one topic counted per key and event-time window into another.

Run it as a module (it builds its own SparkSession):

    python -m minikafka.spark_connector.examples.windowed_counts \
        --bootstrap-servers 127.0.0.1:9092 --input-topic clicks --output-topic click-counts \
        --checkpoint /tmp/click-counts-checkpoint --window "1 minute"

Event time is the Kafka record timestamp; the key is the record key as UTF-8. Each output record
has key "<key>@<window start>" and a JSON value {"key", "window_start", "window_end", "count"}
(window bounds in epoch seconds). The query runs in complete output mode, so every trigger
re-emits the counts of all windows and the last record for a key is its count (a compacted output
topic keeps just that). Python data source sinks cannot take update mode, which would need
Spark's SupportsStreamingUpdateAsAppend on the JVM side.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from minikafka.spark_connector import register


def windowed_counts(records: DataFrame, window: str) -> DataFrame:
    """Count records per key and event-time window, shaped as rows for the Kafka sink."""
    counts = (
        records.select(F.col("key").cast("string").alias("k"), F.col("timestamp"))
        .groupBy(F.window("timestamp", window).alias("w"), F.col("k"))
        .count()
    )
    start = F.col("w.start").cast("long")
    return counts.select(
        F.concat_ws("@", F.col("k"), start.cast("string")).alias("key"),
        F.to_json(
            F.struct(
                F.col("k").alias("key"),
                start.alias("window_start"),
                F.col("w.end").cast("long").alias("window_end"),
                F.col("count"),
            )
        ).alias("value"),
    )


def start_pipeline(
    spark: SparkSession,
    bootstrap_servers: str,
    input_topic: str,
    output_topic: str,
    checkpoint: str,
    window: str = "1 minute",
    starting_offsets: str = "earliest",
    processing_time: str | None = None,
) -> StreamingQuery:
    """Start the query; without `processing_time` it reads what the topic holds now and stops."""
    register(spark)
    records = (
        spark.readStream.format("minikafka")
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .option("subscribe", input_topic)
        .option("startingOffsets", starting_offsets)
        .load()
    )
    writer = (
        windowed_counts(records, window)
        .writeStream.format("minikafka")
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .option("topic", output_topic)
        .option("checkpointLocation", checkpoint)
        .outputMode("complete")
    )
    if processing_time:
        writer = writer.trigger(processingTime=processing_time)
    else:
        writer = writer.trigger(availableNow=True)
    return writer.start()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap-servers", required=True)
    parser.add_argument("--input-topic", required=True)
    parser.add_argument("--output-topic", required=True)
    parser.add_argument("--checkpoint", required=True, help="checkpoint directory of the streaming query")
    parser.add_argument("--master", default="local[2]", help="Spark master URL (default local[2])")
    parser.add_argument("--window", default="1 minute")
    parser.add_argument("--starting-offsets", default="earliest")
    parser.add_argument(
        "--processing-time", help="run until stopped with this trigger interval, e.g. '10 seconds' "
        "(default: process what is in the topic, then exit)"
    )
    args = parser.parse_args(argv)
    spark = (
        SparkSession.builder.master(args.master)
        .appName("minikafka-windowed-counts")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    try:
        query = start_pipeline(
            spark,
            args.bootstrap_servers,
            args.input_topic,
            args.output_topic,
            args.checkpoint,
            window=args.window,
            starting_offsets=args.starting_offsets,
            processing_time=args.processing_time,
        )
        query.awaitTermination()
        print(f"windowed counts done on {spark.sparkContext.master}", flush=True)
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
