"""The persister a share-partition leader uses (DefaultStatePersister) against real brokers: FindCoordinator key type
SHARE finds the share coordinator, the state written is read back exactly, epochs fence, and on three brokers the
state is still there when the coordinator of the share-partition is killed -9 (the persister finds the new one).
A SharePartition persists what its members acknowledge, and a leader at a newer epoch loads it and fences the old."""
from __future__ import annotations

import uuid

import trio
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest

import minikafka
from minikafka.broker.coordinator.share.share_coordinator import coordinator_key
from minikafka.broker.coordinator.share.share_coordinator_shard import SharePartitionKey
from minikafka.broker.network.broker_clients import BrokerClients
from minikafka.broker.server.share.default_state_persister import DefaultStatePersister
from minikafka.broker.server.share.persister import PersisterStateBatch
from minikafka.broker.server.share.share_partition import (
    AcknowledgementBatch,
    AcquiredRecords,
    RecordState,
    SharePartition,
)
from minikafka.protocol.errors import ErrorCode
from tests.helpers import wait_until
from tests.raw_client import RawConnection

TOPIC = "shared"
GROUP = "share-group"
ACKNOWLEDGED, AVAILABLE, ARCHIVED = 2, 0, 4


def create_topic(bootstrap: str, partitions: int) -> uuid.UUID:
    """The topic, with the brokers' default replication factor, and its id (`bootstrap` one broker's address)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, partitions)])[TOPIC].result(30)
    with RawConnection(bootstrap) as conn:
        response = conn.request(MetadataRequest[12](topics=[MetadataRequest[12].MetadataRequestTopic(
            topic_id=None, name=TOPIC)], allow_auto_topic_creation=False, include_topic_authorized_operations=False))
    tid: uuid.UUID = response.topics[0].topic_id
    return tid


def persister_on(brokers: list[minikafka.Broker], local: minikafka.Broker) -> DefaultStatePersister:
    """A persister as broker `local` has one: its connections to the brokers' listener, lookups asked of `local`."""
    endpoints = {b.node_id: (b.host, b.port) for b in brokers}
    return DefaultStatePersister(BrokerClients("test-share-persister", endpoints.get), local.node_id)


def find_share_coordinator(bootstrap: str, key: str, version: int = 6) -> tuple[int, int]:
    """(error, node id) of FindCoordinator key type SHARE, once the state topic is there."""
    answer: list[tuple[int, int]] = []

    def found() -> bool:
        with RawConnection(bootstrap) as conn:
            if version >= 4:
                c = conn.request(FindCoordinatorRequest[version](key_type=2, coordinator_keys=[key])).coordinators[0]
            else:
                c = conn.request(FindCoordinatorRequest[version](key_type=2, key=key))
        answer[:] = [(c.error_code, c.node_id)]
        return c.error_code != ErrorCode.COORDINATOR_NOT_AVAILABLE

    wait_until(found, 60)
    return answer[0]


def test_find_coordinator_share_keys(broker) -> None:
    bootstrap = broker.bootstrap_servers
    tid = create_topic(bootstrap, 1)
    key = coordinator_key(SharePartitionKey(GROUP, tid, 0))
    assert find_share_coordinator(bootstrap, key) == (ErrorCode.NONE, broker.node_id)
    for bad in ("", "group-only", f"{GROUP}:not-a-uuid:0", f"{GROUP}:{key.split(':')[1]}:x", f" :{key[len(GROUP)+1:]}"):
        assert find_share_coordinator(bootstrap, bad) == (ErrorCode.INVALID_REQUEST, -1)
    assert find_share_coordinator(bootstrap, key, version=5) == (ErrorCode.INVALID_REQUEST, -1)
    assert find_share_coordinator(bootstrap, key, version=3) == (ErrorCode.INVALID_REQUEST, -1)


def test_persister_round_trip_and_fencing(broker) -> None:
    tid = create_topic(broker.bootstrap_servers, 2)
    key = SharePartitionKey(GROUP, tid, 0)
    batches = (PersisterStateBatch(12, 15, ACKNOWLEDGED, 1), PersisterStateBatch(16, 20, AVAILABLE, 2))

    async def main() -> None:
        persister = persister_on([broker], broker)
        async with trio.open_nursery() as nursery:
            await nursery.start(persister.run)
            summary = await persister.read_summary(key, 0)
            assert (summary.error, summary.start_offset) == (ErrorCode.NONE, -1)
            assert (await persister.read_state(key, 0)).error == ErrorCode.INVALID_REQUEST  # not initialized
            assert (await persister.initialize_state(key, 1, 10)).error == ErrorCode.NONE
            assert (await persister.write_state(key, 1, 3, 12, batches)).error == ErrorCode.NONE
            archived = (PersisterStateBatch(14, 17, ARCHIVED, 3),)
            assert (await persister.write_state(key, 1, 3, -1, archived)).error == ErrorCode.NONE
            read = await persister.read_state(key, 3)
            assert (read.error, read.state_epoch, read.start_offset, read.state_batches) == (
                ErrorCode.NONE, 1, 12, (PersisterStateBatch(12, 13, ACKNOWLEDGED, 1),
                                        PersisterStateBatch(14, 17, ARCHIVED, 3),
                                        PersisterStateBatch(18, 20, AVAILABLE, 2)))
            assert (await persister.write_state(key, 1, 2, -1, ())).error == ErrorCode.FENCED_LEADER_EPOCH
            assert (await persister.write_state(key, 0, 3, -1, ())).error == ErrorCode.FENCED_STATE_EPOCH
            summary = await persister.read_summary(key, 3)
            assert (summary.error, summary.state_epoch, summary.leader_epoch, summary.start_offset) == (
                ErrorCode.NONE, 1, 3, 12)
            assert (await persister.delete_state(key)).error == ErrorCode.NONE
            assert (await persister.read_state(key, 4)).error == ErrorCode.INVALID_REQUEST
            nursery.cancel_scope.cancel()

    trio.run(main)


def test_persister_finds_the_new_coordinator_after_a_kill_9(tmp_path) -> None:
    with minikafka.Cluster(brokers=3, data_dir=tmp_path / "cluster",
                           config={"share.coordinator.state.topic.num.partitions": 3}) as cluster:
        first = cluster.brokers[0].bootstrap_servers
        tid = create_topic(first, 1)
        key = SharePartitionKey(GROUP, tid, 0)
        batches = (PersisterStateBatch(0, 4, ACKNOWLEDGED, 1), PersisterStateBatch(5, 9, AVAILABLE, 1))

        async def main() -> None:
            _, coordinator = find_share_coordinator(first, coordinator_key(key))
            local = next(b for b in cluster.brokers if b.node_id != coordinator)
            persister = persister_on(cluster.brokers, local)
            async with trio.open_nursery() as nursery:
                await nursery.start(persister.run)
                assert (await persister.initialize_state(key, 1, 0)).error == ErrorCode.NONE
                assert (await persister.write_state(key, 1, 0, 0, batches)).error == ErrorCode.NONE
                cluster.broker(coordinator).kill()
                read = await persister.read_state(key, 1)
                assert (read.error, read.state_epoch, read.start_offset, read.state_batches) == (
                    ErrorCode.NONE, 1, 0, batches)
                assert (await persister.write_state(key, 1, 1, 5, ())).error == ErrorCode.NONE
                assert (await persister.write_state(key, 1, 0, 5, ())).error == ErrorCode.FENCED_LEADER_EPOCH
                nursery.cancel_scope.cancel()
            _, new_coordinator = find_share_coordinator(local.bootstrap_servers, coordinator_key(key))
            assert new_coordinator not in (coordinator, -1)

        trio.run(main)


def test_share_partition_persists_acknowledgements_for_the_next_leader(broker) -> None:
    tid = create_topic(broker.bootstrap_servers, 1)
    key = SharePartitionKey(GROUP, tid, 0)

    async def latest() -> int:
        return 5

    async def main() -> None:
        persister = persister_on([broker], broker)
        async with trio.open_nursery() as nursery:
            await nursery.start(persister.run)
            assert (await persister.initialize_state(key, 1, -1)).error == ErrorCode.NONE
            old = SharePartition(key, 1, persister, delivery_count_limit=2)
            assert await old.maybe_initialize(latest) == ErrorCode.NONE
            assert old.state is not None and old.state.start_offset == 5
            assert old.state.acquire("a", 5, 9, 10, 0, 30_000) == [AcquiredRecords(5, 9, 1)]
            accept_reject_release = [AcknowledgementBatch(5, 6, (1,)), AcknowledgementBatch(7, 7, (3,)),
                                     AcknowledgementBatch(8, 8, (2,))]
            assert await old.acknowledge("a", accept_reject_release) == (ErrorCode.NONE, None)
            not_owner = await old.acknowledge("b", [AcknowledgementBatch(9, 9, (1,))])
            assert not_owner[0] == ErrorCode.INVALID_RECORD_STATE

            new = SharePartition(key, 2, persister, delivery_count_limit=2)
            assert await new.maybe_initialize(latest) == ErrorCode.NONE
            assert new.state is not None and (new.state.start_offset, new.state.end_offset) == (8, 10)
            assert new.state.acquire("b", 8, 9, 10, 0, 30_000) == [AcquiredRecords(8, 8, 2), AcquiredRecords(9, 9, 1)]

            fenced = await old.acknowledge("a", [AcknowledgementBatch(9, 9, (1,))])
            assert fenced[0] == ErrorCode.NOT_LEADER_OR_FOLLOWER
            record = old.state.record(9)
            assert record is not None and record.state == RecordState.ACQUIRED  # undone
            nursery.cancel_scope.cancel()

    trio.run(main)
