"""ProducerStateManager: duplicates, sequence gaps, epochs, as Kafka's ProducerAppendInfo."""

from __future__ import annotations

import pytest

from minikafka.protocol.record_batch import BatchHeader
from minikafka.storage.errors import InvalidProducerEpochError, OutOfOrderSequenceError
from minikafka.storage.producer_state import ProducerStateManager

PID = 1000


def header(seq: int, count: int = 1, *, epoch: int = 0, offset: int = 0, pid: int = PID,
           control: bool = False) -> BatchHeader:
    return BatchHeader(
        base_offset=offset,
        batch_length=100,
        partition_leader_epoch=0,
        magic=2,
        crc=0,
        attributes=0x20 if control else 0,
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


def test_sequences_must_follow_and_duplicates_return_original() -> None:
    state = ProducerStateManager()
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


def test_only_last_five_batches_are_remembered() -> None:
    state = ProducerStateManager()
    for i in range(7):
        appended(state, header(i, 1, offset=i))
    assert state.check_client_batches([header(2, 1)]).last_offset == 2  # type: ignore[union-attr]
    with pytest.raises(OutOfOrderSequenceError):
        state.check_client_batches([header(1, 1)])
    assert len(state.last_entries()[PID].batches) == 5


def test_epochs() -> None:
    state = ProducerStateManager()
    appended(state, header(0, 2, epoch=1))
    with pytest.raises(InvalidProducerEpochError):
        state.check_client_batches([header(2, 1, epoch=0)])
    with pytest.raises(OutOfOrderSequenceError):
        state.check_client_batches([header(5, 1, epoch=2)])  # new epoch must restart at 0
    appended(state, header(0, 1, epoch=2, offset=2))
    assert state.last_entry(PID).producer_epoch == 2  # type: ignore[union-attr]
    with pytest.raises(InvalidProducerEpochError):  # a retry from the fenced epoch is not a duplicate
        state.check_client_batches([header(0, 2, epoch=1)])


def test_unknown_producer_may_start_anywhere_like_kafka() -> None:
    state = ProducerStateManager()
    assert state.check_client_batches([header(42, 1, pid=7)]) is None


def test_sequence_wraps_around_int32() -> None:
    state = ProducerStateManager()
    state.update(header(2**31 - 1, 1))
    appended(state, header(0, 1, offset=1))
    with pytest.raises(OutOfOrderSequenceError):
        state.check_client_batches([header(5, 1)])


def test_several_batches_of_one_producer_in_one_request() -> None:
    state = ProducerStateManager()
    assert state.check_client_batches([header(0, 2), header(2, 3), header(0, 1, pid=5)]) is None
    with pytest.raises(OutOfOrderSequenceError):
        state.check_client_batches([header(0, 2), header(3, 3)])


def test_control_batch_bumps_epoch_and_clears_batches() -> None:
    state = ProducerStateManager()
    appended(state, header(0, 2))
    state.update(header(-1, 1, epoch=1, offset=2, control=True))
    entry = state.last_entry(PID)
    assert entry is not None and entry.producer_epoch == 1 and not entry.batches
    with pytest.raises(OutOfOrderSequenceError):
        state.check_client_batches([header(17, 1, epoch=1)])
    appended(state, header(0, 1, epoch=1, offset=3))


def test_expiration_and_clear() -> None:
    state = ProducerStateManager()
    state.update(header(0, 1, offset=0))  # max timestamp 10
    state.update(header(0, 1, offset=100, pid=2))  # max timestamp 110
    state.remove_expired(now_ms=105, expiration_ms=50)
    assert set(state.last_entries()) == {2}
    state.clear()
    assert state.last_entries() == {}
    state.update(header(0, 1)._replace(producer_id=-1))
    assert state.last_entries() == {}
