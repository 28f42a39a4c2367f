"""Share sessions as Kafka keeps them: epochs, incremental partitions, the final request, the session limit."""
from __future__ import annotations

import uuid

import pytest

from minikafka.broker.server.share.share_session_cache import (
    MAX_EPOCH,
    ShareSessionCache,
    ShareSessionError,
    next_epoch,
)
from minikafka.protocol.errors import ErrorCode

T = uuid.UUID(int=7)


def error_of(call, *args) -> ErrorCode:  # type: ignore[no-untyped-def]
    with pytest.raises(ShareSessionError) as raised:
        call(*args)
    return raised.value.error


def test_epochs_and_incremental_partitions() -> None:
    cache = ShareSessionCache()
    session = cache.new_context("g", "m", 0, [(T, 0), (T, 1)], [], False, "c1")
    assert session is not None and (session.epoch, list(session.partitions)) == (1, [(T, 0), (T, 1)])
    assert error_of(cache.new_context, "g", "m", 2, [], [], False, "c1") == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    assert error_of(cache.new_context, "g", "other", 1, [], [], False, "c1") == ErrorCode.SHARE_SESSION_NOT_FOUND
    session = cache.new_context("g", "m", 1, [(T, 2)], [(T, 0)], True, "c1")
    assert session is not None and (session.epoch, list(session.partitions)) == (2, [(T, 1), (T, 2)])
    cache.acknowledge_session_update("g", "m", 2)
    assert session.epoch == 3
    assert error_of(cache.acknowledge_session_update, "g", "m", 0) == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    assert error_of(cache.acknowledge_session_update, "g", "m", 2) == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    cache.acknowledge_session_update("g", "m", -1)
    assert cache.new_context("g", "m", -1, [], [], True, "c1") is None and cache.get("g", "m") is session
    assert (next_epoch(MAX_EPOCH), next_epoch(-1)) == (1, -1)


def test_a_new_session_replaces_the_members_and_refuses_acknowledgements() -> None:
    cache = ShareSessionCache()
    first = cache.new_context("g", "m", 0, [(T, 0)], [], False, "c1")
    assert error_of(cache.new_context, "g", "m", 0, [(T, 0)], [], True, "c1") == ErrorCode.INVALID_REQUEST
    second = cache.new_context("g", "m", 0, [(T, 1)], [], False, "c2")
    assert second is not first and cache.get("g", "m") is second and len(cache) == 1
    assert error_of(cache.new_context, "g", "x", -1, [], [], False, "c1") == ErrorCode.SHARE_SESSION_NOT_FOUND


def test_the_session_limit_and_closed_connections() -> None:
    cache = ShareSessionCache(max_entries=2)
    cache.new_context("g", "a", 0, [], [], False, "c1")
    cache.new_context("g", "b", 0, [], [], False, "c2")
    assert error_of(cache.new_context, "g", "c", 0, [], [], False, "c3") == ErrorCode.SHARE_SESSION_LIMIT_REACHED
    assert cache.new_context("g", "a", 0, [], [], False, "c1") is not None  # a member's own session is replaced
    assert [s.member_id for s in cache.connection_closed("c2")] == ["b"]
    assert cache.new_context("g", "c", 0, [], [], False, "c3") is not None
    assert cache.remove("g", "a") is not None and cache.get("g", "a") is None
