"""ApiVersions (v0-4): the truth about which API versions this broker serves; UpdateFeatures (v0-2), which changes
the finalized feature levels it advertises.

Each API is advertised with the range its handler accepts (its schema's versions), or a module's VERSIONS range
where Kafka advertises otherwise: more than it serves (Produce), or less than the schema has (InitProducerId v6,
still unstable in Kafka 4.1; WriteTxnMarkers v2, Kafka 4.2; DescribeLogDirs v0). A request newer than v4 is
answered in v0 with UNSUPPORTED_VERSION and the list, so the client can retry with a version both sides know
(KIP-511); that answer is made by kafka_apis, without a handler. v1+ carries the throttle time; v3+ is flexible and
brings the client's software name and version, which are read past, and answers with the features this broker
supports and the levels its cluster has finalized (KIP-584; `transaction.version` 2, which moves the Java 4.x
producer to KIP-890's second transaction protocol), with the epoch of those levels; a feature at level 0 is off and
not listed. As Kafka's, a v3 answer leaves out the supported features whose lowest level is 0 (`transaction.version`),
which older clients fail to read (KAFKA-17492); the finalized levels are in every v3+ answer.

UpdateFeatures (kafka-features.sh upgrade / downgrade) needs ALTER on the cluster (CLUSTER_AUTHORIZATION_FAILED) and
is forwarded to the controller, which applies all the updates or none (INVALID_UPDATE_VERSION with Kafka's message
for a level out of the supported range or against the upgrade type; v0's AllowDowngrade is a safe downgrade); v0-1
answer per-feature results, v2 only the top-level error. It is answered once this broker has the new levels.
"""
from __future__ import annotations

from kafka.protocol.api_message import ApiMessage
from kafka.protocol.metadata.api_versions import ApiVersionsRequest

from minikafka.broker.metadata.features import SUPPORTED_FEATURES, finalized_levels
from minikafka.broker.security.acl import AclOperation
from minikafka.broker.server.broker_services import RequestContext
from minikafka.broker.server.handlers.common import forward, request_not_authorized
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.errors import ErrorCode

FEATURES_VERSION = 3
LEVEL_0_FEATURES_VERSION = 4


async def handle_api_versions(ctx: RequestContext, request: ApiVersionsRequest) -> ApiMessage:
    api_keys = ctx.services.api_versions.api_version_list(ctx.version)
    if ctx.version < FEATURES_VERSION:
        return ctx.response(error_code=ErrorCode.NONE, api_keys=api_keys, throttle_time_ms=0)
    R = ctx.response_class
    image = ctx.services.metadata_cache.image
    return ctx.response(
        error_code=ErrorCode.NONE, api_keys=api_keys, throttle_time_ms=0,
        supported_features=[R.SupportedFeatureKey(name=name, min_version=r.min_version, max_version=r.max_version)
                            for name, r in SUPPORTED_FEATURES.items()
                            if r.min_version != 0 or ctx.version >= LEVEL_0_FEATURES_VERSION],
        finalized_features_epoch=image.features_epoch,
        # As Kafka's: a feature at level 0 is off, and not listed.
        finalized_features=[R.FinalizedFeatureKey(name=name, max_version_level=level, min_version_level=level)
                            for name, level in finalized_levels(image.features).items() if level > 0])


async def handle_update_features(ctx: RequestContext, request) -> ApiMessage:
    R = ctx.response_class

    def failed(code: ErrorCode, message: str) -> ApiMessage:
        results = [R.UpdatableFeatureResult(feature=u.feature, error_code=code, error_message=message)
                   for u in request.feature_updates] if ctx.version <= 1 else []
        return ctx.response(throttle_time_ms=0, error_code=code, error_message=message, results=results)

    if not ctx.authorize_cluster(AclOperation.ALTER):
        return failed(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, request_not_authorized(ctx))
    response = await forward(ctx, request, failed)
    if response.error_code == ErrorCode.NONE:
        await ctx.services.metadata.features_altered()
    return response


HANDLERS = {ApiKey.API_VERSIONS: handle_api_versions, ApiKey.UPDATE_FEATURES: handle_update_features}
