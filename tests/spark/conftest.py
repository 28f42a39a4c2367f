"""Spark fixtures: one local[2] session shared by the in-process tests."""

from __future__ import annotations

import os
import shutil
import sys

import pytest

os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"


@pytest.fixture(scope="session")
def spark():
    pytest.importorskip("pyspark", reason="PySpark is not installed (pip install minikafka[spark])")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Java is not installed")
    from pyspark.sql import SparkSession

    from minikafka.spark_connector import register

    session = (
        SparkSession.builder.master("local[2]")
        .appName("minikafka-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.streaming.stopTimeout", "30s")
        .getOrCreate()
    )
    register(session)
    yield session
    for query in session.streams.active:
        query.stop()
    session.stop()


@pytest.fixture
def stop_queries(spark):
    """Stop whatever streaming query a test leaves running, even when it fails."""
    yield
    for query in spark.streams.active:
        query.stop()
