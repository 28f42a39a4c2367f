"""PySpark data source for minikafka (and any Kafka) topics: batch and streaming, read and write.

    from minikafka.spark_connector import register
    register(spark)
    df = spark.read.format("minikafka").option("kafka.bootstrap.servers", servers) \
        .option("subscribe", "events").load()

Options and the row layout are those of Spark's own Kafka source and sink.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .data_loss import DataLossError
from .jvm import JvmKafkaSettings, jvm_kafka_options

# What the data source needs beyond minikafka itself; the `spark` extra installs them.
SPARK_EXTRA_MODULES = ("pyspark", "pyarrow", "pandas", "confluent_kafka")
SPARK_EXTRA_MISSING = ('the minikafka Spark connector needs {module}, which is not installed: pip install '
                       '"minikafka[spark]", or from a clone of minikafka pip install ".[spark]" (PySpark 4.2+, '
                       "pyarrow, pandas, confluent-kafka; Spark also needs Java 17)")

try:
    from .source import MinikafkaDataSource
except ModuleNotFoundError as exc:
    if (exc.name or "").partition(".")[0] not in SPARK_EXTRA_MODULES:
        raise
    raise ImportError(SPARK_EXTRA_MISSING.format(module=exc.name), name=exc.name) from exc

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["DataLossError", "JvmKafkaSettings", "MinikafkaDataSource", "jvm_kafka_options", "register"]


def register(spark: SparkSession) -> None:
    """Make format("minikafka") available in `spark` (registration is per session)."""
    spark.dataSource.register(MinikafkaDataSource)
