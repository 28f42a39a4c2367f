"""A follower as its partition's leader sees it (Kafka's Replica): what it last fetched and when it was caught up.

The leader learns a follower's log end offset only from the offsets its fetches ask for, so every number here is
as of the follower's last fetch. `last_caught_up_time_ms` is what decides ISR membership: a follower stays in sync
while it has read up to the leader's log end offset, as it stood at one of its fetches, within
replica.lag.time.max.ms — even if appends keep the leader a little ahead of every single fetch.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from minikafka.protocol.errors import ErrorCode, KafkaError

UNKNOWN_OFFSET = -1
NO_BROKER_EPOCH = -1  # a fetch that carries no broker epoch (Fetch before v15, or a broker not registered yet)


@dataclass
class Replica:
    broker_id: int
    log_start_offset: int = UNKNOWN_OFFSET
    log_end_offset: int = UNKNOWN_OFFSET
    # The leader's log end offset when the follower's last fetch arrived.
    last_fetch_leader_log_end_offset: int = 0
    last_fetch_time_ms: int = 0
    # The latest time t at which the follower had read up to the leader's log end offset as of t.
    last_caught_up_time_ms: int = 0
    # The broker epoch its fetches carried; None until it has fetched under this leadership.
    broker_epoch: int | None = None

    def update_fetch_state(self, fetch_offset: int, follower_start_offset: int, fetch_time_ms: int,
                           leader_end_offset: int, broker_epoch: int, alive_broker_epochs: Mapping[int, int]) -> None:
        """Record a fetch. A fetch carrying an older broker epoch than the follower's registration is a stale
        request from before a restart and must not move the follower's state (NOT_LEADER_OR_FOLLOWER)."""
        registered = alive_broker_epochs.get(self.broker_id)
        if broker_epoch != NO_BROKER_EPOCH and registered is not None and registered > broker_epoch:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                             f"stale fetch state update from broker {self.broker_id}: broker epoch {broker_epoch}, "
                             f"registered {registered}")
        if fetch_offset >= leader_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, fetch_time_ms)
        elif fetch_offset >= self.last_fetch_leader_log_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, self.last_fetch_time_ms)
        self.log_start_offset = follower_start_offset
        self.log_end_offset = fetch_offset
        self.last_fetch_leader_log_end_offset = max(leader_end_offset, self.last_fetch_leader_log_end_offset)
        self.last_fetch_time_ms = fetch_time_ms
        self.broker_epoch = broker_epoch

    def reset(self, now_ms: int, leader_end_offset: int, is_new_leader: bool, in_sync: bool) -> None:
        """A new leader epoch starts. A follower in the ISR counts as caught up now, one outside it as never, so
        that the ISR is not shrunk at once nor the high watermark held back by a replica that is out anyway. A
        leader that was not leader before knows nothing of the followers' logs yet."""
        self.last_caught_up_time_ms = now_ms if in_sync else 0
        if is_new_leader:
            self.log_start_offset = UNKNOWN_OFFSET
            self.log_end_offset = UNKNOWN_OFFSET
            self.last_fetch_leader_log_end_offset = UNKNOWN_OFFSET
            self.last_fetch_time_ms = 0
            self.broker_epoch = None
        else:
            self.last_fetch_leader_log_end_offset = leader_end_offset
            self.last_fetch_time_ms = now_ms if in_sync else 0

    def is_caught_up(self, leader_end_offset: int, now_ms: int, max_lag_ms: int) -> bool:
        return leader_end_offset == self.log_end_offset or now_ms - self.last_caught_up_time_ms <= max_lag_ms

    def isr_eligible(self, alive_broker_epochs: Mapping[int, int]) -> bool:
        """Kafka's KRaft rule: only a live (registered, unfenced, not shutting down) broker whose fetches carry its
        current broker epoch may join the ISR. In ZooKeeper mode the leader knows which brokers are live but not
        their epochs (UpdateMetadata carries none), so liveness alone counts, as in Kafka's ZooKeeper mode."""
        registered = alive_broker_epochs.get(self.broker_id)
        return (registered is not None and self.broker_epoch is not None
                and (NO_BROKER_EPOCH in (registered, self.broker_epoch) or self.broker_epoch == registered))
