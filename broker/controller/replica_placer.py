"""Replica placement for new partitions: Kafka's StripedReplicaPlacer, for brokers without racks.

Partitions are striped over the brokers round-robin from a random start, each partition's replicas being the next
brokers after its leader, so leaders and replicas spread evenly; after every full round the broker order is
shuffled, so the same brokers do not always follow each other.
"""
from __future__ import annotations

import random

from minikafka.protocol.errors import ErrorCode, KafkaError


class StripedReplicaPlacer:
    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng or random.Random()

    def place(self, brokers: list[int], partitions: int, replication_factor: int) -> list[list[int]]:
        """Replica lists for `partitions` new partitions over `brokers` (the live ones).

        Raises INVALID_REPLICATION_FACTOR when the factor is not positive or exceeds the brokers there are.
        """
        self.check(brokers, replication_factor)
        order = sorted(brokers)
        start = self._rng.randrange(len(order))
        placements = []
        for partition in range(partitions):
            stripe = partition % len(order)
            if stripe == 0 and partition > 0 and len(order) > 1:
                self._rng.shuffle(order)
            first = start + stripe
            placements.append([order[(first + r) % len(order)] for r in range(replication_factor)])
        return placements

    @staticmethod
    def check(brokers: list[int], replication_factor: int) -> None:
        """What `place` refuses, asked without placing anything: a caller checks a request before it knows
        whether the placement is small enough to build."""
        if replication_factor <= 0:
            raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                             f"Invalid replication factor {replication_factor}: the replication factor must be "
                             f"positive.")
        if not brokers:
            raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                             f"Unable to replicate the partition {replication_factor} time(s): All brokers are "
                             f"currently fenced.")
        if replication_factor > len(brokers):
            raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                             f"Unable to replicate the partition {replication_factor} time(s): The target "
                             f"replication factor of {replication_factor} cannot be reached because only "
                             f"{len(brokers)} broker(s) are registered and unfenced.")
