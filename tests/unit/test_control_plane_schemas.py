import struct
import uuid

import pytest

from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.codec import SCHEMAS, decode_request, encode_response
from minikafka.protocol.control_plane import (
    CONTROL_PLANE_SCHEMAS,
    AllocateProducerIdsRequest,
    AllocateProducerIdsResponse,
    AlterPartitionRequest,
    AlterPartitionResponse,
    AssignReplicasToDirsRequest,
    AssignReplicasToDirsResponse,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from minikafka.protocol.request_header import RequestHeader
from minikafka.protocol.varint import encode_uvarint as _uvarint

ORDERS_ID = uuid.UUID("6b1d3a4e-2f0c-4c59-9a57-0e3c1f2d8a10")
PAYMENTS_ID = uuid.UUID("0f9e8d7c-6b5a-4938-8271-605f4e3d2c1b")
INCARNATION_ID = uuid.UUID("c3a1e2f4-5b6d-4e7f-8091-a2b3c4d5e6f7")
LOG_DIR_ID = uuid.UUID("11111111-2222-4333-8444-555555555555")
FAILED_DIR_ID = uuid.UUID("99999999-8888-4777-8666-555555555555")


def _broker_registration_request():
    cls = BrokerRegistrationRequest
    return cls(
        broker_id=2, cluster_id="q1Sh-9_ISia_zwGINzRvyQ", incarnation_id=INCARNATION_ID,
        listeners=[cls.Listener(name="PLAINTEXT", host="127.0.0.1", port=9093, security_protocol=0),
                   cls.Listener(name="REPLICATION", host="127.0.0.1", port=65001, security_protocol=0)],
        features=[cls.Feature(name="metadata.version", min_supported_version=7, max_supported_version=26),
                  cls.Feature(name="kraft.version", min_supported_version=0, max_supported_version=1)],
        rack=None, is_migrating_zk_broker=True, log_dirs=[LOG_DIR_ID], previous_broker_epoch=41)


def _broker_registration_response():
    return BrokerRegistrationResponse(throttle_time_ms=0, error_code=0, broker_epoch=42)


def _broker_heartbeat_request():
    return BrokerHeartbeatRequest(broker_id=2, broker_epoch=42, current_metadata_offset=1234, want_fence=False,
                                  want_shut_down=True, offline_log_dirs=[FAILED_DIR_ID])


def _broker_heartbeat_response():
    return BrokerHeartbeatResponse(throttle_time_ms=5, error_code=0, is_caught_up=True, is_fenced=False,
                                   should_shut_down=True)


def _alter_partition_request():
    topic = AlterPartitionRequest.TopicData
    partition = topic.PartitionData
    return AlterPartitionRequest(broker_id=1, broker_epoch=100, topics=[topic(
        topic_name="orders", topic_id=ORDERS_ID, partitions=[
            partition(partition_index=0, leader_epoch=5, new_isr=[1, 2],
                      new_isr_with_epochs=[partition.BrokerState(broker_id=1, broker_epoch=100),
                                           partition.BrokerState(broker_id=2, broker_epoch=-1)],
                      leader_recovery_state=1, partition_epoch=9),
            partition(partition_index=3, leader_epoch=2, new_isr=[1],
                      new_isr_with_epochs=[partition.BrokerState(broker_id=1, broker_epoch=100)],
                      leader_recovery_state=0, partition_epoch=4)])])


def _alter_partition_response():
    topic = AlterPartitionResponse.TopicData
    return AlterPartitionResponse(throttle_time_ms=0, error_code=0, topics=[topic(
        topic_name="orders", topic_id=ORDERS_ID, partitions=[
            topic.PartitionData(partition_index=0, error_code=0, leader_id=1, leader_epoch=5, isr=[1, 2],
                                leader_recovery_state=1, partition_epoch=10),
            topic.PartitionData(partition_index=3, error_code=90, leader_id=1, leader_epoch=2, isr=[1, 3],
                                leader_recovery_state=0, partition_epoch=4)])])


def _leader_and_isr_partition(cls, topic_name, index, leader):
    return cls(topic_name=topic_name, partition_index=index, controller_epoch=3, leader=leader, leader_epoch=7,
               isr=[leader, 3], partition_epoch=12, replicas=[leader, 3, 4], adding_replicas=[4],
               removing_replicas=[], is_new=index == 1, leader_recovery_state=0)


def _leader_and_isr_request():
    cls = LeaderAndIsrRequest
    topic_state = cls.LeaderAndIsrTopicState
    return cls(
        controller_id=3000, is_k_raft_controller=True, controller_epoch=3, broker_epoch=42, request_type=2,
        ungrouped_partition_states=[_leader_and_isr_partition(cls.LeaderAndIsrPartitionState, "orders", 0, 2),
                                    _leader_and_isr_partition(cls.LeaderAndIsrPartitionState, "orders", 1, 3)],
        topic_states=[topic_state(
            topic_name="orders", topic_id=ORDERS_ID,
            partition_states=[_leader_and_isr_partition(topic_state.LeaderAndIsrPartitionState, "orders", 0, 2),
                              _leader_and_isr_partition(topic_state.LeaderAndIsrPartitionState, "orders", 1, 3)])],
        live_leaders=[cls.LeaderAndIsrLiveLeader(broker_id=2, host_name="127.0.0.1", port=9093),
                      cls.LeaderAndIsrLiveLeader(broker_id=3, host_name="127.0.0.1", port=9094)])


def _leader_and_isr_response():
    cls = LeaderAndIsrResponse
    topic = cls.LeaderAndIsrTopicError
    return cls(
        error_code=0,
        partition_errors=[cls.LeaderAndIsrPartitionError(topic_name="orders", partition_index=0, error_code=0),
                          cls.LeaderAndIsrPartitionError(topic_name="orders", partition_index=1, error_code=56)],
        topics=[topic(topic_id=ORDERS_ID, partition_errors=[
            topic.LeaderAndIsrPartitionError(partition_index=0, error_code=0),
            topic.LeaderAndIsrPartitionError(partition_index=1, error_code=56)])])


def _update_metadata_partition(cls, topic_name, index):
    return cls(topic_name=topic_name, partition_index=index, controller_epoch=3, leader=2, leader_epoch=7,
               isr=[2, 3], zk_version=12, replicas=[2, 3, 4], offline_replicas=[4])


def _update_metadata_request():
    cls = UpdateMetadataRequest
    topic_state = cls.UpdateMetadataTopicState
    broker = cls.UpdateMetadataBroker
    endpoint = broker.UpdateMetadataEndpoint
    return cls(
        controller_id=1, is_k_raft_controller=False, request_type=2, controller_epoch=3, broker_epoch=42,
        ungrouped_partition_states=[_update_metadata_partition(cls.UpdateMetadataPartitionState, "orders", 0)],
        topic_states=[topic_state(topic_name="orders", topic_id=ORDERS_ID, partition_states=[
            _update_metadata_partition(topic_state.UpdateMetadataPartitionState, "orders", 0),
            _update_metadata_partition(topic_state.UpdateMetadataPartitionState, "orders", 1)])],
        live_brokers=[
            broker(id=2, v0_host="127.0.0.1", v0_port=9093, rack="rack-a", endpoints=[
                endpoint(port=9093, host="127.0.0.1", listener="PLAINTEXT", security_protocol=0),
                endpoint(port=9193, host="127.0.0.1", listener="REPLICATION", security_protocol=1)]),
            broker(id=3, v0_host="127.0.0.1", v0_port=9094, rack="rack-b", endpoints=[
                endpoint(port=9094, host="127.0.0.1", listener="PLAINTEXT", security_protocol=0)])])


def _update_metadata_response():
    return UpdateMetadataResponse(error_code=0)


def _stop_replica_request():
    cls = StopReplicaRequest
    topic_state = cls.StopReplicaTopicState
    return cls(
        controller_id=1, is_k_raft_controller=True, controller_epoch=3, broker_epoch=42, delete_partitions=True,
        ungrouped_partitions=[cls.StopReplicaPartitionV0(topic_name="orders", partition_index=0),
                              cls.StopReplicaPartitionV0(topic_name="payments", partition_index=2)],
        topics=[cls.StopReplicaTopicV1(name="orders", partition_indexes=[0, 1]),
                cls.StopReplicaTopicV1(name="payments", partition_indexes=[2])],
        topic_states=[
            topic_state(topic_name="orders", partition_states=[
                topic_state.StopReplicaPartitionState(partition_index=0, leader_epoch=7, delete_partition=True),
                topic_state.StopReplicaPartitionState(partition_index=1, leader_epoch=-2, delete_partition=False)]),
            topic_state(topic_name="payments", partition_states=[
                topic_state.StopReplicaPartitionState(partition_index=2, leader_epoch=4, delete_partition=True)])])


def _stop_replica_response():
    error = StopReplicaResponse.StopReplicaPartitionError
    return StopReplicaResponse(error_code=0, partition_errors=[
        error(topic_name="orders", partition_index=0, error_code=0),
        error(topic_name="payments", partition_index=2, error_code=74)])


def _controlled_shutdown_request():
    return ControlledShutdownRequest(broker_id=2, broker_epoch=42)


def _controlled_shutdown_response():
    partition = ControlledShutdownResponse.RemainingPartition
    return ControlledShutdownResponse(error_code=0, remaining_partitions=[
        partition(topic_name="orders", partition_index=0), partition(topic_name="payments", partition_index=2)])


def _allocate_producer_ids_request():
    return AllocateProducerIdsRequest(broker_id=2, broker_epoch=42)


def _allocate_producer_ids_response():
    return AllocateProducerIdsResponse(throttle_time_ms=0, error_code=0, producer_id_start=3000, producer_id_len=1000)


def _assign_replicas_to_dirs_request():
    R = AssignReplicasToDirsRequest.DirectoryData
    return AssignReplicasToDirsRequest(broker_id=2, broker_epoch=42, directories=[R(id=uuid.UUID(int=1), topics=[
        R.TopicData(topic_id=uuid.UUID(int=7), partitions=[R.TopicData.PartitionData(partition_index=3)])])])


def _assign_replicas_to_dirs_response():
    R = AssignReplicasToDirsResponse.DirectoryData
    return AssignReplicasToDirsResponse(throttle_time_ms=0, error_code=0, directories=[R(id=uuid.UUID(int=1), topics=[
        R.TopicData(topic_id=uuid.UUID(int=7), partitions=[R.TopicData.PartitionData(partition_index=3,
                                                                                   error_code=0)])])])


SAMPLES = {
    ApiKey.BROKER_REGISTRATION: (_broker_registration_request, _broker_registration_response),
    ApiKey.BROKER_HEARTBEAT: (_broker_heartbeat_request, _broker_heartbeat_response),
    ApiKey.ALTER_PARTITION: (_alter_partition_request, _alter_partition_response),
    ApiKey.LEADER_AND_ISR: (_leader_and_isr_request, _leader_and_isr_response),
    ApiKey.UPDATE_METADATA: (_update_metadata_request, _update_metadata_response),
    ApiKey.STOP_REPLICA: (_stop_replica_request, _stop_replica_response),
    ApiKey.CONTROLLED_SHUTDOWN: (_controlled_shutdown_request, _controlled_shutdown_response),
    ApiKey.ALLOCATE_PRODUCER_IDS: (_allocate_producer_ids_request, _allocate_producer_ids_response),
    ApiKey.ASSIGN_REPLICAS_TO_DIRS: (_assign_replicas_to_dirs_request, _assign_replicas_to_dirs_response),
}

# Kafka's versions for these APIs (3.9 for the ZooKeeper-era ones, 4.1 for the KRaft ones) and first flexible version.
VERSIONS = {
    ApiKey.BROKER_REGISTRATION: (0, 4, 0),
    ApiKey.BROKER_HEARTBEAT: (0, 1, 0),
    ApiKey.ALTER_PARTITION: (0, 3, 0),
    ApiKey.LEADER_AND_ISR: (0, 7, 4),
    ApiKey.UPDATE_METADATA: (0, 8, 6),
    ApiKey.STOP_REPLICA: (0, 4, 2),
    ApiKey.CONTROLLED_SHUTDOWN: (0, 3, 3),
    ApiKey.ALLOCATE_PRODUCER_IDS: (0, 0, 0),
    ApiKey.ASSIGN_REPLICAS_TO_DIRS: (0, 0, 0),
}


def _all_versions():
    return [pytest.param(key, version, id=f"{key.api_name}-v{version}")
            for key, (lo, hi, _flexible) in VERSIONS.items() for version in range(lo, hi + 1)]


def _header_versions():
    return [pytest.param(key, version, id=f"{ApiKey(key).api_name}-v{version}")
            for key, schema in CONTROL_PLANE_SCHEMAS.items()
            for version in range(schema.min_version, schema.max_version + 1)]


def _in_version(message, version):
    """The fields `version` carries, recursively, as plain values (nested structs become dicts)."""
    out = {}
    for field in message._struct._fields:
        if not field.for_version_q(version):
            continue
        value = getattr(message, field.name)
        if field.is_struct_array():
            value = None if value is None else [_in_version(item, version) for item in value]
        out[field.name] = value
    return out


def _compact_string(text):
    data = text.encode()
    return _uvarint(len(data) + 1) + data


def _compact_int32s(values):
    return _uvarint(len(values) + 1) + b"".join(struct.pack(">i", v) for v in values)


def test_table_covers_the_control_plane_apis_with_kafkas_versions():
    assert set(CONTROL_PLANE_SCHEMAS) == set(VERSIONS)
    for key, schema in CONTROL_PLANE_SCHEMAS.items():
        lo, hi, flexible_from = VERSIONS[ApiKey(key)]
        assert schema.request.API_KEY == schema.response.API_KEY == key
        assert schema.request.is_request() and not schema.response.is_request()
        assert schema.request.valid_versions == schema.response.valid_versions == (lo, hi)
        assert schema.max_version == hi
        assert schema.min_version == (1 if key == ApiKey.CONTROLLED_SHUTDOWN else lo)
        for version in range(lo, hi + 1):
            assert schema.flexible(version) == (version >= flexible_from)
            assert schema.response.flexible_version_q(version) == (version >= flexible_from)


def test_control_plane_apis_are_never_in_the_client_table():
    assert not set(CONTROL_PLANE_SCHEMAS) & set(SCHEMAS)


@pytest.mark.parametrize(("key", "version"), _all_versions())
def test_request_round_trips(key, version):
    request = SAMPLES[key][0]()
    encoded = request.encode(version=version)
    decoded = CONTROL_PLANE_SCHEMAS[key].request.decode(encoded, version=version)
    assert _in_version(decoded, version) == _in_version(request, version)
    assert decoded.encode() == encoded  # a decoded message keeps its version


@pytest.mark.parametrize(("key", "version"), _all_versions())
def test_response_round_trips(key, version):
    response = SAMPLES[key][1]()
    encoded = response.encode(version=version)
    decoded = CONTROL_PLANE_SCHEMAS[key].response.decode(encoded, version=version)
    assert _in_version(decoded, version) == _in_version(response, version)
    assert decoded.encode() == encoded  # a decoded message keeps its version


@pytest.mark.parametrize(("key", "version"), _header_versions())
def test_framed_request_decodes_through_the_codec(key, version):
    schema = CONTROL_PLANE_SCHEMAS[key]
    request = SAMPLES[key][0]()
    request.API_VERSION = version
    request.with_header(correlation_id=314, client_id="broker-2")
    framed = request.encode(header=True, framed=True)
    (size,) = struct.unpack_from(">i", framed)
    assert size == len(framed) - 4
    frame = bytes(framed[4:])
    header, pos = RequestHeader.parse(frame)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
        key, version, 314, "broker-2")
    if schema.flexible(version):
        assert frame[pos] == 0  # header v2: empty tagged fields after the client id
    decoded = decode_request(schema, header, frame, pos)
    assert _in_version(decoded, version) == _in_version(request, version)


def test_request_header_tagged_fields_are_skipped():
    schema = CONTROL_PLANE_SCHEMAS[ApiKey.BROKER_HEARTBEAT]
    body = _broker_heartbeat_request().encode(version=1)
    header = struct.pack(">hhih", ApiKey.BROKER_HEARTBEAT, 1, 9, 4) + b"ctrl"
    unknown_tag = _uvarint(1) + _uvarint(7) + _uvarint(3) + b"abc"
    frame = header + unknown_tag + bytes(body)
    parsed, pos = RequestHeader.parse(frame)
    decoded = decode_request(schema, parsed, frame, pos)
    assert decoded.broker_epoch == 42 and decoded.offline_log_dirs == [FAILED_DIR_ID]


@pytest.mark.parametrize(("key", "version"), _header_versions())
def test_framed_response_header_follows_flexibility(key, version):
    schema = CONTROL_PLANE_SCHEMAS[key]
    response = SAMPLES[key][1]()
    framed = encode_response(schema, version, 2718, response)
    size, correlation_id = struct.unpack_from(">ii", framed)
    assert size == len(framed) - 4 and correlation_id == 2718
    body = bytes(response.encode(version=version))
    if schema.flexible(version):
        assert framed[8:] == b"\x00" + body
    else:
        assert framed[8:] == body
    decoded = schema.response.decode(framed, version=version, header=True, framed=True)
    assert decoded.header.correlation_id == 2718
    assert _in_version(decoded, version) == _in_version(response, version)


def test_broker_heartbeat_v1_request_bytes():
    expected = (struct.pack(">iqq??", 2, 42, 1234, False, True)
                # tagged fields: one field, tag 0 (OfflineLogDirs), 17 bytes: compact array of one uuid
                + _uvarint(1) + _uvarint(0) + _uvarint(17) + _uvarint(2) + FAILED_DIR_ID.bytes)
    request = _broker_heartbeat_request()
    assert bytes(request.encode(version=1)) == expected
    decoded = BrokerHeartbeatRequest.decode(expected, version=1)
    assert decoded.offline_log_dirs == [FAILED_DIR_ID] and decoded.want_shut_down is True


def test_broker_heartbeat_omits_empty_offline_log_dirs_and_v0_has_none():
    request = BrokerHeartbeatRequest(broker_id=2, broker_epoch=42, current_metadata_offset=1234, want_fence=True,
                                     want_shut_down=False)
    fixed = struct.pack(">iqq??", 2, 42, 1234, True, False)
    assert bytes(request.encode(version=1)) == fixed + b"\x00"
    v0 = struct.pack(">iqq??", 2, 42, 1234, False, True) + b"\x00"
    assert bytes(_broker_heartbeat_request().encode(version=0)) == v0


def test_alter_partition_v3_request_bytes():
    topic = AlterPartitionRequest.TopicData
    partition = topic.PartitionData
    request = AlterPartitionRequest(broker_id=1, broker_epoch=100, topics=[topic(topic_id=ORDERS_ID, partitions=[
        partition(partition_index=0, leader_epoch=5,
                  new_isr_with_epochs=[partition.BrokerState(broker_id=1, broker_epoch=100),
                                       partition.BrokerState(broker_id=2, broker_epoch=101)],
                  leader_recovery_state=0, partition_epoch=9)])])
    expected = (struct.pack(">iq", 1, 100)
                + _uvarint(2) + ORDERS_ID.bytes  # one topic, by id
                + _uvarint(2) + struct.pack(">ii", 0, 5)  # one partition: index, leader epoch
                + _uvarint(3)  # NewIsrWithEpochs: two brokers, each with its empty tagged fields
                + struct.pack(">iq", 1, 100) + b"\x00"
                + struct.pack(">iq", 2, 101) + b"\x00"
                + struct.pack(">bi", 0, 9)  # leader recovery state, partition epoch
                + b"\x00"  # partition tagged fields
                + b"\x00"  # topic tagged fields
                + b"\x00")  # request tagged fields
    assert bytes(request.encode(version=3)) == expected
    decoded = AlterPartitionRequest.decode(expected, version=3)
    state = decoded.topics[0].partitions[0]
    assert decoded.topics[0].topic_id == ORDERS_ID
    assert [(b.broker_id, b.broker_epoch) for b in state.new_isr_with_epochs] == [(1, 100), (2, 101)]
    assert state.partition_epoch == 9


def test_leader_and_isr_v7_request_bytes():
    cls = LeaderAndIsrRequest
    topic_state = cls.LeaderAndIsrTopicState
    request = cls(
        controller_id=3000, is_k_raft_controller=True, controller_epoch=1, broker_epoch=55, request_type=2,
        topic_states=[topic_state(topic_name="orders", topic_id=ORDERS_ID, partition_states=[
            topic_state.LeaderAndIsrPartitionState(
                partition_index=0, controller_epoch=1, leader=1, leader_epoch=4, isr=[1, 2], partition_epoch=7,
                replicas=[1, 2, 3], adding_replicas=[3], removing_replicas=[], is_new=False,
                leader_recovery_state=0)])],
        live_leaders=[cls.LeaderAndIsrLiveLeader(broker_id=1, host_name="127.0.0.1", port=9092)])
    expected = (struct.pack(">i?iqb", 3000, True, 1, 55, 2)
                + _uvarint(2) + _compact_string("orders") + ORDERS_ID.bytes  # one topic state
                + _uvarint(2) + struct.pack(">iiii", 0, 1, 1, 4)  # one partition: index, ctrl epoch, leader, epoch
                + _compact_int32s([1, 2])  # isr
                + struct.pack(">i", 7)  # partition epoch
                + _compact_int32s([1, 2, 3]) + _compact_int32s([3]) + _compact_int32s([])
                + struct.pack(">?b", False, 0)  # is new, leader recovery state
                + b"\x00"  # partition state tagged fields
                + b"\x00"  # topic state tagged fields
                + _uvarint(2) + struct.pack(">i", 1) + _compact_string("127.0.0.1") + struct.pack(">i", 9092)
                + b"\x00"  # live leader tagged fields
                + b"\x00")  # request tagged fields
    assert bytes(request.encode(version=7)) == expected
    decoded = cls.decode(expected, version=7)
    assert decoded.is_k_raft_controller is True and decoded.request_type == 2
    state = decoded.topic_states[0].partition_states[0]
    assert (state.isr, state.replicas, state.adding_replicas, state.partition_epoch) == ([1, 2], [1, 2, 3], [3], 7)
    assert decoded.live_leaders[0].host_name == "127.0.0.1"


def test_update_metadata_v8_request_type_is_tag_zero():
    request = UpdateMetadataRequest(controller_id=1, request_type=2, controller_epoch=3, broker_epoch=42,
                                    topic_states=[], live_brokers=[])
    expected = (struct.pack(">i?iq", 1, False, 3, 42) + _uvarint(1) + _uvarint(1)
                + _uvarint(1) + _uvarint(0) + _uvarint(1) + b"\x02")  # tagged: one field, tag 0, 1 byte, value 2
    assert bytes(request.encode(version=8)) == expected
    assert UpdateMetadataRequest.decode(expected, version=8).request_type == 2
    # version 7 has no request type at all: empty tagged fields
    assert bytes(request.encode(version=7)).endswith(_uvarint(1) + _uvarint(1) + b"\x00")


def test_leader_and_isr_v0_request_uses_classic_encoding():
    cls = LeaderAndIsrRequest
    request = cls(controller_id=1, controller_epoch=2, ungrouped_partition_states=[
        cls.LeaderAndIsrPartitionState(topic_name="t", partition_index=0, controller_epoch=2, leader=1,
                                       leader_epoch=3, isr=[1], partition_epoch=4, replicas=[1])],
        live_leaders=[])
    expected = (struct.pack(">ii", 1, 2) + struct.pack(">i", 1) + struct.pack(">h", 1) + b"t"
                + struct.pack(">iiii", 0, 2, 1, 3) + struct.pack(">ii", 1, 1) + struct.pack(">i", 4)
                + struct.pack(">ii", 1, 1) + struct.pack(">i", 0))
    assert bytes(request.encode(version=0)) == expected


def test_broker_registration_nullable_rack():
    request = _broker_registration_request()
    decoded = BrokerRegistrationRequest.decode(request.encode(version=4), version=4)
    assert decoded.rack is None
    request.rack = "rack-a"
    assert BrokerRegistrationRequest.decode(request.encode(version=4), version=4).rack == "rack-a"
    assert [listener.port for listener in decoded.listeners] == [9093, 65001]
