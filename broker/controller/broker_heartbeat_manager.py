"""Broker sessions on the controller (Kafka's BrokerHeartbeatManager): who heartbeats, how far each broker has
replayed the metadata log, and which unfenced broker has gone silent.

A broker's session lasts `broker.session.timeout.ms` from its last heartbeat, in real time: an advance of a manual
clock (minikafka.broker.clock) does not make a broker that heartbeats look silent. A broker whose
controller connection (the one it registered or heartbeats on) closes loses its session at once: a killed broker's
socket closes with it, so its leaderships move without waiting out the timeout, while a silent one (paused, cut
off) is fenced when its session runs out. Sessions are memory only: after a controller restart every registered
broker starts a fresh one, as Kafka's controller does when it becomes active.
"""
from __future__ import annotations

import enum
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import trio

from minikafka.broker.clock.broker_clock import move_on_at_real, real_time
from minikafka.broker.metadata.metadata_image import BrokerInfo, MetadataImage

log = logging.getLogger("minikafka.controller")

NEVER = float("inf")


class BrokerControlState(enum.Enum):
    FENCED = "fenced"
    UNFENCED = "unfenced"
    CONTROLLED_SHUTDOWN = "controlled shutdown"
    SHUTDOWN_NOW = "shutdown now"

    @property
    def fenced(self) -> bool:
        return self in (BrokerControlState.FENCED, BrokerControlState.SHUTDOWN_NOW)


@dataclass
class BrokerSession:
    last_contact: float  # real time (see real_time) of the last heartbeat, -inf once its connection has closed
    registration_offset: int  # offset of the broker's latest RegisterBrokerRecord: caught up from there
    metadata_offset: int = -1  # highest metadata offset the broker has said it applied
    controlled_shutdown_offset: int = -1  # offset of the records that began its controlled shutdown
    connection_id: int | None = None  # the controller connection it registered or last heartbeat on


class BrokerHeartbeatManager:
    def __init__(self, image: MetadataImage, session_timeout_ms: int) -> None:
        self._image = image
        self.session_timeout_s = session_timeout_ms / 1000
        self.sessions: dict[int, BrokerSession] = {}
        self._changed = trio.Event()

    # ---- sessions ------------------------------------------------------------------------------------------------

    def registered(self, broker_id: int, registration_offset: int, new_incarnation: bool) -> None:
        """A RegisterBrokerRecord was replayed: a new incarnation starts a new session."""
        session = self.sessions.get(broker_id)
        if session is None or new_incarnation:
            self.sessions[broker_id] = BrokerSession(real_time(), registration_offset)
        else:
            session.registration_offset = registration_offset
        self._changed.set()

    def unregistered(self, broker_id: int) -> None:
        self.sessions.pop(broker_id, None)

    def touch(self, broker_id: int, metadata_offset: int, connection_id: int | None) -> None:
        """A heartbeat or registration arrived: the session runs again from now."""
        session = self.sessions[broker_id]
        session.last_contact = real_time()
        session.metadata_offset = max(session.metadata_offset, metadata_offset)
        if connection_id is not None:
            session.connection_id = connection_id
        self._changed.set()

    def connection_closed(self, connection_id: int) -> None:
        """End the session of the broker whose controller connection this was, to fence it now."""
        for broker_id, session in self.sessions.items():
            if session.connection_id == connection_id:
                log.info("controller connection %d of broker %d closed", connection_id, broker_id)
                session.connection_id = None
                session.last_contact = float("-inf")
                self._changed.set()

    def has_valid_session(self, broker_id: int) -> bool:
        broker = self._image.brokers.get(broker_id)
        session = self.sessions.get(broker_id)
        if broker is None or session is None or broker.fenced:
            return False
        return session.last_contact + self.session_timeout_s >= real_time()

    def stale_brokers(self) -> list[int]:
        """Unfenced brokers whose session has run out, the longest silent first."""
        stale = [(s.last_contact, b) for b, s in self.sessions.items()
                 if b in self._image.brokers and not self._image.brokers[b].fenced and not self.has_valid_session(b)]
        return [b for _, b in sorted(stale)]

    def session_lost_by_close(self, broker_id: int) -> bool:
        return self.sessions[broker_id].last_contact == float("-inf")

    def next_expiry(self) -> float:
        """When the next unfenced broker's session runs out if it stays silent."""
        deadlines = [s.last_contact + self.session_timeout_s for b, s in self.sessions.items()
                     if b in self._image.brokers and not self._image.brokers[b].fenced]
        return min(deadlines, default=NEVER)

    async def run(self, fence_if_stale: Callable[[int], Awaitable[None]]) -> None:
        """Fence every broker whose session runs out, as it runs out; until cancelled."""
        while True:
            self._changed = trio.Event()
            stale = self.stale_brokers()
            for broker_id in stale:
                await fence_if_stale(broker_id)
            if not stale:
                with move_on_at_real(self.next_expiry()):
                    await self._changed.wait()

    # ---- controlled shutdown ---------------------------------------------------------------------------------------

    def began_controlled_shutdown(self, broker_id: int, offset: int) -> None:
        session = self.sessions[broker_id]
        if session.controlled_shutdown_offset < 0:
            session.controlled_shutdown_offset = offset

    def lowest_active_offset(self) -> int:
        """The metadata offset every active broker has applied: the others know of the moved leaderships once
        it passes a shutting-down broker's controlled shutdown offset."""
        offsets = [s.metadata_offset for b, s in self.sessions.items() if self._image.is_active(b)]
        return min(offsets, default=2**63 - 1)

    def next_state(self, broker: BrokerInfo, want_fence: bool, want_shut_down: bool, metadata_offset: int,
                   has_leaderships: Callable[[], bool]) -> tuple[BrokerControlState, BrokerControlState]:
        """(current, next) state of a broker that heartbeats with these wishes (Kafka's
        calculateNextBrokerState): a fenced broker is unfenced once it has replayed up to its registration; an
        unfenced one that wants to shut down while leading partitions enters controlled shutdown, and may shut
        down once it leads nothing and the active brokers have replayed the leadership moves."""
        session = self.sessions[broker.broker_id]
        current = current_state(broker)
        if current is BrokerControlState.FENCED:
            if want_shut_down:
                return current, BrokerControlState.SHUTDOWN_NOW
            if not want_fence and metadata_offset >= session.registration_offset:
                return current, BrokerControlState.UNFENCED
            return current, current
        if current is BrokerControlState.UNFENCED:
            if want_fence:
                return current, BrokerControlState.SHUTDOWN_NOW if want_shut_down else BrokerControlState.FENCED
            if want_shut_down:
                if has_leaderships():
                    return current, BrokerControlState.CONTROLLED_SHUTDOWN
                return current, BrokerControlState.SHUTDOWN_NOW
            return current, current
        if current is BrokerControlState.CONTROLLED_SHUTDOWN:
            if has_leaderships():
                return current, current
            if session.controlled_shutdown_offset < 0:  # began before this controller started: wait for now
                session.controlled_shutdown_offset = self._image.offset
            if session.controlled_shutdown_offset <= self.lowest_active_offset():
                return current, BrokerControlState.SHUTDOWN_NOW
            return current, current
        return current, current


def current_state(broker: BrokerInfo) -> BrokerControlState:
    if broker.in_controlled_shutdown:
        return BrokerControlState.SHUTDOWN_NOW if broker.fenced else BrokerControlState.CONTROLLED_SHUTDOWN
    return BrokerControlState.FENCED if broker.fenced else BrokerControlState.UNFENCED
