"""The broker role of a node (Kafka's BrokerServer): builds the broker's parts from its config, runs them in one
nursery, stops them cleanly.

Start-up order, as a KRaft broker starts: lock the log dirs (the `.lock` of each, held until the broker stops:
Kafka's refusal of a second broker on a dir), bind the broker listeners (so a listener on port 0 has its port), learn
the cluster id from the controller, open the log dirs (meta.properties), start replicating the cluster metadata,
register with the controller, wait until the metadata is replayed up to this registration, then open the logs
(with recovery) and make each replica the leader or follower the metadata says, start the group coordinator and
the replication tasks, serve the listeners, ask to be unfenced, and once unfenced (and caught up with the
controller's decisions about this broker) report ready. Shutdown: a controlled shutdown (leaderships move away
first, when another live broker can take them), stop accepting, answer requests in flight, flush logs, write
checkpoints.

What differs between a KRaft broker and a ZooKeeper-mode one (how it registers, learns the metadata, reaches the
controller, becomes ready and leaves) is its MetadataSource; everything else is this one server. A KRaft broker
reaches its controller over the network, or in process in a combined node, whose controller is passed in.
"""
from __future__ import annotations

import functools
import logging
import os
import signal
import threading
import time
import uuid
from pathlib import Path

import trio

from minikafka.broker.clock.broker_clock import wall_clock_ms
from minikafka.broker.coordinator.coordinator_log import CoordinatorLog
from minikafka.broker.coordinator.group.group_coordinator import GroupCoordinator, load_group_coordinator
from minikafka.broker.coordinator.group.group_metadata_manager import GROUPS_CHANGED_KEY, committed_offsets_key
from minikafka.broker.coordinator.share.share_coordinator import ShareCoordinator
from minikafka.broker.coordinator.share.share_coordinator_shard import ShareCoordinatorShard
from minikafka.broker.coordinator.transaction.transaction_config import TransactionConfig
from minikafka.broker.coordinator.transaction.transaction_coordinator import (
    TransactionCoordinator,
    load_transaction_coordinator,
)
from minikafka.broker.coordinator.transaction.transaction_marker_channel_manager import (
    TransactionMarkerChannelManager,
)
from minikafka.broker.coordinator.transaction.transaction_metadata import TransactionVersion
from minikafka.broker.coordinator.transaction.transaction_state_manager import TransactionStateManager
from minikafka.broker.faults.disk_quota import DiskQuota
from minikafka.broker.faults.injector import FaultInjector
from minikafka.broker.log.log_cleaner import CleanerConfig, CleanerStopped, LogCleaner
from minikafka.broker.log.log_manager import LogManager
from minikafka.broker.metadata.dynamic_config import (
    FOLLOWER_REPLICATION_THROTTLED_RATE,
    LEADER_REPLICATION_THROTTLED_RATE,
    REPLICA_ALTER_LOG_DIRS_IO_MAX_BYTES_PER_SECOND,
)
from minikafka.broker.metadata.features import TRANSACTION_VERSION, finalized_level
from minikafka.broker.metadata.kraft_metadata_source import KRaftMetadataSource
from minikafka.broker.metadata.metadata_cache import METADATA_CHANGE_KEY, MetadataCache
from minikafka.broker.metadata.metadata_image import BrokerEndpointInfo, MetadataChange, MetadataImage
from minikafka.broker.metadata.metadata_loader import MetadataLoader
from minikafka.broker.metadata.metadata_source import MetadataSource, StartDeadline
from minikafka.broker.network.broker_clients import BrokerClients
from minikafka.broker.network.controller_channel import ControllerHandler
from minikafka.broker.network.network_client import NetworkClientConfig
from minikafka.broker.network.request_channel import RequestChannel
from minikafka.broker.network.socket_server import ConnectionInfo, SocketServer, open_listeners
from minikafka.broker.replication.broker_topic_stats import BrokerMetrics
from minikafka.broker.replication.fetch_session import FetchSessionCache
from minikafka.broker.replication.purgatory import Purgatory
from minikafka.broker.replication.replica_manager import ReplicaManager, TopicPartition, now_ms
from minikafka.broker.replication.replication_config import ReplicationConfig
from minikafka.broker.replication.replication_quota_manager import ReplicationQuotas
from minikafka.broker.security.client_security import (
    ClientChannelSecurity,
    controller_security,
    inter_broker_security,
)
from minikafka.broker.security.listener_security import listener_security
from minikafka.broker.security.sasl_server import ScramCredentials
from minikafka.broker.security.standard_authorizer import StandardAuthorizer, parse_super_users
from minikafka.broker.server import handlers
from minikafka.broker.server.add_partitions_to_txn_manager import AddPartitionsToTxnManager
from minikafka.broker.server.api_version_manager import ApiVersionManager
from minikafka.broker.server.auto_topic_creation import AutoTopicCreationManager
from minikafka.broker.server.client_quota_manager import QuotaConfig, QuotaManagers
from minikafka.broker.server.dynamic_broker_config import DynamicBrokerConfig
from minikafka.broker.server.forwarding import ForwardingManager
from minikafka.broker.server.handlers import controller_requests
from minikafka.broker.server.handlers.transactions import write_markers_locally
from minikafka.broker.server.kafka_apis import KafkaApis
from minikafka.broker.server.producer_id_manager import ProducerIdManager
from minikafka.broker.server.request_recording import RequestRecorder
from minikafka.broker.server.share.default_state_persister import DefaultStatePersister
from minikafka.broker.server.share.share_partition_manager import SharePartitionManager
from minikafka.config import CONTROLLER_ROLE, SECURITY_PROTOCOLS, BrokerConfig, ConfigError, Endpoint
from minikafka.protocol.internal_topics import (
    GROUP_METADATA_TOPIC,
    SHARE_GROUP_STATE_TOPIC,
    TRANSACTION_STATE_TOPIC,
)
from minikafka.storage.errors import KafkaStorageError
from minikafka.storage.log_config import LogConfig, topic_defaults_from_broker_props
from minikafka.storage.log_dir import lock_log_dirs

log = logging.getLogger("minikafka.broker")

SHUTDOWN_DRAIN_S = 10.0


class BrokerServer:
    def __init__(self, config: BrokerConfig, local_controller: ControllerHandler | None = None) -> None:
        self.config = config
        self.node_id: int = config.node_id
        try:
            self.log_defaults = topic_defaults_from_broker_props(config.props)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        self.dynamic_config = DynamicBrokerConfig(config)
        self.replication_quotas = ReplicationQuotas(self.node_id, config.get("replication.quota.window.num"),
                                                    config.get("replication.quota.window.size.seconds"))
        self.purgatory = Purgatory()
        self.metrics = BrokerMetrics()
        self.fetch_sessions = FetchSessionCache(config.get("max.incremental.fetch.session.cache.slots"))
        self.endpoints: list[BrokerEndpointInfo] = []  # this broker's listeners as clients reach them
        self._stop = trio.Event()
        self._crashed = False
        self._startup: trio.CancelScope | None = None
        self.disk_quota = DiskQuota(config.log_dirs)
        # How this broker's own connections to the others (followers, transaction markers) are secured, and those
        # to a KRaft controller of its own process (none for a combined node, or in ZooKeeper mode).
        self.inter_broker_security = inter_broker_security(config)
        self._controller_security = controller_security(config) \
            if not config.zookeeper_mode and local_controller is None else None
        self.faults = FaultInjector(self.purgatory, self.disk_quota, lambda: self.metadata_cache, self._peer_security)
        self.recorder = RequestRecorder(self.purgatory)
        self.metadata: MetadataSource
        if config.zookeeper_mode:
            self.metadata = self._zk_metadata_source(config)
        else:
            self.metadata = KRaftMetadataSource(config, local_controller, self.faults.links.is_cut)
        self.controller_channel = self.metadata.controller_channel
        metadata = self.metadata
        self.client_quotas = QuotaManagers.over(
            lambda: metadata.image.client_quotas,
            QuotaConfig(config.get("quota.window.num"), config.get("quota.window.size.seconds") * 1000))
        self.forwarding = ForwardingManager(self.controller_channel, self.metadata.catch_up)
        self.auto_topic_creation = AutoTopicCreationManager(
            config, self.forwarding, lambda: len(self.metadata_cache.image.live_brokers()))
        # Built once the broker has registered and caught up with the metadata, when run() starts.
        self.metadata_cache: MetadataCache
        self.log_manager: LogManager
        self.log_cleaner: LogCleaner
        self.replica_manager: ReplicaManager
        self.group_coordinator: GroupCoordinator
        self.transaction_coordinator: TransactionCoordinator
        self.share_coordinator: ShareCoordinator
        self.persister: DefaultStatePersister
        self.share_partition_manager: SharePartitionManager
        self.add_partitions_to_txn: AddPartitionsToTxnManager
        self.producer_ids: ProducerIdManager
        # Requests: parsed by the network layer with the schemas the APIs serve, then dispatched to the handlers,
        # which are given this server as their BrokerServices.
        self.api_versions = ApiVersionManager(handlers.MODULES)
        self.apis = KafkaApis(self, self.api_versions, handlers.MODULES,
                              controller_requests if config.zookeeper_mode else None, self.metrics)
        self.request_channel = RequestChannel(self.apis.request_schemas(config.inter_broker_listener_name),
                                              self.apis.handle, lambda: self.socket_server.draining)
        # SCRAM credentials are the cluster's (metadata); each listener's security is built once, here.
        self.scram_credentials = ScramCredentials(lambda: self.metadata.image.scram_credentials)
        security = {e.listener: listener_security(config, e.listener, self.scram_credentials,
                                                  self.faults.authentication_failures.refuses)
                    for e in config.broker_listeners}
        # Kafka's StandardAuthorizer over the metadata image's ACLs, when authorizer.class.name names it.
        self.authorizer: StandardAuthorizer | None = None
        if config.authorizer_enabled:
            self.authorizer = StandardAuthorizer(lambda: self.metadata.image,
                                                 parse_super_users(config.get("super.users")),
                                                 config.get("allow.everyone.if.no.acl.found"))
        self.socket_server = SocketServer(self.request_channel.process, config.get("socket.request.max.bytes"),
                                          config.get("connections.max.idle.ms") / 1000,
                                          on_connection_closed=self._connection_closed, security=security)

    def _zk_metadata_source(self, config: BrokerConfig) -> MetadataSource:
        """A ZooKeeper-mode broker's metadata source, with the KafkaController it runs over the same ZooKeeper client
        (its requests to this broker take the network's path in process)."""
        from minikafka.broker.zk.controller.kafka_controller import KafkaController  # kazoo: this mode only
        from minikafka.broker.zk.zk_broker_metadata import ZkMetadataSource

        source = ZkMetadataSource(config, self.faults.links.is_cut, lambda: self.replica_manager)
        source.install_controller(KafkaController(config, source.zk, source.handle_from_controller))
        return source

    @property
    def loader(self) -> MetadataLoader:
        """A KRaft broker's metadata log replica."""
        if not isinstance(self.metadata, KRaftMetadataSource):
            raise AttributeError("a ZooKeeper-mode broker has no metadata loader")
        return self.metadata.loader

    @property
    def image(self) -> MetadataImage:
        return self.metadata.image

    # ---- lifecycle -------------------------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[BrokerServer] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve until `stop()`; `task_status.started()` fires once the broker is registered, caught up with the
        metadata, unfenced and accepting connections. A stop during start-up returns without it."""
        started = time.monotonic()
        with lock_log_dirs(self._dirs_to_lock()):
            bound = [(e, await open_listeners(f"Kafka listener {e.listener}", e.host, e.port))
                     for e in self.config.broker_listeners]
            try:
                self.endpoints = self._advertise(bound)
                async with trio.open_nursery() as nursery:
                    ready = False
                    with trio.CancelScope() as self._startup:
                        if self._stop.is_set():
                            self._startup.cancel()
                        await self._start(nursery, bound, started)
                        ready = True
                        task_status.started(self)
                    self._startup = None
                    if ready:
                        await self._stop.wait()
                        await self._shut_down()
                    nursery.cancel_scope.cancel()
            finally:  # plain synchronous calls: a cancellation cannot cut them short
                for _endpoint, listeners in bound:
                    for listener in listeners:
                        listener.socket.close()
                self._close_logs()

    def _dirs_to_lock(self) -> list[Path]:
        """The log dirs whose locks the broker takes first of all, before it binds, reaches the controller or reads
        a file: a second broker on them fails at once. A combined node's controller holds the lock of its metadata
        log dir already (it read that dir first); the lock is the node's, so the broker does not take it again."""
        dirs = self.config.log_dirs
        if CONTROLLER_ROLE in self.config.process_roles:
            held = os.path.abspath(self.config.metadata_log_dir)
            dirs = [d for d in dirs if os.path.abspath(d) != held]
        return dirs

    async def _start(self, nursery: trio.Nursery, bound: list[tuple[Endpoint, list[trio.SocketListener]]],
                     started: float) -> None:
        deadline = StartDeadline(self.node_id, self.config.get("initial.broker.registration.timeout.ms"))
        phase = self._phase_done("locked its log dirs and bound its listeners", started)
        cluster_id = await self.metadata.start(nursery, deadline)
        phase = self._phase_done(f"reached the cluster {cluster_id}", phase)
        self.log_manager = LogManager(self.config.log_dirs, self.node_id, cluster_id, self.log_defaults,
                                      self.disk_quota, self.config.get("producer.id.expiration.ms"))
        self.metadata_cache = MetadataCache(self.metadata.image, self.log_manager.cluster_id,
                                            self.metadata.controller_id)
        phase = self._phase_done("read meta.properties", phase)
        await self.metadata.register(nursery, self.log_manager.cluster_id, self.endpoints, deadline,
                                     self._on_broker_epoch)
        phase = self._phase_done(f"registered with broker epoch {self.metadata.broker_epoch}", phase)
        topic_configs = await self.metadata.topic_configs()
        phase = self._phase_done(f"read the configs of {len(topic_configs)} topics", phase)
        self._load(topic_configs)
        phase = self._phase_done(f"loaded {len(self.log_manager.logs)} logs and applied the metadata to them", phase)
        await nursery.start(self.replica_manager.run)
        await nursery.start(self.log_cleaner.run)
        await nursery.start(self.group_coordinator.run)
        await nursery.start(self.transaction_coordinator.run)
        await nursery.start(self.share_coordinator.run)
        await nursery.start(self.persister.run)
        await nursery.start(self.share_partition_manager.run)
        await nursery.start(self.add_partitions_to_txn.clients.run)
        await nursery.start(self.producer_ids.run)
        nursery.start_soon(self._periodic, self.config.get("log.retention.check.interval.ms"), self._retention)
        nursery.start_soon(self._periodic, self.config.get("log.flush.offset.checkpoint.interval.ms"),
                           self._checkpoint)
        nursery.start_soon(self._periodic, 1000, self._flush_due)
        nursery.start_soon(self._periodic, self.config.get("producer.id.expiration.check.interval.ms"),
                           self._remove_expired_producers)
        for endpoint, listeners in bound:
            nursery.start_soon(self.socket_server.serve, endpoint.listener, listeners)
        phase = self._phase_done("started its replication, group coordinator and listeners", phase)
        await self.metadata.become_ready(nursery, deadline)
        self._phase_done("became ready", phase)
        log.info("broker %d started in %.0f ms", self.node_id, 1000 * (time.monotonic() - started))

    def _phase_done(self, what: str, since: float) -> float:
        """Log at DEBUG how long a phase of the start took, so a slow start shows where its time went; returns the
        time the next phase starts."""
        now = time.monotonic()
        log.debug("broker %d %s in %.0f ms", self.node_id, what, 1000 * (now - since))
        return now

    def _on_broker_epoch(self, broker_epoch: int) -> None:
        if hasattr(self, "replica_manager"):
            self.replica_manager.broker_epoch = broker_epoch

    def _cleaner_fault_point(self, tp: tuple[str, int], point: str) -> None:
        """A cleaner-crash fault: die here as on kill -9 (in-process, where that would kill the test too, as
        crash() does, leaving the files as they are)."""
        if not self.faults.cleaner_crashes.due(tp[0], point):
            return
        log.warning("fault: broker %d crashes at the log cleaner's %s of %s-%d", self.node_id, point, *tp)
        if threading.current_thread() is threading.main_thread():
            os.kill(os.getpid(), signal.SIGKILL)
        self.crash()
        raise CleanerStopped(f"crashed at the cleaner's {point} of {tp[0]}-{tp[1]}")

    def _high_watermark_of(self, tp: tuple[str, int]) -> int | None:
        """A hosted partition's high watermark, which the log cleaner never cleans past; None when not hosted."""
        partition = self.replica_manager.partitions.get(tp)
        return None if partition is None else partition.high_watermark

    def _load(self, topic_configs: dict[str, dict[str, str]]) -> None:
        """Open the logs and become what the metadata says for every partition; from now on each metadata change
        is applied as it is replayed."""
        image = self.metadata.image
        self._reconfigure(image)
        for topic, configs in topic_configs.items():
            self.replication_quotas.update_topic(topic, configs)
        self.log_manager.load_logs(topic_configs)
        self.replica_manager = ReplicaManager(self.node_id, self.log_manager, self.purgatory,
                                              ReplicationConfig.from_broker_config(self.config,
                                                                                   self.inter_broker_security),
                                              leader_endpoint=self._leader_endpoint,
                                              controller_channel=self.controller_channel,
                                              link_is_cut=self.faults.links.is_cut, metrics=self.metrics,
                                              replication_quotas=self.replication_quotas)
        self.replica_manager.broker_epoch = self.metadata.broker_epoch
        self.log_cleaner = LogCleaner(CleanerConfig.from_broker_config(self.dynamic_config.get), self.log_manager,
                                      self._high_watermark_of)
        self.log_manager.removal_listeners.append(self.log_cleaner.manager.forget)
        self.log_cleaner.fault_point = self._cleaner_fault_point
        self.replica_manager.alter_log_dirs_manager.io_max_bytes_per_second = functools.partial(
            self.dynamic_config.replication_throttled_rate, REPLICA_ALTER_LOG_DIRS_IO_MAX_BYTES_PER_SECOND)
        self.producer_ids = ProducerIdManager(self.node_id, self.controller_channel,
                                              lambda: self.metadata.broker_epoch)
        self.group_coordinator = load_group_coordinator(self.config, self.metadata_cache, self.replica_manager)
        self.group_coordinator.group_manager.offsets_changed = \
            lambda group_id: self.purgatory.check_and_complete(committed_offsets_key(group_id))
        self.group_coordinator.group_manager.groups_changed = \
            lambda: self.purgatory.check_and_complete(GROUPS_CHANGED_KEY)
        self.transaction_coordinator = self._transaction_coordinator()
        self.share_coordinator = self._share_coordinator()
        self.persister = DefaultStatePersister(self._broker_clients(f"broker-{self.node_id}-share-persister"),
                                               self.node_id)
        self.group_coordinator.share.state_initializer = self.persister
        self.share_partition_manager = SharePartitionManager(self.config, self.replica_manager, self.purgatory,
                                                             lambda: self.persister,
                                                             lambda group: self.metadata_cache.group_configs(group))
        self.add_partitions_to_txn = AddPartitionsToTxnManager(
            self.metadata_cache, self._broker_clients(f"broker-{self.node_id}-add-partitions-to-txn"))
        self.replica_manager.on_become_leader.append(self._on_become_leader)
        self.replica_manager.on_become_follower.append(self._on_become_follower)
        everything = MetadataChange(
            partitions={(topic.name, index): partition for topic, index, partition in image.partitions()},
            topic_ids={name: topic.topic_id for name, topic in image.topics.items()},
            brokers=set(image.brokers))
        self._publish(image, everything)
        self.metadata.install_publisher(self._publish, self.replica_manager.create_new_logs)
        for tp in sorted(set(self.log_manager.logs) - set(self.replica_manager.partitions)):
            if self.metadata.knows_every_partition_at_start:
                log.warning("partition %s-%s has no replica here in the cluster metadata: its log is a stray, "
                            "kept as %s", *tp, self.log_manager.mark_stray(*tp))
            else:
                log.info("partition %s-%s is not in the metadata yet: its log waits for the controller", *tp)

    def _publish(self, image: MetadataImage, change: MetadataChange) -> None:
        """Apply one replayed change (Kafka's BrokerMetadataPublisher): replicas, topic configs, deleted topics."""
        broker_epochs = {b.broker_id: b.broker_epoch for b in image.brokers.values() if b.active}
        if change.brokers:
            self.replica_manager.update_alive_brokers(broker_epochs)
        if change.broker_configs:
            self._reconfigure(image)
            self.log_cleaner.reconfigure(CleanerConfig.from_broker_config(self.dynamic_config.get))
        self.replica_manager.apply_delta(image, change, broker_epochs)
        for topic in change.topic_configs | {topic for topic, _ in change.partitions}:
            self.replication_quotas.update_topic(topic, image.topic_configs.get(topic, {})
                                                 if topic in image.topics else None)
        for topic in change.topic_configs:
            if topic in image.topics:
                try:
                    self.log_manager.update_topic_config(topic, image.topic_configs.get(topic, {}))
                except ValueError as exc:
                    log.error("configs of topic %s not applied: %s", topic, exc)
        if change.topic_configs or change.broker_configs:
            self.log_cleaner.wake()  # a compaction setting takes effect at once
        for topic in {t for (t, _), state in change.partitions.items() if state is None}:
            if topic not in image.topics:
                self.group_coordinator.offset_manager.on_topic_deleted(topic)
                self.group_coordinator.share.on_topic_deleted(topic)
                log.info("topic %s deleted", topic)
        self.purgatory.check_and_complete(METADATA_CHANGE_KEY)

    def _reconfigure(self, image: MetadataImage) -> None:
        """Apply the dynamic broker configs of this broker and the cluster default (Kafka's DynamicBrokerConfig):
        new log defaults reach every log of a topic without its own overrides, and the throttle rates the
        replication quotas."""
        if self.dynamic_config.update(image.broker_configs):
            self.log_defaults = self.log_manager.defaults = self.dynamic_config.log_defaults
            configs: dict[str, LogConfig] = {}
            for (topic, _index), the_log in self.log_manager.logs.items():
                if topic not in configs:
                    try:
                        configs[topic] = LogConfig.from_props(image.topic_configs.get(topic, {}), self.log_defaults)
                    except ValueError as exc:
                        log.error("configs of topic %s not applied: %s", topic, exc)
                        configs[topic] = the_log.config
                the_log.update_config(configs[topic])
            log.info("broker %d: dynamic broker configs changed the log defaults", self.node_id)
        self.replication_quotas.update_rates(
            self.dynamic_config.replication_throttled_rate(LEADER_REPLICATION_THROTTLED_RATE),
            self.dynamic_config.replication_throttled_rate(FOLLOWER_REPLICATION_THROTTLED_RATE))

    def _transaction_coordinator(self) -> TransactionCoordinator:
        config = self.config
        transaction_config = TransactionConfig.from_broker_config(config)
        topic = self.metadata_cache.topics.get(TRANSACTION_STATE_TOPIC)
        if topic is not None:  # as Kafka: the topic's partition count wins over the setting
            transaction_config.num_partitions = len(topic.partitions)
        transaction_log = CoordinatorLog(self.replica_manager, TRANSACTION_STATE_TOPIC,
                                         config.get("request.timeout.ms"))

        def marker_manager(state_manager: TransactionStateManager) -> TransactionMarkerChannelManager:
            return TransactionMarkerChannelManager(self.metadata_cache, state_manager,
                                                   self._broker_clients(f"broker-{self.node_id}-txn-marker-sender"),
                                                   self.faults.marker_holds.is_held, local_broker_id=self.node_id,
                                                   write_locally=functools.partial(write_markers_locally, self))

        def transaction_version() -> TransactionVersion:
            return TransactionVersion(finalized_level(TRANSACTION_VERSION, self.metadata_cache.image.features))

        return load_transaction_coordinator(transaction_config, transaction_log, marker_manager,
                                            self.producer_ids.generate_producer_id, transaction_version)

    def _share_coordinator(self) -> ShareCoordinator:
        config = self.config

        def num_partitions() -> int:  # as Kafka: the topic's partition count wins over the setting
            topic = self.metadata_cache.topics.get(SHARE_GROUP_STATE_TOPIC)
            return len(topic.partitions) if topic is not None else config.get(
                "share.coordinator.state.topic.num.partitions")

        def partition_count(topic_id: uuid.UUID) -> int | None:
            topic = self.metadata_cache.topics_by_id.get(topic_id)
            return None if topic is None else len(topic.partitions)

        per_snapshot = config.get("share.coordinator.snapshot.update.records.per.snapshot")
        return ShareCoordinator(
            CoordinatorLog(self.replica_manager, SHARE_GROUP_STATE_TOPIC, config.get("request.timeout.ms")),
            num_partitions, lambda: ShareCoordinatorShard(partition_count, wall_clock_ms, per_snapshot), wall_clock_ms)

    def _broker_clients(self, client_id: str) -> BrokerClients:
        """Connections to the brokers on the inter-broker listener, for one of the broker's inter-broker senders."""
        def endpoint_of(broker_id: int) -> tuple[str, int] | None:
            endpoint = self.metadata_cache.alive_endpoint(broker_id, self.config.inter_broker_listener_name)
            return None if endpoint is None else (endpoint.host, endpoint.port)

        return BrokerClients(client_id, endpoint_of,
                             NetworkClientConfig(request_timeout_ms=self.config.get("request.timeout.ms"),
                                                 security=self.inter_broker_security),
                             self.faults.links.is_cut)

    def _connection_closed(self, info: ConnectionInfo) -> None:
        """A client connection closed: the share sessions opened on it end (their members' records released)."""
        if hasattr(self, "share_partition_manager"):
            self.share_partition_manager.connection_closed(str(info.connection_id))

    def _on_become_leader(self, tp: TopicPartition) -> None:
        if tp[0] == GROUP_METADATA_TOPIC:
            self.group_coordinator.on_elected(tp[1])
        elif tp[0] == TRANSACTION_STATE_TOPIC:
            partition = self.replica_manager.get_partition(*tp)
            if partition is not None:
                self.transaction_coordinator.on_elected(tp[1], partition.leader_epoch)
        elif tp[0] == SHARE_GROUP_STATE_TOPIC:
            partition = self.replica_manager.get_partition(*tp)
            if partition is not None:
                self.share_coordinator.on_elected(tp[1], partition.leader_epoch)

    def _on_become_follower(self, tp: TopicPartition) -> None:
        if tp[0] == GROUP_METADATA_TOPIC:
            self.group_coordinator.on_resigned(tp[1])
        elif tp[0] == TRANSACTION_STATE_TOPIC:
            self.transaction_coordinator.on_resigned(tp[1])
        elif tp[0] == SHARE_GROUP_STATE_TOPIC:
            self.share_coordinator.on_resigned(tp[1])

    def _peer_security(self, node_id: int) -> ClientChannelSecurity | None:
        """How a fault reaches node `node_id`'s control API: a broker's on its inter-broker listener, the KRaft
        controller's on its listener."""
        if node_id in self.metadata.image.brokers:
            return self.inter_broker_security
        return self._controller_security

    def _leader_endpoint(self, broker_id: int) -> tuple[str, int] | None:
        """Where followers fetch from: the leader's inter-broker listener."""
        broker = self.metadata.image.brokers.get(broker_id)
        endpoint = broker.endpoint(self.config.inter_broker_listener_name) if broker is not None else None
        return (endpoint.host, endpoint.port) if endpoint is not None else None

    async def _shut_down(self) -> None:
        if self._crashed:
            return
        if self.config.get("controlled.shutdown.enable") and self.metadata.is_ready:
            await self.metadata.controlled_shutdown()
        await self.metadata.deregister()
        self.group_coordinator.shutdown()
        self.purgatory.wake_all()
        await self.socket_server.drain(SHUTDOWN_DRAIN_S)

    def _close_logs(self) -> None:
        if not hasattr(self, "log_manager"):
            return
        if self._crashed:
            self.log_manager.abandon()
            log.warning("broker %d crashed on request: no flush, no checkpoints", self.node_id)
        elif hasattr(self, "replica_manager"):
            self.log_manager.shutdown(self.replica_manager.high_watermarks())
            log.info("broker %d stopped", self.node_id)
        else:  # stopped before its logs were in use: their checkpoints stay as they are
            self.log_manager.abandon()
            log.info("broker %d stopped before it started", self.node_id)

    def stop(self) -> None:
        """A clean stop, as on SIGTERM; during start-up it abandons the start."""
        self._stop.set()
        if self._startup is not None:
            self._startup.cancel()

    async def close_connections(self, keep: int) -> int:
        """Close every client connection but connection `keep` (the control API's connections.close)."""
        return await self.socket_server.close_connections(keep)

    def expire_sessions(self, user: str | None) -> int:
        """End SASL sessions now (the control API's sessions.expire)."""
        return self.socket_server.expire_sessions(user)

    def crash(self) -> None:
        """Stop as a killed process would: requests in flight are dropped, nothing is flushed or checkpointed,
        so the next start recovers from the files as they are. For crash tests of an in-process broker."""
        self._crashed = True
        self.stop()

    def _advertise(self, bound: list[tuple[Endpoint, list[trio.SocketListener]]]) -> list[BrokerEndpointInfo]:
        """Each broker listener as clients reach it: its advertised.listeners entry, else its bound address."""
        advertised = {e.listener: e for e in self.config.advertised_listeners} \
            if self.config.props.get("advertised.listeners") else {}
        endpoints = []
        for endpoint, listeners in bound:
            protocol = SECURITY_PROTOCOLS[self.config.security_protocol(endpoint.listener)]
            if endpoint.listener in advertised:
                chosen = advertised[endpoint.listener]
                endpoints.append(BrokerEndpointInfo(endpoint.listener, chosen.host, chosen.port, protocol))
                continue
            port = listeners[0].socket.getsockname()[1]
            host = endpoint.host if endpoint.host not in ("", "0.0.0.0", "::") else "127.0.0.1"
            endpoints.append(BrokerEndpointInfo(endpoint.listener, host, port, protocol))
        return endpoints

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

    def _remove_expired_producers(self) -> None:
        """Forget the producers idle for producer.id.expiration.ms (Kafka's PeriodicProducerExpirationCheck); one
        with a transaction open stays."""
        now, expiration_ms = now_ms(), self.config.get("producer.id.expiration.ms")
        for the_log in self.log_manager.logs.values():
            the_log.remove_expired_producers(now, expiration_ms)

    def _flush_due(self) -> None:
        self.log_manager.flush_due(now_ms())
