"""Spark's own JVM Kafka source and sink against minikafka, when its jars are available."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("pyspark")

from spark_helpers import consume_all, create_topic, produce, produce_transactions

from minikafka.spark_connector.jvm import JARS_ENV, JARS_MISSING

pytestmark = pytest.mark.spark

SCRIPT = """
import json, sys
from pyspark.sql import SparkSession
from minikafka.spark_connector import jvm_kafka_options

bootstrap, topic, out_topic = sys.argv[1:4]
settings = jvm_kafka_options(bootstrap)
spark = (SparkSession.builder.master("local[2]").config("spark.jars", settings.spark_jars)
         .config("spark.ui.enabled", "false").getOrCreate())
try:
    rows = (spark.read.format("kafka").options(**settings.options).option("subscribe", topic)
            .option("includeHeaders", "true").load().collect())
    print(json.dumps(sorted([r.partition, r.offset, r.value.decode(), [h.key for h in r.headers]] for r in rows)))
    (spark.createDataFrame([(f"jvm-{i}",) for i in range(5)], "value string").write.format("kafka")
     .options(**settings.options).option("topic", out_topic).save())
finally:
    spark.stop()
"""

TRANSACTIONS_SCRIPT = """
import json, sys
from pyspark.sql import SparkSession
from minikafka.spark_connector import jvm_kafka_options

bootstrap, topic = sys.argv[1:3]
settings = jvm_kafka_options(bootstrap)
spark = (SparkSession.builder.master("local[2]").config("spark.jars", settings.spark_jars)
         .config("spark.ui.enabled", "false").getOrCreate())
try:
    for level in ("read_committed", "read_uncommitted"):
        rows = (spark.read.format("kafka").options(**settings.options).option("subscribe", topic)
                .option("kafka.isolation.level", level).option("failOnDataLoss", "true").load().collect())
        print(json.dumps(sorted([r.partition, r.offset, r.value.decode()] for r in rows)))
finally:
    spark.stop()
"""


@pytest.fixture
def kafka_jars() -> str:
    jars = os.environ.get(JARS_ENV, "").strip()
    if not jars:
        pytest.skip(JARS_MISSING)
    return jars


def _run_script(text: str, tmp_path, *args: str) -> list[str]:
    """Run a PySpark script in its own process (its session has the Kafka jars); returns its output lines."""
    script = tmp_path / "jvm_kafka.py"
    script.write_text(text)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    done = subprocess.run(
        [sys.executable, str(script), *args], env=env, capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, done.stderr[-5000:]
    return done.stdout.strip().splitlines()


def test_jvm_kafka_source_and_sink(broker, unique_topic, tmp_path, kafka_jars):
    create_topic(broker.bootstrap_servers, unique_topic, partitions=2)
    create_topic(broker.bootstrap_servers, unique_topic + "-out")
    records = [{"value": b"v%d" % i, "partition": i % 2, "headers": [("h", b"x")]} for i in range(20)]
    acks = produce(broker.bootstrap_servers, unique_topic, records)
    lines = _run_script(SCRIPT, tmp_path, broker.bootstrap_servers, unique_topic, unique_topic + "-out")
    rows = json.loads(lines[-1])
    expected = [[a.partition, a.offset, r["value"].decode(), ["h"]] for a, r in zip(acks, records, strict=True)]
    assert rows == sorted(expected)
    written = consume_all(broker.bootstrap_servers, unique_topic + "-out", expected=5)
    assert sorted(r.value for r in written) == [b"jvm-%d" % i for i in range(5)]


def test_jvm_kafka_source_reads_committed_records_with_read_committed(broker, unique_topic, tmp_path, kafka_jars):
    """The rows the minikafka source gives (tests/spark/test_spark_transactions.py) are Spark's own source's."""
    topic = produce_transactions(broker.bootstrap_servers, unique_topic)
    lines = _run_script(TRANSACTIONS_SCRIPT, tmp_path, broker.bootstrap_servers, unique_topic)
    committed, uncommitted = ([tuple(row) for row in json.loads(line)] for line in lines[-2:])
    assert committed == topic.committed
    assert uncommitted == topic.uncommitted
