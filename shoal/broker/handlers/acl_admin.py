"""CreateAcls, DescribeAcls and DeleteAcls: the cluster's ACLs over the wire (kafka-acls.sh, AdminClient).

With no authorizer configured Kafka answers all three with SECURITY_DISABLED; otherwise they
need ALTER (create, delete) or DESCRIBE (describe) on the cluster. ACLs live in the cluster
metadata log (`ClusterMetadata.create_acls`/`delete_acls`); validation and matching are
security.authorizer's. Version 0 knows only LITERAL patterns: its requests decode with the
LITERAL default, so it never selects, creates or returns another pattern type.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shoal.broker.apis import Access, handles
from shoal.broker.authorize import allowed, authorizer
from shoal.broker.security.authorizer import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourcePatternFilter,
    from_code,
)
from shoal.protocol.acl_operations import AclOperation, ResourceType
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.create_acls_response import CreateAclsResponse
from shoal.protocol.generated.delete_acls_response import DeleteAclsResponse
from shoal.protocol.generated.describe_acls_response import DescribeAclsResponse

if TYPE_CHECKING:
    from shoal.broker.node import RequestContext
    from shoal.protocol.generated.create_acls_request import CreateAclsRequest
    from shoal.protocol.generated.delete_acls_request import DeleteAclsRequest
    from shoal.protocol.generated.describe_acls_request import DescribeAclsRequest

# Kafka's messages (AclApis) and the error's default message for a denied request
NO_AUTHORIZER = "No Authorizer is configured."
NO_AUTHORIZER_DESCRIBE = "No Authorizer is configured on the broker"
CLUSTER_DENIED = "Cluster authorization failed."


def _filter(resource_type: int, name: str | None, pattern_type: int, principal: str | None, host: str | None,
            operation: int, permission: int) -> AclBindingFilter:
    return AclBindingFilter(
        ResourcePatternFilter(from_code(ResourceType, resource_type), name, from_code(PatternType, pattern_type)),
        AccessControlEntryFilter(principal, host, from_code(AclOperation, operation),
                                 from_code(PermissionType, permission)))


@handles(ApiKey.CREATE_ACLS, access=(Access(ResourceType.CLUSTER, AclOperation.ALTER),))
async def create_acls(ctx: RequestContext, req: CreateAclsRequest) -> CreateAclsResponse:
    def every(code: ErrorCode, message: str) -> CreateAclsResponse:
        return CreateAclsResponse(throttle_time_ms=0, results=[
            CreateAclsResponse.AclCreationResult(error_code=code, error_message=message) for _ in req.creations])

    if not allowed(ctx, AclOperation.ALTER):
        return every(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, CLUSTER_DENIED)
    if authorizer(ctx) is None:
        return every(ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
    bindings = [AclBinding(
        ResourcePattern(from_code(ResourceType, c.resource_type), c.resource_name,
                        from_code(PatternType, c.resource_pattern_type)),
        AccessControlEntry(c.principal, c.host, from_code(AclOperation, c.operation),
                           from_code(PermissionType, c.permission_type))) for c in req.creations]
    errors = ctx.broker.metadata.create_acls(bindings)
    return CreateAclsResponse(throttle_time_ms=0, results=[
        CreateAclsResponse.AclCreationResult(error_code=ErrorCode.NONE, error_message="") if e is None else
        CreateAclsResponse.AclCreationResult(error_code=e.code, error_message=e.message) for e in errors])


@handles(ApiKey.DESCRIBE_ACLS, access=(Access(ResourceType.CLUSTER, AclOperation.DESCRIBE),))
async def describe_acls(ctx: RequestContext, req: DescribeAclsRequest) -> DescribeAclsResponse:
    if not allowed(ctx, AclOperation.DESCRIBE):
        return DescribeAclsResponse(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                    error_message=CLUSTER_DENIED, resources=[])
    if authorizer(ctx) is None:
        return DescribeAclsResponse(throttle_time_ms=0, error_code=ErrorCode.SECURITY_DISABLED,
                                    error_message=NO_AUTHORIZER_DESCRIBE, resources=[])
    acl_filter = _filter(req.resource_type_filter, req.resource_name_filter, req.pattern_type_filter,
                         req.principal_filter, req.host_filter, req.operation, req.permission_type)
    by_pattern: dict[ResourcePattern, list[DescribeAclsResponse.AclDescription]] = {}
    for b in ctx.broker.metadata.acls.describe(acl_filter):
        by_pattern.setdefault(b.pattern, []).append(DescribeAclsResponse.AclDescription(
            principal=b.entry.principal, host=b.entry.host, operation=b.entry.operation,
            permission_type=b.entry.permission))
    return DescribeAclsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message="", resources=[
        DescribeAclsResponse.DescribeAclsResource(resource_type=p.resource_type, resource_name=p.name,
                                                  pattern_type=p.pattern_type, acls=acls)
        for p, acls in by_pattern.items()])


@handles(ApiKey.DELETE_ACLS, access=(Access(ResourceType.CLUSTER, AclOperation.ALTER),))
async def delete_acls(ctx: RequestContext, req: DeleteAclsRequest) -> DeleteAclsResponse:
    def every(code: ErrorCode, message: str) -> DeleteAclsResponse:
        return DeleteAclsResponse(throttle_time_ms=0, filter_results=[
            DeleteAclsResponse.DeleteAclsFilterResult(error_code=code, error_message=message, matching_acls=[])
            for _ in req.filters])

    if not allowed(ctx, AclOperation.ALTER):
        return every(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, CLUSTER_DENIED)
    if authorizer(ctx) is None:
        return every(ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
    filters = [_filter(f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter, f.principal_filter,
                       f.host_filter, f.operation, f.permission_type) for f in req.filters]
    results = []
    for r in ctx.broker.metadata.delete_acls(filters):  # a filter in error matched nothing
        code, message = (r.error.code, r.error.message) if r.error is not None else (ErrorCode.NONE, None)
        results.append(DeleteAclsResponse.DeleteAclsFilterResult(
            error_code=code, error_message=message, matching_acls=[
                DeleteAclsResponse.DeleteAclsMatchingAcl(
                    error_code=ErrorCode.NONE, error_message=None, resource_type=b.pattern.resource_type,
                    resource_name=b.pattern.name, pattern_type=b.pattern.pattern_type, principal=b.entry.principal,
                    host=b.entry.host, operation=b.entry.operation, permission_type=b.entry.permission)
                for b in r.deleted]))
    return DeleteAclsResponse(throttle_time_ms=0, filter_results=results)
