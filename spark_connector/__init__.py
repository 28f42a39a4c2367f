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
from .source import MinikafkaDataSource

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["DataLossError", "JvmKafkaSettings", "MinikafkaDataSource", "jvm_kafka_options", "register"]


def register(spark: SparkSession) -> None:
    """Make format("minikafka") available in `spark` (registration is per session)."""
    spark.dataSource.register(MinikafkaDataSource)
