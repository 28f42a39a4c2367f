"""The "minikafka" data source: Spark's Kafka source and sink options, on the Python Data Source API."""

from __future__ import annotations

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader
from pyspark.sql.types import StructType

from .batch_reader import KafkaBatchReader
from .options import lower_keys, parse_sink_options, parse_source_options
from .schema import source_schema
from .stream_reader import KafkaStreamReader
from .writer import KafkaBatchWriter, KafkaStreamWriter, validate_sink_schema


class MinikafkaDataSource(DataSource):
    """spark.read / readStream / write / writeStream .format("minikafka")."""

    @classmethod
    def name(cls) -> str:
        return "minikafka"

    def _include_headers(self) -> bool:
        return lower_keys(self.options).get("includeheaders", "false").strip().lower() == "true"

    def schema(self) -> StructType:
        return source_schema(self._include_headers())

    def _check_schema(self, schema: StructType) -> None:
        if schema != self.schema():
            raise ValueError("Kafka source has a fixed schema and cannot be set with a custom one")

    def reader(self, schema: StructType) -> DataSourceReader:
        self._check_schema(schema)
        return KafkaBatchReader(parse_source_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        self._check_schema(schema)
        return KafkaStreamReader(parse_source_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> KafkaBatchWriter:
        options = parse_sink_options(self.options)
        validate_sink_schema(schema, options)
        return KafkaBatchWriter(options)

    def streamWriter(self, schema: StructType, overwrite: bool) -> KafkaStreamWriter:
        options = parse_sink_options(self.options)
        validate_sink_schema(schema, options)
        return KafkaStreamWriter(options)
