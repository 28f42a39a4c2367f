"""The controller's APIs: Kafka requests in, Kafka responses out, through `ControllerApis.handle` (as a combined
node calls it) and over a real loopback socket to a `ControllerServer` with the inter-broker NetworkClient (as a
broker reaches a controller process): registrations and heartbeats, fencing when a broker's connection closes,
forwarded admin requests with Kafka's error codes, AlterPartition by version, ElectLeaders, producer-id blocks,
DescribeCluster, and the long-poll Fetch of `__cluster_metadata-0`."""
from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio
from kafka.protocol.admin.cluster import DescribeClusterRequest
from kafka.protocol.admin.configs import AlterConfigsRequest, IncrementalAlterConfigsRequest
from kafka.protocol.admin.topics import (
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    ElectLeadersRequest,
)
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.consumer.fetch import FetchRequest
from kafka.protocol.metadata.api_versions import ApiVersionsRequest
from kafka.protocol.metadata.metadata import MetadataRequest

from minikafka.broker.controller import ControllerApis, ControllerServer, QuorumController
from minikafka.broker.controller.controller_config import QuorumControllerConfig
from minikafka.broker.network.network_client import DisconnectedError, NetworkClient, NetworkClientConfig
from minikafka.broker.network.socket_server import ConnectionInfo
from minikafka.config import BrokerConfig
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.control_plane import (
    AllocateProducerIdsRequest,
    AlterPartitionRequest,
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
)
from minikafka.protocol.errors import ErrorCode
from minikafka.protocol.internal_topics import METADATA_TOPIC, METADATA_TOPIC_ID
from minikafka.protocol.metadata_records import BrokerRegistrationChangeRecord, RegisterBrokerRecord, TopicRecord
from minikafka.storage.metadata_log import decode_entries

CLUSTER = "q1Sh-9_ISia_zwGINzRvyQ"
CONTROLLER_ID = 3000
LOOPBACK = "127.0.0.1"
TEST_TIMEOUT_S = 20
FAST = NetworkClientConfig(connection_setup_timeout_ms=2000, reconnect_backoff_ms=10, reconnect_backoff_max_ms=50,
                           request_timeout_ms=15_000)
ZERO_UUID = uuid.UUID(int=0)
TOPIC, BROKER = 2, 4


# ---- requests ------------------------------------------------------------------------------------------------------


def register_request(broker_id: int, incarnation: int = 1, cluster_id: str = CLUSTER,
                     zk: bool = False) -> ApiMessage:
    R = BrokerRegistrationRequest
    return R(broker_id=broker_id, cluster_id=cluster_id, incarnation_id=uuid.UUID(int=broker_id * 100 + incarnation),
             listeners=[R.Listener(name="PLAINTEXT", host=LOOPBACK, port=9090 + broker_id, security_protocol=0)],
             features=[R.Feature(name="metadata.version", min_supported_version=7, max_supported_version=26)],
             rack=None, is_migrating_zk_broker=zk, log_dirs=[uuid.uuid4()], previous_broker_epoch=-1)


def heartbeat_request(broker_id: int, epoch: int, offset: int, *, want_fence: bool = False,
                      want_shut_down: bool = False) -> ApiMessage:
    return BrokerHeartbeatRequest(broker_id=broker_id, broker_epoch=epoch, current_metadata_offset=offset,
                                  want_fence=want_fence, want_shut_down=want_shut_down, offline_log_dirs=[])


def create_topics_request(version: int, *topics: tuple[str, int, int, dict[int, list[int]], dict[str, str | None]],
                          validate_only: bool = False) -> ApiMessage:
    R = CreateTopicsRequest[version]
    return R(topics=[R.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=factor,
        assignments=[R.CreatableTopic.CreatableReplicaAssignment(partition_index=i, broker_ids=b)
                     for i, b in assignments.items()],
        configs=[R.CreatableTopic.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()])
        for name, partitions, factor, assignments, configs in topics], timeout_ms=1000, validate_only=validate_only)


def fetch_request(offset: int, max_wait_ms: int, version: int = 15, topic_id: uuid.UUID = METADATA_TOPIC_ID,
                  partition: int = 0) -> ApiMessage:
    R = FetchRequest[version]
    fetch = R.FetchTopic.FetchPartition(partition=partition, current_leader_epoch=-1, fetch_offset=offset,
                                        last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1 << 20)
    topic = (R.FetchTopic(topic_id=topic_id, partitions=[fetch]) if version >= 13
             else R.FetchTopic(topic=METADATA_TOPIC, partitions=[fetch]))
    fields = dict(max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0,
                  session_epoch=-1, topics=[topic], forgotten_topics_data=[], rack_id="")
    if version >= 15:
        fields["replica_state"] = R.ReplicaState(replica_id=1, replica_epoch=0)
    else:
        fields["replica_id"] = 1
    return R(**fields)


# ---- ControllerApis in process --------------------------------------------------------------------------------------


@pytest.fixture
def controller(tmp_path: Path) -> Iterator[QuorumController]:
    config = QuorumControllerConfig(node_id=CONTROLLER_ID, cluster_id=CLUSTER, auto_leader_rebalance_enable=False,
                                    num_partitions=2, default_replication_factor=2)
    opened = QuorumController.open(config, tmp_path / "metadata")
    yield opened
    opened.close()


async def send(apis: ControllerApis, request: ApiMessage, version: int | None = None,
               peer: ConnectionInfo | None = None) -> ApiMessage:
    return await apis.handle(request, request.API_VERSION if version is None else version, peer)


async def join(apis: ControllerApis, broker_id: int, incarnation: int = 1,
               peer: ConnectionInfo | None = None) -> int:
    registered = await send(apis, register_request(broker_id, incarnation), 4, peer)
    assert registered.error_code == ErrorCode.NONE
    beat = await send(apis, heartbeat_request(broker_id, registered.broker_epoch,
                                              apis.controller.log_end_offset - 1), 1, peer)
    assert (beat.error_code, beat.is_fenced, beat.is_caught_up) == (ErrorCode.NONE, False, True)
    return int(registered.broker_epoch)


async def three_brokers(controller: QuorumController) -> ControllerApis:
    apis = ControllerApis(controller)
    for broker_id in (1, 2, 3):
        await join(apis, broker_id)
    return apis


async def test_api_versions_lists_the_controllers_apis(controller: QuorumController) -> None:
    apis = ControllerApis(controller)
    for version in (0, 3):
        response = await send(apis, ApiVersionsRequest[version](client_software_name="t",
                                                                client_software_version="1"), version)
        keys = {entry.api_key: (entry.min_version, entry.max_version) for entry in response.api_keys}
        assert response.error_code == ErrorCode.NONE
        assert keys[ApiKey.BROKER_REGISTRATION] == (0, 4) and keys[ApiKey.ALLOCATE_PRODUCER_IDS] == (0, 0)
        assert {ApiKey.FETCH, ApiKey.CREATE_TOPICS, ApiKey.ELECT_LEADERS, ApiKey.DESCRIBE_CLUSTER} <= set(keys)
        assert ApiKey.METADATA not in keys and ApiKey.PRODUCE not in keys
    with pytest.raises(ValueError):
        await send(apis, MetadataRequest[12](topics=None, allow_auto_topic_creation=False), 12)


async def test_registration_and_heartbeats(controller: QuorumController) -> None:
    apis = ControllerApis(controller)
    first = await send(apis, register_request(1), 4)
    second = await send(apis, register_request(2), 0)
    assert (first.error_code, first.broker_epoch, second.broker_epoch) == (ErrorCode.NONE, 0, 1)
    behind = await send(apis, heartbeat_request(2, 1, 0), 0)
    assert (behind.is_fenced, behind.is_caught_up, behind.should_shut_down) == (True, False, False)
    caught_up = await send(apis, heartbeat_request(2, 1, 1), 1)
    assert (caught_up.error_code, caught_up.is_fenced, caught_up.is_caught_up) == (ErrorCode.NONE, False, True)
    stale = await send(apis, heartbeat_request(2, 7, 1), 1)
    assert (stale.error_code, stale.is_fenced) == (ErrorCode.STALE_BROKER_EPOCH, True)
    wrong_cluster = await send(apis, register_request(3, cluster_id="other"), 4)
    assert (wrong_cluster.error_code, wrong_cluster.broker_epoch) == (ErrorCode.INCONSISTENT_CLUSTER_ID, -1)
    zk = await send(apis, register_request(3, zk=True), 4)
    assert zk.error_code == ErrorCode.BROKER_ID_NOT_REGISTERED
    duplicate = await send(apis, register_request(2, incarnation=2), 4)
    assert duplicate.error_code == ErrorCode.DUPLICATE_BROKER_REGISTRATION
    shut_down = await send(apis, heartbeat_request(2, 1, 1, want_shut_down=True), 1)
    assert (shut_down.should_shut_down, shut_down.is_fenced) == (True, True)


async def test_a_closed_connection_ends_the_session_of_the_broker_it_belonged_to(
        controller: QuorumController) -> None:
    apis = ControllerApis(controller)
    conn = ConnectionInfo(5, "127.0.0.1:40000", "CONTROLLER")
    await join(apis, 1, peer=conn)
    await join(apis, 2, peer=ConnectionInfo(6, "127.0.0.1:40001", "CONTROLLER"))
    apis.on_connection_closed(ConnectionInfo(99, "127.0.0.1:40002", "CONTROLLER"))
    assert controller.heartbeats.stale_brokers() == []
    apis.on_connection_closed(conn)
    assert controller.heartbeats.stale_brokers() == [1]


async def test_create_topics(controller: QuorumController) -> None:
    apis = await three_brokers(controller)
    response = await send(apis, create_topics_request(
        7, ("orders", -1, -1, {}, {"min.insync.replicas": "2"}), ("manual", -1, -1, {0: [3, 1]}, {}),
        ("twice", 1, 1, {}, {}), ("twice", 1, 1, {}, {}), ("orders-bad", 1, 4, {}, {}),
        ("cfg", 1, 1, {}, {"retention.ms": "never"})), 7)
    results = {(r.name, i): r for i, r in enumerate(response.topics)}
    orders, manual = results[("orders", 0)], results[("manual", 1)]
    assert (orders.error_code, orders.num_partitions, orders.replication_factor) == (ErrorCode.NONE, 2, 2)
    assert orders.topic_id == controller.image.topics["orders"].topic_id != ZERO_UUID
    configs = {c.name: (c.value, c.config_source) for c in orders.configs}
    assert configs["min.insync.replicas"] == ("2", 1) and configs["retention.ms"] == ("604800000", 5)
    assert (manual.error_code, manual.num_partitions, manual.replication_factor) == (ErrorCode.NONE, 1, 2)
    assert controller.image.topics["manual"].partitions[0].replicas == [3, 1]
    assert [results[("twice", i)].error_code for i in (2, 3)] == [ErrorCode.INVALID_REQUEST] * 2
    assert results[("orders-bad", 4)].error_code == ErrorCode.INVALID_REPLICATION_FACTOR
    failed = results[("cfg", 5)]
    assert (failed.error_code, failed.num_partitions, failed.configs) == (ErrorCode.INVALID_CONFIG, -1, None)
    assert "twice" not in controller.image.topics and "cfg" not in controller.image.topics

    again = await send(apis, create_topics_request(4, ("orders", 1, 1, {}, {}), ("later", 3, 1, {}, {}),
                                                   validate_only=True), 4)
    assert [r.error_code for r in again.topics] == [ErrorCode.TOPIC_ALREADY_EXISTS, ErrorCode.NONE]
    assert "later" not in controller.image.topics


async def test_delete_topics_by_name_and_by_id(controller: QuorumController) -> None:
    apis = await three_brokers(controller)
    await send(apis, create_topics_request(7, ("a", 1, 1, {}, {}), ("b", 1, 1, {}, {})), 7)
    b_id = controller.image.topics["b"].topic_id
    R6 = DeleteTopicsRequest[6]
    by_id = await send(apis, R6(topics=[R6.DeleteTopicState(name=None, topic_id=b_id),
                                        R6.DeleteTopicState(name=None, topic_id=uuid.UUID(int=4)),
                                        R6.DeleteTopicState(name="nope", topic_id=ZERO_UUID)], timeout_ms=1000), 6)
    assert [(r.name, r.topic_id, r.error_code) for r in by_id.responses] == [
        ("b", b_id, ErrorCode.NONE), (None, uuid.UUID(int=4), ErrorCode.UNKNOWN_TOPIC_ID),
        ("nope", ZERO_UUID, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    by_name = await send(apis, DeleteTopicsRequest[1](topic_names=["a"], timeout_ms=1000), 1)
    assert [(r.name, r.error_code) for r in by_name.responses] == [("a", ErrorCode.NONE)]
    assert controller.image.topics == {}


async def test_create_partitions(controller: QuorumController) -> None:
    apis = await three_brokers(controller)
    await send(apis, create_topics_request(7, ("orders", 1, 2, {}, {})), 7)
    R = CreatePartitionsRequest[3]
    response = await send(apis, R(topics=[
        R.CreatePartitionsTopic(name="orders", count=3, assignments=None),
        R.CreatePartitionsTopic(name="nope", count=3, assignments=None)], timeout_ms=1000, validate_only=False), 3)
    assert [(r.name, r.error_code) for r in response.results] == [
        ("orders", ErrorCode.NONE), ("nope", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    assert len(controller.image.topics["orders"].partitions) == 3
    fewer = await send(apis, R(topics=[R.CreatePartitionsTopic(name="orders", count=2, assignments=None)],
                               timeout_ms=1000, validate_only=False), 3)
    assert fewer.results[0].error_code == ErrorCode.INVALID_PARTITIONS and fewer.results[0].error_message


async def test_alter_configs_incremental_and_legacy(controller: QuorumController) -> None:
    apis = await three_brokers(controller)
    await send(apis, create_topics_request(7, ("orders", 1, 1, {}, {"retention.ms": "5"})), 7)
    R = IncrementalAlterConfigsRequest[1]
    incremental = await send(apis, R(resources=[
        R.AlterConfigsResource(resource_type=TOPIC, resource_name="orders", configs=[
            R.AlterConfigsResource.AlterableConfig(name="segment.ms", config_operation=0, value="1000"),
            R.AlterConfigsResource.AlterableConfig(name="retention.ms", config_operation=1, value=None)]),
        R.AlterConfigsResource(resource_type=BROKER, resource_name="1", configs=[  # static: read-only
            R.AlterConfigsResource.AlterableConfig(name="log.dirs", config_operation=0, value="/tmp")])],
        validate_only=False), 1)
    assert [(r.resource_name, r.error_code) for r in incremental.responses] == [
        ("orders", ErrorCode.NONE), ("1", ErrorCode.INVALID_REQUEST)]
    assert controller.image.topic_configs["orders"] == {"segment.ms": "1000"}
    L = AlterConfigsRequest[2]
    legacy = await send(apis, L(resources=[L.AlterConfigsResource(resource_type=TOPIC, resource_name="orders", configs=[
        L.AlterConfigsResource.AlterableConfig(name="cleanup.policy", value="compact")])], validate_only=False), 2)
    assert legacy.responses[0].error_code == ErrorCode.NONE
    assert controller.image.topic_configs["orders"] == {"cleanup.policy": "compact"}
    bad = await send(apis, L(resources=[L.AlterConfigsResource(resource_type=TOPIC, resource_name="orders", configs=[
        L.AlterConfigsResource.AlterableConfig(name="cleanup.policy", value="sometimes")])], validate_only=False), 0)
    assert bad.responses[0].error_code == ErrorCode.INVALID_CONFIG


async def test_alter_partition_by_version(controller: QuorumController) -> None:
    apis = await three_brokers(controller)
    await send(apis, create_topics_request(7, ("orders", -1, -1, {0: [1, 2, 3]}, {})), 7)
    topic_id = controller.image.topics["orders"].topic_id
    epochs = {b: controller.image.brokers[b].broker_epoch for b in (1, 2, 3)}
    R3 = AlterPartitionRequest
    shrink = await send(apis, R3(broker_id=1, broker_epoch=epochs[1], topics=[R3.TopicData(
        topic_id=topic_id, partitions=[R3.TopicData.PartitionData(
            partition_index=0, leader_epoch=0, partition_epoch=0, leader_recovery_state=0,
            new_isr_with_epochs=[R3.TopicData.PartitionData.BrokerState(broker_id=b, broker_epoch=epochs[b])
                                 for b in (1, 2)])])]), 3)
    (answer,) = shrink.topics[0].partitions
    assert (shrink.error_code, shrink.topics[0].topic_id) == (ErrorCode.NONE, topic_id)
    assert (answer.error_code, answer.leader_id, answer.leader_epoch, answer.isr, answer.partition_epoch) == (
        ErrorCode.NONE, 1, 0, [1, 2], 1)
    await send(apis, heartbeat_request(3, epochs[3], controller.log_end_offset - 1, want_fence=True), 1)
    old = await send(apis, R3(broker_id=1, broker_epoch=epochs[1], topics=[R3.TopicData(
        topic_name="orders", partitions=[R3.TopicData.PartitionData(
            partition_index=0, leader_epoch=0, partition_epoch=1, new_isr=[1, 2, 3])])]), 1)
    (refused,) = old.topics[0].partitions
    assert (old.topics[0].topic_name, refused.error_code) == ("orders", ErrorCode.OPERATION_NOT_ATTEMPTED)
    unknown = await send(apis, R3(broker_id=1, broker_epoch=epochs[1], topics=[R3.TopicData(
        topic_name="nope", partitions=[R3.TopicData.PartitionData(
            partition_index=0, leader_epoch=0, partition_epoch=1, new_isr=[1])])]), 0)
    assert unknown.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    stale = await send(apis, R3(broker_id=1, broker_epoch=epochs[1] + 1, topics=[]), 3)
    assert stale.error_code == ErrorCode.STALE_BROKER_EPOCH


async def test_elect_leaders(controller: QuorumController) -> None:
    apis = await three_brokers(controller)
    await send(apis, create_topics_request(7, ("orders", -1, -1, {0: [1, 2, 3], 1: [2, 3, 1]}, {})), 7)
    epoch = controller.image.brokers[1].broker_epoch
    await send(apis, heartbeat_request(1, epoch, controller.log_end_offset - 1, want_fence=True), 1)
    await send(apis, heartbeat_request(1, epoch, controller.log_end_offset - 1), 1)  # back, outside the ISR
    R2 = ElectLeadersRequest[2]
    response = await send(apis, R2(election_type=0, topic_partitions=[
        R2.TopicPartitions(topic="orders", partitions=[0, 1])], timeout_ms=1000), 2)
    assert response.error_code == ErrorCode.NONE
    assert [(p.partition_id, p.error_code) for p in response.replica_election_results[0].partition_result] == [
        (0, ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE), (1, ErrorCode.ELECTION_NOT_NEEDED)]
    everything = await send(apis, ElectLeadersRequest[0](topic_partitions=None, timeout_ms=1000), 0)
    assert [(r.topic, [p.error_code for p in r.partition_result]) for r in everything.replica_election_results] == [
        ("orders", [ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE])]
    unclean = await send(apis, R2(election_type=1, topic_partitions=[
        R2.TopicPartitions(topic="orders", partitions=[0])], timeout_ms=1000), 2)
    assert unclean.replica_election_results[0].partition_result[0].error_code == ErrorCode.ELECTION_NOT_NEEDED
    bad = await send(apis, R2(election_type=5, topic_partitions=None, timeout_ms=1000), 2)
    assert bad.error_code == ErrorCode.INVALID_REQUEST


async def test_allocate_producer_ids(controller: QuorumController) -> None:
    apis = ControllerApis(controller)
    epoch = await join(apis, 1)
    blocks = [await send(apis, AllocateProducerIdsRequest(broker_id=1, broker_epoch=epoch), 0) for _ in range(2)]
    assert [(b.error_code, b.producer_id_start, b.producer_id_len) for b in blocks] == [
        (ErrorCode.NONE, 0, 1000), (ErrorCode.NONE, 1000, 1000)]
    stale = await send(apis, AllocateProducerIdsRequest(broker_id=1, broker_epoch=epoch + 9), 0)
    assert stale.error_code == ErrorCode.STALE_BROKER_EPOCH


async def test_fetch_in_process_answers_the_committed_log(controller: QuorumController) -> None:
    apis = ControllerApis(controller)
    await join(apis, 1)
    end = controller.log_end_offset
    for version in (12, 13, 15, 18):
        response = await send(apis, fetch_request(0, 0, version), version)
        (partition,) = response.responses[0].partitions
        assert (partition.error_code, partition.high_watermark, partition.log_start_offset) == (ErrorCode.NONE, end, 0)
        entries = list(decode_entries(partition.records, "fetched"))
        assert [e.offset for e in entries] == list(range(end))
        assert isinstance(entries[0].record, RegisterBrokerRecord)
        assert isinstance(entries[-1].record, BrokerRegistrationChangeRecord)
    beyond = await send(apis, fetch_request(end + 1, 0), 15)
    assert beyond.responses[0].partitions[0].error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    other = await send(apis, fetch_request(0, 0, topic_id=uuid.UUID(int=9)), 15)
    assert other.responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID
    other_partition = await send(apis, fetch_request(0, 0, version=12, partition=1), 12)
    assert other_partition.responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


# ---- a ControllerServer over loopback -----------------------------------------------------------------------------


@asynccontextmanager
async def controller_server(tmp_path: Path) -> AsyncIterator[ControllerServer]:
    config = BrokerConfig({"node.id": str(CONTROLLER_ID), "cluster.id": CLUSTER,
                           "listeners": f"CONTROLLER://{LOOPBACK}:0", "log.dirs": str(tmp_path / "controller"),
                           "auto.leader.rebalance.enable": "false"})
    async with trio.open_nursery() as nursery:
        server: ControllerServer = await nursery.start(ControllerServer(config).run)
        try:
            yield server
        finally:
            nursery.cancel_scope.cancel()


@asynccontextmanager
async def client_of(server: ControllerServer, client_id: str) -> AsyncIterator[NetworkClient]:
    assert server.endpoint is not None
    async with NetworkClient.open(CONTROLLER_ID, server.endpoint.host, server.endpoint.port, client_id,
                                  FAST) as client:
        yield client


async def test_the_server_serves_brokers_and_describes_itself(tmp_path: Path) -> None:
    with trio.fail_after(TEST_TIMEOUT_S):
        async with controller_server(tmp_path) as server, client_of(server, "broker-1") as client:
            assert server.endpoint is not None and server.endpoint.host == LOOPBACK and server.endpoint.port > 0
            registered = await client.send(register_request(1), 4)
            assert (registered.error_code, registered.broker_epoch) == (ErrorCode.NONE, 0)
            described = await client.send(DescribeClusterRequest[1](include_cluster_authorized_operations=False,
                                                                    endpoint_type=2), 1)
            assert (described.error_code, described.cluster_id, described.controller_id) == (
                ErrorCode.NONE, CLUSTER, CONTROLLER_ID)
            assert [(b.broker_id, b.host, b.port) for b in described.brokers] == [
                (CONTROLLER_ID, LOOPBACK, server.endpoint.port)]
            brokers = await client.send(DescribeClusterRequest[1](include_cluster_authorized_operations=False,
                                                                  endpoint_type=1), 1)
            assert brokers.error_code == ErrorCode.MISMATCHED_ENDPOINT_TYPE
            with pytest.raises(DisconnectedError):  # Kafka's controller does not serve Metadata
                await client.send(MetadataRequest[12](topics=None, allow_auto_topic_creation=False), 12)
            assert (await client.send(ApiVersionsRequest[3](client_software_name="t", client_software_version="1"),
                                      3)).error_code == ErrorCode.NONE


async def test_a_broker_whose_connection_closes_is_fenced_at_once(tmp_path: Path) -> None:
    with trio.fail_after(TEST_TIMEOUT_S):
        async with controller_server(tmp_path) as server:
            controller = server.controller
            async with client_of(server, "broker-1") as client:
                epoch = (await client.send(register_request(1), 4)).broker_epoch
                beat = await client.send(heartbeat_request(1, epoch, controller.log_end_offset - 1), 1)
                assert not beat.is_fenced and not server.image.brokers[1].fenced
                before = controller.log_end_offset
            # the client is closed, as a killed broker's socket is: fenced well within the session timeout
            within = controller.heartbeats.session_timeout_s / 2
            assert await controller.wait_for_records(before, trio.current_time() + within)
            assert server.image.brokers[1].fenced


async def test_metadata_fetch_long_poll_parks_wakes_on_append_and_times_out(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    with trio.fail_after(TEST_TIMEOUT_S):
        async with controller_server(tmp_path) as server, client_of(server, "broker-1-metadata") as fetcher, \
                client_of(server, "admin") as admin:
            controller = server.controller
            epoch = (await admin.send(register_request(1), 4)).broker_epoch
            await admin.send(heartbeat_request(1, epoch, controller.log_end_offset - 1), 1)
            end = controller.log_end_offset

            started = trio.current_time()
            quiet = await fetcher.send(fetch_request(end, 300), 15)
            (partition,) = quiet.responses[0].partitions
            assert trio.current_time() - started >= 0.3  # it waited out max_wait_ms
            assert (partition.error_code, partition.high_watermark, partition.records) == (ErrorCode.NONE, end, b"")

            parked = trio.Event()
            wait_for_records = controller.wait_for_records

            async def noting_the_park(offset: int, deadline: float) -> bool:
                parked.set()
                return await wait_for_records(offset, deadline)

            monkeypatch.setattr(controller, "wait_for_records", noting_the_park)
            answers: list[ApiMessage] = []

            async def long_poll() -> None:
                answers.append(await fetcher.send(fetch_request(end, 10_000), 15))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(long_poll)
                await parked.wait()
                assert not answers
                created = await admin.send(create_topics_request(7, ("orders", 1, 1, {}, {})), 7)
                assert created.topics[0].error_code == ErrorCode.NONE
            (woken,) = answers[0].responses[0].partitions
            assert trio.current_time() - started < 5  # woken by the append, not by max_wait_ms
            assert woken.high_watermark == controller.log_end_offset > end
            entries = list(decode_entries(woken.records, "fetched"))
            assert entries[0].offset == end and isinstance(entries[0].record, TopicRecord)
            assert entries[0].record.name == "orders"


async def test_without_a_controller_listener_the_controller_is_reached_in_process(tmp_path: Path) -> None:
    config = BrokerConfig({"node.id": "1", "cluster.id": CLUSTER, "listeners": f"PLAINTEXT://{LOOPBACK}:0",
                           "log.dirs": str(tmp_path / "node")})
    with trio.fail_after(TEST_TIMEOUT_S):
        async with trio.open_nursery() as nursery:
            server: ControllerServer = await nursery.start(ControllerServer(config).run)
            assert server.endpoint is None and server.listeners == []
            assert (await join(server.apis, 1)) == 0
            assert [b.broker_id for b in server.image.live_brokers()] == [1]
            nursery.cancel_scope.cancel()
    assert (tmp_path / "node" / "__cluster_metadata-0").is_dir()
