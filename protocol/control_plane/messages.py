"""Kafka's control-plane messages between controller and brokers, which kafka-python has no classes for.

Their specs are the JSON files beside this module, in the format of Kafka's own message specs, and load through
kafka-python's `ApiMessage`, so they encode and decode exactly as the client APIs do (flexible versions, tagged
fields, compact strings). They form a table of their own, apart from `codec.SCHEMAS`, so that ApiVersions never
advertises them to clients.
"""
from kafka.protocol.api_message import ApiMessage

from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.codec import ApiSchema

# `load_json` names the package holding a class's spec (kafka-python's metaclass reads it); mypy, to which
# kafka-python is untyped, checks the class keyword against object.__init_subclass__ instead.


class BrokerRegistrationRequest(ApiMessage, load_json=__package__):  # type: ignore[call-arg]
    pass


class BrokerRegistrationResponse(ApiMessage, load_json=__package__):  # type: ignore[call-arg]
    pass


class BrokerHeartbeatRequest(ApiMessage, load_json=__package__):  # type: ignore[call-arg]
    pass


class BrokerHeartbeatResponse(ApiMessage, load_json=__package__):  # type: ignore[call-arg]
    pass


class AlterPartitionRequest(ApiMessage, load_json=__package__):  # type: ignore[call-arg]
    pass


class AssignReplicasToDirsRequest(ApiMessage, load_json=__package__):  # type: ignore[call-arg]
    pass


class AssignReplicasToDirsResponse(ApiMessage, load_json=__package__):  # type: ignore[call-arg]
    pass


class AlterPartitionResponse(ApiMessage, load_json=__package__):  # type: ignore[call-arg]
    pass


class LeaderAndIsrRequest(ApiMessage, load_json=__package__):  # type: ignore[call-arg]
    pass


class LeaderAndIsrResponse(ApiMessage, load_json=__package__):  # type: ignore[call-arg]
    pass


class UpdateMetadataRequest(ApiMessage, load_json=__package__):  # type: ignore[call-arg]
    pass


class UpdateMetadataResponse(ApiMessage, load_json=__package__):  # type: ignore[call-arg]
    pass


class StopReplicaRequest(ApiMessage, load_json=__package__):  # type: ignore[call-arg]
    pass


class StopReplicaResponse(ApiMessage, load_json=__package__):  # type: ignore[call-arg]
    pass


class ControlledShutdownRequest(ApiMessage, load_json=__package__):  # type: ignore[call-arg]
    pass


class ControlledShutdownResponse(ApiMessage, load_json=__package__):  # type: ignore[call-arg]
    pass


class AllocateProducerIdsRequest(ApiMessage, load_json=__package__):  # type: ignore[call-arg]
    pass


class AllocateProducerIdsResponse(ApiMessage, load_json=__package__):  # type: ignore[call-arg]
    pass


def _schema(request: type[ApiMessage], response: type[ApiMessage], min_version: int | None = None) -> ApiSchema:
    lo, hi = request.valid_versions
    return ApiSchema(request, response, lo if min_version is None else min_version, hi)


CONTROL_PLANE_SCHEMAS: dict[int, ApiSchema] = {
    ApiKey.BROKER_REGISTRATION: _schema(BrokerRegistrationRequest, BrokerRegistrationResponse),
    ApiKey.BROKER_HEARTBEAT: _schema(BrokerHeartbeatRequest, BrokerHeartbeatResponse),
    ApiKey.ALTER_PARTITION: _schema(AlterPartitionRequest, AlterPartitionResponse),
    ApiKey.LEADER_AND_ISR: _schema(LeaderAndIsrRequest, LeaderAndIsrResponse),
    ApiKey.UPDATE_METADATA: _schema(UpdateMetadataRequest, UpdateMetadataResponse),
    ApiKey.STOP_REPLICA: _schema(StopReplicaRequest, StopReplicaResponse),
    # v0 travels with request header v0, which has no client id and which RequestHeader.parse does not read;
    # Kafka brokers have sent v1 or later since 0.9, so v0 is answered as an unsupported version.
    ApiKey.CONTROLLED_SHUTDOWN: _schema(ControlledShutdownRequest, ControlledShutdownResponse, min_version=1),
    ApiKey.ALLOCATE_PRODUCER_IDS: _schema(AllocateProducerIdsRequest, AllocateProducerIdsResponse),
    ApiKey.ASSIGN_REPLICAS_TO_DIRS: _schema(AssignReplicasToDirsRequest, AssignReplicasToDirsResponse),
}
