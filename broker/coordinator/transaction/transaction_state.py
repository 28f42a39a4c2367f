"""The states of a transactional id's transaction (Kafka's TransactionState).

Each state has the id the transaction log stores, the name DescribeTransactions and ListTransactions answer with
(and ListTransactions filters by), the states it may be entered from, and whether a transactional id resting in it
may expire. The coordinator moves a transaction through them:

    Empty --add partitions--> Ongoing --EndTxn(commit)--> PrepareCommit --markers written--> CompleteCommit
                                      --EndTxn(abort)---> PrepareAbort  --markers written--> CompleteAbort
    Ongoing --timeout, or InitProducerId of a new producer--> PrepareEpochFence --> PrepareAbort
        (PrepareEpochFence is only ever pending: the abort replaces it before anything is logged)
    Empty, CompleteCommit, CompleteAbort --expired--> Dead (a tombstone; the id leaves the cache)

With transaction version 2 (KIP-890) a client may also abort with nothing in its transaction, so PrepareAbort may
follow Empty, CompleteCommit and CompleteAbort.
"""
from __future__ import annotations

from enum import Enum


class TransactionState(Enum):
    """A transaction's state; the member's value is its id in the transaction log."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def id(self) -> int:
        """The state's id in a transaction log value's TransactionStatus."""
        state_id: int = self.value
        return state_id

    @property
    def state_name(self) -> str:
        """The state's name on the wire: what DescribeTransactions and ListTransactions say."""
        return _STATE_NAMES[self]

    @property
    def valid_previous_states(self) -> frozenset[TransactionState]:
        """The states a transaction may move to this one from; any other move is a coordinator bug."""
        return _VALID_PREVIOUS_STATES[self]

    @property
    def is_expiration_allowed(self) -> bool:
        """True where no transaction is in flight, so the transactional id may expire after
        transactional.id.expiration.ms without an update."""
        return self in _EXPIRATION_ALLOWED

    @classmethod
    def from_id(cls, state_id: int) -> TransactionState:
        """The state a transaction log value's TransactionStatus names; ValueError for an unknown id."""
        try:
            return cls(state_id)
        except ValueError:
            raise ValueError(f"unknown transaction state id {state_id}") from None

    @classmethod
    def from_name(cls, name: str) -> TransactionState | None:
        """The state of a wire name (a ListTransactions state filter); None for a name no state has."""
        return _STATES_BY_NAME.get(name)


_STATE_NAMES = {
    TransactionState.EMPTY: "Empty",
    TransactionState.ONGOING: "Ongoing",
    TransactionState.PREPARE_COMMIT: "PrepareCommit",
    TransactionState.PREPARE_ABORT: "PrepareAbort",
    TransactionState.COMPLETE_COMMIT: "CompleteCommit",
    TransactionState.COMPLETE_ABORT: "CompleteAbort",
    TransactionState.DEAD: "Dead",
    TransactionState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_STATES_BY_NAME = {name: state for state, name in _STATE_NAMES.items()}

_ENDED = (TransactionState.EMPTY, TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT)
_VALID_PREVIOUS_STATES: dict[TransactionState, frozenset[TransactionState]] = {
    # InitProducerId bumps the epoch (or rotates the producer id) of a transactional id with nothing in flight.
    TransactionState.EMPTY: frozenset(_ENDED),
    # The first partition (or offsets) added starts a transaction; more partitions keep it going.
    TransactionState.ONGOING: frozenset((TransactionState.ONGOING, *_ENDED)),
    TransactionState.PREPARE_COMMIT: frozenset((TransactionState.ONGOING,)),
    # The coordinator aborts what it fenced; a transaction version 2 client may abort an empty transaction.
    TransactionState.PREPARE_ABORT: frozenset((TransactionState.ONGOING, TransactionState.PREPARE_EPOCH_FENCE,
                                               *_ENDED)),
    TransactionState.COMPLETE_COMMIT: frozenset((TransactionState.PREPARE_COMMIT,)),
    TransactionState.COMPLETE_ABORT: frozenset((TransactionState.PREPARE_ABORT,)),
    TransactionState.DEAD: frozenset(_ENDED),
    # A transaction in flight is fenced when it times out or a new producer takes the transactional id over.
    TransactionState.PREPARE_EPOCH_FENCE: frozenset((TransactionState.ONGOING,)),
}
_EXPIRATION_ALLOWED = frozenset(_ENDED)
