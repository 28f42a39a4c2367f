"""`minikafka.broker.zk.kafka_zk_client.KafkaZkClient` against a real ZooKeeper server: elections and the
controller-epoch fence, conditional partition-state updates, broker registration across session expiry, watches
delivered into trio, and ZooKeeper itself killed and restarted."""
from __future__ import annotations

import socket
import sys
import uuid

import pytest
import trio
from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError

from minikafka.broker.zk import zk_data
from minikafka.broker.zk.kafka_zk_client import ControllerMovedError, KafkaZkClient, TopicExistsError
from minikafka.broker.zk.zk_data import BrokerRegistration, EndPoint, LeaderIsrAndControllerEpoch
from minikafka.broker.zk.zookeeper_client import ZkClientConfig, ZkEvent, ZkEventKind, ZooKeeperClientTimeoutError
from tests.zookeeper.zookeeper_gate import zookeeper_gate

EVENT_TIMEOUT_S = 30.0  # generous: the machine may be loaded; nothing here measures time
RAW_CONNECT_TIMEOUT_S = 30.0


def _config(connect: str, **overrides: int) -> ZkClientConfig:
    return ZkClientConfig(connect, **overrides)


def _broker(broker_id: int) -> BrokerRegistration:
    return BrokerRegistration(broker_id, (EndPoint("PLAINTEXT", "127.0.0.1", 9000 + broker_id, "PLAINTEXT"),))


class RawZk:
    """A plain kazoo client on the same chroot, to look at and change znodes behind the client under test."""

    def __init__(self, connect: str, **kwargs: object) -> None:
        self.kazoo = KazooClient(connect, **kwargs)
        self.kazoo.start(timeout=RAW_CONNECT_TIMEOUT_S)

    def close(self) -> None:
        self.kazoo.stop()
        self.kazoo.close()


@pytest.fixture
def raw(zk_connect):
    clients: list[RawZk] = []

    def make(connect: str = zk_connect, **kwargs: object) -> RawZk:
        client = RawZk(connect, **kwargs)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


async def _next_event(events: trio.MemoryReceiveChannel[ZkEvent], kind: ZkEventKind,
                      path: str | None = None) -> ZkEvent:
    """The next event of `kind` (on `path`), skipping others."""
    with trio.fail_after(EVENT_TIMEOUT_S):
        async for event in events:
            if event.kind == kind and (path is None or event.path == path):
                return event
    raise AssertionError("the event channel closed")


async def _all_events(events: trio.MemoryReceiveChannel[ZkEvent], *expected: tuple[ZkEventKind, str]) -> None:
    """Until each (kind, path) has been seen, in whatever order they come."""
    missing = set(expected)
    with trio.fail_after(EVENT_TIMEOUT_S):
        async for event in events:
            missing.discard((event.kind, event.path or ""))
            if not missing:
                return
    raise AssertionError(f"the event channel closed before {missing}")


def _expire_session(hosts: str, client: KafkaZkClient) -> None:
    """ZooKeeper's way of expiring a session from outside: join it from a second connection, then close it."""
    session = client._kazoo.client_id
    assert session is not None
    intruder = KazooClient(hosts, client_id=session, timeout=client.config.session_timeout_ms / 1000)
    intruder.start(timeout=RAW_CONNECT_TIMEOUT_S)
    intruder.stop()
    intruder.close()


def test_config_from_kafka_properties():
    config = ZkClientConfig.from_properties({"zookeeper.connect": "h1:2181,h2:2181/kafka/prod",
                                             "zookeeper.session.timeout.ms": "6000"})
    assert config.hosts == "h1:2181,h2:2181" and config.chroot == "/kafka/prod"
    assert config.session_timeout_ms == 6000 and config.effective_connection_timeout_ms == 6000
    config = ZkClientConfig.from_properties({"zookeeper.connect": "h1:2181", "zookeeper.connection.timeout.ms": 500})
    assert config.chroot == "" and config.session_timeout_ms == 18000 and config.effective_connection_timeout_ms == 500
    with pytest.raises(ValueError, match="zookeeper.connect"):
        ZkClientConfig.from_properties({})


async def test_creates_its_chroot_and_kafkas_top_level_paths(zk_connect, shared_zookeeper, raw):
    async with KafkaZkClient.open(_config(zk_connect)) as client:
        await client.create_top_level_paths()
        await client.create_top_level_paths()  # idempotent, as at every broker start
    root = raw(shared_zookeeper.connect_string).kazoo
    chroot = zk_connect[len(shared_zookeeper.connect_string):]
    for path in zk_data.PERSISTENT_PATHS:
        assert root.exists(chroot + path) is not None, path
    assert root.get(chroot + zk_data.PRODUCER_ID_BLOCK_PATH)[0] is None  # no data, as Kafka creates it


async def test_cluster_id_is_the_first_proposal(zk_connect):
    async with KafkaZkClient.open(_config(zk_connect)) as first, KafkaZkClient.open(_config(zk_connect)) as second:
        assert await first.get_cluster_id() is None
        assert await first.create_or_get_cluster_id("cluster-A") == "cluster-A"
        assert await second.create_or_get_cluster_id("cluster-B") == "cluster-A"
        assert await second.get_cluster_id() == "cluster-A"


async def test_broker_epoch_is_the_registration_czxid(zk_connect, raw):
    async with KafkaZkClient.open(_config(zk_connect)) as one, KafkaZkClient.open(_config(zk_connect)) as two:
        await one.create_top_level_paths()
        epoch_one = await one.register_broker(_broker(1))
        epoch_two = await two.register_broker(_broker(2))
        inspector = raw().kazoo
        stat = inspector.exists("/brokers/ids/1")
        assert stat.czxid == epoch_one == one.broker_epoch
        assert stat.ephemeralOwner == one.session_id
        assert epoch_two > epoch_one
        brokers = await one.get_all_broker_and_epochs_in_cluster()
        assert {b: (e.broker, e.epoch) for b, e in brokers.items()} == {1: (_broker(1), epoch_one),
                                                                        2: (_broker(2), epoch_two)}
        assert await one.get_broker(2) == _broker(2)
        assert await one.get_sorted_broker_list() == [1, 2]
        # registering again in the same session finds its own znode: same epoch
        assert await one.register_broker(_broker(1)) == epoch_one
    assert inspector.get_children("/brokers/ids") == []  # closed sessions take their registrations along


async def test_election_race_one_winner_and_the_epoch_goes_up_by_one(zk_connect):
    configs = [_config(zk_connect) for _ in range(3)]
    async with (KafkaZkClient.open(configs[0]) as a, KafkaZkClient.open(configs[1]) as b,
                KafkaZkClient.open(configs[2]) as c):
        clients = {1: a, 2: b, 3: c}
        previous_epoch = zk_data.INITIAL_CONTROLLER_EPOCH
        for _ in range(4):
            won: dict[int, tuple[int, int]] = {}
            lost: list[int] = []

            async def elect(broker_id: int, client: KafkaZkClient, won=won, lost=lost) -> None:
                try:
                    won[broker_id] = await client.register_controller_and_increment_controller_epoch(broker_id)
                except ControllerMovedError:
                    lost.append(broker_id)

            async with trio.open_nursery() as nursery:
                for broker_id, client in clients.items():
                    nursery.start_soon(elect, broker_id, client)
            assert len(won) == 1 and len(lost) == 2
            [(winner, (epoch, epoch_zk_version))] = won.items()
            assert epoch == previous_epoch + 1
            assert await a.get_controller_id() == winner
            assert await a.get_controller_epoch() == (epoch, epoch_zk_version)
            previous_epoch = epoch
            await clients[winner].delete_controller(epoch_zk_version)  # resign: the next round elects again
            assert await a.get_controller_id() is None


async def test_controller_election_when_one_is_in_office_is_refused(zk_connect):
    async with KafkaZkClient.open(_config(zk_connect)) as a, KafkaZkClient.open(_config(zk_connect)) as b:
        assert await a.register_controller_and_increment_controller_epoch(1) == (1, 1)
        with pytest.raises(ControllerMovedError, match="broker 1"):
            await b.register_controller_and_increment_controller_epoch(2)
        assert await b.get_controller_epoch() == (1, 1)
    # a's session closed: /controller went with it, the epoch stays
    async with KafkaZkClient.open(_config(zk_connect)) as b:
        assert await b.get_controller_id() is None
        assert await b.register_controller_and_increment_controller_epoch(2) == (2, 2)


async def test_a_deposed_controller_writes_nothing(zk_connect, shared_zookeeper, raw):
    async with KafkaZkClient.open(_config(zk_connect)) as old, KafkaZkClient.open(_config(zk_connect)) as new:
        await old.create_top_level_paths()
        old_epoch, old_version = await old.register_controller_and_increment_controller_epoch(1)
        await old.create_topic("orders", uuid.uuid4(), {0: [1, 2], 1: [2, 1]})
        states = {("orders", p): LeaderIsrAndControllerEpoch(leader, 0, (1, 2), old_epoch)
                  for p, leader in ((0, 1), (1, 2))}
        assert await old.create_topic_partition_states(states, old_version) == {k: None for k in states}
        await old.create_delete_topic_path("orders")

        events = old.subscribe()
        await trio.to_thread.run_sync(_expire_session, shared_zookeeper.connect_string, old)
        await _next_event(events, ZkEventKind.NEW_SESSION)
        new_epoch, new_version = await new.register_controller_and_increment_controller_epoch(2)
        assert new_epoch == old_epoch + 1

        inspector = raw().kazoo
        before = {path: inspector.get(path) for path in
                  [zk_data.topic_partition_state_path("orders", 0), zk_data.topic_partition_state_path("orders", 1),
                   zk_data.topic_path("orders"), zk_data.delete_topic_path("orders"), zk_data.CONTROLLER_PATH]}
        moved_state = LeaderIsrAndControllerEpoch(1, 1, (1,), old_epoch, partition_epoch=0)
        with pytest.raises(ControllerMovedError):
            await old.update_leader_and_isr({("orders", 0): moved_state}, old_version)
        with pytest.raises(ControllerMovedError):
            await old.create_topic_partition_states({("orders", 2): moved_state}, old_version)
        with pytest.raises(ControllerMovedError):
            await old.set_topic_assignment("orders", None, {}, old_version)
        with pytest.raises(ControllerMovedError):
            await old.delete_topic_znode("orders", old_version)
        with pytest.raises(ControllerMovedError):
            await old.delete_topic_deletions(["orders"], old_version)
        with pytest.raises(ControllerMovedError):
            await old.delete_controller(old_version)
        after = {path: inspector.get(path) for path in before}
        assert after == before  # data and versions alike
        assert inspector.exists(zk_data.topic_partition_state_path("orders", 2)) is None
        assert await new.get_controller_id() == 2
        # the controller in office writes with its own epoch version
        result = await new.update_leader_and_isr({("orders", 0): moved_state}, new_version)
        assert result.finished == {("orders", 0): LeaderIsrAndControllerEpoch(1, 1, (1,), old_epoch, partition_epoch=1)}


async def test_partition_state_update_is_conditional_on_its_version(zk_connect):
    async with KafkaZkClient.open(_config(zk_connect)) as client:
        epoch, version = await client.register_controller_and_increment_controller_epoch(1)
        await client.create_topic("t", uuid.uuid4(), {0: [1, 2], 1: [1, 2]})
        initial = {("t", p): LeaderIsrAndControllerEpoch(1, 0, (1, 2), epoch) for p in (0, 1)}
        created = await client.create_topic_partition_states(initial, version)
        assert created == {("t", 0): None, ("t", 1): None}
        again = await client.create_topic_partition_states(initial, version)
        assert all(isinstance(e, NodeExistsError) for e in again.values())

        read = await client.get_topic_partition_states([("t", 0), ("t", 1), ("t", 9)])
        assert read == initial  # partition_epoch 0: the znodes' version; the absent one left out
        shrunk = LeaderIsrAndControllerEpoch(1, 0, (1,), epoch, partition_epoch=0)
        first = await client.update_leader_and_isr({("t", 0): shrunk}, version)
        assert first.finished == {("t", 0): LeaderIsrAndControllerEpoch(1, 0, (1,), epoch, partition_epoch=1)}
        assert first.partitions_to_retry == []

        # a stale writer (it read partition epoch 0) is refused; a fresh one in the same batch goes through
        stale = LeaderIsrAndControllerEpoch(2, 1, (2,), epoch, partition_epoch=0)
        fresh = LeaderIsrAndControllerEpoch(2, 1, (2,), epoch, partition_epoch=0)
        second = await client.update_leader_and_isr({("t", 0): stale, ("t", 1): fresh}, version)
        assert second.partitions_to_retry == [("t", 0)]
        assert second.finished == {("t", 1): LeaderIsrAndControllerEpoch(2, 1, (2,), epoch, partition_epoch=1)}
        now = await client.get_topic_partition_states([("t", 0), ("t", 1)])
        assert now[("t", 0)] == LeaderIsrAndControllerEpoch(1, 0, (1,), epoch, partition_epoch=1)
        assert now[("t", 1)].leader == 2


async def test_session_expiry_registers_the_broker_again(zk_connect, shared_zookeeper, raw):
    async with KafkaZkClient.open(_config(zk_connect)) as client:
        await client.create_top_level_paths()
        events = client.subscribe()
        first_epoch = await client.register_broker(_broker(1))
        first_session = client.session_id
        await trio.to_thread.run_sync(_expire_session, shared_zookeeper.connect_string, client)
        await _next_event(events, ZkEventKind.SESSION_EXPIRED)
        await _next_event(events, ZkEventKind.NEW_SESSION)
        assert client.session_id != first_session
        assert client.broker_epoch > first_epoch
        stat = raw().kazoo.exists("/brokers/ids/1")
        assert stat.czxid == client.broker_epoch and stat.ephemeralOwner == client.session_id
        brokers = await client.get_all_broker_and_epochs_in_cluster()
        assert brokers[1].epoch == client.broker_epoch


@pytest.mark.skipif(sys.platform == "win32", reason="kills a process with SIGKILL")
async def test_registration_of_a_killed_process_is_waited_out(zk_connect, raw):
    async with KafkaZkClient.open(_config(zk_connect)) as client:
        await client.create_top_level_paths()
        # the broker's previous process: registered with a 1 s session, then killed -9
        script = ("import sys, time\nfrom kazoo.client import KazooClient\n"
                  f"c = KazooClient({zk_connect!r}, timeout=1.0)\nc.start(timeout=30)\n"
                  "c.create('/brokers/ids/1', b'{}', ephemeral=True)\nprint('registered', flush=True)\n"
                  "time.sleep(600)\n")
        previous = await trio.lowlevel.open_process([sys.executable, "-c", script], stdout=-1)
        try:
            assert previous.stdout is not None
            with trio.fail_after(EVENT_TIMEOUT_S):
                assert b"registered" in await previous.stdout.receive_some()
        finally:
            previous.kill()
            await previous.wait()
            await previous.stdout.aclose()
        assert raw().kazoo.exists("/brokers/ids/1") is not None
        epoch = await client.register_broker(_broker(1))
        stat = raw().kazoo.exists("/brokers/ids/1")
        assert stat.czxid == epoch and stat.ephemeralOwner == client.session_id


async def test_registration_held_by_a_live_session_is_refused(zk_connect, raw):
    async with KafkaZkClient.open(_config(zk_connect, session_timeout_ms=1000)) as client:
        await client.create_top_level_paths()
        holder = raw().kazoo
        holder.create("/brokers/ids/1", b"{}", ephemeral=True)
        with trio.fail_after(EVENT_TIMEOUT_S), pytest.raises(NodeExistsError, match="/brokers/ids/1"):
            await client.register_broker(_broker(1))
        assert holder.exists("/brokers/ids/1").ephemeralOwner == holder.client_id[0]


async def test_watches_fire_into_trio(zk_connect):
    async with KafkaZkClient.open(_config(zk_connect)) as client, KafkaZkClient.open(_config(zk_connect)) as other:
        await client.create_top_level_paths()
        events = client.subscribe()

        assert await client.get_sorted_broker_list(watch=True) == []
        await other.register_broker(_broker(2))
        await _next_event(events, ZkEventKind.NODE_CHILDREN_CHANGED, zk_data.BROKER_IDS_PATH)
        assert await client.get_sorted_broker_list(watch=True) == [2]

        assert await client.get_all_topics_in_cluster(watch=True) == set()
        await other.create_topic("t", uuid.uuid4(), {0: [2]})
        await _next_event(events, ZkEventKind.NODE_CHILDREN_CHANGED, zk_data.TOPICS_PATH)

        assert await client.get_topic_deletions() == []
        await other.create_delete_topic_path("t")
        await _next_event(events, ZkEventKind.NODE_CHILDREN_CHANGED, zk_data.DELETE_TOPICS_PATH)

        assert await client.get_controller_id(watch=True) is None
        await other.register_controller_and_increment_controller_epoch(2)
        await _next_event(events, ZkEventKind.NODE_CREATED, zk_data.CONTROLLER_PATH)
        assert await client.get_controller_id(watch=True) == 2

        await other.aclose()  # the controller's session ends: /controller and /brokers/ids/2 go
        await _all_events(events, (ZkEventKind.NODE_DELETED, zk_data.CONTROLLER_PATH),
                          (ZkEventKind.NODE_CHILDREN_CHANGED, zk_data.BROKER_IDS_PATH))
        assert await client.get_controller_id() is None

        # a second subscriber sees what happens from then on; a closed one is dropped
        later = client.subscribe()
        events.close()
        assert await client.path_exists("/somewhere", watch=True) is False
        await client.create_recursive("/somewhere", b"x")
        assert (await _next_event(later, ZkEventKind.NODE_CREATED)).path == "/somewhere"


async def test_zookeeper_killed_and_restarted_within_the_session(zookeeper, raw):
    connect = zookeeper.connect_string + "/kafka"
    # The client under test goes through a gate, held from the kill until the restarted server serves: a client that
    # reaches ZooKeeper while it starts may wait out its whole session unanswered (see zookeeper_gate).
    async with (zookeeper_gate(zookeeper) as gate,
                # a session with room to spare: the restarted server counts it afresh from its start
                KafkaZkClient.open(_config(gate.connect_string + "/kafka", session_timeout_ms=45000)) as client):
        await client.create_top_level_paths()
        events = client.subscribe()
        epoch = await client.register_broker(_broker(1))
        session = client.session_id
        assert await client.get_sorted_broker_list(watch=True) == [1]
        assert await client.get_controller_id(watch=True) is None

        zookeeper.kill()
        gate.hold()
        await _next_event(events, ZkEventKind.DISCONNECTED)
        assert not client.connected
        waiting: list[list[int]] = []

        async def read_during_outage() -> None:
            waiting.append(await client.get_sorted_broker_list())

        async with trio.open_nursery() as nursery:
            nursery.start_soon(read_during_outage)
            await trio.to_thread.run_sync(zookeeper.start)
            gate.release()
            await _next_event(events, ZkEventKind.RECONNECTED)
        assert waiting == [[1]]  # the request made while ZooKeeper was down waited and then completed
        assert client.session_id == session and client.broker_epoch == epoch
        inspector = raw(connect).kazoo
        assert inspector.exists("/brokers/ids/1").czxid == epoch

        # the watches armed before the outage still fire: they were armed again on reconnection
        async with KafkaZkClient.open(_config(connect)) as other:
            await other.register_broker(_broker(2))
            await _next_event(events, ZkEventKind.NODE_CHILDREN_CHANGED, zk_data.BROKER_IDS_PATH)
            await other.register_controller_and_increment_controller_epoch(2)
            await _next_event(events, ZkEventKind.NODE_CREATED, zk_data.CONTROLLER_PATH)


async def test_changes_missed_while_the_session_expired_are_reported(zk_connect, shared_zookeeper):
    async with KafkaZkClient.open(_config(zk_connect)) as client:
        await client.create_top_level_paths()
        events = client.subscribe()
        await client.register_broker(_broker(1))
        await client.register_controller_and_increment_controller_epoch(1)
        assert await client.get_controller_id(watch=True) == 1
        assert await client.get_sorted_broker_list(watch=True) == [1]
        await trio.to_thread.run_sync(_expire_session, shared_zookeeper.connect_string, client)
        # the expired session's /controller went without a watch event reaching it; the client finds out when it
        # arms its watches again in the new session
        await _all_events(events, (ZkEventKind.NODE_DELETED, zk_data.CONTROLLER_PATH),
                          (ZkEventKind.NODE_CHILDREN_CHANGED, zk_data.BROKER_IDS_PATH))
        assert await client.get_controller_id() is None
        assert await client.get_sorted_broker_list() == [1]  # registered again


async def test_topic_creation_and_deletion(zk_connect, raw):
    partitions = 300
    async with KafkaZkClient.open(_config(zk_connect)) as client:
        await client.create_top_level_paths()
        epoch, version = await client.register_controller_and_increment_controller_epoch(1)
        topic_id = uuid.uuid4()
        assignment = {p: [p % 3, (p + 1) % 3] for p in range(partitions)}
        await client.create_topic("big", topic_id, assignment, {"retention.ms": "60000"})
        with pytest.raises(TopicExistsError):
            await client.create_topic("big", uuid.uuid4(), {0: [1]})
        assert await client.topic_exists("big")
        assert await client.get_all_topics_in_cluster() == {"big"}
        found = await client.get_replica_assignment_and_topic_id_for_topics({"big", "missing"})
        assert set(found) == {"big"} and found["big"].topic_id == topic_id
        assert {p: list(a.replicas) for p, a in found["big"].partitions.items()} == assignment
        assert await client.get_topic_configs(["big", "missing"]) == {"big": {"retention.ms": "60000"},
                                                                       "missing": {}}

        states = {("big", p): LeaderIsrAndControllerEpoch(r[0], 0, tuple(r), epoch) for p, r in assignment.items()}
        assert set((await client.create_topic_partition_states(states, version)).values()) == {None}
        assert await client.get_topic_partition_states(list(states)) == states

        await client.create_delete_topic_path("big")
        assert await client.is_topic_marked_for_deletion("big")
        assert await client.get_topic_deletions(watch=False) == ["big"]
        await client.delete_topic_znode("big", version)
        await client.delete_topic_configs(["big"], version)
        await client.delete_topic_deletions(["big"], version)
        assert await client.get_all_topics_in_cluster() == set()
        assert await client.get_topic_deletions(watch=False) == []
        assert raw().kazoo.exists("/config/topics/big") is None
        assert await client.delete_recursive(zk_data.topic_path("big")) is False


async def test_producer_id_blocks_are_unique_across_brokers(zk_connect):
    blocks: list[zk_data.ProducerIdsBlock] = []
    async with KafkaZkClient.open(_config(zk_connect)) as one, KafkaZkClient.open(_config(zk_connect)) as two:
        await one.create_top_level_paths()

        async def allocate(client: KafkaZkClient, broker_id: int) -> None:
            for _ in range(5):
                blocks.append(await client.allocate_producer_id_block(broker_id))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(allocate, one, 1)
            nursery.start_soon(allocate, two, 2)
        data, _ = await one.get_data_and_version(zk_data.PRODUCER_ID_BLOCK_PATH)
    assert sorted(b.first_producer_id for b in blocks) == [i * zk_data.PRODUCER_ID_BLOCK_SIZE for i in range(10)]
    assert zk_data.decode_producer_id_block(data).first_producer_id == 9 * zk_data.PRODUCER_ID_BLOCK_SIZE


async def test_no_server_within_the_connection_timeout(zk_connect):
    with socket.socket() as unused:  # bound, never listening: connections are refused
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
        config = _config(f"127.0.0.1:{port}", session_timeout_ms=4000, connection_timeout_ms=500)
        with trio.fail_after(EVENT_TIMEOUT_S), pytest.raises(ZooKeeperClientTimeoutError, match="500 ms"):
            async with KafkaZkClient.open(config):
                pass
