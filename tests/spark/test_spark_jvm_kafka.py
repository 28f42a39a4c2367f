"""Spark's own JVM Kafka source and sink against minikafka, when its jars are available."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("pyspark")

from spark_helpers import consume_all, create_topic, produce

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


@pytest.fixture
def kafka_jars() -> str:
    jars = os.environ.get(JARS_ENV, "").strip()
    if not jars:
        pytest.skip(JARS_MISSING)
    return jars


def test_jvm_kafka_source_and_sink(broker, unique_topic, tmp_path, kafka_jars):
    create_topic(broker.bootstrap_servers, unique_topic, partitions=2)
    create_topic(broker.bootstrap_servers, unique_topic + "-out")
    records = [{"value": b"v%d" % i, "partition": i % 2, "headers": [("h", b"x")]} for i in range(20)]
    acks = produce(broker.bootstrap_servers, unique_topic, records)
    script = tmp_path / "jvm_kafka.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    done = subprocess.run(
        [sys.executable, str(script), broker.bootstrap_servers, unique_topic, unique_topic + "-out"],
        env=env, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-5000:]
    rows = json.loads(done.stdout.strip().splitlines()[-1])
    expected = [[a.partition, a.offset, r["value"].decode(), ["h"]] for a, r in zip(acks, records, strict=True)]
    assert rows == sorted(expected)
    written = consume_all(broker.bootstrap_servers, unique_topic + "-out", expected=5)
    assert sorted(r.value for r in written) == [b"jvm-%d" % i for i in range(5)]
