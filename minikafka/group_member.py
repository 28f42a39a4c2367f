"""What the client-side members of a KIP-848 consumer group and of a KIP-932 share group share (Kafka's
CoordinatorRequestManager and the answer handling of its AbstractHeartbeatRequestManager): the group's coordinator,
found with FindCoordinator and found again when it moves, and what a heartbeat's answer does to the member.

Requests go over a kafka-python network client, one at a time, from the caller's thread.
"""
from __future__ import annotations

import logging
import time
from abc import ABC, abstractmethod
from typing import Any

from minikafka.protocol.schema_loading import quiet_schema_loading

with quiet_schema_loading():
    import kafka.errors as errors
    from kafka.net.compat import KafkaNetClient
    from kafka.protocol.metadata import FindCoordinatorRequest

log = logging.getLogger(__name__)

# Kafka's consumer defaults: retry.backoff.ms, request.timeout.ms.
RETRY_BACKOFF_S = 0.1
REQUEST_TIMEOUT_MS = 30000
# Errors after which the member has lost its assignment and joins again from epoch 0 (as Kafka's consumers).
FENCED = (errors.FencedMemberEpochError, errors.UnknownMemberIdError)
# Errors that are the coordinator's, not the member's: find it again and retry.
COORDINATOR_MOVED = (errors.NotCoordinatorError, errors.CoordinatorNotAvailableError,
                     errors.CoordinatorLoadInProgressError)


def failed(error: type[errors.KafkaError], message: str | None, what: str) -> errors.KafkaError:
    """The broker's error, with its message, else what the error means in Kafka's words (as Kafka's exceptions
    say it), and which request it answered."""
    return error(f"{message or error.description} ({what})")


class GroupMember(ABC):
    """A member of group `group_id` over `client`; subclasses heartbeat with `_heartbeat_answer` and say what
    being fenced means to them (`_on_fenced`)."""

    def __init__(self, group_id: str, member_id: str, client: KafkaNetClient) -> None:
        self.group_id = group_id
        self.member_id = member_id
        self.member_epoch = 0
        self.heartbeat_interval_s = 0.0
        self._client = client
        self._coordinator: int | None = None
        self._next_heartbeat = 0.0

    @abstractmethod
    def _on_fenced(self) -> None:
        """The coordinator no longer knows the member at its epoch: its assignment is gone, it joins again."""

    def _heartbeat_answer(self, request: Any, what: str) -> Any | None:
        """Send a heartbeat and take its answer: the new epoch and interval, returning the response; None when
        it is to be sent again (the coordinator moved or did not answer, or the member was fenced and joins
        again). Any other error is raised."""
        try:
            response = self._send_to_coordinator(request)
        except errors.KafkaError as exc:
            if not exc.retriable:
                raise
            log.info("group %s: heartbeat failed: %s", self.group_id, exc)
            self._coordinator = None
            self._next_heartbeat = time.monotonic() + RETRY_BACKOFF_S
            return None
        error = errors.for_code(response.error_code)
        if error in COORDINATOR_MOVED:
            self._coordinator = None if error is not errors.CoordinatorLoadInProgressError else self._coordinator
            self._next_heartbeat = time.monotonic() + RETRY_BACKOFF_S
            return None
        if error in FENCED:
            log.info("group %s: member %s fenced (%s): joining again", self.group_id, self.member_id,
                     error.__name__)
            self._on_fenced()
            return None
        if error is not errors.NoError:
            raise failed(error, response.error_message, what)
        self.member_epoch = response.member_epoch
        self.heartbeat_interval_s = response.heartbeat_interval_ms / 1000
        self._next_heartbeat = time.monotonic() + self.heartbeat_interval_s
        return response

    def _send_to_coordinator(self, request: Any, timeout_ms: int = REQUEST_TIMEOUT_MS) -> Any:
        if self._coordinator is None:
            self._coordinator = self._find_coordinator(timeout_ms)
        try:
            return self._client.send_and_receive(self._coordinator, request, timeout_ms=timeout_ms)
        except errors.KafkaError as exc:
            if exc.retriable:  # the coordinator's broker gone or not answering: find the coordinator again
                self._coordinator = None
            raise

    def _find_coordinator(self, timeout_ms: int = REQUEST_TIMEOUT_MS) -> int:
        """The group's coordinator (FindCoordinator), asked of any broker until one knows it or `timeout_ms`
        passed."""
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            node = self._client.least_loaded_node(bootstrap_fallback=True)
            response = self._client.send_and_receive(node, FindCoordinatorRequest(key=self.group_id, key_type=0,
                                                                                  max_version=3),
                                                     timeout_ms=timeout_ms)
            error = errors.for_code(response.error_code)
            if error is errors.NoError:
                return int(response.node_id)
            if error not in COORDINATOR_MOVED or time.monotonic() >= deadline:
                raise failed(error, response.error_message, f"FindCoordinator of group {self.group_id!r}")
            time.sleep(RETRY_BACKOFF_S)
