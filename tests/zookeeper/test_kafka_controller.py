"""`KafkaController` against a real ZooKeeper server: two controllers (each with its own ZooKeeper session and a
fake in-process broker) and a third broker whose inter-broker listener is a small trio server recording what it
gets. One controller is elected; closing its session makes the other take over under the next epoch and send
everyone UpdateMetadata and LeaderAndIsr; a broker's registration going away moves its leaderships, written to
ZooKeeper with the leader epoch bumped and the znode version as partition epoch; AlterPartition with a stale
partition epoch is refused; CreateTopics and DeleteTopics write and remove Kafka's znodes, DeleteTopics sending
StopReplica(delete) to the replicas."""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import trio
from kafka.protocol.admin import CreateTopicsRequest, DeleteTopicsRequest
from kafka.protocol.api_message import ApiMessage

from minikafka.broker.network.socket_server import ConnectionInfo, SocketServer
from minikafka.broker.zk.controller.kafka_controller import KafkaController
from minikafka.broker.zk.kafka_zk_client import KafkaZkClient
from minikafka.broker.zk.zk_data import BrokerRegistration, EndPoint
from minikafka.broker.zk.zookeeper_client import ZkClientConfig
from minikafka.config import BrokerConfig
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.codec import decode_request, encode_response
from minikafka.protocol.control_plane import CONTROL_PLANE_SCHEMAS, AlterPartitionRequest
from minikafka.protocol.errors import ErrorCode
from minikafka.protocol.request_header import RequestHeader
from tests.zookeeper.elected_controller import znode_json

WAIT_S = 60.0  # generous bound for anything to happen: the machine may be loaded; nothing measures time
SESSION_TIMEOUT_MS = 4000


def _ok_response(request: Any, version: int) -> ApiMessage:
    R = CONTROL_PLANE_SCHEMAS[request.API_KEY].response[version]
    if request.API_KEY == ApiKey.LEADER_AND_ISR:
        return R(error_code=ErrorCode.NONE, topics=[])
    if request.API_KEY == ApiKey.STOP_REPLICA:
        return R(error_code=ErrorCode.NONE, partition_errors=[
            R.StopReplicaPartitionError(topic_name=t.topic_name, partition_index=p.partition_index,
                                        error_code=ErrorCode.NONE)
            for t in request.topic_states for p in t.partition_states])
    return R(error_code=ErrorCode.NONE)


@dataclass
class Recorder:
    """What one broker received from controllers, in order, and a way to wait for some of it."""

    received: list[ApiMessage] = field(default_factory=list)
    changed: trio.Event = field(default_factory=trio.Event)

    async def handle(self, request: ApiMessage, version: int) -> ApiMessage:
        self.received.append(request)
        self.changed.set()
        self.changed = trio.Event()
        return _ok_response(request, version)

    async def wait_for(self, condition: Callable[[list[ApiMessage]], bool]) -> None:
        with trio.fail_after(WAIT_S):
            while not condition(self.received):
                await self.changed.wait()

    def of(self, key: ApiKey, controller_epoch: int | None = None) -> list[Any]:
        return [r for r in self.received if r.API_KEY == key
                and (controller_epoch is None or r.controller_epoch == controller_epoch)]


class FakeBrokerListener:
    """A broker's inter-broker listener that records every control-plane request and answers it."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder
        self.server = SocketServer(self._process, 100 << 20, 600.0)
        self.port = 0

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.server.serve, "PLAINTEXT", listeners)
            task_status.started()

    async def _process(self, frame: bytes, conn: ConnectionInfo) -> bytes | None:
        header, body_pos = RequestHeader.parse(frame)
        schema = CONTROL_PLANE_SCHEMAS[header.api_key]
        request = decode_request(schema, header, frame, body_pos)
        response = await self.recorder.handle(request, header.api_version)
        return encode_response(schema, header.api_version, header.correlation_id, response)


def _registration(broker_id: int, port: int) -> BrokerRegistration:
    return BrokerRegistration(broker_id, (EndPoint("PLAINTEXT", "127.0.0.1", port, "PLAINTEXT"),))


def _broker_config(broker_id: int, zk_connect: str) -> BrokerConfig:
    return BrokerConfig({"node.id": broker_id, "zookeeper.connect": zk_connect,
                         "zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS, "listeners": "PLAINTEXT://127.0.0.1:0",
                         "default.replication.factor": 3, "request.timeout.ms": 10000,
                         "auto.leader.rebalance.enable": "false"})


class Node:
    """A broker's ZooKeeper session, its registration and its KafkaController (ids 1 and 2), or a broker with no
    controller of its own (id 3)."""

    def __init__(self, broker_id: int, zk_connect: str, with_controller: bool) -> None:
        self.broker_id = broker_id
        self.recorder = Recorder()
        self.listener = FakeBrokerListener(self.recorder)
        self.zk = KafkaZkClient(ZkClientConfig(zk_connect, session_timeout_ms=SESSION_TIMEOUT_MS))
        self.controller = (KafkaController(_broker_config(broker_id, zk_connect), self.zk, self.recorder.handle)
                           if with_controller else None)
        self.scope = trio.CancelScope()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        with self.scope:
            async with trio.open_nursery() as nursery:
                await nursery.start(self.listener.run)
                await nursery.start(self.zk.run)
                await self.zk.create_top_level_paths()
                await self.zk.register_broker(_registration(self.broker_id, self.listener.port))
                if self.controller is not None:
                    await nursery.start(self.controller.run)
                task_status.started()

    async def kill_session(self) -> None:
        """The broker dies: its session closes (its znodes go) and everything it ran stops."""
        await self.zk.aclose()
        self.scope.cancel()


def _update_metadata(received: list[ApiMessage], epoch_after: int, live: list[int]) -> Any:
    """The first UpdateMetadata of a controller epoch after `epoch_after` naming exactly `live` brokers."""
    return next((r for r in received if r.API_KEY == ApiKey.UPDATE_METADATA and r.controller_epoch > epoch_after
                 and sorted(b.id for b in r.live_brokers) == live), None)


async def _controller_of(observer: Node, nodes: list[Node], epoch_after: int, live: list[int]) -> Node:
    """The controller that told `observer` of `live` brokers under an epoch after `epoch_after`."""
    await observer.recorder.wait_for(lambda received: _update_metadata(received, epoch_after, live) is not None)
    controller_id = _update_metadata(observer.recorder.received, epoch_after, live).controller_id
    return next(n for n in nodes if n.broker_id == controller_id)


def _leader_and_isr_states(received: list[ApiMessage], topic: str) -> dict[int, Any]:
    """Each partition's state in the latest LeaderAndIsr naming it."""
    states = {}
    for r in received:
        if r.API_KEY == ApiKey.LEADER_AND_ISR:
            for t in r.topic_states:
                if t.topic_name == topic:
                    states.update({p.partition_index: p for p in t.partition_states})
    return states


def _create_topics(name: str, partitions: int, factor: int) -> Any:
    R = CreateTopicsRequest[5]
    return R(topics=[R.CreatableTopic(name=name, num_partitions=partitions, replication_factor=factor,
                                      assignments=[], configs=[])], timeout_ms=10000, validate_only=False)


async def test_election_failover_broker_loss_and_topic_lifecycle(zk_connect, raw) -> None:
    nodes = [Node(1, zk_connect, True), Node(2, zk_connect, True), Node(3, zk_connect, False)]
    async with trio.open_nursery() as nursery:
        for node in nodes:
            await nursery.start(node.run)
        first = await _controller_of(nodes[2], nodes, 0, [1, 2, 3])
        other = next(n for n in nodes[:2] if n is not first)
        assert first.controller is not None and first.controller.is_active
        assert other.controller is not None and not other.controller.is_active
        assert znode_json(raw, "/controller")["brokerid"] == first.broker_id
        epoch = first.controller.controller_epoch

        # CreateTopics through the active controller writes Kafka's znodes, and every broker hears of it.
        created = await first.controller.apis.handle(_create_topics("orders", 3, 3), 5, None)
        assert [t.error_code for t in created.topics] == [ErrorCode.NONE]
        assert sorted(znode_json(raw, "/brokers/topics/orders")["partitions"]) == ["0", "1", "2"]
        for node in nodes:
            await node.recorder.wait_for(lambda received: any(
                r.API_KEY == ApiKey.LEADER_AND_ISR and any(t.topic_name == "orders" for t in r.topic_states)
                for r in received))
        # The other controller answers NOT_CONTROLLER.
        refused = await other.controller.apis.handle(_create_topics("nope", 1, 1), 5, None)
        assert [t.error_code for t in refused.topics] == [ErrorCode.NOT_CONTROLLER]

        # The active controller dies: the other takes over under the next epoch and tells everyone everything.
        await first.kill_session()
        survivors = [n for n in nodes if n is not first]
        second = await _controller_of(nodes[2], survivors, epoch, [2, 3])
        assert second is other and second.controller is not None and second.controller.is_active
        new_epoch = second.controller.controller_epoch
        assert new_epoch == epoch + 1
        for node in survivors:
            await node.recorder.wait_for(lambda received: any(
                r.API_KEY == ApiKey.LEADER_AND_ISR and r.controller_epoch == new_epoch for r in received))
        # Broker 1 is gone: no partition is led by it or has it in its ISR, in ZooKeeper as in what was sent.
        for index in range(3):
            state = znode_json(raw, f"/brokers/topics/orders/partitions/{index}/state")
            assert state["leader"] != 1 and 1 not in state["isr"]
        quorum = second.controller.quorum
        assert quorum is not None
        for index, partition in quorum.image.topics["orders"].partitions.items():
            data, stat = raw.get(f"/brokers/topics/orders/partitions/{index}/state")
            state = json.loads(data)
            assert stat.version == partition.partition_epoch
            assert (state["leader"], state["leader_epoch"]) == (partition.leader, partition.leader_epoch)

        # Broker 3's registration goes away: its leaderships move, leader epoch + 1, partition epoch = version.
        before = {i: (p.leader, p.leader_epoch, p.partition_epoch)
                  for i, p in quorum.image.topics["orders"].partitions.items()}
        await nodes[2].kill_session()
        await second.recorder.wait_for(lambda received: all(
            3 not in p.isr for p in _leader_and_isr_states(received, "orders").values()))
        for index, partition in quorum.image.topics["orders"].partitions.items():
            data, stat = raw.get(f"/brokers/topics/orders/partitions/{index}/state")
            state = json.loads(data)
            assert state["leader"] == partition.leader == 2 and 3 not in state["isr"]
            assert stat.version == partition.partition_epoch > before[index][2]
            if before[index][0] == 3:
                assert state["leader_epoch"] == before[index][1] + 1

        # AlterPartition with a stale partition epoch is refused.
        partition = quorum.image.topics["orders"].partitions[0]
        R = AlterPartitionRequest[2]
        stale = R(broker_id=2, broker_epoch=quorum.image.brokers[2].broker_epoch, topics=[R.TopicData(
            topic_id=quorum.image.topics["orders"].topic_id, partitions=[R.TopicData.PartitionData(
                partition_index=0, leader_epoch=partition.leader_epoch,
                partition_epoch=partition.partition_epoch - 1, new_isr=[2], leader_recovery_state=0)])])
        answer = await second.controller.apis.handle(stale, 2, None)
        assert answer.error_code == ErrorCode.NONE
        assert answer.topics[0].partitions[0].error_code == ErrorCode.INVALID_UPDATE_VERSION

        # DeleteTopics has the live replica delete its own at once; the topic stays marked, znodes and all, until
        # the replicas on brokers 1 and 3 are deleted too, which happens when they register again.
        D = DeleteTopicsRequest[4]
        deleted = await second.controller.apis.handle(D(topic_names=["orders"], timeout_ms=10000), 4, None)
        assert [r.error_code for r in deleted.responses] == [ErrorCode.NONE]
        stops = second.recorder.of(ApiKey.STOP_REPLICA, new_epoch)
        assert stops and all(p.delete_partition for s in stops for t in s.topic_states for p in t.partition_states)
        assert sorted(p.partition_index for s in stops for t in s.topic_states if t.topic_name == "orders"
                      for p in t.partition_states) == [0, 1, 2]
        assert raw.exists("/admin/delete_topics/orders") is not None
        assert raw.exists("/brokers/topics/orders/partitions/0/state") is not None
        returned = [Node(1, zk_connect, False), Node(3, zk_connect, False)]
        for node in returned:
            await nursery.start(node.run)
            await node.recorder.wait_for(lambda received: any(
                r.API_KEY == ApiKey.STOP_REPLICA and r.controller_epoch == new_epoch for r in received))
        for _ in range(int(WAIT_S / 0.01)):  # the deletion finishes on the controller's own time
            if raw.exists("/admin/delete_topics/orders") is None:
                break
            await trio.sleep(0.01)
        assert raw.exists("/brokers/topics/orders") is None and raw.exists("/config/topics/orders") is None
        nursery.cancel_scope.cancel()


async def test_a_write_in_doubt_moves_the_controller_and_the_next_one_reads_zookeeper_afresh(zk_connect,
                                                                                                raw) -> None:
    """A write ZooKeeper refuses for any reason but the epoch (here a topic created behind the controller's back,
    as when a retried write meets its own first attempt) leaves the controller unsure of ZooKeeper's state: it
    answers NOT_CONTROLLER, gives up /controller, and the controller elected next knows the topic."""
    nodes = [Node(1, zk_connect, True), Node(2, zk_connect, True)]
    async with trio.open_nursery() as nursery:
        for node in nodes:
            await nursery.start(node.run)
        first = await _controller_of(nodes[1], nodes, 0, [1, 2])
        assert first.controller is not None
        epoch = first.controller.controller_epoch
        await first.zk.create_topic("clash", None, {0: [1, 2]})
        answer = await first.controller.apis.handle(_create_topics("clash", 1, 2), 5, None)
        assert [t.error_code for t in answer.topics] == [ErrorCode.NOT_CONTROLLER]
        successor = await _controller_of(nodes[1], nodes, epoch, [1, 2])
        assert successor.controller is not None
        for _ in range(int(WAIT_S / 0.01)):  # the successor finishes its failover on its own time
            if successor.controller.is_active:
                break
            await trio.sleep(0.01)
        quorum = successor.controller.quorum
        assert successor.controller.controller_epoch > epoch and quorum is not None
        assert quorum.image.topics["clash"].partitions[0].isr == [1, 2]
        again = await successor.controller.apis.handle(_create_topics("clash", 1, 2), 5, None)
        assert [t.error_code for t in again.topics] == [ErrorCode.TOPIC_ALREADY_EXISTS]
        nursery.cancel_scope.cancel()
