"""DescribeAcls, CreateAcls and DeleteAcls (v1-3, flexible from v2) without an authorizer: SECURITY_DISABLED.

With no `authorizer.class.name` (Kafka's default, and minikafka's), Kafka still advertises the ACL APIs and answers
each with SECURITY_DISABLED, "No Authorizer is configured.": for the whole DescribeAcls, for each creation and for
each deletion filter. kafka-acls.sh then prints SecurityDisabledException with that message.
"""
from __future__ import annotations

from kafka.protocol.api_message import ApiMessage

from minikafka.broker.server.broker_services import RequestContext
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.errors import ErrorCode

NO_AUTHORIZER = "No Authorizer is configured."


async def handle_describe_acls(ctx: RequestContext, request: ApiMessage) -> ApiMessage:
    return ctx.response(throttle_time_ms=0, error_code=ErrorCode.SECURITY_DISABLED, error_message=NO_AUTHORIZER,
                        resources=[])


async def handle_create_acls(ctx: RequestContext, request: ApiMessage) -> ApiMessage:
    R = ctx.response_class
    return ctx.response(throttle_time_ms=0, results=[
        R.AclCreationResult(error_code=ErrorCode.SECURITY_DISABLED, error_message=NO_AUTHORIZER)
        for _ in request.creations])


async def handle_delete_acls(ctx: RequestContext, request: ApiMessage) -> ApiMessage:
    R = ctx.response_class
    return ctx.response(throttle_time_ms=0, filter_results=[
        R.DeleteAclsFilterResult(error_code=ErrorCode.SECURITY_DISABLED, error_message=NO_AUTHORIZER,
                                 matching_acls=[])
        for _ in request.filters])


HANDLERS = {ApiKey.DESCRIBE_ACLS: handle_describe_acls, ApiKey.CREATE_ACLS: handle_create_acls,
            ApiKey.DELETE_ACLS: handle_delete_acls}
