"""The replica lists of a partition reassignment (KIP-455; Kafka's PartitionReassignmentReplicas and
PartitionReassignmentRevert).

While a partition moves, its replica list is the target followed by the current replicas the target drops, so
the old replicas keep serving until the new ones have caught up; `adding` and `removing` say which is which. The
move completes once every target replica is in the ISR, and a cancel goes back to the replicas it started from.
Sans-IO: lists in, lists out.
"""
from __future__ import annotations

from dataclasses import dataclass

from minikafka.protocol.errors import ErrorCode, KafkaError


@dataclass(frozen=True)
class PartitionReassignmentReplicas:
    removing: list[int]
    adding: list[int]
    replicas: list[int]

    @classmethod
    def of(cls, current: list[int], target: list[int]) -> PartitionReassignmentReplicas:
        """The state that starts moving a partition from `current` to `target` (both sets sorted, as Kafka)."""
        removing = sorted(set(current) - set(target))
        adding = sorted(set(target) - set(current))
        return cls(removing, adding, list(target) + removing)

    @property
    def in_progress(self) -> bool:
        return bool(self.removing or self.adding)

    def completed(self, target_isr: list[int]) -> tuple[list[int], list[int]] | None:
        """(replicas, ISR) once the move is over, when `target_isr` lets it be: every remaining replica in the
        ISR, with at least one replica not being removed in it; None while it must go on."""
        if not self.in_progress:
            return None
        isr = [r for r in target_isr if r not in self.removing]
        replicas = [r for r in self.replicas if r not in self.removing]
        if not isr or not replicas or not set(replicas) <= set(isr):
            return None
        return replicas, isr

    def original_replicas(self) -> list[int]:
        return [r for r in self.replicas if r not in self.adding]


@dataclass(frozen=True)
class PartitionReassignmentRevert:
    """The replicas and ISR a cancelled reassignment goes back to. `unclean` when every ISR member was one being
    added: the first original replica then takes the ISR alone, which only unclean leader election allows."""

    replicas: list[int]
    isr: list[int]
    unclean: bool

    @classmethod
    def of(cls, ongoing: PartitionReassignmentReplicas, isr: list[int]) -> PartitionReassignmentRevert:
        replicas = ongoing.original_replicas()
        kept = [r for r in isr if r not in ongoing.adding]
        if kept:
            return cls(replicas, kept, False)
        if not replicas:
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             "Invalid replica assignment: addingReplicas contains all replicas.")
        return cls(replicas, [replicas[0]], True)
