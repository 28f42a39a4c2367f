"""The share-partition state machine: what is acquired by whom, how deliveries are counted and records archived,
how the start offset moves, and the state a persister keeps, as Kafka's SharePartition does."""
from __future__ import annotations

import pytest

from minikafka.broker.server.share.persister import PersisterStateBatch
from minikafka.broker.server.share.share_partition import (
    AcknowledgementBatch,
    AcquiredRecords,
    RecordState,
    SharePartitionError,
    SharePartitionState,
    without_ranges,
)
from minikafka.protocol.errors import ErrorCode

LOCK_MS = 30_000
ACCEPT, RELEASE, REJECT, GAP = 1, 2, 3, 0


def ack(first: int, last: int, *types: int) -> AcknowledgementBatch:
    return AcknowledgementBatch(first, last, types)


def test_records_go_to_one_member_at_a_time() -> None:
    sp = SharePartitionState(0)
    assert sp.acquire("a", 0, 9, 5, 0, LOCK_MS) == [AcquiredRecords(0, 4, 1)]
    assert sp.acquire("b", 0, 9, 10, 0, LOCK_MS) == [AcquiredRecords(5, 9, 1)]
    assert sp.acquire("c", 0, 9, 10, 0, LOCK_MS) == []
    assert (sp.start_offset, sp.end_offset, sp.next_fetch_offset()) == (0, 10, 10)
    assert sp.record(3).member_id == "a" and sp.record(7).member_id == "b"


def test_accept_moves_the_start_offset_and_release_redelivers_with_the_next_count() -> None:
    sp = SharePartitionState(0)
    sp.acquire("a", 0, 4, 10, 0, LOCK_MS)
    sp.acknowledge("a", [ack(0, 1, ACCEPT), ack(2, 4, RELEASE)])
    assert (sp.start_offset, sp.next_fetch_offset()) == (2, 2)
    assert sp.acquire("b", 0, 4, 10, 0, LOCK_MS) == [AcquiredRecords(2, 4, 2)]
    sp.acknowledge("b", [ack(2, 4, REJECT, ACCEPT, GAP)])
    assert (sp.start_offset, sp.end_offset) == (5, 5)
    assert sp.state_batches() == ()


def test_acknowledgements_are_checked_before_any_applies() -> None:
    sp = SharePartitionState(0)
    sp.acquire("a", 0, 4, 10, 0, LOCK_MS)
    with pytest.raises(SharePartitionError) as not_owner:
        sp.acknowledge("b", [ack(0, 1, ACCEPT)])
    assert not_owner.value.error == ErrorCode.INVALID_RECORD_STATE
    with pytest.raises(SharePartitionError) as past:
        sp.acknowledge("a", [ack(0, 0, ACCEPT), ack(3, 7, ACCEPT)])
    assert past.value.error == ErrorCode.INVALID_REQUEST
    with pytest.raises(SharePartitionError) as bad_type:
        sp.acknowledge("a", [ack(0, 0, 4)])
    assert bad_type.value.error == ErrorCode.INVALID_REQUEST
    with pytest.raises(SharePartitionError) as bad_count:
        sp.acknowledge("a", [ack(0, 2, ACCEPT, ACCEPT)])
    assert bad_count.value.error == ErrorCode.INVALID_REQUEST
    assert sp.record(0).state == RecordState.ACQUIRED and sp.start_offset == 0
    sp.acknowledge("a", [ack(0, 0, ACCEPT)])
    with pytest.raises(SharePartitionError) as twice:
        sp.acknowledge("a", [ack(1, 1, ACCEPT), ack(1, 1, ACCEPT)])
    assert twice.value.error == ErrorCode.INVALID_RECORD_STATE and sp.record(1).state == RecordState.ACQUIRED
    sp.acknowledge("a", [ack(0, 0, ACCEPT)])  # below the start offset: done already


def test_expired_locks_release_and_the_delivery_count_limit_archives() -> None:
    sp = SharePartitionState(0, delivery_count_limit=3)
    for delivery in range(1, 4):
        assert sp.acquire("a", 0, 1, 10, delivery * 100, LOCK_MS) == [AcquiredRecords(0, 1, delivery)]
        assert sp.next_lock_deadline_ms() == delivery * 100 + LOCK_MS
        assert not sp.expire_locks(delivery * 100 + LOCK_MS - 1)
        assert sp.expire_locks(delivery * 100 + LOCK_MS)
    assert (sp.start_offset, sp.acquire("a", 0, 1, 10, 0, LOCK_MS)) == (2, [])


def test_a_member_that_leaves_releases_its_records() -> None:
    sp = SharePartitionState(0)
    sp.acquire("a", 0, 2, 10, 0, LOCK_MS)
    sp.acquire("b", 3, 4, 10, 0, LOCK_MS)
    assert sp.release_acquired_records("a") and not sp.release_acquired_records("c")
    assert [sp.record(o).state for o in range(5)] == [RecordState.AVAILABLE] * 3 + [RecordState.ACQUIRED] * 2


def test_record_locks_bound_what_is_in_flight() -> None:
    sp = SharePartitionState(0, max_record_locks=4)
    assert sp.acquire("a", 0, 9, 10, 0, LOCK_MS) == [AcquiredRecords(0, 3, 1)]
    assert not sp.can_acquire()
    sp.acknowledge("a", [ack(0, 1, ACCEPT)])
    assert sp.can_acquire()
    assert sp.acquire("a", 4, 9, 10, 0, LOCK_MS) == [AcquiredRecords(4, 5, 1)]


def test_persisted_state_round_trips_and_an_acquired_record_is_delivered_again() -> None:
    sp = SharePartitionState(10)
    sp.acquire("a", 10, 15, 10, 0, LOCK_MS)
    sp.acknowledge("a", [ack(11, 11, ACCEPT), ack(12, 12, REJECT), ack(13, 13, RELEASE)])
    batches = sp.state_batches()
    assert batches == (PersisterStateBatch(10, 10, RecordState.AVAILABLE, 0),
                       PersisterStateBatch(11, 11, RecordState.ACKNOWLEDGED, 1),
                       PersisterStateBatch(12, 12, RecordState.ARCHIVED, 1),
                       PersisterStateBatch(13, 13, RecordState.AVAILABLE, 1),
                       PersisterStateBatch(14, 15, RecordState.AVAILABLE, 0))
    loaded = SharePartitionState(sp.start_offset, batches)
    assert (loaded.start_offset, loaded.end_offset) == (10, 16)
    assert loaded.acquire("b", 10, 20, 100, 0, LOCK_MS) == [
        AcquiredRecords(10, 10, 1), AcquiredRecords(13, 13, 2), AcquiredRecords(14, 20, 1)]


def test_loaded_gaps_are_undelivered_and_the_log_start_offset_moves_the_start() -> None:
    sp = SharePartitionState(5, (PersisterStateBatch(5, 6, RecordState.ACKNOWLEDGED, 1),
                                 PersisterStateBatch(9, 9, RecordState.ARCHIVED, 5)))
    assert (sp.start_offset, sp.end_offset, sp.next_fetch_offset()) == (7, 10, 7)
    assert sp.acquire("a", 7, 12, 10, 0, LOCK_MS) == [AcquiredRecords(7, 8, 1), AcquiredRecords(10, 12, 1)]
    assert sp.update_log_start_offset(11)
    assert (sp.start_offset, sp.end_offset) == (11, 13)
    skipped = SharePartitionState(0)
    assert skipped.acquire("a", 3, 4, 10, 0, LOCK_MS) == [AcquiredRecords(3, 4, 1)]
    assert skipped.start_offset == 0 and skipped.record(0).state == RecordState.ARCHIVED


def test_archive_acquired_leaves_an_aborted_transaction_out() -> None:
    sp = SharePartitionState(0)
    acquired = sp.acquire("a", 0, 9, 10, 0, LOCK_MS)
    for first, last in ((2, 4), (8, 8)):
        sp.archive_acquired("a", first, last)
    assert without_ranges(acquired, ((2, 4), (8, 8))) == [AcquiredRecords(0, 1, 1), AcquiredRecords(5, 7, 1),
                                                           AcquiredRecords(9, 9, 1)]
    assert [sp.record(o).state for o in (1, 2, 4, 5, 8)] == [RecordState.ACQUIRED, RecordState.ARCHIVED,
                                                              RecordState.ARCHIVED, RecordState.ACQUIRED,
                                                              RecordState.ARCHIVED]
    sp.archive_acquired("b", 0, 1)  # not b's: nothing changes
    assert sp.record(0).state == RecordState.ACQUIRED
