"""The cluster tests' checkpoint rule holds what Kafka guarantees of a leader-epoch-checkpoint, and no more."""
import pytest

from minikafka.storage.checkpoint import EpochEntry
from tests.cluster.replication_checks import ReplicaLog, StoredBatch, assert_well_formed, written_epochs

BATCHES = [StoredBatch(0, 4, 0, 1, -1, -1), StoredBatch(5, 9, 2, 2, -1, -1)]


def test_a_leader_may_end_its_checkpoint_with_an_epoch_it_has_not_written_yet() -> None:
    # Elected at epoch 3 with its log end at 10 (maybeAssignEpochStartOffset), before any batch of epoch 3.
    log = ReplicaLog(1, BATCHES, [EpochEntry(0, 0), EpochEntry(2, 5), EpochEntry(3, 10)])
    assert_well_formed(log, "t-0")
    assert written_epochs(log) == [EpochEntry(0, 0), EpochEntry(2, 5)]


@pytest.mark.parametrize("epochs", [
    [EpochEntry(0, 0), EpochEntry(1, 5), EpochEntry(2, 5)],  # an empty epoch between two written ones
    [EpochEntry(0, 0), EpochEntry(2, 5), EpochEntry(3, 8)],  # an epoch that starts inside a batch
    [EpochEntry(0, 0), EpochEntry(2, 5), EpochEntry(1, 10)],  # an epoch going back
    [EpochEntry(0, 0)],  # an epoch the batches show is missing
])
def test_any_other_difference_from_the_batches_fails(epochs: list[EpochEntry]) -> None:
    with pytest.raises(AssertionError):
        assert_well_formed(ReplicaLog(1, BATCHES, epochs), "t-0")
