"""ProducerStateManager: duplicates, sequence gaps, epochs, as Kafka's ProducerAppendInfo."""

from __future__ import annotations

from pathlib import Path

import pytest

from minikafka.protocol.end_transaction_marker import ControlRecordType, EndTransactionMarker
from minikafka.protocol.record_batch import BatchHeader
from minikafka.storage.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from minikafka.storage.producer_state import CompletedTxn, ProducerStateManager

PID = 1000


@pytest.fixture
def state(tmp_path: Path) -> ProducerStateManager:
    return ProducerStateManager(tmp_path)


ABORT = EndTransactionMarker(ControlRecordType.ABORT, 0)
COMMIT = EndTransactionMarker(ControlRecordType.COMMIT, 0)


def header(seq: int, count: int = 1, *, epoch: int = 0, offset: int = 0, pid: int = PID,
           control: bool = False, transactional: bool = False) -> BatchHeader:
    return BatchHeader(
        base_offset=offset,
        batch_length=100,
        partition_leader_epoch=0,
        magic=2,
        crc=0,
        attributes=(0x30 if control else 0) | (0x10 if transactional else 0),
        last_offset_delta=count - 1,
        base_timestamp=1,
        max_timestamp=offset + 10,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        records_count=count,
    )


def appended(state: ProducerStateManager, h: BatchHeader) -> None:
    assert state.check_client_batches([h]) is None
    state.update(h)


def test_sequences_must_follow_and_duplicates_return_original(state: ProducerStateManager) -> None:
    appended(state, header(0, 3, offset=0))
    appended(state, header(3, 2, offset=3))
    duplicate = state.check_client_batches([header(0, 3)])
    assert duplicate is not None and (duplicate.first_offset, duplicate.last_offset) == (0, 2)
    assert state.check_client_batches([header(3, 2)]).first_offset == 3  # type: ignore[union-attr]
    with pytest.raises(OutOfOrderSequenceError):
        state.check_client_batches([header(6, 1)])  # gap: 5 expected
    with pytest.raises(OutOfOrderSequenceError):
        state.check_client_batches([header(1, 3)])  # overlaps, not a cached batch
    appended(state, header(5, 1, offset=5))
    entry = state.last_entry(PID)
    assert entry is not None and entry.last_seq == 5 and entry.producer_epoch == 0


def test_only_last_five_batches_are_remembered(state: ProducerStateManager) -> None:
    for i in range(7):
        appended(state, header(i, 1, offset=i))
    assert state.check_client_batches([header(2, 1)]).last_offset == 2  # type: ignore[union-attr]
    with pytest.raises(OutOfOrderSequenceError):
        state.check_client_batches([header(1, 1)])
    assert len(state.last_entries()[PID].batches) == 5


def test_epochs(state: ProducerStateManager) -> None:
    appended(state, header(0, 2, epoch=1))
    with pytest.raises(InvalidProducerEpochError):
        state.check_client_batches([header(2, 1, epoch=0)])
    with pytest.raises(OutOfOrderSequenceError):
        state.check_client_batches([header(5, 1, epoch=2)])  # new epoch must restart at 0
    appended(state, header(0, 1, epoch=2, offset=2))
    assert state.last_entry(PID).producer_epoch == 2  # type: ignore[union-attr]
    with pytest.raises(InvalidProducerEpochError):  # a retry from the fenced epoch is not a duplicate
        state.check_client_batches([header(0, 2, epoch=1)])


def test_unknown_producer_may_start_anywhere_like_kafka(state: ProducerStateManager) -> None:
    assert state.check_client_batches([header(42, 1, pid=7)]) is None


def test_sequence_wraps_around_int32(state: ProducerStateManager) -> None:
    state.update(header(2**31 - 1, 1))
    appended(state, header(0, 1, offset=1))
    with pytest.raises(OutOfOrderSequenceError):
        state.check_client_batches([header(5, 1)])


def test_several_batches_of_one_producer_in_one_request(state: ProducerStateManager) -> None:
    assert state.check_client_batches([header(0, 2), header(2, 3), header(0, 1, pid=5)]) is None
    with pytest.raises(OutOfOrderSequenceError):
        state.check_client_batches([header(0, 2), header(3, 3)])


def test_control_batch_bumps_epoch_and_clears_batches(state: ProducerStateManager) -> None:
    appended(state, header(0, 2))
    state.update(header(-1, 1, epoch=1, offset=2, control=True), ABORT)
    entry = state.last_entry(PID)
    assert entry is not None and entry.producer_epoch == 1 and not entry.batches
    with pytest.raises(OutOfOrderSequenceError):
        state.check_client_batches([header(17, 1, epoch=1)])
    appended(state, header(0, 1, epoch=1, offset=3))


def test_expiration_and_truncate_fully(state: ProducerStateManager) -> None:
    state.update(header(0, 1, offset=0))  # max timestamp 10
    state.update(header(0, 1, offset=100, pid=2))  # max timestamp 110
    state.remove_expired(now_ms=105, expiration_ms=50)
    assert set(state.last_entries()) == {2}
    state.truncate_fully_and_start_at(0)
    assert state.last_entries() == {}
    state.update(header(0, 1)._replace(producer_id=-1))
    assert state.last_entries() == {}


def test_transactional_batch_opens_and_marker_closes_the_transaction(state: ProducerStateManager) -> None:
    appended(state, header(0, 2, offset=5, transactional=True))
    appended(state, header(2, 1, offset=9, transactional=True))
    assert state.first_unstable_offset() == 5
    assert [(t.producer_id, t.first_offset) for t in state.ongoing_transactions()] == [(PID, 5)]
    completed = state.update(header(-1, 1, offset=10, control=True), ABORT)
    assert completed == CompletedTxn(PID, 5, 10, is_aborted=True)
    assert state.last_stable_offset(completed) == 11
    state.complete_txn(completed)
    assert state.ongoing_transactions() == []
    assert state.first_unstable_offset() == 5  # closed, but the marker is not below the high watermark yet
    state.on_high_watermark_updated(10)
    assert state.first_unstable_offset() == 5
    state.on_high_watermark_updated(11)
    assert state.first_unstable_offset() is None


def test_last_stable_offset_of_a_closed_transaction_is_the_next_open_one(state: ProducerStateManager) -> None:
    appended(state, header(0, 1, offset=0, transactional=True))
    appended(state, header(0, 1, offset=1, pid=7, transactional=True))
    completed = state.update(header(-1, 1, offset=2, control=True), COMMIT)
    assert completed is not None and not completed.is_aborted
    assert state.last_stable_offset(completed) == 1
    state.complete_txn(completed)
    state.on_high_watermark_updated(3)
    assert state.first_unstable_offset() == 1


def test_marker_without_data_closes_nothing(state: ProducerStateManager) -> None:
    assert state.update(header(-1, 1, epoch=2, offset=0, control=True), COMMIT) is None
    entry = state.last_entry(PID)
    assert entry is not None and entry.producer_epoch == 2 and entry.coordinator_epoch == 0
    assert state.first_unstable_offset() is None


def test_non_transactional_write_inside_an_open_transaction_is_refused(state: ProducerStateManager) -> None:
    appended(state, header(0, 1, transactional=True))
    with pytest.raises(InvalidTxnStateError):
        state.check_client_batches([header(1, 1, offset=1)])
    with pytest.raises(InvalidTxnStateError):
        state.check_client_batches([header(5, 1, pid=9, transactional=True), header(6, 1, pid=9)])


def test_markers_from_older_producer_or_coordinator_epochs_are_fenced(state: ProducerStateManager) -> None:
    appended(state, header(0, 1, epoch=3, transactional=True))
    with pytest.raises(InvalidProducerEpochError):
        state.check_end_txn_marker(PID, 2, COMMIT)
    state.check_end_txn_marker(PID, 3, EndTransactionMarker(ControlRecordType.COMMIT, 4))
    state.update(header(-1, 1, epoch=3, offset=1, control=True), EndTransactionMarker(ControlRecordType.COMMIT, 4))
    with pytest.raises(TransactionCoordinatorFencedError):
        state.check_end_txn_marker(PID, 3, EndTransactionMarker(ControlRecordType.ABORT, 3))
    state.check_end_txn_marker(12345, 0, ABORT)  # a producer this partition has not seen


def test_a_producer_with_an_open_transaction_does_not_expire(state: ProducerStateManager) -> None:
    appended(state, header(0, 1, offset=0, transactional=True))
    appended(state, header(0, 1, offset=1, pid=7))
    state.remove_expired(now_ms=10**12, expiration_ms=1)
    assert state.last_entry(PID) is not None and state.last_entry(7) is None
