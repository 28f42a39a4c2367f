"""Kafka's DelayedProduce: an acks=all append, done locally, waits until the ISR has it.

Each partition appended to is satisfied once its high watermark passes the append's last offset (then NONE, or
NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR has meanwhile shrunk below min.insync.replicas), or once this broker
no longer leads it (NOT_LEADER_OR_FOLLOWER). What is not satisfied by the request's timeout is REQUEST_TIMED_OUT.
High watermark moves, ISR changes and leadership changes wake it; nothing polls.
"""
from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, NamedTuple

import trio

from minikafka.broker.replication.purgatory import Purgatory
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.storage.log import AppendInfo

if TYPE_CHECKING:
    from minikafka.broker.replication.partition import PartitionLookup

TopicPartition = tuple[str, int]


def produce_key(tp: TopicPartition) -> Hashable:
    """The purgatory key acks=all appends to `tp` wait on."""
    return ("produce", *tp)


class AppendResult(NamedTuple):
    error: KafkaError | None
    info: AppendInfo | None


class DelayedProduce:
    def __init__(self, partitions: PartitionLookup, results: dict[TopicPartition, AppendResult]) -> None:
        self._partitions = partitions
        self.results = dict(results)
        # The offset each partition's high watermark must reach: one past the append's last offset.
        self._required = {tp: r.info.last_offset + 1 for tp, r in results.items()
                          if r.error is None and r.info is not None}

    def try_complete(self) -> bool:
        for tp, required in list(self._required.items()):
            partition = self._partitions.get_partition(*tp)
            if partition is None:
                done, code = True, self._partitions.unhosted_error(tp)
            else:
                done, code = partition.check_enough_replicas_reach_offset(required)
            if done:
                del self._required[tp]
                if code != ErrorCode.NONE:
                    self._fail(tp, code, f"acks=all append to {tp[0]}-{tp[1]} ending before offset {required}")
        return not self._required

    def _fail(self, tp: TopicPartition, code: ErrorCode, message: str) -> None:
        """The error, keeping the append's outcome: as Kafka's, the response still names the offsets the batch got."""
        self.results[tp] = AppendResult(KafkaError(code, message), self.results[tp].info)

    async def wait(self, purgatory: Purgatory, deadline: float, client: trio.SocketStream | None = None,
                   stop_early: Callable[[], bool] | None = None) -> dict[TopicPartition, AppendResult]:
        """The results once every partition is satisfied, the deadline passes (REQUEST_TIMED_OUT) or
        `stop_early()` says the broker is shutting down (NOT_LEADER_OR_FOLLOWER: the client looks elsewhere)."""
        keys = [produce_key(tp) for tp in self._required]
        while not self.try_complete():
            if stop_early is not None and stop_early():
                self._expire(ErrorCode.NOT_LEADER_OR_FOLLOWER, "the broker is shutting down")
                break
            remaining = deadline - trio.current_time()
            if remaining <= 0:
                self._expire(ErrorCode.REQUEST_TIMED_OUT, "the ISR did not replicate it within the request timeout")
                break
            await purgatory.wait_any(keys, remaining, client)
        return self.results

    def _expire(self, code: ErrorCode, reason: str) -> None:
        for tp in self._required:
            self._fail(tp, code, f"acks=all append to {tp[0]}-{tp[1]}: {reason}")
        self._required.clear()
