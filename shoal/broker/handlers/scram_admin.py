"""AlterUserScramCredentials and DescribeUserScramCredentials: SCRAM users over the wire.

What `kafka-configs.sh --entity-type users --alter --add-config 'SCRAM-SHA-256=[password=...]'`
and AdminClient's alterUserScramCredentials send. Credentials live in the cluster metadata log
(broker/security/credentials.py holds Kafka's validation and messages).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shoal.broker.apis import Access, handles
from shoal.broker.authorize import allowed
from shoal.broker.security.credentials import Upsertion
from shoal.protocol.acl_operations import AclOperation, ResourceType
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.alter_user_scram_credentials_response import AlterUserScramCredentialsResponse
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.describe_user_scram_credentials_response import (
    DescribeUserScramCredentialsResponse,
)

if TYPE_CHECKING:
    from shoal.broker.node import RequestContext
    from shoal.protocol.generated.alter_user_scram_credentials_request import AlterUserScramCredentialsRequest
    from shoal.protocol.generated.describe_user_scram_credentials_request import (
        DescribeUserScramCredentialsRequest,
    )

_Alter = AlterUserScramCredentialsResponse
_Describe = DescribeUserScramCredentialsResponse


@handles(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, access=(Access(ResourceType.CLUSTER, AclOperation.ALTER),))
async def alter_user_scram_credentials(ctx: RequestContext,
                                       req: AlterUserScramCredentialsRequest) -> AlterUserScramCredentialsResponse:
    if not allowed(ctx, AclOperation.ALTER):  # every user named fails
        users = dict.fromkeys([d.name for d in req.deletions] + [u.name for u in req.upsertions])
        return _Alter(throttle_time_ms=0, results=[_Alter.AlterUserScramCredentialsResult(
            user=u, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message=None) for u in users])
    deletions = [(d.name, d.mechanism) for d in req.deletions]
    upsertions = [Upsertion(u.name, u.mechanism, u.iterations, bytes(u.salt), bytes(u.salted_password))
                  for u in req.upsertions]
    results = ctx.broker.metadata.alter_scram(deletions, upsertions)
    return _Alter(throttle_time_ms=0, results=[
        _Alter.AlterUserScramCredentialsResult(user=r.user, error_code=r.error, error_message=r.message)
        for r in results])


@handles(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, access=(Access(ResourceType.CLUSTER, AclOperation.DESCRIBE),))
async def describe_user_scram_credentials(
        ctx: RequestContext, req: DescribeUserScramCredentialsRequest) -> DescribeUserScramCredentialsResponse:
    if not allowed(ctx, AclOperation.DESCRIBE):
        return _Describe(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message=None,
                         results=[])
    users = None if req.users is None else [u.name for u in req.users]
    results = [
        _Describe.DescribeUserScramCredentialsResult(
            user=r.user, error_code=r.error, error_message="" if r.message is None else r.message,  # as Kafka
            credential_infos=[_Describe.CredentialInfo(mechanism=m, iterations=i) for m, i in infos])
        for r, infos in ctx.broker.metadata.scram.describe(users)]
    return _Describe(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, results=results)
