"""A broker's standing with the controller (Kafka's BrokerLifecycleManager): registration, heartbeats, fencing and
controlled shutdown.

At start the broker registers its listeners as bound (so a broker on port 0 is still found) under an incarnation
id new to this run; the controller answers with the broker epoch. From then on it heartbeats with the metadata
offset it has applied. It asks to stay fenced until the broker server says it is ready to serve, then to be
unfenced; the controller unfences it once it has replayed the metadata up to its own registration. While starting
(and while shutting down) heartbeats go out every few milliseconds, so neither waits out a heartbeat interval.

A clean stop begins with a controlled shutdown: heartbeats ask to shut down until the controller, having moved
this broker's leaderships to other replicas, answers that it may. The wait is bounded by the session timeout,
after which the controller would fence the broker anyway.
"""
from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import Any

import trio
from kafka.protocol.api_message import ApiMessage

from minikafka.broker.metadata.metadata_image import BrokerEndpointInfo
from minikafka.broker.network.controller_channel import ControllerChannel
from minikafka.broker.network.failure_log import FailureLog
from minikafka.broker.network.network_client import DisconnectedError
from minikafka.protocol.control_plane import BrokerHeartbeatRequest, BrokerRegistrationRequest
from minikafka.protocol.errors import ErrorCode

log = logging.getLogger("minikafka.broker_lifecycle")

REGISTRATION_VERSION = 4
HEARTBEAT_VERSION = 1
STARTING_HEARTBEAT_S = 0.01  # Kafka's heartbeat pace while a broker starts
SHUTDOWN_HEARTBEAT_S = 0.05  # and while it waits to be let go
RETRY_BACKOFF_S = 0.1


class RegistrationError(Exception):
    """The broker could not register with the controller before its registration timeout."""


class BrokerLifecycleManager:
    """`run` registers, then heartbeats until cancelled. `registered`, `unfenced` and `should_shut_down` are the
    milestones the broker server waits on."""

    def __init__(self, node_id: int, cluster_id: str, channel: ControllerChannel,
                 listeners: list[BrokerEndpointInfo], rack: str | None, heartbeat_interval_ms: int,
                 registration_timeout_ms: int, metadata_offset: Callable[[], int],
                 on_broker_epoch: Callable[[int], None] | None = None) -> None:
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.incarnation_id = uuid.uuid4()
        self.broker_epoch = -1
        self._channel = channel
        self._listeners = listeners
        self._rack = rack
        self._heartbeat_interval_s = heartbeat_interval_ms / 1000
        self._registration_timeout_s = registration_timeout_ms / 1000
        self._metadata_offset = metadata_offset
        self._on_broker_epoch = on_broker_epoch
        self.registered = trio.Event()
        self.unfenced = trio.Event()
        self.should_shut_down = trio.Event()
        self.is_fenced = True
        self.is_caught_up = False
        self._ready_to_unfence = False
        self._want_shut_down = False
        self._wakeup = trio.Event()
        self._heartbeat_failures = FailureLog(log, f"broker {node_id} heartbeat")

    # ---- what the broker server tells it ----------------------------------------------------------------------

    def set_ready_to_unfence(self) -> None:
        """The broker serves requests now: ask the controller to unfence it."""
        self._ready_to_unfence = True
        self._wakeup.set()

    async def controlled_shutdown(self, timeout_s: float) -> bool:
        """Ask to shut down and wait (at most `timeout_s`) until the controller agrees; True if it did."""
        if not self.registered.is_set():
            return False
        self._want_shut_down = True
        self._wakeup.set()
        log.info("broker %d begins its controlled shutdown", self.node_id)
        with trio.move_on_after(timeout_s):
            await self.should_shut_down.wait()
        if self.should_shut_down.is_set():
            log.info("broker %d: the controller completed its controlled shutdown", self.node_id)
            return True
        log.warning("broker %d: controlled shutdown not confirmed within %.1f s; stopping anyway", self.node_id,
                    timeout_s)
        return False

    # ---- the loop ------------------------------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Register (raising RegistrationError if that fails for the registration timeout), report started, then
        heartbeat until cancelled."""
        await self._register()
        task_status.started()
        while True:
            await self._heartbeat()
            self._wakeup = trio.Event()
            with trio.move_on_after(self._next_heartbeat_delay()):
                await self._wakeup.wait()

    def _next_heartbeat_delay(self) -> float:
        if self._want_shut_down:
            return SHUTDOWN_HEARTBEAT_S
        if not self.unfenced.is_set():
            return STARTING_HEARTBEAT_S
        return self._heartbeat_interval_s

    async def _register(self) -> None:
        last_problem = "no answer"
        with trio.move_on_after(self._registration_timeout_s):
            while True:
                try:
                    response = await self._channel.send(self._registration_request(), REGISTRATION_VERSION)
                except DisconnectedError as exc:
                    last_problem = str(exc)
                else:
                    code = ErrorCode(response.error_code)
                    if code == ErrorCode.NONE:
                        self._registered_at(response.broker_epoch)
                        return
                    last_problem = f"the controller answered {code.name}"
                    log.info("broker %d registration refused: %s; retrying", self.node_id, code.name)
                await trio.sleep(RETRY_BACKOFF_S)
        raise RegistrationError(f"broker {self.node_id} could not register with the controller within "
                                f"{self._registration_timeout_s:.1f} s: {last_problem}")

    def _registered_at(self, broker_epoch: int) -> None:
        self.broker_epoch = broker_epoch
        self.is_fenced = True
        log.info("broker %d registered with broker epoch %d (incarnation %s)", self.node_id, broker_epoch,
                 self.incarnation_id)
        if self._on_broker_epoch is not None:
            self._on_broker_epoch(broker_epoch)
        self.registered.set()

    def _registration_request(self) -> ApiMessage:
        R: Any = BrokerRegistrationRequest
        return R(broker_id=self.node_id, cluster_id=self.cluster_id, incarnation_id=self.incarnation_id,
                 listeners=[R.Listener(name=e.name, host=e.host, port=e.port, security_protocol=e.security_protocol)
                            for e in self._listeners],
                 features=[], rack=self._rack, is_migrating_zk_broker=False, log_dirs=[],
                 previous_broker_epoch=-1)

    async def _heartbeat(self) -> None:
        R: Any = BrokerHeartbeatRequest
        request = R(broker_id=self.node_id, broker_epoch=self.broker_epoch,
                    current_metadata_offset=self._metadata_offset(), want_fence=not self._ready_to_unfence,
                    want_shut_down=self._want_shut_down, offline_log_dirs=[])
        try:
            response = await self._channel.send(request, HEARTBEAT_VERSION)
        except DisconnectedError as exc:
            self._heartbeat_failures.failed(exc)
            return
        self._heartbeat_failures.succeeded()
        code = ErrorCode(response.error_code)
        if code == ErrorCode.STALE_BROKER_EPOCH:
            # The controller no longer has this registration: only a new one lets the broker back in.
            log.warning("broker %d: the controller has no registration at broker epoch %d; registering again",
                        self.node_id, self.broker_epoch)
            await self._register()
            return
        if code != ErrorCode.NONE:
            log.info("broker %d heartbeat refused: %s", self.node_id, code.name)
            return
        self.is_caught_up = response.is_caught_up
        if response.is_fenced != self.is_fenced:
            log.info("broker %d is %s", self.node_id, "fenced" if response.is_fenced else "unfenced")
        self.is_fenced = response.is_fenced
        if not response.is_fenced:
            self.unfenced.set()
        if response.should_shut_down and self._want_shut_down:
            self.should_shut_down.set()
