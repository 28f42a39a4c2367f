"""The broker's side of the control plane, against stand-in controllers: the metadata loader replaying Fetch answers
into its image, the lifecycle manager's registration, heartbeats and controlled shutdown, producer-id blocks, and a
network channel to a controller that is not there."""
from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.consumer.fetch import FetchResponse

from minikafka.broker.metadata.broker_lifecycle_manager import BrokerLifecycleManager, RegistrationError
from minikafka.broker.metadata.metadata_image import BrokerEndpointInfo, MetadataChange, MetadataImage
from minikafka.broker.metadata.metadata_loader import MetadataLoader
from minikafka.broker.network.controller_channel import NetworkControllerChannel
from minikafka.broker.network.network_client import DisconnectedError, NetworkClientConfig
from minikafka.broker.server.producer_id_manager import ProducerIdManager
from minikafka.config import ControllerAddress
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.control_plane import (
    AllocateProducerIdsRequest,
    AllocateProducerIdsResponse,
    BrokerHeartbeatResponse,
    BrokerRegistrationResponse,
)
from minikafka.protocol.errors import ErrorCode
from minikafka.protocol.internal_topics import METADATA_TOPIC_ID
from minikafka.protocol.metadata_records import PartitionRecord, RegisterBrokerRecord, TopicRecord
from minikafka.storage.metadata_log import MetadataLog
from tests.helpers import held_free_port

NOW = 1_700_000_000_000
TOPIC_ID = uuid.UUID("0f3c1f2d-8a10-4c59-9a57-6b1d3a4e2f0c")
ENDPOINT = BrokerEndpointInfo("PLAINTEXT", "127.0.0.1", 9092, 0)


def _register(broker_id: int, epoch: int) -> RegisterBrokerRecord:
    return RegisterBrokerRecord(
        broker_id=broker_id, incarnation_id=uuid.UUID(int=broker_id), broker_epoch=epoch,
        end_points=[RegisterBrokerRecord.BrokerEndpoint(name="PLAINTEXT", host="127.0.0.1", port=9092 + broker_id,
                                                        security_protocol=0)],
        features=[], rack=None, fenced=True)


class FakeController:
    """Answers requests as a quorum of one would, with answers a test sets; records what it was sent."""

    def __init__(self, log: MetadataLog | None = None) -> None:
        self.log = log
        self.sent: list[tuple[ApiMessage, int]] = []
        self.answers: dict[int, list[Callable[[ApiMessage], ApiMessage]]] = {}
        self.appended = trio.Event()

    def append(self, records: list[Any]) -> None:
        assert self.log is not None
        self.log.append(records, now_ms=NOW)
        self.appended.set()
        self.appended = trio.Event()

    async def send(self, request: ApiMessage, version: int | None = None) -> ApiMessage:
        assert version is not None
        self.sent.append((request, version))
        if request.API_KEY == ApiKey.FETCH:
            return await self._fetch(request, version)
        queue = self.answers[request.API_KEY]
        answer = queue.pop(0) if len(queue) > 1 else queue[0]
        return answer(request)

    async def _fetch(self, request: Any, version: int) -> ApiMessage:
        assert self.log is not None
        partition = request.topics[0].partitions[0]
        assert request.topics[0].topic_id == METADATA_TOPIC_ID and partition.partition == 0
        if partition.fetch_offset >= self.log.log_end_offset and request.max_wait_ms > 0:
            with trio.move_on_after(request.max_wait_ms / 1000):
                await self.appended.wait()
        R = FetchResponse[version]
        PD = R.FetchableTopicResponse.PartitionData
        records = self.log.read(partition.fetch_offset, partition.partition_max_bytes)
        return R(throttle_time_ms=0, error_code=0, session_id=0, responses=[R.FetchableTopicResponse(
            topic_id=METADATA_TOPIC_ID, partitions=[PD(
                partition_index=0, error_code=0, high_watermark=self.log.log_end_offset,
                last_stable_offset=self.log.log_end_offset, log_start_offset=0, aborted_transactions=None,
                preferred_read_replica=-1, records=records)])])


# ---- metadata loader -------------------------------------------------------------------------------------------

async def test_the_loader_replays_the_controllers_log_and_publishes_each_change(tmp_path: Path) -> None:
    controller = FakeController(MetadataLog.open(tmp_path, now_ms=NOW))
    controller.append([_register(1, 0)])
    loader = MetadataLoader(1, controller, MetadataImage(), max_wait_ms=60_000)
    published: list[MetadataChange] = []
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await nursery.start(loader.run)
            await loader.wait_caught_up()
            assert loader.image.brokers[1].broker_epoch == 0 and loader.applied_offset == 0
            loader.install_publisher(lambda image, change: published.append(change))
            controller.append([TopicRecord(name="orders", topic_id=TOPIC_ID),
                               PartitionRecord(partition_id=0, topic_id=TOPIC_ID, replicas=[1], isr=[1], leader=1,
                                               leader_epoch=0, partition_epoch=0)])
            await loader.wait_for(3)  # the long poll is answered by the append, not by its wait running out
            nursery.cancel_scope.cancel()
    assert loader.image.topics["orders"].partitions[0].leader == 1
    assert len(published) == 1 and published[0].partitions.keys() == {("orders", 0)}
    assert published[0].topic_ids == {"orders": TOPIC_ID}
    assert loader.next_offset == loader.high_watermark == 3
    controller.log.close()


async def test_the_loader_tells_how_far_the_controller_has_committed(tmp_path: Path) -> None:
    controller = FakeController(MetadataLog.open(tmp_path, now_ms=NOW))
    controller.append([_register(1, 0), _register(2, 1)])
    loader = MetadataLoader(1, controller, MetadataImage())
    assert await loader.controller_high_watermark(controller) == 2
    assert not loader.image.brokers  # asking does not replay: the loader's own fetches do
    controller.log.close()


# ---- lifecycle -------------------------------------------------------------------------------------------------

def _registration_answer(code: ErrorCode, epoch: int = 7) -> Callable[[ApiMessage], ApiMessage]:
    return lambda _request: BrokerRegistrationResponse(throttle_time_ms=0, error_code=code,
                                                       broker_epoch=epoch if code == ErrorCode.NONE else -1)


def _heartbeat_answer(fenced: Callable[[Any], bool],
                      shut_down: bool = False) -> Callable[[ApiMessage], ApiMessage]:
    return lambda request: BrokerHeartbeatResponse(throttle_time_ms=0, error_code=0, is_caught_up=True,
                                                   is_fenced=fenced(request), should_shut_down=shut_down)


def _lifecycle(controller: FakeController, epochs: list[int] | None = None,
               timeout_ms: int = 10_000) -> BrokerLifecycleManager:
    return BrokerLifecycleManager(1, "cluster", controller, [ENDPOINT], None, heartbeat_interval_ms=2000,
                                  registration_timeout_ms=timeout_ms, metadata_offset=lambda: 7,
                                  on_broker_epoch=epochs.append if epochs is not None else None)


async def test_registration_is_retried_then_heartbeats_unfence_the_ready_broker(autojump_clock) -> None:
    controller = FakeController()
    controller.answers[ApiKey.BROKER_REGISTRATION] = [_registration_answer(ErrorCode.DUPLICATE_BROKER_REGISTRATION),
                                                      _registration_answer(ErrorCode.NONE)]
    controller.answers[ApiKey.BROKER_HEARTBEAT] = [_heartbeat_answer(lambda r: r.want_fence)]
    epochs: list[int] = []
    lifecycle = _lifecycle(controller, epochs)
    async with trio.open_nursery() as nursery:
        await nursery.start(lifecycle.run)
        assert lifecycle.broker_epoch == 7 and epochs == [7]
        registrations = [r for r, _ in controller.sent if r.API_KEY == ApiKey.BROKER_REGISTRATION]
        assert len(registrations) == 2
        registration = registrations[-1]
        assert registration.listeners[0].port == 9092 and registration.cluster_id == "cluster"
        assert registration.incarnation_id == lifecycle.incarnation_id
        await trio.sleep(1)
        assert not lifecycle.unfenced.is_set()  # it asks to stay fenced until the broker serves
        lifecycle.set_ready_to_unfence()
        with trio.fail_after(1):
            await lifecycle.unfenced.wait()
        sent_before = len(controller.sent)
        await trio.sleep(10)  # unfenced: one heartbeat every broker.heartbeat.interval.ms
        assert 4 <= len(controller.sent) - sent_before <= 5
        heartbeat = controller.sent[-1][0]
        assert heartbeat.broker_epoch == 7 and heartbeat.current_metadata_offset == 7 and not heartbeat.want_fence
        nursery.cancel_scope.cancel()


async def test_controlled_shutdown_waits_until_the_controller_lets_the_broker_go(autojump_clock) -> None:
    controller = FakeController()
    controller.answers[ApiKey.BROKER_REGISTRATION] = [_registration_answer(ErrorCode.NONE)]
    asked: list[bool] = []

    def heartbeat(request: Any) -> ApiMessage:
        asked.append(request.want_shut_down)
        done = asked.count(True) >= 3
        return BrokerHeartbeatResponse(throttle_time_ms=0, error_code=0, is_caught_up=True, is_fenced=done,
                                       should_shut_down=done)

    controller.answers[ApiKey.BROKER_HEARTBEAT] = [heartbeat]
    lifecycle = _lifecycle(controller)
    async with trio.open_nursery() as nursery:
        await nursery.start(lifecycle.run)
        lifecycle.set_ready_to_unfence()
        await lifecycle.unfenced.wait()
        start = trio.current_time()
        assert await lifecycle.controlled_shutdown(timeout_s=9)
        assert trio.current_time() - start < 1  # shutdown heartbeats do not wait out the interval
        nursery.cancel_scope.cancel()


async def test_a_controller_that_never_accepts_the_registration_fails_the_start(autojump_clock) -> None:
    controller = FakeController()
    controller.answers[ApiKey.BROKER_REGISTRATION] = [_registration_answer(ErrorCode.INCONSISTENT_CLUSTER_ID)]
    start = trio.current_time()
    with pytest.raises(RegistrationError, match="INCONSISTENT_CLUSTER_ID"):
        await _lifecycle(controller, timeout_ms=3000).run()
    assert 3 <= trio.current_time() - start < 4


# ---- producer ids ----------------------------------------------------------------------------------------------

async def test_producer_ids_come_from_controller_blocks_fetched_ahead() -> None:
    controller = FakeController()
    starts = iter([0, 1000])
    controller.answers[ApiKey.ALLOCATE_PRODUCER_IDS] = [lambda _request: AllocateProducerIdsResponse(
        throttle_time_ms=0, error_code=0, producer_id_start=next(starts), producer_id_len=10)]
    manager = ProducerIdManager(1, controller, lambda: 5)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await nursery.start(manager.run)
            ids = [await manager.generate_producer_id() for _ in range(9)]
            await trio.testing.wait_all_tasks_blocked()  # the next block is fetched once 90% are handed out
            ids += [await manager.generate_producer_id() for _ in range(2)]
            nursery.cancel_scope.cancel()
    assert ids == [*range(10), 1000]
    assert [r.broker_epoch for r, _ in controller.sent] == [5, 5]


async def test_no_producer_id_block_is_a_retriable_error() -> None:
    controller = FakeController()
    controller.answers[ApiKey.ALLOCATE_PRODUCER_IDS] = [lambda _request: AllocateProducerIdsResponse(
        throttle_time_ms=0, error_code=ErrorCode.STALE_BROKER_EPOCH, producer_id_start=-1, producer_id_len=0)]
    manager = ProducerIdManager(1, controller, lambda: 5)
    with pytest.raises(Exception) as raised:
        await manager.generate_producer_id()
    assert getattr(raised.value, "code", None) == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS


# ---- the network channel ---------------------------------------------------------------------------------------

async def test_a_network_channel_retries_until_its_deadline_then_fails(autojump_clock) -> None:
    with held_free_port() as port:  # nothing listens there
        channel = NetworkControllerChannel([ControllerAddress(3000, "127.0.0.1", port)], "broker-1-test",
                                           NetworkClientConfig(reconnect_backoff_max_ms=200), retry_timeout_ms=2000)
        async with trio.open_nursery() as nursery:
            await nursery.start(channel.run)
            start = trio.current_time()
            with pytest.raises(DisconnectedError, match="no controller reachable"):
                await channel.send(AllocateProducerIdsRequest(broker_id=1, broker_epoch=0), 0)
            assert 2 <= trio.current_time() - start < 3
            nursery.cancel_scope.cancel()
