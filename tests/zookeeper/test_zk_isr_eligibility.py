"""Who may join an ISR when the leader knows live brokers but not their epochs: ZooKeeper mode, whose
UpdateMetadata names the live brokers without the creation ids of their registrations."""
from __future__ import annotations

from minikafka.broker.replication.replica import NO_BROKER_EPOCH, Replica

NOW = 1_000_000


def fetched(broker_epoch: int) -> Replica:
    replica = Replica(3)
    replica.update_fetch_state(5, 0, NOW, 5, broker_epoch, {})
    return replica


def test_a_live_broker_of_unknown_epoch_is_eligible_whatever_epoch_its_fetches_carry() -> None:
    assert fetched(99).isr_eligible({3: NO_BROKER_EPOCH})
    assert fetched(NO_BROKER_EPOCH).isr_eligible({3: NO_BROKER_EPOCH})


def test_known_epochs_still_fence_and_dead_brokers_stay_out() -> None:
    assert fetched(99).isr_eligible({3: 99})
    assert not fetched(98).isr_eligible({3: 99})  # a fetch from before the broker registered again
    assert not fetched(99).isr_eligible({})  # not a live broker
    assert not Replica(3).isr_eligible({3: NO_BROKER_EPOCH})  # never fetched under this leadership
