"""A small KIP-932 share consumer over the raw protocol, for tests (no Python client ships one yet): membership
through ShareGroupHeartbeat with the coordinator FindCoordinator names, following the coordinator when it moves.

Plain functions and one class, so a test drives each member's heartbeats itself: `ShareMember.heartbeat()` sends
one, `heartbeat_until(members, predicate)` keeps a set of members heartbeating at the interval the coordinator gave
them until the predicate holds (bounded by a deadline).
"""
from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable

from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest

from minikafka.protocol.client_apis.messages import (
    ShareGroupDescribeRequest,
    ShareGroupHeartbeatRequest,
)
from tests.raw_client import RawConnection

HEARTBEAT_VERSION = 1
NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS = 16, 15, 14
_RETRIABLE = (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS)


def find_coordinator(bootstrap: str, group: str) -> tuple[int, str]:
    """The group's coordinator (node id, host:port), asked of the brokers of `bootstrap` in turn."""
    last: object = None
    for address in bootstrap.split(","):
        try:
            with RawConnection(address, timeout=5) as raw:
                response = raw.request(FindCoordinatorRequest[3](key=group, key_type=0))
        except OSError as exc:
            last = exc
            continue
        if response.error_code == 0:
            return response.node_id, f"{response.host}:{response.port}"
        last = response
    raise LookupError(f"no coordinator for {group}: {last}")


def describe_share_group(bootstrap: str, group: str, include_authorized_operations: bool = False) -> object:
    """ShareGroupDescribe v1 of the group, asked of its coordinator."""
    _node, address = find_coordinator(bootstrap, group)
    with RawConnection(address) as raw:
        response = raw.request(ShareGroupDescribeRequest[1](
            group_ids=[group], include_authorized_operations=include_authorized_operations))
    (described,) = response.groups
    return described


class ShareMember:
    """One share group member: its id (made up here, as a KIP-932 consumer does), epoch, assignment and the last
    heartbeat's response."""

    def __init__(self, bootstrap: str, group: str, topics: Iterable[str], member_id: str | None = None) -> None:
        self.bootstrap = bootstrap
        self.group = group
        self.topics = sorted(topics)
        self.member_id = member_id or str(uuid.uuid4())
        self.member_epoch = 0
        self.heartbeat_interval_ms = 0
        self.assignment: dict[uuid.UUID, list[int]] = {}
        self.last: object = None
        self.epochs_seen: list[int] = []
        self._conn: RawConnection | None = None
        self._next_heartbeat = 0.0

    def _connection(self) -> RawConnection:
        if self._conn is None:
            _node, address = find_coordinator(self.bootstrap, self.group)
            self._conn = RawConnection(address)
        return self._conn

    def _drop_connection(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def send(self, member_epoch: int, topics: list[str] | None) -> object:
        """One ShareGroupHeartbeat as given; the response (a lost coordinator connection is looked up again)."""
        request = ShareGroupHeartbeatRequest[HEARTBEAT_VERSION](
            group_id=self.group, member_id=self.member_id, member_epoch=member_epoch, rack_id=None,
            subscribed_topic_names=topics)
        try:
            response = self._connection().request(request)
        except (OSError, AssertionError):
            self._drop_connection()
            raise
        if response.error_code in _RETRIABLE:
            self._drop_connection()
        return response

    def heartbeat(self) -> object:
        """The next heartbeat: a full one when joining, else only the epoch. Its response updates the member."""
        joining = self.member_epoch == 0
        try:
            response = self.send(self.member_epoch, self.topics if joining else None)
        except (OSError, AssertionError):
            return None
        self.last = response
        if response.error_code == 0:
            self.member_epoch = response.member_epoch
            self.heartbeat_interval_ms = response.heartbeat_interval_ms
            if response.assignment is not None:
                self.assignment = {tp.topic_id: sorted(tp.partitions)
                                   for tp in response.assignment.topic_partitions}
            if not self.epochs_seen or self.epochs_seen[-1] != self.member_epoch:
                self.epochs_seen.append(self.member_epoch)
        elif response.error_code in (22, 25):  # FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID: rejoin from scratch
            self.member_epoch = 0
            self.assignment = {}
        self._next_heartbeat = time.monotonic() + max(self.heartbeat_interval_ms, 50) / 1000
        return response

    def due(self) -> bool:
        return time.monotonic() >= self._next_heartbeat

    def partitions(self) -> int:
        return sum(len(ps) for ps in self.assignment.values())

    def leave(self) -> object:
        """Leave the group (member epoch -1)."""
        response = self.send(-1, None)
        self.member_epoch = 0
        self.assignment = {}
        return response

    def close(self) -> None:
        self._drop_connection()


def heartbeat_until(members: list[ShareMember], predicate: Callable[[], object], timeout: float = 60,
                    what: str = "the condition") -> None:
    """Keep the members heartbeating, each at its interval, until `predicate()` holds; AssertionError on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        for member in members:
            if member.due():
                member.heartbeat()
        if predicate():
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}: "
                                 f"{[(m.member_id[:8], m.member_epoch, m.assignment, m.last) for m in members]}")
        next_due = min(m._next_heartbeat for m in members) if members else time.monotonic() + 0.05
        time.sleep(min(max(next_due - time.monotonic(), 0.01), 0.2))
