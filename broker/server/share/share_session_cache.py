"""Share sessions (KIP-932; Kafka's ShareSessionCache and SharePartitionManager.newContext), sans-IO.

A member's ShareFetch requests name the partitions it fetches incrementally: epoch 0 opens a session with the
partitions named (replacing the member's session, and refusing acknowledgements, which belong to the session they
were acquired in), each next request carries the session's epoch and adds or forgets partitions, and epoch -1 is the
last request, which only acknowledges. A request with the wrong epoch is INVALID_SHARE_SESSION_EPOCH, one for a
session that does not exist SHARE_SESSION_NOT_FOUND, a new session past group.share.max.share.sessions
SHARE_SESSION_LIMIT_REACHED. A session ends with its final request or when its connection closes.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from minikafka.protocol.errors import ErrorCode

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
MAX_EPOCH = (1 << 31) - 1
GROUP_SHARE_MAX_SHARE_SESSIONS = 2000  # group.share.max.share.sessions' default

TopicIdPartition = tuple[uuid.UUID, int]


def next_epoch(epoch: int) -> int:
    """The epoch after `epoch`: -1 stays -1, the largest int wraps to 1 (0 only ever opens a session)."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == MAX_EPOCH else epoch + 1


class ShareSessionError(Exception):
    def __init__(self, error: ErrorCode) -> None:
        super().__init__(error.name)
        self.error = error


@dataclass(eq=False)
class ShareSession:
    group_id: str
    member_id: str
    connection_id: str
    epoch: int
    partitions: dict[TopicIdPartition, None] = field(default_factory=dict)  # in the order they were added


class ShareSessionCache:
    def __init__(self, max_entries: int = GROUP_SHARE_MAX_SHARE_SESSIONS) -> None:
        self.max_entries = max_entries
        self._sessions: dict[tuple[str, str], ShareSession] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def sessions(self) -> list[ShareSession]:
        return list(self._sessions.values())

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        return self._sessions.get((group_id, member_id))

    def new_context(self, group_id: str, member_id: str, epoch: int, fetch: list[TopicIdPartition],
                    forget: list[TopicIdPartition], has_acknowledgements: bool, connection_id: str
                    ) -> ShareSession | None:
        """The session a ShareFetch belongs to after it (None for the final request, which ends it once answered),
        or ShareSessionError with Kafka's error."""
        key = (group_id, member_id)
        if epoch == FINAL_EPOCH:
            if key not in self._sessions:
                raise ShareSessionError(ErrorCode.SHARE_SESSION_NOT_FOUND)
            return None
        if epoch == INITIAL_EPOCH:
            if has_acknowledgements:
                raise ShareSessionError(ErrorCode.INVALID_REQUEST)
            self._sessions.pop(key, None)
            if len(self._sessions) >= self.max_entries:
                raise ShareSessionError(ErrorCode.SHARE_SESSION_LIMIT_REACHED)
            opened = ShareSession(group_id, member_id, connection_id, next_epoch(INITIAL_EPOCH), dict.fromkeys(fetch))
            self._sessions[key] = opened
            return opened
        session = self._sessions.get(key)
        if session is None:
            raise ShareSessionError(ErrorCode.SHARE_SESSION_NOT_FOUND)
        if session.epoch != epoch:
            raise ShareSessionError(ErrorCode.INVALID_SHARE_SESSION_EPOCH)
        for tp in fetch:
            session.partitions.setdefault(tp, None)
        for tp in forget:
            session.partitions.pop(tp, None)
        session.epoch = next_epoch(session.epoch)
        return session

    def acknowledge_session_update(self, group_id: str, member_id: str, epoch: int) -> None:
        """A ShareAcknowledge in its session: epoch 0 is INVALID_SHARE_SESSION_EPOCH (acknowledgements need a
        session), -1 leaves the epoch as it is (the session ends), any other must be the session's and moves it."""
        if epoch == INITIAL_EPOCH:
            raise ShareSessionError(ErrorCode.INVALID_SHARE_SESSION_EPOCH)
        session = self._sessions.get((group_id, member_id))
        if session is None:
            raise ShareSessionError(ErrorCode.SHARE_SESSION_NOT_FOUND)
        if epoch == FINAL_EPOCH:
            return
        if session.epoch != epoch:
            raise ShareSessionError(ErrorCode.INVALID_SHARE_SESSION_EPOCH)
        session.epoch = next_epoch(session.epoch)

    def remove(self, group_id: str, member_id: str) -> ShareSession | None:
        return self._sessions.pop((group_id, member_id), None)

    def connection_closed(self, connection_id: str) -> list[ShareSession]:
        """The sessions of a connection that closed, taken out: their members' acquired records are to be released."""
        closed = [s for s in self._sessions.values() if s.connection_id == connection_id]
        for session in closed:
            del self._sessions[(session.group_id, session.member_id)]
        return closed
