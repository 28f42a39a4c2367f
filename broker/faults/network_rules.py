"""Fault rules on how responses travel rather than what they say: held back on one connection, written after the
next pipelined response, written at a bandwidth, cut off with the connection after N response bytes, or a Fetch
answered with its last record batch cut short.

A rule selects requests as the error and latency rules do (api, source, `when`, `skip`); "connection-delay" and
"reorder" take one connection: the first whose request matches, and only it, others from the same client id
included, are left alone. What each rule counts as a hit: a response held back, a pair of responses swapped, a
response paced, a connection closed, a Fetch response whose records were cut.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

from minikafka.broker.faults.rules import Skipping, selects
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.codec import Records
from minikafka.protocol.file_records import FileRecords
from minikafka.protocol.record_batch import LOG_OVERHEAD

CONNECTION_DELAY = "connection-delay"
REORDER = "reorder"
BANDWIDTH = "bandwidth"
CLOSE_AFTER_BYTES = "close-after-bytes"
PARTIAL_FETCH = "partial-fetch"
KINDS = (CONNECTION_DELAY, REORDER, BANDWIDTH, CLOSE_AFTER_BYTES, PARTIAL_FETCH)
# The kinds that keep to the first connection they match.
ONE_CONNECTION_KINDS = (CONNECTION_DELAY, REORDER)

_BATCH_LENGTH = struct.Struct(">qi")


@dataclass
class NetworkRule(Skipping):
    """One rule of a network kind; the parameter of its kind is set (delay_ms, bytes_per_s or close_after_bytes)."""

    id: int
    kind: str
    remaining: int | None  # None: until cleared
    api_key: ApiKey | None = None  # None: every API
    source: str | None = None
    when: dict[str, Any] = field(default_factory=dict)
    delay_ms: int | None = None
    bytes_per_s: int | None = None
    close_after_bytes: int | None = None
    connection_id: int | None = None  # a one-connection kind's connection, once it has matched one
    peer: str | None = None
    hits: int = 0
    skip: int = 0
    skipped: int = 0

    def matches(self, api_key: int, facts: dict[str, Any], connection_id: int) -> bool:
        if self.api_key not in (None, api_key) or not selects(self.source, self.when, facts):
            return False
        return self.connection_id in (None, connection_id)

    def take_connection(self, connection_id: int, peer: str) -> None:
        """A one-connection kind keeps to the first connection it applies to."""
        if self.kind in ONE_CONNECTION_KINDS and self.connection_id is None:
            self.connection_id, self.peer = connection_id, peer

    def describe(self) -> dict[str, Any]:
        described = dict(vars(self))
        described["api_key"] = None if self.api_key is None else int(self.api_key)
        described["api"] = None if self.api_key is None else self.api_key.api_name
        return described


def cut_last_batch(records: Records) -> Records | None:
    """The records with their last batch cut to half its bytes (at least one byte short), as a fetch response cut
    at its size limit ends; None unless there are two whole batches or more. A broker always sends the first batch
    whole (KIP-74): a response of a partial batch alone would leave a client unable to make progress (kafka-python
    and the Java client raise "no complete records were found")."""
    size = len(records)
    position, last = 0, None
    while position + LOG_OVERHEAD <= size:
        head = records.read(position, LOG_OVERHEAD) if isinstance(records, FileRecords) \
            else records[position:position + LOG_OVERHEAD]
        _, batch_length = _BATCH_LENGTH.unpack(head)
        if position + LOG_OVERHEAD + batch_length > size:
            break
        last = (position, LOG_OVERHEAD + batch_length)
        position += LOG_OVERHEAD + batch_length
    if last is None or last[0] == 0:
        return None
    start, batch_size = last
    kept = start + batch_size // 2
    if isinstance(records, FileRecords):
        return FileRecords(records.fd, records.position, kept)
    return records[:kept]
