"""ISR changes on their way to the controller (AlterPartitionManager), and how partitions map to fetchers."""
from __future__ import annotations

import uuid
from typing import Any

import trio
from kafka.protocol.api_message import ApiMessage

from minikafka.broker.network.network_client import DisconnectedError
from minikafka.broker.replication.alter_partition_manager import AlterPartitionManager
from minikafka.broker.replication.partition import LeaderAndIsr, PendingIsrChange
from minikafka.broker.replication.replica_fetcher_manager import fetcher_id, java_string_hash
from minikafka.protocol.control_plane import AlterPartitionResponse
from minikafka.protocol.errors import ErrorCode

TOPIC_ID = uuid.uuid4()


def change(index: int, isr: list[int]) -> PendingIsrChange:
    return PendingIsrChange(TOPIC_ID, index, 3, 7, [(b, -1) for b in isr], isr)


class Controller:
    """Answers each AlterPartition with the proposed ISR at the next partition epoch, after the failures queued."""

    def __init__(self, failures: list[Exception | ErrorCode], leave_out: set[int] | None = None) -> None:
        self.failures = failures
        self.leave_out = leave_out or set()
        self.requests: list[Any] = []

    async def send(self, request: ApiMessage, version: int | None = None) -> ApiMessage:
        await trio.lowlevel.checkpoint()
        assert version == 3
        self.requests.append(request)
        R = AlterPartitionResponse
        if self.failures:
            failure = self.failures.pop(0)
            if isinstance(failure, Exception):
                raise failure
            return R(throttle_time_ms=0, error_code=failure, topics=[])
        parts = [R.TopicData.PartitionData(partition_index=p.partition_index, error_code=0, leader_id=1,
                                           leader_epoch=p.leader_epoch,
                                           isr=[b.broker_id for b in p.new_isr_with_epochs],
                                           leader_recovery_state=0, partition_epoch=p.partition_epoch + 1)
                 for t in request.topics for p in t.partitions if p.partition_index not in self.leave_out]
        self.leave_out = set()
        return R(throttle_time_ms=0, error_code=0, topics=[R.TopicData(topic_id=TOPIC_ID, partitions=parts)])


async def test_changes_go_out_together_and_are_retried_until_answered() -> None:
    controller = Controller([DisconnectedError("controller away"), ErrorCode.STALE_BROKER_EPOCH], leave_out={1})
    manager = AlterPartitionManager(1, lambda: 42, controller, retry_backoff_ms=1)
    answers: dict[int, LeaderAndIsr | ErrorCode] = {}
    done = trio.Event()

    def on_answer(index: int):
        def record(answer: LeaderAndIsr | ErrorCode) -> None:
            answers[index] = answer
            if len(answers) == 2:
                done.set()
        return record

    async with trio.open_nursery() as nursery:
        await nursery.start(manager.run)
        assert manager.submit(change(0, [1, 2]), on_answer(0))
        assert manager.submit(change(1, [1, 3]), on_answer(1))
        assert not manager.submit(change(1, [1]), on_answer(1))  # one change per partition at a time
        with trio.fail_after(10):
            await done.wait()
        nursery.cancel_scope.cancel()
    assert answers == {0: LeaderAndIsr(1, 3, [1, 2], 8), 1: LeaderAndIsr(1, 3, [1, 3], 8)}
    # Failed twice as a whole, then partition 1 was left out of the answer and sent again on its own.
    assert [sorted(p.partition_index for t in r.topics for p in t.partitions) for r in controller.requests] == [
        [0, 1], [0, 1], [0, 1], [1]]
    sent = controller.requests[0].topics[0].partitions[0]
    assert controller.requests[0].broker_epoch == 42
    assert [(b.broker_id, b.broker_epoch) for b in sent.new_isr_with_epochs] == [(1, 42), (2, -1)]
    assert (sent.leader_epoch, sent.partition_epoch) == (3, 7)


def test_fetcher_ids_follow_kafkas_hash() -> None:
    assert java_string_hash("hello") == 99162322  # Java's "hello".hashCode()
    assert java_string_hash("__consumer_offsets") == -970371369
    assert fetcher_id(("__consumer_offsets", 7), 1) == 0
    assert fetcher_id(("hello", 3), 4) == (31 * 99162322 + 3) % 4
    assert len({fetcher_id(("t", p), 3) for p in range(10)}) == 3
