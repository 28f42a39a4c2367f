"""Transactional topics: kafka.isolation.level, the last stable offset, and offset ranges with gaps.

Transaction markers take an offset each and are never read as records; under read_committed the
records of aborted transactions are skipped too, and "latest" is the last stable offset.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest

pytest.importorskip("pyspark")

from confluent_kafka import OFFSET_INVALID
from spark_helpers import Row, produce_transactions

from minikafka.spark_connector import consumer_reader, partition_reader
from minikafka.spark_connector.options import parse_source_options
from minikafka.spark_connector.ranges import OffsetRange
from minikafka.spark_connector.schema import source_schema

pytestmark = pytest.mark.spark

COMMITTED, UNCOMMITTED = "read_committed", "read_uncommitted"
# A range that waits for a record that never comes fails within this, not Spark's default 2 minutes.
POLL_TIMEOUT_MS = "20000"

# Partition 1 as produce_transactions writes it, offset by offset (c committed, a aborted, o open,
# l late: committed after the open transaction began; C, A markers):
#   c c c c C a a A c c  C  a  a  a  a  A  o  o  l  l  C
#   0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20   last stable offset 16, high watermark 21
RANGES = {
    COMMITTED: [(0, 16), (0, 5), (4, 5), (5, 8), (9, 16), (11, 15), (15, 16)],
    UNCOMMITTED: [(0, 21), (0, 5), (4, 5), (11, 16), (15, 16), (19, 21), (20, 21)],
}


def _source_options(bootstrap: str, topic: str, **options: str) -> dict[str, str]:
    return {"kafka.bootstrap.servers": bootstrap, "subscribe": topic, "failOnDataLoss": "true",
            "kafkaConsumer.pollTimeoutMs": POLL_TIMEOUT_MS, **options}


@pytest.mark.parametrize("fetcher", ["auto", "librdkafka"])
def test_ranges_ending_in_markers_or_aborted_records_finish(broker, unique_topic, monkeypatch, fetcher):
    """Each range gives its records and ends, with the connector's Fetch client and with librdkafka, also when
    librdkafka's position stays behind the markers."""
    topic = produce_transactions(broker.bootstrap_servers, unique_topic)
    assert topic.ends[1] == (16, 21)
    expected = {COMMITTED: topic.committed, UNCOMMITTED: topic.uncommitted}

    def read(level: str, bounds: tuple[int, int]) -> list[Row]:
        options = _source_options(broker.bootstrap_servers, unique_topic, fetcher=fetcher,
                                  **{"kafka.isolation.level": level})
        config = parse_source_options(options, streaming=False).read
        assert config.direct_fetch == (fetcher == "auto")
        rng = OffsetRange(unique_topic, 1, *bounds)
        return [
            (1, offset, value.decode())
            for batch in partition_reader.read_range(config, rng)
            for offset, value in zip(batch.column("offset").to_pylist(), batch.column("value").to_pylist(), strict=True)
        ]

    for position in ("moves", "stays") if fetcher == "librdkafka" else ("moves",):
        with monkeypatch.context() as patch:
            if position == "stays":  # only the end-of-partition event tells the reader where the records end
                patch.setattr(consumer_reader, "_consumer_position", lambda consumer, rng: OFFSET_INVALID)
            for level, ranges in RANGES.items():
                with ThreadPoolExecutor(len(ranges)) as pool:  # each read takes a poll interval: read them together
                    results = list(pool.map(lambda bounds, level=level: read(level, bounds), ranges))
                for (start, end), rows in zip(ranges, results, strict=True):
                    wanted = [r for r in expected[level] if r[0] == 1 and start <= r[1] < end]
                    assert rows == wanted, (position, level, start, end)


def _read(spark, options: dict[str, str]):
    return spark.read.format("minikafka").options(**options).load()


def _rows(df) -> list[Row]:
    return sorted((r.partition, r.offset, r.value.decode()) for r in df.collect())


@pytest.mark.parametrize("fetcher", ["auto", "librdkafka"])
def test_batch_read_committed_stops_at_the_last_stable_offset(spark, broker, unique_topic, fetcher):
    topic = produce_transactions(broker.bootstrap_servers, unique_topic)
    options = _source_options(broker.bootstrap_servers, unique_topic, fetcher=fetcher)
    committed = _read(spark, {**options, "kafka.isolation.level": COMMITTED})
    assert committed.schema == source_schema(include_headers=False)
    assert _rows(committed) == topic.committed

    # Ranges split into pieces that start, end or consist of markers and aborted records; -1 is latest.
    latest = json.dumps({unique_topic: {str(p): -1 for p in topic.ends}})
    split_options = {"kafka.isolation.level": COMMITTED, "minPartitions": "12", "endingOffsets": latest}
    split = _read(spark, {**options, **split_options})
    assert split.rdd.getNumPartitions() == 12
    assert _rows(split) == topic.committed

    # read_uncommitted, the default as in Spark: aborted and open transactions' records too, never a marker.
    assert _rows(_read(spark, options)) == topic.uncommitted


def test_stream_read_committed_moves_with_the_last_stable_offset(spark, broker, unique_topic, tmp_path, stop_queries):
    topic = produce_transactions(broker.bootstrap_servers, unique_topic)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    options = _source_options(broker.bootstrap_servers, unique_topic, startingOffsets="earliest",
                              maxOffsetsPerTrigger="8", **{"kafka.isolation.level": COMMITTED})

    def run_available_now():
        query = (
            spark.readStream.format("minikafka").options(**options).load()
            .selectExpr("partition", "offset", "CAST(value AS STRING) AS value")
            .writeStream.format("parquet")
            .option("path", str(out))
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )  # fmt: skip
        assert query.awaitTermination(120)
        rows = spark.read.schema("partition int, offset long, value string").parquet(str(out)).collect()
        return query, sorted((r.partition, r.offset, r.value) for r in rows)

    query, rows = run_available_now()
    assert rows == topic.committed
    progress = query.recentProgress
    assert len(progress) > 1  # maxOffsetsPerTrigger spread the read over micro-batches
    assert json.loads(progress[-1]["sources"][0]["endOffset"]) == {
        unique_topic: {str(p): stable for p, (stable, _high) in topic.ends.items()}
    }

    topic.open_producer.commit_transaction(30)  # the last stable offset moves on to the end
    _, rows = run_available_now()
    assert rows == sorted(set(topic.uncommitted) - set(topic.aborted))
