"""Executor side: read one offset range of one partition into Arrow record batches.

With the connector's own Fetch client (fetch_reader.py: record batches decoded into Arrow in bulk) wherever the
kafka.* options allow it, which they do unless they ask for what only librdkafka implements (TLS, SASL, ...);
otherwise, or with the option `fetcher` set to "librdkafka", through librdkafka's consumer (consumer_reader.py).
Both give the same rows and the same data-loss behaviour.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from .options import ReadConfig
from .ranges import OffsetRange


def read_range(config: ReadConfig, rng: OffsetRange) -> Iterator[pa.RecordBatch]:
    """Yield the records of `rng` in offset order."""
    # Imported here, in the executors that read: the driver's planning processes (one per streaming query
    # start) never need the Fetch client, and its kafka-python schemas take a sixth of a second to import.
    if config.direct_fetch:
        from . import fetch_reader as reader
    else:
        from . import consumer_reader as reader
    yield from reader.read_range(config, rng)
