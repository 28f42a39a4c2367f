"""Where the controller's committed records live: the narrow interface the quorum controller writes through.

The controller's decisions (which records an operation writes) are the same whatever keeps them; only durability
differs. In KRaft mode the store is the metadata log, which brokers also fetch; in ZooKeeper mode it is the
ZooKeeper znodes Kafka kept (zk_controller.zk_metadata_store). Either way `append` returns once the batch
is durable, or raises and leaves the store as it was, and `load` gives back what a controller starting on this
store must replay before it decides anything.
"""
from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from typing import Protocol

import trio

from minikafka.protocol.metadata_records import MetadataRecord
from minikafka.storage.metadata_log import MetadataEntry, MetadataLog


class MetadataStore(Protocol):
    @property
    def controller_epoch(self) -> int:
        """The epoch this controller writes under."""
        ...

    @property
    def end_offset(self) -> int:
        """One past the offset of the last record committed (the next batch's first offset)."""
        ...

    @property
    def marked_for_deletion(self) -> Collection[str]:
        """Names of deleted topics whose deletion is not finished: they cannot be created again yet."""
        ...

    def load(self) -> Iterator[MetadataEntry]:
        """The records to replay, with their offsets and epochs, before the controller serves."""
        ...

    async def append(self, records: Sequence[MetadataRecord]) -> int:
        """Make `records` durable as one batch and return the offset of the last, or raise with nothing
        written."""
        ...

    def close(self) -> None:
        ...


class MetadataLogStore:
    """The KRaft store: `__cluster_metadata-0`, appended and fsynced on a worker thread; brokers fetch from it."""

    def __init__(self, metadata_log: MetadataLog) -> None:
        self.log = metadata_log
        self._lock = trio.Lock()  # read on the event loop, appended on a worker thread

    @property
    def controller_epoch(self) -> int:
        return self.log.controller_epoch

    @property
    def end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def marked_for_deletion(self) -> Collection[str]:
        return ()  # a KRaft deletion is finished once its record is committed

    def load(self) -> Iterator[MetadataEntry]:
        return self.log.entries()

    async def append(self, records: Sequence[MetadataRecord]) -> int:
        async with self._lock:
            return await trio.to_thread.run_sync(self.log.append, list(records))

    async def read(self, offset: int, max_bytes: int) -> bytes:
        """Committed batches from `offset`, for a broker's metadata fetch."""
        async with self._lock:
            return self.log.read(offset, max_bytes)

    def close(self) -> None:
        self.log.close()
