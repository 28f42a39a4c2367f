"""The broker server: builds the broker's parts from its config, runs them in one nursery, stops them cleanly.

Start-up order: log dirs and meta.properties, controller metadata, logs (with recovery), partitions, then the
listeners, and only then the readiness line. Shutdown: stop accepting, answer requests in flight, flush logs,
write checkpoints.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import trio

from minikafka.config import BrokerConfig, ConfigError, Endpoint
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.storage.errors import KafkaStorageError
from minikafka.storage.log_config import topic_defaults_from_broker_props

from . import handlers
from .controller import Controller, TopicRegistration
from .faults.disk_quota import DiskQuota
from .faults.injector import FaultInjector
from .group_coordinator import GroupCoordinator, load_group_coordinator
from .kafka_apis import KafkaApis
from .log_manager import LogManager
from .purgatory import Purgatory
from .replica_manager import ReplicaManager, now_ms
from .server import SocketServer

log = logging.getLogger("minikafka.broker")

SHUTDOWN_DRAIN_S = 10.0


@dataclass(frozen=True)
class BrokerEndpoint:
    node_id: int
    host: str
    port: int
    rack: str | None = None


class BrokerServer:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.node_id: int = config.node_id
        try:
            self.log_defaults = topic_defaults_from_broker_props(config.props)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        self.purgatory = Purgatory()
        self.endpoints: list[BrokerEndpoint] = []
        self._stop = trio.Event()
        self._crashed = False
        # Built by _load(), from the log dirs, when run() starts.
        self.log_manager: LogManager
        self.controller: Controller
        self.replica_manager: ReplicaManager
        self.group_coordinator: GroupCoordinator
        self.disk_quota = DiskQuota(config.log_dirs)
        self.faults = FaultInjector(self.purgatory, self.disk_quota)
        self.apis = KafkaApis(self, handlers.MODULES)
        self.socket_server = SocketServer(self.apis.process, config.get("socket.request.max.bytes"),
                                          config.get("connections.max.idle.ms") / 1000)

    # ---- lifecycle -------------------------------------------------------------------------------------------

    def _load(self) -> None:
        dirs = self.config.log_dirs
        self.log_manager = LogManager(dirs, self.node_id, self.config.get("cluster.id") or None, self.log_defaults,
                                      self.disk_quota)
        self.controller = Controller(dirs[0], self.node_id, self.log_manager.cluster_id, self.log_defaults)
        self.log_manager.load_logs({name: t.configs for name, t in self.controller.topics.items()})
        self.replica_manager = ReplicaManager(self.node_id, self.log_manager, self.purgatory)
        for topic in self.controller.topics.values():
            self._host_partitions(topic)
        for tp in set(self.log_manager.logs) - set(self.replica_manager.partitions):
            log.warning("partition dir for %s-%s has no topic in the cluster metadata; left untouched", *tp)
        self.group_coordinator = load_group_coordinator(self)

    def _host_partitions(self, topic: TopicRegistration, indexes: list[int] | None = None) -> None:
        for index, reg in topic.partitions.items():
            if (indexes is None or index in indexes) and self.node_id in reg.replicas:
                self.replica_manager.make_leader(topic.name, index, topic.uuid, reg.leader_epoch, reg.replicas,
                                                 reg.isr, topic.configs)

    async def run(self, *, task_status: trio.TaskStatus[BrokerServer] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve until `stop()`; `task_status.started()` fires once the listeners accept connections."""
        started = time.monotonic()
        self._load()
        try:
            listeners_by_name = []
            for endpoint in self.config.listeners:
                listeners = await trio.open_tcp_listeners(endpoint.port, host=endpoint.host)
                listeners_by_name.append((endpoint, listeners))
            self._advertise(listeners_by_name)
            async with trio.open_nursery() as nursery:
                for endpoint, listeners in listeners_by_name:
                    nursery.start_soon(self.socket_server.serve, endpoint.listener, listeners)
                nursery.start_soon(self._periodic, self.config.get("log.retention.check.interval.ms"),
                                   self._retention)
                nursery.start_soon(self._periodic, self.config.get("log.flush.offset.checkpoint.interval.ms"),
                                   self._checkpoint)
                nursery.start_soon(self._periodic, 1000, self._flush_due)
                await nursery.start(self.group_coordinator.run)
                log.info("broker %d started in %.0f ms", self.node_id, 1000 * (time.monotonic() - started))
                task_status.started(self)
                await self._stop.wait()
                if not self._crashed:
                    self.group_coordinator.shutdown()
                    self.purgatory.wake_all()
                    await self.socket_server.drain(SHUTDOWN_DRAIN_S)
                nursery.cancel_scope.cancel()
        finally:  # plain synchronous calls: a cancellation cannot cut them short
            if self._crashed:
                self.log_manager.abandon()
                log.warning("broker %d crashed on request: no flush, no checkpoints", self.node_id)
            else:
                self.log_manager.shutdown(self.replica_manager.high_watermarks())
                log.info("broker %d stopped", self.node_id)

    def stop(self) -> None:
        self._stop.set()

    def crash(self) -> None:
        """Stop as a killed process would: requests in flight are dropped, nothing is flushed or checkpointed,
        so the next start recovers from the files as they are. For crash tests of an in-process broker."""
        self._crashed = True
        self._stop.set()

    def _advertise(self, bound: list[tuple[Endpoint, list[trio.SocketListener]]]) -> None:
        advertised = self.config.props.get("advertised.listeners")
        if advertised:
            self.endpoints = [BrokerEndpoint(self.node_id, e.host, e.port) for e in self.config.advertised_listeners]
            return
        for endpoint, listeners in bound:
            host, port = listeners[0].socket.getsockname()[:2]
            host = endpoint.host if endpoint.host not in ("", "0.0.0.0", "::") else "127.0.0.1"
            self.endpoints.append(BrokerEndpoint(self.node_id, host, port))

    @property
    def bound_addresses(self) -> list[tuple[str, int]]:
        return [(e.host, e.port) for e in self.endpoints]

    async def _periodic(self, interval_ms: int, action) -> None:
        """Run a housekeeping action forever; a failure (a full or broken disk) is logged and tried again next
        time, never allowed to take the broker down with it."""
        interval = max(interval_ms, 10) / 1000
        while True:
            await trio.sleep(interval)
            try:
                result = action()
                if result is not None:
                    await result
            except (OSError, KafkaStorageError) as exc:
                log.error("%s failed: %s", action.__name__.lstrip("_"), exc)

    def _retention(self) -> None:
        deleted = self.log_manager.roll_and_retain(now_ms(), self.replica_manager.high_watermarks())
        if deleted:
            log.info("retention deleted %d segments", deleted)

    async def _checkpoint(self) -> None:
        for the_log, up_to in self.log_manager.rolled_unflushed():
            await trio.to_thread.run_sync(the_log.flush, up_to)
        self.log_manager.checkpoint(self.replica_manager.high_watermarks())

    def _flush_due(self) -> None:
        self.log_manager.flush_due(now_ms())

    # ---- topic lifecycle: the controller decides, this broker applies ------------------------------------------

    def create_topic(self, name: str, num_partitions: int, replication_factor: int,
                     assignments: dict[int, list[int]], configs: dict[str, str],
                     validate_only: bool = False) -> TopicRegistration | None:
        plan = self.controller.validate_new_topic(name, num_partitions, replication_factor, assignments, configs)
        if validate_only:
            return None
        topic = self.controller.create_topic(name, plan, configs)
        self._host_partitions(topic)
        log.info("created topic %s with %d partitions (id %s)", name, len(topic.partitions), topic.uuid)
        return topic

    def auto_create_topic(self, name: str) -> TopicRegistration:
        """Metadata/Produce auto-creation with num.partitions and default.replication.factor."""
        if not self.config.get("auto.create.topics.enable"):
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {name!r}")
        topic = self.create_topic(name, self.config.get("num.partitions"),
                                  self.config.get("default.replication.factor"), {}, {})
        assert topic is not None  # created, not only validated
        return topic

    def delete_topic(self, name: str) -> TopicRegistration:
        if not self.config.get("delete.topic.enable"):
            raise KafkaError(ErrorCode.TOPIC_DELETION_DISABLED, "Topic deletion is disabled.")
        topic = self.controller.delete_topic(name)
        for index in topic.partitions:
            self.replica_manager.delete_partition(name, index)
        self.group_coordinator.offset_manager.on_topic_deleted(name)
        log.info("deleted topic %s", name)
        return topic

    def create_partitions(self, name: str, count: int, assignments: list[list[int]] | None,
                          validate_only: bool = False) -> None:
        plan = self.controller.validate_new_partitions(name, count, assignments)
        if not validate_only:
            topic = self.controller.add_partitions(name, plan)
            self._host_partitions(topic, list(plan))

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        self.controller.set_topic_configs(name, configs)
        self.log_manager.update_topic_config(name, configs)
