"""A node by its roles (Kafka's KafkaRaftServer): the controller, the broker, or both, in one nursery.

`process.roles` decides: `controller` runs only the ControllerServer, `broker` only the BrokerServer (which finds
its controller by controller.quorum.voters or controller.quorum.bootstrap.servers), both a combined node whose
broker reaches its own controller in process. No roles means a combined node, today's single `minikafka serve`.
With zookeeper.connect the node is a ZooKeeper-mode broker (Kafka's KafkaServer): the broker role only, whose
controller runs inside the broker and is elected through ZooKeeper.

The controller starts first, so a combined node's broker can register at once: a registration of this node's
broker that the controller still holds from before (a crash leaves one with a live-looking session) belonged to
this very process, so it is ended first, with the heartbeat a broker sends to shut down. A clean stop stops the
broker first (its controlled shutdown needs the controller), then the controller; a crash stops both at once.

With metrics.port the node serves its metrics to Prometheus (see metrics) from before its roles start, so a port
that cannot be bound fails the start as a listener's would.
"""
from __future__ import annotations

import functools
import logging

import trio
from kafka.protocol.api_message import ApiMessage

from minikafka.broker.controller import ControllerServer
from minikafka.broker.controller.controller_metrics import active_image, controller_families
from minikafka.broker.network.metrics_endpoint import FamiliesBuilder, serve_metrics
from minikafka.broker.network.socket_server import ConnectionInfo, ListenerBindError
from minikafka.broker.server.broker_server import BrokerServer
from minikafka.broker.server.metrics import read_broker
from minikafka.config import BROKER_ROLE, CONTROLLER_ROLE, BrokerConfig
from minikafka.protocol.errors import KafkaError
from minikafka.storage.errors import KafkaStorageError

log = logging.getLogger("minikafka.node")


class KafkaNode:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        roles = config.process_roles
        self.controller = ControllerServer(config) if CONTROLLER_ROLE in roles else None
        local = self._handle_locally if self.controller is not None else None
        self.broker = BrokerServer(config, local) if BROKER_ROLE in roles else None
        if self.controller is not None and self.broker is not None:
            self.controller.links = self.broker.faults.links  # one node: a cut link cuts both of its roles off
            # One node: one set of metrics.
            self.broker.metrics.local_controller_image = functools.partial(active_image, self.controller)
        self.metrics_address: tuple[str, int] | None = None  # where metrics are served, once started
        self._stopping = trio.Event()  # stop() or crash() was called
        self._broker_done = trio.Event()

    async def _handle_locally(self, request: ApiMessage, version: int, peer: ConnectionInfo | None) -> ApiMessage:
        assert self.controller is not None  # only a node with a controller hands requests to it
        return await self.controller.apis.handle(request, version, peer)

    async def run(self, *, task_status: trio.TaskStatus[KafkaNode] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve until `stop()` or `crash()`; `task_status.started()` fires once every role is ready (a broker:
        registered, caught up, unfenced and serving). A stop during start-up returns without it."""
        async with trio.open_nursery() as nursery:
            metrics_port = self.config.get("metrics.port")
            if metrics_port is not None:
                read = self._read_metrics
                host = self._metrics_host()
                try:
                    self.metrics_address = await nursery.start(serve_metrics, host, metrics_port, read)
                except OSError as exc:
                    raise ListenerBindError("metrics endpoint (metrics.port)", host, metrics_port, exc) from exc
            if self.controller is not None:
                await nursery.start(self.controller.run)
            if self.broker is not None:
                try:
                    await nursery.start(self._run_broker)
                except RuntimeError:  # the broker returned before it was ready: it was told to stop
                    if not self._stopping.is_set():
                        raise
                    nursery.cancel_scope.cancel()
                    return
            task_status.started(self)
            await self._stopping.wait()
            if self.broker is not None:
                await self._broker_done.wait()
            nursery.cancel_scope.cancel()

    async def _run_broker(self, *, task_status: trio.TaskStatus[BrokerServer] = trio.TASK_STATUS_IGNORED) -> None:
        assert self.broker is not None
        try:
            if self.controller is not None:
                await self._end_earlier_registration()
            await self.broker.run(task_status=task_status)
        finally:
            self._broker_done.set()
            self._stopping.set()  # a broker that stopped by itself (a control-API shutdown) stops its node

    def _read_metrics(self) -> FamiliesBuilder:
        """The node's figures now (see read_broker): its broker's (with those of a combined node's controller), or
        its controller's."""
        broker = self.broker
        if broker is not None:
            return read_broker(broker.metrics, broker.purgatory, broker.fetch_sessions, broker.metadata,
                               getattr(broker, "replica_manager", None),  # built once the broker has caught up
                               getattr(broker, "log_cleaner", None))
        families = controller_families(self.controller) if self.controller is not None else []
        return lambda: families

    def _metrics_host(self) -> str:
        """Metrics are served on the host of the node's first listener (loopback unless it listens wider)."""
        listeners = self.config.listeners
        return listeners[0].host if listeners else "127.0.0.1"

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    async def _end_earlier_registration(self) -> None:
        """End it as the broker's shutdown heartbeat would. A controller that cannot write its metadata log (a full
        disk) could not register the broker either: the start stops here with that error, as Kafka halts."""
        assert self.controller is not None
        earlier = self.controller.image.brokers.get(self.config.node_id)
        if earlier is None or earlier.fenced:
            return
        try:
            await self.controller.controller.heartbeat(earlier.broker_id, earlier.broker_epoch,
                                                       self.controller.image.offset, want_fence=True,
                                                       want_shut_down=True)
        except KafkaStorageError:
            raise
        except KafkaError as exc:
            log.warning("node %d: the earlier registration of its broker was not ended: %s", self.config.node_id,
                        exc.code.name)

    def stop(self) -> None:
        """A clean stop, as on SIGTERM."""
        if self.broker is not None:
            self.broker.stop()
        self._stopping.set()

    def crash(self) -> None:
        """Stop as a killed process would (see BrokerServer.crash); the controller's log is durable already."""
        if self.broker is not None:
            self.broker.crash()
        self._stopping.set()

    @property
    def controller_address(self) -> tuple[str, int] | None:
        """The controller listener's bound address, for a node that has one."""
        endpoint = self.controller.endpoint if self.controller is not None else None
        return (endpoint.host, endpoint.port) if endpoint is not None else None
