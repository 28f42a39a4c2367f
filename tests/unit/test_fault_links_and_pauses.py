"""The pieces of the replication faults, without processes: which node sent a request, what a cut link fails and
refuses, how paused fetching adds up in the fetcher manager, and which leadership moves the controller allows."""
from __future__ import annotations

import re
import uuid

import pytest
import trio
from kafka.protocol.consumer.fetch import FetchRequest
from kafka.protocol.consumer.offsets import ListOffsetsRequest, OffsetForLeaderEpochRequest
from kafka.protocol.metadata import MetadataRequest

from minikafka.broker.controller.leader_move import leader_move
from minikafka.broker.faults.fetch_pauses import FetchPauses
from minikafka.broker.faults.link_faults import LinkFaults, sender_node
from minikafka.broker.faults.rules import FaultError
from minikafka.broker.metadata.metadata_image import MetadataImage
from minikafka.broker.replication.replica_fetcher_manager import ReplicaFetcherManager
from minikafka.broker.replication.replication_config import ReplicationConfig
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.control_plane import BrokerHeartbeatRequest
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.protocol.metadata_records import (
    BrokerRegistrationChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
)
from tests.helpers import held_free_port

UNUSED = ("127.0.0.1", 1)  # never dialled: one-way cuts reach no other node


def fetch(version: int, replica_id: int) -> object:
    R = FetchRequest[version]
    fields = dict(max_wait_ms=0, min_bytes=0, max_bytes=1, isolation_level=0, session_id=0, session_epoch=-1,
                  topics=[], forgotten_topics_data=[], rack_id="")
    if version >= 15:
        fields["replica_state"] = R.ReplicaState(replica_id=replica_id, replica_epoch=-1)
    else:
        fields["replica_id"] = replica_id
    return R(**fields)


# ---- who sent a request ----------------------------------------------------------------------------------------------

def test_sender_node_names_brokers_and_never_clients() -> None:
    assert sender_node(ApiKey.FETCH, fetch(12, 2)) == 2
    assert sender_node(ApiKey.FETCH, fetch(17, 3)) == 3  # KIP-903: the replica id moved into ReplicaState
    assert sender_node(ApiKey.FETCH, fetch(17, -1)) is None  # a consumer
    assert sender_node(ApiKey.OFFSET_FOR_LEADER_EPOCH, OffsetForLeaderEpochRequest[4](replica_id=2, topics=[])) == 2
    assert sender_node(ApiKey.LIST_OFFSETS,
                       ListOffsetsRequest[9](replica_id=-1, isolation_level=0, topics=[])) is None
    assert sender_node(ApiKey.LIST_OFFSETS,
                       ListOffsetsRequest[9](replica_id=4, isolation_level=0, topics=[])) == 4
    heartbeat = BrokerHeartbeatRequest(broker_id=5, broker_epoch=0, current_metadata_offset=0, want_fence=False,
                                       want_shut_down=False, offline_log_dirs=[])
    assert sender_node(ApiKey.BROKER_HEARTBEAT, heartbeat) == 5
    assert sender_node(ApiKey.METADATA, MetadataRequest[12](topics=None, allow_auto_topic_creation=False)) is None


# ---- cut links -------------------------------------------------------------------------------------------------------

def test_a_one_way_cut_fails_requests_to_the_node_and_refuses_its_own() -> None:
    links = LinkFaults()
    assert not links.is_cut(2) and links.refusal(ApiKey.FETCH, fetch(17, 2)) is None
    link = trio.run(links.cut, 7, 1, 2, UNUSED, False)
    assert link.describe() == {"kind": "link", "id": 7, "to": 2, "both_ways": False, "peer_fault_id": None,
                               "hits": 0}
    assert links.is_cut(2) and not links.is_cut(3)
    assert links.refusal(ApiKey.FETCH, fetch(17, 2)) == "Fetch from node 2 refused: the link to it is cut"
    assert links.refusal(ApiKey.FETCH, fetch(17, 3)) is None
    assert links.refusal(ApiKey.FETCH, fetch(17, -1)) is None  # client connections are never touched
    assert link.hits == 2  # the request to node 2 failed, and the one from it refused
    with pytest.raises(FaultError, match="already cut"):
        trio.run(links.cut, 8, 1, 2, UNUSED, False)
    assert trio.run(links.heal, 99) == 0
    assert trio.run(links.heal, 7) == 1
    assert not links.is_cut(2) and links.describe() == []


def test_a_controller_known_only_by_address_is_cut_once_its_id_is_known() -> None:
    links = LinkFaults()
    trio.run(links.cut, 1, 1, 3000, UNUSED, False)
    assert not links.is_cut(-1)  # which node the bootstrap address is, is not known yet
    links.controller_ids.add(3000)
    assert links.is_cut(-1)


def test_a_cut_both_ways_whose_other_end_is_unreachable_cuts_nothing() -> None:
    links = LinkFaults()
    with held_free_port() as port:  # held, never listening: connecting is refused
        with pytest.raises(FaultError, match="cannot reach the control API of node 2"):
            trio.run(links.cut, 1, 1, 2, ("127.0.0.1", port), True)
    assert links.describe() == [] and not links.is_cut(2)


# ---- paused fetching -------------------------------------------------------------------------------------------------

def test_pauses_add_up_in_the_fetcher_manager() -> None:
    manager = ReplicaFetcherManager(None, ReplicationConfig())  # type: ignore[arg-type]  # pausing needs no replicas
    pauses = FetchPauses()
    one = pauses.pause(1, manager, "t", 0, frozenset({("t", 0)}))
    both = pauses.pause(2, manager, "t", None, frozenset({("t", 0), ("t", 1)}))
    assert manager.is_paused(("t", 0)) and manager.is_paused(("t", 1)) and not manager.is_paused(("u", 0))
    assert pauses.resume(both.id) == 1
    assert manager.is_paused(("t", 0)) and not manager.is_paused(("t", 1))  # still paused by the first
    everything = pauses.pause(3, manager, None, None, None)
    assert manager.is_paused(("u", 0))
    assert pauses.resume(everything.id) == 1
    assert manager.is_paused(("t", 0)) and not manager.is_paused(("u", 0))
    assert [p["id"] for p in pauses.describe()] == [one.id]
    manager._held_back(("t", 0))  # a fetch round left t-0 out: the pause covering it counts the hit
    manager._held_back(("u", 0))  # not paused by any: nobody's hit
    assert pauses.describe()[0]["hits"] == 1
    assert pauses.resume() == 1 and not manager.is_paused(("t", 0))


# ---- moving a leader -------------------------------------------------------------------------------------------------

TOPIC_ID = uuid.UUID(int=7)


def image_with(replicas: list[int], isr: list[int], leader: int, fenced: tuple[int, ...] = ()) -> MetadataImage:
    image = MetadataImage()
    records: list = []
    for broker_id in (1, 2, 3):
        records += [RegisterBrokerRecord(
            broker_id=broker_id, incarnation_id=uuid.UUID(int=broker_id), broker_epoch=broker_id,
            end_points=[RegisterBrokerRecord.BrokerEndpoint(name="PLAINTEXT", host="127.0.0.1", port=9090 + broker_id,
                                                            security_protocol=0)],
            features=[], rack=None, fenced=True, in_controlled_shutdown=False)]
        if broker_id not in fenced:
            records.append(BrokerRegistrationChangeRecord(broker_id=broker_id, broker_epoch=broker_id, fenced=-1))
    records += [TopicRecord(name="t", topic_id=TOPIC_ID),
                PartitionRecord(partition_id=0, topic_id=TOPIC_ID, replicas=replicas, isr=isr, removing_replicas=[],
                                adding_replicas=[], leader=leader, leader_epoch=4, partition_epoch=9)]
    for offset, record in enumerate(records):
        image.replay(record, offset)
    return image


def test_a_leader_moves_only_to_a_live_in_sync_replica() -> None:
    record = leader_move(image_with([1, 2, 3], [1, 2, 3], 1), "t", 0, 2)
    assert record is not None and (record.leader, record.isr, record.topic_id) == (2, None, TOPIC_ID)
    moved = image_with([1, 2, 3], [1, 2, 3], 1).topics["t"].partitions[0].merge(record)
    assert (moved.leader, moved.leader_epoch, moved.isr) == (2, 5, [1, 2, 3])
    assert leader_move(image_with([1, 2, 3], [1, 2, 3], 2), "t", 0, 2) is None  # it leads already
    refusals = [
        (image_with([1, 2], [1, 2], 1), "t", 3, ErrorCode.INVALID_REPLICA_ASSIGNMENT, "not a replica of t-0"),
        (image_with([1, 2, 3], [1, 2], 1), "t", 3, ErrorCode.INELIGIBLE_REPLICA, "not in the ISR [1, 2] of t-0"),
        (image_with([1, 2, 3], [1, 2, 3], 1, fenced=(3,)), "t", 3, ErrorCode.BROKER_NOT_AVAILABLE, "fenced"),
        (image_with([1, 2, 3], [1, 2, 3], 1), "nope", 3, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "no partition"),
    ]
    for image, topic, to, code, text in refusals:
        with pytest.raises(KafkaError, match=re.escape(text)) as refused:
            leader_move(image, topic, 0, to)
        assert refused.value.code == code
