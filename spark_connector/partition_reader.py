"""Executor side: read one offset range of one partition into Arrow record batches.

With the connector's own Fetch client (fetch_reader.py: record batches decoded into Arrow in bulk) wherever the
kafka.* options allow it, which they do unless they ask for what only librdkafka implements (TLS, SASL, ...);
otherwise, or with the option `fetcher` set to "librdkafka", through librdkafka's consumer (consumer_reader.py).
Both give the same rows and the same data-loss behaviour.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from . import consumer_reader, fetch_reader
from .options import ReadConfig
from .ranges import OffsetRange


def read_range(config: ReadConfig, rng: OffsetRange) -> Iterator[pa.RecordBatch]:
    """Yield the records of `rng` in offset order."""
    reader = fetch_reader if config.direct_fetch else consumer_reader
    yield from reader.read_range(config, rng)
