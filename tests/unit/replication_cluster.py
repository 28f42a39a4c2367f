"""Brokers that replicate, for the replication tests: each a broker's replication data path (its logs, replica
manager, purgatory and request handlers) served on a loopback port in the test's own trio loop, and a stand-in
controller that decides leadership and answers AlterPartition as the controller does.

The stand-in publishes every partition change to every running broker through the replica manager's
`apply_partition_state` (where the metadata log would carry it), keeps the topics each broker's handlers resolve,
and keeps the broker epochs (a restarted broker registers with a new one). Nothing else of a broker runs: no
registration, no group coordinator.
"""
from __future__ import annotations

import dataclasses
import itertools
import struct
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.consumer.fetch import FetchRequest
from kafka.protocol.producer.produce import ProduceRequest

from minikafka.broker.faults.disk_quota import DiskQuota
from minikafka.broker.faults.injector import FaultInjector
from minikafka.broker.log.log_manager import LogManager
from minikafka.broker.metadata.metadata_image import BrokerEndpointInfo, PartitionInfo
from minikafka.broker.network.request_channel import RequestChannel
from minikafka.broker.network.socket_server import SocketServer
from minikafka.broker.replication.fetch_session import FetchSessionCache
from minikafka.broker.replication.partition import Partition
from minikafka.broker.replication.purgatory import Purgatory
from minikafka.broker.replication.replica_manager import ReplicaManager
from minikafka.broker.replication.replication_config import ReplicationConfig
from minikafka.broker.server import handlers
from minikafka.broker.server.api_version_manager import ApiVersionManager
from minikafka.broker.server.client_quota_manager import QuotaManagers
from minikafka.broker.server.kafka_apis import KafkaApis
from minikafka.broker.server.request_recording import RequestRecorder
from minikafka.config import BrokerConfig
from minikafka.protocol.codec import SCHEMAS
from minikafka.protocol.control_plane import AlterPartitionResponse
from minikafka.protocol.errors import ErrorCode
from minikafka.protocol.framing import FrameDecoder
from minikafka.storage.log import Log
from minikafka.storage.log_config import LogConfig
from tests.raw_client import record_batch

TopicPartition = tuple[str, int]

# Fast enough for tests: a follower out of sync for a second leaves the ISR, fetchers retry after 50 ms.
REPLICATION = ReplicationConfig(replica_lag_time_max_ms=1000, replica_fetch_backoff_ms=50,
                                replica_fetch_wait_max_ms=200)
WAIT_S = 20.0  # a budget for conditions that take well under a second


@dataclasses.dataclass
class TopicState:
    name: str
    topic_id: uuid.UUID
    partitions: dict[int, PartitionInfo]
    configs: dict[str, str]


class TopicDirectory:
    """The topics a broker's handlers resolve, by name and by id."""

    def __init__(self) -> None:
        self.topics: dict[str, TopicState] = {}
        self.topics_by_id: dict[uuid.UUID, TopicState] = {}
        self.replica_manager: ReplicaManager | None = None

    def add(self, topic: TopicState) -> None:
        self.topics[topic.name] = topic
        self.topics_by_id[topic.topic_id] = topic

    def leader_endpoint(self, broker_id: int, listener: str) -> BrokerEndpointInfo | None:
        """Every broker here has one listener, the one the replica manager knows."""
        address = self.replica_manager.leader_endpoint(broker_id) if self.replica_manager is not None else None
        return BrokerEndpointInfo(listener, address[0], address[1], 0) if address is not None else None


class ReplicatingBroker:
    """A broker's replication data path on a loopback port. `crash()` stops it as kill -9 would: nothing flushed
    or checkpointed, so the next start on the same dir recovers from the files."""

    def __init__(self, node_id: int, data_dir: Path, config: ReplicationConfig) -> None:
        self.node_id = node_id
        self.config = BrokerConfig({})  # the broker properties handlers read, at Kafka's defaults
        self.purgatory = Purgatory()
        self.fetch_sessions = FetchSessionCache(self.config.get("max.incremental.fetch.session.cache.slots"))
        self.disk_quota = DiskQuota([data_dir])
        self.faults = FaultInjector(self.purgatory, self.disk_quota, lambda: self.metadata_cache)
        self.recorder = RequestRecorder(self.purgatory)
        self.client_quotas = QuotaManagers.over(dict)  # no client quotas
        self.authorizer = None  # no authorizer: every request is allowed
        self.log_manager = LogManager([data_dir], node_id, "replication-tests", LogConfig(), self.disk_quota)
        self.replica_manager = ReplicaManager(node_id, self.log_manager, self.purgatory, config)
        # Handlers look topics up here, under the name of the broker's metadata (older and newer).
        self.metadata_cache = self.controller = TopicDirectory()
        self.metadata_cache.replica_manager = self.replica_manager
        self.api_versions = ApiVersionManager(handlers.MODULES)
        apis = KafkaApis(self, self.api_versions, handlers.MODULES)
        channel = RequestChannel(apis.request_schemas("PLAINTEXT"), apis.handle, lambda: self.socket_server.draining)
        self.socket_server = SocketServer(channel.process, 100 << 20, 600.0)
        self.address: tuple[str, int] = ("127.0.0.1", 0)
        self._stop = trio.Event()
        self._crashed = False

    async def run(self, topic_configs: dict[str, dict[str, str]], *,
                  task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        self.log_manager.load_logs(topic_configs)
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.address = listeners[0].socket.getsockname()[:2]
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self.socket_server.serve, "PLAINTEXT", listeners)
                await nursery.start(self.replica_manager.run)
                task_status.started()
                await self._stop.wait()
                if not self._crashed:
                    self.purgatory.wake_all()
                    await self.socket_server.drain(WAIT_S)
                nursery.cancel_scope.cancel()
        finally:
            if self._crashed:
                self.log_manager.abandon()
            else:
                self.log_manager.shutdown(self.replica_manager.high_watermarks())

    def stop(self) -> None:
        self._stop.set()

    def crash(self) -> None:
        self._crashed = True
        self._stop.set()


class ControllerChannelStandIn:
    """One broker's channel to the stand-in controller."""

    def __init__(self, controller: StandInController, broker_id: int) -> None:
        self._controller = controller
        self._broker_id = broker_id

    async def send(self, request: ApiMessage, version: int | None = None) -> ApiMessage:
        await trio.lowlevel.checkpoint()
        return self._controller.alter_partition(self._broker_id, request)


class StandInController:
    def __init__(self, cluster: ReplicationCluster) -> None:
        self._cluster = cluster
        self.topics: dict[str, TopicState] = {}
        self.isr_changes = 0

    def create_topic(self, name: str, assignment: dict[int, list[int]], configs: dict[str, str] | None = None,
                     ) -> uuid.UUID:
        topic = TopicState(name, uuid.uuid4(), {i: PartitionInfo(list(r), list(r), r[0], 0, 0)
                                                for i, r in assignment.items()}, dict(configs or {}))
        self.topics[name] = topic
        for broker_id in self._cluster.servers:
            self.register(broker_id, topic)
        for index in topic.partitions:
            self.publish(name, index)
        return topic.topic_id

    def state(self, topic: str, index: int) -> PartitionInfo:
        return self.topics[topic].partitions[index]

    def elect(self, topic: str, index: int, leader: int, isr: list[int] | None = None) -> PartitionInfo:
        """A new leader (clean or unclean: the caller picks the ISR) at the next leader epoch, published."""
        old = self.state(topic, index)
        new = dataclasses.replace(old, leader=leader, isr=list(isr if isr is not None else old.isr),
                                  leader_epoch=old.leader_epoch + 1, partition_epoch=old.partition_epoch + 1)
        self.topics[topic].partitions[index] = new
        self.publish(topic, index)
        return new

    def register(self, broker_id: int, topic: TopicState) -> None:
        """The topic in the broker's own metadata, so its handlers resolve it by name and by id."""
        self._cluster.servers[broker_id].metadata_cache.add(topic)

    def publish(self, topic: str, index: int, to: list[int] | None = None) -> None:
        state = self.topics[topic]
        for broker_id in to if to is not None else list(self._cluster.servers):
            self._cluster.replica_manager(broker_id).apply_partition_state(
                topic, state.topic_id, index, state.partitions[index], state.configs,
                dict(self._cluster.broker_epochs))

    def alter_partition(self, broker_id: int, request: Any) -> ApiMessage:
        R = AlterPartitionResponse
        T, P = R.TopicData, R.TopicData.PartitionData
        epochs = self._cluster.broker_epochs
        if epochs.get(broker_id) != request.broker_epoch:
            return R(throttle_time_ms=0, error_code=ErrorCode.STALE_BROKER_EPOCH, topics=[])
        by_id = {t.topic_id: t for t in self.topics.values()}
        topics_out = []
        for t in request.topics:
            topic = by_id.get(t.topic_id)
            parts = []
            for p in t.partitions:
                state = topic.partitions.get(p.partition_index) if topic is not None else None
                code = ErrorCode.NONE
                if topic is None or state is None:
                    code = ErrorCode.UNKNOWN_TOPIC_ID
                elif p.leader_epoch < state.leader_epoch:
                    code = ErrorCode.FENCED_LEADER_EPOCH
                elif state.leader != broker_id or p.leader_epoch > state.leader_epoch:
                    code = ErrorCode.INVALID_REQUEST
                elif p.partition_epoch != state.partition_epoch:
                    code = ErrorCode.INVALID_UPDATE_VERSION
                elif any(b.broker_id not in epochs or b.broker_epoch not in (-1, epochs[b.broker_id])
                         for b in p.new_isr_with_epochs):
                    code = ErrorCode.INELIGIBLE_REPLICA
                if code != ErrorCode.NONE:
                    parts.append(P(partition_index=p.partition_index, error_code=code, leader_id=-1, leader_epoch=-1,
                                   isr=[], leader_recovery_state=0, partition_epoch=-1))
                    continue
                assert topic is not None and state is not None
                state = dataclasses.replace(state, isr=[b.broker_id for b in p.new_isr_with_epochs],
                                            partition_epoch=state.partition_epoch + 1)
                topic.partitions[p.partition_index] = state
                self.isr_changes += 1
                parts.append(P(partition_index=p.partition_index, error_code=ErrorCode.NONE, leader_id=state.leader,
                               leader_epoch=state.leader_epoch, isr=list(state.isr), leader_recovery_state=0,
                               partition_epoch=state.partition_epoch))
                # The committed change reaches every broker afterwards, as through the metadata log.
                self._cluster.nursery.start_soon(self._publish_soon, topic.name, p.partition_index)
            topics_out.append(T(topic_id=t.topic_id, partitions=parts))
        return R(throttle_time_ms=0, error_code=ErrorCode.NONE, topics=topics_out)

    async def _publish_soon(self, topic: str, index: int) -> None:
        self.publish(topic, index)


class ReplicationCluster:
    """Brokers 1..n in one trio loop; each can be stopped, crashed and started again on its data dir, getting a
    new broker epoch."""

    def __init__(self, nursery: trio.Nursery, base_dir: Path, broker_ids: tuple[int, ...] = (1, 2, 3),
                 config: ReplicationConfig = REPLICATION) -> None:
        self.nursery = nursery
        self.base_dir = base_dir
        self.broker_ids = broker_ids
        self.config = config
        self.servers: dict[int, ReplicatingBroker] = {}
        self.broker_epochs: dict[int, int] = {}
        self.controller = StandInController(self)
        self._stopped: dict[int, trio.Event] = {}
        self._epochs = itertools.count(100)

    async def start_all(self) -> None:
        for broker_id in self.broker_ids:
            await self.start(broker_id)

    async def start(self, broker_id: int) -> ReplicatingBroker:
        server = ReplicatingBroker(broker_id, self.base_dir / f"broker-{broker_id}", self.config)
        stopped = trio.Event()
        configs = {name: topic.configs for name, topic in self.controller.topics.items()}

        async def run(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
            try:
                await server.run(configs, task_status=task_status)
            finally:
                stopped.set()

        await self.nursery.start(run)
        self._stopped[broker_id] = stopped
        self.servers[broker_id] = server
        self.broker_epochs[broker_id] = next(self._epochs)
        rm = server.replica_manager
        rm.broker_epoch = self.broker_epochs[broker_id]
        rm.leader_endpoint = self.endpoint
        rm.alter_partition_manager.channel = ControllerChannelStandIn(self.controller, broker_id)
        for topic in self.controller.topics.values():
            self.controller.register(broker_id, topic)
            for index in topic.partitions:
                self.controller.publish(topic.name, index, to=[broker_id])
        self._brokers_changed()
        return server

    async def stop(self, broker_id: int) -> None:
        self.servers[broker_id].stop()
        await self._gone(broker_id)

    async def crash(self, broker_id: int) -> None:
        """As kill -9: nothing flushed or checkpointed (what was written stays in the files)."""
        self.servers[broker_id].crash()
        await self._gone(broker_id)

    async def _gone(self, broker_id: int) -> None:
        with trio.fail_after(WAIT_S):
            await self._stopped.pop(broker_id).wait()
        del self.servers[broker_id]
        del self.broker_epochs[broker_id]  # fenced
        self._brokers_changed()

    def _brokers_changed(self) -> None:
        for server in self.servers.values():
            server.replica_manager.update_alive_brokers(dict(self.broker_epochs))

    def stop_all(self) -> None:
        for server in self.servers.values():
            server.stop()

    def endpoint(self, broker_id: int) -> tuple[str, int] | None:
        server = self.servers.get(broker_id)
        return server.address if server is not None else None

    def replica_manager(self, broker_id: int) -> ReplicaManager:
        return self.servers[broker_id].replica_manager

    def partition(self, broker_id: int, topic: str, index: int = 0) -> Partition:
        partition = self.replica_manager(broker_id).get_partition(topic, index)
        assert partition is not None, f"broker {broker_id} hosts no {topic}-{index}"
        return partition

    def log(self, broker_id: int, topic: str, index: int = 0) -> Log:
        return self.partition(broker_id, topic, index).log

    async def client(self, broker_id: int) -> Client:
        address = self.endpoint(broker_id)
        assert address is not None
        return Client(await trio.open_tcp_stream(*address))


@asynccontextmanager
async def running_cluster(base_dir: Path, broker_ids: tuple[int, ...] = (1, 2, 3),
                          config: ReplicationConfig = REPLICATION) -> AsyncIterator[ReplicationCluster]:
    """Brokers started for a block and stopped at its end."""
    async with trio.open_nursery() as nursery:
        cluster = ReplicationCluster(nursery, base_dir, broker_ids, config)
        try:
            await cluster.start_all()
            yield cluster
        finally:
            cluster.stop_all()


class Client:
    """Requests over one connection, answered in order (`receive` takes the answer to the oldest one sent),
    decoded at the version they were built at."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self._decoder = FrameDecoder(1 << 30)
        self._frames: list[bytes] = []
        self._correlation = 0
        self._in_flight: list[int] = []

    async def send(self, request: ApiMessage) -> None:
        self._correlation += 1
        self._in_flight.append(self._correlation)
        request.with_header(correlation_id=self._correlation, client_id="replication-test")
        await self.stream.send_all(request.encode(header=True, framed=True))

    async def receive(self, request: ApiMessage) -> Any:
        while not self._frames:  # bounded: every pass receives at least one byte or fails
            data = await self.stream.receive_some(1 << 16)
            assert data, "the broker closed the connection"
            self._frames.extend(self._decoder.feed(data))
        frame = self._frames.pop(0)
        assert struct.unpack_from(">i", frame)[0] == self._in_flight.pop(0)
        schema = SCHEMAS[request.API_KEY]
        version = request.API_VERSION
        return schema.response.decode(frame[4 + schema.response_header_version(version):], version=version)

    async def request(self, request: ApiMessage) -> Any:
        await self.send(request)
        return await self.receive(request)

    async def aclose(self) -> None:
        await self.stream.aclose()


def produce_request(topic: str, values: list[bytes], *, index: int = 0, acks: int = -1, timeout_ms: int = 10_000,
                    version: int = 9) -> ApiMessage:
    R = ProduceRequest[version]
    data = R.TopicProduceData(name=topic, partition_data=[
        R.TopicProduceData.PartitionProduceData(index=index, records=record_batch(values))])
    return R(transactional_id=None, acks=acks, timeout_ms=timeout_ms, topic_data=[data])


def fetch_request(topic: str, offset: int, *, index: int = 0, max_wait_ms: int = 0, current_leader_epoch: int = -1,
                  version: int = 12, topic_id: uuid.UUID | None = None) -> ApiMessage:
    """A consumer's fetch; from v13 on the topic goes by `topic_id`."""
    R = FetchRequest[version]
    partition = R.FetchTopic.FetchPartition(partition=index, current_leader_epoch=current_leader_epoch,
                                            fetch_offset=offset, last_fetched_epoch=-1, log_start_offset=-1,
                                            partition_max_bytes=1 << 20)
    fetch_topic = R.FetchTopic(topic=topic, topic_id=topic_id, partitions=[partition])
    return R(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
             session_id=0, session_epoch=-1, topics=[fetch_topic], forgotten_topics_data=[], rack_id="")


async def produce(cluster: ReplicationCluster, broker_id: int, topic: str, values: list[bytes], **kwargs: Any) -> Any:
    """One produce on a fresh connection; the partition's answer."""
    client = await cluster.client(broker_id)
    try:
        response = await client.request(produce_request(topic, values, **kwargs))
    finally:
        await client.aclose()
    return response.responses[0].partition_responses[0]


def stored_batches(the_log: Log) -> list[tuple[int, int, int, bytes]]:
    """Every batch of a log as (base offset, leader epoch, CRC, bytes), for replica-to-replica comparison."""
    out = []
    for segment in the_log.segments:
        for position, header in segment.batches():
            out.append((header.base_offset, header.partition_leader_epoch, header.crc,
                        segment.read_bytes(position, header.size)))
    return out
