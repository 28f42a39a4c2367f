"""DescribeAcls, CreateAcls and DeleteAcls (v1-3, flexible from v2), as Kafka's AclApis.

With no `authorizer.class.name` (Kafka's default) Kafka still advertises the ACL APIs and answers each with
SECURITY_DISABLED, "No Authorizer is configured.": for the whole DescribeAcls, for each creation and for each
deletion filter; kafka-acls.sh then prints SecurityDisabledException with that message.

With the authorizer, DescribeAcls needs DESCRIBE on the cluster and is answered from this broker's own ACLs, grouped
by resource pattern; CreateAcls and DeleteAcls need ALTER on the cluster (CLUSTER_AUTHORIZATION_FAILED for every
entry otherwise) and go to the controller, which validates and commits them (acl_control); this broker reads them
back before it answers, so its next request is authorized by them.
"""
from __future__ import annotations

from collections.abc import Callable

from kafka.protocol.api_message import ApiMessage

from minikafka.broker.security.acl import AclOperation, PatternType, ResourceType, acl_filter_of
from minikafka.broker.server.broker_services import RequestContext
from minikafka.broker.server.handlers.common import forward
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.errors import DEFAULT_MESSAGES, ErrorCode

NO_AUTHORIZER = "No Authorizer is configured."


def _refusal(ctx: RequestContext, operation: AclOperation) -> tuple[ErrorCode, str] | None:
    """SECURITY_DISABLED without an authorizer, CLUSTER_AUTHORIZATION_FAILED without `operation` on the cluster."""
    if ctx.services.authorizer is None:
        return ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER
    if not ctx.authorize_cluster(operation):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, DEFAULT_MESSAGES[ErrorCode.CLUSTER_AUTHORIZATION_FAILED]
    return None


async def handle_describe_acls(ctx: RequestContext, request: ApiMessage) -> ApiMessage:
    refused = _refusal(ctx, AclOperation.DESCRIBE)
    if refused is not None:
        return ctx.response(throttle_time_ms=0, error_code=refused[0], error_message=refused[1], resources=[])
    acl_filter = acl_filter_of(request)
    if acl_filter.is_unknown():
        return ctx.response(throttle_time_ms=0, error_code=ErrorCode.INVALID_REQUEST,
                            error_message=f"DescribeAclsRequest contains UNKNOWN elements: {request}", resources=[])
    assert ctx.services.authorizer is not None
    R = ctx.response_class
    by_pattern: dict[tuple[ResourceType, str, PatternType], list[ApiMessage]] = {}
    for acl in ctx.services.authorizer.acls(acl_filter):
        by_pattern.setdefault((acl.resource_type, acl.resource_name, acl.pattern_type), []).append(
            R.DescribeAclsResource.AclDescription(principal=acl.principal, host=acl.host, operation=acl.operation,
                                                  permission_type=acl.permission_type))
    return ctx.response(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, resources=[
        R.DescribeAclsResource(resource_type=resource_type, resource_name=name, pattern_type=pattern_type, acls=acls)
        for (resource_type, name, pattern_type), acls in by_pattern.items()])


async def _forwarded(ctx: RequestContext, request: ApiMessage,
                     failed: Callable[[ErrorCode, str], ApiMessage]) -> ApiMessage:
    """CreateAcls / DeleteAcls: refused here, or the controller's answer once this broker has read the change."""
    refused = _refusal(ctx, AclOperation.ALTER)
    if refused is not None:
        return failed(*refused)
    response = await forward(ctx, request, failed)
    await ctx.services.metadata.acls_altered()
    return response


async def handle_create_acls(ctx: RequestContext, request: ApiMessage) -> ApiMessage:
    R = ctx.response_class
    return await _forwarded(ctx, request, lambda code, message: ctx.response(throttle_time_ms=0, results=[
        R.AclCreationResult(error_code=code, error_message=message) for _ in request.creations]))


async def handle_delete_acls(ctx: RequestContext, request: ApiMessage) -> ApiMessage:
    R = ctx.response_class
    return await _forwarded(ctx, request, lambda code, message: ctx.response(throttle_time_ms=0, filter_results=[
        R.DeleteAclsFilterResult(error_code=code, error_message=message, matching_acls=[])
        for _ in request.filters]))


HANDLERS = {ApiKey.DESCRIBE_ACLS: handle_describe_acls, ApiKey.CREATE_ACLS: handle_create_acls,
            ApiKey.DELETE_ACLS: handle_delete_acls}
