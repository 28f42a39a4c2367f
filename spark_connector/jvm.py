"""Settings for Spark's own JVM Kafka source (format "kafka") pointed at a minikafka broker.

Spark does not ship its Kafka connector; its jars (spark-sql-kafka-0-10, spark-token-provider-
kafka-0-10, kafka-clients, commons-pool2) must be given to the session as `spark.jars`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

JARS_ENV = "SPARK_KAFKA_JARS"
JARS_MISSING = "SPARK_KAFKA_JARS not set: Spark's JVM Kafka source jars are not available"


class JvmKafkaSettings(NamedTuple):
    """`options` go to .options(...) of format("kafka"); `spark_jars` is the spark.jars conf value."""

    options: dict[str, str]
    spark_jars: str


def jvm_kafka_options(
    bootstrap_servers: str, jars: str | Sequence[str] | None = None
) -> JvmKafkaSettings:
    """Options and spark.jars for format("kafka"); jars default to $SPARK_KAFKA_JARS (comma-separated).

    Raises LookupError when no jars are given anywhere and FileNotFoundError when one is missing,
    because the JVM would otherwise fail later with a less helpful "Failed to find data source".
    """
    if jars is None:
        jars = os.environ.get(JARS_ENV, "")
    paths = [j.strip() for j in (jars.split(",") if isinstance(jars, str) else jars) if j.strip()]
    if not paths:
        raise LookupError(
            f"{JARS_MISSING}. Download spark-sql-kafka-0-10_2.13, spark-token-provider-kafka-0-10_2.13 "
            "(both of your PySpark version), kafka-clients and commons-pool2 from Maven Central and "
            f"pass them as the jars argument or in ${JARS_ENV}, comma-separated."
        )
    missing = [p for p in paths if "://" not in p and not Path(p).is_file()]
    if missing:
        raise FileNotFoundError(f"Spark Kafka jars not found: {', '.join(missing)}")
    return JvmKafkaSettings({"kafka.bootstrap.servers": bootstrap_servers}, ",".join(paths))
