"""Incremental fetch sessions (KIP-227), the broker's side: Kafka's FetchSession, FetchSessionCache and FetchManager.

A client that fetches the same partitions again and again (a follower, a consumer) opens a session with a full
fetch (epoch 0). The broker answers with a session id; from then on the client sends only the partitions whose
fetch position changed, and names the ones it drops as forgotten, with the epoch counting up by one each time.
The broker fetches every partition of the session and answers only those with something new: records, a moved
high watermark, last stable offset or log start offset, an error, a diverging epoch. An idle follower's fetches
and their answers then carry no partitions at all, whatever the number of partitions it follows.

The cache holds at most max.incremental.fetch.session.cache.slots sessions (0: no sessions; every fetch is full).
When it is full, a new session takes the place of one unused for longer than the eviction time; failing that, of
the least valuable evictable one, when the new one is worth more. Followers' sessions are privileged: a follower
may evict a consumer's session of any age, while a session younger than the eviction time is safe from consumers;
worth is (privileged, number of partitions), so a consumer only displaces a strictly smaller consumer session.
As in Kafka, whether a session may be evicted is judged when it is last used.
"""
from __future__ import annotations

import random
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from minikafka.protocol.errors import ErrorCode

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0  # a full fetch that opens a session
FINAL_EPOCH = -1  # a full fetch that closes the session it names and opens none
MIN_EVICTION_MS = 120_000  # Kafka's MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS
MAX_INT32 = 0x7FFFFFFF

# A partition in a session: its topic (an id from Fetch v13, a name before) and its index.
PartitionKey = tuple[str | uuid.UUID, int]


def next_epoch(epoch: int) -> int:
    """Kafka's FetchMetadata.nextEpoch: sessionless stays sessionless, and the epoch wraps to 1, never to 0."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == MAX_INT32 else epoch + 1


class PartitionData(NamedTuple):
    """What a fetch asks of one partition; a client resends a partition only when this changes. A tuple: built
    and compared for every partition of every fetch."""

    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    log_start_offset: int = -1  # a follower's own


class PartitionResponse(NamedTuple):
    """What an answer for one partition says, as far as deciding whether an incremental answer includes it."""

    error: ErrorCode = ErrorCode.NONE
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records_size: int = 0
    diverging: bool = False


@dataclass
class CachedPartition:
    request: PartitionData
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1  # the leader's, as last answered
    read_at_ms: float = 0.0  # when a fetch last read it

    def maybe_update_response_data(self, response: PartitionResponse, update: bool) -> bool:
        """Whether an incremental answer must carry this partition (Kafka's maybeUpdateResponseData); with
        `update`, the cache takes what the answer says. An error resets the cached high watermark, so the next
        good answer carries the partition again."""
        must = response.records_size > 0 or response.diverging
        if self.high_watermark != response.high_watermark:
            must = True
            if update:
                self.high_watermark = response.high_watermark
        if self.last_stable_offset != response.last_stable_offset:
            must = True
            if update:
                self.last_stable_offset = response.last_stable_offset
        if self.log_start_offset != response.log_start_offset:
            must = True
            if update:
                self.log_start_offset = response.log_start_offset
        if response.error != ErrorCode.NONE:
            must = True
            if update:
                self.high_watermark = -1
        return must


@dataclass
class FetchSession:
    id: int
    privileged: bool  # a follower's
    uses_topic_ids: bool
    creation_ms: float
    last_used_ms: float
    epoch: int
    partitions: dict[PartitionKey, CachedPartition] = field(default_factory=dict)  # in fetch order
    cached_size: int = 0
    evictable_by_all: bool = False
    evictable_by_privileged: bool = False

    @property
    def worth(self) -> tuple[bool, int]:
        """Kafka's EvictableKey, less the id that only breaks ties: followers first, then size."""
        return self.privileged, self.cached_size

    def update(self, fetch_data: dict[PartitionKey, PartitionData], to_forget: Iterable[PartitionKey]) -> None:
        """Take a fetch's added and changed partitions and drop its forgotten ones."""
        for key, data in fetch_data.items():
            cached = self.partitions.get(key)
            if cached is None:
                self.partitions[key] = CachedPartition(data)
            else:
                cached.request = data
        for key in to_forget:
            self.partitions.pop(key, None)


class FetchSessionCache:
    """The broker's sessions, bounded in number; owned by the event loop like all broker state."""

    def __init__(self, max_entries: int, eviction_ms: float = MIN_EVICTION_MS) -> None:
        self.max_entries = max_entries
        self.eviction_ms = eviction_ms
        self.sessions: dict[int, FetchSession] = {}
        self.evictions = 0

    def __len__(self) -> int:
        return len(self.sessions)

    @property
    def total_partitions(self) -> int:
        return sum(s.cached_size for s in self.sessions.values())

    def get(self, session_id: int) -> FetchSession | None:
        return self.sessions.get(session_id)

    def remove(self, session_id: int) -> FetchSession | None:
        return self.sessions.pop(session_id, None)

    def touch(self, session: FetchSession, now_ms: float) -> None:
        """Mark the session used now, and judge again who may evict it."""
        session.last_used_ms = now_ms
        session.cached_size = len(session.partitions)
        old = now_ms - session.creation_ms > self.eviction_ms
        session.evictable_by_all = old
        session.evictable_by_privileged = old or not session.privileged

    def maybe_create_session(self, now_ms: float, privileged: bool, uses_topic_ids: bool,
                             partitions: dict[PartitionKey, CachedPartition]) -> int:
        """A new session holding `partitions`, evicting one if the cache is full and the rules allow; its id, or
        INVALID_SESSION_ID when there is no room (the client then keeps sending full fetches)."""
        if len(self.sessions) >= self.max_entries and not self._try_evict(privileged, len(partitions), now_ms):
            return INVALID_SESSION_ID
        session_id = INVALID_SESSION_ID
        while session_id == INVALID_SESSION_ID or session_id in self.sessions:
            session_id = random.randint(1, MAX_INT32)
        session = FetchSession(session_id, privileged, uses_topic_ids, now_ms, now_ms, next_epoch(INITIAL_EPOCH),
                               partitions)
        self.sessions[session_id] = session
        self.touch(session, now_ms)
        return session_id

    def _try_evict(self, privileged: bool, size: int, now_ms: float) -> bool:
        if not self.sessions:
            return False
        least_recent = min(self.sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now_ms - least_recent.last_used_ms > self.eviction_ms:
            victim = least_recent
        else:
            candidates = [s for s in self.sessions.values()
                          if (s.evictable_by_privileged if privileged else s.evictable_by_all)]
            if not candidates:
                return False
            victim = min(candidates, key=lambda s: (s.worth, s.id))
            if (privileged, size) <= victim.worth:
                return False
        del self.sessions[victim.id]
        self.evictions += 1
        return True


class FetchContext:
    """How one Fetch request uses sessions: which partitions it fetches, which its answer carries, and the
    session id the answer names. A plain full fetch (no session) answers every partition it asked for."""

    error = ErrorCode.NONE

    def __init__(self, fetch_data: dict[PartitionKey, PartitionData]) -> None:
        self.fetch_data = fetch_data

    def partitions(self) -> dict[PartitionKey, PartitionData]:
        return self.fetch_data

    def must_respond(self, key: PartitionKey, response: PartitionResponse) -> bool:
        return True

    def answered_unchanged(self, key: PartitionKey, high_watermark: int, last_stable_offset: int,
                           log_start_offset: int, max_age_ms: float) -> bool:
        """Whether the client asks for `key` as it did when last answered, and the partition's offsets are still
        what that answer said: then, with nothing past the fetch offset, a read would find nothing to answer. A
        partition not read for `max_age_ms` does not count as unchanged, so that it is read now and then (a
        follower's fetch state, which only a read records, never grows older than that)."""
        return False

    def session_id(self) -> int:
        return INVALID_SESSION_ID


class SessionErrorContext(FetchContext):
    """A request naming a session it cannot use: answered with the error alone."""

    def __init__(self, error: ErrorCode) -> None:
        super().__init__({})
        self.error = error


class FullFetchContext(FetchContext):
    """A full fetch at epoch 0: answered in full, and opens a session with what the answer said, room allowing."""

    def __init__(self, cache: FetchSessionCache, fetch_data: dict[PartitionKey, PartitionData], privileged: bool,
                 uses_topic_ids: bool, now_ms: float) -> None:
        super().__init__(fetch_data)
        self._cache = cache
        self._privileged = privileged
        self._uses_topic_ids = uses_topic_ids
        self._now_ms = now_ms
        self._cached: dict[PartitionKey, CachedPartition] = {}

    def must_respond(self, key: PartitionKey, response: PartitionResponse) -> bool:
        cached = CachedPartition(self.fetch_data[key], read_at_ms=self._now_ms)
        cached.maybe_update_response_data(response, update=True)
        self._cached[key] = cached
        return True

    def session_id(self) -> int:
        return self._cache.maybe_create_session(self._now_ms, self._privileged, self._uses_topic_ids, self._cached)


class IncrementalFetchContext(FetchContext):
    """A fetch within a session: every partition of the session is fetched, the answer carries the ones with
    something new, and those that returned records go to the back of the session's order, so that a response's
    max_bytes does not favour the same partitions every time (as Kafka rotates them)."""

    def __init__(self, session: FetchSession, sent: Iterable[PartitionKey], now_ms: float) -> None:
        super().__init__({})
        self._session = session
        self._sent = set(sent)
        self._now_ms = now_ms

    def partitions(self) -> dict[PartitionKey, PartitionData]:
        return {key: cached.request for key, cached in self._session.partitions.items()}

    def must_respond(self, key: PartitionKey, response: PartitionResponse) -> bool:
        cached = self._session.partitions.get(key)
        if cached is None:
            return False
        must = cached.maybe_update_response_data(response, update=True)
        cached.read_at_ms = self._now_ms
        if response.records_size > 0:
            del self._session.partitions[key]
            self._session.partitions[key] = cached
        return must

    def answered_unchanged(self, key: PartitionKey, high_watermark: int, last_stable_offset: int,
                           log_start_offset: int, max_age_ms: float) -> bool:
        cached = self._session.partitions.get(key)
        return (cached is not None and key not in self._sent and cached.high_watermark == high_watermark
                and cached.last_stable_offset == last_stable_offset and cached.log_start_offset == log_start_offset
                and self._now_ms - cached.read_at_ms < max_age_ms)

    def session_id(self) -> int:
        return self._session.id


def new_context(cache: FetchSessionCache, version: int, session_id: int, epoch: int, is_follower: bool,
                fetch_data: dict[PartitionKey, PartitionData], to_forget: list[PartitionKey],
                now_ms: float) -> FetchContext:
    """Kafka's FetchManager.newContext: what a Fetch request's session id and epoch make of it."""
    if version < 7:
        return FetchContext(fetch_data)
    if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
        if session_id != INVALID_SESSION_ID:
            cache.remove(session_id)
        if epoch == FINAL_EPOCH:
            return FetchContext(fetch_data)
        return FullFetchContext(cache, fetch_data, is_follower, version >= 13, now_ms)
    session = cache.get(session_id)
    if session is None:
        return SessionErrorContext(ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
    if session.epoch != epoch:
        return SessionErrorContext(ErrorCode.INVALID_FETCH_SESSION_EPOCH)
    if session.uses_topic_ids != (version >= 13):
        return SessionErrorContext(ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)
    session.update(fetch_data, to_forget)
    if not session.partitions:
        cache.remove(session.id)
        return FetchContext(fetch_data)
    cache.touch(session, now_ms)
    session.epoch = next_epoch(session.epoch)
    return IncrementalFetchContext(session, fetch_data, now_ms)
