"""A controller's request refused as a whole: its API's response with one error code in every entry, as Kafka's
error responses carry it (a controller that is not the active one, a ZooKeeper write that failed, a principal
without CLUSTER_ACTION)."""
from __future__ import annotations

import uuid
from typing import Any

from kafka.protocol.api_message import ApiMessage

from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.codec import SCHEMAS
from minikafka.protocol.control_plane import CONTROL_PLANE_SCHEMAS
from minikafka.protocol.errors import ErrorCode

ZERO_UUID = uuid.UUID(int=0)


def error_response(request: Any, version: int, code: ErrorCode) -> ApiMessage:
    """`request` refused as a whole with `code`, in its API's response."""
    key = request.API_KEY
    table = CONTROL_PLANE_SCHEMAS if key in CONTROL_PLANE_SCHEMAS else SCHEMAS
    R = table[key].response[version]
    response: ApiMessage
    if key == ApiKey.CONTROLLED_SHUTDOWN:
        response = R(error_code=code, remaining_partitions=[])
    elif key == ApiKey.ALTER_PARTITION:
        response = R(throttle_time_ms=0, error_code=code, topics=[])
    elif key == ApiKey.ALLOCATE_PRODUCER_IDS:
        response = R(throttle_time_ms=0, error_code=code, producer_id_start=-1, producer_id_len=0)
    elif key == ApiKey.ASSIGN_REPLICAS_TO_DIRS:
        response = R(throttle_time_ms=0, error_code=code, directories=[])
    elif key == ApiKey.CREATE_TOPICS:
        response = R(throttle_time_ms=0, topics=[R.CreatableTopicResult(
            name=t.name, topic_id=ZERO_UUID, error_code=code, error_message=None, num_partitions=-1,
            replication_factor=-1, configs=None) for t in request.topics])
    elif key == ApiKey.DELETE_TOPICS:
        targets = ([(t.name, t.topic_id) for t in request.topics] if version >= 6
                   else [(name, None) for name in request.topic_names])
        response = R(throttle_time_ms=0, responses=[R.DeletableTopicResult(
            name=name, topic_id=topic_id or ZERO_UUID, error_code=code, error_message=None)
            for name, topic_id in targets])
    elif key == ApiKey.CREATE_PARTITIONS:
        response = R(throttle_time_ms=0, results=[R.CreatePartitionsTopicResult(
            name=t.name, error_code=code, error_message=None) for t in request.topics])
    elif key in (ApiKey.INCREMENTAL_ALTER_CONFIGS, ApiKey.ALTER_CONFIGS):
        response = R(throttle_time_ms=0, responses=[R.AlterConfigsResourceResponse(
            error_code=code, error_message=None, resource_type=r.resource_type, resource_name=r.resource_name)
            for r in request.resources])
    elif key == ApiKey.ELECT_LEADERS:
        wanted = request.topic_partitions or []
        response = R(throttle_time_ms=0, error_code=code, replica_election_results=[
            R.ReplicaElectionResult(topic=t.topic, partition_result=[
                R.ReplicaElectionResult.PartitionResult(partition_id=index, error_code=code, error_message=None)
                for index in t.partitions]) for t in wanted])
    elif key == ApiKey.ALTER_PARTITION_REASSIGNMENTS:
        RP = R.ReassignableTopicResponse.ReassignablePartitionResponse
        response = R(throttle_time_ms=0, allow_replication_factor_change=version < 1 or
                     request.allow_replication_factor_change, error_code=code, error_message=None, responses=[
                         R.ReassignableTopicResponse(name=t.name, partitions=[
                             RP(partition_index=p.partition_index, error_code=code, error_message=None)
                             for p in t.partitions]) for t in request.topics])
    elif key == ApiKey.LIST_PARTITION_REASSIGNMENTS:
        response = R(throttle_time_ms=0, error_code=code, error_message=None, topics=[])
    elif key == ApiKey.ALTER_CLIENT_QUOTAS:
        response = R(throttle_time_ms=0, entries=[R.EntryData(
            error_code=code, error_message=None,
            entity=[R.EntryData.EntityData(entity_type=e.entity_type, entity_name=e.entity_name) for e in entry.entity])
            for entry in request.entries])
    elif key == ApiKey.ALTER_USER_SCRAM_CREDENTIALS:
        response = R(throttle_time_ms=0, results=[
            R.AlterUserScramCredentialsResult(user=user, error_code=code, error_message=None)
            for user in sorted({e.name for e in [*request.deletions, *request.upsertions]})])
    elif key == ApiKey.UPDATE_FEATURES:
        response = R(throttle_time_ms=0, error_code=code, error_message=None, results=[
            R.UpdatableFeatureResult(feature=u.feature, error_code=code, error_message=None)
            for u in request.feature_updates] if version <= 1 else [])
    elif key == ApiKey.BROKER_REGISTRATION:
        response = R(throttle_time_ms=0, error_code=code, broker_epoch=-1)
    elif key == ApiKey.BROKER_HEARTBEAT:
        response = R(throttle_time_ms=0, error_code=code, is_caught_up=False, is_fenced=True,
                     should_shut_down=False)
    elif key == ApiKey.FETCH:
        response = R(throttle_time_ms=0, error_code=code, session_id=0, responses=[], node_endpoints=[])
    elif key == ApiKey.DESCRIBE_CLUSTER:
        response = R(throttle_time_ms=0, error_code=code, error_message=None, endpoint_type=2, cluster_id="",
                     controller_id=-1, brokers=[], authorized_operations=None)
    elif key == ApiKey.CREATE_ACLS:
        response = R(throttle_time_ms=0, results=[R.AclCreationResult(error_code=code, error_message=None)
                                                  for _ in request.creations])
    elif key == ApiKey.DELETE_ACLS:
        response = R(throttle_time_ms=0, filter_results=[
            R.DeleteAclsFilterResult(error_code=code, error_message=None, matching_acls=[]) for _ in request.filters])
    else:
        raise ValueError(f"no error response for {type(request).__name__}")
    return response
