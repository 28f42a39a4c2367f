"""The controller of a ZooKeeper-mode cluster (Kafka's KafkaController), run by every broker: one is elected.

Campaign: while /controller is absent, try to create it together with an increment of /controller_epoch (one
multi-op); the broker that wins is the controller under that epoch, and every write it makes is conditional on the
epoch's znode version, so once another is elected its writes fail (ControllerMovedError) and it resigns.

Failover (onControllerFailover): a fresh image is read from ZooKeeper (live brokers with their czxid as broker
epoch, topics, partition states, configs, the producer-id block) into a QuorumController over the ZooKeeper store
(the KRaft controller's decisions, Kafka's znodes); partitions whose leader or ISR members are not live get new
leaders and ISRs (clean elections, unclean where the topic or broker config allows), every live broker gets
UpdateMetadata (everything) and LeaderAndIsr (all its replicas), and topic deletions left pending are taken up again.
From then on each commit sends the brokers what it changed, and changes of /brokers/ids make brokers join or leave
by KRaft's register/unfence and fence rules. A deleted topic's znodes go once all its replicas answered StopReplica
(topic_deletion_manager.py).

Resignation: on ControllerMovedError, on the loss of the ZooKeeper session, or when /controller names another
broker; the controller's tasks stop, its APIs answer NOT_CONTROLLER, and it campaigns again when /controller goes.
A ZooKeeper write that fails otherwise leaves the controller unsure of ZooKeeper's state: it resigns and deletes
/controller, so an election follows and the winner reads everything again (Kafka's triggerControllerMove).
"""
from __future__ import annotations

import logging
from collections.abc import Sequence

import trio
from kafka.protocol.api_message import ApiMessage
from kazoo.exceptions import KazooException

from minikafka.broker.controller.cluster_control import LiveBroker
from minikafka.broker.controller.controller_config import QuorumControllerConfig
from minikafka.broker.controller.quorum_controller import QuorumController
from minikafka.broker.metadata.metadata_image import BrokerEndpointInfo, MetadataChange, MetadataImage
from minikafka.broker.network.network_client import NetworkClientConfig
from minikafka.broker.security.client_security import inter_broker_security
from minikafka.broker.zk.controller.controller_channel_manager import (
    ControllerBrokerRequestBatch,
    ControllerChannelManager,
    LocalBrokerHandler,
)
from minikafka.broker.zk.controller.topic_deletion_manager import TopicDeletionManager
from minikafka.broker.zk.controller.zk_controller_apis import ZkControllerApis
from minikafka.broker.zk.controller.zk_metadata_store import SECURITY_PROTOCOL_IDS, ZkMetadataStore
from minikafka.broker.zk.kafka_zk_client import BrokerAndEpoch, ControllerMovedError, KafkaZkClient
from minikafka.broker.zk.zk_data import BROKER_IDS_PATH, CONTROLLER_PATH
from minikafka.broker.zk.zookeeper_client import ZkEvent, ZkEventKind
from minikafka.config import BrokerConfig
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.metadata_records import MetadataRecord

log = logging.getLogger("minikafka.controller")

_CONTROLLER_EVENTS = (ZkEventKind.NODE_CREATED, ZkEventKind.NODE_DELETED, ZkEventKind.NODE_DATA_CHANGED)


class _Resign(Exception):
    """This broker is no longer the controller."""


def live_brokers(brokers: dict[int, BrokerAndEpoch]) -> dict[int, LiveBroker]:
    """/brokers/ids as the quorum controller takes it."""
    return {broker_id: LiveBroker(b.epoch, [BrokerEndpointInfo(e.listener_name, e.host, e.port,
                                                                SECURITY_PROTOCOL_IDS.get(e.security_protocol, 0))
                                            for e in b.broker.endpoints], b.broker.rack)
            for broker_id, b in brokers.items()}


class KafkaController:
    def __init__(self, config: BrokerConfig, zk: KafkaZkClient, local_broker: LocalBrokerHandler) -> None:
        self.config = config
        self.node_id = config.node_id
        self.zk = zk
        self.controller_config = QuorumControllerConfig.from_broker_config(config)
        self._local_broker = local_broker
        self._network_config = NetworkClientConfig(request_timeout_ms=config.get("request.timeout.ms"),
                                                   security=inter_broker_security(config))
        self.is_active = False
        self.controller_epoch = -1
        self.active_controller_id: int | None = None
        self.quorum: QuorumController | None = None  # while active
        self.apis = ZkControllerApis(self._active_quorum, self.wait_propagated)
        self._store: ZkMetadataStore | None = None
        self._channel: ControllerChannelManager | None = None
        self._batch: ControllerBrokerRequestBatch | None = None
        self._moved = trio.Event()
        self._propagated = trio.Event()  # the requests of the latest commit were all answered (or given up)
        self._propagated.set()
        self._deletions = TopicDeletionManager()
        self._nursery: trio.Nursery | None = None  # the active controller's

    @property
    def request_timeout_s(self) -> float:
        return self._network_config.request_timeout_ms / 1000

    def _active_quorum(self) -> QuorumController | None:
        """The quorum controller while this broker is the active controller, None otherwise."""
        return self.quorum if self.is_active else None

    async def wait_propagated(self) -> None:
        """Until the brokers answered the requests of the latest commit (bounded by request.timeout.ms)."""
        with trio.move_on_after(self.request_timeout_s):
            await self._propagated.wait()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Campaign, act while elected, campaign again after resigning; until cancelled."""
        events = self.zk.subscribe()
        try:
            task_status.started()
            while True:
                self.active_controller_id = await self.zk.get_controller_id(watch=True)
                if self.active_controller_id is None:
                    try:
                        epoch, version = await self.zk.register_controller_and_increment_controller_epoch(
                            self.node_id)
                    except ControllerMovedError:
                        continue  # another broker won: read who
                    self.active_controller_id = self.node_id
                    await self._act(epoch, version, events)
                    continue
                await self._next_controller_event(events)
        finally:
            events.close()

    async def _next_controller_event(self, events: trio.MemoryReceiveChannel[ZkEvent]) -> None:
        async for event in events:
            if event.path == CONTROLLER_PATH and event.kind in _CONTROLLER_EVENTS:
                return
            if event.kind in (ZkEventKind.NEW_SESSION, ZkEventKind.RECONNECTED):
                return

    # ---- active -----------------------------------------------------------------------------------------------

    async def _act(self, epoch: int, version: int, events: trio.MemoryReceiveChannel[ZkEvent]) -> None:
        log.info("broker %d is the controller, epoch %d: loading the cluster's state from ZooKeeper", self.node_id,
                 epoch)
        started = trio.current_time()
        self.controller_epoch = epoch
        self._moved = trio.Event()
        move = False
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self._resign_when_moved, nursery.cancel_scope)
                try:
                    await self._failover(epoch, version, nursery)
                    log.info("controller %d (epoch %d) is active after %.3f s", self.node_id, epoch,
                             trio.current_time() - started)
                    await self._process(events)
                except (ControllerMovedError, _Resign) as exc:
                    log.info("controller %d (epoch %d) resigns: %s", self.node_id, epoch, exc or type(exc).__name__)
                except KazooException as exc:
                    log.error("controller %d (epoch %d) resigns: reading ZooKeeper failed (%s)", self.node_id, epoch,
                              type(exc).__name__)
                    move = True
                nursery.cancel_scope.cancel()
        finally:
            move = move or (self._store is not None and self._store.state_unknown)
            self._resign()
        if move:
            await self._move_controller(version)

    async def _move_controller(self, epoch_zk_version: int) -> None:
        """Give up /controller (only while this controller's epoch stands), so that an election follows."""
        try:
            await self.zk.delete_controller(epoch_zk_version)
        except (ControllerMovedError, KazooException) as exc:
            log.info("controller %d did not delete /controller (%s): another controller was elected",
                     self.node_id, type(exc).__name__)

    async def _resign_when_moved(self, scope: trio.CancelScope) -> None:
        await self._moved.wait()
        log.info("controller %d (epoch %d) resigns: another controller was elected", self.node_id,
                 self.controller_epoch)
        scope.cancel()

    def _resign(self) -> None:
        if self._store is not None:
            self._store.deposed = True  # nothing more is written under this epoch
        self.is_active = False
        self.quorum = None
        self._store = None
        self._channel = None
        self._batch = None
        self._nursery = None
        self._deletions = TopicDeletionManager()
        self._propagated.set()

    async def _failover(self, epoch: int, version: int, nursery: trio.Nursery) -> None:
        zk = self.zk
        await zk.get_sorted_broker_list(watch=True)
        image = MetadataImage()
        store = ZkMetadataStore(zk, epoch, version, image, on_controller_moved=self._moved.set)
        await store.read_state()
        cluster_id = await zk.get_cluster_id() or ""
        quorum = QuorumController(self.controller_config, store, cluster_id, broker_sessions=False, image=image)
        self._store, self.quorum = store, quorum
        await quorum.sync_live_brokers(live_brokers(await zk.get_all_broker_and_epochs_in_cluster()))
        self._batch = ControllerBrokerRequestBatch(self.node_id, epoch, self.config.inter_broker_listener_name)
        self._channel = ControllerChannelManager(self.node_id, self.config.inter_broker_listener_name,
                                                 self._local_broker, self._network_config, self._on_response)
        await nursery.start(self._channel.run)
        self._channel.update_brokers(image)
        self._propagated = self._channel.send(self._batch.for_failover(image))
        quorum.commit_listeners.append(self._on_commit)
        await nursery.start(quorum.run)
        self.is_active = True
        for name in store.stale_deletion_marks:
            await store.complete_topic_deletion(name)
        if store.pending_deletions:
            log.info("resuming the deletion of %s", ", ".join(store.pending_deletions))
            await quorum.delete_topics([(name, None) for name in store.pending_deletions])

    def _on_commit(self, records: Sequence[MetadataRecord], change: MetadataChange) -> None:
        if self._channel is None or self._batch is None or self.quorum is None:
            return
        image = self.quorum.image
        self._channel.update_brokers(image)
        for broker_id in change.brokers:
            self._deletions.broker_restarted(broker_id)
        self._finish_deletions(self._deletions.enqueue(self._batch.deleted_replicas(change)))
        stop = self._deletions.to_stop(b.broker_id for b in image.live_brokers())
        self._propagated = self._channel.send(self._batch.for_change(image, records, change, stop))

    def _on_response(self, broker_id: int, request: ApiMessage, response: ApiMessage) -> None:
        if request.API_KEY == ApiKey.STOP_REPLICA:
            self._finish_deletions(self._deletions.on_stop_replica_response(broker_id, response))

    def _finish_deletions(self, topics: list[str]) -> None:
        if topics and self._nursery is not None:
            self._nursery.start_soon(self._complete_deletions, topics)

    async def _complete_deletions(self, topics: list[str]) -> None:
        store = self._store
        for name in topics:
            if store is None or store.deposed:
                return
            try:
                await store.complete_topic_deletion(name)
            except ControllerMovedError:
                return  # the store deposed this controller; its nursery is being cancelled
            self._deletions.forget(name)
            log.info("topic %s is deleted: every replica was deleted", name)

    async def _process(self, events: trio.MemoryReceiveChannel[ZkEvent]) -> None:
        """React to ZooKeeper until resigning (raises _Resign)."""
        async for event in events:
            if event.kind is ZkEventKind.SESSION_EXPIRED:
                raise _Resign("the ZooKeeper session expired")
            if event.kind is ZkEventKind.NEW_SESSION or (event.path == CONTROLLER_PATH
                                                          and event.kind in _CONTROLLER_EVENTS):
                current = await self.zk.get_controller_id(watch=True)
                self.active_controller_id = current
                if current != self.node_id:
                    raise _Resign(f"/controller names broker {current}")
            elif event.path == BROKER_IDS_PATH and event.kind is ZkEventKind.NODE_CHILDREN_CHANGED:
                await self._brokers_changed()

    async def _brokers_changed(self) -> None:
        assert self.quorum is not None
        brokers = await self.zk.get_all_broker_and_epochs_in_cluster(watch=True)
        await self.quorum.sync_live_brokers(live_brokers(brokers))

