"""A fetch session seen from the fetching side (Kafka's FetchSessionHandler), as a follower's fetcher keeps it.

The first fetch is full and asks for a session (epoch 0). Once the leader answers with a session id, each fetch
carries only the partitions whose fetch data changed since the last one, and names the ones no longer fetched as
forgotten; the epoch counts up with every answered fetch. Whatever goes wrong — the leader no longer has the
session (FETCH_SESSION_ID_NOT_FOUND: a restart, an eviction), a wrong epoch, an answer naming partitions the
session does not hold, a lost connection — the next fetch is full again, so nothing is ever missed.
"""
from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from minikafka.broker.replication.fetch_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    PartitionData,
    next_epoch,
)
from minikafka.protocol.errors import ErrorCode

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class FetchRequestData:
    """One fetch to send: the partitions it carries, the ones it forgets, and its session id and epoch."""

    to_send: dict[TopicPartition, tuple[uuid.UUID, PartitionData]]
    to_forget: dict[TopicPartition, uuid.UUID]
    session_id: int
    epoch: int

    @property
    def is_full(self) -> bool:
        return self.epoch in (INITIAL_EPOCH, FINAL_EPOCH)


class FetchSessionHandler:
    def __init__(self) -> None:
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        # What the leader's session holds once the last built fetch is answered.
        self.session_partitions: dict[TopicPartition, tuple[uuid.UUID, PartitionData]] = {}

    def build(self, wanted: dict[TopicPartition, tuple[uuid.UUID, PartitionData]]) -> FetchRequestData:
        """The fetch for `wanted` (every partition to fetch now, with its fetch data): all of them when the
        session is new, otherwise only what changed."""
        if self.epoch == INITIAL_EPOCH:
            request = FetchRequestData(dict(wanted), {}, self.session_id, self.epoch)
        else:
            changed = {tp: entry for tp, entry in wanted.items() if self.session_partitions.get(tp) != entry}
            forgotten = {tp: topic_id for tp, (topic_id, _) in self.session_partitions.items() if tp not in wanted}
            request = FetchRequestData(changed, forgotten, self.session_id, self.epoch)
        self.session_partitions = dict(wanted)
        return request

    def handle_response(self, request: FetchRequestData, error: ErrorCode, session_id: int,
                        answered: Iterable[TopicPartition]) -> bool:
        """Move the session on after an answer; False when the answer cannot be used (the next fetch is full)."""
        if error != ErrorCode.NONE:
            if error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND:
                self.session_id, self.epoch = INVALID_SESSION_ID, INITIAL_EPOCH
            else:
                self.epoch = INITIAL_EPOCH
            return False
        answered = set(answered)
        if request.is_full:
            valid = answered == set(request.to_send)
        else:
            valid = answered <= set(self.session_partitions)
        if not valid:
            self.epoch = INITIAL_EPOCH
            return False
        if session_id == INVALID_SESSION_ID:
            self.session_id, self.epoch = INVALID_SESSION_ID, INITIAL_EPOCH
        elif request.is_full:
            self.session_id, self.epoch = session_id, next_epoch(INITIAL_EPOCH)
        else:
            self.epoch = next_epoch(self.epoch)
        return True

    def handle_error(self) -> None:
        """The fetch got no answer: the next one is full, and replaces the session the leader may still hold."""
        self.epoch = INITIAL_EPOCH
