"""The persister: how a share partition's leader keeps its state durable with the share coordinator (KIP-932).

A leader reads the state when it loads a share partition and writes it whenever the start offset moves or records
are acknowledged, released or archived; the share coordinator owns it, in `__share_group_state`, so it survives a
leader change. Kafka's requests batch many partitions; this interface is one share partition per call and the
implementation may batch underneath.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from minikafka.broker.coordinator.share.share_coordinator_shard import SharePartitionKey
from minikafka.protocol.errors import ErrorCode


@dataclass(frozen=True)
class PersisterStateBatch:
    """A range of in-flight offsets with one delivery state and count (Kafka's PersisterStateBatch).

    delivery_state is RecordState's id: 0 AVAILABLE, 2 ACKNOWLEDGED, 4 ARCHIVED (ACQUIRED is never persisted).
    """
    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


@dataclass(frozen=True)
class ReadStateResult:
    """ReadShareGroupState's answer for one partition."""
    error: ErrorCode
    error_message: str | None
    state_epoch: int
    start_offset: int
    state_batches: tuple[PersisterStateBatch, ...]


@dataclass(frozen=True)
class ReadSummaryResult:
    """ReadShareGroupStateSummary's answer for one partition: the start offset without the batches."""
    error: ErrorCode
    error_message: str | None
    state_epoch: int
    leader_epoch: int
    start_offset: int


@dataclass(frozen=True)
class PersisterResult:
    """Initialize, Write and Delete answer only an error per partition."""
    error: ErrorCode
    error_message: str | None = None


class Persister(Protocol):
    """The share coordinator as a share partition's leader sees it (Kafka's Persister)."""

    async def initialize_state(self, key: SharePartitionKey, state_epoch: int, start_offset: int) -> PersisterResult:
        """Start a share partition's state at start_offset (-1: from share.auto.offset.reset at first fetch)."""
        ...

    async def read_state(self, key: SharePartitionKey, leader_epoch: int) -> ReadStateResult:
        """The state a new leader loads; also fences older leader epochs."""
        ...

    async def write_state(self, key: SharePartitionKey, state_epoch: int, leader_epoch: int, start_offset: int,
                          state_batches: tuple[PersisterStateBatch, ...]) -> PersisterResult:
        """Record changed batches and the start offset; a leader epoch below the stored one is FENCED_LEADER_EPOCH."""
        ...

    async def delete_state(self, key: SharePartitionKey) -> PersisterResult:
        """Forget a share partition (its group's offsets deleted, or the group deleted)."""
        ...

    async def read_summary(self, key: SharePartitionKey, leader_epoch: int) -> ReadSummaryResult:
        """The start offset alone, for DescribeShareGroupOffsets and lag."""
        ...
