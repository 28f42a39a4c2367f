"""DescribeCluster (v0-2): the brokers and controller of this cluster, as the Java AdminClient asks for them.

Flexible from v0. The brokers are the live (unfenced) ones with an endpoint on the listener the request came in on;
v2 may ask for fenced brokers too (KIP-1073), each then flagged. The controller id is a random live broker, as a
KRaft broker answers: clients reach the controller through brokers (KIP-590); a ZooKeeper-mode broker names the
current controller. v1+ names an endpoint type
(KIP-919): brokers are described, a request for controller endpoints is UNSUPPORTED_ENDPOINT_TYPE. Cluster
authorized operations are answered when asked for, as Kafka's brokers answer them: those the principal may do on the
cluster if it may DESCRIBE it, else none (without an authorizer, all of them). Nothing else is authorized: a broker
describes the cluster to anyone (only Kafka's controllers want ALTER on it).
"""
from __future__ import annotations

from kafka.protocol.admin.cluster import DescribeClusterRequest
from kafka.protocol.api_message import ApiMessage

from minikafka.broker.server.broker_services import RequestContext
from minikafka.broker.server.handlers.common import NOT_REQUESTED, cluster_authorized_operations
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.errors import ErrorCode

BROKER_ENDPOINT_TYPE = 1
INCLUDE_FENCED_MIN_VERSION = 2


async def handle_describe_cluster(ctx: RequestContext, request: DescribeClusterRequest) -> ApiMessage:
    R = ctx.response_class
    cache = ctx.services.metadata_cache
    if ctx.version >= 1 and request.endpoint_type != BROKER_ENDPOINT_TYPE:
        return ctx.response(throttle_time_ms=0, error_code=ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
                            error_message="only broker endpoints are served", endpoint_type=request.endpoint_type,
                            cluster_id=cache.cluster_id, controller_id=-1, brokers=[],
                            authorized_operations=NOT_REQUESTED)
    listener = ctx.conn.listener
    with_fenced = ctx.version >= INCLUDE_FENCED_MIN_VERSION and request.include_fenced_brokers
    brokers = []
    for broker_id, info in sorted(cache.image.brokers.items()):
        endpoint = info.endpoint(listener)
        if endpoint is not None and (with_fenced or not info.fenced):
            brokers.append(R.DescribeClusterBroker(broker_id=broker_id, host=endpoint.host, port=endpoint.port,
                                                   rack=info.rack, is_fenced=info.fenced))
    ops = NOT_REQUESTED
    if request.include_cluster_authorized_operations:
        ops = cluster_authorized_operations(ctx)
    return ctx.response(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
                        endpoint_type=BROKER_ENDPOINT_TYPE, cluster_id=cache.cluster_id,
                        controller_id=cache.controller_id(), brokers=brokers, authorized_operations=ops)


HANDLERS = {ApiKey.DESCRIBE_CLUSTER: handle_describe_cluster}
