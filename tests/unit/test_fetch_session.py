"""Fetch sessions (KIP-227): the broker's cache and contexts, and the fetching side's session handler."""
from __future__ import annotations

import uuid

from minikafka.broker.replication.fetch_session import (
    INVALID_SESSION_ID,
    MAX_INT32,
    CachedPartition,
    FetchContext,
    FetchSessionCache,
    FullFetchContext,
    IncrementalFetchContext,
    PartitionData,
    PartitionResponse,
    SessionErrorContext,
    new_context,
    next_epoch,
)
from minikafka.broker.replication.fetch_session_handler import FetchSessionHandler
from minikafka.protocol.errors import ErrorCode

EVICTION_MS = 1000
TOPIC_ID = uuid.UUID(int=7)


def data(offset: int = 0) -> PartitionData:
    return PartitionData(fetch_offset=offset, max_bytes=1 << 20)


def partitions(n: int) -> dict:
    return {("t", i): CachedPartition(data()) for i in range(n)}


def answer(hw: int = 10, records: int = 0, error: ErrorCode = ErrorCode.NONE) -> PartitionResponse:
    return PartitionResponse(error, hw, hw, 0, records, False)


def open_session(cache: FetchSessionCache, n: int = 2, version: int = 12, now: float = 0) -> int:
    fetch_data = {("t", i): data() for i in range(n)}
    context = new_context(cache, version, 0, 0, False, fetch_data, [], now)
    assert isinstance(context, FullFetchContext)
    for key in context.partitions():
        assert context.must_respond(key, answer())
    return context.session_id()


# ---- the cache ------------------------------------------------------------------------------------------------


def test_epochs_count_up_and_wrap_to_one():
    assert next_epoch(0) == 1
    assert next_epoch(41) == 42
    assert next_epoch(MAX_INT32) == 1
    assert next_epoch(-1) == -1


def test_no_slots_means_no_sessions():
    cache = FetchSessionCache(0, EVICTION_MS)
    assert cache.maybe_create_session(0, True, False, partitions(3)) == INVALID_SESSION_ID
    assert len(cache) == 0


def test_a_full_cache_evicts_a_session_unused_for_longer_than_the_eviction_time():
    cache = FetchSessionCache(1, EVICTION_MS)
    old = cache.maybe_create_session(0, True, False, partitions(100))
    assert cache.maybe_create_session(EVICTION_MS, False, False, partitions(1)) == INVALID_SESSION_ID
    new = cache.maybe_create_session(EVICTION_MS + 1, False, False, partitions(1))
    assert new != INVALID_SESSION_ID and cache.get(old) is None and cache.evictions == 1


def test_a_follower_evicts_a_young_consumer_session_but_a_consumer_does_not():
    cache = FetchSessionCache(1, EVICTION_MS)
    consumer = cache.maybe_create_session(0, False, False, partitions(500))
    assert cache.maybe_create_session(10, False, False, partitions(900)) == INVALID_SESSION_ID  # too young
    follower = cache.maybe_create_session(10, True, False, partitions(1))
    assert follower != INVALID_SESSION_ID and cache.get(consumer) is None


def test_a_young_follower_session_is_safe_even_from_followers():
    cache = FetchSessionCache(1, EVICTION_MS)
    cache.maybe_create_session(0, True, False, partitions(1))
    assert cache.maybe_create_session(10, True, False, partitions(1000)) == INVALID_SESSION_ID


def test_an_old_session_is_evicted_only_by_a_larger_or_more_privileged_one():
    cache = FetchSessionCache(1, EVICTION_MS)
    first = cache.maybe_create_session(0, False, False, partitions(5))
    session = cache.get(first)
    assert session is not None
    cache.touch(session, EVICTION_MS + 1)  # old by now, but used recently: evictable, not stale
    assert cache.maybe_create_session(EVICTION_MS + 2, False, False, partitions(5)) == INVALID_SESSION_ID
    assert cache.maybe_create_session(EVICTION_MS + 2, False, False, partitions(4)) == INVALID_SESSION_ID
    second = cache.maybe_create_session(EVICTION_MS + 2, False, False, partitions(6))
    assert second != INVALID_SESSION_ID and cache.get(first) is None


def test_an_old_follower_session_gives_way_to_a_larger_follower_and_not_to_a_consumer():
    cache = FetchSessionCache(1, EVICTION_MS)
    first = cache.maybe_create_session(0, True, False, partitions(5))
    session = cache.get(first)
    assert session is not None
    cache.touch(session, EVICTION_MS + 1)
    assert cache.maybe_create_session(EVICTION_MS + 2, False, False, partitions(1000)) == INVALID_SESSION_ID
    assert cache.maybe_create_session(EVICTION_MS + 2, True, False, partitions(6)) != INVALID_SESSION_ID


def test_the_smallest_evictable_session_goes_first():
    cache = FetchSessionCache(3, EVICTION_MS)
    big = cache.maybe_create_session(0, False, False, partitions(50))
    small = cache.maybe_create_session(0, False, False, partitions(2))
    follower = cache.maybe_create_session(0, True, False, partitions(1))
    assert cache.maybe_create_session(1, True, False, partitions(10)) != INVALID_SESSION_ID
    assert cache.get(small) is None and cache.get(big) is not None and cache.get(follower) is not None
    assert cache.total_partitions == 50 + 1 + 10


# ---- contexts -------------------------------------------------------------------------------------------------


def test_a_full_fetch_opens_a_session_and_an_incremental_one_answers_only_changes():
    cache = FetchSessionCache(10, EVICTION_MS)
    session_id = open_session(cache, 3)
    assert session_id != INVALID_SESSION_ID
    context = new_context(cache, 12, session_id, 1, False, {}, [], 1)
    assert isinstance(context, IncrementalFetchContext)
    assert list(context.partitions()) == [("t", 0), ("t", 1), ("t", 2)]  # the session's, though none was sent
    assert context.must_respond(("t", 0), answer(records=100))
    assert context.must_respond(("t", 1), answer(hw=11))  # the high watermark moved
    assert not context.must_respond(("t", 2), answer())
    assert context.session_id() == session_id
    # Records send a partition to the back of the order; the moved high watermark is now known.
    context = new_context(cache, 12, session_id, 2, False, {("t", 0): data(5)}, [], 2)
    assert list(context.partitions()) == [("t", 1), ("t", 2), ("t", 0)]
    assert context.partitions()[("t", 0)].fetch_offset == 5
    assert not context.must_respond(("t", 1), answer(hw=11))


def test_errors_are_answered_every_time_and_reset_the_high_watermark():
    cache = FetchSessionCache(10, EVICTION_MS)
    session_id = open_session(cache, 1)
    context = new_context(cache, 12, session_id, 1, False, {}, [], 1)
    assert context.must_respond(("t", 0), answer(error=ErrorCode.NOT_LEADER_OR_FOLLOWER))
    context = new_context(cache, 12, session_id, 2, False, {}, [], 2)
    assert context.must_respond(("t", 0), answer())  # the same high watermark as before the error


def test_session_errors():
    cache = FetchSessionCache(10, EVICTION_MS)
    session_id = open_session(cache, 1, version=13)
    unknown = new_context(cache, 13, session_id + 1 if session_id < MAX_INT32 else 1, 1, False, {}, [], 1)
    assert isinstance(unknown, SessionErrorContext) and unknown.error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    stale = new_context(cache, 13, session_id, 5, False, {}, [], 1)
    assert isinstance(stale, SessionErrorContext) and stale.error == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    by_name = new_context(cache, 12, session_id, 1, False, {}, [], 1)
    assert isinstance(by_name, SessionErrorContext) and by_name.error == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
    assert new_context(cache, 13, session_id, 1, False, {}, [], 1).session_id() == session_id  # still usable


def test_forgetting_every_partition_closes_the_session():
    cache = FetchSessionCache(10, EVICTION_MS)
    session_id = open_session(cache, 2)
    context = new_context(cache, 12, session_id, 1, False, {}, [("t", 0), ("t", 1)], 1)
    assert type(context) is FetchContext and context.session_id() == INVALID_SESSION_ID
    assert cache.get(session_id) is None


def test_the_final_epoch_closes_a_session_and_epoch_zero_replaces_it():
    cache = FetchSessionCache(10, EVICTION_MS)
    first = open_session(cache, 2)
    context = new_context(cache, 12, first, -1, False, {("t", 0): data()}, [], 1)
    assert type(context) is FetchContext and cache.get(first) is None
    second = open_session(cache, 2)
    replaced = new_context(cache, 12, second, 0, False, {("t", 0): data()}, [], 2)
    assert isinstance(replaced, FullFetchContext) and cache.get(second) is None
    assert replaced.must_respond(("t", 0), answer())
    assert replaced.session_id() not in (INVALID_SESSION_ID, second)


def test_fetches_before_v7_never_use_sessions():
    cache = FetchSessionCache(10, EVICTION_MS)
    context = new_context(cache, 6, 0, 0, False, {("t", 0): data()}, [], 0)
    assert type(context) is FetchContext and len(cache) == 0


# ---- the fetching side --------------------------------------------------------------------------------------


def entry(offset: int) -> tuple[uuid.UUID, PartitionData]:
    return TOPIC_ID, data(offset)


def test_the_handler_sends_a_full_fetch_then_only_changes():
    handler = FetchSessionHandler()
    full = handler.build({("t", 0): entry(0), ("t", 1): entry(0)})
    assert full.is_full and full.session_id == 0 and set(full.to_send) == {("t", 0), ("t", 1)}
    assert handler.handle_response(full, ErrorCode.NONE, 77, [("t", 0), ("t", 1)])
    idle = handler.build({("t", 0): entry(0), ("t", 1): entry(0)})
    assert (idle.session_id, idle.epoch, idle.to_send, idle.to_forget) == (77, 1, {}, {})
    assert handler.handle_response(idle, ErrorCode.NONE, 77, [])
    moved = handler.build({("t", 0): entry(5)})
    assert (moved.epoch, set(moved.to_send), moved.to_forget) == (2, {("t", 0)}, {("t", 1): TOPIC_ID})
    assert handler.handle_response(moved, ErrorCode.NONE, 77, [("t", 0)])
    assert handler.build({("t", 0): entry(5)}).epoch == 3


def test_the_handler_falls_back_to_a_full_fetch():
    handler = FetchSessionHandler()
    wanted = {("t", 0): entry(0)}
    assert handler.handle_response(handler.build(wanted), ErrorCode.NONE, 77, [("t", 0)])
    # The leader restarted: it no longer has the session.
    request = handler.build(wanted)
    assert not handler.handle_response(request, ErrorCode.FETCH_SESSION_ID_NOT_FOUND, 0, [])
    again = handler.build(wanted)
    assert again.is_full and again.session_id == 0 and set(again.to_send) == {("t", 0)}
    # A wrong epoch: the next full fetch names the session, which replaces it.
    assert handler.handle_response(again, ErrorCode.NONE, 78, [("t", 0)])
    assert not handler.handle_response(handler.build(wanted), ErrorCode.INVALID_FETCH_SESSION_EPOCH, 0, [])
    replace = handler.build(wanted)
    assert replace.is_full and replace.session_id == 78
    # An answer naming a partition outside the session, and a lost connection.
    assert handler.handle_response(replace, ErrorCode.NONE, 79, [("t", 0)])
    assert not handler.handle_response(handler.build(wanted), ErrorCode.NONE, 79, [("t", 9)])
    assert handler.build(wanted).is_full
    handler.handle_error()
    assert handler.build(wanted).is_full


def test_the_handler_stays_sessionless_when_the_leader_has_no_room():
    handler = FetchSessionHandler()
    wanted = {("t", 0): entry(0)}
    for _ in range(3):
        request = handler.build(wanted)
        assert request.is_full and request.session_id == 0 and set(request.to_send) == {("t", 0)}
        assert handler.handle_response(request, ErrorCode.NONE, 0, [("t", 0)])


def test_a_partition_is_unchanged_only_as_last_answered_and_recently_read():
    cache = FetchSessionCache(10, EVICTION_MS)
    session_id = open_session(cache, 2)  # answered at high watermark 10, offsets 10 and 0, read at 0 ms
    context = new_context(cache, 12, session_id, 1, False, {("t", 1): data(10)}, [], 100)
    assert context.answered_unchanged(("t", 0), 10, 10, 0, max_age_ms=500)
    assert not context.answered_unchanged(("t", 1), 10, 10, 0, max_age_ms=500)  # the client sent it again
    assert not context.answered_unchanged(("t", 0), 11, 10, 0, max_age_ms=500)  # the high watermark moved
    assert not context.answered_unchanged(("t", 0), 10, 10, 3, max_age_ms=500)  # the log start offset moved
    assert not context.answered_unchanged(("t", 0), 10, 10, 0, max_age_ms=100)  # not read for too long
    assert context.must_respond(("t", 1), answer(hw=10)) is False
    later = new_context(cache, 12, session_id, 2, False, {}, [], 550)
    assert later.answered_unchanged(("t", 1), 10, 10, 0, max_age_ms=500)  # read at 100 ms, by the last fetch
    assert not later.answered_unchanged(("t", 0), 10, 10, 0, max_age_ms=500)
    full = new_context(cache, 12, 0, 0, False, {("t", 0): data()}, [], 0)
    assert not full.answered_unchanged(("t", 0), 10, 10, 0, max_age_ms=500)  # a full fetch reads everything
