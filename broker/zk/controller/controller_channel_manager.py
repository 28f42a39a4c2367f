"""The ZooKeeper-mode controller's requests to the brokers (Kafka's ControllerChannelManager and
ControllerBrokerRequestBatch).

`ControllerBrokerRequestBatch` is sans-IO: from the controller's image and what a commit changed it builds, for each
live broker, the LeaderAndIsr (v6: partitions it holds a replica of, with topic ids and the live leaders'
inter-broker endpoints, a reassignment's adding and removing replicas), UpdateMetadata (v7: the changed
partitions, offline replicas included, and every live broker; a deleted partition's leader is LEADER_DURING_DELETE,
as Kafka sends it) and StopReplica (v3: the replicas of deleted topics and those a reassignment dropped, deleted) it
must receive, each carrying the controller's id and epoch and the target's broker
epoch.

`ControllerChannelManager` delivers them: one queue and one NetworkClient per live broker, to its inter-broker
listener, requests in order; a failed send is tried again after a backoff while the broker is live and the manager
runs (the controller active). The controller's own broker gets its requests in process, through `local_broker`.
"""
from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import trio
from kafka.protocol.api_message import ApiMessage

from minikafka.broker.metadata.metadata_image import BrokerInfo, MetadataChange, MetadataImage, PartitionInfo
from minikafka.broker.network.failure_log import FailureLog
from minikafka.broker.network.network_client import DisconnectedError, NetworkClient, NetworkClientConfig
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.control_plane import CONTROL_PLANE_SCHEMAS
from minikafka.protocol.metadata_records import MetadataRecord, PartitionRecord

log = logging.getLogger("minikafka.controller")

LEADER_AND_ISR_VERSION = 6
UPDATE_METADATA_VERSION = 7
STOP_REPLICA_VERSION = 3
LEADER_DURING_DELETE = -2  # Kafka's LeaderAndIsr.LeaderDuringDelete: the partition is being deleted
EPOCH_DURING_DELETE = -2  # Kafka's LeaderAndIsr.EpochDuringDelete, StopReplica's leader epoch for a deletion
FULL_REQUEST_TYPE = 0  # LeaderAndIsr type: the controller does not claim to send every partition
RETRY_BACKOFF_S = 0.1  # before a request that failed is sent to a live broker again

LocalBrokerHandler = Callable[[ApiMessage, int], Awaitable[ApiMessage]]
ResponseListener = Callable[[int, ApiMessage, ApiMessage], None]  # (broker id, request, its response)
TopicPartition = tuple[str, int]


@dataclass
class BrokerRequests:
    """What one broker must receive for one change, in the order it must receive it."""

    broker_id: int
    requests: list[tuple[ApiMessage, int]] = field(default_factory=list)


class ControllerBrokerRequestBatch:
    def __init__(self, controller_id: int, controller_epoch: int, inter_broker_listener: str) -> None:
        self.controller_id = controller_id
        self.controller_epoch = controller_epoch
        self.listener = inter_broker_listener
        self._replicas: dict[TopicPartition, list[int]] = {}  # as last sent: who must stop a deleted partition

    def deleted_replicas(self, change: MetadataChange) -> dict[TopicPartition, list[int]]:
        """The replicas of the partitions `change` deletes, as last sent (the image no longer has them)."""
        return {tp: self._replicas.pop(tp, []) for tp, state in change.partitions.items() if state is None}

    def for_change(self, image: MetadataImage, records: Sequence[MetadataRecord], change: MetadataChange,
                   stop: Mapping[int, Sequence[TopicPartition]]) -> list[BrokerRequests]:
        """The requests a commit calls for: StopReplica (delete) of the replicas in `stop` (by broker), UpdateMetadata
        of the changed partitions to every live broker (all partitions to a broker that joined), LeaderAndIsr of
        changed partitions to their replicas (all its replicas to a broker that joined)."""
        new = {(image.topics_by_id[r.topic_id].name, r.partition_id) for r in records
               if isinstance(r, PartitionRecord) and r.topic_id in image.topics_by_id}
        changed = [tp for tp, state in change.partitions.items() if state is not None]
        deleted = [tp for tp, state in change.partitions.items() if state is None]
        joined = {b for b in change.brokers if b in image.brokers and not image.brokers[b].fenced}
        every = [(topic.name, index) for topic, index, _ in image.partitions()]
        # Replicas a reassignment dropped are stopped and deleted too, as Kafka's controller deletes them.
        dropped = {tp: set(self._replicas.get(tp, [])) - set(image.topics[tp[0]].partitions[tp[1]].replicas)
                   for tp in changed}
        self._remember(image, changed)
        out = []
        for broker in image.live_brokers():
            requests = BrokerRequests(broker.broker_id)
            stopped = list(stop.get(broker.broker_id, ())) + [tp for tp in changed if broker.broker_id in dropped[tp]]
            stop_request = self.stop_replica(broker, stopped, delete=True)
            if stop_request is not None:
                requests.requests.append((stop_request, STOP_REPLICA_VERSION))
            if change.brokers or changed or deleted:
                partitions = every if broker.broker_id in joined else changed
                requests.requests.append((self.update_metadata(image, broker, partitions, deleted, change),
                                          UPDATE_METADATA_VERSION))
            leader_and_isr = self.leader_and_isr(image, broker, every if broker.broker_id in joined else changed,
                                                 new)
            if leader_and_isr is not None:
                requests.requests.append((leader_and_isr, LEADER_AND_ISR_VERSION))
            if requests.requests:
                out.append(requests)
        return out

    def for_failover(self, image: MetadataImage) -> list[BrokerRequests]:
        """What a controller taking over sends: UpdateMetadata of everything to every live broker, then
        LeaderAndIsr of all its replicas to each."""
        every = [(topic.name, index) for topic, index, _ in image.partitions()]
        self._remember(image, every)
        out = []
        for broker in image.live_brokers():
            requests = BrokerRequests(broker.broker_id, [
                (self.update_metadata(image, broker, every, [], MetadataChange()), UPDATE_METADATA_VERSION)])
            leader_and_isr = self.leader_and_isr(image, broker, every, set())
            if leader_and_isr is not None:
                requests.requests.append((leader_and_isr, LEADER_AND_ISR_VERSION))
            out.append(requests)
        return out

    def _remember(self, image: MetadataImage, partitions: Iterable[TopicPartition]) -> None:
        for name, index in partitions:
            self._replicas[(name, index)] = list(image.topics[name].partitions[index].replicas)

    # ---- the requests -----------------------------------------------------------------------------------------

    def leader_and_isr(self, image: MetadataImage, broker: BrokerInfo, partitions: Iterable[TopicPartition],
                       new: set[TopicPartition]) -> ApiMessage | None:
        """LeaderAndIsr of those `partitions` the broker holds a replica of; None when it holds none."""
        R = CONTROL_PLANE_SCHEMAS[ApiKey.LEADER_AND_ISR].request[LEADER_AND_ISR_VERSION]
        by_topic: dict[str, list[ApiMessage]] = {}
        leaders: set[int] = set()
        for name, index in partitions:
            topic = image.topics.get(name)
            partition = topic.partitions.get(index) if topic is not None else None
            if partition is None or broker.broker_id not in partition.replicas:
                continue
            by_topic.setdefault(name, []).append(R.LeaderAndIsrPartitionState(
                partition_index=index, controller_epoch=self.controller_epoch, leader=partition.leader,
                leader_epoch=partition.leader_epoch, isr=list(partition.isr),
                partition_epoch=partition.partition_epoch, replicas=list(partition.replicas),
                adding_replicas=list(partition.adding_replicas), removing_replicas=list(partition.removing_replicas),
                is_new=(name, index) in new, leader_recovery_state=0))
            leaders.add(partition.leader)
        if not by_topic:
            return None
        live_leaders = []
        for leader in sorted(leaders):
            info = image.brokers.get(leader)
            endpoint = info.endpoint(self.listener) if info is not None and not info.fenced else None
            if endpoint is not None:
                live_leaders.append(R.LeaderAndIsrLiveLeader(broker_id=leader, host_name=endpoint.host,
                                                             port=endpoint.port))
        request: ApiMessage = R(
            controller_id=self.controller_id, controller_epoch=self.controller_epoch,
            broker_epoch=broker.broker_epoch, request_type=FULL_REQUEST_TYPE,
            topic_states=[R.LeaderAndIsrTopicState(topic_name=name, topic_id=image.topics[name].topic_id,
                                                   partition_states=states)
                          for name, states in by_topic.items()],
            live_leaders=live_leaders)
        return request

    def update_metadata(self, image: MetadataImage, broker: BrokerInfo, partitions: Iterable[TopicPartition],
                        deleted: Iterable[TopicPartition], change: MetadataChange) -> ApiMessage:
        R = CONTROL_PLANE_SCHEMAS[ApiKey.UPDATE_METADATA].request[UPDATE_METADATA_VERSION]
        live = {b.broker_id for b in image.live_brokers()}
        states: dict[str, list[ApiMessage]] = {}
        topic_ids = {}
        for name, index in partitions:
            topic = image.topics.get(name)
            partition = topic.partitions.get(index) if topic is not None else None
            if topic is None or partition is None:
                continue
            topic_ids[name] = topic.topic_id
            states.setdefault(name, []).append(self._metadata_state(R, index, partition, live))
        for name, index in deleted:
            topic_ids[name] = change.topic_ids[name]
            states.setdefault(name, []).append(R.UpdateMetadataPartitionState(
                partition_index=index, controller_epoch=self.controller_epoch, leader=LEADER_DURING_DELETE,
                leader_epoch=EPOCH_DURING_DELETE, isr=[], zk_version=0, replicas=[], offline_replicas=[]))
        request: ApiMessage = R(
            controller_id=self.controller_id, controller_epoch=self.controller_epoch,
            broker_epoch=broker.broker_epoch,
            topic_states=[R.UpdateMetadataTopicState(topic_name=name, topic_id=topic_ids[name],
                                                     partition_states=parts) for name, parts in states.items()],
            live_brokers=[R.UpdateMetadataBroker(
                id=b.broker_id, endpoints=[R.UpdateMetadataBroker.UpdateMetadataEndpoint(
                    port=e.port, host=e.host, listener=e.name, security_protocol=e.security_protocol)
                    for e in b.endpoints], rack=b.rack) for b in image.live_brokers()])
        return request

    def _metadata_state(self, R: Any, index: int, partition: PartitionInfo, live: set[int]) -> ApiMessage:
        state: ApiMessage = R.UpdateMetadataPartitionState(
            partition_index=index, controller_epoch=self.controller_epoch, leader=partition.leader,
            leader_epoch=partition.leader_epoch, isr=list(partition.isr), zk_version=partition.partition_epoch,
            replicas=list(partition.replicas), offline_replicas=[r for r in partition.replicas if r not in live])
        return state

    def stop_replica(self, broker: BrokerInfo, partitions: Iterable[TopicPartition], *,
                     delete: bool) -> ApiMessage | None:
        """StopReplica of `partitions` (deleting their logs with `delete`)."""
        R = CONTROL_PLANE_SCHEMAS[ApiKey.STOP_REPLICA].request[STOP_REPLICA_VERSION]
        by_topic: dict[str, list[ApiMessage]] = {}
        for name, index in partitions:
            by_topic.setdefault(name, []).append(R.StopReplicaTopicState.StopReplicaPartitionState(
                partition_index=index, leader_epoch=EPOCH_DURING_DELETE, delete_partition=delete))
        if not by_topic:
            return None
        request: ApiMessage = R(
            controller_id=self.controller_id, controller_epoch=self.controller_epoch,
            broker_epoch=broker.broker_epoch,
            topic_states=[R.StopReplicaTopicState(topic_name=name, partition_states=parts)
                          for name, parts in by_topic.items()])
        return request


@dataclass
class _Delivery:
    """Requests of one change awaited together: `done` fires when each was answered or given up."""

    remaining: int
    done: trio.Event = field(default_factory=trio.Event)

    def one_done(self) -> None:
        self.remaining -= 1
        if self.remaining <= 0:
            self.done.set()


class _BrokerChannel:
    def __init__(self, broker_id: int, broker_epoch: int, client: NetworkClient | None) -> None:
        self.broker_id = broker_id
        self.broker_epoch = broker_epoch
        self.client = client  # None: this process's own broker
        self.send, self.receive = trio.open_memory_channel[tuple[ApiMessage, int, _Delivery]](math.inf)
        self.scope = trio.CancelScope()


class ControllerChannelManager:
    """Requests to the live brokers; `run()` in the active controller's nursery, and stopping it (cancellation)
    gives up every request not yet answered."""

    def __init__(self, controller_id: int, inter_broker_listener: str, local_broker: LocalBrokerHandler,
                 config: NetworkClientConfig | None = None, on_response: ResponseListener | None = None) -> None:
        self.controller_id = controller_id
        self.listener = inter_broker_listener
        self._local_broker = local_broker
        self._on_response = on_response
        self._config = config or NetworkClientConfig()
        self._channels: dict[int, _BrokerChannel] = {}
        self._nursery: trio.Nursery | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                task_status.started()
                await trio.sleep_forever()
        finally:
            self._nursery = None
            for channel in self._channels.values():
                self._abandon(channel)
            self._channels.clear()

    def update_brokers(self, image: MetadataImage) -> None:
        """Open channels to live brokers not yet reached (or back under a new epoch), and close those to
        brokers no longer live; requests queued for those are given up."""
        live = {b.broker_id: b for b in image.live_brokers()}
        for broker_id, channel in list(self._channels.items()):
            broker = live.get(broker_id)
            if broker is None or broker.broker_epoch != channel.broker_epoch:
                self._remove(broker_id)
        for broker_id, broker in live.items():
            if broker_id not in self._channels:
                self._add(broker)

    def send(self, batches: Sequence[BrokerRequests]) -> trio.Event:
        """Queue each broker's requests; the event fires once all were answered or given up."""
        delivery = _Delivery(sum(len(b.requests) for b in batches))
        if delivery.remaining == 0:
            delivery.done.set()
        for batch in batches:
            channel = self._channels.get(batch.broker_id)
            for request, version in batch.requests:
                if channel is None:
                    delivery.one_done()
                else:
                    channel.send.send_nowait((request, version, delivery))
        return delivery.done

    def _add(self, broker: BrokerInfo) -> None:
        assert self._nursery is not None, "run() first"
        client = None
        if broker.broker_id != self.controller_id:
            endpoint = broker.endpoint(self.listener)
            if endpoint is None:
                log.warning("broker %d has no %s endpoint: the controller cannot reach it", broker.broker_id,
                            self.listener)
                return
            client = NetworkClient(broker.broker_id, endpoint.host, endpoint.port,
                                   f"controller-{self.controller_id}-to-broker-{broker.broker_id}", self._config)
        channel = _BrokerChannel(broker.broker_id, broker.broker_epoch, client)
        self._channels[broker.broker_id] = channel
        self._nursery.start_soon(self._deliver, channel)

    def _remove(self, broker_id: int) -> None:
        channel = self._channels.pop(broker_id)
        channel.scope.cancel()
        self._abandon(channel)

    @staticmethod
    def _abandon(channel: _BrokerChannel) -> None:
        channel.send.close()
        while True:
            try:
                _, _, delivery = channel.receive.receive_nowait()
            except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                break
            delivery.one_done()

    async def _deliver(self, channel: _BrokerChannel) -> None:
        """Send the broker's requests one after the other, each until it is answered."""
        failures = FailureLog(log, f"controller {self.controller_id} sending to broker {channel.broker_id}")
        with channel.scope:
            async with trio.open_nursery() as nursery:
                if channel.client is not None:
                    await nursery.start(channel.client.run)
                try:
                    async for request, version, delivery in channel.receive:
                        try:
                            await self._send_until_answered(channel, request, version, failures)
                        finally:
                            delivery.one_done()
                finally:
                    if channel.client is not None:
                        await channel.client.aclose()

    async def _send_until_answered(self, channel: _BrokerChannel, request: ApiMessage, version: int,
                                   failures: FailureLog) -> None:
        while True:
            try:
                if channel.client is None:
                    response = await self._local_broker(request, version)
                else:
                    response = await channel.client.send(request, version)
            except DisconnectedError as exc:
                failures.failed(str(exc))
                await trio.sleep(RETRY_BACKOFF_S)
                continue
            failures.succeeded()
            if self._on_response is not None:
                self._on_response(channel.broker_id, request, response)
            return
