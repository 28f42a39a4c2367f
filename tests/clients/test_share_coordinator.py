"""The share coordinator on a real broker, through raw share-group state requests (83-87): what a share-partition
leader stores is read back exactly, epochs fence, and the state survives a kill -9 of its coordinator."""
from __future__ import annotations

import uuid
from typing import Any

from kafka.protocol.metadata import MetadataRequest

from minikafka.protocol.client_apis.share_state import (
    DeleteShareGroupStateRequest,
    InitializeShareGroupStateRequest,
    ReadShareGroupStateRequest,
    ReadShareGroupStateSummaryRequest,
    WriteShareGroupStateRequest,
)
from minikafka.protocol.errors import ErrorCode
from tests.helpers import admin_create_topic, wait_until
from tests.raw_client import RawConnection

TOPIC = "shared"
GROUP = "share-group"
RETRIABLE = {ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE}


def topic_id(bootstrap: str) -> uuid.UUID:
    with RawConnection(bootstrap) as conn:
        response = conn.request(MetadataRequest[12](topics=[MetadataRequest[12].MetadataRequestTopic(
            topic_id=None, name=TOPIC)], allow_auto_topic_creation=False, include_topic_authorized_operations=False))
    tid: uuid.UUID = response.topics[0].topic_id
    return tid


def call(bootstrap: str, request: Any) -> Any:
    """The partition's result, retrying the coordinator's retriable errors (it is created and loaded on demand)."""
    request.API_VERSION = 0  # the one version Kafka 4.1 serves
    answer: list[Any] = []

    def answered() -> bool:
        with RawConnection(bootstrap) as conn:
            result = conn.request(request).results[0].partitions[0]
        answer[:] = [result]
        return result.error_code not in RETRIABLE

    wait_until(answered, 60)
    return answer[0]


def initialize(tid: uuid.UUID, partition: int, state_epoch: int, start_offset: int) -> Any:
    R = InitializeShareGroupStateRequest
    P = R.InitializeStateData.PartitionData
    return R(group_id=GROUP, topics=[R.InitializeStateData(topic_id=tid, partitions=[P(
        partition=partition, state_epoch=state_epoch, start_offset=start_offset)])])


def write(tid: uuid.UUID, partition: int, state_epoch: int, leader_epoch: int, start_offset: int,
          batches: list[tuple[int, int, int, int]]) -> Any:
    R = WriteShareGroupStateRequest
    P = R.WriteStateData.PartitionData
    return R(group_id=GROUP, topics=[R.WriteStateData(topic_id=tid, partitions=[P(
        partition=partition, state_epoch=state_epoch, leader_epoch=leader_epoch, start_offset=start_offset,
        state_batches=[P.StateBatch(first_offset=f, last_offset=la, delivery_state=s, delivery_count=c)
                       for f, la, s, c in batches])])])


def read(tid: uuid.UUID, partition: int, leader_epoch: int) -> Any:
    R = ReadShareGroupStateRequest
    return R(group_id=GROUP, topics=[R.ReadStateData(topic_id=tid, partitions=[R.ReadStateData.PartitionData(
        partition=partition, leader_epoch=leader_epoch)])])


def summary(tid: uuid.UUID, partition: int) -> Any:
    R = ReadShareGroupStateSummaryRequest
    return R(group_id=GROUP, topics=[R.ReadStateSummaryData(topic_id=tid, partitions=[
        R.ReadStateSummaryData.PartitionData(partition=partition, leader_epoch=0)])])


def delete(tid: uuid.UUID, partition: int) -> Any:
    R = DeleteShareGroupStateRequest
    return R(group_id=GROUP, topics=[R.DeleteStateData(topic_id=tid, partitions=[R.DeleteStateData.PartitionData(
        partition=partition)])])


def state_of(result: Any) -> tuple[int, int, int, list[tuple[int, int, int, int]]]:
    return (result.error_code, result.state_epoch, result.start_offset,
            [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in result.state_batches])


def test_state_round_trips_fences_and_survives_a_kill_9(broker) -> None:
    bootstrap = broker.bootstrap_servers
    admin_create_topic(bootstrap, TOPIC, 2)
    tid = topic_id(bootstrap)

    assert call(bootstrap, read(tid, 0, 0)).error_code == ErrorCode.INVALID_REQUEST  # not initialized
    assert (lambda r: (r.error_code, r.state_epoch, r.leader_epoch, r.start_offset))(
        call(bootstrap, summary(tid, 0))) == (0, 0, 0, -1)
    assert call(bootstrap, initialize(tid, 0, 1, 10)).error_code == ErrorCode.NONE
    assert call(bootstrap, initialize(tid, 5, 1, 0)).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert call(bootstrap, write(tid, 0, 1, 3, 12, [(12, 15, 2, 1), (16, 20, 0, 2)])).error_code == ErrorCode.NONE
    assert call(bootstrap, write(tid, 0, 1, 3, -1, [(14, 17, 4, 3)])).error_code == ErrorCode.NONE
    expected = (0, 1, 12, [(12, 13, 2, 1), (14, 17, 4, 3), (18, 20, 0, 2)])
    assert state_of(call(bootstrap, read(tid, 0, 3))) == expected
    assert call(bootstrap, write(tid, 0, 1, 2, -1, [])).error_code == ErrorCode.FENCED_LEADER_EPOCH
    assert call(bootstrap, write(tid, 0, 0, 3, -1, [])).error_code == ErrorCode.FENCED_STATE_EPOCH
    assert call(bootstrap, read(tid, 0, 2)).error_code == ErrorCode.FENCED_LEADER_EPOCH
    assert (lambda r: (r.error_code, r.state_epoch, r.leader_epoch, r.start_offset))(
        call(bootstrap, summary(tid, 0))) == (0, 1, 3, 12)
    assert call(bootstrap, initialize(tid, 1, 0, 0)).error_code == ErrorCode.NONE

    broker.restart(kill=True)

    assert state_of(call(bootstrap, read(tid, 0, 4))) == expected
    assert call(bootstrap, write(tid, 0, 1, 3, -1, [])).error_code == ErrorCode.FENCED_LEADER_EPOCH
    assert call(bootstrap, delete(tid, 0)).error_code == ErrorCode.NONE
    assert call(bootstrap, read(tid, 0, 4)).error_code == ErrorCode.INVALID_REQUEST
    assert state_of(call(bootstrap, read(tid, 1, 0))) == (0, 0, 0, [])
