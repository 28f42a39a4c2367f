"""A ZooKeeper-mode broker's metadata source (Kafka's KafkaServer start-up with its ZkMetadataCache and the
ZooKeeper half of ReplicaManager.becomeLeaderOrFollower / stopReplicas).

Start-up as Kafka's: connect to ZooKeeper (the chroot created), create or get /cluster/id, open the log dirs, load
the logs with the topic configs of /config/topics, register the ephemeral /brokers/ids/<id> (its czxid is the
broker epoch), start the controller every such broker runs (it campaigns for /controller), serve, and be ready once
an UpdateMetadata from a controller names this broker and the LeaderAndIsr of every replica it names here has
been applied.

The controller's requests: UpdateMetadata replaces the live brokers and updates (or, for a partition whose leader
is LeaderDuringDelete, removes) the partition states it names; LeaderAndIsr makes this broker's replicas leaders or
followers, refusing per partition a state whose leader epoch is older than the replica's (or equal, with no newer
partition epoch) with STALE_CONTROLLER_EPOCH, as Kafka; StopReplica stops replicas and deletes them when asked.
A request whose controller epoch is older than the latest seen is STALE_CONTROLLER_EPOCH, one for an earlier
registration of this broker STALE_BROKER_EPOCH.

Topic configs come from /config/topics/<t> at start, at a topic's first LeaderAndIsr, and on each
/config/changes notification; dynamic broker configs from /config/brokers/<id> and <default> at start and on each
notification naming them; client quotas and users' SCRAM credentials from their /config/users, /config/clients and
/config/ips znodes at start and on each notification naming them. ZooKeeper is used by the start-up and these tasks
only: the data path never waits on it.
"""
from __future__ import annotations

import base64
import json
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import trio
from kafka.protocol.api_message import ApiMessage

from minikafka.broker.metadata.acls import ZK_EXTENDED_CHANGES, ZK_LITERAL_CHANGES
from minikafka.broker.metadata.client_quota_entity import ClientQuotaEntity, describe_entity, entity_of_zk_path
from minikafka.broker.metadata.features import DEFAULT_FEATURES_EPOCH, levels_of_listing
from minikafka.broker.metadata.metadata_image import (
    BrokerEndpointInfo,
    BrokerInfo,
    MetadataChange,
    MetadataImage,
    PartitionInfo,
    TopicInfo,
)
from minikafka.broker.metadata.metadata_loader import Preparer, Publisher
from minikafka.broker.metadata.metadata_source import StartDeadline
from minikafka.broker.metadata.scram_credentials import user_of_zk_path
from minikafka.broker.network.network_client import DisconnectedError, NetworkClientConfig
from minikafka.broker.network.socket_server import ConnectionInfo
from minikafka.broker.replication.replica_manager import ReplicaManager
from minikafka.broker.security.acl import PatternType, ResourceType
from minikafka.broker.security.client_security import inter_broker_security
from minikafka.broker.zk.controller.kafka_controller import KafkaController
from minikafka.broker.zk.kafka_zk_client import KafkaZkClient
from minikafka.broker.zk.zk_acls import read_acls, read_resource_acls, zk_acl_id
from minikafka.broker.zk.zk_broker_channel import ZkControllerChannel
from minikafka.broker.zk.zk_broker_configs import read_broker_configs, read_entity_broker_configs, resource_name_of
from minikafka.broker.zk.zk_client_quotas import read_client_quotas, read_entity_quotas
from minikafka.broker.zk.zk_data import (
    BROKER_CONFIG,
    CONFIG_CHANGES_PATH,
    FEATURE_PATH,
    TOPIC_CONFIG,
    BrokerRegistration,
    EndPoint,
)
from minikafka.broker.zk.zk_scram_credentials import read_scram_credentials, read_user_credentials
from minikafka.broker.zk.zookeeper_client import ZkClientConfig, ZkEventKind
from minikafka.config import BrokerConfig
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.control_plane import CONTROL_PLANE_SCHEMAS, ControlledShutdownRequest
from minikafka.protocol.errors import ErrorCode

log = logging.getLogger("minikafka.zk_broker")

LEADER_DURING_DELETE = -2  # an UpdateMetadata partition state's leader while its topic is being deleted
CONTROLLED_SHUTDOWN_VERSION = 3
SECURITY_PROTOCOL = "PLAINTEXT"  # every minikafka listener is plaintext
NO_CONTROLLER = -1

ControllerApisHandle = Callable[[ApiMessage, int, ConnectionInfo | None], Awaitable[ApiMessage]]


def _new_cluster_id() -> str:
    """Kafka's generated cluster id: a random UUID, URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class ZkMetadataSource:
    """Holds what it uses of its broker: the link faults (`link_is_cut`), the replica manager (built once the broker
    runs) and the KafkaController the broker server builds over this source's ZooKeeper client and installs."""

    def __init__(self, config: BrokerConfig, link_is_cut: Callable[[int], bool],
                 replica_manager: Callable[[], ReplicaManager]) -> None:
        self.config = config
        self.node_id = config.node_id
        self.image = MetadataImage()
        self.zk = KafkaZkClient(ZkClientConfig.from_properties(config.props))
        self._replica_manager = replica_manager
        self.controller_epoch = -1  # the latest seen in a controller's request (Kafka's ReplicaManager field)
        self.active_controller_id: int | None = None  # as the latest UpdateMetadata named it
        self._controller: KafkaController | None = None  # installed by the broker server
        self.kafka_controller: KafkaController | None = None  # the KafkaController this broker runs, once started
        self._controller_scope: trio.CancelScope | None = None
        self._publisher: Publisher | None = None
        self._prepare: Preparer | None = None
        self._applied: dict[tuple[str, int], int] = {}  # leader epoch applied from LeaderAndIsr, by partition
        self._named = False  # an UpdateMetadata named this broker live
        self._ready = False
        self._changed = trio.Event()  # set (and replaced) on every request from a controller
        self._last_notification: dict[str, int] = {}  # the last change notification handled, by its parent
        client_config = NetworkClientConfig(
            connection_setup_timeout_ms=config.get("socket.connection.setup.timeout.ms"),
            reconnect_backoff_ms=config.get("reconnect.backoff.ms"),
            reconnect_backoff_max_ms=config.get("reconnect.backoff.max.ms"),
            request_timeout_ms=config.get("request.timeout.ms"),
            security=inter_broker_security(config))
        self.controller_channel = ZkControllerChannel(
            self.node_id, self._controller_address, self._local_controller, self._wait_for_change, client_config,
            config.get("request.timeout.ms"), link_is_cut)

    # ---- what the broker server reads ---------------------------------------------------------------------------

    @property
    def broker_epoch(self) -> int:
        return self.zk.broker_epoch

    @property
    def is_ready(self) -> bool:
        return self._ready

    @property
    def knows_every_partition_at_start(self) -> bool:
        return False

    async def catch_up(self) -> bool:
        """Nothing to wait for: the controller answers once every live broker has its UpdateMetadata."""
        return True

    def controller_id(self) -> int:
        return self.active_controller_id if self.active_controller_id is not None else NO_CONTROLLER

    def _controller_address(self) -> tuple[int, tuple[str, int] | None] | None:
        if self.active_controller_id is None:
            return None
        broker = self.image.brokers.get(self.active_controller_id)
        endpoint = broker.endpoint(self.config.inter_broker_listener_name) if broker is not None else None
        return self.active_controller_id, (endpoint.host, endpoint.port) if endpoint is not None else None

    def _local_controller(self) -> ControllerApisHandle | None:
        return self.kafka_controller.apis.handle if self.kafka_controller is not None else None

    async def _wait_for_change(self) -> None:
        await self._changed.wait()

    def _signal_change(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    # ---- start-up -----------------------------------------------------------------------------------------------

    async def start(self, nursery: trio.Nursery, deadline: StartDeadline) -> str:
        started = time.monotonic()
        log.info("broker %d connecting to ZooKeeper at %s (waiting up to %d ms: zookeeper.connection.timeout.ms)",
                 self.node_id, self.zk.config.connect, self.zk.config.effective_connection_timeout_ms)
        await deadline.until(lambda: nursery.start(self.zk.run), f"connect to ZooKeeper at {self.zk.config.connect}")
        log.debug("broker %d connected to ZooKeeper in %.0f ms", self.node_id, 1000 * (time.monotonic() - started))
        await nursery.start(self.controller_channel.run)
        await deadline.until(self.zk.create_top_level_paths, "create the top-level paths in ZooKeeper")
        proposed = self.config.get("cluster.id") or _new_cluster_id()
        return await deadline.until(lambda: self.zk.create_or_get_cluster_id(proposed), "get the cluster id")

    async def register(self, nursery: trio.Nursery, cluster_id: str, endpoints: list[BrokerEndpointInfo],
                       deadline: StartDeadline, on_broker_epoch: Callable[[int], None]) -> None:
        registration = BrokerRegistration(
            self.node_id, tuple(EndPoint(e.name, e.host, e.port, SECURITY_PROTOCOL) for e in endpoints),
            self.config.get("broker.rack"))
        events = self.zk.subscribe()
        await deadline.until(lambda: self.zk.register_broker(registration), "register in ZooKeeper")
        nursery.start_soon(self._follow_session, events, on_broker_epoch)

    async def _follow_session(self, events: trio.MemoryReceiveChannel[Any], on_broker_epoch: Callable[[int], None]
                              ) -> None:
        """A new session re-registers this broker under a new epoch (the client does it): the replicas follow."""
        async for event in events:
            if event.kind == ZkEventKind.NEW_SESSION:
                log.info("broker %d has a new ZooKeeper session: broker epoch %d", self.node_id, self.broker_epoch)
                on_broker_epoch(self.broker_epoch)

    async def topic_configs(self) -> dict[str, dict[str, str]]:
        for path in (CONFIG_CHANGES_PATH, ZK_LITERAL_CHANGES, ZK_EXTENDED_CHANGES):
            self._last_notification[path] = max((_sequence(c) for c in await self.zk.get_children(path)), default=-1)
        topics = await self.zk.get_all_topics_in_cluster()
        self.image.topic_configs = await self.zk.get_topic_configs(topics) if topics else {}
        self.image.client_quotas = await read_client_quotas(self.zk)
        credentials = await read_scram_credentials(self.zk)
        self.image.scram_credentials.clear()
        self.image.scram_credentials.update(credentials)
        await self.acls_altered()
        self.image.broker_configs = await read_broker_configs(self.zk)
        await self.features_altered()
        return self.image.topic_configs

    def install_controller(self, controller: KafkaController) -> None:
        """The controller this broker runs once it serves (built by the broker server over `zk`)."""
        self._controller = controller

    def install_publisher(self, publisher: Publisher, prepare: Preparer) -> None:
        self._publisher = publisher
        self._prepare = prepare

    async def become_ready(self, nursery: trio.Nursery, deadline: StartDeadline) -> None:
        nursery.start_soon(self._follow_notifications, CONFIG_CHANGES_PATH, self._config_changed)
        nursery.start_soon(self._follow_notifications, ZK_LITERAL_CHANGES, self._literal_acls_changed)
        nursery.start_soon(self._follow_notifications, ZK_EXTENDED_CHANGES, self._extended_acls_changed)
        nursery.start_soon(self._follow_features)
        self.kafka_controller = self._controller
        self._controller_scope = trio.CancelScope()
        started = time.monotonic()
        await nursery.start(self._run_controller)
        controller_started = time.monotonic()
        await deadline.until(self._until_counted_in, "be named live by a controller and get its leaderships")
        self._ready = True
        log.debug("broker %d started its controller in %.0f ms, then was named live by controller %d and given its "
                  "leaderships in %.0f ms", self.node_id, 1000 * (controller_started - started),
                  self.controller_id(), 1000 * (time.monotonic() - controller_started))

    async def _run_controller(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        assert self._controller_scope is not None and self.kafka_controller is not None
        with self._controller_scope:
            await self.kafka_controller.run(task_status=task_status)

    async def _until_counted_in(self) -> None:
        while not (self._named and self._replicas_applied()):
            await self._changed.wait()

    def _replicas_applied(self) -> bool:
        for topic, index, partition in self.image.partitions():
            if self.node_id in partition.replicas and self._applied.get((topic.name, index), -1) < \
                    partition.leader_epoch:
                return False
        return True

    # ---- stop ---------------------------------------------------------------------------------------------------

    async def controlled_shutdown(self) -> None:
        """ControlledShutdown to the active controller until it answers that no partition is left here (bounded by
        controlled.shutdown.max.retries, with controlled.shutdown.retry.backoff.ms between tries, as Kafka)."""
        if not any(b.broker_id != self.node_id for b in self.image.live_brokers()):
            log.info("broker %d skips its controlled shutdown: no other live broker could lead its partitions",
                     self.node_id)
            return
        retries = self.config.get("controlled.shutdown.max.retries")
        backoff_s = self.config.get("controlled.shutdown.retry.backoff.ms") / 1000
        R: Any = ControlledShutdownRequest
        for attempt in range(1, retries + 1):
            log.info("broker %d begins its controlled shutdown (attempt %d of %d)", self.node_id, attempt, retries)
            try:
                response = await self.controller_channel.send(
                    R(broker_id=self.node_id, broker_epoch=self.broker_epoch), CONTROLLED_SHUTDOWN_VERSION)
            except DisconnectedError as exc:
                log.warning("broker %d: controlled shutdown not answered: %s", self.node_id, exc)
            else:
                code = ErrorCode(response.error_code)
                if code == ErrorCode.NONE and not response.remaining_partitions:
                    log.info("broker %d: the controller completed its controlled shutdown", self.node_id)
                    return
                log.info("broker %d: controlled shutdown answered %s with %d partitions remaining", self.node_id,
                         code.name, len(response.remaining_partitions))
            if attempt < retries:
                await trio.sleep(backoff_s)
        log.warning("broker %d: controlled shutdown not confirmed after %d attempts; stopping anyway", self.node_id,
                    retries)

    async def deregister(self) -> None:
        """Stop the controller this broker runs, then close the ZooKeeper session: /brokers/ids/<id> goes."""
        if self._controller_scope is not None:
            self._controller_scope.cancel()
        await self.zk.aclose()

    # ---- the controller's requests ------------------------------------------------------------------------------

    async def handle_from_controller(self, request: ApiMessage, version: int) -> ApiMessage:
        response_class = CONTROL_PLANE_SCHEMAS[request.API_KEY].response[version]
        code = self._check_epochs(request)
        if code != ErrorCode.NONE:
            log.warning("broker %d refuses %s from controller %d (controller epoch %d, broker epoch %d): %s",
                        self.node_id, type(request).__name__, request.controller_id, request.controller_epoch,
                        getattr(request, "broker_epoch", -1), code.name)
            return response_class(error_code=code)
        self.controller_epoch = request.controller_epoch
        try:
            if request.API_KEY == ApiKey.UPDATE_METADATA:
                return self._update_metadata(request, response_class)
            if request.API_KEY == ApiKey.LEADER_AND_ISR:
                return await self._leader_and_isr(request, version, response_class)
            return self._stop_replica(request, version, response_class)
        finally:
            self._signal_change()

    def _check_epochs(self, request: Any) -> ErrorCode:
        """Kafka's order: an older controller epoch first, then a broker epoch older than this broker's (-1: a
        controller that does not say; a newer one: the controller saw a re-registration before the broker did)."""
        if request.controller_epoch < self.controller_epoch:
            return ErrorCode.STALE_CONTROLLER_EPOCH
        broker_epoch = getattr(request, "broker_epoch", -1)
        if broker_epoch != -1 and broker_epoch < self.broker_epoch:
            return ErrorCode.STALE_BROKER_EPOCH
        return ErrorCode.NONE

    def _update_metadata(self, request: Any, response_class: Any) -> ApiMessage:
        image = self.image
        brokers = {}
        for b in request.live_brokers:
            endpoints = [BrokerEndpointInfo(e.listener, e.host, e.port, e.security_protocol) for e in b.endpoints]
            epoch = self.broker_epoch if b.id == self.node_id else -1  # UpdateMetadata carries no broker epochs
            brokers[b.id] = BrokerInfo(b.id, uuid.UUID(int=0), epoch, endpoints, b.rack, False, False)
        changed_brokers = set(brokers) ^ set(image.brokers)
        changed_brokers |= {i for i, b in brokers.items() if i in image.brokers and image.brokers[i] != b}
        image.brokers = brokers
        change = MetadataChange(brokers=changed_brokers)
        for topic_state in _topic_states(request):
            name, topic_id = topic_state.topic_name, getattr(topic_state, "topic_id", None)
            for p in topic_state.partition_states:
                if p.leader == LEADER_DURING_DELETE:
                    self._remove_partition(name, p.partition_index, change)
                    continue
                topic = image.topics.get(name)
                if topic is None or (topic_id is not None and topic_id != topic.topic_id and
                                     topic_id != uuid.UUID(int=0)):
                    if topic is not None:
                        image.topics_by_id.pop(topic.topic_id, None)
                    topic = image.topics[name] = TopicInfo(name, topic_id or uuid.UUID(int=0))
                    image.topics_by_id[topic.topic_id] = topic
                topic.partitions[p.partition_index] = PartitionInfo(list(p.replicas), list(p.isr), p.leader,
                                                                    p.leader_epoch, p.zk_version)
        image.offset += 1  # what the metadata cache keeps derived answers by
        self.active_controller_id = request.controller_id
        if self.node_id in brokers:
            self._named = True
        if self._publisher is not None:
            self._publisher(image, change)
        return response_class(error_code=ErrorCode.NONE)

    def _remove_partition(self, name: str, index: int, change: MetadataChange) -> None:
        topic = self.image.topics.get(name)
        if topic is None:
            return
        topic.partitions.pop(index, None)
        change.partitions[(name, index)] = None
        change.topic_ids[name] = topic.topic_id
        self._applied.pop((name, index), None)
        if not topic.partitions:
            del self.image.topics[name]
            self.image.topics_by_id.pop(topic.topic_id, None)
            self.image.topic_configs.pop(name, None)

    async def _leader_and_isr(self, request: Any, version: int, response_class: Any) -> ApiMessage:
        errors: dict[tuple[str, int], ErrorCode] = {}
        change = MetadataChange()
        topic_ids: dict[str, uuid.UUID] = {}
        for topic_state in _topic_states(request):
            name = topic_state.topic_name
            topic_id = getattr(topic_state, "topic_id", None) or uuid.UUID(int=0)
            topic_ids[name] = topic_id
            for p in topic_state.partition_states:
                tp = (name, p.partition_index)
                errors[tp] = self._check_partition(tp, topic_id, p)
                if errors[tp] == ErrorCode.NONE:
                    change.partitions[tp] = PartitionInfo(list(p.replicas), list(p.isr), p.leader, p.leader_epoch,
                                                          p.partition_epoch, list(p.removing_replicas or []),
                                                          list(p.adding_replicas or []))
                    change.topic_ids[name] = topic_id
        missing = {t for t, _ in change.partitions if t not in self.image.topic_configs}
        if missing:  # a topic's first LeaderAndIsr here: its configs from ZooKeeper
            self.image.topic_configs.update(await self.zk.get_topic_configs(missing))
        if change.partitions and self._publisher is not None:
            if self._prepare is not None:
                await self._prepare(self.image, change)
            self._publisher(self.image, change)
            for tp, state in change.partitions.items():
                assert state is not None
                self._applied[tp] = state.leader_epoch
        if version >= 5:  # errors grouped by topic id

            by_topic: dict[str, list[Any]] = {}
            for (name, index), code in errors.items():
                by_topic.setdefault(name, []).append(
                    response_class.LeaderAndIsrPartitionError(partition_index=index,
                                                                                     error_code=code))
            return response_class(error_code=ErrorCode.NONE, topics=[
                response_class.LeaderAndIsrTopicError(topic_id=topic_ids[name], partition_errors=partition_errors)
                for name, partition_errors in by_topic.items()])
        return response_class(error_code=ErrorCode.NONE, partition_errors=[
            response_class.LeaderAndIsrPartitionError(topic_name=name, partition_index=index, error_code=code)
            for (name, index), code in errors.items()])

    def _check_partition(self, tp: tuple[str, int], topic_id: uuid.UUID, state: Any) -> ErrorCode:
        """Kafka's becomeLeaderOrFollower checks of one partition; the controller's decision logic keeps the leader
        epoch on an ISR change, so an equal leader epoch with a newer partition epoch is taken too."""
        if self.node_id not in state.replicas:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        partition = self._replica_manager().get_partition(*tp)
        if partition is None:
            return ErrorCode.NONE
        if topic_id != uuid.UUID(int=0) and partition.topic_id != topic_id:
            return ErrorCode.INCONSISTENT_TOPIC_ID
        if state.leader_epoch > partition.leader_epoch:
            return ErrorCode.NONE
        if state.leader_epoch == partition.leader_epoch and state.partition_epoch > partition.partition_epoch:
            return ErrorCode.NONE
        if state.leader_epoch == partition.leader_epoch:
            self._applied[tp] = state.leader_epoch  # what it says is applied already
        log.info("broker %d ignores LeaderAndIsr of %s-%d at leader epoch %d: it holds leader epoch %d",
                 self.node_id, *tp, state.leader_epoch, partition.leader_epoch)
        return ErrorCode.STALE_CONTROLLER_EPOCH

    def _stop_replica(self, request: Any, version: int, response_class: Any) -> ApiMessage:
        errors = []
        change = MetadataChange()
        replica_manager = self._replica_manager()
        for name, index, leader_epoch, delete in _stop_replica_partitions(request, version):
            partition = replica_manager.get_partition(name, index)
            code = ErrorCode.NONE
            if partition is not None and leader_epoch >= 0 and leader_epoch < partition.leader_epoch:
                code = ErrorCode.FENCED_LEADER_EPOCH  # Kafka's stopReplicas: an older leader epoch is ignored
            elif delete:
                change.partitions[(name, index)] = None
                change.topic_ids[name] = partition.topic_id if partition is not None else uuid.UUID(int=0)
                self._applied.pop((name, index), None)
            elif partition is not None:
                replica_manager.fetcher_manager.remove_fetcher_for_partitions([(name, index)])
            errors.append(response_class.StopReplicaPartitionError(topic_name=name, partition_index=index,
                                                                   error_code=code))
        if change.partitions and self._publisher is not None:
            self._publisher(self.image, change)
        return response_class(error_code=ErrorCode.NONE, partition_errors=errors)

    # ---- requests for the controller that runs here -------------------------------------------------------------

    async def handle_for_controller(self, request: ApiMessage, version: int, peer: ConnectionInfo | None
                                    ) -> ApiMessage:
        handle = self._local_controller()
        if handle is None:
            return CONTROL_PLANE_SCHEMAS[request.API_KEY].response[version](error_code=ErrorCode.NOT_CONTROLLER)
        return await handle(request, version, peer)

    # ---- topic configs ------------------------------------------------------------------------------------------

    async def _follow_notifications(self, path: str, handle: Callable[[str], Awaitable[None]]) -> None:
        """Kafka's ZkNodeChangeNotificationListener: each new sequential child of `path` (a config or ACL change
        notification) is handled once, in sequence order."""
        events = self.zk.subscribe()
        while True:
            try:
                children = await self.zk.get_children(path, watch=True)
                for child in sorted(children, key=_sequence):
                    if _sequence(child) > self._last_notification.get(path, -1):
                        await handle(child)
                        self._last_notification[path] = _sequence(child)
            except Exception as exc:  # noqa: BLE001 - ZooKeeper away for now: tried again on the next event
                log.info("broker %d: change notifications under %s not read: %r", self.node_id, path, exc)
            async for event in events:
                if event.path == path or event.kind in (ZkEventKind.RECONNECTED, ZkEventKind.NEW_SESSION):
                    break
            else:
                return

    async def features_altered(self) -> None:
        """The finalized features read again from /feature: at start, and after this broker forwarded a change."""
        await self._read_features(watch=False)

    async def _read_features(self, *, watch: bool) -> None:
        listed, version = await self.zk.get_feature_levels(watch=watch)
        if listed is None:
            self.image.features = {}
            self.image.features_epoch = DEFAULT_FEATURES_EPOCH
            return
        levels = levels_of_listing(listed)
        if levels != self.image.features:
            log.info("broker %d: finalized features %s", self.node_id,
                     ", ".join(f"{name}={level}" for name, level in sorted(levels.items())))
        self.image.features = levels
        # Past the default epoch (the znode starts at version 0), moving with every write of it.
        self.image.features_epoch = DEFAULT_FEATURES_EPOCH + version + 1

    async def _follow_features(self) -> None:
        """Kafka's FinalizedFeatureChangeListener: /feature read again whenever it changes."""
        events = self.zk.subscribe()
        while True:
            try:
                await self._read_features(watch=True)
            except Exception as exc:  # noqa: BLE001 - ZooKeeper away for now: tried again on the next event
                log.info("broker %d: finalized features not read: %r", self.node_id, exc)
            async for event in events:
                if event.path == FEATURE_PATH or event.kind in (ZkEventKind.RECONNECTED, ZkEventKind.NEW_SESSION):
                    break
            else:
                return

    async def acls_altered(self) -> None:
        """Every ACL read again: at start, and after this broker forwarded an ACL change."""
        self.image.acls = await read_acls(self.zk)
        self.image.acl_version += 1

    async def _literal_acls_changed(self, child: str) -> None:
        data, _stat = await self.zk.get_data_and_stat(f"{ZK_LITERAL_CHANGES}/{child}")
        type_name, _, name = (data or b"").decode().partition(":")
        if type_name in ResourceType.__members__ and name:
            await self._resource_acls_changed(ResourceType[type_name], PatternType.LITERAL, name)

    async def _extended_acls_changed(self, child: str) -> None:
        data, _stat = await self.zk.get_data_and_stat(f"{ZK_EXTENDED_CHANGES}/{child}")
        try:
            event = json.loads(data or b"{}")
            pattern = ResourceType[event["resourceType"]], PatternType[event["patternType"]], str(event["name"])
        except (ValueError, KeyError, TypeError):
            log.warning("broker %d: ACL change notification %s not understood: %r", self.node_id, child, data)
            return
        await self._resource_acls_changed(*pattern)

    async def _resource_acls_changed(self, resource_type: ResourceType, pattern_type: PatternType, name: str) -> None:
        """Kafka's AclAuthorizer.processAclChangeNotification: the pattern's ACLs read again."""
        acls = {acl_id: acl for acl_id, acl in self.image.acls.items()
                if (acl.resource_type, acl.pattern_type, acl.resource_name) != (resource_type, pattern_type, name)}
        for acl in await read_resource_acls(self.zk, resource_type, pattern_type, name):
            acls[zk_acl_id(acl)] = acl
        self.image.acls = acls
        self.image.acl_version += 1
        log.info("broker %d: ACLs of %s:%s:%s changed", self.node_id, resource_type.name, pattern_type.name, name)

    async def _config_changed(self, child: str) -> None:
        data, _stat = await self.zk.get_data_and_stat(f"{CONFIG_CHANGES_PATH}/{child}")
        try:
            notification = json.loads(data or b"{}")
            entity_type, _, entity_name = str(notification.get("entity_path") or "").partition("/")
            if not entity_name:  # version 1 notifications
                entity_type, entity_name = notification.get("entity_type", ""), notification.get("entity_name", "")
        except (ValueError, AttributeError):
            log.warning("broker %d: config change notification %s not understood: %r", self.node_id, child, data)
            return
        quota_entity = entity_of_zk_path(f"{entity_type}/{entity_name}")
        if quota_entity is not None:  # Kafka's UserConfigHandler: a user's quotas and SCRAM credentials
            await self.client_quotas_changed(quota_entity)
            user = user_of_zk_path(f"{entity_type}/{entity_name}")
            if user is not None:
                await self.scram_credentials_changed(user)
            return
        if entity_type == BROKER_CONFIG and entity_name:
            await self._broker_configs_changed(resource_name_of(entity_name))
            return
        if entity_type != TOPIC_CONFIG or not entity_name:
            return
        configs = await self.zk.get_topic_configs([entity_name])
        self.image.topic_configs[entity_name] = configs.get(entity_name, {})
        log.info("broker %d: configs of topic %s changed", self.node_id, entity_name)
        if self._publisher is not None:
            self._publisher(self.image, MetadataChange(topic_configs={entity_name}))

    async def _broker_configs_changed(self, resource_name: str) -> None:
        """Kafka's BrokerConfigHandler: the dynamic configs of a broker (this one or another) or of the cluster
        default are read again and applied."""
        values = await read_entity_broker_configs(self.zk, resource_name)
        if values:
            self.image.broker_configs[resource_name] = values
        else:
            self.image.broker_configs.pop(resource_name, None)
        log.info("broker %d: dynamic configs of broker resource %r changed", self.node_id, resource_name)
        if self._publisher is not None:
            self._publisher(self.image, MetadataChange(broker_configs={resource_name}))

    async def client_quotas_altered(self, entities: list[ClientQuotaEntity]) -> None:
        """Read back at once what this broker had altered; the other brokers learn it from the change
        notifications."""
        for entity in entities:
            try:
                await self.client_quotas_changed(entity)
            except Exception as exc:  # noqa: BLE001 - ZooKeeper away: the change notification brings it later
                log.warning("quotas of %s not read back: %r", describe_entity(entity), exc)

    async def client_quotas_changed(self, entity: ClientQuotaEntity) -> None:
        """Kafka's ClientIdConfigHandler / UserConfigHandler: the entity's quotas are read again; the quota
        managers resolve quotas from the image on every request, so the change applies at once."""
        values = await read_entity_quotas(self.zk, entity)
        if values:
            self.image.client_quotas[entity] = values
        else:
            self.image.client_quotas.pop(entity, None)
        log.info("broker %d: client quotas of %s changed: %s", self.node_id, describe_entity(entity), values)

    async def scram_credentials_altered(self, users: list[str]) -> None:
        """Read back at once the credentials this broker had altered; the other brokers learn them from the change
        notifications."""
        for user in users:
            try:
                await self.scram_credentials_changed(user)
            except Exception as exc:  # noqa: BLE001 - ZooKeeper away: the change notification brings it later
                log.warning("SCRAM credentials of user %r not read back: %r", user, exc)

    async def scram_credentials_changed(self, user: str) -> None:
        """The user's SCRAM credentials are read again (Kafka's UserConfigHandler updating its CredentialCache)."""
        credentials = await read_user_credentials(self.zk, user)
        held = self.image.scram_credentials  # changed in place: whoever holds the mapping sees the change
        for key in [key for key in held if key[0] == user]:
            del held[key]
        held.update({(user, mechanism): credential for mechanism, credential in sorted(credentials.items())})
        log.info("broker %d: SCRAM credentials of user %r changed: mechanisms %s", self.node_id, user,
                 sorted(credentials))


def _sequence(child: str) -> int:
    """The sequence number ZooKeeper appended to a change notification (its last ten digits)."""
    try:
        return int(child[-10:])
    except ValueError:
        return -1


def _topic_states(request: Any) -> list[Any]:
    """Partition states grouped by topic (v0-4 of UpdateMetadata and v0-1 of LeaderAndIsr list them ungrouped)."""
    if request.topic_states is not None and (request.topic_states or not request.ungrouped_partition_states):
        return list(request.topic_states)
    grouped: dict[str, list[Any]] = {}
    for p in request.ungrouped_partition_states or []:
        grouped.setdefault(p.topic_name, []).append(p)
    return [_Grouped(name, states) for name, states in grouped.items()]


class _Grouped:
    def __init__(self, topic_name: str, partition_states: list[Any]) -> None:
        self.topic_name = topic_name
        self.topic_id = None
        self.partition_states = partition_states


def _stop_replica_partitions(request: Any, version: int) -> list[tuple[str, int, int, bool]]:
    """(topic, partition, leader epoch or -1, delete) for each partition a StopReplica names, in any version."""
    if version >= 3:
        return [(t.topic_name, p.partition_index, p.leader_epoch, p.delete_partition)
                for t in request.topic_states for p in t.partition_states]
    if version >= 1:
        return [(t.name, i, -1, request.delete_partitions) for t in request.topics for i in t.partition_indexes]
    return [(p.topic_name, p.partition_index, -1, request.delete_partitions) for p in request.ungrouped_partitions]

