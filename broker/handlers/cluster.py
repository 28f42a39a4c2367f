"""DescribeCluster (v0-2): the brokers and controller of this cluster, as the Java AdminClient asks for them.

Flexible from v0. v1+ names an endpoint type (KIP-919): brokers are described, a request for controller endpoints
is UNSUPPORTED_ENDPOINT_TYPE. v2 may ask for fenced brokers too (KIP-1073); none is ever fenced, so every broker is
listed with is_fenced false. Cluster authorized operations are answered when asked for: without authorization,
all of them.
"""
from __future__ import annotations

from kafka.protocol.admin.cluster import DescribeClusterRequest
from kafka.protocol.api_message import ApiMessage

from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.errors import ErrorCode

from ..kafka_apis import RequestContext
from .common import CLUSTER_OPERATIONS, NOT_REQUESTED

BROKER_ENDPOINT_TYPE = 1


async def handle_describe_cluster(ctx: RequestContext, request: DescribeClusterRequest) -> ApiMessage:
    R = ctx.response_class
    broker = ctx.broker
    if ctx.version >= 1 and request.endpoint_type != BROKER_ENDPOINT_TYPE:
        return ctx.response(throttle_time_ms=0, error_code=ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
                            error_message="only broker endpoints are served", endpoint_type=request.endpoint_type,
                            cluster_id=broker.controller.cluster_id, controller_id=-1, brokers=[],
                            authorized_operations=NOT_REQUESTED)
    brokers = [R.DescribeClusterBroker(broker_id=e.node_id, host=e.host, port=e.port, rack=e.rack, is_fenced=False)
               for e in broker.endpoints]
    ops = CLUSTER_OPERATIONS if request.include_cluster_authorized_operations else NOT_REQUESTED
    return ctx.response(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
                        endpoint_type=BROKER_ENDPOINT_TYPE, cluster_id=broker.controller.cluster_id,
                        controller_id=broker.node_id, brokers=brokers, authorized_operations=ops)


HANDLERS = {ApiKey.DESCRIBE_CLUSTER: handle_describe_cluster}
