"""ApiVersions (v0-4): the truth about which API versions this broker serves.

Each API is advertised with the range its handler accepts (its schema's versions), or a module's VERSIONS range
where Kafka advertises otherwise: more than it serves (Produce), or less than the schema has (InitProducerId v6,
still unstable in Kafka 4.1; WriteTxnMarkers v2, Kafka 4.2; DescribeLogDirs v0). A request newer than v4 is
answered in v0 with UNSUPPORTED_VERSION and the list, so the client can retry with a version both sides know
(KIP-511); that answer is made by kafka_apis, without a handler. v1+ carries the throttle time; v3+ is flexible and
brings the client's software name and version, which are read past, and answers with the features this broker
supports and the levels its cluster has finalized (KIP-584; `transaction.version` 2, which moves the Java 4.x
producer to KIP-890's second transaction protocol). As Kafka's, a v3 answer leaves out the supported features whose
lowest level is 0 (`transaction.version`), which older clients fail to read (KAFKA-17492); the finalized levels are
in every v3+ answer.
"""
from __future__ import annotations

from kafka.protocol.api_message import ApiMessage
from kafka.protocol.metadata.api_versions import ApiVersionsRequest

from minikafka.broker.metadata.features import FINALIZED_FEATURES, FINALIZED_FEATURES_EPOCH, SUPPORTED_FEATURES
from minikafka.broker.server.broker_services import RequestContext
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.errors import ErrorCode

FEATURES_VERSION = 3
LEVEL_0_FEATURES_VERSION = 4


async def handle_api_versions(ctx: RequestContext, request: ApiVersionsRequest) -> ApiMessage:
    api_keys = ctx.services.api_versions.api_version_list(ctx.version)
    if ctx.version < FEATURES_VERSION:
        return ctx.response(error_code=ErrorCode.NONE, api_keys=api_keys, throttle_time_ms=0)
    R = ctx.response_class
    return ctx.response(
        error_code=ErrorCode.NONE, api_keys=api_keys, throttle_time_ms=0,
        supported_features=[R.SupportedFeatureKey(name=name, min_version=r.min_version, max_version=r.max_version)
                            for name, r in SUPPORTED_FEATURES.items()
                            if r.min_version != 0 or ctx.version >= LEVEL_0_FEATURES_VERSION],
        finalized_features_epoch=FINALIZED_FEATURES_EPOCH,
        finalized_features=[R.FinalizedFeatureKey(name=name, max_version_level=level, min_version_level=level)
                            for name, level in FINALIZED_FEATURES.items()])


HANDLERS = {ApiKey.API_VERSIONS: handle_api_versions}
