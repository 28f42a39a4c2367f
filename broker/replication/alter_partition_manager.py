"""Sends a leader's ISR changes to the controller (Kafka's AlterPartitionManager).

Changes queue up per partition and go out together in one AlterPartition v3 (topics by id, each proposed ISR
member with its broker epoch), one request in flight at a time. Each partition's answer — its new leader, ISR and
partition epoch, or an error — goes back to the callback its change came with; a change the controller could not
be asked about (no connection, a controller that is not the active one, a stale broker epoch) stays queued and is
sent again after a short backoff.
"""
from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable
from typing import Any

import trio
from kafka.protocol.api_message import ApiMessage

from minikafka.broker.network.controller_channel import ControllerChannel
from minikafka.broker.network.failure_log import FailureLog
from minikafka.broker.replication.partition import LeaderAndIsr, PendingIsrChange
from minikafka.protocol.control_plane import AlterPartitionRequest
from minikafka.protocol.errors import ErrorCode

log = logging.getLogger("minikafka.alter_partition")

ALTER_PARTITION_VERSION = 3
AnswerCallback = Callable[[LeaderAndIsr | ErrorCode], None]


class AlterPartitionManager:
    def __init__(self, broker_id: int, broker_epoch: Callable[[], int], channel: ControllerChannel | None = None,
                 retry_backoff_ms: int = 100) -> None:
        self.broker_id = broker_id
        self._broker_epoch = broker_epoch
        self._channel = channel
        self._retry_backoff_s = retry_backoff_ms / 1000
        self._unsent: dict[tuple[uuid.UUID, int], tuple[PendingIsrChange, AnswerCallback]] = {}
        self._wakeup = trio.Event()
        self._failures = FailureLog(log, "AlterPartition", level=logging.INFO)

    @property
    def channel(self) -> ControllerChannel | None:
        return self._channel

    @channel.setter
    def channel(self, channel: ControllerChannel | None) -> None:
        self._channel = channel
        self._wakeup.set()

    def submit(self, change: PendingIsrChange, on_answer: AnswerCallback) -> bool:
        """Queue `change`; False if a change for the same partition is still unanswered (Kafka answers that with
        OPERATION_NOT_ATTEMPTED: one change per partition at a time)."""
        key = (change.topic_id, change.index)
        if key in self._unsent:
            return False
        self._unsent[key] = (change, on_answer)
        self._wakeup.set()
        return True

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            if not self._unsent or self._channel is None:
                self._wakeup = trio.Event()
                await self._wakeup.wait()
                continue
            if not await self._send(self._channel):
                await trio.sleep(self._retry_backoff_s)

    async def _send(self, channel: ControllerChannel) -> bool:
        """One AlterPartition for every queued change; False when it should be tried again later."""
        in_flight = dict(self._unsent)
        request = self._request(in_flight.values())
        try:
            response = await channel.send(request, ALTER_PARTITION_VERSION)
        except Exception as exc:  # noqa: BLE001 - any failure to reach the controller is retried
            self._failures.failed(f"{len(in_flight)} partition(s) not sent: {exc!r}; retrying")
            return False
        self._failures.succeeded()
        if response.error_code != ErrorCode.NONE:
            log.info("AlterPartition for %d partitions refused: %s; retrying", len(in_flight),
                     ErrorCode(response.error_code).name)
            return False
        answers: dict[tuple[uuid.UUID, int], LeaderAndIsr | ErrorCode] = {}
        for topic in response.topics:
            for p in topic.partitions:
                answers[(topic.topic_id, p.partition_index)] = (
                    ErrorCode(p.error_code) if p.error_code != ErrorCode.NONE
                    else LeaderAndIsr(p.leader_id, p.leader_epoch, list(p.isr), p.partition_epoch))
        for key, (change, on_answer) in in_flight.items():
            answer = answers.get(key)
            if answer is None:  # left out of the answer: sent again with the next request
                log.warning("AlterPartition answer has no result for %s-%d; sending it again", *key)
                continue
            if self._unsent.get(key, (None,))[0] is change:
                del self._unsent[key]  # before the callback, which may queue a new change for the partition
            on_answer(answer)
        return True

    def _request(self, items: Iterable[tuple[PendingIsrChange, AnswerCallback]]) -> ApiMessage:
        R: Any = AlterPartitionRequest
        T = R.TopicData
        P = T.PartitionData
        own_epoch = self._broker_epoch()
        by_topic: dict[uuid.UUID, list] = {}
        for change, _ in items:
            members = [P.BrokerState(broker_id=broker, broker_epoch=own_epoch if broker == self.broker_id else epoch)
                       for broker, epoch in change.new_isr_with_epochs]
            by_topic.setdefault(change.topic_id, []).append(P(
                partition_index=change.index, leader_epoch=change.leader_epoch, new_isr_with_epochs=members,
                leader_recovery_state=0, partition_epoch=change.partition_epoch))
        return R(broker_id=self.broker_id, broker_epoch=own_epoch,
                 topics=[T(topic_id=topic_id, partitions=parts) for topic_id, parts in by_topic.items()])
