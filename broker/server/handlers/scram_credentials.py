"""DescribeUserScramCredentials (v0) and AlterUserScramCredentials (v0): users' SCRAM credentials (KIP-554).

DescribeUserScramCredentials is answered from this broker's own metadata image, as Kafka's brokers answer it: for
each user, the mechanism and iteration count of each of its credentials (never the salt or keys). No users (null or
an empty list) means every user that has a credential. A user named that has none is RESOURCE_NOT_FOUND ("Attempt
to describe a user credential that does not exist: <user>"), a user named twice DUPLICATE_RESOURCE, each in that
user's one result; the request as a whole does not fail.

AlterUserScramCredentials goes to the controller as it came (the client sends the salt and its salted password;
the controller derives the keys it keeps), and its answer, one result per user, is relayed; a ZooKeeper-mode broker
first reads the altered users back from ZooKeeper, so it describes them as altered at once (a KRaft broker has
caught up with the controller by then). A controller that cannot be reached fails every user named, as Kafka's
error response does.
Both are flexible from v0.

With an authorizer, as Kafka: Describe needs DESCRIBE on the cluster, else CLUSTER_AUTHORIZATION_FAILED (no message)
for the request and in a nameless result per user named; Alter needs ALTER on the cluster, else every user named
is CLUSTER_AUTHORIZATION_FAILED and nothing goes to the controller.
"""
from __future__ import annotations

from kafka.protocol.admin.users import AlterUserScramCredentialsRequest, DescribeUserScramCredentialsRequest
from kafka.protocol.api_message import ApiMessage

from minikafka.broker.metadata.scram_credentials import ScramCredentials
from minikafka.broker.security.acl import AclOperation
from minikafka.broker.server.broker_services import RequestContext
from minikafka.broker.server.handlers.common import forward, request_not_authorized
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.errors import ErrorCode, KafkaError

DESCRIBE_DUPLICATE_USER = "Cannot describe SCRAM credentials for the same user twice in a single request: "
DESCRIBE_USER_THAT_DOES_NOT_EXIST = "Attempt to describe a user credential that does not exist: "

# A user's result: the user, its error (None when described), and its credentials as (mechanism type, iterations).
UserDescription = tuple[str, KafkaError | None, list[tuple[int, int]]]


def describe_scram_credentials(credentials: ScramCredentials, users: list[str] | None) -> list[UserDescription]:
    """One result per distinct user: those named, in the order first named, or every user with a credential (by
    name) when none is; mechanisms in type order."""
    if not users:
        wanted = {user: False for user, _ in sorted(credentials)}
    else:
        wanted = {}
        for user in users:
            wanted[user] = user in wanted  # True: named more than once
    by_user: dict[str, list[tuple[int, int]]] = {}
    for (user, mechanism), credential in sorted(credentials.items()):
        by_user.setdefault(user, []).append((mechanism, credential.iterations))
    results: list[UserDescription] = []
    for user, duplicate in wanted.items():
        if duplicate:
            results.append((user, KafkaError(ErrorCode.DUPLICATE_RESOURCE, DESCRIBE_DUPLICATE_USER + user), []))
        elif user not in by_user:
            results.append((user, KafkaError(ErrorCode.RESOURCE_NOT_FOUND, DESCRIBE_USER_THAT_DOES_NOT_EXIST + user),
                            []))
        else:
            results.append((user, None, by_user[user]))
    return results


async def handle_describe_user_scram_credentials(ctx: RequestContext,
                                                 request: DescribeUserScramCredentialsRequest) -> ApiMessage:
    R = ctx.response_class
    if not ctx.authorize_cluster(AclOperation.DESCRIBE):
        # Kafka's error response: the users' results do not even name them.
        code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return ctx.response(throttle_time_ms=0, error_code=code, error_message=None, results=[
            R.DescribeUserScramCredentialsResult(user="", error_code=code, error_message=None, credential_infos=[])
            for _ in request.users or []])
    users = None if request.users is None else [u.name for u in request.users]
    found = describe_scram_credentials(ctx.services.metadata_cache.image.scram_credentials, users)
    return ctx.response(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, results=[
        R.DescribeUserScramCredentialsResult(
            user=user, error_code=error.code if error else ErrorCode.NONE,
            error_message=error.message if error else None,
            credential_infos=[R.DescribeUserScramCredentialsResult.CredentialInfo(mechanism=m, iterations=i)
                              for m, i in infos])
        for user, error, infos in found])


async def handle_alter_user_scram_credentials(ctx: RequestContext,
                                              request: AlterUserScramCredentialsRequest) -> ApiMessage:
    R = ctx.response_class

    def failed(code: ErrorCode, message: str) -> ApiMessage:
        users = sorted({d.name for d in request.deletions} | {u.name for u in request.upsertions})
        return ctx.response(throttle_time_ms=0, results=[
            R.AlterUserScramCredentialsResult(user=user, error_code=code, error_message=message) for user in users])

    if not ctx.authorize_cluster(AclOperation.ALTER):
        return failed(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, request_not_authorized(ctx))
    response = await forward(ctx, request, failed)
    await ctx.services.metadata.scram_credentials_altered(
        [r.user for r in response.results if r.error_code == ErrorCode.NONE])
    return response



HANDLERS = {ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: handle_describe_user_scram_credentials,
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS: handle_alter_user_scram_credentials}
