"""The transaction coordinator's state machine (Kafka's TransactionState, TransactionMetadata, TxnTransitMetadata):
which transitions may be prepared from which state, what each one does to producer ids, epochs, partitions and
timestamps, and what completing them checks.

The scenarios drive the metadata as Kafka's TransactionCoordinator does: prepare, (log), complete."""
from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from minikafka.broker.coordinator.transaction.transaction_metadata import (
    MAX_PRODUCER_EPOCH,
    IllegalStateError,
    ProducerFencedError,
    TransactionMetadata,
    TransactionVersion,
    TxnTransitMetadata,
    is_epoch_exhausted,
)
from minikafka.broker.coordinator.transaction.transaction_state import TransactionState
from minikafka.protocol.coordinator_records import (
    PartitionsSchema,
    TransactionLogRecordError,
    TransactionLogValue,
    decode_value,
    encode_value,
)
from minikafka.protocol.errors import ErrorCode

EMPTY = TransactionState.EMPTY
ONGOING = TransactionState.ONGOING
PREPARE_COMMIT = TransactionState.PREPARE_COMMIT
PREPARE_ABORT = TransactionState.PREPARE_ABORT
COMPLETE_COMMIT = TransactionState.COMPLETE_COMMIT
COMPLETE_ABORT = TransactionState.COMPLETE_ABORT
DEAD = TransactionState.DEAD
PREPARE_EPOCH_FENCE = TransactionState.PREPARE_EPOCH_FENCE
ENDED = (EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT)

TV_0 = TransactionVersion.TV_0
TV_2 = TransactionVersion.TV_2

TXN_ID = "txn"
PRODUCER_ID = 1000
NEXT_PRODUCER_ID = 2000
TIMEOUT_MS = 60_000
NOW = 1_700_000_000_000
TP0 = ("orders", 0)
TP1 = ("orders", 1)
TP2 = ("payments", 0)


def new_transactional_id() -> TransactionMetadata:
    """What the coordinator creates for a transactional id it has not seen, before its first InitProducerId."""
    return TransactionMetadata(transactional_id=TXN_ID, producer_id=PRODUCER_ID, prev_producer_id=-1,
                               next_producer_id=-1, producer_epoch=-1, last_producer_epoch=-1,
                               txn_timeout_ms=TIMEOUT_MS, state=EMPTY, topic_partitions=set(),
                               txn_last_update_timestamp=NOW, client_transaction_version=TV_0)


def metadata_in(state: TransactionState, *, epoch: int = 5, last_epoch: int = -1,
                tv: TransactionVersion = TV_0) -> TransactionMetadata:
    """A transactional id in `state` as the coordinator would hold it: a transaction in flight has partitions and a
    start time, a completed one keeps its start time, an Empty one has neither."""
    in_flight = state in (ONGOING, PREPARE_COMMIT, PREPARE_ABORT, PREPARE_EPOCH_FENCE)
    return TransactionMetadata(transactional_id=TXN_ID, producer_id=PRODUCER_ID, prev_producer_id=-1,
                               next_producer_id=-1, producer_epoch=epoch, last_producer_epoch=last_epoch,
                               txn_timeout_ms=TIMEOUT_MS, state=state,
                               topic_partitions={TP0, TP1} if in_flight else set(),
                               txn_start_timestamp=-1 if state is EMPTY else NOW - 1000,
                               txn_last_update_timestamp=NOW - 500, client_transaction_version=tv)


def complete(txn: TransactionMetadata, transit: TxnTransitMetadata) -> TransactionMetadata:
    """The log append of `transit` succeeded."""
    txn.complete_transition_to(transit)
    assert txn.pending_state is None
    return txn


def fence_and_abort(txn: TransactionMetadata, now_ms: int, cluster_tv: TransactionVersion = TV_0
                    ) -> TxnTransitMetadata:
    """What Kafka's coordinator does with an ongoing transaction that timed out, or whose transactional id a new
    producer initialized: fence the producer, then (the fence never being logged by itself) clear the pending fence
    and abort, at the cluster's transaction version (the abort is the coordinator's, not a client's). At version 2
    the abort's own bump is the fence (one bump, KAFKA-19367); before it, the fenced epoch is put in place and the
    abort is written as version 0's."""
    fence = txn.prepare_fence_producer_epoch()
    assert txn.pending_state is PREPARE_EPOCH_FENCE
    txn.pending_state = None
    if not cluster_tv.supports_epoch_bump:
        txn.producer_epoch = fence.producer_epoch
        txn.last_producer_epoch = fence.last_producer_epoch
        cluster_tv = TV_0
    return txn.prepare_abort_or_commit(PREPARE_ABORT, cluster_tv, -1, now_ms, False)


# --- TransactionState ---------------------------------------------------------------------------------------------

def test_state_ids_and_names_are_kafkas() -> None:
    assert [(s.id, s.state_name) for s in TransactionState] == [
        (0, "Empty"), (1, "Ongoing"), (2, "PrepareCommit"), (3, "PrepareAbort"), (4, "CompleteCommit"),
        (5, "CompleteAbort"), (6, "Dead"), (7, "PrepareEpochFence"),
    ]
    for state in TransactionState:
        assert TransactionState.from_id(state.id) is state
        assert TransactionState.from_name(state.state_name) is state
    assert TransactionState.from_name("EMPTY") is None
    with pytest.raises(ValueError, match="unknown transaction state id 8"):
        TransactionState.from_id(8)


def test_valid_previous_states_are_kafkas() -> None:
    assert {s: s.valid_previous_states for s in TransactionState} == {
        EMPTY: {EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT},
        ONGOING: {ONGOING, EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT},
        PREPARE_COMMIT: {ONGOING},
        PREPARE_ABORT: {ONGOING, PREPARE_EPOCH_FENCE, EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT},
        COMPLETE_COMMIT: {PREPARE_COMMIT},
        COMPLETE_ABORT: {PREPARE_ABORT},
        DEAD: {EMPTY, COMPLETE_ABORT, COMPLETE_COMMIT},
        PREPARE_EPOCH_FENCE: {ONGOING},
    }


def test_only_states_without_a_transaction_in_flight_may_expire() -> None:
    assert {s for s in TransactionState if s.is_expiration_allowed} == {EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT}


def test_transaction_versions() -> None:
    assert [(tv.supports_epoch_bump, tv.transaction_log_value_version) for tv in TransactionVersion] == [
        (False, 0), (False, 1), (True, 1)]


# --- which transition may be prepared from which state ------------------------------------------------------------

PREPARES = {
    "add partitions": (lambda t: t.prepare_add_partitions({TP2}, NOW, TV_0), lambda s: ONGOING),
    "commit": (lambda t: t.prepare_abort_or_commit(PREPARE_COMMIT, TV_0, -1, NOW, False), lambda s: PREPARE_COMMIT),
    "abort": (lambda t: t.prepare_abort_or_commit(PREPARE_ABORT, TV_0, -1, NOW, False), lambda s: PREPARE_ABORT),
    "increment epoch": (lambda t: t.prepare_increment_producer_epoch(TIMEOUT_MS, None, NOW), lambda s: EMPTY),
    "rotate producer id": (lambda t: t.prepare_producer_id_rotation(NEXT_PRODUCER_ID, TIMEOUT_MS, NOW, False),
                           lambda s: EMPTY),
    "fence": (lambda t: t.prepare_fence_producer_epoch(), lambda s: PREPARE_EPOCH_FENCE),
    "complete": (lambda t: t.prepare_complete(NOW),
                 lambda s: COMPLETE_COMMIT if s is PREPARE_COMMIT else COMPLETE_ABORT),
    "dead": (lambda t: t.prepare_dead(), lambda s: DEAD),
}
# A fence and an expiry are never completed: the abort replaces the one, the cache drops the other.
NEVER_COMPLETED = {PREPARE_EPOCH_FENCE, DEAD}


@pytest.mark.parametrize("prepare", PREPARES)
@pytest.mark.parametrize("state", TransactionState)
def test_a_transition_is_legal_from_its_valid_previous_states(state: TransactionState, prepare: str) -> None:
    txn = metadata_in(state)
    do, target_of = PREPARES[prepare]
    target = target_of(state)
    if state not in target.valid_previous_states:
        with pytest.raises(IllegalStateError) as error:
            do(txn)
        assert error.value.code is ErrorCode.UNKNOWN_SERVER_ERROR
        assert txn.pending_state is None
        return
    transit = do(txn)
    assert transit.txn_state is target
    assert txn.pending_state is target
    assert txn.pending_transition_in_progress
    if target in NEVER_COMPLETED:
        with pytest.raises(IllegalStateError):
            txn.complete_transition_to(transit)
        assert txn.state is state
    else:
        assert complete(txn, transit).state is target
        assert txn.prepare_no_transit() == transit


def test_nothing_else_may_be_prepared_while_a_transition_is_pending() -> None:
    txn = metadata_in(ONGOING)
    txn.prepare_add_partitions({TP2}, NOW, TV_0)
    with pytest.raises(IllegalStateError, match="while one to Ongoing is pending"):
        txn.prepare_add_partitions({TP2}, NOW, TV_0)
    with pytest.raises(IllegalStateError, match="pending"):
        txn.prepare_abort_or_commit(PREPARE_COMMIT, TV_0, -1, NOW, False)


def test_prepare_no_transit_is_the_current_state_and_sets_nothing_pending() -> None:
    txn = metadata_in(ONGOING, last_epoch=4)
    transit = txn.prepare_no_transit()
    assert txn.pending_state is None
    assert (transit.producer_id, transit.prev_producer_id, transit.producer_epoch, transit.last_producer_epoch,
            transit.txn_state, transit.topic_partitions) == (PRODUCER_ID, -1, 5, 4, ONGOING, {TP0, TP1})


# --- InitProducerId: epoch bumps (KIP-360), exhaustion, producer id rotation --------------------------------------

def test_first_init_producer_id_gives_epoch_0() -> None:
    txn = new_transactional_id()
    transit = txn.prepare_increment_producer_epoch(30_000, None, NOW + 1)
    assert (transit.producer_id, transit.producer_epoch, transit.last_producer_epoch, transit.txn_timeout_ms,
            transit.txn_start_timestamp, transit.txn_last_update_timestamp) == (PRODUCER_ID, 0, -1, 30_000, -1, NOW + 1)
    complete(txn, transit)
    assert (txn.state, txn.producer_epoch, txn.txn_timeout_ms) == (EMPTY, 0, 30_000)


def test_a_new_producer_bumps_the_epoch_and_forgets_the_last() -> None:
    txn = metadata_in(COMPLETE_COMMIT, epoch=5, last_epoch=4)
    transit = txn.prepare_increment_producer_epoch(TIMEOUT_MS, None, NOW)
    assert (transit.producer_epoch, transit.last_producer_epoch) == (6, -1)
    assert (transit.topic_partitions, transit.txn_start_timestamp) == (frozenset(), -1)
    assert complete(txn, transit).producer_epoch == 6


def test_a_producer_expecting_the_current_epoch_bumps_it_and_keeps_it_as_the_last() -> None:
    txn = metadata_in(COMPLETE_ABORT, epoch=5, last_epoch=4)
    transit = txn.prepare_increment_producer_epoch(TIMEOUT_MS, 5, NOW)
    assert (transit.producer_epoch, transit.last_producer_epoch) == (6, 5)
    complete(txn, transit)
    # The producer did not get the answer and retries with the epoch it had: the bump is not done twice.
    retry = txn.prepare_increment_producer_epoch(TIMEOUT_MS, 5, NOW + 1)
    assert (retry.producer_epoch, retry.last_producer_epoch) == (6, 5)
    assert complete(txn, retry).producer_epoch == 6


def test_a_producer_with_no_epoch_yet_gets_epoch_0_whatever_it_expects() -> None:
    txn = new_transactional_id()
    transit = txn.prepare_increment_producer_epoch(TIMEOUT_MS, 17, NOW)
    assert (transit.producer_epoch, transit.last_producer_epoch) == (0, -1)


def test_a_producer_expecting_another_epoch_is_fenced() -> None:
    txn = metadata_in(EMPTY, epoch=5, last_epoch=3)
    with pytest.raises(ProducerFencedError) as error:
        txn.prepare_increment_producer_epoch(TIMEOUT_MS, 4, NOW)
    assert error.value.code is ErrorCode.PRODUCER_FENCED
    assert txn.pending_state is None


def test_epochs_are_exhausted_one_below_short_max() -> None:
    assert MAX_PRODUCER_EPOCH == 32767
    assert not is_epoch_exhausted(32765)
    assert is_epoch_exhausted(32766)
    assert is_epoch_exhausted(32767)
    txn = metadata_in(EMPTY, epoch=32765)
    assert not txn.is_producer_epoch_exhausted
    complete(txn, txn.prepare_increment_producer_epoch(TIMEOUT_MS, None, NOW))
    assert txn.producer_epoch == 32766
    assert txn.is_producer_epoch_exhausted
    with pytest.raises(IllegalStateError, match="no producer epoch left"):
        txn.prepare_increment_producer_epoch(TIMEOUT_MS, None, NOW)


@pytest.mark.parametrize("record_last_epoch, last_epoch", [(True, 32766), (False, -1)])
def test_an_exhausted_producer_id_is_rotated(record_last_epoch: bool, last_epoch: int) -> None:
    txn = metadata_in(COMPLETE_COMMIT, epoch=32766)
    transit = txn.prepare_producer_id_rotation(NEXT_PRODUCER_ID, 30_000, NOW, record_last_epoch)
    assert (transit.producer_id, transit.prev_producer_id, transit.producer_epoch, transit.last_producer_epoch,
            transit.txn_timeout_ms, transit.txn_state) == (NEXT_PRODUCER_ID, PRODUCER_ID, 0, last_epoch, 30_000, EMPTY)
    complete(txn, transit)  # epoch 0 of a new producer id is a valid bump
    assert (txn.producer_id, txn.prev_producer_id, txn.producer_epoch) == (NEXT_PRODUCER_ID, PRODUCER_ID, 0)


@pytest.mark.parametrize("state", [ONGOING, PREPARE_COMMIT, PREPARE_ABORT])
def test_no_rotation_while_a_transaction_is_in_flight(state: TransactionState) -> None:
    with pytest.raises(IllegalStateError, match="cannot rotate"):
        metadata_in(state).prepare_producer_id_rotation(NEXT_PRODUCER_ID, TIMEOUT_MS, NOW, False)


def test_a_negative_producer_id_is_illegal() -> None:
    with pytest.raises(IllegalStateError, match="illegal new producer id -5"):
        metadata_in(EMPTY).prepare_producer_id_rotation(-5, TIMEOUT_MS, NOW, False)


def test_dead_may_keep_a_transactional_id_without_an_epoch() -> None:
    txn = new_transactional_id()
    assert txn.prepare_dead().producer_epoch == -1
    with pytest.raises(IllegalStateError, match="illegal new producer epoch -1"):
        new_transactional_id().prepare_add_partitions({TP0}, NOW, TV_0)


# --- a transaction: add partitions, commit or abort, complete -----------------------------------------------------

def test_adding_partitions_starts_the_transaction_once() -> None:
    txn = metadata_in(EMPTY, epoch=0)
    first = txn.prepare_add_partitions({TP0}, NOW, TV_0)
    assert (first.txn_state, first.topic_partitions, first.txn_start_timestamp) == (ONGOING, {TP0}, NOW)
    complete(txn, first)
    more = txn.prepare_add_partitions([TP1, TP0], NOW + 10, TV_0)
    assert (more.topic_partitions, more.txn_start_timestamp, more.txn_last_update_timestamp) == (
        {TP0, TP1}, NOW, NOW + 10)
    complete(txn, more)
    assert (txn.state, txn.topic_partitions, txn.txn_start_timestamp) == (ONGOING, {TP0, TP1}, NOW)


@pytest.mark.parametrize("result, prepared, completed", [
    ("commit", PREPARE_COMMIT, COMPLETE_COMMIT),
    ("abort", PREPARE_ABORT, COMPLETE_ABORT),
])
def test_a_transaction_version_0_transaction_keeps_its_epoch(result: str, prepared: TransactionState,
                                                             completed: TransactionState) -> None:
    txn = metadata_in(EMPTY, epoch=3, last_epoch=2)
    complete(txn, txn.prepare_add_partitions({TP0, TP2}, NOW, TV_0))
    end = txn.prepare_abort_or_commit(prepared, TV_0, -1, NOW + 5, False)
    assert (end.producer_epoch, end.last_producer_epoch, end.txn_start_timestamp, end.topic_partitions) == (
        3, 2, NOW, {TP0, TP2})
    complete(txn, end)
    # The markers go out; each partition done is forgotten.
    txn.remove_partition(TP0)
    assert txn.topic_partitions == {TP2}
    done = txn.prepare_complete(NOW + 9)
    assert (done.txn_state, done.producer_id, done.producer_epoch, done.topic_partitions,
            done.txn_start_timestamp, done.txn_last_update_timestamp) == (completed, PRODUCER_ID, 3, frozenset(),
                                                                          NOW, NOW + 9)
    complete(txn, done)
    assert (txn.state, txn.producer_epoch, txn.topic_partitions) == (completed, 3, set())
    # The next transaction starts afresh.
    again = txn.prepare_add_partitions({TP1}, NOW + 20, TV_0)
    assert (again.topic_partitions, again.txn_start_timestamp) == ({TP1}, NOW + 20)


def test_partitions_are_removed_only_while_markers_are_written() -> None:
    with pytest.raises(IllegalStateError, match="no transaction markers"):
        metadata_in(ONGOING).remove_partition(TP0)


@pytest.mark.parametrize("prepared, completed", [(PREPARE_COMMIT, COMPLETE_COMMIT), (PREPARE_ABORT, COMPLETE_ABORT)])
def test_transaction_version_2_bumps_the_epoch_at_every_end(prepared: TransactionState,
                                                           completed: TransactionState) -> None:
    txn = metadata_in(ONGOING, epoch=5, last_epoch=4, tv=TV_2)
    end = txn.prepare_abort_or_commit(prepared, TV_2, -1, NOW, False)
    assert (end.producer_epoch, end.last_producer_epoch, end.next_producer_id) == (6, 5, -1)
    complete(txn, end)
    assert (txn.producer_epoch, txn.last_producer_epoch) == (6, 5)
    done = txn.prepare_complete(NOW + 1)
    assert (done.producer_id, done.producer_epoch, done.last_producer_epoch) == (PRODUCER_ID, 6, 5)
    complete(txn, done)
    assert (txn.state, txn.producer_id, txn.producer_epoch, txn.client_transaction_version) == (
        completed, PRODUCER_ID, 6, TV_2)


def test_transaction_version_2_moves_to_the_next_producer_id_when_the_end_exhausts_the_epochs() -> None:
    txn = metadata_in(ONGOING, epoch=32766, last_epoch=32765, tv=TV_2)
    assert txn.is_producer_epoch_exhausted  # so the coordinator allocates the next producer id with the EndTxn
    end = txn.prepare_abort_or_commit(PREPARE_COMMIT, TV_2, NEXT_PRODUCER_ID, NOW, False)
    assert (end.producer_id, end.producer_epoch, end.last_producer_epoch, end.next_producer_id) == (
        PRODUCER_ID, 32767, 32766, NEXT_PRODUCER_ID)
    complete(txn, end)
    done = txn.prepare_complete(NOW + 1)
    # The client saw 32766 last; the new producer id starts at 0.
    assert (done.producer_id, done.prev_producer_id, done.next_producer_id, done.producer_epoch,
            done.last_producer_epoch) == (NEXT_PRODUCER_ID, PRODUCER_ID, -1, 0, 32766)
    complete(txn, done)
    assert (txn.state, txn.producer_id, txn.prev_producer_id, txn.producer_epoch, txn.last_producer_epoch) == (
        COMPLETE_COMMIT, NEXT_PRODUCER_ID, PRODUCER_ID, 0, 32766)


def test_transaction_version_2_cannot_bump_past_short_max() -> None:
    txn = metadata_in(ONGOING, epoch=32767, tv=TV_2)
    # As Kafka's short arithmetic: 32767 + 1 is -32768, an illegal epoch.
    with pytest.raises(IllegalStateError, match="illegal new producer epoch -32768"):
        txn.prepare_abort_or_commit(PREPARE_ABORT, TV_2, -1, NOW, False)


@pytest.mark.parametrize("state", ENDED)
def test_transaction_version_2_may_abort_an_empty_transaction(state: TransactionState) -> None:
    txn = metadata_in(state, epoch=5, tv=TV_2)
    abort = txn.prepare_abort_or_commit(PREPARE_ABORT, TV_2, -1, NOW, True)
    assert (abort.txn_start_timestamp, abort.producer_epoch, abort.topic_partitions) == (NOW, 6, frozenset())
    complete(txn, abort)
    complete(txn, txn.prepare_complete(NOW + 1))
    assert (txn.state, txn.producer_epoch, txn.txn_start_timestamp) == (COMPLETE_ABORT, 6, NOW)


def test_before_transaction_version_2_an_empty_abort_does_not_complete() -> None:
    txn = metadata_in(EMPTY, epoch=5)
    abort = txn.prepare_abort_or_commit(PREPARE_ABORT, TV_0, -1, NOW, True)
    with pytest.raises(IllegalStateError, match="cannot complete the transition"):
        txn.complete_transition_to(abort)  # its start time is not the transaction's


# --- fencing: InitProducerId of a new producer, and the timeout abort ---------------------------------------------

def test_a_fence_bumps_the_epoch_and_forgets_the_last() -> None:
    txn = metadata_in(ONGOING, epoch=5, last_epoch=4)
    fence = txn.prepare_fence_producer_epoch()
    assert (fence.txn_state, fence.producer_epoch, fence.last_producer_epoch, fence.topic_partitions) == (
        PREPARE_EPOCH_FENCE, 6, -1, {TP0, TP1})
    with pytest.raises(IllegalStateError, match="cannot complete the transition"):
        txn.complete_transition_to(fence)


def test_a_fence_after_a_failed_fence_does_not_bump_again() -> None:
    txn = metadata_in(ONGOING, epoch=6)
    txn.has_failed_epoch_fence = True
    assert txn.prepare_fence_producer_epoch().producer_epoch == 6


def test_no_fence_at_short_max() -> None:
    with pytest.raises(IllegalStateError, match="would overflow"):
        metadata_in(ONGOING, epoch=MAX_PRODUCER_EPOCH).prepare_fence_producer_epoch()


def test_init_producer_id_during_a_transaction_fences_aborts_then_bumps() -> None:
    txn = metadata_in(ONGOING, epoch=5, last_epoch=4)
    abort = fence_and_abort(txn, NOW)
    assert (abort.txn_state, abort.producer_epoch, abort.last_producer_epoch) == (PREPARE_ABORT, 6, -1)
    complete(txn, abort)
    # The old producer, still at epoch 5, is fenced from here on; the new one was told CONCURRENT_TRANSACTIONS.
    complete(txn, txn.prepare_complete(NOW + 1))
    assert (txn.state, txn.producer_epoch) == (COMPLETE_ABORT, 6)
    # Its retry finds the transaction aborted and bumps once more.
    complete(txn, txn.prepare_increment_producer_epoch(TIMEOUT_MS, None, NOW + 2))
    assert (txn.state, txn.producer_epoch, txn.last_producer_epoch) == (EMPTY, 7, -1)


@pytest.mark.parametrize("tv", [TV_0, TV_2])
def test_a_timed_out_transaction_is_aborted_with_one_bump_at_transaction_version_2(tv: TransactionVersion) -> None:
    txn = metadata_in(ONGOING, epoch=5, last_epoch=4, tv=tv)  # whichever version the client spoke
    abort = fence_and_abort(txn, NOW, TV_2)
    assert (abort.producer_epoch, abort.last_producer_epoch, abort.topic_partitions) == (6, 5, {TP0, TP1})
    complete(txn, abort)
    complete(txn, txn.prepare_complete(NOW + 1))
    assert (txn.state, txn.producer_id, txn.producer_epoch, txn.last_producer_epoch) == (
        COMPLETE_ABORT, PRODUCER_ID, 6, 5)
    # KIP-360: the fenced producer recovering with the epoch it had is recognised (its last epoch): no new bump.
    complete(txn, txn.prepare_increment_producer_epoch(TIMEOUT_MS, 5, NOW + 2))
    assert (txn.state, txn.producer_epoch, txn.last_producer_epoch) == (EMPTY, 6, 5)


def test_a_transaction_version_2_timeout_at_the_last_producer_epoch_leads_to_a_new_producer_id() -> None:
    txn = metadata_in(ONGOING, epoch=MAX_PRODUCER_EPOCH - 1, tv=TV_2)
    complete(txn, fence_and_abort(txn, NOW, TV_2))  # one bump: no epoch overflows
    complete(txn, txn.prepare_complete(NOW + 1))
    assert (txn.state, txn.producer_epoch) == (COMPLETE_ABORT, MAX_PRODUCER_EPOCH)
    complete(txn, txn.prepare_producer_id_rotation(NEXT_PRODUCER_ID, TIMEOUT_MS, NOW + 2, False))
    assert (txn.producer_id, txn.producer_epoch, txn.state) == (NEXT_PRODUCER_ID, 0, EMPTY)


def test_a_timeout_at_the_last_epoch_leads_to_a_new_producer_id() -> None:
    txn = metadata_in(ONGOING, epoch=32766)
    complete(txn, fence_and_abort(txn, NOW))
    assert txn.producer_epoch == MAX_PRODUCER_EPOCH  # the fence's epoch, which no producer ever gets
    complete(txn, txn.prepare_complete(NOW + 1))
    assert txn.is_producer_epoch_exhausted
    complete(txn, txn.prepare_producer_id_rotation(NEXT_PRODUCER_ID, TIMEOUT_MS, NOW + 2, False))
    assert (txn.producer_id, txn.producer_epoch, txn.state) == (NEXT_PRODUCER_ID, 0, EMPTY)


def test_completion_clears_a_failed_fence() -> None:
    txn = metadata_in(ONGOING, epoch=6)
    txn.has_failed_epoch_fence = True
    complete(txn, fence_and_abort(txn, NOW))
    assert txn.producer_epoch == 6
    txn.prepare_complete(NOW + 1)
    assert not txn.has_failed_epoch_fence


# --- what completing a transition checks --------------------------------------------------------------------------

def test_completing_needs_a_pending_transition() -> None:
    txn = metadata_in(ONGOING)
    with pytest.raises(IllegalStateError, match="without one pending"):
        txn.complete_transition_to(txn.prepare_no_transit())


def test_completing_another_transition_than_the_pending_one_fails() -> None:
    txn = metadata_in(ONGOING)
    other = metadata_in(ONGOING).prepare_abort_or_commit(PREPARE_COMMIT, TV_0, -1, NOW, False)
    txn.prepare_add_partitions({TP2}, NOW, TV_0)
    with pytest.raises(IllegalStateError, match="cannot complete the transition"):
        txn.complete_transition_to(other)
    assert (txn.state, txn.pending_state) == (ONGOING, ONGOING)


def test_a_dead_transactional_id_is_never_completed() -> None:
    txn = metadata_in(COMPLETE_COMMIT)
    with pytest.raises(IllegalStateError, match="never becomes Dead"):
        txn.complete_transition_to(txn.prepare_dead())


@pytest.mark.parametrize("state, prepare, changes", [
    pytest.param(EMPTY, "increment epoch", {"producer_epoch": 7}, id="epoch bumped by 2"),
    pytest.param(EMPTY, "increment epoch", {"topic_partitions": frozenset({TP0})}, id="Empty with partitions"),
    pytest.param(EMPTY, "increment epoch", {"txn_start_timestamp": NOW}, id="Empty with a start time"),
    pytest.param(ONGOING, "add partitions", {"topic_partitions": frozenset({TP2})}, id="partitions dropped"),
    pytest.param(ONGOING, "add partitions", {"txn_timeout_ms": 1}, id="Ongoing with another timeout"),
    pytest.param(ONGOING, "add partitions", {"producer_epoch": 6}, id="Ongoing with another epoch"),
    pytest.param(ONGOING, "commit", {"topic_partitions": frozenset({TP0})}, id="commit of other partitions"),
    pytest.param(ONGOING, "commit", {"txn_start_timestamp": NOW}, id="commit with another start time"),
    pytest.param(ONGOING, "abort", {"producer_id": 7}, id="abort of another producer id"),
    pytest.param(PREPARE_COMMIT, "complete", {"txn_start_timestamp": -1}, id="complete without a start time"),
    pytest.param(PREPARE_ABORT, "complete", {"producer_epoch": 4}, id="complete with another epoch"),
])
def test_completing_checks_the_transit_against_the_current_state(state: TransactionState, prepare: str,
                                                                 changes: dict[str, Any]) -> None:
    txn = metadata_in(state)
    transit = replace(PREPARES[prepare][0](txn), **changes)
    with pytest.raises(IllegalStateError, match="cannot complete the transition"):
        txn.complete_transition_to(transit)
    assert txn.state is state


# --- the transaction log value of a transition, and the metadata loaded from it -----------------------------------

def test_a_transit_logs_as_kafka_writes_it() -> None:
    txn = metadata_in(ONGOING, epoch=5, tv=TV_2)
    transit = txn.prepare_add_partitions({TP2}, NOW, TV_2)
    assert transit.to_log_value() == TransactionLogValue(
        producer_id=PRODUCER_ID,
        producer_epoch=5,
        transaction_timeout_ms=TIMEOUT_MS,
        transaction_status=1,
        transaction_partitions=(PartitionsSchema("orders", (0, 1)), PartitionsSchema("payments", (0,))),
        transaction_last_update_timestamp_ms=NOW,
        transaction_start_timestamp_ms=NOW - 1000,
        client_transaction_version=2,
    )


def test_an_empty_transit_logs_null_partitions_and_never_has_any() -> None:
    txn = metadata_in(COMPLETE_COMMIT)
    transit = txn.prepare_increment_producer_epoch(TIMEOUT_MS, None, NOW)
    assert transit.to_log_value().transaction_partitions is None
    with pytest.raises(IllegalStateError, match="no partitions"):
        replace(transit, topic_partitions=frozenset({TP0})).to_log_value()


def test_a_loaded_transaction_has_no_last_epoch_and_an_empty_one_no_partitions() -> None:
    value = TransactionLogValue(producer_id=PRODUCER_ID, producer_epoch=3, transaction_timeout_ms=TIMEOUT_MS,
                                transaction_status=0, transaction_partitions=(PartitionsSchema("orders", (0,)),),
                                transaction_last_update_timestamp_ms=NOW, transaction_start_timestamp_ms=-1)
    txn = TransactionMetadata.from_log_value(TXN_ID, value)
    assert (txn.state, txn.topic_partitions, txn.last_producer_epoch, txn.pending_state) == (EMPTY, set(), -1, None)


@pytest.mark.parametrize("changes, message", [
    ({"transaction_status": 9}, "unknown transaction state id 9"),
    ({"client_transaction_version": 3}, "3 is not a valid TransactionVersion"),
    ({"transaction_partitions": None}, "Ongoing has null partitions"),
])
def test_a_value_no_transaction_has_is_refused(changes: dict[str, Any], message: str) -> None:
    value = replace(metadata_in(ONGOING).prepare_no_transit().to_log_value(), **changes)
    with pytest.raises(TransactionLogRecordError, match=message):
        TransactionMetadata.from_log_value(TXN_ID, value)


_PARTITIONS = st.frozensets(st.tuples(st.sampled_from(["a", "b", "topic"]), st.integers(0, 50)), max_size=6)


@given(state=st.sampled_from([s for s in TransactionState if s is not EMPTY]), partitions=_PARTITIONS,
       epoch=st.integers(0, MAX_PRODUCER_EPOCH), tv=st.sampled_from(TransactionVersion),
       start=st.integers(-1, 2**62), update=st.integers(0, 2**62))
def test_a_transit_survives_the_log(state: TransactionState, partitions: frozenset[tuple[str, int]], epoch: int,
                                    tv: TransactionVersion, start: int, update: int) -> None:
    transit = TxnTransitMetadata(producer_id=PRODUCER_ID, prev_producer_id=-1, next_producer_id=-1,
                                 producer_epoch=epoch, last_producer_epoch=-1, txn_timeout_ms=TIMEOUT_MS,
                                 txn_state=state, topic_partitions=partitions, txn_start_timestamp=start,
                                 txn_last_update_timestamp=update, client_transaction_version=tv)
    value = decode_value(encode_value(transit.to_log_value(), tv.transaction_log_value_version))
    assert value is not None
    loaded = TransactionMetadata.from_log_value(TXN_ID, value).prepare_no_transit()
    # Version 0, written below transaction version 1, has no room for the client's transaction version.
    expected = transit if tv.transaction_log_value_version else replace(transit, client_transaction_version=TV_0)
    assert loaded == expected
